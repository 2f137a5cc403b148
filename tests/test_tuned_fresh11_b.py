"""Families tuned on the dev_fresh11 reports (tuner f11b), read from real texts.

Every text is a report of a dev split, read by id.
"""

from __future__ import annotations

from assistant.rules.base import remedy
from tuned_support import dev_reader, dev_report, fix_text, hit_of

report = dev_reader("dev_fresh11")


def test_no_grad_fn_with_adapters_on_a_frozen_base_leads_with_input_grads() -> None:
    found = hit_of(report("f11a-qwen-coder-peft-no-grad-fn"))
    assert found.category == "no_grad_fn"
    first = fix_text(found.fixes[:1])
    assert "enable_input_require_grads" in first
    assert "embedding outputs get requires_grad" in first
    assert "frozen base model" in found.cause


def test_no_grad_fn_without_adapters_keeps_the_usual_fixes() -> None:
    found = hit_of(dev_report("dev", "torchsplatting-no-grad-fn-loss-printed"))
    assert found.category == "no_grad_fn"
    assert "enable_input_require_grads" not in fix_text(found.fixes)


def test_process_group_not_initialised_names_syncbatchnorm_on_one_gpu() -> None:
    found = hit_of(report("f11c-adelaidet-syncbn-single-gpu"))
    assert found.category == "ddp_error"
    text = fix_text(found.fixes)
    assert "SyncBatchNorm also needs a process group" in text
    assert "plain BatchNorm2d" in text


def test_unpicklable_lambda_fix_says_why_and_offers_num_workers_0() -> None:
    found = hit_of(report("f11c-lhydra-ddp-lambda-pickle"))
    assert found.category == "multiprocessing_error"
    text = fix_text(found.fixes)
    assert "which pickle can find by name" in text
    assert "num_workers=0 loads in the main process" in text


def test_spawn_pickling_top_level_fix_carries_the_num_workers_0_workaround() -> None:
    # The bare PicklingError of a lambda (no rule reads it) is answered from the same document fix.
    assert "PicklingError" in report("f11a-fewshot-lambda-pickle-windows")
    fix = remedy("spawn-pickling#top-level-definitions")
    assert "num_workers=0" in fix.detail and "pickle can find by name" in fix.detail


def test_loss_batch_with_token_outputs_says_labels_follow_the_sequence_length() -> None:
    found = hit_of(report("f11a-resume-ner-dummy-labels-batch"))
    assert found.category == "shape_mismatch"
    text = fix_text(found.fixes)
    assert "same shape as the input ids" in text
    assert "full sequence length" in text


def test_illegal_memory_access_named_in_prose_is_read_as_one_not_as_memory_growth() -> None:
    found = hit_of(report("f11d-conv3d-batch25-ima"))
    assert found.category == "illegal_memory_access"
    assert found.rule == "cuda.illegal_memory_access_torch_kernel"
    first = fix_text(found.fixes[:1])
    assert "cuDNN bug" in first and "recent PyTorch" in first
