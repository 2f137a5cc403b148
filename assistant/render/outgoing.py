"""What leaves torchhelp for a person or a file: control characters removed, then secrets masked.

A diagnosis carries text from untrusted places (the log, probe values, an LLM's reply, an HTTP error
body in a note, a job folder's name), so every output door passes what it prints through here: the
terminal and Markdown renderers, ``ask --json``, the served JSON, ``run --report``, ``--evidence-out``,
``env``, triage's JSONL, groups JSON, Markdown and HTML reports, the ``--watch`` terminal lines
(:func:`shown_line`) and the webhook's messages (:func:`slack_text` for the text Slack renders).
The order matters: escapes are removed first, so a secret split by an escape sequence
(``ghp_\\x1b[0mAbC…``) is joined again before the redactor looks for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from assistant.probes.redact import redact_text, redact_value
from assistant.render.safe_text import safe_text

T = TypeVar("T")


def shown_text(text: object) -> str:
    """One string as it may be shown or written: no terminal controls, no credentials."""
    return redact_text(safe_text(text))


def shown_line(text: object) -> str:
    """:func:`shown_text` on one line (newlines and tabs become spaces): a terminal status line."""
    return shown_text(text).replace("\n", " ").replace("\t", " ")


_SLACK = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def slack_text(text: object) -> str:
    """:func:`shown_text` for a Slack message: ``&``, ``<`` and ``>`` escaped as Slack asks.

    Slack reads ``<!channel>``, ``<@U123>`` and ``<https://evil|https://good>`` in a message's text as a
    mention or a disguised link; escaped, a log's text shows as typed and notifies no one.
    """
    return shown_text(text).translate(_SLACK)


def _map_strings(obj: T, fn: Callable[[str], str]) -> T:
    """``obj`` rebuilt with ``fn`` applied to every string in it (dataclasses, tuples, lists, mappings)."""
    if isinstance(obj, str):
        return fn(obj)  # type: ignore[return-value]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: _map_strings(getattr(obj, f.name), fn) for f in dataclasses.fields(obj) if f.init}
        return dataclasses.replace(obj, **changes)
    if isinstance(obj, tuple):
        return tuple(_map_strings(v, fn) for v in obj)  # type: ignore[return-value]
    if isinstance(obj, list):
        return [_map_strings(v, fn) for v in obj]  # type: ignore[return-value]
    if isinstance(obj, frozenset):
        return frozenset(_map_strings(v, fn) for v in obj)  # type: ignore[return-value]
    if isinstance(obj, Mapping):
        return {_map_strings(k, fn): _map_strings(v, fn) for k, v in obj.items()}  # type: ignore[return-value]
    return obj


def shown(obj: T) -> T:
    """A Diagnosis (or any dataclass tree) with every string passed through :func:`shown_text`."""
    return _map_strings(obj, shown_text)


def shown_value(value: Any) -> Any:
    """A JSON-like value (a report, a probe record) made safe to show and free of credentials.

    Strings lose their controls first; then values of keys that name secrets (``api_key``,
    ``password``) are masked whole and every other string is redacted.
    """
    return redact_value(_map_strings(value, safe_text))
