"""The real-world split is frozen: the test part is exactly what was recorded, and never feeds rules."""

from __future__ import annotations

import importlib.util
import json

from conftest import ROOT

FOLDER = ROOT / "eval" / "realworld"
SPLIT = json.loads((FOLDER / "split.json").read_text(encoding="utf-8"))


def _hash_fn():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("split_realworld", ROOT / "scripts" / "split_realworld.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.row_hash


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (FOLDER / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def test_parts_match_the_recorded_hashes() -> None:
    row_hash = _hash_fn()
    parts = sorted(f.stem for f in FOLDER.glob("*.jsonl") if f.stem.startswith(("dev", "test")))
    assert {"dev", "test", "test_fresh", "dev_fresh"} <= set(parts)
    for part in parts:
        assert part in SPLIT, f"{part}.jsonl is not recorded in split.json (scripts/split_realworld.py records a new part)"
        hashes = sorted(row_hash(r) for r in _rows(f"{part}.jsonl"))
        assert hashes == SPLIT[part], f"{part} was edited after it was frozen (labels or texts changed, rows added or removed)"


def test_parts_do_not_overlap() -> None:
    dev = [r for f in sorted(FOLDER.glob("dev*.jsonl")) for r in _rows(f.name)]
    test = [r for f in sorted(FOLDER.glob("test*.jsonl")) for r in _rows(f.name)]
    # The same short message can be pasted in two different reports; the same report never sits on both sides.
    assert not {r["source"] for r in dev} & {r["source"] for r in test}
    assert not {r["id"] for r in dev} & {r["id"] for r in test}


def test_the_real_world_set_is_large_enough() -> None:
    total = sum(len(_rows(f.name)) for f in FOLDER.glob("*.jsonl"))
    assert total >= 300 or "test_fresh" not in SPLIT
