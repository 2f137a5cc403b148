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
