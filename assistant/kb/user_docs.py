"""The user's own documents (``torchhelp kb add``): listing them and removing one.

They live as copies in ``$TORCHHELP_HOME/user_docs`` (``kb.index.add_user_documents``), with
``.sources.json`` naming the file each copy came from. Removing one deletes its copy and its
``.sources.json`` entry; the next index load rebuilds the home's index without its chunks, and that
rebuild reuses every other chunk's vectors (the home's previous index, then the shipped one), so
nothing is embedded again. A home left with no documents of its own loads the shipped index in place.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from assistant.errors import KnowledgeError
from assistant.kb.documents import USER_DOC_SUFFIXES, Document, chunk_document, read_user_doc
from assistant.kb.index import SOURCES_NAME, _json_bytes, _read_sources, _write_bytes, user_docs_dir
from assistant.types import USER_DOC_PREFIX


@dataclass(frozen=True)
class UserDocument:
    """One document the user added, as ``kb list`` shows it."""

    id: str
    title: str
    path: str  # the file it was added from (its copy when that is not recorded)
    copy: str  # the copy the index reads, under user_docs
    added: str  # when it was added (the copy's modification time, UTC, ISO 8601)
    chunks: int

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _copies(home: Path) -> list[Path]:
    """The document copies in the user docs folder, sorted by name (the files the index reads)."""
    folder = user_docs_dir(home)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in USER_DOC_SUFFIXES)


def _describe(copy: Path, doc: Document, sources: dict[str, str]) -> UserDocument:
    """A copy and its document as a ``kb list`` row."""
    added = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(copy.stat().st_mtime))
    return UserDocument(doc.id, doc.title, sources.get(copy.name, str(copy)), str(copy), added, len(chunk_document(doc)))


def list_user_documents(home: Path) -> list[UserDocument]:
    """Every document the user added to this home, by file name (an unreadable copy is skipped)."""
    sources = _read_sources(user_docs_dir(home))
    out: list[UserDocument] = []
    for copy in _copies(home):
        try:
            out.append(_describe(copy, read_user_doc(copy), sources))
        except (OSError, KnowledgeError):
            continue
    return out


def _matches(doc: UserDocument, key: str) -> bool:
    """Whether ``key`` names ``doc``: its id (with or without ``user:``), its copy's file name, or either path."""
    wanted = {key, key if key.startswith(USER_DOC_PREFIX) else USER_DOC_PREFIX + key}
    if doc.id in wanted or Path(doc.copy).name == key:
        return True
    resolved = str(Path(key).expanduser().resolve())
    return resolved in (str(Path(doc.path).resolve()), str(Path(doc.copy).resolve()))


def find_user_document(home: Path, key: str) -> UserDocument:
    """The user document ``key`` names; a KnowledgeError (one line) when none does."""
    key = key.strip()
    found = [d for d in list_user_documents(home) if key and _matches(d, key)]
    if not found:
        raise KnowledgeError(f"no user document {key!r} in {user_docs_dir(home)} (`torchhelp kb list` shows the ids and paths)")
    return found[0]


def remove_user_document(home: Path, key: str) -> UserDocument:
    """Delete the user document ``key`` names (its copy and its source entry); the index drops its chunks on next load."""
    doc = find_user_document(home, key)
    copy = Path(doc.copy)
    try:
        copy.unlink()
    except OSError as exc:
        raise KnowledgeError(f"cannot remove {copy}: {exc.strerror or exc}") from None
    folder = user_docs_dir(home)
    sources = _read_sources(folder)
    if sources.pop(copy.name, None) is not None:
        _write_bytes(folder / SOURCES_NAME, _json_bytes(sources))
    return doc
