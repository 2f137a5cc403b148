"""Families tuned on the dev_fresh6 reports (tuner f6b), read from real texts.

Every text is real: a report of the dev_fresh6 split or a message printed by torch on this machine.
"""

from __future__ import annotations

import json
from pathlib import Path

from assistant.engine import Engine
from tuned_support import hit_of as _hit_text

ROOT = Path(__file__).resolve().parents[1]


def _first(fixes) -> str:  # type: ignore[no-untyped-def]
    return f"{fixes[0].title} {fixes[0].detail} {fixes[0].code or ''}"


def _dev_fresh6(report_id: str) -> str:
    for line in (ROOT / "eval" / "realworld" / "dev_fresh6.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row["id"] == report_id:
                return str(row["error_text"])
    raise KeyError(report_id)


def test_illegal_instruction_on_a_jetson_points_at_openblas_core_type() -> None:
    found = _hit_text(_dev_fresh6("f6b-jetson-illegal-instruction-train-ssd"))
    assert found.category == "environment_error"
    assert "OPENBLAS_CORETYPE=ARMV8" in _first(found.fixes)


def test_illegal_instruction_on_a_raspberry_pi_points_at_another_torch_wheel() -> None:
    found = _hit_text(_dev_fresh6("f6b-rpi4-torch2-cpu-index-illegal-instruction"))
    assert "torch wheel built for this processor" in _first(found.fixes)


def test_illegal_instruction_without_a_board_keeps_the_cpu_build_advice() -> None:
    found = _hit_text("Illegal instruction (core dumped)")
    assert "-march=native" in _first(found.fixes)


def test_checkpoint_locked_by_another_process_on_windows_answers_from_the_lock_document() -> None:
    d = Engine().diagnose(_dev_fresh6("f6b-windows-lightning-ckpt-winerror32-tensorboard"))
    assert d.category == "serialization_error"
    text = " ".join(f"{f.title} {f.detail} {f.code or ''}" for f in d.fixes[:2])
    assert "own folder" in text and "dirpath" in text


def test_store_without_libuv_on_one_gpu_leads_with_a_single_process_launch() -> None:
    found = _hit_text(_dev_fresh6("f6b-windows-libuv-accelerate-single-gpu"))
    assert found.rule == "distributed.store_without_libuv" and found.category == "ddp_error"
    assert "single process" in _first(found.fixes)
    assert any("USE_LIBUV=0" in f"{f.detail} {f.code or ''}" for f in found.fixes)


def test_store_without_libuv_alone_leads_with_turning_libuv_off() -> None:
    found = _hit_text("RuntimeError: use_libuv was requested but PyTorch was build without libuv support")
    assert "USE_LIBUV=0" in _first(found.fixes)


def test_missing_torchvision_operator_also_offers_a_source_build_against_the_installed_torch() -> None:
    found = _hit_text(_dev_fresh6("f6b-jetson-detectron2-torchvision-nms-missing"))
    assert found.rule == "env.torchvision_ops"
    assert any("from source" in f.title for f in found.fixes[1:])


def test_dll_initialisation_failure_is_read_as_a_windows_dll_problem_with_the_previous_release_offered() -> None:
    found = _hit_text(_dev_fresh6("f6b-windows-torch29-c10-dll-winerror1114"))
    assert found.rule == "env.windows_dll" and found.category == "environment_error"
    titles = [f.title for f in found.fixes]
    assert "Visual C++ Redistributable" in found.fixes[0].detail
    assert any("previous torch release" in t for t in titles)


def test_dll_not_found_does_not_offer_the_previous_release() -> None:
    text = ('OSError: [WinError 126] The specified module could not be found. Error loading '
            '"C:\\\\env\\\\lib\\\\site-packages\\\\torch\\\\lib\\\\fbgemm.dll" or one of its dependencies.')
    found = _hit_text(text)
    assert found.rule == "env.windows_dll"
    assert not any("previous torch release" in f.title for f in found.fixes)


def test_bus_error_on_the_mps_device_is_read_as_the_mps_backend_not_shared_memory() -> None:
    found = _hit_text(_dev_fresh6("f6b-mps-yolov8-cli-bus-error"))
    assert found.rule == "scheduler.bus_error_mps" and found.category == "environment_error"
    assert "upgrade PyTorch" in _first(found.fixes)


def test_bus_error_in_a_container_stays_shared_memory_even_with_mps_named() -> None:
    found = _hit_text("MPS is not used here; running in a docker container with num_workers=8\nBus error (core dumped)")
    assert found.rule == "scheduler.bus_error" and found.category == "dataloader_error"


def test_build_without_nccl_is_an_nccl_error_answered_with_gloo() -> None:
    found = _hit_text(_dev_fresh6("f6b-windows-nccl-lightning-gloo"))
    assert found.rule == "distributed.nccl_not_built" and found.category == "nccl_error"
    assert "gloo" in _first(found.fixes)
