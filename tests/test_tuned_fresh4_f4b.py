"""Families tuned on the dev_fresh4 reports (tuner f4b), read from real texts.

Every text is real: a corpus file captured on this machine (torch 2.13 CPU, Python 3.11), an error printed by a
run here (quoted inline), or a report of the dev_fresh4 split.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from assistant.engine import Engine
from assistant.eval.examples import example_text
from assistant.parse import parse_failure
from tuned_support import dev_reader, fix_text as _fixes, hit_of as _hit_text

ROOT = Path(__file__).resolve().parents[1]


_dev_fresh4 = dev_reader("dev_fresh4")


@pytest.fixture(autouse=True)
def _no_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHHELP_DENSE", "0")


# Printed here by torch 2.13 (a second backward on y = (x * x).sum()) and by TCPStore on a port already bound.
_BACKWARD_TWICE = (
    "Traceback (most recent call last):\n  File \"<string>\", line 3, in <module>\n"
    "RuntimeError: Trying to backward through the graph a second time (or directly access saved tensors after they have already "
    "been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify "
    "retain_graph=True if you need to backward through the graph a second time or if you need to access saved tensors after calling backward.\n"
)
_PORT_IN_USE = (
    "Traceback (most recent call last):\n  File \"<string>\", line 4, in <module>\n"
    "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29533, "
    "useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use\n"
)


# --- 1. random numbers repeating across DataLoader workers: a family document, no rule ---------------------------

def test_identical_random_numbers_in_workers_answer_from_the_randomness_document() -> None:
    d = Engine().diagnose(_dev_fresh4("f4b-dataloader-workers-identical-random-numbers"))
    assert d.category == "dataloader_error"
    fixes = _fixes(d.fixes)
    assert "worker_init_fn" in fixes and "torch.initial_seed()" in fixes


# --- 2. a closure built inside a method cannot be pickled for spawned workers ------------------------------------

def test_method_closure_offers_loading_in_the_main_process() -> None:
    h = _hit_text(example_text("corpus/multiprocessing/spawn_method_closure_captured.txt"))
    assert h.rule == "mp.unpicklable"
    assert "top level" in h.fixes[0].title
    assert re.search(r"num_workers=0", _fixes(h.fixes))


def test_lambda_in_a_function_keeps_the_top_level_fixes_only() -> None:
    h = _hit_text(example_text("corpus/multiprocessing/local_lambda_win_mutualnet.txt"))
    assert h.rule == "mp.unpicklable"
    assert "library" not in _fixes(h.fixes)


# --- 3. the port in the error is not the one the user set -----------------------------------------------------------

def test_port_still_in_use_after_changing_master_port_points_at_code_that_sets_it() -> None:
    h = _hit_text(_dev_fresh4("f4b-mochi-xdit-hardcoded-port-29500"))
    assert h.rule == "distributed.port_in_use"
    assert "29501" in h.full_cause and "sets the port" in h.fixes[0].title
    assert any("free port" in f.title for f in h.fixes)


def test_plain_port_in_use_still_leads_with_a_free_port() -> None:
    h = _hit_text(_PORT_IN_USE)
    assert h.rule == "distributed.port_in_use"
    assert "free port" in h.fixes[0].title and len(h.fixes) == 1


# --- 4. unpickling: a missing class, a torch helper missing, a 2.6+ release told in prose ---------------------------

def test_bare_missing_class_is_a_stored_object_being_loaded() -> None:
    h = _hit_text(_dev_fresh4("f4c-efficientface-recordermeter-missing-class"))
    assert h.rule == "io.missing_class" and h.category == "serialization_error"


def test_missing_class_on_an_interactive_main_stays_a_spawn_reading() -> None:
    h = _hit_text(_dev_fresh4("f4b-notebook-windows-cant-get-attribute-dataset"))
    assert h.category == "multiprocessing_error"


def test_missing_torch_helper_means_the_file_is_from_a_newer_release() -> None:
    h = _hit_text(example_text("corpus/io/load_checkpoint_helper_missing_older_release_captured.txt"))
    assert h.rule == "io.saved_by_other_torch" and h.category == "serialization_error"
    fixes = _fixes(h.fixes)
    assert "Upgrade PyTorch" in fixes and "_use_new_zipfile_serialization=False" in fixes


def test_prose_about_a_2_6_release_failing_to_unpickle_is_the_weights_only_default() -> None:
    h = _hit_text(_dev_fresh4("f4c-phyddle-torch26-unpickle-intermediate"))
    assert h.rule == "io.weights_only_other" and h.category == "serialization_error"
    assert "weights_only=False" in _fixes(h.fixes)


def test_bare_invalid_load_key_of_pretrained_weights_leads_with_an_incomplete_file() -> None:
    d = Engine().diagnose(_dev_fresh4("f4c-shufflenet-invalid-load-key-partial-download"))
    assert d.category == "serialization_error"
    assert d.hypotheses[0].cause.startswith("The file is truncated")


# --- 5. backward twice: spiking layers keep state; a duplicate backward ---------------------------------------------

def test_backward_twice_through_spiking_layers_resets_them_first() -> None:
    h = _hit_text(_dev_fresh4("f4c-sew-resnet-backward-twice-reset-net"))
    assert h.rule == "autograd.backward_twice"
    assert "reset_net" in (h.fixes[0].code or "")


def test_plain_backward_twice_offers_removing_a_duplicate_call_but_no_reset() -> None:
    h = _hit_text(_BACKWARD_TWICE)
    assert h.rule == "autograd.backward_twice"
    fixes = _fixes(h.fixes)
    assert "duplicate" in fixes and "reset_net" not in fixes


# --- 6. a prose report with pasted code: a call whose error-looking word is a string argument is not the error line ---

def test_code_line_with_a_backend_string_is_not_taken_for_the_error_line() -> None:
    f = parse_failure(_dev_fresh4("f4b-distributedsampler-same-order-set-epoch"))
    assert 'backend="nccl"' not in f.message.splitlines()[0]


def test_error_line_quoting_a_word_is_still_the_error_line() -> None:
    text = "I start the job and then\n" + _PORT_IN_USE.splitlines()[-1] + "\nany idea?\n"
    assert "EADDRINUSE" in parse_failure(text).message


def test_distributed_sampler_without_set_epoch_gets_set_epoch() -> None:
    d = Engine().diagnose(_dev_fresh4("f4b-distributedsampler-same-order-set-epoch"))
    assert d.category == "dataloader_error"
    assert "set_epoch(epoch)" in _fixes(d.fixes)
