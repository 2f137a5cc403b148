"""Readings added while tuning on the dev_fresh4 reports: each widens a reading to its whole family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant import rules
from assistant.eval.examples import example_text
from assistant.parse import parse_failure
from assistant.types import RuleHit


def _dev4(ident: str) -> str:
    """A dev_fresh4 report's text (dev data: tuning may read it)."""
    path = Path(__file__).resolve().parents[1] / "eval" / "realworld" / "dev_fresh4.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        if case["id"] == ident:
            return str(case["error_text"])
    raise KeyError(ident)


def _hit(text: str) -> RuleHit:
    found = rules.match(parse_failure(text)).hit
    assert found is not None, text[:200]
    return found


def _fixes(h: RuleHit) -> str:
    return " ".join(f"{f.title} {f.detail} {f.code or ''}" for f in h.fixes)


@pytest.fixture(autouse=True)
def _no_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHHELP_DENSE", "0")


@pytest.mark.parametrize("source", ["corpus/devices/cuda_unknown_error_cogsvd.txt", "corpus/devices/cuda_unknown_error_set_device_oldphotos.txt"])
def test_cuda_unknown_error_offers_the_driver_reset(source: str) -> None:
    h = _hit(example_text(source))
    assert h.rule == "devices.cuda_unknown_error"
    assert "nvidia_uvm" in _fixes(h)


def test_cudnn_execution_failed_offers_a_build_for_the_gpu() -> None:
    h = _hit(example_text("realworld/dev/lwrefinenet-cudnn-execution-failed-backward"))
    assert h.rule == "cuda.cudnn_execution_failed"
    assert "Install a PyTorch build that matches the driver and GPU" in _fixes(h)


def test_cuda_unknown_error_after_suspend_leads_with_the_driver_module() -> None:
    h = _hit(_dev4("f4a-cuda-unknown-error-after-suspend"))
    assert h.rule == "devices.cuda_unknown_error"
    assert "suspend" in h.cause and "CUDA_VISIBLE_DEVICES" not in h.cause
    assert "nvidia_uvm" in f"{h.fixes[0].detail} {h.fixes[0].code}"
