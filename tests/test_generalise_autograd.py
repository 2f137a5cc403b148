"""Family-level behaviour of the autograd, AMP, NaN and torch.compile rules on real texts.

Each text is a corpus file (a public report with its URL, or a real run on torch 2.13 CPU). The
assertions check the family's story and the order of its fixes, not one report's wording.
"""

from __future__ import annotations

import re

import pytest

from assistant import diagnose
from assistant.eval.examples import example_text
from assistant.types import Diagnosis


def _run(name: str) -> Diagnosis:
    return diagnose(example_text(f"corpus/{name}"))


def _said(d: Diagnosis) -> str:
    """What the answer states up front: the cause, the title and the leading hypothesis's fixes."""
    return " ".join([d.cause, d.title] + [f"{f.title} {f.detail} {f.code or ''}" for f in d.fixes])


# -- autocast mixing float16 and bfloat16 ------------------------------------------------------


@pytest.mark.parametrize("name", ["amp/prioritize_half_in_bf16_roma.txt", "amp/prioritize_cat_half_in_bf16_cpu.txt",
                                  "amp/prioritize_stack_bf16_half_cpu.txt"])
def test_prioritize_is_mixed_reduced_types(name: str) -> None:
    d = _run(name)
    assert (d.category, d.rule) == ("amp_error", "amp.prioritize_mixed")
    assert "float16" in d.cause and "bfloat16" in d.cause
    assert re.search(r"manual cast|one dtype", d.fixes[0].title + d.fixes[1].title)
    assert not re.search(r"GradScaler|driver|reinstall", _said(d))


def test_prioritize_shows_the_users_own_cast_line() -> None:
    d = _run("amp/prioritize_half_in_bf16_roma.txt")
    assert ".half()" in (d.fixes[0].code or "")
    assert "local_window_coords" in (d.fixes[0].code or "")


def test_prioritize_in_backward_without_a_cast_leads_with_upgrade() -> None:
    d = _run("amp/prioritize_bf16_backward_pt132715.txt")
    assert (d.category, d.rule) == ("amp_error", "amp.prioritize_backward")
    assert d.fixes[0].title.startswith("Upgrade PyTorch")
    assert "GradScaler" not in _said(d)


# -- torch.compile and the Python version --------------------------------------------------------


@pytest.mark.parametrize(("name", "python", "torch_min"), [
    ("compile/dynamo_python312_chattts.txt", "3.12", "2.4"),
    ("compile/dynamo_python312_chattts_windows.txt", "3.12", "2.4"),
    ("compile/dynamo_python312_diffusers_pytest.txt", "3.12", "2.4"),
    ("compile/dynamo_python311_torch201.txt", "3.11", "2.1"),
])
def test_python_version_unsupported_by_torch_compile(name: str, python: str, torch_min: str) -> None:
    d = _run(name)
    assert (d.category, d.rule) == ("compile_error", "compile.python_unsupported")
    said = _said(d)
    assert f"Python {python}" in said and f"{torch_min} or newer" in said
    assert re.search(r"older Python", said) and re.search(r"without torch\.compile", said)
    assert not re.search(r"triton|cuda version|gpu driver", said, re.I)


# -- ptxas that predates the GPU -----------------------------------------------------------------


@pytest.mark.parametrize(("name", "arch"), [
    ("compile/ptxas_gpu_name_sm121a_gb10.txt", "sm_121a"),
    ("compile/ptxas_gpu_name_sm121a_triton.txt", "sm_121a"),
    ("compile/ptxas_gpu_name_sm120_inductor_log.txt", "sm_120"),
    ("compile/ptxas_gpu_name_sm110a_thor.txt", "sm_110a"),
    ("compile/ptxas_gpu_name_sm89_prose.txt", "sm_89"),
])
def test_ptxas_unknown_architecture(name: str, arch: str) -> None:
    d = _run(name)
    assert (d.category, d.rule) == ("compile_error", "compile.ptxas_arch")
    assert arch in d.cause
    assert "TRITON_PTXAS_PATH" in (d.fixes[0].code or "")
    assert re.search(r"upgrade", d.fixes[1].title, re.I)
    assert not re.search(r"reinstall (the )?(nvidia )?driver|out of memory", _said(d), re.I)


def test_bundled_ptxas_is_named_when_the_repro_command_shows_it() -> None:
    d = _run("compile/ptxas_gpu_name_sm121a_triton.txt")
    assert "bundled with the installed Triton" in d.cause


# -- in-place errors: forward story and optimizer story ------------------------------------------


def test_inplace_saved_transpose_without_gan_words_leads_with_out_of_place() -> None:
    d = _run("autograd/inplace_weight_tbackward_plus_equals_nnr.txt")
    assert (d.category, d.rule) == ("inplace_autograd", "autograd.inplace_weight")
    assert "x = x + y" in (d.fixes[0].code or "")
    assert "optimizer.step()" in d.cause  # the other story stays in view
    assert not re.search(r"inplace=False on ReLU|ReLU\(inplace", _said(d))


def test_inplace_saved_transpose_with_gan_words_leads_with_step_order() -> None:
    d = _run("autograd/inplace_weight_tbackward_gan_morvan.txt")
    assert d.rule == "autograd.inplace_weight"
    assert "before the optimizer step" in d.fixes[0].title
    assert any("x = x + y" in (f.code or "") for f in d.fixes)  # in-forward story kept as an alternative


@pytest.mark.parametrize("name", ["autograd/inplace_prose_gan_adversarial_vidode.txt", "autograd/inplace_prose_gan_title_molgan.txt"])
def test_inplace_error_prose_in_gan_training_is_step_order(name: str) -> None:
    d = _run(name)
    assert (d.category, d.rule) == ("inplace_autograd", "autograd.inplace_gan_prose")
    assert "optimizer step" in d.fixes[0].title
    assert re.search(r"generator|discriminator", d.cause)
    assert not re.search(r"ReLU\(inplace|inplace=False", _said(d))


def test_inplace_error_prose_without_gan_words() -> None:
    d = _run("autograd/inplace_prose_error_liteflownet.txt")
    assert (d.category, d.rule) == ("inplace_autograd", "autograd.inplace_error_prose")
    assert "x = x + y" in (d.fixes[0].code or "")


# -- NaN reported by anomaly detection -----------------------------------------------------------


@pytest.mark.parametrize("name", ["autograd/nan_anomaly_prose_fp16_fairseq.txt", "autograd/nan_anomaly_fp16_msg3d_logsoftmax.txt",
                                  "autograd/nan_anomaly_fp16_opennmt_bmm.txt", "autograd/nan_anomaly_prose_fp16_gpt2_softmax.txt",
                                  "autograd/nan_anomaly_fp16_exp_overflow_cpu.txt"])
def test_anomaly_nan_under_fp16_names_the_scaler_story(name: str) -> None:
    d = _run(name)
    assert (d.category, d.rule) == ("nan_inf", "autograd.nan_anomaly_fp16")
    assert "anomaly detection" in d.fixes[0].title.lower()
    assert "skips that update" in d.cause
    assert not re.search(r"use fp32|bf16|lower (the )?learning rate", _said(d), re.I)


@pytest.mark.parametrize("name", ["autograd/nan_anomaly_pow_asteroid.txt"])
def test_anomaly_nan_in_a_domain_limited_op_leads_with_the_guard(name: str) -> None:
    d = _run(name)
    assert (d.category, d.rule) == ("nan_inf", "autograd.nan_anomaly")
    assert d.fixes[0].title == "Guard the operation's domain"
    assert re.search(r"clamp|eps", d.fixes[0].code or "")
    assert not re.search(r"learning rate|lower (the )?lr", _said(d), re.I)


@pytest.mark.parametrize("source", ["captured/cpu/gan-generator-backward-after-d-step", "realworld/dev/singan-inplace-optimizer-step-15"])
def test_inplace_weight_with_gan_loss_names_in_the_traceback_leads_with_step_order(source: str) -> None:
    d = diagnose(example_text(source))
    assert d.rule == "autograd.inplace_weight"
    assert "before the optimizer step" in d.fixes[0].title


@pytest.mark.parametrize("name", ["compile/dynamo_windows_audioldm2.txt", "compile/dynamo_windows_openvino_webui.txt",
                                  "compile/dynamo_windows_alpaca_lora.txt"])
def test_windows_unsupported_by_torch_compile(name: str) -> None:
    d = _run(name)
    assert (d.category, d.rule) == ("compile_error", "compile.windows_unsupported")
    assert re.search(r"without torch\.compile", d.fixes[0].title)
    assert re.search(r"WSL2", _said(d))
