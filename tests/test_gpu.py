"""`torchhelp run` on real GPU failures (run on a GPU machine: `pytest -m gpu`).

Each test runs an eval case's program under `torchhelp run` and checks that the diagnosis uses
the probed facts. With TORCHHELP_GPU_OUT set, the reports and outputs are kept for committing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "eval" / "cases"

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def run_case(slug: str, *flags: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict]:
    work = tmp_path / "job"
    shutil.copytree(CASES / slug, work, ignore=shutil.ignore_patterns("case.toml"))
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCHHELP_DENSE": "0", "TORCHHELP_HOME": str(tmp_path / "home"), "NCCL_NVLS_ENABLE": "0"}
    res = subprocess.run([sys.executable, "-m", "assistant", "run", "--report", str(report), *flags, "--", sys.executable, "repro.py"],
                         cwd=work, env=env, capture_output=True, text=True, timeout=540)
    out_dir = os.environ.get("TORCHHELP_GPU_OUT")
    if out_dir:
        target = Path(out_dir)
        target.mkdir(parents=True, exist_ok=True)
        (target / f"{slug}.stderr.txt").write_text(res.stderr)
        if report.exists():
            shutil.copy(report, target / f"{slug}.report.json")
    assert report.exists(), res.stderr[-3000:]
    return res, json.loads(report.read_text())


def _evidence(report: dict, kind: str) -> list[str]:
    return [e["text"] for e in report["evidence"] if e["kind"] == kind]


def test_oom_with_memory_history(tmp_path: Path) -> None:
    res, rep = run_case("cuda-oom-eval-without-no-grad", "--memory-history", tmp_path=tmp_path)
    assert res.returncode != 0
    assert rep["category"] == "cuda_oom"
    probes = _evidence(rep, "probe")
    assert any("allocated" in p and "reserved" in p for p in probes), probes
    assert any(p.startswith("allocation site") for p in probes), probes


def test_device_side_assert_rerun_blocking_localises(tmp_path: Path) -> None:
    res, rep = run_case("cuda-assert-ce-one-based-labels", "--rerun-blocking", tmp_path=tmp_path)
    assert res.returncode != 0
    assert rep["category"] == "device_side_assert"
    reruns = _evidence(rep, "rerun")
    assert reruns and "repro.py" in reruns[0], rep["evidence"]
    assert any("CUDA_LAUNCH_BLOCKING=1" in n for n in rep["notes"])


def test_device_mismatch_uses_module_and_tensor_devices(tmp_path: Path) -> None:
    res, rep = run_case("device-mismatch-cnn-batch-on-cpu", tmp_path=tmp_path)
    assert rep["category"] == "device_mismatch"
    probes = " ".join(_evidence(rep, "probe"))
    assert "cuda:0" in probes and "cpu" in probes
    assert "Live state" in rep["cause"]


def test_nan_case_reports_nonfinite_tensors(tmp_path: Path) -> None:
    res, rep = run_case("nan-fp16-mse-overflow", tmp_path=tmp_path)
    assert rep["category"] == "nan_inf"
    assert any("NaN" in p or "Inf" in p for p in _evidence(rep, "probe")), rep["evidence"]


def test_exit_code_is_preserved(tmp_path: Path) -> None:
    res, rep = run_case("device-mismatch-labels-on-cpu", tmp_path=tmp_path)
    direct = subprocess.run([sys.executable, str(CASES / "device-mismatch-labels-on-cpu" / "repro.py")], capture_output=True, timeout=300)
    assert res.returncode == direct.returncode != 0
