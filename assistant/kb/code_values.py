"""Values read from the user's text, checked before a fix's code may quote them.

A fix's code is meant to be copied and run (the web page has a Copy button), and the values that fill
its ``{{placeholders}}`` come from a log or a traceback the user pasted: a ``KeyError`` whose key is
``__import__("os").system(...)`` must not become a suggested line of Python. A value goes into code
only when it is plainly data for the place it fills:

- in Python, an expression made of names, attributes, subscripts, literals and arithmetic (no call,
  no dunder, no lambda, no comprehension);
- in a shell block, one word of safe characters, or one word already quoted by ``shlex.quote``;
- inside a quoted string, text without that quote, a backslash (or ``$`` and a backquote in a shell's
  double quotes);
- after a ``#`` comment marker, any single line.

A piece of the user's own statement, offered back rewritten out of place (``h = h.mul(2)`` for
``h.mul_(2)``), is marked :class:`UserCode` by the reader that cut it: it may be any single line that
reaches no dunder name (the code is theirs; a ``__import__`` is never offered back).

A value that fails is treated as not read: its placeholder keeps the document's default
(:func:`code_values` picks the values that fit; :func:`assistant.kb.remedies.fill_code` applies them).
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Mapping

MAX_VALUE = 200  # longer values are never an identifier or a literal a fix needs
SHELL_LANGS = frozenset({"bash", "sh", "shell", "console", "zsh"})
_SHELL_WORD = re.compile(r"[A-Za-z0-9_./:=+,@%~][A-Za-z0-9_./:=+,@%~-]*\Z")
_PLACEHOLDER = re.compile(r"\{\{\s*(?P<name>[a-z_][a-z0-9_]*)\s*(?:\|(?P<default>[^{}]*?))?\s*\}\}")
_DATA_NODES = (
    ast.Expression, ast.Constant, ast.Name, ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.List,
    ast.UnaryOp, ast.BinOp, ast.Load, ast.USub, ast.UAdd, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv,
    ast.Mod, ast.Pow,
)


class UserCode(str):
    """A fragment of the user's own program statement (their source line cut by a reader), not text from a message."""


def _user_code(value: str) -> bool:
    """A :class:`UserCode` fragment fits bare code when it is one line reaching no dunder name."""
    return isinstance(value, UserCode) and "__" not in value


def python_data(value: str) -> bool:
    """True when ``value`` is a Python expression that only names or computes data (no call, no dunder)."""
    if len(value) > MAX_VALUE or "\n" in value or "\r" in value:
        return False
    try:
        tree = ast.parse(value.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if not isinstance(node, _DATA_NODES):
            return False
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        if name.startswith("__"):
            return False
    return True


def shell_word(value: str) -> bool:
    """True when ``value`` is one shell word that expands to itself (plain, or quoted by ``shlex.quote``)."""
    if len(value) > MAX_VALUE or "\n" in value or "\r" in value:
        return False
    if _SHELL_WORD.match(value):
        return True
    try:
        words = shlex.split(value)
    except ValueError:
        return False
    return len(words) == 1 and not words[0].startswith("-") and shlex.quote(words[0]) == value


def _context(template: str, start: int, end: int) -> str:
    """Where a placeholder sits: ``#`` (a comment), a quote character (inside that string), or ``""`` (bare code)."""
    line_start = template.rfind("\n", 0, start) + 1
    before = template[line_start:start]
    if "#" in before and before.count('"') % 2 == 0 and before.count("'") % 2 == 0:
        return "#"
    if start > 0 and end < len(template) and template[start - 1] == template[end] and template[end] in "'\"":
        return template[end]
    return ""


def value_fits(value: str, lang: str, context: str) -> bool:
    """Whether ``value`` may fill a placeholder of a ``lang`` code block in ``context`` (see :func:`_context`)."""
    if len(value) > MAX_VALUE or "\n" in value or "\r" in value:
        return False
    if context == "#" or (lang not in SHELL_LANGS and not context and _user_code(value)):
        return True
    if context:
        shell_double = lang in SHELL_LANGS and context == '"'
        return context not in value and "\\" not in value and not (shell_double and ("$" in value or "`" in value))
    if lang in SHELL_LANGS:
        return shell_word(value)
    return python_data(value)


def _as_text(value: object) -> str:
    """A value as text, keeping the :class:`UserCode` mark."""
    return value if isinstance(value, str) else str(value)


def code_values(template: str, values: Mapping[str, object], lang: str) -> dict[str, object]:
    """The ``values`` that fit every place ``template`` quotes them (see the module doc); the others are left out."""
    rejected = {m.group("name") for m in _PLACEHOLDER.finditer(template)
                if values.get(m.group("name")) not in (None, "")
                and not value_fits(_as_text(values[m.group("name")]), lang.lower(), _context(template, m.start(), m.end()))}
    return {k: v for k, v in values.items() if k not in rejected}
