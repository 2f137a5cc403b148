"""`torchhelp run --investigate` on real CUDA failures (run on a GPU machine: `pytest -m gpu`).

The programs are eval cases (eval/cases/<slug>/repro.py); the experiments that need CUDA
(synchronous launches, host-side index guards before a device assert, the allocator's expandable
segments, cuDNN off) run for real. With TORCHHELP_GPU_OUT set, the reports are kept for committing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from test_gpu import run_case

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _experiment(report: dict, experiment_id: str) -> dict:
    found = [e for e in report["experiments"] if e["id"] == experiment_id]
    assert found, [e["id"] for e in report["experiments"]]
    return found[0]


def test_a_device_assert_is_located_and_its_label_named(tmp_path: Path) -> None:
    # An explicit budget, as below: on a freshly started H200 (2026-11-28, fourth stop) the guard's re-run was cut off
    # by the default 4x-the-failing-run budget and reported "stopped"; on the warm card it passed twice in a row.
    res, rep = run_case("cuda-assert-ce-one-based-labels", "--investigate", "--yes", "--budget", "300", tmp_path=tmp_path)
    assert res.returncode != 0
    assert rep["category"] == "device_side_assert"
    guard = _experiment(rep, "guard_index")
    assert guard["outcome"] == "other" and "cross_entropy: the target (class labels) holds" in guard["finding"], guard
    # The kernel's assert line already names the label check: the rule's own reading leads, and the guard confirms it.
    assert rep["hypotheses"][0]["id"] in guard["verified"]
    blocking = _experiment(rep, "launch_blocking")
    assert blocking["outcome"] in ("same", "other") and "repro.py" in blocking["finding"], blocking


def test_an_embedding_assert_names_the_token_id(tmp_path: Path) -> None:
    # An explicit budget: what is checked here is the guard's finding, not whether a second re-run fits into 4x the
    # failing run on a freshly started card (on a cold H200 it did not, and the guard was reported as not run).
    res, rep = run_case("cuda-assert-embedding-token-out-of-vocab", "--investigate", "--yes", "--budget", "300", tmp_path=tmp_path)
    guard = _experiment(rep, "guard_index")
    assert "embedding: the token/ids input holds" in guard["finding"], guard
    # The kernel's assertion (index_select's source index) already names the embedding story: the rule's own reading
    # leads, and the guard that found the token id verifies it.
    assert rep["hypotheses"][0]["id"] in guard["verified"], (rep["hypotheses"][0]["id"], guard)


def test_fragmentation_is_tested_with_expandable_segments(tmp_path: Path) -> None:
    res, rep = run_case("cuda-oom-fragmentation", "--investigate", "--yes", tmp_path=tmp_path)
    assert rep["category"] == "cuda_oom"
    exp = _experiment(rep, "expandable_segments")
    assert exp["outcome"] in ("passed", "same", "other"), exp
    assert exp["command"].startswith("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ")
    if exp["outcome"] == "passed":
        assert "oom.fragmentation" in exp["verified"]
    elif exp["outcome"] == "same":
        assert "oom.fragmentation" in exp["ruled_out"] or not any(h["id"] == "oom.fragmentation" for h in rep["hypotheses"])
