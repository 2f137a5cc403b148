"""`torchhelp triage`: the command line over :func:`assistant.triage.api.triage` and the watcher."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from assistant.errors import TriageError


def register(app: typer.Typer) -> None:
    """Add the `triage` command to the main app."""
    app.command("triage", help="Triage a folder of job logs: which jobs failed, why, grouped by root cause and ranked by GPU hours lost.")(triage_cmd)


def triage_cmd(
    paths: list[str] = typer.Argument(..., help="Directories of jobs (each subfolder or loose log file is a job), files, or globs."),
    jsonl: Optional[Path] = typer.Option(None, "--jsonl", help="Write one JSON line per job (sorted by job id)."),
    groups_json: Optional[Path] = typer.Option(None, "--groups-json", help="Write the groups with their full diagnoses as JSON."),
    markdown: Optional[Path] = typer.Option(None, "--markdown", help="Write a Markdown report (for a ticket)."),
    html: Optional[Path] = typer.Option(None, "--html", help="Write one self-contained HTML page."),
    sacct: Optional[Path] = typer.Option(None, "--sacct", help="`sacct --parsable2` output; its times, GPUs and states win where it covers a job."),
    engine: str = typer.Option("local", "--engine", help="local | ray"),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="An existing Ray cluster (default: start a local one)."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Local worker processes; with --engine ray and no address, the local Ray instance's CPUs."),
    top: int = typer.Option(5, "--top", min=0, help="Diagnoses to show in the terminal."),
    watch: bool = typer.Option(False, "--watch", help="Keep polling and triage jobs as they finish (Ctrl-C stops)."),
    webhook: Optional[str] = typer.Option(None, "--webhook", help="With --watch: POST a Slack-compatible JSON message per new group and per N new jobs."),
    interval: float = typer.Option(10.0, "--interval", min=0.1, help="With --watch: seconds between polls."),
    settle: float = typer.Option(60.0, "--settle", min=0.0, help="With --watch: a job is finished when its logs stopped changing this long."),
    notify_every: int = typer.Option(10, "--notify-every", min=1, help="With --watch: a message each time a group grows by this many jobs."),
    state: Optional[Path] = typer.Option(None, "--state", help="With --watch: the SQLite state file (default under TORCHHELP_HOME)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No table or progress bar (files are still written)."),
) -> None:
    """Triage job logs (see `torchhelp triage --help`)."""
    from rich.console import Console

    console = Console(stderr=False)
    err = Console(stderr=True)
    if engine not in ("local", "ray"):
        raise TriageError(f"unknown --engine {engine!r}: use local or ray")
    if webhook and not watch:
        raise TriageError("--webhook is used with --watch")
    if watch:
        _watch(paths, webhook=webhook, interval=interval, settle=settle, notify_every=notify_every, state=state, console=err)
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
                            on_job=progress_hook(progress, task), on_discovered=discovered)
    else:
        result = triage(paths, sacct=sacct, engine=engine, jobs=jobs, ray_address=ray_address)

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


def _watch(paths: list[str], *, webhook: str | None, interval: float, settle: float, notify_every: int, state: Path | None, console) -> None:  # type: ignore[no-untyped-def]
    from assistant.triage.watch import watch

    console.print(f"watching {', '.join(paths)} every {interval:g}s (finished after {settle:g}s without change); Ctrl-C stops", markup=False, highlight=False)
    watch(paths, interval_s=interval, settle_s=settle, webhook=webhook, notify_every=notify_every, state_path=state,
          on_event=lambda e: console.print(e.text, markup=False, highlight=False))


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise TriageError(f"cannot write {path}: {exc.strerror or exc}") from None


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `torchhelp triage`")
