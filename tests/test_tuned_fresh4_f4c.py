"""Families tuned on the dev_fresh4 reports (tuner f4c), read from real texts.

Every text is real: a corpus file copied from a public report (its `# source:` URL in the file) or a report of the
dev_fresh4 split.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from assistant import rules
from assistant.eval.examples import example_text
from assistant.parse import parse_failure
from tuned_support import dev_reader, fix_text as _fixes, hit_of as _hit_text

ROOT = Path(__file__).resolve().parents[1]


_dev_fresh4 = dev_reader("dev_fresh4")


def _dev(split: str, report_id: str) -> str:
    for line in (ROOT / "eval" / "realworld" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row["id"] == report_id:
                return row["error_text"]
    raise KeyError(report_id)


@pytest.fixture(autouse=True)
def _no_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHHELP_DENSE", "0")


# --- torch.compile on a GPU Triton cannot target; Triton from another release than torch ---------------------------

def test_gpu_too_old_for_triton_says_run_without_compile() -> None:
    h = _hit_text(_dev_fresh4("f4d-nnunet-1080ti-triton-too-old"))
    assert h.rule == "compile.triton" and h.category == "compile_error"
    assert "7.0" in h.cause
    assert re.search(r"without torch\.compile", _fixes(h.fixes))


def test_triton_internal_missing_is_a_torch_triton_pair_mismatch() -> None:
    h = _hit_text(example_text("corpus/compile/triton_newer_than_torch_launch_enter_hook.txt"))
    assert h.rule == "compile.triton_version" and h.category == "environment_error"
    assert re.search(r"downgrade Triton", _fixes(h.fixes), re.I)


def test_other_inductor_failures_stay_backend_failures() -> None:
    h = _hit_text(example_text("corpus/compile/inductor_backend_lowering.txt"))
    assert h.rule == "compile.backend"


# --- compiled modules and companions built for another torch ---------------------------------------------------------

def test_undefined_symbol_names_the_installed_package_to_reinstall() -> None:
    h = _hit_text(_dev_fresh4("f4d-flash-attn-257-torch23-setdevice"))
    assert h.rule == "env.undefined_symbol"
    assert h.fixes[0].title.startswith("Reinstall flash_attn_2_cuda built for the installed torch")
    h = _hit_text(_dev("dev_fresh", "torchsparse-undefined-symbol-after-upgrade"))
    assert "torch_sparse" in h.fixes[0].title


@pytest.mark.parametrize("report", ["pytorch-2056-old-undefined-symbol-nvrtc", "pytorch-8036-undefined-thpvariableclass-import-order"])
def test_undefined_symbol_in_torch_itself_or_a_local_build_names_no_package(report: str) -> None:
    h = _hit_text(_dev("dev", report))
    assert h.rule == "env.undefined_symbol"
    assert not any(f.title.startswith("Reinstall ") and "built for the installed torch" in f.title for f in h.fixes)


def test_missing_torch_library_means_a_companion_built_for_another_torch() -> None:
    h = _hit_text(_dev_fresh4("f4d-audacitorch-libtorch-cuda-cpp-torchaudio"))
    assert h.rule == "env.shared_library"
    assert "PyTorch's own libraries" in h.cause
    assert h.fixes[0].title == "Install the torchaudio version that matches the installed torch"


def test_missing_cuda_runtime_library_keeps_its_own_reading() -> None:
    h = _hit_text(example_text("corpus/env/libcudnn_so_missing.txt"))
    assert h.rule == "env.shared_library"
    assert "PyTorch's own libraries" not in h.cause


def test_numpy_scalar_torch_cannot_infer_is_the_numpy_bridge() -> None:
    h = _hit_text(_dev_fresh4("f4d-numpy2-could-not-infer-dtype"))
    assert h.rule == "env.numpy_abi" and h.category == "environment_error"
    assert "numpy<2" in _fixes(h.fixes)


def test_removed_torch_attribute_also_suggests_the_projects_updated_code() -> None:
    h = _hit_text(_dev_fresh4("f4d-yolact-weakscriptmoduleproxy-torch13"))
    assert h.rule == "env.missing_attribute"
    assert re.search(r"update the project's code", _fixes(h.fixes), re.I)


# --- a library's bf16 check on a GPU without bfloat16 -----------------------------------------------------------------

@pytest.mark.parametrize("text", [example_text("corpus/amp/no_bf16_trainer_args_v100_fastchat.txt"), _dev_fresh4("f4d-lmflow-bf16-2080ti")])
def test_trainer_bf16_check_is_an_amp_error_with_fp16_instead(text: str) -> None:
    h = _hit_text(text)
    assert h.rule == "amp.no_bf16" and h.category == "amp_error"
    assert "--fp16" in _fixes(h.fixes)


# --- layers in a plain list, a squeezed batch axis, label images read as pixel values ---------------------------------

@pytest.mark.parametrize("source", ["corpus/devices/layers_in_list_cuda_prose_pt15005.txt",
                                    "corpus/devices/layers_in_list_input_cuda_weight_cpu_lightning.txt"])
def test_layers_in_a_plain_list_are_not_moved_with_the_model(source: str) -> None:
    h = _hit_text(example_text(source))
    assert h.rule == "devices.unregistered_layers" and h.category == "device_mismatch"
    assert "plain Python list" in h.cause
    assert "ModuleList" in _fixes(h.fixes)


def test_layers_in_a_plain_list_from_a_prose_report() -> None:
    h = _hit_text(_dev_fresh4("f4c-layers-in-python-list-not-moved-to-gpu"))
    assert h.rule == "devices.unregistered_layers" and "`self.conv`" in h.cause


def test_layers_wrapped_in_modulelist_afterwards_are_registered() -> None:
    text = example_text("corpus/devices/layers_in_list_input_cuda_weight_cpu_lightning.txt") + "\nself.conv_layers = nn.ModuleList(self.conv_layers)\n"
    assert _hit_text(text).rule != "devices.unregistered_layers"


def test_conv_missing_axis_mentions_a_squeezed_batch_of_one() -> None:
    h = _hit_text(_dev_fresh4("f4c-hovernet-conv2d-3d-input-batch-size-1"))
    assert h.rule == "shapes.conv_missing_axis"
    assert re.search(r"batch size of 1", _fixes(h.fixes)) and "squeeze(" in _fixes(h.fixes)


def test_high_class_label_also_offers_mapping_mask_pixels() -> None:
    h = _hit_text(_dev_fresh4("f4c-unet-target-192-out-of-bounds-greyscale-mask"))
    assert h.rule == "index.target_oob"
    assert re.search(r"pixel values to class indices", _fixes(h.fixes))


def test_small_class_label_keeps_the_plain_reading() -> None:
    h = _hit_text(example_text("corpus/indexing/ce_target_out_of_bounds.txt"))  # Target 3
    assert h.rule == "index.target_oob"
    assert "pixel values" not in _fixes(h.fixes) and "pixel value" not in h.cause


# --- SDPA restricted to fused kernels with 3-D query/key/value ---------------------------------------------------------

def test_sdpa_no_kernel_with_3d_inputs_is_a_shape_problem() -> None:
    h = _hit_text(example_text("corpus/shapes/sdpa_fused_kernels_3d_inputs_captured.txt"))
    assert h.rule == "shapes.attention_rank" and h.category == "shape_mismatch"
    assert "3, 3 and 3 dimensions" in h.cause
    assert "unsqueeze(1)" in _fixes(h.fixes)


def test_sdpa_no_kernel_without_the_rank_warning_is_not_read_as_a_shape_problem() -> None:
    text = "RuntimeError: No available kernel.  Aborting execution."
    found = rules.match(parse_failure(text)).hit
    assert found is None or found.rule != "shapes.attention_rank"
