"""Retrieval: the right knowledge document in the top 3 for each captured failure, hybrid search,
the offline encoder, the index manifest and rebuilds, and user documents."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from assistant.kb.documents import chunk_document, load_builtin
from assistant.parse import parse_failure
from assistant.engine import build_query
from assistant.types import CATEGORIES
from conftest import CAPTURES, ROOT, capture_ids

SEEDS = ROOT.parent / "shared" / "seeds"


@pytest.mark.parametrize("capture", CAPTURES, ids=capture_ids(CAPTURES))
def test_right_document_in_top3(capture: dict, retriever) -> None:  # type: ignore[no-untyped-def]
    failure = parse_failure(capture["stderr"])
    passages = retriever.search(build_query(failure, None), k=3, signature_text=failure.search_text)
    cats = [p.category for p in passages]
    assert capture["category"] in cats, [p.doc_id for p in passages]


def test_knowledge_base_covers_every_category() -> None:
    docs = load_builtin()
    assert len(docs) >= 35
    covered = {d.category for d in docs}
    assert set(CATEGORIES) <= covered, set(CATEGORIES) - covered
    for d in docs:
        sections = {c.section.lower() for c in chunk_document(d)}
        assert {"symptoms", "causes", "fixes", "example"} <= sections, d.id


def test_numpy_encoder_matches_sentence_transformers() -> None:
    pytest.importorskip("sentence_transformers")
    import numpy as np

    from assistant.kb.encoder import NumpyMiniLM, SentenceTransformerEncoder

    texts = ["RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", "mat1 and mat2 shapes cannot be multiplied (4x7200 and 8192x10)", "how do I debug NaN losses?" * 40]
    a = NumpyMiniLM().encode(texts)
    b = SentenceTransformerEncoder().encode(texts)
    assert a.shape == b.shape == (3, 384)
    assert np.min(np.sum(a * b, axis=1)) > 0.9999


def test_hybrid_beats_or_matches_each_half(retriever) -> None:  # type: ignore[no-untyped-def]
    def top3_hits(mode: str) -> int:
        n = 0
        for c in CAPTURES:
            f = parse_failure(c["stderr"])
            ps = retriever.search(build_query(f, None), k=3, mode=mode, signature_text=f.search_text)
            n += c["category"] in [p.category for p in ps]
        return n

    hybrid = top3_hits("hybrid")
    assert hybrid >= top3_hits("lexical") and hybrid >= top3_hits("dense")


def test_manifest_and_rebuild_on_knowledge_change(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from assistant.kb import documents, index

    knowledge = tmp_path / "knowledge"
    shutil.copytree(ROOT / "knowledge" / "memory", knowledge / "memory")
    monkeypatch.setattr(index, "builtin_knowledge_dir", lambda: knowledge)
    monkeypatch.setattr(documents, "builtin_knowledge_dir", lambda: knowledge)
    home = tmp_path / "home"
    first = index.ensure_index(home, dense=False)
    manifest = json.loads((home / "index" / "manifest.json").read_text())
    assert manifest["model"] == "all-MiniLM-L6-v2" and manifest["dimension"] == 384 and manifest["knowledge_hash"]
    built_at = manifest["built_at"]
    # Unchanged knowledge: loaded, not rebuilt.
    again = index.ensure_index(home, dense=False)
    assert again.manifest["knowledge_hash"] == manifest["knowledge_hash"]
    # Touching a file without changing it keeps the content hash.
    doc = next(knowledge.rglob("*.md"))
    doc.write_text(doc.read_text())
    assert index.ensure_index(home, dense=False).manifest["knowledge_hash"] == manifest["knowledge_hash"]
    # Changing content rebuilds.
    doc.write_text(doc.read_text() + "\n\nExtra paragraph about expandable segments.\n")
    rebuilt = index.ensure_index(home, dense=False)
    assert rebuilt.manifest["knowledge_hash"] != manifest["knowledge_hash"]
    assert len(first.chunks) >= 1 and built_at


@pytest.mark.skipif(not SEEDS.is_dir(), reason="seed documents not available in this checkout")
def test_kb_add_seed_documents(tmp_path: Path) -> None:
    from assistant.kb.index import add_user_documents, ensure_index
    from assistant.kb.retrieve import Retriever

    home = tmp_path / "home"
    added = add_user_documents(home, [SEEDS])
    assert len(added) == len(list(SEEDS.iterdir()))
    loaded = ensure_index(home, dense=False)
    user_docs = [d for d in loaded.docs.values() if d.origin == "user"]
    assert len(user_docs) == len(added)
    r = Retriever(loaded)
    # The FAQ seed (reStructuredText) answers the old out-of-memory wording.
    hits = r.search("cuda runtime error(2): out of memory accumulate history total_loss", k=5, mode="lexical")
    assert any(p.doc_id.startswith("user:") for p in hits)


def test_kb_add_rejects_unsupported_files(tmp_path: Path) -> None:
    from assistant.errors import KnowledgeError
    from assistant.kb.index import add_user_documents

    bad = tmp_path / "model.pt"
    bad.write_bytes(b"\x00\x01")
    with pytest.raises(KnowledgeError):
        add_user_documents(tmp_path / "home", [bad])
    with pytest.raises(KnowledgeError):
        add_user_documents(tmp_path / "home", [tmp_path / "missing.md"])
