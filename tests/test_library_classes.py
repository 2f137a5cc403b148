"""The class atlas and the readings built on it: who owns the class that lacks an attribute or rejects an argument.

Texts are real: two runs captured here (huggingface_hub's method given a keyword it does not take; a user's module
that shares a transformers class name reading an attribute it never set) and one dev-split report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.atlas.classes import is_torch_class, library_owning

CORPUS = Path(__file__).resolve().parents[1] / "eval" / "corpus" / "python"


def _text(name: str) -> str:
    return "\n".join(ln for ln in (CORPUS / name).read_text(encoding="utf-8").splitlines() if not ln.startswith("#"))


@pytest.fixture(scope="module")
def engine():
    from assistant.engine import Engine
    from assistant.settings import load_settings

    return Engine(load_settings())


def test_atlas_knows_library_classes_and_keeps_torch_and_one_word_names_apart() -> None:
    assert library_owning("DeepSpeedZeroOptimizer_Stage3") == ("deepspeed",)
    assert "transformers" in library_owning("BertTokenizer")
    assert library_owning("CompiledKernel") == ("triton",)
    assert library_owning("Trainer") == ()  # one word: users name their own classes so too
    assert library_owning("DistributedDataParallel") == () and is_torch_class("DistributedDataParallel")
    assert library_owning("MyOwnSegmentationHead") == ()


def test_library_class_without_attribute_reads_as_a_release_mismatch(engine) -> None:
    d = engine.diagnose(_text("attributeerror_library_class_zero3_optimizer.txt"))
    assert d.category == "environment_error" and d.rule == "python.library_class_attribute"
    assert any("deepspeed" in f"{f.title} {f.detail} {f.code or ''}" for f in d.fixes)
    assert "pip show deepspeed" in d.hypotheses[0].check  # the check names the package too, not a default


def test_library_method_rejecting_a_keyword_names_the_package(engine) -> None:
    d = engine.diagnose(_text("typeerror_library_method_keyword_captured.txt"))
    assert d.category == "environment_error" and d.rule == "python.library_class_signature"
    assert any("huggingface_hub" in (f.code or "") for f in d.fixes)


def test_own_class_sharing_a_library_name_stays_the_programs_error(engine) -> None:
    d = engine.diagnose(_text("attributeerror_own_class_library_name_captured.txt"))
    assert library_owning("ResNetEncoder")  # the name alone would point at a library
    assert d.category == "python_error" and d.rule != "python.library_class_attribute"


def test_keyword_refused_inside_an_installed_package_reads_as_a_release_mismatch(engine) -> None:
    """A dev report (Python 3.8, so no class in the message): the innermost frame is transformers' own call."""
    d = engine.diagnose(_text("typeerror_library_call_keyword_8bit.txt"))
    assert d.category == "environment_error" and d.rule == "python.library_call_signature"
    assert "transformers" in (d.fixes[0].code or "")


def _refusal(name: str) -> str:
    """The message Python itself writes when a function of this name is given a keyword it does not take."""
    namespace: dict = {}
    exec(f"def {name}(self=None):\n    pass", namespace)
    try:
        namespace[name](unknown_option=1)
    except TypeError as exc:
        return str(exc).replace(f"{name}.<locals>.", "")
    raise AssertionError("no TypeError")


def test_only_a_third_party_frame_other_than_forward_counts_as_the_caller() -> None:
    from assistant.rules.python import _library_made_call
    from assistant.types import Frame

    torch_frame = Frame("/env/lib/python3.11/site-packages/torch/nn/modules/module.py", 1, "_call_impl", "return forward_call(*args, **kwargs)", False)
    lib_frame = Frame("/env/lib/python3.11/site-packages/somepkg/api.py", 3, "build", "return cls(**kwargs)", False)
    user_frame = Frame("/home/user/project/train.py", 9, "main", "model = build(**cfg)", True)
    init = _refusal("__init__")
    assert _library_made_call(init, (lib_frame,)) == ("somepkg", "__init__")
    assert _library_made_call(init, (torch_frame,)) is None  # torch calling the user's module is the norm
    assert _library_made_call(init, (lib_frame, user_frame)) is None  # the call that did not fit is the user's
    assert _library_made_call(_refusal("forward"), (lib_frame,)) is None  # frameworks pass batch keys to the user's forward


def test_a_library_module_lacking_an_attribute_is_recognised_from_the_atlas(engine) -> None:
    """safetensors is not among the hand-listed companions of torch; the atlas knows it is an installed library."""
    from assistant.atlas.classes import is_library_package

    assert is_library_package("safetensors") and not is_library_package("utils")
    d = engine.diagnose((CORPUS.parent / "env" / "module_attribute_library_captured.txt").read_text(encoding="utf-8"))
    assert d.category == "environment_error" and d.rule == "env.missing_attribute"
    assert any("safetensors" in (f.code or "") for f in d.fixes)
