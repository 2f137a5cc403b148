"""Syntax highlighting of fix code for the terminal, one shared lexer per language.

Building a Pygments lexer by name costs about 2 ms (a registry lookup and the lexer's token tables);
an answer prints up to eight code blocks and a chat session many more, so each language's lexer is
built once per process and reused (lexers keep no state between ``get_tokens`` calls).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pygments.lexer import Lexer
    from rich.text import Text


@lru_cache(maxsize=8)
def _lexer(lang: str) -> Lexer:
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(lang, stripnl=False, ensurenl=True, tabsize=4)
    except ClassNotFound:
        return get_lexer_by_name("text", stripnl=False, ensurenl=True, tabsize=4)


def highlighted_lines(code: str, lang: str = "python") -> list[Text]:
    """``code`` highlighted, one Text per source line (blank lines kept, no trailing extra line)."""
    from rich.syntax import Syntax

    highlighted = Syntax(code, _lexer(lang or "python"), theme="ansi_dark", background_color="default").highlight(code)
    return list(highlighted.split("\n", allow_blank=True))[: len(code.split("\n"))]
