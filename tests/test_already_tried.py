"""Fixes the user says they already tried are not offered again (real dev reports)."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT

from assistant import diagnose
from assistant.parse.tried import already_tried


def _dev(case_id: str) -> str:
    for path in sorted((ROOT / "eval" / "realworld").glob("dev*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row["id"] == case_id:
                return row["error_text"]
    raise AssertionError(case_id)


def test_a_report_that_says_lowering_the_learning_rate_did_not_help_gets_no_learning_rate_fix() -> None:
    text = _dev("f3c-siamese-nan-loss-python2-int-division")
    assert already_tried(text) == {"learning_rate"}
    d = diagnose(text)
    shown = " ".join(f"{f.title} {f.detail} {f.code or ''}" for h in d.hypotheses for f in h.fixes) + " ".join(f"{f.title} {f.detail}" for f in d.fixes)
    assert "learning rate" not in shown.lower() and d.fixes
    assert any("already tried" in n and "learning rate" in n for n in d.notes)


@pytest.mark.parametrize("text, topics", [
    ("Reducing the batch size did not help, it still runs out of memory.", {"batch_size"}),
    ("I have already tried num_workers=0 and the worker still dies.", {"workers"}),
    ("We reinstalled the NVIDIA driver twice, no luck.", {"driver", "reinstall"}),  # "no luck" marks the attempt
    ("I set lr = 1e-4 and batch_size = 8 for this run.", set()),  # values given, nothing said to be tried
    ("  File \"train.py\", line 12, in <module>\n    optimizer = Adam(params, lr=args.lr)\nRuntimeError: did not help", set()),
])
def test_what_counts_as_already_tried(text: str, topics: set[str]) -> None:
    assert already_tried(text) == topics


def test_a_fix_list_is_never_emptied() -> None:
    from assistant.compose.already_tried import leave_out_tried
    from assistant.types import Diagnosis, Fix, Hypothesis

    only = (Fix("Lower the learning rate", "Use a smaller learning rate with warm-up."),)
    d = Diagnosis("nan_inf", "t", "s", "c", only, (), (), 0.9, hypotheses=(Hypothesis("h", "c", 0.8, "", only),))
    out = leave_out_tried(d, "Lowering the learning rate did not help.")
    assert out.fixes == only and out.hypotheses[0].fixes == only and out.notes == ()
