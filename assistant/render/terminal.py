"""Rich terminal rendering: the same Diagnosis, readable at a glance and at any width.

Layout, in the order a user needs it: a header panel (title, category and confidence, the cause in one
sentence), then the fixes, then the rest of the cause, the evidence (where the raw error appears, once)
and the sources. Prose wraps with a hanging indent; fix code is never wrapped or cut: each code line is
printed whole (overflowing the width if it must) and outside any box, so it copies and pastes intact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from assistant.render.facts import facts_line, split_cause
from assistant.render.hypotheses import print_alternatives, print_lead_check
from assistant.render.outgoing import shown
from assistant.types import Diagnosis, Fact, Fix

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# Columns before a fix's title ("1. ") and before its detail and code lines.
FIX_INDENT = 4
CODE_INDENT = 6
SECTION_INDENT = 2


def _colour(d: Diagnosis) -> str:
    return "yellow" if d.category == "unknown" else "red"


def _meta(d: Diagnosis) -> str:
    return f"{d.category}  ·  confidence {d.confidence:.0%}  ·  answered by {d.backend}"


def _code_lines(code: str) -> list[Text]:
    """The fix's code, syntax-highlighted, one Text per source line (blank lines kept)."""
    from rich.syntax import Syntax

    code = code.rstrip("\n")
    highlighted = Syntax(code, "python", theme="ansi_dark", background_color="default").highlight(code)
    lines = highlighted.split("\n", allow_blank=True)
    return list(lines)[: len(code.split("\n"))]


def _print_code(code: str, console: Console, indent: int = CODE_INDENT) -> None:
    """Print code lines whole: no wrapping, no cropping (a long line overflows rather than being cut)."""
    from rich.text import Text

    for line in _code_lines(code):
        console.print(Text(" " * indent) + line, no_wrap=True, overflow="ignore", crop=False)


def _evidence_rows(d: Diagnosis) -> list[Fact]:
    """The evidence, with the raw error as its first row when no fact already carries it."""
    rows = list(d.evidence)
    if d.error and not any(e.kind == "error" or d.error in e.text for e in rows):
        rows.insert(0, Fact("error", d.error))
    return rows


def _section(title: str, style: str, console: Console) -> None:
    from rich.rule import Rule

    console.print(Rule(title, align="left", style=style))


def _print_fix(i: int, f: Fix, console: Console) -> None:
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    head = Text(f.title, style="bold")
    if f.from_team_runbook:
        head.append("  team runbook", style="bold magenta")
    if f.sources:
        head.append(f"  [{', '.join(f.sources)}]", style="dim")
    # A grid keeps the title's wrapped lines under the title, not under the number.
    grid = Table.grid()
    grid.add_column(width=FIX_INDENT, no_wrap=True)
    grid.add_column(ratio=1)
    grid.add_row(Text(f"{i}.", style="bold green"), head)
    console.print(grid)
    if f.detail:
        console.print(Padding(Text(f.detail), (0, 0, 0, FIX_INDENT)))
    if f.code:
        _print_code(f.code, console)


def render_terminal(d: Diagnosis, console: Console) -> None:
    """Print the diagnosis: header (title, cause sentence), fixes, rest of the cause, evidence, sources, notes.

    Every string in the diagnosis may come from untrusted text (the log, probes, an LLM, an HTTP error
    body): it is sanitised once here (:func:`assistant.render.outgoing.shown`) and reaches rich only as
    :class:`rich.text.Text`, never as markup.
    """
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    d = shown(d)
    colour = _colour(d)
    first, rest = split_cause(d.cause)
    head = Text()
    head.append(f"{d.title}\n", style=f"bold {colour}")
    head.append(d.category, style="bold")
    head.append(_meta(d)[len(d.category):], style="dim")
    read = facts_line(d)
    if read:
        head.append(f"\nread: {read}", style="dim")
    console.print(Panel(head, title="torchhelp", title_align="left", border_style=colour))
    if first:
        _section("Cause", "cyan", console)
        console.print(Padding(Text(first), (0, 0, 0, SECTION_INDENT)))
    print_lead_check(d, console)
    if d.fixes:
        _section("Fixes", "green", console)
        for i, f in enumerate(d.fixes, 1):
            _print_fix(i, f, console)
    print_alternatives(d, console, _print_code)
    if rest:
        _section("Why", "cyan", console)
        console.print(Padding(Text(rest), (0, 0, 0, SECTION_INDENT)))
    rows = _evidence_rows(d)
    if rows:
        _section("Evidence", "magenta", console)
        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_column(style="bold magenta", no_wrap=True)
        table.add_column()
        for e in rows:
            table.add_row(Text(e.kind), Text(e.text))
        console.print(Padding(table, (0, 0, 0, SECTION_INDENT)))
    if d.sources:
        _section("Sources", "blue", console)
        src = Table(show_header=True, box=None, header_style="dim", pad_edge=False)
        src.add_column("source")
        src.add_column("title")
        src.add_column("score", justify="right")
        for s in d.sources:
            src.add_row(Text(s.id), Text(s.title), f"{s.score:.2f}")
        console.print(Padding(src, (0, 0, 0, SECTION_INDENT)))
    if d.similar:
        _section("Similar resolved reports", "blue", console)
        for r in d.similar:
            line = Text(f"{r.similarity:.0%}  ", style="dim")
            line.append(r.resolution or r.category)
            if r.link:
                line.append(f"\n{r.link}", style="dim")
            console.print(Padding(line, (0, 0, 0, SECTION_INDENT)))
    for n in d.notes:
        console.print(Text(f"note: {n}", style="dim italic"))


BRIEF_FIXES = 2


def render_brief(d: Diagnosis, console: Console) -> None:
    """At most 15 lines: title, category/confidence, cause sentence, top fixes with first code line, source ids."""
    from rich.text import Text

    d = shown(d)  # untrusted text: no escapes, no secrets (see render_terminal)
    first, _ = split_cause(d.cause)
    # Cap the cause sentence at three screen lines so the whole answer stays within 15.
    limit = 3 * max(console.width, 20) - 1
    if len(first) > limit:
        first = first[: limit - 1].rstrip() + "…"
    console.print(Text(d.title, style=f"bold {_colour(d)}"))
    console.print(Text(_meta(d), style="dim"), overflow="ellipsis", no_wrap=True)
    if first:
        console.print(Text(first))
    if d.hypotheses and d.hypotheses[0].check:
        check = d.hypotheses[0].check
        check = check if len(check) <= 2 * max(console.width, 20) - 8 else check[: 2 * max(console.width, 20) - 9].rstrip() + "…"
        console.print(Text("check: ", style="bold cyan") + Text(check))
    for i, f in enumerate(d.fixes[:BRIEF_FIXES], 1):
        line = Text(f"{i}. ", style="bold green") + Text(f.title, style="bold")
        if f.from_team_runbook:
            line.append("  (team runbook)", style="magenta")
        console.print(line)
        code = (f.code or "").strip("\n").split("\n")[0]
        if code:
            _print_code(code, console, indent=3)
    # The documents behind what the brief view shows (the full view lists every source).
    cited = list(dict.fromkeys(src for f in d.fixes[:BRIEF_FIXES] for src in f.sources))
    if cited:
        console.print(Text("sources: " + ", ".join(cited), style="dim"), overflow="ellipsis", no_wrap=True)
