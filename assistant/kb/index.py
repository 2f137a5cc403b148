"""The on-disk retrieval index: chunk metadata + a FAISS inner-product index + a manifest.

Built on first use into ``$TORCHHELP_HOME/index`` and rebuilt when the knowledge changes (the
manifest records the model, the dimension, and a hash of the documents). A cheap fingerprint of
file paths, sizes and modification times avoids re-reading the documents on every start.

The index looks after itself:

* every file's size and CRC-32 is recorded in the manifest and checked on load; a damaged index
  is rebuilt with a one-line note instead of failing every run until ``kb build``;
* builds hold an exclusive lock (``index.lock`` beside the index folder: the folder itself is
  swapped whole), so concurrent first runs wait for one build and then load it;
* a home that cannot be written moves the index to a private temporary folder (or, failing
  that, to a lexical-only index in memory), with a note;
* a rebuild reuses the vectors of unchanged chunks, so ``kb add`` embeds only what is new;
* the wheel ships an index of its own documents (``kb.shipped``): a home without documents of its
  own loads it in place, and builds reuse its vectors (only the user's documents are embedded).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import socket
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from assistant.errors import KnowledgeError
from assistant.kb.documents import (
    Chunk, Document, builtin_knowledge_dir, chunk_document, corpus_hash, load_builtin, load_user_docs,
)
from assistant.kb.encoder import DEFAULT_ENCODER, DIMENSION, MODEL_NAME, encoder_id, get_encoder

log = logging.getLogger(__name__)

INDEX_VERSION = 4  # 4: per-file checksums in the manifest
REUSABLE_VERSIONS = (3, 4)  # indexes whose vectors a rebuild may reuse
INDEX_FILES = ("chunks.json", "docs.json", "vectors.faiss")
LOCK_NAME = "index.lock"
BUILD_PREFIX = ".index-"  # a build's temporary folder, renamed to index/ when complete
BUILDER_FILE = "builder.json"  # in that folder: the building process (pid, host, start time)
STALE_BUILD_AGE = 3600.0  # seconds before another machine's build folder counts as abandoned
SOURCES_NAME = ".sources.json"  # in user_docs: copy name -> the file it came from
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
    # The verified bytes of vectors.faiss: deserialised on first use, so a build swapping the folder
    # in between cannot hand us vectors that belong to other chunks.
    vector_bytes: bytes | None = field(default=None, repr=False)
    notes: tuple[str, ...] = ()  # what happened while loading (a repair, a fallback home)
    lexical: dict | None = field(default=None, repr=False)  # the BM25 postings written at build time (None: build them from the chunks)

    @property
    def has_dense(self) -> bool:
        return self.vectors_path is not None

    def faiss_index(self) -> object:
        """The dense index, read on first use: importing faiss costs a fifth of a second, and most
        diagnoses (a confident rule named the documents) never need it."""
        if self._faiss is None:
            import faiss
            import numpy as np

            try:
                if self.vector_bytes is not None:
                    index = faiss.deserialize_index(np.frombuffer(self.vector_bytes, dtype="uint8"))
                else:
                    index = faiss.read_index(str(self.vectors_path))
            except RuntimeError as exc:  # faiss reports damaged files as RuntimeError
                raise KnowledgeError(f"the dense index at {self.vectors_path} is unreadable ({str(exc).splitlines()[-1][:200]})") from None
            if index.d != DIMENSION or index.ntotal != len(self.chunks):
                raise KnowledgeError(f"the index at {self.vectors_path} does not match its chunks; run `torchhelp kb build`")
            self._faiss = index
        return self._faiss


class IndexDamaged(Exception):
    """An index file is missing, truncated or altered (internal: always repaired, never shown raw)."""


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


def _checksum(data: bytes) -> dict:
    # CRC-32 finds truncation, garbage and flipped bits at ~1 GB/s; this guards against accidents,
    # not against someone who can write the cache (they could rewrite the manifest too).
    return {"size": len(data), "crc32": zlib.crc32(data)}


def ensure_index(home: Path, dense: bool = True, encoder_kind: str = DEFAULT_ENCODER, progress: Progress | None = None, force: bool = False) -> LoadedIndex:
    """Load the index, building, repairing or rebuilding it first when needed.

    A home with no documents of its own and no index of its own (or a stale one) loads the index
    shipped in the package when it matches the knowledge documents and the encoder: nothing is built.
    """
    knowledge = builtin_knowledge_dir()
    fingerprint = _fingerprint(knowledge, user_docs_dir(home))
    shipped_why: str | None = None
    _sweep_if_idle(home)
    if not force:
        found = _load_current(index_dir(home), fingerprint, dense, encoder_kind)
        if isinstance(found, LoadedIndex):
            return found
        if found is None and not _has_user_docs(home):
            shipped, shipped_why = load_shipped(knowledge, dense, encoder_kind)
            if shipped is not None:
                return shipped
    root, notes = _writable_root(home)
    if root is None:  # nowhere to write: index in memory, lexical only
        _note(notes, "the knowledge index is kept in memory for this run (lexical retrieval only)")
        return _in_memory(load_documents(home), fingerprint, notes)
    if root != home and not force:
        found = _load_current(index_dir(root), fingerprint, dense, encoder_kind)
        if isinstance(found, LoadedIndex):
            found.notes = tuple(notes)
            return found
    with _build_lock(root):
        return _ensure_locked(home, root, fingerprint, dense, encoder_kind, progress, force, notes, shipped_why)


def _has_user_docs(home: Path) -> bool:
    """Whether the user docs folder holds a document the index would read."""
    from assistant.kb.documents import USER_DOC_SUFFIXES

    folder = user_docs_dir(home)
    return folder.is_dir() and any(p.suffix.lower() in USER_DOC_SUFFIXES and p.is_file() for p in folder.iterdir())


def load_shipped(knowledge: Path, dense: bool, encoder_kind: str = DEFAULT_ENCODER) -> tuple[LoadedIndex | None, str | None]:
    """The index shipped in the package, read in place, if it stands for ``knowledge`` with this encoder;
    else (None, why) — why is None when the package ships no index."""
    from assistant.kb import shipped

    manifest = shipped.read_manifest()
    if manifest is None:
        return None, None
    why = shipped.mismatch(manifest, knowledge, dense, encoder_id(encoder_kind))
    if why is not None:
        return None, why
    try:
        return _load_verified(shipped.shipped_dir(), manifest, dense), None
    except IndexDamaged as exc:
        return None, f"it is damaged ({exc})"


def _ensure_locked(
    home: Path, root: Path, fingerprint: str, dense: bool, encoder_kind: str, progress: Progress | None, force: bool, notes: list[str],
    shipped_why: str | None = None,
) -> LoadedIndex:
    idir = index_dir(root)
    damage: str | None = None
    if not force:
        found = _load_current(idir, fingerprint, dense, encoder_kind)  # another process may have built it while we waited
        if isinstance(found, LoadedIndex):
            found.notes = tuple(notes)
            return found
        damage = found
    docs = load_documents(home)
    chash = corpus_hash(docs)
    manifest = _read_manifest(idir)
    reuse: list[LoadedIndex] = []
    if not force and damage is None and manifest and manifest.get("version") == INDEX_VERSION:
        if manifest.get("knowledge_hash") == chash and (not dense or (manifest.get("dense") and manifest.get("encoder") == encoder_id(encoder_kind))):
            try:  # same content, touched files: no rebuild, only a new fingerprint
                loaded = _load_verified(idir, manifest, dense)
            except IndexDamaged as exc:
                damage = str(exc)
            else:
                manifest["fingerprint"] = fingerprint
                _refresh_manifest(idir, loaded, manifest)
                loaded.notes = tuple(notes)
                return loaded
    if not force and damage is None and dense:
        reuse = [r for r in (_reusable(idir, encoder_kind), _reusable(index_dir(home), encoder_kind) if root != home else None, _reusable_shipped(encoder_kind)) if r]
    if damage:
        _note(notes, f"the knowledge index was damaged ({damage}); rebuilding it")
    if shipped_why:  # a checkout whose documents were edited: said once, on stderr (the build makes the home's index current)
        from assistant.kb.shipped import BUILD_SCRIPT

        log.warning("torchhelp: note: the index shipped with torchhelp does not fit: %s; building a local one (to refresh it: python %s)", shipped_why, BUILD_SCRIPT)
    _build_into(root, home, docs, dense=dense, encoder_kind=encoder_kind, progress=progress, fingerprint=fingerprint, knowledge_hash=chash, reuse=reuse)
    try:
        loaded = _load_verified(idir, _read_manifest(idir) or {}, dense)
    except IndexDamaged as exc:  # written a moment ago: the disk itself is failing
        raise KnowledgeError(f"the index just written to {idir} does not read back ({exc})") from None
    loaded.notes = tuple(notes)
    return loaded


def build(
    home: Path, docs: list[Document] | None = None, dense: bool = True, encoder_kind: str = DEFAULT_ENCODER,
    progress: Progress | None = None, fingerprint: str | None = None, knowledge_hash: str | None = None,
) -> dict:
    """Rebuild the index from scratch (every chunk embedded again), under the build lock."""
    root, notes = _writable_root(home)
    if root is None:
        raise KnowledgeError(f"cannot write the knowledge index: {notes[-1] if notes else home}")
    with _build_lock(root):
        manifest = _build_into(root, home, docs, dense, encoder_kind, progress, fingerprint, knowledge_hash, None)
    manifest["notes"] = notes
    manifest["index_dir"] = str(index_dir(root))
    return manifest


def _build_into(
    root: Path, home: Path, docs: list[Document] | None, dense: bool, encoder_kind: str, progress: Progress | None,
    fingerprint: str | None, knowledge_hash: str | None, reuse: list[LoadedIndex] | None,
) -> dict:
    """Write a complete index into a temp folder of ``root``, then swap it in (caller holds the lock)."""
    docs = docs if docs is not None else load_documents(home)
    chunks = [c for d in docs for c in chunk_document(d)]
    if not chunks:
        raise KnowledgeError("no knowledge documents to index")
    idir = index_dir(root)
    remove_stale_builds(root)
    tmp = Path(tempfile.mkdtemp(prefix=BUILD_PREFIX, dir=root))
    try:
        _write_bytes(tmp / BUILDER_FILE, _json_bytes({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}))
        started = time.perf_counter()
        has_dense = False
        embedded = reused = 0
        files: dict[str, dict] = {}
        if dense:
            vectors, embedded, reused = _vectors(chunks, encoder_kind, progress, reuse)
            import faiss  # lazy: ~0.3 s import

            index = faiss.IndexFlatIP(DIMENSION)
            index.add(vectors)
            files["vectors.faiss"] = _write_bytes(tmp / "vectors.faiss", faiss.serialize_index(index).tobytes())
            has_dense = True
        files["chunks.json"] = _write_bytes(tmp / "chunks.json", _json_bytes([asdict(c) for c in chunks]))
        files["docs.json"] = _write_bytes(tmp / "docs.json", _json_bytes([asdict(DocInfo(d.id, d.title, d.category, d.path, d.signatures, d.origin)) for d in docs]))
        from assistant.kb.lexical import BM25

        # The lexical postings too: building them at every start costs more than reading them.
        files["lexical.json"] = _write_bytes(tmp / "lexical.json", _json_bytes(BM25([c.text for c in chunks]).to_data()))
        manifest = {
            "version": INDEX_VERSION, "model": MODEL_NAME, "encoder": encoder_id(encoder_kind) if dense else None, "dimension": DIMENSION,
            "model_key": _model_key() if dense else None,
            "knowledge_hash": knowledge_hash or corpus_hash(docs),
            "fingerprint": fingerprint or _fingerprint(builtin_knowledge_dir(), user_docs_dir(home)),
            "documents": len(docs), "chunks": len(chunks), "dense": has_dense, "files": files,
            "embedded": embedded, "reused": reused, "build_id": uuid.uuid4().hex[:12],
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "build_seconds": round(time.perf_counter() - started, 2),
        }
        _write_bytes(tmp / "manifest.json", _json_bytes(manifest))
        (tmp / BUILDER_FILE).unlink()  # the record says who is building: the index itself does not need it
        old = idir.with_name(idir.name + ".old")
        _remove(old)
        if idir.exists() or idir.is_symlink():
            idir.rename(old)
        tmp.rename(idir)
        _remove(old)
        return manifest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _vectors(chunks: list[Chunk], encoder_kind: str, progress: Progress | None, reuse: list[LoadedIndex] | None):
    """One float32 row per chunk, in chunk order; rows of unchanged chunks are copied from ``reuse``
    (the previous index first, then the shipped one).

    A chunk is unchanged when a previous index has the same id with the same text (the encoder
    sees only the text), so the result equals a full rebuild while only new text is embedded.
    """
    import numpy as np

    out = np.zeros((len(chunks), DIMENSION), dtype="float32")
    todo = list(range(len(chunks)))
    for source in reuse or ():
        old_rows = {c.id: (i, c.text) for i, c in enumerate(source.chunks)}
        keep = [(i, old_rows[chunks[i].id][0]) for i in todo if chunks[i].id in old_rows and old_rows[chunks[i].id][1] == chunks[i].text]
        if keep:
            old = source.faiss_index()
            old_vectors = old.reconstruct_n(0, old.ntotal)  # type: ignore[attr-defined]
            out[[i for i, _ in keep]] = old_vectors[[j for _, j in keep]]
        kept = {i for i, _ in keep}
        todo = [i for i in todo if i not in kept]
    if todo:
        if progress:
            progress("embedding", 0, len(todo))
        encoder = get_encoder(encoder_kind)
        done = [0]

        def step(n: int) -> None:
            done[0] += n
            if progress:
                progress("embedding", done[0], len(todo))

        out[todo] = np.asarray(encoder.encode([chunks[i].text for i in todo], progress=step), dtype="float32")
    return out, len(todo), len(chunks) - len(todo)


def _reusable(idir: Path, encoder_kind: str) -> LoadedIndex | None:
    """The previous index when its vectors can stand in for new embeddings (same model and encoder)."""
    manifest = _read_manifest(idir)
    if not manifest or manifest.get("version") not in REUSABLE_VERSIONS or not manifest.get("dense"):
        return None
    if manifest.get("model") != MODEL_NAME or manifest.get("encoder") != encoder_id(encoder_kind) or manifest.get("dimension") != DIMENSION:
        return None
    try:
        previous = _load_verified(idir, manifest, dense=True)
        previous.faiss_index()
    except (IndexDamaged, KnowledgeError):
        return None
    return previous


def _reusable_shipped(encoder_kind: str) -> LoadedIndex | None:
    """The shipped index when its vectors can stand in for new embeddings (same encoder, same model files)."""
    from assistant.kb import shipped

    manifest = shipped.read_manifest()
    if not manifest or manifest.get("version") != INDEX_VERSION or not manifest.get("dense") or manifest.get("encoder") != encoder_id(encoder_kind):
        return None
    if manifest.get("dimension") != DIMENSION or manifest.get("model_key") != shipped.model_identity():
        return None
    try:
        found = _load_verified(shipped.shipped_dir(), manifest, dense=True)
        found.faiss_index()
    except (IndexDamaged, KnowledgeError):
        return None
    return found


def _model_key() -> str | None:
    """The embedding model's identity recorded in a dense index's manifest (None: not installed)."""
    from assistant.kb.shipped import model_identity

    return model_identity()


def _load_current(idir: Path, fingerprint: str, dense: bool, encoder_kind: str = DEFAULT_ENCODER) -> LoadedIndex | str | None:
    """The index if it is current and intact; else why not: a damage report, or None (absent or stale).

    Vectors made by another encoder are stale: query and document vectors must come from one encoder."""
    if not (idir / "manifest.json").exists():
        return None
    manifest = _read_manifest(idir)
    if manifest is None:
        return "manifest.json is unreadable"
    if manifest.get("version") != INDEX_VERSION or manifest.get("fingerprint") != fingerprint:
        return None
    if dense and (not manifest.get("dense") or manifest.get("encoder") != encoder_id(encoder_kind)):
        return None
    try:
        return _load_verified(idir, manifest, dense)
    except IndexDamaged as exc:
        return str(exc)


def _load_verified(idir: Path, manifest: dict, dense: bool) -> LoadedIndex:
    """Read the index files, checking each against the manifest's size and CRC (when it has them)."""
    expected = manifest.get("files")
    if manifest.get("version") == INDEX_VERSION and not isinstance(expected, dict):
        raise IndexDamaged("the manifest lists no checksums")
    want = ["chunks.json", "docs.json"] + (["vectors.faiss"] if dense and manifest.get("dense") else [])
    if isinstance(expected, dict) and "lexical.json" in expected:  # indexes built before it existed rebuild the postings in memory
        want.append("lexical.json")
    data: dict[str, bytes] = {}
    for name in want:
        try:
            data[name] = (idir / name).read_bytes()
        except FileNotFoundError:
            raise IndexDamaged(f"{name} is missing") from None
        except OSError as exc:
            raise IndexDamaged(f"{name} cannot be read: {exc.strerror}") from None
        if isinstance(expected, dict):
            record = expected.get(name)
            if not isinstance(record, dict):
                raise IndexDamaged(f"the manifest does not describe {name}")
            if record.get("size") != len(data[name]):
                raise IndexDamaged(f"{name} has {len(data[name])} bytes, expected {record.get('size')}")
            if record.get("crc32") != zlib.crc32(data[name]):
                raise IndexDamaged(f"{name} fails its checksum")
    try:
        chunks = [Chunk(**{**c, "signatures": tuple(c.get("signatures", ()))}) for c in json.loads(data["chunks.json"])]
        docs = {d["id"]: DocInfo(**{**d, "signatures": tuple(d["signatures"])}) for d in json.loads(data["docs.json"])}
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise IndexDamaged(f"chunks.json or docs.json does not parse ({type(exc).__name__})") from None
    vectors = data.get("vectors.faiss")
    if vectors is not None and len(vectors) < 4 * DIMENSION * len(chunks):
        raise IndexDamaged("vectors.faiss is shorter than its chunks need")
    lexical = None
    if "lexical.json" in data:
        try:
            lexical = json.loads(data["lexical.json"])
        except ValueError:
            raise IndexDamaged("lexical.json does not parse") from None
    return LoadedIndex(chunks, docs, manifest, idir / "vectors.faiss" if vectors is not None else None, vector_bytes=vectors, lexical=lexical)


def _refresh_manifest(idir: Path, loaded: LoadedIndex, manifest: dict) -> None:
    """Record a new fingerprint; a home we cannot write only costs a content check next time."""
    try:
        _write_bytes(idir / "manifest.json", _json_bytes(manifest))
    except OSError:
        pass
    loaded.manifest = manifest


def _in_memory(docs: list[Document], fingerprint: str, notes: list[str]) -> LoadedIndex:
    """A lexical-only index that is never written (the home and the temp folder are both read-only)."""
    chunks = [c for d in docs for c in chunk_document(d)]
    if not chunks:
        raise KnowledgeError("no knowledge documents to index")
    manifest = {
        "version": INDEX_VERSION, "model": MODEL_NAME, "encoder": None, "dimension": DIMENSION, "knowledge_hash": corpus_hash(docs),
        "fingerprint": fingerprint, "documents": len(docs), "chunks": len(chunks), "dense": False, "in_memory": True,
    }
    info = {d.id: DocInfo(d.id, d.title, d.category, d.path, d.signatures, d.origin) for d in docs}
    return LoadedIndex(chunks, info, manifest, None, notes=tuple(notes))


# -- where the index may be written, and the build lock --------------------------------------------


def _writable_root(home: Path) -> tuple[Path | None, list[str]]:
    """The folder to build in: the home, else a private temp folder, else None; notes say why."""
    notes: list[str] = []
    problem = _unwritable(home)
    if problem is None:
        return home, notes
    fallback = _fallback_home(home)
    if fallback is not None and _unwritable(fallback) is None:
        _note(notes, f"{home} is not writable ({problem}); the knowledge index lives in {fallback} instead")
        return fallback, notes
    _note(notes, f"{home} is not writable ({problem}) and neither is the temporary folder")
    return None, notes


def _unwritable(root: Path) -> str | None:
    """Why an index cannot be built under ``root`` (None when it can): the folder and its lock file."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        with open(root / LOCK_NAME, "a"):  # the real reason first: read-only file system, permission denied
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    if not os.access(root, os.W_OK | os.X_OK):  # a lock file left writable in a folder that no longer is
        return "Permission denied"
    return None


def _fallback_home(home: Path) -> Path | None:
    """A per-user, per-home folder under the temp dir, kept between runs so the index is built once.

    The temp dir is shared: the folder is used only if it is ours, a real directory and private.
    """
    try:
        base = Path(tempfile.gettempdir()) / f"torchhelp-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
        base.mkdir(mode=0o700, exist_ok=True)
        st = base.lstat()
        import stat

        if not stat.S_ISDIR(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()) or st.st_mode & 0o077:
            return None
        return base / hashlib.sha256(str(home).encode()).hexdigest()[:12]
    except OSError:
        return None


@contextmanager
def _build_lock(root: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``root/index.lock`` (blocks while another process builds)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: builds still swap atomically, only concurrent first runs may race
        yield
        return
    with open(root / LOCK_NAME, "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def remove_stale_builds(root: Path) -> list[Path]:
    """Remove the temporary folders that builds killed part-way left in ``root``; return them.

    Call it holding the build lock. Every build writes its folder under that lock, so a folder
    seen then belongs to a build that died (SIGKILL, the OOM killer, a power cut) before swapping
    it in. The builder's record is checked too, for homes where the lock may not reach every
    machine (NFS): a folder whose builder is a live process of this machine is kept (for a day, in
    case the pid was reused), and one from another machine while it is under an hour old.
    """
    removed: list[Path] = []
    for folder in root.glob(BUILD_PREFIX + "*"):
        if folder.is_dir() and not folder.is_symlink() and _is_stale(folder):
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                removed.append(folder)
    if removed:
        log.info("torchhelp: removed %d folder(s) left by a knowledge build that was killed: %s", len(removed), ", ".join(f.name for f in removed))
    return removed


def _is_stale(folder: Path) -> bool:
    try:
        record = json.loads((folder / BUILDER_FILE).read_bytes())
        age = time.time() - folder.stat().st_mtime
    except (OSError, ValueError):
        return True  # killed before it wrote its record (or by a version that wrote none)
    if not isinstance(record, dict):
        return True
    if record.get("host") == socket.gethostname() and isinstance(record.get("pid"), int):
        return not _alive(record["pid"]) or age > 86400
    return age > STALE_BUILD_AGE


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: another user's live process
        return True
    return True


def _sweep_if_idle(home: Path) -> None:
    """On load: remove a killed build's folders when no build is running (the lock is free); never wait."""
    if not any(home.glob(BUILD_PREFIX + "*")):
        return
    try:
        import fcntl
    except ImportError:
        return
    try:
        with open(home / LOCK_NAME, "a") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return  # a build is running: its folder is not ours to judge now
            try:
                remove_stale_builds(home)
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    except OSError:  # a read-only home: nothing to remove there either
        return


def _note(notes: list[str], text: str) -> None:
    """Record a note and show it once (logging's last-resort handler prints warnings on stderr)."""
    notes.append(text)
    log.warning("torchhelp: note: %s", text)


# -- files -----------------------------------------------------------------------------------------


def _read_manifest(idir: Path) -> dict | None:
    try:
        manifest = json.loads((idir / "manifest.json").read_bytes())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def _remove(path: Path) -> None:
    """Delete a folder or a stray file (a damaged index may be either)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _json_bytes(data: object) -> bytes:
    return json.dumps(data, ensure_ascii=False).encode("utf-8")


def _write_bytes(path: Path, data: bytes) -> dict:
    """Write atomically (temp file + rename) and return the file's checksum record."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return _checksum(data)


def add_user_documents(home: Path, paths: list[Path]) -> list[Path]:
    """Copy user documents into the user docs folder (the index picks them up on the next load).

    Re-adding a file that was added before (same source path) replaces its copy, so the index
    replaces its chunks; a different file with the same name gets a suffixed copy.
    """
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
    sources = _read_sources(target)
    for f in files:
        read_user_doc(f)  # fail early on unreadable files
        origin = str(f.resolve())
        dest = target / f.name
        if sources.get(dest.name, origin) != origin or (dest.name not in sources and dest.exists() and dest.read_bytes() != f.read_bytes()):
            dest = target / f"{f.stem}-{hashlib.sha256(origin.encode()).hexdigest()[:6]}{f.suffix}"
        shutil.copyfile(f, dest)
        sources[dest.name] = origin
        added.append(dest)
    _write_bytes(target / SOURCES_NAME, _json_bytes(sources))
    return added


def _read_sources(target: Path) -> dict[str, str]:
    """Which source file each user document was copied from (empty for folders from older versions)."""
    try:
        data = json.loads((target / SOURCES_NAME).read_bytes())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
