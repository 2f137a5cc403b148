"""Rich terminal rendering: the same Diagnosis, readable at a glance."""

from __future__ import annotations

from typing import TYPE_CHECKING

from assistant.render.facts import facts_line
from assistant.types import Diagnosis

if TYPE_CHECKING:
    from rich.console import Console


def render_terminal(d: Diagnosis, console: Console) -> None:
    """Print the diagnosis as panels: headline, cause, evidence, fixes with code, sources, notes."""
    from rich.console import Group
    from rich.markup import escape
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.table import Table
    from rich.text import Text

    colour = "yellow" if d.category == "unknown" else "red"
    head = Text()
    head.append(f"{d.title}\n", style=f"bold {colour}")
    head.append(f"{d.category}", style="bold")
    head.append(f"  ·  confidence {d.confidence:.0%}  ·  answered by {d.backend}", style="dim")
    if d.error:
        head.append(f"\n{d.error}", style="dim")
    read = facts_line(d)
    if read:
        head.append(f"\nread: {read}", style="dim")
    console.print(Panel(head, title="torchhelp", title_align="left", border_style=colour))
    console.print(Panel(Text(d.cause), title="Cause", title_align="left", border_style="cyan"))
    if d.evidence:
        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_column(style="bold magenta", no_wrap=True)
        table.add_column()
        for e in d.evidence:
            table.add_row(e.kind, escape(e.text))
        console.print(Panel(table, title="Evidence", title_align="left", border_style="magenta"))
    if d.fixes:
        parts = []
        for i, f in enumerate(d.fixes, 1):
            line = Text(f"{i}. ", style="bold green")
            line.append(f.title, style="bold")
            if f.sources:
                line.append(f"  [{', '.join(f.sources)}]", style="dim")
            parts.append(line)
            if f.detail:
                parts.append(Text("   " + f.detail))
            if f.code:
                parts.append(Syntax(f.code, "python", theme="ansi_dark", background_color="default", padding=(0, 0, 0, 3)))
        console.print(Panel(Group(*parts), title="Fixes", title_align="left", border_style="green"))
    if d.sources:
        src = Table(show_header=True, box=None, header_style="dim")
        src.add_column("source")
        src.add_column("title")
        src.add_column("score", justify="right")
        for s in d.sources:
            src.add_row(s.id, escape(s.title), f"{s.score:.2f}")
        console.print(Panel(src, title="Sources", title_align="left", border_style="blue"))
    for n in d.notes:
        console.print(Text(f"note: {n}", style="dim italic"))
