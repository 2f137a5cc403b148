"""The calibrated decision and the case base: what is proposed, how it is decided, where it comes from."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT

from assistant import diagnose
from assistant.decide.features import FEATURES
from assistant.decide.model import MODES, load_fitted
from assistant.eval.examples import example_text
from assistant.kb.cases import CLOSE, case_from_report, cases_path, load_casebase, mask, read_cases, signature_of

DEV_PARTS = tuple(sorted(p.name for p in (ROOT / "eval" / "realworld").glob("dev*.jsonl")))  # every dev part, old and new
TEST_PARTS = tuple(sorted(p.name for p in (ROOT / "eval" / "realworld").glob("test*.jsonl")))
# A real message (torch 2.13 on this machine) that no rule reads and no document quotes (the error atlas knows its check).
EINSUM = "RuntimeError: einsum(): subscript j has size 4 for operand 1 which does not broadcast with previously seen size 3"


def _rows(names: tuple[str, ...]) -> list[dict]:
    folder = ROOT / "eval" / "realworld"
    return [json.loads(line) for n in names for line in (folder / n).read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("mode", MODES)
def test_the_fit_matches_the_features_and_is_monotone(mode: str) -> None:
    fitted = load_fitted(mode)
    assert len(fitted.weights) == len(FEATURES)
    assert list(fitted.calib_y) == sorted(fitted.calib_y), "the calibration must be monotone"
    assert 0.0 < fitted.abstain_below < 1.0
    assert fitted.meta["fitted_on"].startswith("dev split only")


def test_the_case_base_is_the_dev_split_only_and_rebuilds_identically() -> None:
    cases = read_cases(cases_path())
    dev, test = {r["id"] for r in _rows(DEV_PARTS)}, {r["id"] for r in _rows(TEST_PARTS)}
    assert {c.id for c in cases} == dev and not {c.id for c in cases} & test
    rebuilt = [case_from_report(r) for r in sorted(_rows(DEV_PARTS), key=lambda r: r["id"])]
    assert [(c.id, c.signature, c.category) for c in rebuilt] == [(c.id, c.signature, c.category) for c in cases], \
        "knowledge/cases/resolved.jsonl is not what scripts/build_casebase.py writes"


def test_masking_keeps_names_and_how_a_process_died() -> None:
    assert mask("No module named 'flash_attn' at /usr/lib/python3/x.py:12") == "No module named 'flash_attn' at <path>:<n>"
    assert "exitcode_m9" in mask("exitcode  : -9 (pid: 25582)")
    assert signature_of("blah\nRuntimeError:\n  CUDA error: out of memory\n") .startswith("RuntimeError: CUDA error: out of memory")


def test_a_near_duplicate_of_a_resolved_report_is_shown_with_its_link(settings) -> None:  # type: ignore[no-untyped-def]
    report = next(r for r in _rows(("dev.jsonl",)) if r["id"] == "san-invalid-gradient-custom-backward")
    base = load_casebase()
    closest = base.search(report["error_text"], k=1)[0]
    assert closest.case.id == report["id"] and closest.similarity > 0.95
    assert not any(s.case.id == report["id"] for s in base.search(report["error_text"], exclude=[report["id"]]))
    d = diagnose(report["error_text"], settings=settings)
    assert d.similar and d.similar[0].link == report["source"] and d.similar[0].similarity >= CLOSE
    assert d.to_dict()["similar_reports"][0]["link"] == report["source"]


def test_a_message_nothing_covers_is_answered_with_a_low_likelihood(settings) -> None:  # type: ignore[no-untyped-def]
    """Without the atlas nothing reads the einsum message: whatever retrieval proposes is a guess, and says so."""
    from dataclasses import replace

    d = diagnose(EINSUM, settings=replace(settings, atlas=False))
    assert d.confidence < 0.3 and "PyTorch's own check" not in d.decision["basis"] and not d.raised_by


def test_the_check_that_raised_a_message_no_document_quotes_names_its_family(settings) -> None:  # type: ignore[no-untyped-def]
    """The same message with the atlas: the einsum check that raised it is a size check, and the answer stands on it."""
    d = diagnose(EINSUM, settings=settings)
    assert d.category == "shape_mismatch" and d.confidence >= 0.6 and "PyTorch's own check" in d.decision["basis"]
    assert d.raised_by and "einsum" in json.dumps(d.to_dict()["raised_by"])


def test_a_rule_reading_with_agreeing_evidence_is_confident(settings) -> None:  # type: ignore[no-untyped-def]
    d = diagnose(example_text("captured/cpu/linear-after-conv-flatten"), settings=settings)
    assert d.category == "shape_mismatch" and d.rule is not None and d.confidence >= 0.8
    assert d.decision["ranked"][0]["category"] == "shape_mismatch" and "rule" in d.decision["basis"]


def test_a_rule_reading_stands_against_a_generic_document_signature(settings) -> None:  # type: ignore[no-untyped-def]
    """A None reaching default_collate: the collate rule read the frames; a generic NoneType document does not outweigh it."""
    d = diagnose(example_text("captured/cpu/collate-none-mid-batch-short-clip"), settings=settings)
    assert d.category == "dataloader_error" and d.rule is not None


def test_a_family_no_rule_reads_is_answered_from_its_document(settings) -> None:  # type: ignore[no-untyped-def]
    """A real message (torch 2.13) that no rule reads but a document covers: its causes become the ranked hypotheses."""
    run = subprocess.run([sys.executable, "-c", "import torch; torch.cdist(torch.zeros(2, 3), torch.zeros(2, 4))"], capture_output=True, text=True, timeout=120)
    assert "must have the same number of columns" in run.stderr
    d = diagnose(run.stderr, settings=settings)
    assert d.rule is None and d.category == "shape_mismatch"
    assert d.hypotheses and all(h.check for h in d.hypotheses)
    assert d.fixes and all(f.sources for f in d.fixes)


_TOKENIZED = """import torch
from torch.utils.data import DataLoader, Dataset
class Tokenized(Dataset):  # a tokenizer's output per sample: [1, length]
    def __len__(self): return 4
    def __getitem__(self, i): return torch.ones(1, 3 + i, dtype=torch.long)
next(iter(DataLoader(Tokenized(), batch_size=4)))
"""


def test_the_padding_fix_works_on_the_shapes_the_tool_read(settings) -> None:  # type: ignore[no-untyped-def]
    """A real collate failure with [1, L] samples: the suggested collate_fn, run on tensors of the shapes the answer read, batches them."""
    import torch

    run = subprocess.run([sys.executable, "-c", _TOKENIZED], capture_output=True, text=True, timeout=120)
    assert "stack expects each tensor to be equal size" in run.stderr
    d = diagnose(run.stderr, settings=settings)
    assert d.category == "dataloader_error" and d.facts.shapes[:2] == ((1, 3), (1, 4))
    code = next(f.code for f in d.fixes if f.code and "def pad_collate" in f.code)
    scope: dict = {"torch": torch, "DataLoader": lambda *a, **k: None, "ds": None}
    exec(code, scope)  # the documented fix, as shown to the user
    batch = [torch.ones(*shape, dtype=torch.long) for shape in d.facts.shapes[:2]]
    assert tuple(scope["pad_collate"](batch).shape) == (2, 1, 4)
