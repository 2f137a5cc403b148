"""Render ranked hypotheses: the leading cause's check, then the other possible causes.

The leading hypothesis's cause and fixes are the diagnosis's own (rendered above this section);
here it adds the check that confirms it, and each other cause is shown with its likelihood, its
check, what supports or weakens it, and its first fix, so the user can tell them apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from assistant.sentences import first_sentence
from assistant.types import Diagnosis, Hypothesis

if TYPE_CHECKING:
    from rich.console import Console

UNCERTAIN = 0.35  # the leading likelihood under which no cause stands out (same threshold as the ranking)
INDENT = 4
LABEL = 8  # "2.  22%" and a space


def uncertain(d: Diagnosis) -> bool:
    """Several causes and none likely enough to lead on its own."""
    return len(d.hypotheses) > 1 and d.hypotheses[0].likelihood < UNCERTAIN


def _why(h: Hypothesis) -> str:
    parts = []
    if h.supports:
        parts.append("for: " + "; ".join(h.supports))
    if h.weakens:
        parts.append("against: " + "; ".join(h.weakens))
    return "  ·  ".join(parts)


def print_lead_check(d: Diagnosis, console: Console) -> None:
    """One line under the cause: how to confirm the leading hypothesis (and its likelihood when there are others)."""
    from rich.padding import Padding
    from rich.text import Text

    if not d.hypotheses or not d.hypotheses[0].check:
        return
    if uncertain(d):
        _print_checks_first(d, console)
        return
    lead = d.hypotheses[0]
    line = Text()
    if len(d.hypotheses) > 1:
        line.append(f"most likely ({lead.likelihood:.0%}) · ", style="dim")
    line.append("check: ", style="bold cyan")
    line.append(lead.check)
    console.print(Padding(line, (0, 0, 0, 2)))


def _print_checks_first(d: Diagnosis, console: Console) -> None:
    """No cause is likely on its own: the checks that tell them apart come before any fix."""
    from rich.padding import Padding
    from rich.text import Text

    console.print(Padding(Text("No single cause stands out. Check these first:", style="bold yellow"), (0, 0, 0, 2)))
    for i, h in enumerate(d.hypotheses, 1):
        line = Text(f"{i}. {h.likelihood:.0%} ", style="bold yellow") + Text(first_sentence(h.cause), style="bold") + Text("\n") + Text("check: ", style="bold cyan") + Text(h.check)
        console.print(Padding(line, (0, 0, 0, 4)))


def print_alternatives(d: Diagnosis, console: Console, print_code) -> None:
    """The other possible causes, most likely first: likelihood, cause, check, evidence for/against, top fix."""
    from rich.padding import Padding
    from rich.rule import Rule
    from rich.table import Table
    from rich.text import Text

    others = d.hypotheses[1:]
    if not others:
        return
    console.print(Rule("Other possible causes", align="left", style="yellow"))
    for i, h in enumerate(others, 2):
        grid = Table.grid()
        grid.add_column(width=LABEL, no_wrap=True)
        grid.add_column(ratio=1)
        grid.add_row(Text(f"{i}. {h.likelihood:>4.0%}", style="bold yellow"), Text(first_sentence(h.cause) + (" (a guess)" if h.guess else "")))
        console.print(grid)
        console.print(Padding(Text("check: ", style="bold cyan") + Text(h.check), (0, 0, 0, LABEL)))
        why = _why(h)
        if why:
            console.print(Padding(Text(why, style="dim"), (0, 0, 0, LABEL)))
        if h.fixes:
            top = h.fixes[0]
            head = Text("fix: ", style="bold green") + Text(top.title, style="bold")
            if top.sources:
                head.append(f"  [{', '.join(top.sources)}]", style="dim")
            console.print(Padding(head, (0, 0, 0, LABEL)))
            if top.code:
                print_code(top.code, console, LABEL + 2)


def markdown_lines(d: Diagnosis, fence_for=lambda code: "```") -> list[str]:
    """The hypotheses as a Markdown section (just the check when there is only the rule's own).

    ``fence_for(code)`` gives a fence that the code cannot close early (untrusted text may hold backticks).
    """
    if len(d.hypotheses) < 2:
        lead = d.hypotheses[0] if d.hypotheses else None
        return [f"*Check:* {lead.check}", ""] if lead and lead.check else []
    lines = ["### Possible causes, most likely first", ""]
    for i, h in enumerate(d.hypotheses, 1):
        lines.append(f"{i}. **{h.likelihood:.0%}** — {first_sentence(h.cause)}" + (" *(a guess)*" if h.guess else ""))
        lines.append(f"   - *Check:* {h.check}")
        why = _why(h)
        if why:
            lines.append(f"   - *Evidence* {why}")
        if h.fixes:
            top = h.fixes[0]
            cite = f" [{', '.join(top.sources)}]" if top.sources else ""
            lines.append(f"   - *Fix:* {top.title}{cite}")
            if top.code:
                fence = fence_for(top.code)
                lines += ["", f"     {fence}python", *("     " + ln for ln in top.code.splitlines()), f"     {fence}"]
    lines.append("")
    return lines
