"""Split the real-world reports once, at random with a fixed seed, into a dev part and a frozen test part.

Run once; ``--record test_fresh`` / ``--record dev_fresh`` later record reports collected after the split
(each into one side only). The result is recorded in ``eval/realworld/split.json`` by content hash so that the test
part can be checked for edits later (``tests/test_eval_split.py``). Rules and knowledge documents
may be tuned on the dev part only.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = 20261126
DEV_SHARE = 0.6


def row_hash(row: dict) -> str:
    """Hash of what a report is judged on: its text, its label and its remedy keywords."""
    key = json.dumps({"error_text": row["error_text"], "category": row["category"], "fix_keywords": row.get("fix_keywords", [])}, sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def record_part(part: str) -> None:
    """Record reports collected after the split (``test_fresh``: test only; ``dev_fresh``: dev only) by content hash."""
    folder = ROOT / "eval" / "realworld"
    record = json.loads((folder / "split.json").read_text())
    if part in record:
        raise SystemExit(f"{part} is already recorded")
    rows = [json.loads(line) for line in (folder / f"{part}.jsonl").read_text().splitlines() if line.strip()]
    record[part] = sorted(row_hash(r) for r in rows)
    (folder / "split.json").write_text(json.dumps(record, indent=1) + "\n")
    print({part: len(rows)})


def main() -> None:
    folder = ROOT / "eval" / "realworld"
    source = folder / "github_reports.jsonl"
    rows = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    order = sorted(rows, key=row_hash)  # independent of file order
    random.Random(SEED).shuffle(order)
    n_dev = round(len(order) * DEV_SHARE)
    parts = {"dev": order[:n_dev], "test": order[n_dev:]}
    for name, part in parts.items():
        part.sort(key=lambda r: r["id"])
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part))
    record = {
        "seed": SEED, "dev_share": DEV_SHARE, "source": source.name,
        "dev": sorted(row_hash(r) for r in parts["dev"]), "test": sorted(row_hash(r) for r in parts["test"]),
    }
    (folder / "split.json").write_text(json.dumps(record, indent=1) + "\n")
    source.unlink()
    print({k: len(v) for k, v in parts.items()})


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--record"]:
        record_part(sys.argv[2])
    else:
        main()
