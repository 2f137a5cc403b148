"""Quick look at the rules on the real-world DEV split (never the test split): category per report, misses listed.

    python scripts/dev_check.py [category ...]          # every dev file (dev.jsonl, dev_fresh.jsonl, dev_fresh2.jsonl)

Rules only (no retrieval), so it runs in a second; ``torchhelp eval score`` is the real measurement.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from assistant import rules
from assistant.parse import parse_failure

ROOT = Path(__file__).resolve().parents[1]


def main(wanted: list[str]) -> None:
    rows = [json.loads(line) for name in ("dev.jsonl", "dev_fresh.jsonl", "dev_fresh2.jsonl") if (ROOT / "eval" / "realworld" / name).exists()
            for line in (ROOT / "eval" / "realworld" / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    if wanted:
        rows = [r for r in rows if r["category"] in wanted]
    right = 0
    for r in rows:
        found = rules.match(parse_failure(r["error_text"])).hit
        got = found.category if found else "unknown"
        fixes = " ".join(f"{f.title} {f.detail} {f.code or ''}" for f in (found.fixes if found else ())).lower()
        remedy = all(any(a.strip() in fixes for a in k.lower().split("|")) for k in r.get("fix_keywords", []))
        right += got == r["category"]
        if got != r["category"] or not remedy:
            print(f"{'CAT ' if got != r['category'] else 'FIX '} {r['id']}: want {r['category']} got {got} ({found.rule if found else '-'}); keywords {r.get('fix_keywords')}")
    print(f"{right}/{len(rows)} categories right")


if __name__ == "__main__":
    main(sys.argv[1:])
