"""Families tuned on the dev_fresh3 reports (tuner d), read from real texts.

Every text is real: a corpus file captured on this machine (torch 2.13 CPU, NumPy 2.4 / 1.24) or copied from a public
report (its `# source:` URL in the file), or a report of the dev_fresh3 split.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from assistant import diagnose, rules
from assistant.eval.examples import example_text
from assistant.parse import parse_failure
from assistant.types import RuleHit

ROOT = Path(__file__).resolve().parents[1]


def _hit_text(text: str) -> RuleHit:
    found = rules.match(parse_failure(text)).hit
    assert found is not None
    return found


def _hit(source: str) -> RuleHit:
    return _hit_text(example_text(source))


def _fixes(fixes) -> str:  # type: ignore[no-untyped-def]
    return " ".join(f"{f.title} {f.detail} {f.code or ''}" for f in fixes)


def _dev_fresh3(report_id: str) -> str:
    for line in (ROOT / "eval" / "realworld" / "dev_fresh3.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row["id"] == report_id:
                return row["error_text"]
    raise KeyError(report_id)


@pytest.fixture(autouse=True)
def _no_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHHELP_DENSE", "0")


# --- 1. numpy._core missing while unpickling: a NumPy 2 file read by NumPy 1.x ---------------------------------------

@pytest.mark.parametrize("source", ["corpus/io/numpy_core_pickle_load_captured.txt", "corpus/io/numpy_core_np_load_captured.txt"])
def test_numpy_core_missing_is_a_numpy2_pickle_not_a_missing_package(source: str) -> None:
    h = _hit(source)
    assert h.rule == "env.numpy2_pickle"
    assert h.category == "serialization_error"
    fixes = _fixes(h.fixes)
    assert "numpy>=2" in fixes and re.search(r"re-create|re-save|rebuild", fixes, re.I)
    assert "pip install numpy\n" not in fixes and "Install it into the interpreter" not in fixes


def test_numpy_core_with_a_cache_puts_rebuilding_the_cache_first() -> None:
    h = _hit_text(_dev_fresh3("f3c-ultralytics-numpy-core-label-cache"))
    assert h.rule == "env.numpy2_pickle"
    assert "cache" in f"{h.fixes[0].title} {h.fixes[0].detail}".lower()


def test_other_missing_modules_still_read_as_not_installed() -> None:
    assert _hit("corpus/env/module_not_found_cv2_captured.txt").rule == "env.module_not_found"


# --- 2. TorchScript: an unannotated parameter is a Tensor, so no overload matches -------------------------------------

def test_overload_with_inferred_tensor_says_annotate_the_parameter() -> None:
    h = _hit("corpus/compile/ts_overload_unannotated_dim_captured.txt")
    assert h.rule == "compile.torchscript_overload_tensor_arg"
    assert "`dim`" in h.cause and "annotation" in h.cause
    assert "dim: int" in _fixes(h.fixes)


def test_old_overload_message_without_inferred_marker_is_read_too() -> None:
    h = _hit_text(_dev_fresh3("f3c-torchscript-unannotated-dim-inferred-tensor"))
    assert h.rule == "compile.torchscript_overload_tensor_arg"
    assert re.search(r"annotat", _fixes(h.fixes), re.I)


def test_call_time_inferred_tensor_keeps_its_own_reading() -> None:
    assert _hit("corpus/compile/ts_expected_value_type_int_captured.txt").rule == "compile.torchscript_arg_type"


# --- 3. Triton: the driver cannot load the kernel image its bundled ptxas produced ------------------------------------

def test_triton_kernel_image_invalid_points_at_driver_and_ptxas() -> None:
    h = _hit("corpus/compile/triton_kernel_image_invalid_inductor.txt")
    assert h.rule == "compile.triton_driver_image"
    assert h.category == "compile_error"
    fixes = _fixes(h.fixes)
    assert "TRITON_PTXAS_PATH" in fixes and re.search(r"driver", h.fixes[0].title, re.I)


def test_plain_inductor_failures_stay_generic() -> None:
    assert _hit("corpus/compile/inductor_backend_lowering.txt").rule == "compile.backend"


# --- 4. CUDNN_STATUS_NOT_INITIALIZED: memory, or a build that does not fit the GPU/driver -----------------------------

def test_not_initialized_at_first_rnn_call_leads_with_a_matching_build() -> None:
    h = _hit("corpus/cuda/cudnn_not_initialized_lstm_flatten_first_call.txt")
    assert h.rule == "cuda.cudnn_init_build"
    assert re.search(r"(upgrad|reinstall)\w* (or reinstall )?pytorch", _fixes(h.fixes[:1]), re.I)
    assert re.search(r"batch size", _fixes(h.fixes), re.I)  # memory stays on the list


def test_not_initialized_with_memory_words_stays_memory_first() -> None:
    h = _hit("realworld/dev/frn-cudnn-not-initialized-memory")
    assert h.rule == "cuda.cudnn_no_memory"
    assert re.search(r"batch size", _fixes(h.fixes[:1]), re.I)
    assert "cudnn.enabled" in _fixes(h.fixes)
    assert re.search(r"matches the driver", _fixes(h.fixes), re.I)  # the build story is reachable, not first


# --- 5. cannot import name: pin/downgrade to the release the code was written for, or update the importer -------------

def test_cannot_import_name_says_pin_or_downgrade_or_update_the_importer() -> None:
    h = _hit_text(_dev_fresh3("f3c-glm-torch-required-transformers"))
    assert h.rule == "env.cannot_import_name"
    fixes = _fixes(h.fixes)
    assert re.search(r"\bpin\b", fixes, re.I) and "downgrade" in fixes
    assert re.search(r"update the code that imports it|Update the code or library that imports it", fixes)


# --- 6. illegal memory access in PyTorch's own layers on an old release ------------------------------------------------

def test_illegal_access_in_plain_conv_on_old_release_offers_upgrading_pytorch_first() -> None:
    h = _hit("corpus/cuda/illegal_access_conv3d_old_release.txt")
    assert h.rule == "cuda.illegal_memory_access_torch_kernel"
    assert re.search(r"upgrade pytorch", h.fixes[0].title, re.I)


def test_illegal_access_with_a_custom_kernel_keeps_the_kernel_story() -> None:
    text = ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    out = my_ext.forward(x)\n"
            "  File \"/home/u/ext/setup.py\", line 3\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
            "The kernel comes from our custom CUDA extension built with cpp_extension.\n")
    assert _hit_text(text).rule == "cuda.illegal_memory_access_custom"


# --- 7. CTC loss NaN: output lengths too short for the targets ---------------------------------------------------------

def test_nan_with_ctc_input_lengths_reaches_the_ctc_cause() -> None:
    d = diagnose(_dev_fresh3("f3b-ctc-nan-short-input-length"))
    assert d.category == "nan_inf"
    top = " ".join(f"{h.cause} {_fixes(h.fixes)}" for h in d.hypotheses[:3])
    assert "CTC" in top and re.search(r"input.?lengths?", top)
