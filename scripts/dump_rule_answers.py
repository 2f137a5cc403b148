"""Dump what the rules answer on every real text we hold, to compare two versions of the rules.

Every rule example, every capture and every dev report goes through the rules (no retrieval); the
outcome, category, title, cause and fixes are written as JSON. Moving fix text from code into the
knowledge documents must leave this dump unchanged (``--compare`` prints the differences).

    python scripts/dump_rule_answers.py /tmp/before.json
    python scripts/dump_rule_answers.py /tmp/after.json --compare /tmp/before.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _texts() -> dict[str, str]:
    from assistant.eval.examples import example_text
    from assistant.rules.registry import all_rules

    out: dict[str, str] = {}
    for spec in all_rules():
        for ex in spec.examples:
            out[f"example:{ex.source}"] = example_text(ex.source)
    for path in sorted((ROOT / "eval" / "captured").rglob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        out[f"captured:{path.parent.name}/{path.stem}"] = data.get("stderr") or data.get("stdout_tail", "")
    for name in ("dev.jsonl", "dev_fresh.jsonl", "dev_fresh2.jsonl"):
        for line in (ROOT / "eval" / "realworld" / name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                out[f"dev:{row['id']}"] = row["error_text"]
    return out


def dump() -> dict[str, object]:
    from assistant.engine import Engine
    from assistant.settings import load_settings

    from assistant.compose.deterministic import compose_from_rule
    from assistant.differential import differentiate
    from assistant.types import Evidence

    engine = Engine(load_settings(llm="none"))
    result: dict[str, object] = {}
    for key, text in sorted(_texts().items()):
        failure = engine.parse(engine.read(text))
        hit = engine.match(failure).hit
        if hit is None:
            result[key] = None
            continue
        # The ranked causes too (the differential tables' causes, checks and fixes), without retrieval.
        ranked = differentiate(compose_from_rule(failure, Evidence(), hit, []), failure, [])
        result[key] = {
            "rule": hit.rule, "category": hit.category, "title": hit.title, "cause": hit.full_cause, "confidence": hit.confidence,
            "fixes": [[f.title, f.detail, f.code, list(f.sources)] for f in hit.fixes], "docs": list(hit.doc_ids),
            "hypotheses": [[h.id, h.cause, round(h.likelihood, 4), h.check, [[f.title, f.detail, f.code] for f in h.fixes]] for h in ranked.hypotheses],
        }
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--compare", type=Path, help="an earlier dump: print every difference, exit 1 if any")
    args = ap.parse_args()
    now = dump()
    args.out.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(now)} texts, {sum(v is not None for v in now.values())} answered -> {args.out}")
    if args.compare:
        before = json.loads(args.compare.read_text(encoding="utf-8"))
        diffs = [k for k in sorted(set(before) | set(now)) if before.get(k) != now.get(k)]
        for k in diffs:
            print(f"--- {k}\n  before: {json.dumps(before.get(k))[:600]}\n  after:  {json.dumps(now.get(k))[:600]}")
        print(f"{len(diffs)} differences")
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
