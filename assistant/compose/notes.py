"""The note a diagnosis carries when a requested LLM backend did not write it.

Written here and recognised here, so every view (the full terminal page, ``--brief``, JSON) can keep
it: a user who asked for an LLM must always learn that the answer is the deterministic one.
"""

from __future__ import annotations

FALLBACK_END = "Showing the deterministic diagnosis."


def backend_fallback_note(reason: str) -> str:
    """The note for a requested backend whose answer is not shown: ``reason``, then what is shown instead."""
    return f"{reason.rstrip('. ')}. {FALLBACK_END}"


def is_backend_fallback(note: str) -> bool:
    """Whether ``note`` says that a requested LLM backend was not used."""
    return note.endswith(FALLBACK_END)
