"""The on-disk retrieval index: chunk metadata + a FAISS inner-product index + a manifest.

Built on first use into ``$TORCHHELP_HOME/index`` and rebuilt when the knowledge changes (the
manifest records the model, the dimension, and a hash of the documents). A cheap fingerprint of
file paths, sizes and modification times avoids re-reading the documents on every start.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from collections.abc import Callable

from assistant.errors import KnowledgeError
from assistant.kb.documents import (
    Chunk, Document, builtin_knowledge_dir, chunk_document, corpus_hash, load_builtin, load_user_docs,
)
from assistant.kb.encoder import DIMENSION, MODEL_NAME, get_encoder

INDEX_VERSION = 3
Progress = Callable[[str, int, int], None]  # (stage, done, total)


@dataclass(frozen=True)
class DocInfo:
    """What retrieval needs to know about a document without re-reading it."""

    id: str
    title: str
    category: str
    path: str
    signatures: tuple[str, ...]
    origin: str


@dataclass
class LoadedIndex:
    """Chunks, document table and (optionally) the dense vectors, ready for search."""

    chunks: list[Chunk]
    docs: dict[str, DocInfo]
    manifest: dict
    vectors_path: Path | None  # the FAISS file; None when dense search is disabled or unavailable
    _faiss: object | None = None

    @property
    def has_dense(self) -> bool:
        return self.vectors_path is not None

    def faiss_index(self) -> object:
        """The dense index, read on first use: importing faiss costs a fifth of a second, and most
        diagnoses (a confident rule named the documents) never need it."""
        if self._faiss is None:
            import faiss

            index = faiss.read_index(str(self.vectors_path))
            if index.d != DIMENSION or index.ntotal != len(self.chunks):
                raise KnowledgeError(f"the index at {self.vectors_path} does not match its chunks; run `torchhelp kb build`")
            self._faiss = index
        return self._faiss


def user_docs_dir(home: Path) -> Path:
    return home / "user_docs"


def index_dir(home: Path) -> Path:
    return home / "index"


def _fingerprint(knowledge: Path, user_dir: Path) -> str:
    h = hashlib.sha256()
    for root in (knowledge, user_dir):
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*")):
            if p.is_file():
                st = p.stat()
                h.update(f"{p.relative_to(root)}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def load_documents(home: Path) -> list[Document]:
    """Built-in and user documents together."""
    return load_builtin() + load_user_docs(user_docs_dir(home))


def ensure_index(home: Path, dense: bool = True, encoder_kind: str = "numpy", progress: Progress | None = None, force: bool = False) -> LoadedIndex:
    """Load the index, building or rebuilding it first when needed."""
    knowledge = builtin_knowledge_dir()
    idir = index_dir(home)
    fingerprint = _fingerprint(knowledge, user_docs_dir(home))
    manifest = _read_manifest(idir)
    if not force and manifest and manifest.get("version") == INDEX_VERSION and manifest.get("fingerprint") == fingerprint:
        if not dense or manifest.get("dense"):
            return _load(idir, manifest, dense)
    docs = load_documents(home)
    chash = corpus_hash(docs)
    if not force and manifest and manifest.get("version") == INDEX_VERSION and manifest.get("knowledge_hash") == chash and (manifest.get("dense") or not dense):
        manifest["fingerprint"] = fingerprint  # same content, touched files: no rebuild
        _write_json(idir / "manifest.json", manifest)
        return _load(idir, manifest, dense)
    build(home, docs, dense=dense, encoder_kind=encoder_kind, progress=progress, fingerprint=fingerprint, knowledge_hash=chash)
    return _load(idir, _read_manifest(idir) or {}, dense)


def build(
    home: Path, docs: list[Document] | None = None, dense: bool = True, encoder_kind: str = "numpy",
    progress: Progress | None = None, fingerprint: str | None = None, knowledge_hash: str | None = None,
) -> dict:
    """(Re)build the index atomically: write into a temp folder, then swap it in."""
    docs = docs if docs is not None else load_documents(home)
    chunks = [c for d in docs for c in chunk_document(d)]
    if not chunks:
        raise KnowledgeError("no knowledge documents to index")
    idir = index_dir(home)
    idir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".index-", dir=idir.parent))
    try:
        started = time.perf_counter()
        has_dense = False
        if dense:
            import faiss  # lazy: ~0.3 s import
            import numpy as np

            encoder = get_encoder(encoder_kind)
            done = [0]

            def step(n: int) -> None:
                done[0] += n
                if progress:
                    progress("embedding", done[0], len(chunks))

            vectors = np.asarray(encoder.encode([c.text for c in chunks], progress=step), dtype="float32")
            index = faiss.IndexFlatIP(vectors.shape[1])
            index.add(vectors)
            faiss.write_index(index, str(tmp / "vectors.faiss"))
            has_dense = True
        _write_json(tmp / "chunks.json", [asdict(c) for c in chunks])
        _write_json(tmp / "docs.json", [asdict(DocInfo(d.id, d.title, d.category, d.path, d.signatures, d.origin)) for d in docs])
        manifest = {
            "version": INDEX_VERSION, "model": MODEL_NAME, "encoder": encoder_kind if dense else None, "dimension": DIMENSION,
            "knowledge_hash": knowledge_hash or corpus_hash(docs),
            "fingerprint": fingerprint or _fingerprint(builtin_knowledge_dir(), user_docs_dir(home)),
            "documents": len(docs), "chunks": len(chunks), "dense": has_dense,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "build_seconds": round(time.perf_counter() - started, 2),
        }
        _write_json(tmp / "manifest.json", manifest)
        old = idir.with_name(idir.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if idir.exists():
            idir.rename(old)
        tmp.rename(idir)
        shutil.rmtree(old, ignore_errors=True)
        return manifest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _load(idir: Path, manifest: dict, dense: bool) -> LoadedIndex:
    try:
        chunks = [Chunk(**{**c, "signatures": tuple(c.get("signatures", ()))}) for c in json.loads((idir / "chunks.json").read_text())]
        docs = {d["id"]: DocInfo(**{**d, "signatures": tuple(d["signatures"])}) for d in json.loads((idir / "docs.json").read_text())}
    except (OSError, ValueError, TypeError) as exc:
        raise KnowledgeError(f"the index at {idir} is unreadable ({exc}); run `torchhelp kb build`") from None
    vectors = idir / "vectors.faiss"
    if dense and manifest.get("dense") and not vectors.is_file():
        raise KnowledgeError(f"the index at {idir} has no dense vectors; run `torchhelp kb build`")
    return LoadedIndex(chunks, docs, manifest, vectors if dense and manifest.get("dense") else None)


def _read_manifest(idir: Path) -> dict | None:
    try:
        return json.loads((idir / "manifest.json").read_text())
    except (OSError, ValueError):
        return None


def _write_json(path: Path, data: object) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False))
    os.replace(tmp, path)


def add_user_documents(home: Path, paths: list[Path]) -> list[Path]:
    """Copy user documents into the user docs folder (the index picks them up on the next load)."""
    from assistant.kb.documents import USER_DOC_SUFFIXES, read_user_doc

    target = user_docs_dir(home)
    target.mkdir(parents=True, exist_ok=True)
    added: list[Path] = []
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(q for q in p.rglob("*") if q.is_file() and q.suffix.lower() in USER_DOC_SUFFIXES))
        elif p.is_file():
            if p.suffix.lower() not in USER_DOC_SUFFIXES:
                raise KnowledgeError(f"{p}: unsupported document type (use {', '.join(USER_DOC_SUFFIXES)})")
            files.append(p)
        else:
            raise KnowledgeError(f"no such file or directory: {p}")
    for f in files:
        read_user_doc(f)  # fail early on unreadable files
        dest = target / f.name
        if dest.exists() and dest.read_bytes() != f.read_bytes():
            dest = target / f"{f.stem}-{hashlib.sha256(str(f.resolve()).encode()).hexdigest()[:6]}{f.suffix}"
        shutil.copyfile(f, dest)
        added.append(dest)
    return added
