"""Untrusted text made safe to show: the one place where terminal escapes and control characters go.

A log, a probe value, an LLM reply or an HTTP error body can carry bytes that a terminal obeys
instead of showing: ``ESC ]52`` writes the clipboard, ``ESC ]8`` hides a link behind text, ``ESC c``
resets the screen, ``U+009B`` is a one-character CSI, ``\\b`` and ``\\r`` overwrite what came before.
Everything here is total (never raises, whatever the input) and idempotent.

Two levels share one core:

- :func:`strip_escapes` removes escape sequences and leaves ordinary C0 controls (``\\r``, ``\\t``)
  alone, for the parser, which still needs ``\\r`` to undo progress-bar redraws;
- :func:`safe_text` also removes every other control character: its output holds no C0 control but
  ``\\n`` and ``\\t``, no DEL, no C1 control, no ESC, no bidi override, no lone surrogate.

Sequences are removed whole and the removal is repeated until nothing changes, so the halves of a
sequence split by another (``ESC ESC[0m ]52;…``) cannot join up afterwards. A string introducer
with no terminator on its line (an unterminated OSC or DCS) loses only the introducer: whatever
follows it stays visible as text rather than being swallowed.
"""

from __future__ import annotations

import re

# One escape sequence, complete. String bodies (OSC, DCS, SOS, PM, APC) stop at the first control
# character, so a body never runs past its line and each start is scanned at most once (linear time).
_SEQUENCE = re.compile(
    r"""
      (?:\x1b\]|\x9d) [^\x00-\x1f\x7f-\x9f]* (?:\x07|\x1b\\|\x9c)               # OSC ... BEL or ST
    | (?:\x1b[P^_X]|[\x90\x98\x9e\x9f]) [^\x00-\x1f\x7f-\x9f]* (?:\x07|\x1b\\|\x9c)  # DCS, PM, APC, SOS ... ST
    | (?:\x1b\[|\x9b) [0-?]* [ -/]* [@-~]                                         # CSI: SGR, cursor, erase, modes
    | \x1b [ -/]* [0-~]                                                           # ESC c, ESC ( 0, ESC # 8, ESC =, a bare introducer
    """,
    re.VERBOSE,
)
# What may start a sequence: after the passes, any of these left over is removed on its own.
_INTRODUCERS = re.compile(r"[\x1b\x80-\x9f]")
# Controls that safe_text removes once the sequences are gone: C0 but \t \n \r (handled apart), DEL,
# C1, invisible characters that reorder or hide text (bidi marks, overrides and isolates, zero
# widths, BOM), and lone surrogates (which cannot even be encoded for output).
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
_SURROGATES = re.compile("[\ud800-\udfff]")
# Anything safe_text would change; most text has none of it and is returned untouched.
_NEEDS_WORK = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")
# Each pass is linear; nesting deeper than this is cut short by removing the leftover introducers.
_MAX_PASSES = 16


def _as_str(text: object) -> str:
    """Whatever came in, as a str (never raises)."""
    if isinstance(text, str):
        return text
    if text is None:
        return ""
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text).decode("utf-8", errors="replace")
    try:
        return str(text)
    except Exception:  # noqa: BLE001 - a hostile __str__ must not break rendering
        return ""


def strip_escapes(text: object) -> str:
    """``text`` without terminal escape sequences, ESC or C1 characters; other controls are kept."""
    s = _as_str(text)
    if not _INTRODUCERS.search(s):
        return s
    for _ in range(_MAX_PASSES):
        stripped = _SEQUENCE.sub("", s)
        if stripped == s:
            break
        s = stripped
    # A leftover introducer (lone ESC at the end, nesting deeper than the passes) is dropped alone;
    # with no ESC or C1 left, nothing can form a sequence any more.
    return _INTRODUCERS.sub("", s)


def safe_text(text: object) -> str:
    """``text`` as plain text that a terminal shows and never obeys (total and idempotent).

    Escape sequences are removed (see :func:`strip_escapes`); ``\\r\\n``, lone ``\\r`` and the Unicode
    line and paragraph separators become ``\\n`` (a redraw must not overwrite what came before); every
    other control and invisible formatting character is removed; lone surrogates become U+FFFD.
    """
    s = _as_str(text)
    if not _NEEDS_WORK.search(s):
        return s
    s = strip_escapes(s)
    if "\r" in s:
        s = s.replace("\r\n", "\n").replace("\r", "\n")
    if "\u2028" in s or "\u2029" in s:
        s = s.replace("\u2028", "\n").replace("\u2029", "\n")
    s = _CONTROLS.sub("", s)
    return _SURROGATES.sub("\ufffd", s)
