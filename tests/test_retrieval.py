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
    assert len(docs) >= 250
    covered = {d.category for d in docs}
    assert set(CATEGORIES) <= covered, set(CATEGORIES) - covered
    for d in docs:
        sections = {c.section.lower() for c in chunk_document(d)}
        assert {"symptoms", "causes", "fixes"} <= sections, d.id  # an Example section is welcome, not required


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


# --- incremental `kb add` (issue 11, item 9) ------------------------------------------------------

QUERIES = (
    "CUDA out of memory. Tried to allocate 2.00 GiB", "zorblax quota exceeded on scratch", "reserved but unallocated memory fragmentation",
    "DefaultCPUAllocator: can't allocate memory", "how do I clean the scratch volume", "expandable_segments",
)


def _small_knowledge(tmp_path: Path, monkeypatch) -> Path:  # type: ignore[no-untyped-def]
    from assistant.kb import documents, index

    knowledge = tmp_path / "knowledge"
    (knowledge / "memory").mkdir(parents=True)
    for name in ("cuda-oom.md", "cpu-oom.md"):
        shutil.copyfile(ROOT / "knowledge" / "memory" / name, knowledge / "memory" / name)
    monkeypatch.setattr(index, "builtin_knowledge_dir", lambda: knowledge)
    monkeypatch.setattr(documents, "builtin_knowledge_dir", lambda: knowledge)
    return knowledge


def _runbook(path: Path, extra: str = "") -> Path:
    path.write_text(
        f"# {path.stem} runbook\n\n## Quota exceeded on /scratch\n\nWhen jobs die with zorblax quota errors, clean /scratch/$USER.{extra}\n\n"
        "## Out of memory on the shared nodes\n\nCUDA out of memory on node gpu17 usually means another job holds the card; run nvidia-smi first.\n"
    )
    return path


def _same_results(a, b, modes: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    from assistant.kb.retrieve import Retriever

    ra, rb = Retriever(a), Retriever(b)
    assert [c.id for c in a.chunks] == [c.id for c in b.chunks]
    for q in QUERIES:
        for mode in modes:
            pa, pb = ra.search(q, k=5, mode=mode), rb.search(q, k=5, mode=mode)  # type: ignore[arg-type]
            assert [p.id for p in pa] == [p.id for p in pb], (q, mode)
            for x, y in zip(pa, pb, strict=True):
                assert abs(x.score - y.score) <= 1e-6 and abs(x.dense - y.dense) <= 1e-6, (q, mode, x.id)
        if "dense" in modes:
            da, db = ra._dense_scores(q), rb._dense_scores(q)
            assert max(abs(x - y) for x, y in zip(da, db, strict=True)) <= 1e-6, q


@pytest.mark.parametrize("dense", [False, True], ids=["lexical", "dense"])
def test_kb_add_is_incremental_and_matches_a_full_rebuild(dense: bool, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from assistant.kb.index import add_user_documents, ensure_index

    _small_knowledge(tmp_path, monkeypatch)
    zeta, alpha = _runbook(tmp_path / "zeta.md"), _runbook(tmp_path / "alpha.md")  # alpha sorts before zeta
    home = tmp_path / "home"
    base = ensure_index(home, dense=dense)
    add_user_documents(home, [zeta])
    one = ensure_index(home, dense=dense)
    add_user_documents(home, [alpha])
    both = ensure_index(home, dense=dense)
    if dense:
        assert one.manifest["reused"] == len(base.chunks) and one.manifest["embedded"] == len(one.chunks) - len(base.chunks)
        assert both.manifest["reused"] == len(one.chunks) and both.manifest["embedded"] == len(both.chunks) - len(one.chunks)
    assert ensure_index(home, dense=dense).manifest["build_id"] == both.manifest["build_id"]  # the next load does not rebuild
    scratch = tmp_path / "scratch"
    add_user_documents(scratch, [zeta, alpha])
    full = ensure_index(scratch, dense=dense, force=True)
    assert full.manifest["knowledge_hash"] == both.manifest["knowledge_hash"]
    _same_results(both, full, ("lexical", "dense", "hybrid") if dense else ("lexical", "hybrid"))


def test_re_adding_a_changed_file_replaces_its_chunks(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from assistant.kb.index import add_user_documents, ensure_index

    _small_knowledge(tmp_path, monkeypatch)
    doc = _runbook(tmp_path / "runbook.md")
    home = tmp_path / "home"
    add_user_documents(home, [doc])
    first = ensure_index(home, dense=True)
    _runbook(doc, extra=" Ask #hpc-help for a quota raise.")
    added = add_user_documents(home, [doc])
    assert [p.name for p in added] == ["runbook.md"]  # the same copy, replaced
    second = ensure_index(home, dense=True)
    texts = [c.text for c in second.chunks if c.doc_id == "user:runbook"]
    assert any("#hpc-help" in t for t in texts) and len(texts) == len([c for c in first.chunks if c.doc_id == "user:runbook"])
    assert second.manifest["embedded"] == 1  # only the changed section
    scratch = tmp_path / "scratch"
    add_user_documents(scratch, [doc])
    _same_results(second, ensure_index(scratch, dense=True, force=True), ("lexical", "dense", "hybrid"))


def test_stored_lexical_postings_score_like_a_fresh_build(retriever) -> None:  # type: ignore[no-untyped-def]
    """The BM25 postings read from the index give exactly the scores of building them from the chunk texts."""
    from assistant.kb.lexical import BM25

    texts = [c.text for c in retriever.index.chunks]
    fresh, stored = BM25(texts), BM25.from_data(BM25(texts).to_data())
    for query in ("CUDA out of memory. Tried to allocate", "mat1 and mat2 shapes cannot be multiplied", "DataLoader worker exited unexpectedly"):
        assert stored.scores(query) == fresh.scores(query)
    # Read back lazily, the postings still write out whole (an index rebuilt from a loaded one loses nothing).
    assert BM25.from_data(BM25.from_data(fresh.to_data()).to_data()).to_data() == fresh.to_data()


@pytest.mark.parametrize("automaton", [True, False], ids=["pyahocorasick", "without-pyahocorasick"])
def test_signature_hits_equal_a_substring_test_per_signature(retriever, automaton: bool, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The one-pass matcher finds exactly what testing every signature as a substring finds, in the same order
    (longest first, ties in the documents' own order), on real dev reports and captures; a repeated text is answered
    from memory and a different one is not. Where pyahocorasick is missing (the GPU machines' image) the plain test
    stands in with the same answers."""
    import sys

    if automaton:
        pytest.importorskip("ahocorasick")  # a dependency; missing only on images that lack it (the GPU machines')
    else:
        monkeypatch.setitem(sys.modules, "ahocorasick", None)  # `import ahocorasick` raises ImportError
    monkeypatch.setattr(retriever, "_automaton", None)
    monkeypatch.setattr(retriever, "_sig_memo", None)
    assert (retriever._sig_automaton() is not None) == automaton

    def by_substring(text: str) -> list[str]:
        low = text.lower()
        found: dict[str, int] = {}
        for sig, doc in retriever._sigs:
            if sig in low:
                found[doc] = max(found.get(doc, 0), len(sig))
        return sorted(found, key=lambda d: -found[d])

    texts = [json.loads(line)["error_text"] for part in ("dev.jsonl", "dev_fresh2.jsonl")
             for line in (ROOT / "eval" / "realworld" / part).read_text(encoding="utf-8").splitlines() if line.strip()]
    texts += [c["stderr"] for c in CAPTURES]
    matched = 0
    for text in texts:
        hits = retriever.signature_hits(text)
        assert hits == by_substring(text)
        assert retriever.signature_hits(text) == hits  # from memory
        matched += bool(hits)
    assert matched >= len(texts) // 3  # the test sees real matches, not only empty lists
