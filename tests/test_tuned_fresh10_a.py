"""Families tuned on the dev_fresh10 reports (tuner f10a), read from real texts.

Every text is a report of a dev split, read by id.
"""

from __future__ import annotations

import pytest

from assistant.engine import Engine
from assistant.eval.examples import example_text
from tuned_support import dev_reader, dev_report, fix_text, hit_of

report = dev_reader("dev_fresh10")


@pytest.fixture(autouse=True)
def _no_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHHELP_DENSE", "0")


# --- 1. StopIteration at next(self.parameters()) inside forward under nn.DataParallel: a family document ---------

def test_stopiteration_at_next_parameters_is_a_dataparallel_replica_without_parameters() -> None:
    d = Engine().diagnose(report("f10a-xlnet-dataparallel-torch15-stopiteration"))
    assert d.category == "ddp_error"
    text = fix_text(d.fixes)
    assert "DistributedDataParallel" in text and "Upgrade" in text


def test_stopiteration_of_an_empty_parameter_generator_elsewhere_is_not_read_as_dataparallel() -> None:
    d = Engine().diagnose(dev_report("dev_fresh4", "f4c-adas-filter-generator-empty-param-list"))
    assert d.category == "python_error"


# --- 2. saved weights listed as torch.Size([0]) from a ZeRO-3 / FSDP run: a reader in io.adapter_saved_empty ------

def test_saved_weights_of_size_zero_under_zero3_are_partitioned_placeholders() -> None:
    found = hit_of(report("f10a-chatglm-zero3-weights-size-zero"))
    assert found.category == "serialization_error"
    assert "placeholder" in found.cause and "torch.Size([0])" in found.cause
    first = fix_text(found.fixes[:1])
    assert "zero_to_fp32" in first
    assert "stage3_gather_16bit_weights_on_model_save" in fix_text(found.fixes)


def test_a_nearly_empty_adapter_file_keeps_the_adapter_fixes() -> None:
    found = hit_of(example_text("corpus/io/peft_adapter_saved_nearly_empty.txt"))
    assert found.category == "serialization_error"
    assert "zero_to_fp32" not in fix_text(found.fixes)


def test_a_load_size_mismatch_against_size_zero_is_not_read_as_a_saved_file() -> None:
    found = hit_of(example_text("corpus/io/state_dict_head_size_own_dataset_chinese.txt"))
    assert found.rule != "io.adapter_saved_empty"


# --- 3. a detection box with x_max <= x_min (or no width/height): a family document -----------------------------

def test_box_with_max_not_above_min_is_a_degenerate_annotation() -> None:
    d = Engine().diagnose(report("f10b-frcnn-pipeline-degenerate-bbox-annotation"))
    assert d.category == "dataloader_error"
    assert any(s.id == "degenerate-bounding-boxes" for s in d.sources)
    text = fix_text(d.fixes[:3])
    assert "annotation" in text and "positive width and height" in text


# --- 4. a scheduler counted in epochs stepped in the batch loop: a family document (no error, category unknown) --

def test_scheduler_stepped_every_batch_for_an_epoch_schedule_is_the_step_frequency() -> None:
    d = Engine().diagnose(report("f10b-srgan-steplr-stepped-every-batch"))
    assert d.category == "unknown"
    assert "batch loop" in d.cause
    assert "once per epoch" in fix_text(d.fixes)


# --- 5. a barrier that hangs while one rank validates through the DDP model: a reader in symptoms.hang -----------

def test_barrier_hang_with_validation_on_one_gpu_is_the_ddp_forward_in_rank_only_code() -> None:
    found = hit_of(report("f10a-ddp-barrier-hang-rank0-validation"))
    assert found.category == "ddp_error"
    assert "DDP-wrapped" in found.cause
    first = fix_text(found.fixes[:1])
    assert "model.module" in first


def test_a_mid_run_hang_without_rank_only_validation_keeps_the_collective_reading() -> None:
    found = hit_of(example_text("corpus/symptoms/dist_train_hangs_after_epochs.txt"))
    assert found.rule == "symptoms.distributed_hang" and found.category == "nccl_error"


# --- 6. accelerate's first 8-bit check (no "in any distributed mode"): a family document -------------------------

def test_old_wording_of_the_8bit_multi_device_check_is_an_accelerate_release_to_upgrade() -> None:
    d = Engine().diagnose(report("f10a-peft-8bit-multiple-devices-accelerate"))
    assert d.category == "environment_error"
    assert "Upgrade accelerate" in d.fixes[0].title


# --- 7. a low-precision gradient assigned to a full-precision grad_dtype: a family document ----------------------

def test_grad_dtype_mismatch_after_unfreezing_under_fsdp2_is_mixed_precision_set_up_frozen() -> None:
    d = Engine().diagnose(report("f10a-fsdp2-mp-unfreeze-grad-dtype"))
    assert d.category == "amp_error"
    text = fix_text(d.fixes[:3])
    assert "no_grad" in text and "Upgrade PyTorch" in text


# --- 8. DDP unused parameters that all lie in one numbered block: a reader in distributed.ddp_unused ------------

def test_unused_parameters_of_one_encoder_block_point_at_layer_drop() -> None:
    found = hit_of(report("f10a-speechbrain-wavlm-layerdrop-ddp"))
    assert found.category == "ddp_error"
    assert "one block of a stack" in found.cause
    first = fix_text(found.fixes[:1])
    assert "LayerDrop" in first and "find_unused_parameters" in first


def test_unused_parameters_of_an_unused_head_do_not_point_at_layer_drop() -> None:
    found = hit_of(example_text("captured/multi_gpu/ddp-unused-parameters-aux-head"))
    assert found.rule == "distributed.ddp_unused"
    assert "LayerDrop" not in fix_text(found.fixes)


# --- 9. one prediction against a larger target batch: a reader in shapes.loss_batch_target_larger ----------------

def test_one_prediction_against_a_spatial_sized_target_batch_adds_the_batch_dimension() -> None:
    found = hit_of(report("f10b-sa-unet-mask-missing-batch-dim"))
    assert found.category == "shape_mismatch"
    assert "batch dimension" in found.cause
    assert "unsqueeze(0)" in fix_text(found.fixes[:1])


def test_a_larger_target_batch_with_several_predictions_keeps_the_flattening_reading() -> None:
    found = hit_of(example_text("corpus/shapes/loss_batch_target_larger_dasc.txt"))
    assert found.rule == "shapes.loss_batch_target_larger"
    assert "unsqueeze(0)" not in fix_text(found.fixes[:1])
