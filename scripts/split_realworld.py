"""Split the real-world reports once, at random with a fixed seed, into a dev part and a frozen test part.

Run once; ``--freeze-fresh`` later records the reports collected after the split (test only). The result is recorded in ``eval/realworld/split.json`` by content hash so that the test
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


def freeze_fresh() -> None:
    """Record the reports collected after the split (test_fresh.jsonl, test only) by content hash."""
    folder = ROOT / "eval" / "realworld"
    record = json.loads((folder / "split.json").read_text())
    if "test_fresh" in record:
        raise SystemExit("test_fresh is already frozen")
    rows = [json.loads(line) for line in (folder / "test_fresh.jsonl").read_text().splitlines() if line.strip()]
    record["test_fresh"] = sorted(row_hash(r) for r in rows)
    (folder / "split.json").write_text(json.dumps(record, indent=1) + "\n")
    print({"test_fresh": len(rows)})


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

    freeze_fresh() if sys.argv[1:] == ["--freeze-fresh"] else main()
