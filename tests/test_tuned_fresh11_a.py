"""Families tuned on the dev_fresh11 reports (tuner f11a), read from real texts.

Every text is a report of a dev split, read by id.
"""

from __future__ import annotations

import pytest

from assistant.engine import Engine
from assistant.eval.examples import example_text
from tuned_support import dev_reader, dev_report, fix_text, hit_of

report = dev_reader("dev_fresh11")


@pytest.fixture(autouse=True)
def _no_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHHELP_DENSE", "0")


# --- 1. a library's lazy module loader reports a missing name without quotes: env.missing_attribute ---------------

def test_unquoted_module_attribute_of_a_library_is_a_version_mismatch() -> None:
    found = hit_of(report("f11a-ai-toolkit-wan-vae-diffusers"))
    assert found.category == "environment_error"
    assert found.rule == "env.missing_attribute"
    text = fix_text(found.fixes)
    assert "pip install --upgrade diffusers" in text
    assert "diffusers installed from source" in text


def test_quoted_module_attribute_keeps_its_reading() -> None:
    found = hit_of(example_text("corpus/env/module_attribute_library_captured.txt"))
    assert found.rule == "env.missing_attribute"


# --- 2. autocast's warning that CUDA is unavailable: a CPU-only build (devices.cuda_unavailable) ------------------

def test_autocast_disabled_for_missing_cuda_is_read_as_a_cpu_only_build() -> None:
    found = hit_of(report("f11a-tortoise-cuda-not-available"))
    assert found.category == "cuda_unavailable"
    text = fix_text(found.fixes)
    assert "CPU-only build" in text and "download.pytorch.org/whl/cu" in text


# --- 3. a built-in layer lacks an attribute the installed torch's class sets: pickled by an older torch -----------

def test_builtin_layer_missing_an_attribute_torch_sets_is_a_layer_pickled_by_an_older_torch() -> None:
    found = hit_of(report("f11c-yolov5-upsample-recompute"))
    assert found.category == "environment_error"
    assert "older PyTorch" in found.cause
    text = fix_text(found.fixes)
    assert "Downgrade torch" in text and "git pull" in text
    assert "isinstance(m, torch.nn.Upsample)" in text


def test_builtin_wrapper_missing_a_user_attribute_stays_a_python_error() -> None:
    # torch's DataParallel never sets the model's own method or attribute, so the reading stays the user's mistake.
    from assistant.rules.python import _layer_from_older_torch

    text = example_text("corpus/python/dataparallel_attribute_captured.txt")
    assert _layer_from_older_torch(text.strip().splitlines()[-1], text, False, ()) is None
    assert hit_of(dev_report("dev_fresh2", "f2c-diffcse-dataparallel-attr")).category == "python_error"


# --- 4. a Hugging Face argument renamed between releases: document hf-renamed-arguments -------------------------

def test_renamed_transformers_keyword_is_a_release_mismatch() -> None:
    d = Engine().diagnose(report("f11b-acsa-lm-labels-kwarg"))
    assert d.category == "environment_error"
    assert any(s.id == "hf-renamed-arguments" for s in d.sources)
    assert "labels=" in fix_text(d.fixes)


def test_an_unexpected_keyword_of_the_users_own_forward_is_not_read_as_a_rename() -> None:
    from assistant.kb.retrieve import get_retriever
    from assistant.settings import load_settings

    settings = load_settings()
    retriever = get_retriever(settings.home, dense=False, encoder_kind=settings.encoder)
    text = example_text("corpus/python/typeerror_library_method_keyword_captured.txt")
    assert "hf-renamed-arguments" not in retriever.signature_hits(text)


# --- 5. Half/Float operands in a model loaded in 8-bit with bitsandbytes: a reader in dtypes.pair_half ------------

def test_half_float_mismatch_with_bitsandbytes_leads_with_float16_loading() -> None:
    found = hit_of(report("f11a-moss-8bit-v100-half-float"))
    assert found.category == "dtype_mismatch"
    text = fix_text(found.fixes[:2])
    assert "torch_dtype=torch.float16" in text and "drop load_in_8bit" in text


def test_half_float_mismatch_without_8bit_keeps_the_autocast_fixes() -> None:
    found = hit_of(example_text("corpus/dtypes/linear_half_input.txt"))
    assert found.rule == "dtypes.pair_half"
    assert "load_in_8bit" not in fix_text(found.fixes)


# --- 6. saved code (schedules, lambdas) that another Python version cannot rebuild: document pickled-code-python-version

def test_could_not_deserialize_warning_quotes_the_pickled_code_document() -> None:
    from assistant.kb.retrieve import get_retriever
    from assistant.settings import load_settings

    settings = load_settings()
    retriever = get_retriever(settings.home, dense=False, encoder_kind=settings.encoder)
    text = report("f11c-sb3-load-py38-custom-objects")
    assert retriever.signature_hits(text)[:1] == ["pickled-code-python-version"]
    assert retriever.docs["pickled-code-python-version"].category == "serialization_error"


def test_autocast_and_gradscaler_warnings_of_the_installed_torch_read_as_cuda_unavailable() -> None:
    # The real warnings, raised by the installed torch on a machine without CUDA (their wording changes between releases).
    import warnings

    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("the warnings are raised only where CUDA is unavailable")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autocast("cuda"):
            pass
        torch.amp.GradScaler("cuda")
    texts = [f"UserWarning: {w.message}" for w in caught if "not available" in str(w.message)]
    assert len(texts) == 2
    for text in texts:
        found = hit_of(text)
        assert found.category == "cuda_unavailable" and found.rule == "devices.cuda_unavailable"
