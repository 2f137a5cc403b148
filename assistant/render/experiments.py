"""Render what `torchhelp run --investigate` re-ran: each experiment's change, outcome, finding, verdicts and command."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from assistant.types import Diagnosis, ExperimentResult

if TYPE_CHECKING:
    from rich.console import Console

OUTCOME = {"passed": "passed", "same": "same failure", "other": "different failure", "stopped": "stopped early", "not_run": "not run"}


def verdict_words(r: ExperimentResult, d: Diagnosis) -> str:
    """"verified: <cause>; ruled out: <cause>" in the hypotheses' own first sentences (ids when a cause is not shown)."""
    from assistant.sentences import first_sentence

    causes = {h.id: first_sentence(h.cause) for h in d.hypotheses}
    parts = []
    if r.verified:
        parts.append("verified: " + "; ".join(causes.get(h, h) for h in r.verified))
    if r.ruled_out:
        parts.append("ruled out: " + "; ".join(causes.get(h, h) for h in r.ruled_out))
    return " · ".join(parts)


def print_experiments(d: Diagnosis, console: Console) -> None:
    """One block per experiment, in the order they ran."""
    from rich.padding import Padding
    from rich.rule import Rule
    from rich.text import Text

    if not d.experiments:
        return
    console.print(Rule("Experiments (re-runs with one change)", align="left", style="cyan"))
    for i, r in enumerate(d.experiments, 1):
        style = {"passed": "bold green", "same": "bold yellow", "other": "bold magenta"}.get(r.outcome, "dim")
        line = Text(f"{i}. ", style="bold") + Text(r.title, style="bold") + Text(f"  ({r.change})", style="dim") + Text("\n")
        line += Text(OUTCOME[r.outcome], style=style)
        if r.duration_s:
            line.append(f" in {r.duration_s:.1f} s", style="dim")
        if r.finding:
            line.append(f": {r.finding}")
        if r.failure:
            line.append(f"\nre-run failed with {r.failure}", style="dim")
        verdicts = verdict_words(r, d)
        if verdicts:
            line.append("\n" + verdicts, style="bold")
        line.append("\nrepeat: ", style="dim")
        line.append(r.command)
        console.print(Padding(line, (0, 0, 0, 2)))


def markdown_lines(d: Diagnosis, fence: Callable[[str], str]) -> list[str]:
    """The experiments as Markdown bullets (empty when nothing was re-run)."""
    if not d.experiments:
        return []
    lines = ["### Experiments", ""]
    for r in d.experiments:
        text = f"- **{r.title}** ({r.change}): {OUTCOME[r.outcome]}"
        if r.finding:
            text += f": {r.finding}"
        verdicts = verdict_words(r, d)
        if verdicts:
            text += f". {verdicts}"
        lines.append(text)
        tick = fence(r.command)  # a run of backticks longer than any in the command: a code span it cannot close
        lines.append(f"  - repeat: {tick} {r.command} {tick}")
    lines.append("")
    return lines
