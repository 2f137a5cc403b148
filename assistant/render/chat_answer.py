"""Rich rendering of a follow-up answer made without an LLM (see :mod:`assistant.compose.offline_chat`).

Headings and the diagnosis' own sentences are plain text; knowledge-base prose is rendered as
Markdown (lists, emphasis, inline code; links shown as text, never as terminal hyperlinks); code is
printed line by line, highlighted, never wrapped or cut, so it copies intact. Every string passes
through :func:`~assistant.render.safe_text.safe_text` first: a user's runbook or a log line is
shown, never obeyed by the terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from assistant.compose.offline_chat import Block
from assistant.render.highlight import highlighted_lines
from assistant.render.safe_text import safe_text

if TYPE_CHECKING:
    from rich.console import Console

TEXT_INDENT = 2
CODE_INDENT = 4


def _print_code(code: str, lang: str, console: Console) -> None:
    from rich.text import Text

    for line in highlighted_lines(code, lang or "python"):
        console.print(Text(" " * CODE_INDENT) + line, no_wrap=True, overflow="ignore", crop=False)


def render_answer(blocks: Sequence[Block], console: Console, prefix: str = "") -> None:
    """Print the blocks; ``prefix`` (the chat prompt) starts the first line and wraps with it."""
    from rich.markdown import Markdown
    from rich.padding import Padding
    from rich.text import Text

    pending = prefix
    for b in blocks:
        text = safe_text(b.text)
        if b.kind == "heading":
            head = Text(pending)
            head.append(text, style="bold cyan" if b.level == 1 else "bold")
            console.print(head)
            pending = ""
            continue
        if pending:
            console.print(Text(pending.rstrip()))
            pending = ""
        if b.kind == "code":
            _print_code(text, b.lang, console)
        elif b.kind == "markdown":
            console.print(Padding(Markdown(text, hyperlinks=False, code_theme="ansi_dark"), (0, 0, 0, TEXT_INDENT), expand=False))
        else:
            console.print(Padding(Text(text), (0, 0, 0, TEXT_INDENT), expand=False))
