"""Families tuned on the dev_fresh6 reports (tuner f6d), read from real texts.

Every text is real: a report of the dev_fresh6 split, or a traceback printed by torch 2.13 on this machine
(the script's path shortened).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.kb.remedies import as_fix
from tuned_support import dev_reader, fix_text as _fixes, hit_of as _hit_text

ROOT = Path(__file__).resolve().parents[1]


_dev_fresh6 = dev_reader("dev_fresh6")


@pytest.fixture(autouse=True)
def _no_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHHELP_DENSE", "0")


# --- optimizer.load_state_dict given a dict without param_groups (printed by torch 2.13: scheduler state saved
# under the optimizer's key) -------------------------------------------------------------------------------------------
_SWAPPED = """Traceback (most recent call last):
  File "swap.py", line 6, in <module>
    opt.load_state_dict(ckpt["optimizer"])
  File "/work/venv/lib/python3.11/site-packages/torch/_compile.py", line 54, in inner
    return disable_fn(*args, **kwargs)
  File "/work/venv/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py", line 1446, in _fn
    return fn(*args, **kwargs)
  File "/work/venv/lib/python3.11/site-packages/torch/optim/optimizer.py", line 939, in load_state_dict
    saved_groups = deepcopy(state_dict["param_groups"])
                            ~~~~~~~~~~^^^^^^^^^^^^^^^^
KeyError: 'param_groups'
"""


@pytest.mark.parametrize("text", [_SWAPPED, _dev_fresh6("f6d-moco-resume-optimizer-scheduler-swapped")])
def test_optimizer_entry_without_param_groups(text: str) -> None:
    h = _hit_text(text)
    assert h.rule == "io.optimizer_entry_wrong_object" and h.category == "state_dict_loading"
    assert h.fixes[0].title.startswith("Save every object under its own key")
    assert "scheduler" in _fixes(h.fixes)


# --- KeyError 'optimizer' when resuming from a weights-only file (printed by torch 2.13; and the dev report) ----------
_BARE = """Traceback (most recent call last):
  File "bare.py", line 7, in <module>
    opt.load_state_dict(checkpoint["optimizer"])
                        ~~~~~~~~~~^^^^^^^^^^^^^
KeyError: 'optimizer'
"""


@pytest.mark.parametrize("text", [_BARE, _dev_fresh6("f6d-sfa3d-resume-optimizer-separate-file")])
def test_missing_optimizer_entry_offers_weights_only_reading(text: str) -> None:
    h = _hit_text(text)
    assert h.rule == "io.checkpoint_key"
    assert "weights-only" in _fixes(h.fixes)


def test_missing_model_entry_keeps_plain_key_answer() -> None:
    h = _hit_text(_BARE.replace("opt.load_state_dict(checkpoint[\"optimizer\"])", "model.load_state_dict(checkpoint[\"model\"])")
                  .replace("KeyError: 'optimizer'", "KeyError: 'model'"))
    assert h.rule == "io.checkpoint_key" and "weights-only" not in _fixes(h.fixes)


# --- old torch: the optimizer refused frozen parameters --------------------------------------------------------------
def test_old_optimizer_rejects_frozen_parameters() -> None:
    h = _hit_text(_dev_fresh6("f6d-deepvo-optimizing-param-no-grad"))
    assert h.rule == "python.frozen_params" and h.category == "python_error"
    assert "requires_grad" in _fixes(h.fixes)


# --- element-wise loss, output and target differ in the channel dimension: the head fix names classes and mask channels
def test_head_matches_target_names_classes_and_mask_channels() -> None:
    fix = as_fix("loss-input-target-shape#head-matches-target", {})
    assert fix is not None
    text = f"{fix.detail} {fix.code or ''}"
    assert "number of classes" in text and "single-channel" in text
    for rid in ("f6d-fcn-num-class-mismatch-bce", "f6d-unet-rgb-mask-bce-target-size"):
        h = _hit_text(_dev_fresh6(rid))
        assert h.category == "shape_mismatch" and "number of classes" in _fixes(h.fixes)
