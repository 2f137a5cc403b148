"""Families tuned on the dev_fresh5 reports (tuner f5b), read from real texts.

Every text is real: an error printed by a run here (torch 2.13 CPU, Python 3.11, quoted inline) or a report of the
dev_fresh5 split.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant import rules
from assistant.engine import Engine
from assistant.eval.examples import example_text
from assistant.parse import parse_failure
from assistant.types import RuleHit
from tuned_support import dev_reader, fix_text as _fixes

ROOT = Path(__file__).resolve().parents[1]


def _hit_text(text: str) -> RuleHit | None:
    return rules.match(parse_failure(text)).hit


_dev_fresh5 = dev_reader("dev_fresh5")


@pytest.fixture(autouse=True)
def _no_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHHELP_DENSE", "0")


# Printed here by torch 2.13: a state_dict with one extra entry loaded into nn.Linear; a plain NotImplementedError.
_UNEXPECTED_KEY = (
    "Traceback (most recent call last):\n  File \"<string>\", line 4, in <module>\n"
    "RuntimeError: Error(s) in loading state_dict for Linear:\n\tUnexpected key(s) in state_dict: \"gain\". \n"
)
_PLAIN_NOT_IMPLEMENTED = (
    "Traceback (most recent call last):\n  File \"<string>\", line 4, in <module>\n  File \"<string>\", line 3, in f\n"
    "NotImplementedError: subclasses must implement f\n"
)


# --- 1. cuDNN v8 API: one rejected execution plan, printed while the run goes on --------------------------------

def test_rejected_cudnn_plan_is_read_as_the_plan_search_and_offers_a_patch_release() -> None:
    h = _hit_text(_dev_fresh5("f5b-onetrainer-cudnn-v8-plan-torch230"))
    assert h is not None and h.rule == "cuda.cudnn_plan_warning" and h.category == "cudnn_error"
    assert "patch release" in h.fixes[0].title


def test_plain_cudnn_not_supported_keeps_the_input_reading() -> None:
    h = _hit_text(example_text("realworld/dev/dpgn-cudnn-not-supported-cudatoolkit"))
    assert h is not None and h.rule == "cuda.cudnn_not_supported"


# --- 2. unexpected keys: build the same model the weights came from ------------------------------------------------

def test_unexpected_keys_offer_building_the_model_the_checkpoint_came_from() -> None:
    h = _hit_text(_UNEXPECTED_KEY)
    assert h is not None and h.rule == "io.state_dict"
    assert any("same model the checkpoint was saved from" in f.title for f in h.fixes)


# --- 3. Lightning 2.0 removed the *_epoch_end hooks: a version question, not the program's logic ---------------------

def test_hook_removed_in_a_named_release_is_not_read_as_a_logic_error() -> None:
    h = _hit_text(_dev_fresh5("f5b-rave-lightning2-validation-epoch-end"))
    assert h is None or h.rule != "python.builtin"
    d = Engine().diagnose(_dev_fresh5("f5b-rave-lightning2-validation-epoch-end"))
    assert d.category == "environment_error"
    fixes = _fixes(d.fixes)
    assert "<2.0" in fixes and "on_*_epoch_end" in fixes


def test_plain_not_implemented_error_stays_a_python_error() -> None:
    h = _hit_text(_PLAIN_NOT_IMPLEMENTED)
    assert h is not None and h.rule == "python.builtin"


# --- 4. a callback monitors a metric name that was never logged --------------------------------------------------

def test_monitored_key_missing_answers_from_the_monitored_metric_document() -> None:
    d = Engine().diagnose(_dev_fresh5("f5b-scnet-monitored-key-val-usdr"))
    assert d.category == "python_error"
    assert "Log exactly the name the callback monitors" in d.fixes[0].title


# A cuDNN error whose log also shows the plan lines (wording quoted in a public project's notes): the error leads.
_PLAN_LINES_WITH_ERROR = (
    "CuDNNError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED\n"
    "GET was unable to find an engine to execute this computation\n"
    "Plan failed with a cudnnException: CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR\n"
)


def test_plan_lines_next_to_a_real_cudnn_error_do_not_hide_it() -> None:
    h = _hit_text(_PLAN_LINES_WITH_ERROR)
    assert h is None or h.rule != "cuda.cudnn_plan_warning"


def test_the_bare_plan_warning_is_read_as_the_plan_search() -> None:
    h = _hit_text(example_text("corpus/cuda/cudnn_v8_plan_failed_warning.txt"))
    assert h is not None and h.rule == "cuda.cudnn_plan_warning"


# --- 5. a framework registry has no class of the configured name ---------------------------------------------------

# mmengine's registry message as quoted in public notes (the class and scope names vary).
_REGISTRY_MISS = (
    "Traceback (most recent call last):\n"
    "  File \"/env/lib/python3.10/site-packages/mmengine/registry/build_functions.py\", line 100, in build_from_cfg\n"
    "    raise KeyError(\n"
    "KeyError: 'GazeProjectionSelfLoss is not in the mmpose::model registry. Please check whether the value of "
    "`GazeProjectionSelfLoss` is correct or it was registered as expected. More details can be found at "
    "https://mmengine.readthedocs.io/en/latest/advanced_tutorials/config.html#import-the-custom-module'\n"
)


def test_registry_miss_is_not_read_as_a_dict_key() -> None:
    h = _hit_text(_REGISTRY_MISS)
    assert h is None or h.rule != "python.key_error"


def test_registry_miss_answers_with_importing_or_installing_the_module() -> None:
    d = Engine().diagnose(_REGISTRY_MISS)
    assert d.category == "environment_error"
    fixes = _fixes(d.fixes)
    assert "custom_imports" in fixes and "pip install -v -e ." in fixes


def test_ordinary_key_error_stays_a_dict_key() -> None:
    # Printed here by Python 3.11: {'a': 1}['b'].
    h = _hit_text("Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\nKeyError: 'b'\n")
    assert h is not None and h.rule == "python.key_error"


# --- 6. NCCL failures on an old release: its bundled NCCL -------------------------------------------------------------

def test_nccl_failure_with_the_torch_version_stated_offers_upgrading_torch() -> None:
    d = Engine().diagnose(_dev_fresh5("f5b-examples-imagenet-nccl-multinode"))
    assert d.category == "nccl_error"
    assert any(h.id == "nccl-errors#old-bundled-nccl" for h in d.hypotheses)
    assert "Upgrade PyTorch on every node" in _fixes(d.fixes)


def test_bare_nccl_failure_does_not_guess_an_old_release() -> None:
    # The error line of the same report, alone.
    d = Engine().diagnose("RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:272, unhandled system error\n")
    assert d.category == "nccl_error"
    assert not any(h.id == "nccl-errors#old-bundled-nccl" for h in d.hypotheses)
