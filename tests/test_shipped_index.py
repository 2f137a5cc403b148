"""The index shipped in the wheel (issue 21, "Speed of the first answer"): it is current with knowledge/,
a fresh home answers from it without building anything, ``kb add`` embeds only the user's documents,
an edited document in a checkout rebuilds with a one-line note, and the static encoder computes table
rows on demand from the shipped mean instead of distilling the whole table first."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT

REBUILD = "python scripts/build_shipped_index.py"
EXAMPLE = ROOT / "examples" / "linear_shape_mismatch.log"


def _stale(what: str) -> str:
    return f"the shipped index (assistant/kb/data/index) is stale: {what}. Run `{REBUILD}` and commit assistant/kb/data."


@pytest.fixture(scope="module")
def manifest() -> dict:
    from assistant.kb import shipped

    found = shipped.read_manifest()
    assert found is not None, _stale("it is missing")
    return found


# -- the committed index is current -----------------------------------------------------------------


def test_committed_shipped_index_matches_knowledge(manifest: dict) -> None:
    """Fails after a document edit (or a chunker, tokenizer or encoder change) until the index is rebuilt."""
    from assistant.kb import shipped
    from assistant.kb.documents import chunk_document, corpus_hash, load_builtin
    from assistant.kb.encoder import encoder_id
    from assistant.kb.lexical import BM25

    why = shipped.mismatch(manifest, ROOT / "knowledge", dense=False, encoder_id=encoder_id("static"))
    assert why is None, _stale(why or "")
    assert manifest["encoder"] == encoder_id("static"), _stale(f"built by encoder {manifest['encoder']}, the default is {encoder_id('static')}")
    docs = load_builtin(ROOT / "knowledge")
    assert manifest["knowledge_hash"] == corpus_hash(docs), _stale("the documents' hash differs")
    folder = shipped.shipped_dir()
    chunks = [c for d in docs for c in chunk_document(d)]
    stored = json.loads((folder / "chunks.json").read_bytes())
    fresh = json.loads(json.dumps([{**c.__dict__, "signatures": list(c.signatures)} for c in chunks]))
    assert stored == fresh, _stale("its chunks differ from chunking knowledge/ now")
    assert json.loads((folder / "lexical.json").read_bytes()) == json.loads(json.dumps(BM25([c.text for c in chunks]).to_data())), _stale("its BM25 postings differ")


def test_committed_vectors_match_the_encoder(manifest: dict) -> None:
    """A sample of the shipped vectors against the encoder in use (same model files)."""
    from assistant.kb import shipped
    from assistant.kb.encoder import get_encoder
    from assistant.kb.index import load_shipped

    key = shipped.model_identity()
    if key != manifest.get("model_key"):
        pytest.skip(f"another copy of the embedding model is installed ({key}); the shipped vectors are not used here")
    loaded, why = load_shipped(ROOT / "knowledge", dense=True)
    assert loaded is not None, _stale(why or "it does not load")
    sample = list(range(0, len(loaded.chunks), max(1, len(loaded.chunks) // 40)))
    index = loaded.faiss_index()
    stored = np.stack([index.reconstruct(i) for i in sample])  # type: ignore[attr-defined]
    fresh = get_encoder("static").encode([loaded.chunks[i].text for i in sample])
    assert np.abs(stored - fresh).max() < 1e-4, _stale("its vectors differ from the static encoder's")


def test_shipped_files_are_small_and_declared_as_package_data(manifest: dict) -> None:
    from assistant.kb import shipped

    total = sum(p.stat().st_size for p in shipped.DATA_DIR.rglob("*") if p.is_file())
    assert total < 15_000_000, f"assistant/kb/data holds {total / 1e6:.1f} MB"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"kb/data/index/*"' in pyproject and '"kb/data/*.json"' in pyproject


# -- a fresh home answers without building ---------------------------------------------------------


def _forbid_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.kb import index

    def no_build(*_a, **_k):  # type: ignore[no-untyped-def]
        raise AssertionError("the index was built")

    monkeypatch.setattr(index, "_build_into", no_build)


def test_fresh_home_loads_the_shipped_index_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.kb import shipped
    from assistant.kb.index import ensure_index
    from assistant.kb.retrieve import Retriever

    _forbid_builds(monkeypatch)
    home = tmp_path / "home"
    for dense in (False, True):
        loaded = ensure_index(home, dense=dense)
        assert loaded.manifest["shipped"] and loaded.notes == ()
        assert loaded.vectors_path is None or loaded.vectors_path.parent == shipped.shipped_dir()
    assert not home.exists()  # nothing built, nothing copied
    hits = Retriever(loaded).search("CUDA out of memory. Tried to allocate 2.00 GiB", k=3)
    assert hits and hits[0].doc_id.startswith("cuda-oom")
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert ensure_index(blocked / "home", dense=True).notes == ()  # an unwritable home needs no fallback either


def test_fresh_home_ask_builds_nothing(tmp_path: Path) -> None:
    """The README's example in a fresh home, as a real CLI run: an answer, no index written, no build line."""
    home = tmp_path / "home"
    env = {**os.environ, "TORCHHELP_HOME": str(home), "TORCHHELP_LLM": "none", "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "assistant", "ask", "--json", str(EXAMPLE)], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["category"] == "shape_mismatch"
    assert not (home / "index").exists() and not (home / "index.lock").exists()
    assert "embedding" not in res.stderr and "building" not in res.stderr, res.stderr


# -- user documents and edited documents -------------------------------------------------------------


def test_kb_add_embeds_only_the_users_documents(tmp_path: Path) -> None:
    from assistant.kb.index import add_user_documents, ensure_index
    from assistant.kb.retrieve import Retriever

    runbook = tmp_path / "scratch-runbook.md"
    runbook.write_text("# Scratch runbook\n\n## Quota exceeded on /scratch\n\nWhen jobs die with zorblax quota errors, clean /scratch/$USER.\n")
    home = tmp_path / "home"
    shipped_chunks = len(ensure_index(home, dense=True).chunks)
    add_user_documents(home, [runbook])
    grown = ensure_index(home, dense=True)
    assert grown.manifest["embedded"] == 1 and grown.manifest["reused"] == shipped_chunks == len(grown.chunks) - 1
    hits = Retriever(grown).search("zorblax quota exceeded", k=1, mode="dense")
    assert hits[0].doc_id == "user:scratch-runbook"


def test_edited_document_rebuilds_with_a_one_line_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from assistant.kb import documents, index

    knowledge = tmp_path / "knowledge"
    shutil.copytree(ROOT / "knowledge", knowledge)
    monkeypatch.setattr(index, "builtin_knowledge_dir", lambda: knowledge)
    monkeypatch.setattr(documents, "builtin_knowledge_dir", lambda: knowledge)
    home = tmp_path / "home"
    assert index.ensure_index(home, dense=True).manifest["shipped"]  # an identical copy: the shipped index stands
    doc = knowledge / "memory" / "cuda-oom.md"
    doc.write_text(doc.read_text() + "\n## Zorblax\n\nA zorblax allocator never frees its pool.\n")
    with caplog.at_level(logging.WARNING, logger="assistant.kb.index"):
        rebuilt = index.ensure_index(home, dense=True)
    notes = [r.getMessage() for r in caplog.records if "shipped" in r.getMessage()]
    assert len(notes) == 1 and "memory/cuda-oom.md" in notes[0] and "build_shipped_index.py" in notes[0], notes
    assert not rebuilt.manifest.get("shipped") and rebuilt.manifest["embedded"] < 5  # only the edited document's changed chunks
    assert any("zorblax" in c.text for c in rebuilt.chunks)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="assistant.kb.index"):
        again = index.ensure_index(home, dense=True)
    assert again.manifest["build_id"] == rebuilt.manifest["build_id"] and not caplog.records  # said once


def test_damaged_shipped_index_is_rebuilt_locally(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.kb import index, shipped

    copy = tmp_path / "data"
    shutil.copytree(shipped.DATA_DIR, copy)
    lexical = copy / "index" / "lexical.json"
    lexical.write_bytes(lexical.read_bytes()[:1000])
    monkeypatch.setattr(shipped, "DATA_DIR", copy)
    home = tmp_path / "home"
    size = json.loads((copy / "index" / "manifest.json").read_text())["files"]["lexical.json"]["size"]
    assert index.load_shipped(index.builtin_knowledge_dir(), dense=False)[1] == f"it is damaged (lexical.json has 1000 bytes, expected {size})"
    loaded = index.ensure_index(home, dense=False)
    assert not loaded.manifest.get("shipped") and (home / "index" / "lexical.json").is_file()


# -- the static encoder without its table ----------------------------------------------------------


def test_static_encoder_computes_rows_on_demand_from_the_shipped_mean(tmp_path: Path) -> None:
    from assistant.kb.encoder import get_encoder
    from assistant.kb.static import LazyTable, StaticMiniLM, shipped_mean

    texts = ["RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", "mat1 and mat2 shapes cannot be multiplied (4x7200 and 8192x10)"]
    lazy = StaticMiniLM(folder=tmp_path / "encoder")
    assert isinstance(lazy._table, LazyTable)
    reference = get_encoder("static").inner  # the distilled table where this machine has one
    vecs = lazy.encode(texts)
    assert np.abs(vecs - reference.encode(texts)).max() < 1e-5
    table_file = reference._dir / "table.npy" if reference._dir is not None else None
    if table_file is not None and table_file.is_file():
        assert np.array_equal(shipped_mean(reference._key), np.load(table_file, mmap_mode="r")[-1])
    stored = list((tmp_path / "encoder").rglob("rows.npz"))
    assert len(stored) == 1
    again = StaticMiniLM(folder=tmp_path / "encoder")  # rows come from the row store: no transformer
    assert np.array_equal(again.encode(texts), vecs) and again._table.computed == 0 and again._transformer is None
