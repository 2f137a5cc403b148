"""Families tuned on the dev_fresh8 reports (tuner f8y), read from real texts.

Every text is real: a report of the dev_fresh8 split or a message printed by torch 2.13 on this machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from assistant import rules
from assistant.engine import Engine
from assistant.parse import parse_failure
from tuned_support import dev_reader, fix_text as _fixes, hit_of as _hit_text

_dev_fresh8 = dev_reader("dev_fresh8")

# Printed by torch 2.13 on this machine: a second backward through a freed graph.
_BACKWARD_TWICE = ("RuntimeError: Trying to backward through the graph a second time (or directly access saved tensors after they have "
                   "already been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). "
                   "Specify retain_graph=True if you need to backward through the graph a second time or if you need to access saved "
                   "tensors after calling backward.")

# Printed by torch 2.13 on this machine for `torch.zeros(2).to_sparse().view(-1)`.
_SPARSE_VIEW = ("NotImplementedError: Could not run 'aten::view' with arguments from the 'SparseCPU' backend. This could be because the "
                "operator doesn't exist for this backend, or was omitted during the selective/custom build process (if using custom build).")


@pytest.fixture(autouse=True)
def _no_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHHELP_DENSE", "0")


def _rule(text: str):  # type: ignore[no-untyped-def]
    return rules.match(parse_failure(text)).hit


# --- an operator missing from a device backend is not the program's own logic -------------------------------------

def test_mps_operator_not_implemented_is_not_a_plain_python_error() -> None:
    text = _dev_fresh8("f8d-mps-aten-roll-old-torch")
    h = _rule(text)
    assert h is None or h.rule != "python.builtin"
    d = Engine().diagnose(text)
    assert d.category == "environment_error"
    assert "Upgrade PyTorch" in _fixes(d.fixes)


def test_could_not_run_operator_for_a_backend_is_not_a_plain_python_error() -> None:
    h = _rule(_SPARSE_VIEW)
    assert h is None or h.rule != "python.builtin"


def test_other_not_implemented_errors_still_read_as_python() -> None:
    h = _hit_text("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    model.step()\n"
                  "NotImplementedError: subclasses must implement step()")
    assert h.rule == "python.builtin"


# --- cuDNN loaded is not the one torch was compiled with ------------------------------------------------------------

def test_cudnn_version_incompatibility_answers_with_the_bundled_cudnn() -> None:
    d = Engine().diagnose(_dev_fresh8("f8d-cudnn-version-incompat-840-vs-833"))
    assert d.category == "environment_error"
    assert d.hypotheses and d.hypotheses[0].id == "cudnn-version-incompatibility#other-cudnn-on-loader-path"
    assert "LD_LIBRARY_PATH" in _fixes(d.fixes)


def test_cudnn_document_signature_is_the_installed_torch_wording() -> None:
    source = (Path(torch.__file__).parent / "backends" / "cudnn" / "__init__.py").read_text(encoding="utf-8")
    assert "cuDNN version incompatibility: " in source and "PyTorch already comes bundled with cuDNN. " in source


# --- NaN after a stretch of normal training: the divergence cause and the learning rate lead -----------------------

def _nan_causes(text: str) -> list[str]:
    from assistant.compose.documents import ranked_causes
    from assistant.kb.remedies import remedies_of

    rem = remedies_of("nan-inf-anomaly")
    assert rem is not None
    return [h.id for h in ranked_causes(rem, text, 1.0, {})]


def test_nan_after_an_epoch_leads_with_divergence() -> None:
    text = _dev_fresh8("f8c-neuralhydrology-nan-lr-too-high")
    assert _nan_causes(text)[0] == "nan-inf-anomaly#training-diverges"
    d = Engine().diagnose(text)
    assert d.category == "nan_inf"


def test_nan_anomaly_message_without_divergence_words_keeps_the_forward_cause_first() -> None:
    causes = _nan_causes("RuntimeError: Function 'LogBackward0' returned nan values in its 0th output.")
    assert causes[0] == "nan-inf-anomaly#nonfinite-input-or-op"


# --- backward twice only under a multi-GPU setting: make one GPU visible --------------------------------------------

def test_backward_twice_with_a_distributed_setting_offers_one_visible_gpu() -> None:
    h = _hit_text(_dev_fresh8("f8c-depthanything-backward-twice-multigpu"))
    assert h.category == "backward_twice"
    assert "CUDA_VISIBLE_DEVICES=0" in _fixes(h.fixes)


def test_backward_twice_under_dataparallel_offers_one_visible_gpu() -> None:
    h = _hit_text("I wrap the model in nn.DataParallel on two GPUs and the second iteration fails:\n" + _BACKWARD_TWICE)
    assert "CUDA_VISIBLE_DEVICES=0" in _fixes(h.fixes)


def test_plain_backward_twice_does_not_mention_gpus() -> None:
    h = _hit_text(_BACKWARD_TWICE)
    assert h.rule == "autograd.backward_twice"
    assert "CUDA_VISIBLE_DEVICES" not in _fixes(h.fixes)


# --- DDP given device_ids, old wording without the parameters' devices --------------------------------------------

def test_old_ddp_device_ids_wording_reads_the_model_not_on_its_gpu() -> None:
    h = _hit_text(_dev_fresh8("f8d-ddp-device-ids-model-not-on-gpu"))
    assert h.rule == "distributed.ddp_device" and h.category == "ddp_error"
    assert "model.to(local_rank)" in (h.fixes[0].code or "")


# --- NCCL remote error: a peer that died or the network, not ranks out of step --------------------------------------

def test_nccl_remote_error_leads_with_the_dead_rank_or_network() -> None:
    d = Engine().diagnose(_dev_fresh8("f8d-nccl-remote-error-bad-ib-nodes"))
    assert d.category == "nccl_error"
    assert d.hypotheses[0].id == "nccl.slow_or_dead_rank"
    text = _fixes(d.fixes)
    assert "Find the rank that died first" in text and "InfiniBand" in text
