"""Families tuned on the dev_fresh7 reports (tuner f7b), read from real texts.

Every text is real: a report of the dev_fresh7 split or a message printed by torch on this machine.
"""

from __future__ import annotations

import json
from pathlib import Path

from tuned_support import hit_of as _hit_text

ROOT = Path(__file__).resolve().parents[1]


def _first(fixes) -> str:  # type: ignore[no-untyped-def]
    return f"{fixes[0].title} {fixes[0].detail} {fixes[0].code or ''}"


def _all(fixes) -> str:  # type: ignore[no-untyped-def]
    return " ".join(f"{f.title} {f.detail} {f.code or ''}" for f in fixes)


def _dev_fresh7(report_id: str) -> str:
    for line in (ROOT / "eval" / "realworld" / "dev_fresh7.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row["id"] == report_id:
                return str(row["error_text"])
    raise KeyError(report_id)


def test_scaler_driven_by_hand_under_accelerate_lets_the_framework_scale() -> None:
    found = _hit_text(_dev_fresh7("f7d-accelerate-manual-scaler-noinf"))
    assert found.category == "amp_error"
    assert "accelerator.backward" in _first(found.fixes)


def test_update_without_step_alone_keeps_the_step_update_pairing() -> None:
    # Message printed by torch 2.13: GradScaler.update() with no step() since the last update.
    found = _hit_text("AssertionError: No inf checks were recorded prior to update.")
    assert "update() only after a step()" in _first(found.fixes)
    assert "accelerator" not in _all(found.fixes)


def test_cudnn_bad_param_only_in_evaluation_points_at_its_precision() -> None:
    found = _hit_text(_dev_fresh7("f7d-lipread-autocast-eval-cudnn-badparam"))
    assert found.category == "cudnn_error"
    first = _first(found.fixes)
    assert "autocast" in first and "no_grad" in first


def test_cudnn_bad_param_without_evaluation_keeps_the_version_check_first() -> None:
    found = _hit_text("RuntimeError: cuDNN error: CUDNN_STATUS_BAD_PARAM")
    assert "autocast" not in _first(found.fixes)


def test_nan_pointed_to_a_known_pytorch_issue_suggests_confirming_and_upgrading() -> None:
    found = _hit_text(_dev_fresh7("f7d-log-softmax-cuda-nan-2017"))
    assert found.category == "nan_inf"
    assert "upgrade" in _first(found.fixes).lower()


def test_nan_without_a_known_issue_does_not_suggest_upgrading() -> None:
    found = _hit_text("my loss becomes nan, what should I check?")
    assert "upgrade PyTorch" not in _first(found.fixes)


def test_ddp_unused_parameters_fix_names_one_combined_loss() -> None:
    found = _hit_text(_dev_fresh7("f7d-ddp-unused-params-combine-losses"))
    assert found.category == "ddp_error"
    assert "one total loss" in _all(found.fixes)


def test_half_precision_constant_overflow_names_the_float16_limit() -> None:
    found = _hit_text(_dev_fresh7("f7d-qwen-fp16-overflow-2pow30"))
    assert found.category == "amp_error"
    assert "65504" in _all(found.fixes)
