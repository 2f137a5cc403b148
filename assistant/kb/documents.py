"""Knowledge documents on disk: where they live, how they are read, how they are split into chunks.

Our own documents are markdown with YAML front matter (see knowledge/README.md). Users may add
their own markdown, reStructuredText or plain-text files with ``torchhelp kb add``; those are read
best-effort (front matter optional) and split on their headings or paragraphs.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from assistant.errors import KnowledgeError
from assistant.types import USER_DOC_PREFIX

_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.S)
_MD_HEADING = re.compile(r"^(#{1,3})\s+(.+?)\s*#*\s*$", re.M)
_RST_UNDERLINE = re.compile(r"^(?P<title>[^\n]+)\n(?P<bar>[=\-~^\"'`#*+]{3,})\s*$", re.M)
MAX_CHUNK_WORDS = 320
# Sections that are data for the engine, not text to retrieve: the per-category first checks name every family
# at once, so as a passage they would match any error and say nothing about it.
NOT_RETRIEVED = frozenset({"first checks"})
USER_DOC_SUFFIXES = (".md", ".markdown", ".rst", ".txt")


@dataclass(frozen=True)
class Document:
    """One knowledge document."""

    id: str
    title: str
    category: str
    path: str
    body: str
    signatures: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    origin: str = "builtin"  # "builtin" | "user"


@dataclass(frozen=True)
class Chunk:
    """A retrievable piece of a document (usually one section)."""

    id: str
    doc_id: str
    title: str
    section: str
    path: str
    category: str
    text: str
    signatures: tuple[str, ...] = field(default=())


def builtin_knowledge_dir() -> Path:
    """The knowledge folder: the repository's ``knowledge/`` in a checkout, else the copy shipped in the wheel."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here.parent / "knowledge", here / "_knowledge"):
        if candidate.is_dir() and any(candidate.rglob("*.md")):
            return candidate
    raise KnowledgeError("the knowledge documents are missing (neither knowledge/ next to the package nor assistant/_knowledge)")


def load_builtin(directory: Path | None = None) -> list[Document]:
    """Read every knowledge document (README.md files excluded), sorted by id."""
    root = directory or builtin_knowledge_dir()
    docs = [_read_markdown(p, root, "builtin") for p in sorted(root.rglob("*.md")) if p.name.lower() != "readme.md"]
    seen: dict[str, str] = {}
    for d in docs:
        if d.id in seen:
            raise KnowledgeError(f"duplicate knowledge id {d.id!r} in {d.path} and {seen[d.id]}")
        seen[d.id] = d.path
    return sorted(docs, key=lambda d: d.id)


def load_user_docs(directory: Path) -> list[Document]:
    """Read user-added documents from the user docs folder (any supported suffix)."""
    if not directory.is_dir():
        return []
    out: list[Document] = []
    for p in sorted(directory.iterdir()):
        if p.suffix.lower() in USER_DOC_SUFFIXES and p.is_file():
            out.append(read_user_doc(p))
    return out


def read_user_doc(path: Path) -> Document:
    """Read one user document best-effort: front matter if present, title from the first heading."""
    raw = path.read_bytes().decode("utf-8", errors="replace")
    meta, body = _split_front_matter(raw)
    title = str(meta.get("title") or _first_heading(body, path.suffix) or path.stem)
    doc_id = USER_DOC_PREFIX + _slug(str(meta.get("id") or path.stem))
    return Document(
        id=doc_id, title=title, category=str(meta.get("category") or "user"), path=str(path), body=body,
        signatures=tuple(str(s) for s in _as_list(meta.get("signatures"))), tags=tuple(str(t) for t in _as_list(meta.get("tags"))), origin="user",
    )


def read_builtin(path: Path, root: Path | None = None) -> Document:
    """One of our own documents, read the way the index reads it."""
    return _read_markdown(path, root or builtin_knowledge_dir(), "builtin")


def _read_markdown(path: Path, root: Path, origin: str) -> Document:
    raw = path.read_text(encoding="utf-8")
    meta, body = _split_front_matter(raw)
    missing = [k for k in ("id", "title", "category") if not meta.get(k)]
    if missing:
        raise KnowledgeError(f"{path}: front matter lacks {', '.join(missing)}")
    return Document(
        id=str(meta["id"]), title=str(meta["title"]), category=str(meta["category"]),
        path=str(path.relative_to(root.parent)) if root.parent in path.parents else str(path), body=body,
        signatures=tuple(str(s) for s in _as_list(meta.get("signatures"))), tags=tuple(str(t) for t in _as_list(meta.get("tags"))), origin=origin,
    )


def _split_front_matter(raw: str) -> tuple[dict, str]:
    m = _FRONT_MATTER.match(raw.lstrip("\ufeff"))
    if not m:
        return {}, raw
    import yaml  # lazy: only needed when reading documents (index build, signature table)

    try:
        meta = yaml.safe_load(m.group(1)) or {}
    except yaml.YAMLError as exc:
        raise KnowledgeError(f"invalid front matter: {exc}") from None
    return (meta if isinstance(meta, dict) else {}), raw[m.end():]


def _as_list(value: object) -> list:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _first_heading(body: str, suffix: str) -> str | None:
    m = _MD_HEADING.search(body)
    if m:
        return m.group(2).strip()
    r = _RST_UNDERLINE.search(body)
    return r.group("title").strip() if r else None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


_STEP_MARK = re.compile(r"^\s*[-*]\s*step\s*:\s*[a-z]+\s*$", re.M | re.I)


def chunk_document(doc: Document) -> list[Chunk]:
    """Split a document into section chunks; long sections are split into word windows.

    Each chunk starts with the document title and section name so it is findable on its own.
    The Symptoms chunk also carries the signatures (exact error strings).
    """
    parts = sections(doc)
    chunks: list[Chunk] = []
    for heading, text in parts:
        if doc.origin == "builtin" and heading.strip().lower() in NOT_RETRIEVED:
            continue
        words = _STEP_MARK.sub("", text).split()  # a fix's "- step: diagnose" mark orders fixes; it is not content to match
        if not words:
            continue
        pieces = [words[i : i + MAX_CHUNK_WORDS] for i in range(0, len(words), MAX_CHUNK_WORDS)]
        for n, part in enumerate(pieces):
            sec_slug = _slug(heading) + (f"-{n + 1}" if len(pieces) > 1 else "")
            prefix = f"{doc.title}. {heading}."
            body = readable(" ".join(part))
            sigs = doc.signatures if heading.lower().startswith("symptom") and n == 0 else ()
            if sigs:
                body += "\nSignatures: " + " | ".join(sigs)
            chunks.append(Chunk(f"{doc.id}#{sec_slug}", doc.id, doc.title, heading, doc.path, doc.category, f"{prefix}\n{body}", sigs))
    if not chunks:
        chunks.append(Chunk(f"{doc.id}#body", doc.id, doc.title, "body", doc.path, doc.category, doc.title))
    return chunks


def sections(doc: Document) -> list[tuple[str, str]]:
    """(heading, text) per section, in order; text before the first heading is the "overview"."""
    body = doc.body
    if doc.path.endswith(".rst"):
        marks = list(_RST_UNDERLINE.finditer(body))
        spans = [(m.group("title").strip(), m.start(), m.end()) for m in marks]
    elif doc.path.endswith(".txt") and not _MD_HEADING.search(body):
        paras = [p.strip() for p in re.split(r"\n\s*\n", body) if p.strip()]
        return [("text", "\n".join(paras))]
    else:
        # Our own documents split on `##` only: `###` entries (causes, fixes) stay inside their section.
        # A `# comment` line inside a fenced code block (a team runbook's bash) is code, not a heading.
        fenced = fence_spans(body)
        spans = [(m.group(2).strip(), m.start(), m.end()) for m in _MD_HEADING.finditer(body)
                 if (len(m.group(1)) == 2 or doc.origin == "user") and not _inside(m.start(), fenced)]
    if not spans:
        return [("overview", body)]
    out: list[tuple[str, str]] = []
    lead = body[: spans[0][1]].strip()
    lead = _MD_HEADING.sub("", lead).strip()
    if lead:
        out.append(("overview", lead))
    for i, (title, _start, end) in enumerate(spans):
        stop = spans[i + 1][1] if i + 1 < len(spans) else len(body)
        out.append((title, body[end:stop].strip()))
    return out


_FENCE_BLOCK = re.compile(r"(?ms)^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)")


def fence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every fenced code block in markdown text (an unclosed fence runs to the end)."""
    return [m.span() for m in _FENCE_BLOCK.finditer(text)]


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    """Whether ``pos`` falls inside one of ``spans``."""
    return any(start <= pos < end for start, end in spans)


_ENTRY_ID = re.compile(r"\s*\{#[a-z0-9][a-z0-9-]*\}")
_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*(?:\|([^{}]*?))?\s*\}\}")


def readable(text: str) -> str:
    """Document text as a reader sees it: entry ids dropped, each named value shown as its default (or its name)."""
    text = _ENTRY_ID.sub("", text)
    return _PLACEHOLDER.sub(lambda m: (m.group(2) or "").strip() or f"<{m.group(1)}>", text)


def corpus_hash(docs: list[Document]) -> str:
    """A hash over ids, paths and contents: the index is rebuilt whenever it changes."""
    h = hashlib.sha256()
    for d in sorted(docs, key=lambda d: d.id):
        h.update(d.id.encode())
        h.update(b"\0")
        h.update(d.body.encode())
        h.update(b"\0")
        h.update("|".join(d.signatures).encode())
        h.update(b"\1")
    return h.hexdigest()[:16]
