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


def test_gpu_oom_while_torch_load_unpickles_points_at_map_location() -> None:
    h = _hit(_dev4("f4a-graphstorm-oom-restoring-optimizer-state"))
    assert h.category == "cuda_oom"
    assert "map_location" in f"{h.fixes[0].title} {h.fixes[0].detail} {h.fixes[0].code}"


def test_oom_in_a_generation_demo_offers_smaller_weights() -> None:
    h = _hit(_dev4("f4a-huatuogpt-oom-needs-16gb"))
    assert h.category == "cuda_oom"
    assert "4-bit" in _fixes(h) and "generation" in h.cause


def test_oom_in_training_keeps_its_reading_without_the_weights_fix() -> None:
    h = _hit(example_text("corpus/memory/oom_batch1_prose_tdn.txt"))
    assert h.category == "cuda_oom" and "4-bit" not in _fixes(h)


def test_destructor_error_after_a_failed_init_is_not_the_failure() -> None:
    found = rules.match(parse_failure(_dev4("f4b-ds-cpuadam-cuda-version-mismatch"))).hit
    assert found is None or found.category != "python_error"


def test_plain_attribute_error_keeps_the_python_reading() -> None:
    assert _hit(example_text("corpus/python/attributeerror_typo_captured.txt")).rule == "python.attribute_error"


def test_missing_libcuda_is_the_driver_library() -> None:
    h = _hit(_dev4("f4a-nougat-wsl-libcudnn-cnn-infer-libcuda"))
    assert h.rule == "env.shared_library" and "driver" in h.cause
    assert "/usr/lib/wsl/lib" in _fixes(h) and "LD_LIBRARY_PATH" in _fixes(h)


@pytest.mark.parametrize("ident", ["f4b-import-torch-undefined-ncclcommregister", "f4b-codejudge-ncclcommregister-cu11-cu12-mixed"])
def test_undefined_nccl_symbol_names_a_second_nccl(ident: str) -> None:
    h = _hit(_dev4(ident))
    assert h.rule == "env.undefined_symbol" and "NCCL" in h.cause
    assert "nvidia-nccl" in _fixes(h) or "nccl" in _fixes(h).lower()


def test_undefined_symbol_in_prose_without_a_symbol_is_not_read_as_one() -> None:
    found = rules.match(parse_failure("I get an undefined symbol error when importing my package after upgrading")).hit
    assert found is None or found.rule != "env.undefined_symbol"


def test_memory_on_the_main_gpu_after_resuming_points_at_map_location() -> None:
    h = _hit(_dev4("f4b-stylegan2-resume-ckpt-gpu0-memory"))
    assert h.rule == "memory.cuda_oom_resume" and h.category == "cuda_oom"
    assert "map_location" in f"{h.fixes[0].detail} {h.fixes[0].code}"


def test_first_gpu_memory_without_a_resume_is_not_the_checkpoint_story() -> None:
    found = rules.match(parse_failure("In DDP training, GPU 0 uses more memory than the other GPUs.")).hit
    assert found is None or found.rule != "memory.cuda_oom_resume"
