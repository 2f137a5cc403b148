"""How `torchhelp kb search` shows passages: a table that fits the terminal, wrapping instead of cutting."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table

    from assistant.types import Passage

SNIPPET_CHARS = 160  # a preview of the passage, not the passage: `--json` has the full text


def passages_table(passages: Sequence[Passage]) -> Table:
    """One row per passage: its score, then its id and path, then a snippet under them.

    No header, so the first line printed is the best passage. Ids and paths fold onto the next
    line when the column is narrower than they are: every character stays visible.
    """
    from rich.table import Table
    from rich.text import Text

    from assistant.render.outgoing import shown_line

    table = Table(show_header=False, box=None, pad_edge=False, padding=(0, 1, 0, 0), expand=False)
    table.add_column("score", justify="right", no_wrap=True, min_width=6)
    table.add_column("passage", overflow="fold")
    for p in passages:
        body = shown_line(p.text.split("\n", 1)[-1])
        snippet = body if len(body) <= SNIPPET_CHARS else body[: SNIPPET_CHARS - 1].rstrip() + "…"
        cell = Text()
        cell.append(shown_line(p.id), style="bold")
        cell.append(f" ({shown_line(p.path)})", style="dim")
        cell.append("\n" + snippet)
        table.add_row(f"{p.score:.3f}", cell)
    return table


def atlas_table(entries: Sequence[dict]) -> Table:
    """PyTorch's own checks (error atlas entries): the message template, then where it is raised and the condition."""
    from rich.table import Table
    from rich.text import Text

    from assistant.render.outgoing import shown_line

    table = Table(title="PyTorch checks (error atlas)", title_justify="left", show_header=False, box=None, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("score", justify="right", no_wrap=True, min_width=6)
    table.add_column("check", overflow="fold")
    for e in entries:
        cell = Text()
        template = shown_line(str(e.get("template", "")))
        cell.append(template if len(template) <= SNIPPET_CHARS else template[: SNIPPET_CHARS - 1] + "…", style="bold")
        where = ":".join(str(x) for x in (e.get("file"), e.get("line")) if x)
        meta = " · ".join(str(x) for x in (e.get("exc_type"), e.get("op"), where, e.get("category"), f"torch {e.get('torch_version')}") if x)
        cell.append(f"\n{shown_line(meta)}", style="dim")
        if e.get("condition"):
            cell.append(f"\ncheck: {shown_line(str(e['condition']))}")
        table.add_row("exact" if e.get("matched") else f"{e.get('score', 0):.3f}", cell)
    return table
