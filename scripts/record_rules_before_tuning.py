"""Record the rules' readings of a new dev part before any rule is tuned on it.

``scripts/fit_decision.py`` uses these readings (``eval/decision/<part>_rules_before_tuning.json``) as the rule
evidence for that part's reports, so the fitted decision learns how often a rule is right on reports it was not
written for. Run it once, right after ``split_realworld.py --split-collection``, before reading any answer:

    python scripts/record_rules_before_tuning.py dev_fresh4
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def record(part: str) -> Path:
    """Write the rules' reading (category, confidence, rule) of every report of ``part``; refuse to overwrite one."""
    from assistant.engine import Engine
    from assistant.settings import load_settings

    out = ROOT / "eval" / "decision" / f"{part}_rules_before_tuning.json"
    if out.exists():
        raise SystemExit(f"{out.name} exists: a part's readings are recorded once, before tuning")
    engine = Engine(load_settings(llm="none"))
    rows = [json.loads(line) for line in (ROOT / "eval" / "realworld" / f"{part}.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    answers = {}
    for row in rows:
        hit = engine.match(engine.parse(engine.read(row["error_text"]))).hit
        answers[row["id"]] = ({"category": hit.category, "confidence": hit.confidence, "rule": hit.rule}
                              if hit is not None else {"category": None, "confidence": None, "rule": None})
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    why = (f"The rules' answers on the {part} reports, produced by the rules of commit {commit} (before any rule was tuned on "
           "these reports). scripts/fit_decision.py uses them as the rule reading for these reports, so the decision learns "
           "how reliable a rule is on reports it has not seen.")
    out.write_text(json.dumps({"why": why, "commit": commit, "answers": answers}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: record_rules_before_tuning.py <dev part name>")
    print(record(sys.argv[1]))
