"""Never confidently wrong (issue 11, items 1 and 2).

1. A flatten/Linear mismatch read from text alone states a C×H×W factorisation only when the text
   pins it down; otherwise it gives the two numbers and says how to see the real shape.
2. Generic next steps cite the general debugging guide or nothing — never whatever was retrieved,
   and never a team runbook that does not contain that advice.
"""

from __future__ import annotations

import json
import re
import traceback
from pathlib import Path

import pytest
import torch
from torch import nn

from assistant import diagnose, rules
from assistant.compose.deterministic import GENERAL_GUIDE
from assistant.parse.messages import flatten_candidates, flatten_explanations, int_hints
from assistant.parse import parse_failure
from assistant.settings import load_settings
from conftest import CAPTURES

ROOT = Path(__file__).resolve().parents[1]
_FACTORISATION = re.compile(r"\d+×\d+×\d+")
GENERIC_STEPS = {"Start at the last frame in your own code", "Make a minimal reproduction", "Collect the environment",
                 "Rule out asynchronous CUDA reporting"}


def _dev(report_id: str) -> str:
    """The error text of one real dev report."""
    for name in ("dev.jsonl", "dev_fresh.jsonl"):
        for line in (ROOT / "eval" / "realworld" / name).read_text().splitlines():
            if line.strip() and json.loads(line)["id"] == report_id:
                return json.loads(line)["error_text"]
    raise KeyError(report_id)


def _raise_text(fn) -> str:  # type: ignore[no-untyped-def]
    """Run a failing snippet and return its real traceback text."""
    try:
        fn()
    except RuntimeError:
        return traceback.format_exc()
    raise AssertionError("snippet did not fail")


def _matmul_hit(text: str):  # type: ignore[no-untyped-def]
    hit = rules.match(parse_failure(text), strict=True).hit
    assert hit is not None and hit.rule == "shapes.matmul", hit
    return hit


# ---- item 1: factorisations only when the text determines them -----------------------------------


def test_candidates_are_usually_several() -> None:
    # The case: 32×14×14 = 6272 into a Linear built for 32×6×6 = 1152; 128×7×7 vs 128×3×3 fits too.
    assert (32, 14, 6) in flatten_candidates(6272, 1152) and (128, 7, 3) in flatten_candidates(6272, 1152)
    assert flatten_explanations(6272, 1152) == []  # no hints -> no claim


@pytest.mark.parametrize("got, expected", [(2048, 1568), (6272, 1152), (64, 18496), (8192, 2048), (18, 512)])
def test_no_hints_no_factorisation(got: int, expected: int) -> None:
    assert flatten_explanations(got, expected, int_hints("return self.classifier(x)")) == []


def test_captured_flatten_failure_is_ambiguous() -> None:
    """The real capture's text (`return self.classifier(x)`) fits 32×8×8 vs 32×7×7 and 8×16×16 vs 8×14×14."""
    stderr = next(c for c in CAPTURES if c["slug"] == "linear-after-conv-flatten")["stderr"]
    hit = _matmul_hit(stderr)
    assert len(flatten_candidates(2048, 1568)) > 1
    assert not _FACTORISATION.search(hit.full_cause), hit.full_cause
    assert "2048" in hit.full_cause and "1568" in hit.full_cause
    assert "print(x.shape)" in hit.full_cause and "torchhelp run" in hit.full_cause


@pytest.mark.parametrize("report_id", ["hybridsn-old-size-mismatch-cuda", "pytorchbook-old-size-mismatch-jupyter",
                                       "datasetgan-mat1-mat2-latent-transpose"])
def test_dev_reports_claim_no_factorisation(report_id: str) -> None:
    """Real reports whose text says nothing of the feature map (one is really a transposed latent)."""
    hit = _matmul_hit(_dev(report_id))
    assert not _FACTORISATION.search(hit.full_cause), hit.full_cause
    assert "torchhelp run" in hit.full_cause


def test_channel_count_in_failing_line_determines_it() -> None:
    # The failing line builds the conv (32 channels) and the head (32 * 6 * 6): 6272 can only be 32×14×14 here.
    text = _raise_text(lambda: nn.Linear(32 * 6 * 6, 10)(nn.Conv2d(1, 32, 3)(torch.randn(8, 1, 16, 16)).flatten(1)))
    hit = _matmul_hit(text)
    assert "32×14×14 (got) vs 32×6×6 (expected)" in hit.full_cause, hit.full_cause
    assert "128×7×7" not in hit.full_cause


def test_feature_map_shape_in_failing_line_determines_it() -> None:
    text = _raise_text(lambda: nn.Sequential(nn.Flatten(), nn.Linear(8192, 10))(torch.randn(4, 8, 30, 30)))
    hit = _matmul_hit(text)
    assert "8×30×30 (got) vs 8×32×32 (expected)" in hit.full_cause, hit.full_cause


def test_product_sizes_and_paths_are_not_hints() -> None:
    """`m1: [2 x 64], m2: [18496 x 256]` must not count 64 or 2 as a channel count read from the text."""
    hit = _matmul_hit(_dev("hybridsn-old-size-mismatch-cuda"))
    assert "16×2×2" not in hit.full_cause and "4×4×4" not in hit.full_cause


# ---- item 2: generic next steps cite the general guide or nothing ---------------------------------


def _generic_citations(d) -> set[str]:  # type: ignore[no-untyped-def]
    return {s for f in d.fixes if f.title in GENERIC_STEPS for s in f.sources}


# A real message (torch 2.13, this machine) that no rule reads and no document quotes (the error atlas knows its check).
EINSUM = "RuntimeError: einsum(): subscript j has size 4 for operand 1 which does not broadcast with previously seen size 3"


@pytest.mark.parametrize("text", [
    EINSUM,
    _dev("san-invalid-gradient-custom-backward"),  # a custom extension's error
    _dev("detr-eval-same-boxes-all-images"),  # prose, no error line
    "loss is stuck at 2.302",  # the report
])
def test_generic_steps_cite_only_the_general_guide(text: str, settings) -> None:  # type: ignore[no-untyped-def]
    d = diagnose(text, settings=settings)
    if d.decision.get("abstained"):
        assert d.category == "unknown" and any(f.title in GENERIC_STEPS for f in d.fixes)
    assert _generic_citations(d) <= {GENERAL_GUIDE}, [(f.title, f.sources) for f in d.fixes]
    source_ids = {s.id for s in d.sources}
    assert all(s in source_ids for f in d.fixes for s in f.sources)


# An error from the user's own code that neither PyTorch (the atlas), a rule nor a document knows.
UNCOVERED = ('Traceback (most recent call last):\n  File "/home/u/x.py", line 3, in <module>\n    frob()\n'
             "FrobError: the zorbulator refused to frobnicate the widget\n")


def test_a_message_nothing_covers_is_unknown_with_the_general_steps(settings) -> None:  # type: ignore[no-untyped-def]
    d = diagnose(UNCOVERED, settings=settings)
    assert d.category == "unknown" and d.decision["abstained"] and d.confidence < 0.3
    assert any(f.title in GENERIC_STEPS for f in d.fixes)


RUNBOOK = """# Cluster NFS dataloader runbook

Our training jobs read data from the shared NFS mount. When a job dies with
"Function AggregationRefpadBackward returned an invalid gradient at index 0 - got ... but expected
shape compatible with ...", or the loss stops improving, check the storage first: a half-written
file gives tensors of the wrong shape to the AggregationRefpad backward.

## Fix
Copy the dataset to the node's local scratch directory before training and point the data root there.
"""


def test_user_runbook_is_not_cited_for_generic_steps(tmp_path: Path) -> None:
    from assistant.kb.index import add_user_documents

    home = tmp_path / "home"
    runbook = tmp_path / "cluster-nfs-dataloader.md"
    runbook.write_text(RUNBOOK)
    add_user_documents(home, [runbook])
    settings = load_settings(env={"TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0"}, llm="none")
    d = diagnose(_dev("san-invalid-gradient-custom-backward"), settings=settings)
    assert "user:cluster-nfs-dataloader" in {s.id for s in d.sources}  # retrieved, so the test means something
    for f in d.fixes:
        if "user:cluster-nfs-dataloader" in f.sources:  # only advice the runbook itself gives may cite it
            assert f.title not in GENERIC_STEPS and f.title.lower() in RUNBOOK.lower(), f.title
    if d.category == "unknown":
        assert _generic_citations(d) <= {GENERAL_GUIDE}
