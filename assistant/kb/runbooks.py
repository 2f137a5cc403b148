"""Team runbooks: user documents that carry the error's own text drive the diagnosis.

A team that adds a runbook with ``torchhelp kb add`` usually pastes the error it is about into it
(front-matter ``signatures``, an inline code span, a fenced block, a quoted line). When that text
is found in the user's failure, the runbook knows this failure better than any built-in document:
its fix section is offered first, marked as the team's, and it is cited.

Matching is on error text, not on retrieval scores: a BM25 score of 1.0 only says the runbook is
the best of what was retrieved, while a shared error string says it is about *this* error.
Numbers and size units are masked on both sides, so a runbook written for "tried to allocate
2.00 GiB" matches "tried to allocate 20.00 MiB".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from collections.abc import Iterable

from assistant.kb.documents import Document, read_user_doc, sections

MIN_FRAGMENT_CHARS = 16  # shorter snippets ("CUDA error", "RuntimeError") name a family, not an error
MIN_FRAGMENT_WORDS = 3
MAX_RUNBOOK_FIXES = 3
MAX_FRAGMENT_CHARS = 400

_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
_INLINE_CODE = re.compile(r"`([^`\n]{8,400})`")
_QUOTED_LINE = re.compile(r"(?m)^\s*>\s?(.+)$")
_QUOTED_STRING = re.compile(r"[\"“]([^\"”\n]{16,400})[\"”]")
_ERROR_LINE = re.compile(r"(?m)^\s*((?:[A-Za-z_][\w.]*(?:Error|Exception|Failure|Failed)|[A-Z][A-Za-z]*Error)\b[^\n]{8,400})$")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_SIZE = re.compile(r"\d+(?:[.,]\d+)*\s*(?:[kmgtp]i?b|bytes?)\b", re.I)  # "2.00 GiB" and "128 MiB" are the same words
_SPACE = re.compile(r"\s+")
_FIX_HEADING = re.compile(r"\b(fix|fixes|solution|solutions|remed|resolution|resolve|workaround|what to do|how to|steps|mitigation|action)", re.I)
_CAUSE_HEADING = re.compile(r"\b(cause|causes|why|explanation|background|root)", re.I)
_WORD = re.compile(r"[A-Za-z]{2,}")


@dataclass(frozen=True)
class RunbookMatch:
    """A user document whose text shares an error string with the failure."""

    doc_id: str
    title: str
    category: str
    path: str
    fragment: str  # the shared error text, as written in the runbook
    strength: int  # characters of error text shared: longer is more specific


def normalise(text: str) -> str:
    """Lower-case, numbers masked, quotes unified, whitespace collapsed: the form both sides are compared in."""
    text = text.replace("“", '"').replace("”", '"').replace("‘", "'").replace("’", "'").replace("`", "")
    text = _NUMBER.sub("0", _SIZE.sub("0 size", text.lower()))
    return _SPACE.sub(" ", text).strip()


def error_fragments(doc: Document) -> list[str]:
    """The pieces of a runbook that quote an error: signatures, code, quoted and error-looking lines."""
    body = doc.body
    raw: list[str] = list(doc.signatures)
    for block in _FENCE.findall(body):
        raw.extend(block.splitlines())
    prose = _FENCE.sub("\n", body)
    raw.extend(_INLINE_CODE.findall(prose))
    raw.extend(_QUOTED_LINE.findall(prose))
    raw.extend(_QUOTED_STRING.findall(prose))
    raw.extend(_ERROR_LINE.findall(prose))
    out: list[str] = []
    for piece in raw:
        piece = piece.strip()[:MAX_FRAGMENT_CHARS]
        norm = normalise(piece)
        if len(norm) >= MIN_FRAGMENT_CHARS and len(_WORD.findall(norm)) >= MIN_FRAGMENT_WORDS and piece not in out:
            out.append(piece)
    return out


@lru_cache(maxsize=256)
def _read(path: str, mtime_ns: int, size: int) -> tuple[Document, tuple[tuple[str, str], ...]] | None:
    """A runbook read once per version of the file (path, mtime and size are the cache key)."""
    del mtime_ns, size  # part of the cache key only
    try:
        doc = read_user_doc(Path(path))
    except Exception:  # a malformed or vanished runbook must never break a diagnosis  # noqa: BLE001
        return None
    return doc, tuple((f, normalise(f)) for f in error_fragments(doc))


def load_runbook(path: str) -> tuple[Document, tuple[tuple[str, str], ...]] | None:
    """The runbook at ``path`` and its (fragment, normalised fragment) pairs, or None if unreadable."""
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return _read(path, st.st_mtime_ns, st.st_size)


def match_runbooks(failure_text: str, user_docs: Iterable[tuple[str, str]]) -> list[RunbookMatch]:
    """Runbooks (given as (doc id, path) pairs) that quote the failure's error text, strongest first.

    A runbook matches when one of its quoted error fragments occurs in the failure (numbers masked).
    """
    target = normalise(failure_text)
    if not target:
        return []
    found: list[RunbookMatch] = []
    for doc_id, path in user_docs:
        loaded = load_runbook(path)
        if loaded is None:
            continue
        doc, fragments = loaded
        best = max(((len(n), f) for f, n in fragments if n in target), default=None)
        if best is not None:
            found.append(RunbookMatch(doc_id, doc.title, doc.category, path, best[1], best[0]))
    return sorted(found, key=lambda m: (-m.strength, m.doc_id))


@dataclass(frozen=True)
class RunbookAdvice:
    """What a runbook says, read from its own sections."""

    cause: str  # the cause section's text ("" when it has none)
    fixes: tuple[tuple[str, str, str | None], ...]  # (title, detail, code) per fix item


def read_advice(match: RunbookMatch) -> RunbookAdvice:
    """The runbook's cause and fix sections (a runbook without a fix section gives its first section)."""
    from assistant.compose.deterministic import extract_fixes
    from assistant.types import Fix

    loaded = load_runbook(match.path)
    if loaded is None:
        return RunbookAdvice("", ())
    doc = loaded[0]
    parts = sections(doc)
    fix_text = "\n\n".join(text for heading, text in parts if _FIX_HEADING.search(heading))
    cause_text = "\n\n".join(text for heading, text in parts if _CAUSE_HEADING.search(heading) and not _FIX_HEADING.search(heading))
    if not fix_text and parts:
        # No heading says "fix": the runbook as a whole is the remedy (a short team note).
        fix_text = "\n\n".join(text for heading, text in parts if not _CAUSE_HEADING.search(heading))
    fixes = extract_fixes(fix_text)
    if len(fixes) == 1 and fixes[0].title == "Apply the documented fix":
        code = _first_code(fix_text)
        fixes = [Fix(f"Follow the team runbook “{doc.title}”", fixes[0].detail, code)]
    return RunbookAdvice(cause_text, tuple((f.title, f.detail, f.code) for f in fixes[:MAX_RUNBOOK_FIXES]))


def _first_code(text: str) -> str | None:
    m = _FENCE.search(text)
    return m.group(1).strip() if m else None
