"""The v2 triage corpus (issue 20, item 1): deterministic, covers every log shape, scored by the same scorer."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from assistant.eval.triage_baseline import naive_triage
from assistant.eval.triage_corpus_v2 import generate
from assistant.eval.triage_score import score

SHAPES = {"torchrun_file", "torchrun_logdir", "mp_spawn", "deepspeed", "lightning", "slurm_array", "k8s"}


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    generate(tmp_path / "a", n_jobs=60, seed=7)
    generate(tmp_path / "b", n_jobs=60, seed=7)
    generate(tmp_path / "c", n_jobs=60, seed=8)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert _digest(tmp_path / "a") != _digest(tmp_path / "c")


def test_truth_covers_shapes_and_is_consistent(tmp_path: Path) -> None:
    generate(tmp_path, n_jobs=300, seed=100)
    truth = [json.loads(line) for line in (tmp_path / "truth.jsonl").read_text().splitlines()]
    manifest = {m["job_id"]: m for m in map(json.loads, (tmp_path / "manifest.jsonl").read_text().splitlines())}
    assert {m["shape"] for m in manifest.values()} == SHAPES
    assert {t["status"] for t in truth} == {"failed", "succeeded"}
    traps = {t["trap"] for t in truth}
    for needed in ("retried", "retried_final_ok", "truncated", "new_failure_amid_noise", "ok_scary_noise", "clock_skew", "rank_reorder"):
        assert needed in traps, needed
    logs = tmp_path / "logs"
    for t in truth:
        m = manifest[t["job_id"]]
        assert all((logs / f).is_file() for f in m["files"])
        assert t["gpu_hours"] is not None and t["gpu_hours"] >= 0
        if t["status"] == "failed":
            assert t["category"] and t["group"]
            if t["first_failing_rank"] is not None:
                assert 0 <= t["first_failing_rank"] < m["world"]
        else:
            assert t["category"] is None and t["group"] is None


def test_scorer_runs_on_generated_corpus(tmp_path: Path) -> None:
    logs = generate(tmp_path, n_jobs=80, seed=3)
    truth = [json.loads(line) for line in (tmp_path / "truth.jsonl").read_text().splitlines()]
    result = score(naive_triage([logs]), truth)
    assert result["jobs"] == len(truth) and result["missing_predictions"] == 0
    assert 0.0 <= result["grouping"]["ari"] <= 1.0 or result["grouping"]["ari"] < 0
