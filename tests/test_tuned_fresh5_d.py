"""Families tuned on the dev_fresh5 reports (tuner f5d): knowledge only, read through the engine from real texts.

Every text is a report of the dev_fresh5 split (the user's own message or description).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.engine import Engine
from tuned_support import dev_reader, fix_text as _fixes

ROOT = Path(__file__).resolve().parents[1]


_dev_fresh5 = dev_reader("dev_fresh5")


@pytest.fixture(autouse=True)
def _no_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHHELP_DENSE", "0")


def test_window_left_on_the_cpu_for_a_gpu_signal_creates_it_on_the_input_device() -> None:
    d = Engine().diagnose(_dev_fresh5("f5d-stft-window-on-cpu"))
    assert d.category == "device_mismatch"
    fixes = _fixes(d.fixes)
    assert "hann_window" in fixes and "device=x.device" in fixes


def test_one_request_over_half_the_card_offers_a_shorter_input() -> None:
    d = Engine().diagnose(_dev_fresh5("f5d-espnet-tts-long-reference-wav"))
    assert d.category == "cuda_oom"
    assert "shorter input" in _fixes(d.fixes)


def test_width_mismatch_in_every_layer_points_at_the_configuration_file() -> None:
    d = Engine().diagnose(_dev_fresh5("f5d-llama-chat-wrong-params-json"))
    assert d.category == "state_dict_loading"
    assert "configuration file" in _fixes(d.fixes)


def test_embeddings_collected_over_many_inputs_are_moved_to_the_cpu() -> None:
    d = Engine().diagnose(_dev_fresh5("f5d-sentence-embedding-accumulate-gpu-tensors"))
    assert d.category == "cuda_oom"
    assert ".cpu()" in _fixes(d.fixes)


def test_bare_illegal_memory_access_suggests_upgrading_the_library_that_ships_the_kernel() -> None:
    d = Engine().diagnose(_dev_fresh5("f5d-vllm-awq-illegal-memory-access"))
    assert d.category == "illegal_memory_access"
    assert "upgrade that library" in _fixes(d.fixes)


def test_speech_training_oom_that_a_smaller_batch_did_not_fix_leads_with_over_long_samples() -> None:
    d = Engine().diagnose(_dev_fresh5("f5d-espnet-oom-long-utterances"))
    assert d.category == "cuda_oom"
    assert d.hypotheses[0].cause.startswith("Variable-length data")
    assert "maximum length" in _fixes(d.fixes)


def test_plain_oom_without_variable_length_words_does_not_lead_with_over_long_samples() -> None:
    d = Engine().diagnose("I get CUDA out of memory when training my image classifier. I reduced the batch size but I got the same problem.")
    assert d.category == "cuda_oom"
    assert not d.hypotheses[0].cause.startswith("Variable-length data")


# Printed here by torch 2.13: a scripted function called with more arguments than its signature takes.
_SCRIPTED_CALL = ("RuntimeError: scatter_sum() expected at most 3 argument(s) but received 6 argument(s). "
                  "Declaration: scatter_sum(Tensor src, Tensor index, int dim=-1) -> Tensor")


def test_scripted_library_call_with_another_signature_is_a_library_version_question() -> None:
    for text in (_SCRIPTED_CALL, _dev_fresh5("f5d-gtn-scatter-add-api-version")):
        d = Engine().diagnose(text)
        assert d.category == "environment_error"
        assert "Declaration:" in _fixes(d.fixes)


def test_library_attribute_missing_with_several_libraries_listed_is_a_version_pairing() -> None:
    d = Engine().diagnose(_dev_fresh5("f5d-sbert-bert-tokenizer-unique-added-tokens"))
    assert d.category == "environment_error"
    assert "transformers and sentence-transformers" in _fixes(d.fixes)


def test_attribute_missing_with_only_torch_listed_stays_a_python_error() -> None:
    text = ("torch | 2.1.0\npython | 3.10.4\n\nAttributeError: 'Trainer' object has no attribute 'evaluate_loop'")
    d = Engine().diagnose(text)
    assert d.category == "python_error"
