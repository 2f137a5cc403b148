"""Families tuned on the dev_fresh5 reports (tuner f5a), read from real texts.

Every text is real: a report of the dev_fresh5 split, a corpus file copied from a public report (its `# source:` URL in
the file), or a message printed by torch on this machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant import rules
from assistant.parse import parse_failure
from tuned_support import dev_reader, fix_text as _fixes, hit_of as _hit_text

ROOT = Path(__file__).resolve().parents[1]


def _ids(fixes) -> list[str]:  # type: ignore[no-untyped-def]
    return [f"{s}" for f in fixes for s in f.sources]


_dev_fresh5 = dev_reader("dev_fresh5")


@pytest.fixture(autouse=True)
def _no_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHHELP_DENSE", "0")


# --- from_pretrained head size mismatch: the loader's own message names ignore_mismatched_sizes ----------------------

def test_hf_head_size_mismatch_leads_with_ignore_mismatched_sizes() -> None:
    h = _hit_text(_dev_fresh5("f5a-distilbert-ner-classifier-size-mismatch"))
    assert h.rule == "io.state_dict_head_size" and h.category == "state_dict_loading"
    assert "ignore_mismatched_sizes=True" in (h.fixes[0].code or "") and "num_labels=5" in (h.fixes[0].code or "")


def test_plain_head_size_mismatch_keeps_the_torch_fixes() -> None:
    # torch 2.13, nn.Linear(4, 5) loading the state_dict of nn.Linear(4, 9): no from_pretrained in the message.
    text = ("RuntimeError: Error(s) in loading state_dict for Net:\n\tsize mismatch for fc.weight: copying a param with shape "
            "torch.Size([9, 4]) from checkpoint, the shape in current model is torch.Size([5, 4]).\n\tsize mismatch for fc.bias: copying "
            "a param with shape torch.Size([9]) from checkpoint, the shape in current model is torch.Size([5]).")
    h = _hit_text(text)
    assert h.rule == "io.state_dict_head_size" and "ignore_mismatched_sizes" not in _fixes(h.fixes)


# --- two GPUs in one op when the report ties it to which GPUs are visible -------------------------------------------

def test_two_gpus_with_visible_devices_talk_suggests_one_visible_gpu() -> None:
    h = _hit_text(_dev_fresh5("f5a-twosome-multi-gpu-visible-devices"))
    assert h.rule == "devices.two_gpus"
    assert "CUDA_VISIBLE_DEVICES=0" in (h.fixes[0].code or "")


def test_two_gpus_without_that_talk_keeps_its_order() -> None:
    text = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cuda:1!"
    h = _hit_text(text)
    assert h.rule == "devices.two_gpus" and "one-visible-gpu" not in " ".join(_ids(h.fixes))


# --- an unpicklable native object sent to a dataset map's process pool ----------------------------------------------

def test_unpicklable_object_in_map_with_num_proc_runs_in_one_process() -> None:
    h = _hit_text(_dev_fresh5("f5a-qwen-tiktoken-map-num-proc-pickle"))
    assert h.category == "multiprocessing_error"
    assert "num_proc=None" in (h.fixes[0].code or "")


# --- index out of range in self when the text is about the sequence length ------------------------------------------

def test_index_out_of_range_with_max_length_points_at_position_table() -> None:
    h = _hit_text(_dev_fresh5("f5a-bertweet-index-out-of-range-max-length"))
    assert h.category == "index_error"
    assert "max_position_embeddings" in _fixes(h.fixes[:1])


def test_bare_index_out_of_range_keeps_the_range_check() -> None:
    # torch 2.13: torch.nn.Embedding(10, 4)(torch.tensor([12]))
    h = _hit_text("IndexError: index out of range in self")
    assert "max_position_embeddings" not in _fixes(h.fixes)


# --- GradScaler on float16 gradients after a validation step --------------------------------------------------------

def test_unscale_fp16_after_validation_keeps_trained_weights_float32() -> None:
    h = _hit_text(_dev_fresh5("f5a-dreambooth-lora-validation-unscale-fp16"))
    assert h.rule == "amp.fp16_params"
    assert "validation" in h.fixes[0].title.lower()


def test_unscale_fp16_without_validation_keeps_its_order() -> None:
    # torch 2.13 (CPU GradScaler with a .half() model) prints this message.
    h = _hit_text("ValueError: Attempting to unscale FP16 gradients.")
    assert h.rule == "amp.fp16_params" and "validation" not in h.fixes[0].title.lower()


# --- KeyError on a model type: transformers older than the architecture ---------------------------------------------

def test_keyerror_on_the_loaded_models_type_says_upgrade_transformers() -> None:
    h = _hit_text(_dev_fresh5("f5a-mergekit-keyerror-mistral"))
    assert h.rule == "env.unknown_model_type" and h.category == "environment_error"
    assert "pip install -U transformers" in _fixes(h.fixes)


def test_keyerror_on_a_batch_key_stays_a_python_error() -> None:
    text = ("Traceback (most recent call last):\n  File \"train.py\", line 12, in <module>\n    x = batch['pixel']\n"
            "KeyError: 'pixel'")
    h = _hit_text(text)
    assert h.rule == "python.key_error"


# --- OOM from predictions gathered on the GPU during evaluation -----------------------------------------------------

def test_evaluation_predictions_filling_the_gpu_move_them_to_cpu() -> None:
    h = _hit_text(_dev_fresh5("f5a-trainer-evaluate-preds-gpu-oom"))
    assert h.rule == "memory.cuda_oom_eval" and h.category == "cuda_oom"
    assert ".cpu()" in (h.fixes[0].code or "") and "eval_accumulation_steps" in _fixes(h.fixes[:2])


# --- PEFT target modules not in the model ---------------------------------------------------------------------------

def test_lora_target_modules_not_found_lists_the_models_names() -> None:
    h = _hit_text(_dev_fresh5("f5a-baichuan-lora-target-modules-not-found"))
    assert h.rule == "python.peft_targets" and h.category == "python_error"
    assert "named_modules" in _fixes(h.fixes) and "target_modules" in _fixes(h.fixes)


# --- a loss reported as exactly 0 in a float16 run ------------------------------------------------------------------

def test_loss_all_zero_with_fp16_reads_as_half_precision_overflow() -> None:
    h = _hit_text(_dev_fresh5("f5a-baichuan2-13b-fp16-loss-zero"))
    assert h.category == "nan_inf" and "float16" in h.title
    assert "bf16" in _fixes(h.fixes[:1])


def test_loss_zero_without_half_precision_is_not_read_as_overflow() -> None:
    found = rules.match(parse_failure("When fine-tuning with LoRA the training loss is always 0 from the first step.")).hit
    assert found is None or found.category != "nan_inf"


# --- a saved LoRA adapter of a few hundred bytes --------------------------------------------------------------------

def test_adapter_file_of_a_few_hundred_bytes_reads_as_empty_save() -> None:
    h = _hit_text(_dev_fresh5("f5a-alpaca-lora-443-byte-adapter"))
    assert h.rule == "io.adapter_saved_empty" and h.category == "serialization_error"
    assert "get_peft_model_state_dict" in _fixes(h.fixes) and "peft==" in _fixes(h.fixes)


def test_adapter_on_a_13b_model_is_not_a_tiny_file() -> None:
    text = "I fine-tuned llama 13B with LoRA; loading adapter_model.bin with PeftModel.from_pretrained takes 30 s. Is that normal?"
    found = rules.match(parse_failure(text)).hit
    assert found is None or found.rule != "io.adapter_saved_empty"
