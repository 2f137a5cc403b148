"""Families tuned on the dev_fresh6 reports (tuner f6a), read from real texts.

Every text is real: a report of the dev_fresh6 split or a message printed by torch 2.13 on this machine (captured in
eval/corpus).
"""

from __future__ import annotations

from pathlib import Path

from tuned_support import dev_reader, fix_text as _fixes, hit_of as _hit_text

ROOT = Path(__file__).resolve().parents[1]


_dev_fresh6 = dev_reader("dev_fresh6")


def test_jit_load_of_a_torch_save_file_is_the_wrong_loader_not_a_corrupt_file() -> None:
    text = (ROOT / "eval" / "corpus" / "io" / "jit_load_state_dict_constants_pkl_captured.txt").read_text(encoding="utf-8")
    found = _hit_text(text)
    assert found.rule == "io.not_torchscript"
    assert found.category == "serialization_error"
    assert "torch.jit.script" in _fixes(found.fixes[:1])


def test_libtorch_constants_pkl_report_reads_as_wrong_loader() -> None:
    found = _hit_text(_dev_fresh6("f6a-libtorch-constants-pkl-not-found"))
    assert found.rule == "io.not_torchscript"


def test_truncated_archive_is_still_read_as_corrupt() -> None:
    text = "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory"
    assert _hit_text(text).rule == "io.corrupt_zip"


def test_unknown_custom_op_on_jit_load_says_import_the_registering_package_first() -> None:
    found = _hit_text(_dev_fresh6("f6a-neuron-jit-load-unknown-builtin-op"))
    assert found.rule == "compile.torchscript_op_on_load"
    first = _fixes(found.fixes[:1])
    assert "before torch.jit.load" in first and "registers" in first
