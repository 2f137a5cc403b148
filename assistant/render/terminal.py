"""Rich terminal rendering: the same Diagnosis, readable at a glance and at any width.

Layout, in the order a user needs it: a header panel (title, category and confidence, the cause in one
sentence), then the fixes, then the rest of the cause, the evidence (where the raw error appears, once)
and the sources. Prose wraps with a hanging indent; fix code is never wrapped or cut: each code line is
printed whole (overflowing the width if it must) and outside any box, so it copies and pastes intact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from assistant.render.facts import facts_line
from assistant.render.experiments import print_experiments
from assistant.render.highlight import highlighted_lines
from assistant.render.hypotheses import print_alternatives, print_lead_check
from assistant.render.outgoing import shown
from assistant.sentences import split_first
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
    return highlighted_lines(code.rstrip("\n"), "python")


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
    first, rest = split_first(d.cause)
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
    print_experiments(d, console)
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
        src.add_column("source", overflow="fold")  # a long id (a team runbook's) wraps, never cut: it is what `kb remove` takes
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


BRIEF_LINES = 20  # the most lines --brief prints (its help text and the README say so)
BRIEF_FIXES = 2
BRIEF_CODE_LINES = 8  # a fix's code this short is shown whole (when the budget has room)
BRIEF_CODE_INDENT = 3
# The most screen lines each part of the brief view may take (code gets what is left of BRIEF_LINES).
BRIEF_TITLE_LINES, BRIEF_CAUSE_LINES, BRIEF_CHECK_LINES, BRIEF_FIX_TITLE_LINES, BRIEF_NOTE_LINES = 2, 3, 2, 2, 3


def _height(text: Text, console: Console) -> int:
    """Screen lines ``text`` takes when printed wrapped at the console's width."""
    return len(text.wrap(console, max(console.width, 1)))


def _clipped(text: Text, lines: int, console: Console) -> Text:
    """``text`` cut at a word and ended with "…" so that it takes at most ``lines`` screen lines."""
    if _height(text, console) <= lines:
        return text
    cut = min(len(text.plain), lines * max(console.width, 20))
    while cut > 1:
        shorter = text[:cut]
        shorter.rstrip()
        shorter.append("…")
        if _height(shorter, console) <= lines:
            return shorter
        space = text.plain.rfind(" ", 0, cut - 1)
        cut = space if space > 0 else cut - 1
    return text[:0] + "…"


def brief_code(code: str | None, room: int) -> tuple[str, int]:
    """A fix's code within ``room`` lines, and how many of its lines are left out.

    The whole snippet when it has at most BRIEF_CODE_LINES lines and they fit; else its first lines,
    keeping one line of ``room`` for the count of the rest. At least the first line is always kept.
    """
    lines = (code or "").strip("\n").split("\n")
    if not lines[0].strip() and len(lines) == 1:
        return "", 0
    cap = min(room, BRIEF_CODE_LINES)
    if len(lines) <= cap:
        return "\n".join(lines), 0
    keep = max(cap - 1, 1)
    return "\n".join(lines[:keep]), len(lines) - keep


def _code_height(code: str | None) -> int:
    """Lines a fix's code has (0 when it has none)."""
    return len(code.strip("\n").split("\n")) if code and code.strip() else 0


def render_brief(d: Diagnosis, console: Console) -> None:
    """At most BRIEF_LINES lines: title, category/confidence, cause sentence, the lead check, the top fixes
    with their code (whole when short, else its first lines and a count of the rest), the sources, and the
    note when a requested LLM backend did not write the answer."""
    from rich.text import Text

    from assistant.compose.notes import is_backend_fallback

    d = shown(d)  # untrusted text: no escapes, no secrets (see render_terminal)
    first, _ = split_first(d.cause)
    title = _clipped(Text(d.title, style=f"bold {_colour(d)}"), BRIEF_TITLE_LINES, console)
    cause = _clipped(Text(first), BRIEF_CAUSE_LINES, console) if first else None
    check = d.hypotheses[0].check if d.hypotheses and d.hypotheses[0].check else ""
    check_text = _clipped(Text("check: ", style="bold cyan") + Text(check), BRIEF_CHECK_LINES, console) if check else None
    fixes = d.fixes[:BRIEF_FIXES]
    fix_titles = [_clipped(_brief_fix_title(i, f), BRIEF_FIX_TITLE_LINES, console) for i, f in enumerate(fixes, 1)]
    # The documents behind what the brief view shows (the full view lists every source).
    cited = list(dict.fromkeys(src for f in fixes for src in f.sources))
    # Ids are printed whole (a team runbook's may be long): the line wraps, and its height is budgeted.
    sources = Text("sources: " + ", ".join(cited), style="dim", overflow="fold") if cited else None
    fallback = " ".join(n for n in d.notes if is_backend_fallback(n))
    note = _clipped(Text(f"note: {fallback}", style="dim italic"), BRIEF_NOTE_LINES, console) if fallback else None
    used = 1 + sum(_height(t, console) for t in (title, cause, check_text, *fix_titles, note, sources) if t is not None)
    room = BRIEF_LINES - used
    console.print(title)
    console.print(Text(_meta(d), style="dim"), overflow="ellipsis", no_wrap=True)
    for part in (cause, check_text):
        if part is not None:
            console.print(part)
    for i, (f, line) in enumerate(zip(fixes, fix_titles, strict=True)):
        console.print(line)
        later = sum(min(_code_height(g.code), 2) for g in fixes[i + 1:])
        code, more = brief_code(f.code, room - later)
        if code:
            _print_code(code, console, indent=BRIEF_CODE_INDENT)
            room -= code.count("\n") + 1
        if more:
            console.print(Text(" " * BRIEF_CODE_INDENT + f"… ({more} more line{'s' if more > 1 else ''}: run without --brief)", style="dim"),
                          overflow="ellipsis", no_wrap=True)
            room -= 1
    if sources is not None:
        console.print(sources)
    if note is not None:
        console.print(note)


def _brief_fix_title(i: int, f: Fix) -> Text:
    """A fix's numbered title line in the brief view."""
    from rich.text import Text

    line = Text(f"{i}. ", style="bold green") + Text(f.title, style="bold")
    if f.from_team_runbook:
        line.append("  (team runbook)", style="magenta")
    return line
