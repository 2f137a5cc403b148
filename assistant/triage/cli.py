"""`torchhelp triage`: the command line over :func:`assistant.triage.api.triage` and the watcher."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from assistant.cli_options import llm_option
from assistant.errors import TriageError


RESOLVE_COMMAND = "triage-resolve"  # `torchhelp triage resolve ...` is routed here (see route_argv)


def register(app: typer.Typer) -> None:
    """Add the `triage` command (and its `triage resolve` form) to the main app."""
    app.command("triage", help="Triage a folder of job logs: which jobs failed, why, grouped by root cause and ranked by GPU hours lost. "
                "`torchhelp triage resolve GROUP --note TEXT` records the fix of a group.")(triage_cmd)
    app.command(RESOLVE_COMMAND, hidden=True, help="Record the fix of a failure group as a team runbook (`torchhelp triage resolve`).")(resolve_cmd)


def route_argv(argv: list[str]) -> list[str]:
    """``triage resolve ...`` -> the resolve command (``triage`` itself takes folders as arguments)."""
    if len(argv) >= 2 and argv[0] == "triage" and argv[1] == "resolve":
        return [RESOLVE_COMMAND, *argv[2:]]
    return argv


def resolve_cmd(
    group: str = typer.Argument(..., help="The group id a triage output shows, or a unique prefix of it."),
    note: str = typer.Option("", "--note", "-n", help="What fixed it (shown on every later job of this group)."),
    root: Optional[Path] = typer.Option(None, "--root", help="Triage this folder to find the group (default: the groups the last triage runs showed)."),
    by: Optional[str] = typer.Option(None, "--by", help="Who resolved it (default: $USER)."),
    state: Optional[Path] = typer.Option(None, "--state", help="The SQLite triage state (default under TORCHHELP_HOME)."),
) -> None:
    """Write a team runbook for a failure group and record the resolution in the triage state."""
    from assistant.settings import load_settings
    from assistant.triage.resolve import check_note, resolve_group
    from assistant.triage.state import default_state_path

    check_note(note)  # before any triage of --root: an empty note fails at once
    r = resolve_group(group, note, home=load_settings().home, state_path=state or default_state_path(), root=root, by=by)
    print(f"resolved {r.group_id} ({r.category}) by {r.by} on {r.resolved_day}: {r.note}")
    print(f"  runbook {r.doc_id}: {r.runbook}")


def triage_cmd(
    paths: list[str] = typer.Argument(..., help="Directories of jobs (each subfolder or loose log file is a job), files, or globs."),
    jsonl: Optional[Path] = typer.Option(None, "--jsonl", help="Write one JSON line per job (sorted by job id)."),
    groups_json: Optional[Path] = typer.Option(None, "--groups-json", help="Write the groups with their full diagnoses as JSON."),
    markdown: Optional[Path] = typer.Option(None, "--markdown", help="Write a Markdown report (for a ticket)."),
    html: Optional[Path] = typer.Option(None, "--html", help="Write one self-contained HTML page."),
    sacct: Optional[Path] = typer.Option(None, "--sacct", help="`sacct --parsable2` output; its times, GPUs and states win where it covers a job."),
    engine: str = typer.Option("local", "--engine", help="local | ray"),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="An existing Ray cluster (default: start a local one)."),
    jobs: int = typer.Option(0, "--jobs", "-j", min=0, help="Local worker processes (0: one per CPU, one process below 200 jobs); with --engine ray and no address, the local Ray instance's CPUs."),
    top: int = typer.Option(5, "--top", min=0, help="Diagnoses to show in the terminal."),
    watch: bool = typer.Option(False, "--watch", help="Keep polling and triage jobs as they finish (Ctrl-C stops)."),
    webhook: Optional[str] = typer.Option(None, "--webhook", help="With --watch: POST a Slack-compatible JSON message per new group and per N new jobs."),
    interval: float = typer.Option(10.0, "--interval", min=0.1, help="With --watch: seconds between polls."),
    settle: float = typer.Option(60.0, "--settle", min=0.0, help="With --watch: a job is finished when its logs stopped changing this long."),
    notify_every: int = typer.Option(10, "--notify-every", min=1, help="With --watch: a message each time a group grows by this many jobs."),
    state: Optional[Path] = typer.Option(None, "--state", help="The SQLite state file: the watcher's memory, resolved groups (default under TORCHHELP_HOME)."),
    regression_after: Optional[str] = typer.Option(None, "--regression-after", help="Jobs of a resolved group that ended after this date (YYYY-MM-DD, UTC) are regressions (default: the resolution's own date)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No table or progress bar (files are still written)."),
    llm: Optional[str] = llm_option("Who writes each group's diagnosis (one representative per group): none | local | openai (default: a configured API, else none; TORCHHELP_LLM)."),
) -> None:
    """Triage job logs (see `torchhelp triage --help`)."""
    from rich.console import Console

    console = Console(stderr=False)
    err = Console(stderr=True)
    if engine not in ("local", "ray"):
        raise TriageError(f"unknown --engine {engine!r}: use local or ray")
    if webhook and not watch:
        raise TriageError("--webhook is used with --watch")
    cutoff = None
    if regression_after is not None:
        from assistant.triage.resolutions import parse_when

        cutoff = parse_when(regression_after)
    engine_obj = _diagnosis_engine(llm)
    if watch:
        _watch(paths, webhook=webhook, interval=interval, settle=settle, notify_every=notify_every, state=state, console=err,
               regression_after=cutoff, engine_obj=engine_obj)
        return

    from assistant.triage.api import triage
    from assistant.triage.render_terminal import make_progress, progress_hook, render_table

    show = not quiet and err.is_terminal
    if show:
        with make_progress(err) as progress:
            task = progress.add_task("reading jobs", total=None, bytes=0)

            def discovered(count: int, total_bytes: int) -> None:
                progress.update(task, total=count)

            result = triage(paths, sacct=sacct, engine=engine, jobs=jobs, ray_address=ray_address,
                            on_job=progress_hook(progress, task), on_discovered=discovered, engine_obj=engine_obj)
    else:
        result = triage(paths, sacct=sacct, engine=engine, jobs=jobs, ray_address=ray_address, engine_obj=engine_obj)
    result = _with_memory(result, paths, state, cutoff)

    if jsonl is not None:
        _write(jsonl, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in result.jsonl_rows()))
    if groups_json is not None:
        _write(groups_json, json.dumps(result.groups_json(), indent=2, ensure_ascii=False) + "\n")
    if markdown is not None:
        from assistant.triage.render_markdown import to_markdown

        _write(markdown, to_markdown(result))
    if html is not None:
        from assistant.triage.render_html import to_html

        _write(html, to_html(result))
    if not quiet:
        render_table(result, console, top=top)
    for path in (jsonl, groups_json, markdown, html):
        if path is not None:
            err.print(f"wrote {path}", markup=False, highlight=False)


def _with_memory(result, paths: list[str], state: Path | None, cutoff: float | None):
    """Mark resolved groups and regressions; remember the groups so `triage resolve <id>` finds them."""
    from assistant.settings import load_settings
    from assistant.triage.known import annotate
    from assistant.triage.resolutions import load_resolutions
    from assistant.triage.resolve import remember
    from assistant.triage.state import default_state_path

    result = annotate(result, load_resolutions(load_settings().home), regression_after=cutoff)
    if result.groups:
        remember(state or default_state_path(), result, paths)
    return result


def _watch(paths: list[str], *, webhook: str | None, interval: float, settle: float, notify_every: int, state: Path | None, console,
           regression_after: float | None = None, engine_obj=None) -> None:
    from assistant.render.outgoing import shown_line
    from assistant.triage.watch import watch

    console.print(shown_line(f"watching {', '.join(paths)} every {interval:g}s (finished after {settle:g}s without change); Ctrl-C stops"),
                  markup=False, highlight=False)
    watch(paths, interval_s=interval, settle_s=settle, webhook=webhook, notify_every=notify_every, state_path=state,
          on_event=lambda e: console.print(e.text, markup=False, highlight=False), regression_after=regression_after,
          engine_obj=engine_obj)


def _diagnosis_engine(llm: str | None):
    """The engine that diagnoses each group's representative: ``--llm`` as in ``ask``; None keeps the default engine."""
    if llm is None:
        return None
    from assistant.engine import default_engine
    from assistant.settings import load_settings

    return default_engine(load_settings(llm=llm))


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise TriageError(f"cannot write {path}: {exc.strerror or exc}") from None


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `torchhelp triage`")
