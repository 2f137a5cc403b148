"""The whole engine on every captured failure: category, specific mentions, valid citations."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant import Diagnosis, diagnose
from assistant.types import CATEGORIES
from conftest import CAPTURES, capture_ids

CONTRACT_KEYS = {"category", "title", "summary", "cause", "fixes", "evidence", "sources", "confidence", "backend", "rule"}


@pytest.mark.parametrize("capture", CAPTURES, ids=capture_ids(CAPTURES))
def test_capture_is_diagnosed(capture: dict, settings, retriever) -> None:  # type: ignore[no-untyped-def]
    d = diagnose(capture["stderr"], settings=settings)
    assert d.category == capture["category"], (d.rule, d.title)
    answer = "\n".join([d.title, d.summary, d.cause, *(f"{f.title} {f.detail} {f.code or ''}" for f in d.fixes), *(e.text for e in d.evidence)]).lower()
    missing = [m for m in capture["must_mention"] if m.lower() not in answer]
    assert not missing, f"missing {missing}"
    for bad in capture.get("must_not_mention", []):
        assert bad.lower() not in answer
    source_ids = {s.id for s in d.sources}
    assert all(s in source_ids for f in d.fixes for s in f.sources), "every citation must be a retrieved source"
    assert set(source_ids) <= set(retriever.docs)
    # The matching knowledge document (one of the expected category) is among the sources.
    assert any(retriever.docs[s].category == capture["category"] for s in source_ids), sorted(source_ids)


def test_public_api_contract(settings, retriever) -> None:  # type: ignore[no-untyped-def]
    d = diagnose(CAPTURES[0]["stderr"], settings=settings)
    assert isinstance(d, Diagnosis)
    data = d.to_dict()
    assert CONTRACT_KEYS <= set(data)
    assert data["category"] in CATEGORIES
    assert 0.0 <= data["confidence"] <= 1.0
    assert all(set(f) >= {"title", "detail", "code"} for f in data["fixes"])
    assert all(set(e) == {"kind", "text"} for e in data["evidence"])
    assert all(set(s) == {"id", "title", "path", "score"} for s in data["sources"])
    assert data["backend"] == "none"


def test_unknown_failure_abstains(settings, retriever) -> None:  # type: ignore[no-untyped-def]
    # Not a PyTorch error at all, and no word of it is in the knowledge base: nothing retrieved is close.
    d = diagnose("Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\n    frobnicate()\nfoo.bar.QuuxFault: the zorbulator refused to frobnicate the widget", settings=settings)
    assert d.category == "unknown"
    assert d.confidence < 0.3
    assert d.fixes and d.rule is None


def test_signature_only_answer_comes_from_the_document(settings, retriever) -> None:  # type: ignore[no-untyped-def]
    # A documented message that no rule handles: answered from the document, with lower confidence.
    sig = next(s for d in retriever.docs.values() for s in d.signatures if "torchvision::nms" in s or "Failed to load PyTorch C extensions" in s)
    d = diagnose(f"SomeWrapperError: {sig} happened here", settings=settings)
    assert d.category != "unknown" or d.sources


def test_lexical_fallback_when_dense_is_off(settings) -> None:  # type: ignore[no-untyped-def]
    d = diagnose(CAPTURES[0]["stderr"], settings=settings.with_overrides(dense=False))
    assert d.category == CAPTURES[0]["category"] and d.sources


def test_typed_facts_reach_json_and_renderers(settings) -> None:  # type: ignore[no-untyped-def]
    """The rule's typed facts travel to the JSON contract and the renderers read them (no prose parsing)."""
    from assistant.render.markdown import render_markdown

    text = (Path(__file__).resolve().parents[1] / "examples" / "linear_shape_mismatch.log").read_text()
    d = diagnose(text, settings=settings)
    facts = d.to_dict()["facts"]
    assert facts["shapes"] == [[8, 2048], [1568, 10]] and facts["layer"] == "classifier"
    assert facts["numbers"]["in_features"] == 1568
    assert "8×2048 vs 1568×10" in render_markdown(d)
