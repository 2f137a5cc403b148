"""Family-level behaviour of the CUDA runtime, hardware, segfault and state_dict rules on real texts.

Every text is a real one: a corpus file copied from a public report (its `# source:` URL in the file), a
report of the real-world dev split, or a captured case of eval/captured.
"""

from __future__ import annotations

import re

import pytest

from assistant import diagnose, rules
from assistant.eval.examples import example_text
from assistant.parse import parse_failure
from assistant.types import RuleHit


def _hit(source: str) -> RuleHit:
    found = rules.match(parse_failure(example_text(source))).hit
    assert found is not None, source
    return found


def _fixes(h: RuleHit) -> str:
    return " ".join(f"{f.title} {f.detail} {f.code or ''}" for f in h.fixes)


@pytest.fixture(autouse=True)
def _no_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHHELP_DENSE", "0")


# --- 1. state_dict keys: a prefix needs pairs; buffers alone mean versions -------------------------------------------

def test_unexpected_only_num_batches_tracked_is_a_version_story_not_a_prefix() -> None:
    h = _hit("corpus/io/state_dict_unexpected_num_batches_tracked_siamfc.txt")
    assert h.rule == "io.state_dict_bn_counters"
    assert "prefix" not in h.cause
    assert "num_batches_tracked" in h.cause and re.search(r"version", h.cause)
    assert "strict=False" in _fixes(h)
    assert re.search(r"drop these keys", _fixes(h), re.I)


def test_buffer_only_keys_say_a_library_version_differs() -> None:
    h = _hit("corpus/io/state_dict_unexpected_position_ids.txt")
    assert h.rule == "io.state_dict_buffers"
    assert "prefix" not in h.cause
    assert re.search(r"buffers.*version", h.cause)


def test_num_batches_tracked_leads_the_ranked_causes_with_the_version_story() -> None:
    d = diagnose(example_text("corpus/io/state_dict_unexpected_num_batches_tracked_siamfc.txt"))
    assert d.category == "state_dict_loading"
    assert d.hypotheses[0].id == "state_dict.library_version"
    assert "strict=False" in " ".join(f.code or "" for f in d.fixes)


def test_paired_wrapper_prefix_is_still_recognised() -> None:
    assert _hit("captured/cpu/load-dataparallel-checkpoint-module-prefix").rule == "io.state_dict_prefix"
    assert _hit("realworld/dev/vst-why-strip-module-prefix").rule == "io.state_dict_prefix"


# --- 2. output layer size: a stale checkpoint from an earlier run is an alternative ------------------------------------

@pytest.mark.parametrize("source", ["corpus/io/state_dict_head_size_own_dataset_chinese.txt", "captured/cpu/finetune-head-size-mismatch"])
def test_head_size_mismatch_offers_the_stale_checkpoint_check(source: str) -> None:
    h = _hit(source)
    assert h.rule == "io.state_dict_head_size"
    text = _fixes(h)
    assert "Load everything except the output layer" in text  # the fine-tuning fix stays
    assert re.search(r"which checkpoint file is loaded", text, re.I) and re.search(r"earlier run|stale", text)


# --- 3. CUDA error 802: Fabric Manager ----------------------------------------------------------------------------------

@pytest.mark.parametrize("source", [
    "corpus/cuda/system_not_yet_initialized_802_thc.txt",
    "corpus/cuda/system_not_yet_initialized_802_getdevicecount.txt",
    "corpus/cuda/system_not_yet_initialized_802_warning_a100.txt",
])
def test_error_802_points_at_fabric_manager(source: str) -> None:
    h = _hit(source)
    assert h.rule == "cuda.system_not_ready" and h.category == "cuda_unavailable"
    assert "nvidia-fabricmanager" in _fixes(h) and "NVSwitch" in h.cause
    assert not re.search(r"reinstall (?:pytorch|torch)|cpu-only", _fixes(h), re.I)


# --- 4. CUDA_VISIBLE_DEVICES with invalid syntax ------------------------------------------------------------------------

def test_bracketed_visible_devices_is_named_as_the_cause() -> None:
    h = _hit("corpus/cuda/cudnn_internal_error_visible_devices_brackets.txt")
    assert h.rule == "cuda.visible_devices_invalid" and h.category == "cudnn_error"
    assert "not valid syntax" in h.cause and "[1,2,3]" in h.cause
    assert "CUDA_VISIBLE_DEVICES=1,2,3" in _fixes(h)


def test_cudnn_internal_error_without_the_variable_keeps_its_reading() -> None:
    assert _hit("corpus/cuda/cudnn_internal_error_backward.txt").rule == "cuda.cudnn_internal_error"


# --- 5. segmentation faults: import order, unstable hardware --------------------------------------------------------------

def test_segfault_with_native_package_imported_before_torch_suggests_import_order() -> None:
    h = _hit("corpus/scheduler/segfault_open3d_imported_before_torch.txt")
    assert h.rule == "scheduler.segfault_import_order" and h.category == "unknown"
    assert "import torch\nimport open3d" in _fixes(h)
    assert not re.search(r"out of memory|driver", h.cause + _fixes(h), re.I)


def test_segfault_without_such_import_keeps_the_generic_reading() -> None:
    h = _hit("corpus/scheduler/segfault_exit_139_in_forward.txt")
    assert h.rule == "scheduler.segfault"
    assert "Import torch first" not in _fixes(h)


def test_segfault_that_works_elsewhere_and_moves_around_is_hardware() -> None:
    h = _hit("corpus/scheduler/segfault_random_epochs_works_other_machines.txt")
    assert h.rule == "scheduler.segfault_unstable_hardware" and h.category == "hardware_error"
    assert re.search(r"memtest", _fixes(h)) and re.search(r"XMP|EXPO", _fixes(h))
    d = diagnose(example_text("corpus/scheduler/segfault_random_epochs_works_other_machines.txt"))
    assert d.category == "hardware_error" and d.hypotheses[0].id == "hw.power"


def test_segfault_at_varying_points_adds_the_memory_check_but_not_the_workers_fix() -> None:
    # The crash is in the main process's own batch fetching: num_workers=0 would change nothing.
    h = _hit("corpus/scheduler/segfault_gc_after_epochs_main_process_fetch.txt")
    assert h.rule == "scheduler.segfault"
    assert re.search(r"RAM|memory test", _fixes(h)) and "num_workers" not in _fixes(h)


# --- 6. illegal memory access: non-first GPU, third-party kernels ----------------------------------------------------------

def test_illegal_access_only_on_a_non_first_gpu_suspects_a_missing_device_guard() -> None:
    h = _hit("corpus/cuda/illegal_access_only_on_cuda1_pnaconv.txt")
    assert h.rule == "cuda.illegal_memory_access_device"
    assert "cuda:1" in h.cause and "current" in h.cause
    assert "torch.cuda.set_device" in _fixes(h) and re.search(r"upgrade", _fixes(h), re.I)


def test_illegal_access_in_a_library_op_ranks_the_library_bug_first() -> None:
    h = _hit("corpus/cuda/illegal_access_mmdet_roipool.txt")
    assert h.rule == "cuda.illegal_memory_access_library"
    assert "RoIPool" in h.cause
    assert re.search(r"upgrade", h.fixes[0].title, re.I) and "torchvision" in _fixes(h)
    d = diagnose(example_text("corpus/cuda/illegal_access_mmdet_roipool.txt"))
    assert d.hypotheses[0].id == "ima.build_or_hardware"


def test_plain_illegal_access_keeps_its_reading() -> None:
    h = _hit("realworld/dev/tegnas-illegal-memory-random")
    assert h.rule == "cuda.illegal_memory_access"
    assert "set_device" not in _fixes(h)


# --- kernel assertions: the kernel names the likely input -----------------------------------------------------------

def test_index_select_assertion_names_the_embedding_story_without_an_embedding_frame() -> None:
    h = _hit("realworld/dev/hf28104-indexselect-assert-embeddings")
    assert h.rule == "cuda.assert_gather_index"
    assert "index_select's kernel is what an embedding lookup runs" in h.cause and "traceback shows an embedding" not in h.cause
    assert re.search(r"vocab", _fixes(h), re.I)


def test_per_pixel_loss_assertion_points_at_mask_values() -> None:
    h = _hit("realworld/dev/unet-nllloss2d-assert-tqdm")
    assert h.rule == "cuda.assert_label" and "segmentation masks" in h.cause
    assert "torch.unique(mask)" in _fixes(h) and "ignore_index=255" in _fixes(h)
    plain = _hit("captured/cuda/cuda-assert-ce-one-based-labels")  # a 1-D loss keeps the plain label story
    assert plain.rule == "cuda.assert_label" and "segmentation" not in plain.cause
