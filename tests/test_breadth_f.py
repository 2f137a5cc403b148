"""Breadth families (lead, for helper f's leads): an invalid device string, and pip finding no torch wheel.

Every text is real: the device messages are printed by torch 2.13 on CPU on this machine, the pip one by pip asking
PyPI for a torchaudio release that has no wheel for this interpreter.
"""

from __future__ import annotations

import pytest

from assistant.engine import Engine
from assistant.settings import load_settings


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    home = tmp_path_factory.mktemp("home")
    return Engine(load_settings(env={"TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0"}, llm="none"))


def _cited(d) -> set[str]:  # type: ignore[no-untyped-def]
    return {s.id for s in d.sources}


# torch 2.13: torch.device("gpu")
UNKNOWN_TYPE = ("RuntimeError: Expected one of cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, maia, xla, "
                "lazy, vulkan, mps, meta, hpu, mtia, privateuseone device type at start of device string: gpu")
# torch 2.13: torch.zeros(1, device="cuda:0,1")
TWO_GPUS = "RuntimeError: Invalid device string: 'cuda:0,1'"
# torch 2.13: torch.device("cuda", -2)
NEGATIVE = "RuntimeError: Device index must not be negative"
# pip 24 on Python 3.11: pip download --only-binary=:all: torchaudio==0.4.0
PIP = ("ERROR: Ignored the following yanked versions: 2.0.0\n"
       "ERROR: Could not find a version that satisfies the requirement torchaudio==0.4.0 (from versions: 2.0.1, 2.0.2, 2.1.0, "
       "2.1.1, 2.1.2, 2.2.0, 2.2.1, 2.2.2, 2.3.0, 2.3.1, 2.4.0, 2.4.1, 2.5.0, 2.5.1, 2.6.0, 2.7.0, 2.7.1, 2.8.0, 2.9.0, 2.9.1, "
       "2.10.0, 2.11.0)\n"
       "ERROR: No matching distribution found for torchaudio==0.4.0")


@pytest.mark.parametrize("text", [UNKNOWN_TYPE, TWO_GPUS, NEGATIVE])
def test_a_device_string_torch_cannot_parse_is_answered_with_spelling_it_right(engine: Engine, text: str) -> None:
    d = engine.diagnose(text)
    assert "device-string-invalid" in _cited(d)
    # Not "move every tensor to one device": nothing was on a device yet.
    assert d.fixes and any(src.startswith("device-string-invalid") for src in d.fixes[0].sources)


def test_two_gpus_in_one_string_offers_the_one_gpu_per_device_fix(engine: Engine) -> None:
    d = engine.diagnose(TWO_GPUS)
    # The cue (a comma between GPU ids) ranks the several-GPUs cause first, so its fix leads.
    assert d.fixes[0].title.startswith("One GPU per device")


def test_pip_finding_no_wheel_is_an_environment_answer_about_wheels(engine: Engine) -> None:
    d = engine.diagnose(PIP)
    assert d.category == "environment_error"
    assert "pip-no-matching-wheel" in _cited(d)
    assert any(src.startswith("pip-no-matching-wheel") for src in d.fixes[0].sources)
