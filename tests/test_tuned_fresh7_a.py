"""Families tuned on the dev_fresh7 reports (tuner f7a), read from real texts.

Every text is real: a report of the dev_fresh7 split or a message printed by torch on this machine.
"""

from __future__ import annotations

import pytest

from tuned_support import dev_reader, fix_text as _fixes, hit_of as _hit_text

_dev_fresh7 = dev_reader("dev_fresh7")

# Printed by torch 2.13 on this machine for both F.embedding and index_select with an index past the end.
_INDEX_SELF = "IndexError: index out of range in self"


@pytest.fixture(autouse=True)
def _no_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHHELP_DENSE", "0")


def _ids(fixes) -> list[str]:  # type: ignore[no-untyped-def]
    return [f"{s}" for f in fixes for s in f.sources]


# --- bare "index out of range in self": most often an embedding lookup, so the id-range check comes along ------------

def test_bare_index_self_offers_the_embedding_id_check() -> None:
    h = _hit_text(_INDEX_SELF)
    assert h.category == "index_error"
    text = _fixes(h.fixes)
    assert "assert idx.min() >= 0" in text
    assert "num_embeddings" in text and "len(tokenizer)" in text


def test_dev_report_bare_index_self() -> None:
    h = _hit_text(_dev_fresh7("f7a-llama-pad-token-id-out-of-vocab"))
    assert h.category == "index_error" and "vocab size" in _fixes(h.fixes)


# --- CUDA OOM without allocator numbers on variable-length (audio) data: cap the sample length ---------------------

def test_bare_oom_on_audio_data_offers_dropping_long_samples() -> None:
    h = _hit_text(_dev_fresh7("f7a-speechbrain-langid-oom-long-audio"))
    assert h.category == "cuda_oom"
    assert "Drop or cut over-long samples" in _fixes(h.fixes[:3])


def test_bare_oom_without_length_words_is_unchanged() -> None:
    h = _hit_text("RuntimeError: CUDA error: out of memory")
    assert h.category == "cuda_oom"
    assert "over-long" not in _fixes(h.fixes)


# --- missing keys are only the classifier head: a headless checkpoint into a model built with a head ---------------

# Printed by torch 2.13 on this machine: a backbone-only state_dict loaded into a model with an `fc` head.
_HEAD_MISSING = 'RuntimeError: Error(s) in loading state_dict for N:\n\tMissing key(s) in state_dict: "fc.weight", "fc.bias". '


def test_missing_head_only_leads_with_loading_the_backbone_non_strictly() -> None:
    h = _hit_text(_HEAD_MISSING)
    assert h.category == "state_dict_loading" and "output layer" in h.cause
    assert "strict=False" in (h.fixes[0].code or "")
    assert "timm" not in _fixes(h.fixes)


def test_timm_headless_checkpoint_offers_the_pretrained_file_path() -> None:
    h = _hit_text(_dev_fresh7("f7a-timm-checkpoint-path-num-classes-missing-head"))
    assert h.category == "state_dict_loading"
    assert "pretrained_cfg_overlay" in (h.fixes[0].code or "")


# --- torch nightly/source build with a released Triton: the fix names the pinned Triton nightly --------------------

def test_triton_internal_missing_mentions_the_nightly_pin() -> None:
    h = _hit_text(_dev_fresh7("f7b-triton-key-nightly-triton23"))
    assert h.category == "environment_error"
    assert "pytorch-triton" in _fixes(h.fixes)


# --- flash-attn extension missing a libtorch std::string symbol: the wheel's C++11 ABI differs from torch's ---------

def test_flash_attn_string_symbol_points_at_the_abi_matched_wheel() -> None:
    h = _hit_text(_dev_fresh7("f7b-flashattn-wheel-torch27-abi"))
    assert h.category == "environment_error"
    assert "cxx11abi" in _fixes(h.fixes[:1])
