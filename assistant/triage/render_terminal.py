"""Triage in the terminal: a rich table of groups, totals, the top groups' diagnoses, a progress bar.

Everything shown here that came from a log (titles, headlines, excerpts, job ids, locations) is
untrusted. It reaches rich only as :class:`rich.text.Text` (never as a ``str`` that rich would parse
as markup or emoji codes), after :func:`clean_text` has removed terminal escape sequences and control
characters (with :func:`assistant.render.safe_text.safe_text`) and masked credentials: a log line
must never be able to restyle, rewrite or hijack the user's terminal (``ESC ]52`` sets the
clipboard, ``ESC ]8`` hides links, ``\\r`` overwrites lines), nor show a token it happened to print.

The small formatting helpers (:func:`clean_text`, :func:`fmt_hours`, :func:`fmt_minute`, :func:`code_lang`,
:func:`hours_known`) are shared by the Markdown and HTML renderers; this module imports rich lazily,
so importing them costs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from assistant.render.outgoing import shown_text
from assistant.triage.model import VERDICT_REASONS, Group, JobReport, TriageResult

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.progress import Progress, TaskID
    from rich.text import Text

_SPACES = re.compile(r"\s+")


def clean_text(text: str | None, *, oneline: bool = False, limit: int | None = None) -> str:
    """``text`` with escape sequences and control characters removed: safe to show anywhere.

    ``\\r\\n`` and lone ``\\r`` become newlines (a progress bar's redraws stay readable instead of
    overwriting each other); ``oneline`` folds every run of whitespace into one space. ``limit``
    cuts the result to that many characters, ending with ``…``.
    """
    if not text:
        return ""
    out = shown_text(text)  # the one sanitiser: escapes and controls out, secrets masked
    out = _SPACES.sub(" ", out).strip() if oneline else out.expandtabs(4)
    if limit is not None and len(out) > limit:
        out = out[: max(limit - 1, 0)].rstrip() + "…"
    return out


def hours_known(result: TriageResult, group: Group) -> bool:
    """Whether any job of the group had a measurable GPU time (0.0 hours then means unknown)."""
    if group.gpu_hours > 0:
        return True
    by_id = {j.job_id: j for j in result.jobs}
    return any(by_id[j].gpu_hours is not None for j in group.job_ids if j in by_id)


def fmt_hours(hours: float | None, known: bool = True) -> str:
    """GPU hours for display: ``—`` when unknown, more decimals for small values."""
    if hours is None or not known:
        return "—"
    if hours < 10:
        return f"{hours:.2f}"
    if hours < 1000:
        return f"{hours:.1f}"
    return f"{hours:,.0f}"


def fmt_minute(epoch: float | None) -> str:
    """An epoch time as a UTC date and minute (``2026-11-20 14:03``) for columns headed "(UTC)", ``—`` when unknown."""
    if epoch is None:
        return "—"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M")


def fmt_time(epoch: float | None) -> str:
    """An epoch time as ``2026-11-20 14:03 UTC``, ``—`` when unknown."""
    return "—" if epoch is None else f"{fmt_minute(epoch)} UTC"


# A line a shell runs: a scheduler directive, an environment assignment, or a command line tool's name first.
_SHELL_LINE = re.compile(
    r"^(?:\$ |#(?:SBATCH|PBS|BSUB)\b|(?:export\s+|unset\s+)?[A-Z_][A-Z0-9_]*=\S*(?:\s|$)|"
    r"(?:sudo\s+)?(?:pip3?|conda|mamba|uv|sbatch|srun|salloc|sinfo|sacct|scontrol|squeue|scancel|qsub|qstat|bsub|bjobs|"
    r"nvidia-smi|nvcc|torchrun|deepspeed|accelerate|apt(?:-get)?|ls|cd|cat|du|df|ulimit|module|git|source|echo|rm|mkdir|"
    r"ln|chmod|free|dmesg|kill|ps|watch|docker|kubectl|ray|torchhelp|python3?\s+(?:-[mcuBOX]|\S+\.py))(?:\s|$))"
)


def code_lang(code: str) -> str:
    """``bash`` when every line of ``code`` that says something is a shell line, else ``python``.

    Comment-only and blank lines decide nothing; a block mixing both (a ``#SBATCH`` line and Python) stays Python.
    """
    said = [ln.strip() for ln in code.splitlines() if ln.strip() and not (ln.lstrip().startswith("#") and not _SHELL_LINE.match(ln.strip()))]
    return "bash" if said and all(_SHELL_LINE.match(ln) for ln in said) else "python"


def code_block(code: str, indent: int = 3) -> RenderableType:
    """Fix code for a terminal panel: highlighted, one screen line per source line, never wrapped mid-statement.

    A line wider than the panel is cut with ``…`` (the full code is in the Markdown and HTML reports).
    """
    from rich.console import Group as RenderGroup
    from rich.text import Text

    from assistant.render.highlight import highlighted_lines

    body = clean_text(code).rstrip()
    lines = highlighted_lines(body, code_lang(body))[: len(body.splitlines())]
    shown = []
    for line in lines:
        row = Text(" " * indent, no_wrap=True, overflow="ellipsis")
        row.append_text(line)
        shown.append(row)
    return RenderGroup(*shown)


def fmt_bytes(n: int) -> str:
    """A byte count in decimal units (``12.3 MB``)."""
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"  # pragma: no cover - the loop always returns


def unreadable_notes(result: TriageResult) -> list[str]:
    """Notes (run-level, then per job) that report a file that could not be read."""
    words = ("unreadable", "could not be read", "cannot be read", "could not read", "cannot read", "permission denied")
    notes = list(result.notes) + [f"{j.job_id}: {n}" for j in result.jobs for n in j.notes]
    return [n for n in notes if any(w in n.lower() for w in words)]


def error_line(result: TriageResult, group: Group) -> str:
    """The failing line to show for a group.

    A job ended by the scheduler or the host (time limit, preemption, OOM killer) shows that verdict, the
    representative's headline: the engine reads the lines before it too and may pick a progress line.
    Otherwise the diagnosis' error line, else the representative's headline, else the excerpt's last line.
    """
    try:
        rep = result.job(group.representative)
    except KeyError:
        rep = None
    headline = rep.headline if rep is not None else ""
    if headline and rep is not None and rep.reason in VERDICT_REASONS:
        return headline
    if group.diagnosis is not None and group.diagnosis.error:
        return group.diagnosis.error
    if headline:
        return headline
    lines = [ln for ln in group.excerpt.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def render_table(result: TriageResult, console: Console, *, top: int = 5, rows: int | None = None) -> None:
    """Print the groups ranked by GPU hours lost, a totals line, then the top ``top`` diagnoses in short form.

    The table has one row per group: rank, GPU hours, jobs, category, title, first/last seen (UTC
    date and minute) and up to three example job ids; ``rows`` caps the table (None: every group). Below 110 columns, category goes under the title and
    first/last seen share a cell so the table stays readable at 80 columns.
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    groups = result.groups
    wide = console.width >= 110
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, header_style="bold", title_justify="left")
    table.title = Text(f"{len(groups)} failure group{'s' if len(groups) != 1 else ''}, ranked by GPU hours lost", style="bold")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("GPU h", justify="right", no_wrap=True)
    table.add_column("jobs", justify="right", no_wrap=True)
    if wide:
        table.add_column("category", no_wrap=True, style="magenta")
        table.add_column("title", ratio=1, min_width=20, overflow="fold")
        table.add_column("first seen (UTC)", no_wrap=True)
        table.add_column("last seen (UTC)", no_wrap=True)
    else:
        table.add_column("group", ratio=1, min_width=16, overflow="fold")
        table.add_column("first / last (UTC)", no_wrap=True)
    table.add_column("example jobs", overflow="fold", max_width=24 if wide else 16)

    shown = groups if rows is None else groups[: max(rows, 0)]
    for rank, g in enumerate(shown, 1):
        title = Text(clean_text(g.title, oneline=True, limit=160) or "(untitled)")
        examples = Text("\n".join(clean_text(j, oneline=True, limit=60) for j in g.job_ids[:3]), style="cyan")
        if len(g.job_ids) > 3:
            examples.append(f"\n+{len(g.job_ids) - 3} more", style="dim")
        hours = Text(fmt_hours(g.gpu_hours, hours_known(result, g)), style="bold red" if g.gpu_hours > 0 else "dim")
        cells: list[Text] = [Text(str(rank)), hours, Text(str(len(g.job_ids)))]
        category = clean_text(g.category, oneline=True)
        title.append(f"\n{clean_text(g.group_id, oneline=True)}", style="dim cyan")
        _mark_known(result, g, title)
        if wide:
            cells += [Text(category), title, Text(fmt_minute(g.first_seen)), Text(fmt_minute(g.last_seen))]
        else:
            title.append(f"\n{category}", style="magenta")
            cells += [title, Text(f"{fmt_minute(g.first_seen)}\n{fmt_minute(g.last_seen)}")]
        table.add_row(*cells, examples)

    if groups:
        console.print(table)
        if len(shown) < len(groups):
            console.print(Text(f"… {len(groups) - len(shown)} more groups not shown", style="dim"))
    else:
        console.print(Text("No failed jobs.", style="bold green"))
    console.print(_totals(result))
    for rank, g in enumerate(groups[: max(top, 0)], 1):
        _print_group(result, g, rank, console)


def _mark_known(result: TriageResult, g: Group, cell: Text) -> None:
    """Add the group's ``REGRESSION`` and ``known: <note> (resolved <date>)`` lines to a table cell."""
    from assistant.triage.known import known_text, regression_text

    k = result.known.get(g.group_id)
    if k is None:
        return
    if k.regression:
        cell.append(f"\n{regression_text(k)}", style="bold red")
    cell.append(f"\n{clean_text(known_text(k), oneline=True, limit=200)}", style="green")
    cell.append(f"\nrunbook {clean_text(k.runbook, oneline=True)}", style="blue")


def _totals(result: TriageResult) -> Text:
    """The line under the table: jobs read, failed, succeeded, groups, GPU hours, bytes, unreadable files, run notes."""
    from rich.text import Text

    failed = len(result.failed)
    total_hours = sum(g.gpu_hours for g in result.groups)
    line = Text()
    line.append(f"{len(result.jobs)} jobs read", style="bold")
    line.append(" · ")
    line.append(f"{failed} failed", style="bold red" if failed else "green")
    line.append(f" · {len(result.jobs) - failed} succeeded · {len(result.groups)} groups")
    line.append(f" · {fmt_hours(total_hours)} GPU h lost")
    if result.bytes_read:
        line.append(f" · {fmt_bytes(result.bytes_read)} in {result.elapsed_s:.1f} s", style="dim")
    unreadable = unreadable_notes(result)
    if unreadable:
        line.append(f" · {len(unreadable)} unreadable file{'s' if len(unreadable) != 1 else ''} noted", style="yellow")
    for n in result.notes[:3]:
        line.append(f"\nnote: {clean_text(n, oneline=True, limit=300)}", style="dim italic")
    if len(result.notes) > 3:
        line.append(f"\n… and {len(result.notes) - 3} more notes", style="dim italic")
    return line


def _print_group(result: TriageResult, g: Group, rank: int, console: Console) -> None:
    """One group's diagnosis in short form: cause (first paragraph), two fixes with code, source ids."""
    from rich.console import Group as RenderGroup
    from rich.panel import Panel
    from rich.text import Text

    d = g.diagnosis
    title = Text(f" #{rank} ", style="bold")
    title.append(clean_text(g.title, oneline=True, limit=100) or "(untitled)", style="bold")
    title.append(" ")
    head = Text(clean_text(g.category, oneline=True), style="magenta")
    head.append(f" · {len(g.job_ids)} job{'s' if len(g.job_ids) != 1 else ''} · {fmt_hours(g.gpu_hours, hours_known(result, g))} GPU h", style="dim")
    head.append(f" · group {clean_text(g.group_id, oneline=True)}", style="dim cyan")
    parts: list = [head]
    known = Text()
    _mark_known(result, g, known)
    if known.plain:
        parts.append(known[1:])  # without the leading newline
    error = clean_text(error_line(result, g), oneline=True, limit=240)
    if error:
        parts.append(Text(f"error: {error}", style="dim"))
    location = g.location or (d.location if d is not None else None)
    if location:
        parts.append(Text(f"at: {clean_text(location, oneline=True, limit=200)}", style="dim"))
    if d is None:
        parts.append(Text("No diagnosis for this group (the engine was not run).", style="yellow"))
    else:
        cause = clean_text(d.cause).strip().split("\n\n")[0]
        parts.append(Text(_SPACES.sub(" ", cause).strip()))
        for i, f in enumerate(d.fixes[:2], 1):
            line = Text(f"{i}. ", style="bold green")
            line.append(clean_text(f.title, oneline=True), style="bold")
            parts.append(line)
            if f.code:
                parts.append(code_block(f.code))
        if len(d.fixes) > 2:
            parts.append(Text(f"   (+{len(d.fixes) - 2} more fix{'es' if len(d.fixes) > 3 else ''} in the full report)", style="dim"))
        if d.sources:
            parts.append(Text("sources: " + ", ".join(clean_text(s.id, oneline=True) for s in d.sources), style="blue"))
    colour = "yellow" if g.category == "unknown" or d is None else "red"
    console.print(Panel(RenderGroup(*parts), title=title, title_align="left", border_style=colour))


def make_progress(console: Console) -> Progress:
    """A rich Progress for reading jobs: spinner, description, bar, ``done/total`` jobs, MB read, elapsed.

    Add the task with a ``bytes`` field and advance it per job (or use :func:`progress_hook`)::

        with make_progress(console) as progress:
            task = progress.add_task("reading jobs", total=len(specs), bytes=0)
            result = triage(paths, on_job=progress_hook(progress, task))
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    class _BytesColumn(ProgressColumn):
        """MB read so far and the rate, from the task's ``bytes`` field (absent: 0)."""

        def render(self, task) -> Text:  # noqa: ANN001 - rich's Task
            done = float(task.fields.get("bytes", 0) or 0)
            rate = f" · {done / 1e6 / task.elapsed:,.1f} MB/s" if task.elapsed else ""
            return Text(f"{done / 1e6:,.1f} MB{rate}", style="progress.download")

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("jobs"),
        _BytesColumn(),
        TimeElapsedColumn(),
        console=console,
    )


def progress_hook(progress: Progress, task: TaskID) -> Callable[[JobReport], None]:
    """An ``on_job`` callback that advances ``task`` by one job and adds the job's bytes to its ``bytes`` field."""
    seen = {"bytes": 0}

    def on_job(report: JobReport) -> None:
        seen["bytes"] += report.size_bytes
        progress.update(task, advance=1, bytes=seen["bytes"])

    return on_job
