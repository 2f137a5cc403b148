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


# A team runbook is written for people, not for our document format: its fix section may be a numbered
# list, bold bullets, or plain paragraphs each followed by a fenced command. Its code is code: a fence is
# never read as prose (the fence's language tag included), and its prose keeps what people type in it
# (`#channel`, `a > b`): only markup at the start of a line (a heading's `#`, a quote's `>`) is removed.
_FENCED = re.compile(r"(?ms)^[ \t]*(`{3,}|~{3,})[^\n]*\n(.*?)(?:^[ \t]*\1[ \t]*$|\Z)")
_ITEM_START = re.compile(r"(?m)^[ \t]{0,3}(?:\d+[.)]\s+|[-*+]\s+(?=\*\*))")
_LINE_MARKUP = re.compile(r"(?m)^[ \t]{0,3}(?:#{1,6}[ \t]+|>[ \t]?|[-*+][ \t]+|\d+[.)][ \t]+)")
_EMPHASIS = re.compile(r"\*\*|(?<!\w)\*(?=\S)|(?<=\S)\*(?!\w)")  # `*`/`**` emphasis; `a*b` and `__init__` stay
_BOLD_LEAD = re.compile(r"\A\s*\*\*(.+?)\*\*[.:]?\s*(.*)\Z", re.S)
MAX_TITLE_CHARS = 140


def split_code(text: str) -> list[tuple[str, str]]:
    """The text as ("prose", text) and ("code", code) pieces in order; a fence's language tag is dropped."""
    pieces: list[tuple[str, str]] = []
    at = 0
    for m in _FENCED.finditer(text):
        pieces.append(("prose", text[at:m.start()]))
        pieces.append(("code", m.group(2).rstrip()))
        at = m.end()
    pieces.append(("prose", text[at:]))
    return [(kind, body) for kind, body in pieces if body.strip()]


def plain_prose(text: str) -> str:
    """Markdown prose as a reader reads it: no code blocks, no line-start markup, no emphasis or backticks, one line."""
    prose = " ".join(body for kind, body in split_code(text) if kind == "prose")
    prose = _EMPHASIS.sub("", _LINE_MARKUP.sub("", prose)).replace("`", "")
    return _SPACE.sub(" ", prose).strip()


def runbook_sentences(text: str, n: int) -> str:
    """The first ``n`` sentences of a runbook section's prose (code blocks left out)."""
    from assistant.sentences import first_sentences

    return first_sentences(plain_prose(text), n)


def _step(prose: str, code: str | None) -> tuple[str, str, str | None] | None:
    """One fix from a step's prose and code: the bold lead (else the first sentence) is its title."""
    from assistant.sentences import split_first

    bold = _BOLD_LEAD.match(_LINE_MARKUP.sub("", prose))
    if bold:
        title, rest = plain_prose(bold.group(1)), plain_prose(bold.group(2))
    else:
        title, rest = split_first(plain_prose(prose))
    title = title.strip().rstrip(".:").strip()
    if not title and code:
        title = "Run"
    if not title:
        return None
    return title[:MAX_TITLE_CHARS], runbook_sentences(rest, 2), code


def _item_blocks(text: str) -> list[str]:
    """A fix section split at its list items (numbered, or bullets with a bold title); [] when it has none.

    Item markers inside fenced code are code, not items."""
    fenced = [m.span() for m in _FENCED.finditer(text)]
    starts = [m.start() for m in _ITEM_START.finditer(text) if not any(a <= m.start() < b for a, b in fenced)]
    return [text[s: starts[i + 1] if i + 1 < len(starts) else len(text)] for i, s in enumerate(starts)]


def _paragraph_steps(text: str) -> list[tuple[str, str, str | None]]:
    """A fix section written as paragraphs and code: each code block with the prose before it is one step,
    prose after the last block one more step; code blocks in a row belong to the same step."""
    steps: list[tuple[str, str | None]] = []
    prose = ""
    for kind, body in split_code(text):
        if kind == "prose":
            if prose.strip():
                steps.append((prose, None))
            prose = body
        elif prose.strip() or not steps:
            steps.append((prose, body))
            prose = ""
        else:
            last_prose, last_code = steps[-1]
            steps[-1] = (last_prose, f"{last_code}\n\n{body}" if last_code else body)
    if prose.strip():
        steps.append((prose, None))
    return [s for s in (_step(p, c) for p, c in steps) if s is not None]


def runbook_fixes(text: str) -> list[tuple[str, str, str | None]]:
    """(title, detail, code) per step of a runbook's fix section: list items if it has them, else its paragraphs.

    Every fenced block of an item is its code (joined by a blank line), in order, and nowhere in its prose."""
    blocks = _item_blocks(text)
    if not blocks:
        return _paragraph_steps(text)
    out: list[tuple[str, str, str | None]] = []
    for block in blocks:
        pieces = split_code(block)
        code = "\n\n".join(body for kind, body in pieces if kind == "code") or None
        step = _step("\n".join(body for kind, body in pieces if kind == "prose"), code)
        if step is not None:
            out.append(step)
    return out


def read_advice(match: RunbookMatch) -> RunbookAdvice:
    """The runbook's cause and fix sections (a runbook without a fix section gives its sections that are not a cause)."""
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
    steps = [s for s in runbook_fixes(fix_text) if not _quotes_error(s[2], match.fragment)]
    return RunbookAdvice(cause_text, tuple(steps[:MAX_RUNBOOK_FIXES]))


def _quotes_error(code: str | None, fragment: str) -> bool:
    """Whether a code block is the quoted error itself (what the team saw), not a step to take."""
    return code is not None and bool(fragment) and normalise(fragment) in normalise(code)
