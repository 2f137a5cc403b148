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


def split_collection(name: str, seed: int) -> None:
    """Split a newly collected set (``eval/realworld/<name>.jsonl``, labels as regular expressions, claims in a
    ``must_not_claim`` key) per category, half to ``dev_<name>`` and half to the frozen ``test_<name>``, before any
    answer is read; record both by content hash, their label syntax, and their claims under ``eval/claims``."""
    folder = ROOT / "eval" / "realworld"
    record = json.loads((folder / "split.json").read_text())
    dev_name, test_name = f"dev_{name}", f"test_{name}"
    if dev_name in record or test_name in record:
        raise SystemExit(f"{name} is already split")
    source = folder / f"{name}.jsonl"
    rows = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    rng = random.Random(seed)
    parts: dict[str, list[dict]] = {dev_name: [], test_name: []}
    by_category: dict[str, list[dict]] = {}
    for row in sorted(rows, key=row_hash):
        by_category.setdefault(row["category"], []).append(row)
    turn = 0
    for category in sorted(by_category):
        group = by_category[category]
        rng.shuffle(group)
        for row in group:  # alternate across categories too, so odd-sized groups do not all favour one side
            (parts[dev_name] if turn % 2 == 0 else parts[test_name]).append(row)
            turn += 1
    claims_dir = ROOT / "eval" / "claims"
    for part, part_rows in parts.items():
        part_rows.sort(key=lambda r: r["id"])
        claims = [{"id": r["id"], "must_not_claim": r.pop("must_not_claim"), "why": "labelled from the thread at collection, before any answer was seen"}
                  for r in part_rows if r.get("must_not_claim")]
        for r in part_rows:
            r.pop("must_not_claim", None)
        (folder / f"{part}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part_rows))
        (claims_dir / f"{part}.jsonl").write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in claims))
        record[part] = sorted(row_hash(r) for r in part_rows)
        record.setdefault("label_syntax", {})[part] = "regex"
    record[f"{name}_split"] = (f"{len(rows)} reports collected from threads not in the other parts; split per category, half and half, "
                               f"seed {seed}, before any answer was read")
    (folder / "split.json").write_text(json.dumps(record, indent=1) + "\n")
    source.unlink()
    print({k: len(v) for k, v in parts.items()})


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--record"]:
        record_part(sys.argv[2])
    elif sys.argv[1:2] == ["--split-collection"]:
        split_collection(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else SEED)
    else:
        main()
