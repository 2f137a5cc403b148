"""The shapes an OpenAI-compatible server may send, checked with pydantic before anything is read.

A reply that does not fit (``choices: [null]``, a number where text belongs, a missing message)
is a fault of the server, reported as one short reason; it never reaches the code that uses the
text. Unknown extra fields are ignored: servers add their own.
"""

from __future__ import annotations

import html
import re

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Message(_Loose):
    content: StrictStr | None = None


class _Choice(_Loose):
    message: _Message


class Completion(_Loose):
    """A non-streamed chat completion: at least one choice with a message."""

    choices: list[_Choice] = Field(min_length=1)

    @property
    def text(self) -> str:
        return self.choices[0].message.content or ""


class _Delta(_Loose):
    content: StrictStr | None = None


class _ChunkChoice(_Loose):
    delta: _Delta | None = None
    finish_reason: StrictStr | None = None


class Chunk(_Loose):
    """One streamed event; ``choices`` may be empty (a usage-only event)."""

    choices: list[_ChunkChoice]

    @property
    def text(self) -> str:
        delta = self.choices[0].delta if self.choices else None
        return (delta.content or "") if delta else ""

    @property
    def finished(self) -> bool:
        return bool(self.choices and self.choices[0].finish_reason)


def schema_problem(exc: ValidationError) -> str:
    """The first validation error as ``where: what``, short and free of the server's own text."""
    err = exc.errors(include_url=False, include_input=False)[0] if exc.errors() else {"loc": (), "msg": "invalid"}
    where = ".".join(str(p) for p in err.get("loc", ())) or "reply"
    return f"{where}: {err.get('msg', 'invalid')}"[:120]


_HTML = re.compile(r"^\s*<|<html|<body|<!doctype", re.I)
# Escape sequences as a terminal would parse them (CSI, OSC/DCS/APC strings, two-byte escapes), 7- and 8-bit.
_ESCAPE = re.compile(r"(?:\x1b\[|\x9b)[0-?]{0,64}[ -/]{0,16}[@-~]?|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]{0,4096}(?:\x07|\x1b\\|\x9c)?|\x1b.?")
_SPACE = re.compile(r"\s+")


def safe_snippet(body: bytes, limit: int = 80) -> str:
    """A short, printable excerpt of an error body for a one-line note.

    Error bodies come from whatever answered (a proxy's HTML page, a hostile server): an
    ``{"error": {"message": …}}`` is preferred when there is one, an HTML page is named but not
    quoted, and escape sequences with their payloads and every other control or invisible
    character are removed, so the note can carry no terminal escape and no markup.
    """
    text = body[:4096].decode("utf-8", errors="replace")
    try:
        import json

        data = json.loads(text)
        err = data.get("error") if isinstance(data, dict) else None
        message = err.get("message") if isinstance(err, dict) else err
        if isinstance(message, str):
            text = message
    except ValueError:
        if _HTML.search(text):
            return "an HTML page"
    text = _ESCAPE.sub(" ", html.unescape(text))
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    text = _SPACE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
