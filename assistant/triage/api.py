"""`triage(paths)`: from folders of job logs to ranked root-cause groups, each with a cited diagnosis.

The flow: discover jobs -> extract each job (streaming pass, locally, in processes or on Ray) ->
apply the scheduler's accounting (``--sacct``) -> group centrally in job-id order (Drain3
templates + user code location) -> diagnose one representative per group with the full engine
(rules, retrieval, citations) -> rank groups by GPU hours lost, then job count.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from assistant.triage.extract import FALLBACK_CATEGORY, ExtractOptions
from assistant.triage.model import FAILED, SUCCEEDED, Group, JobReport, TriageResult

EXCERPT_LINES = 30


def triage(
    paths: Sequence[str | Path],
    *,
    sacct: str | Path | None = None,
    engine: str = "local",
    jobs: int = 1,
    ray_address: str | None = None,
    diagnose_groups: bool = True,
    on_job: Callable[[JobReport], None] | None = None,
    options: ExtractOptions | None = None,
    on_discovered: Callable[[int, int], None] | None = None,
    engine_obj: Any = None,
) -> TriageResult:
    """Triage every job under ``paths`` (directories, files or globs).

    ``engine`` is ``local`` (``jobs`` processes; 0: one per CPU for a large folder, which needs the caller's script to
    guard its entry point with ``if __name__ == "__main__":``, as any process pool does; the CLI defaults to 0) or ``ray`` (``ray_address`` or a local instance);
    the result is the same either way. ``on_discovered(job_count, total_bytes)`` is called once
    before extraction and ``on_job`` as each job is read (progress bars). ``engine_obj`` diagnoses the groups'
    representatives (default: the engine of the environment's settings; the CLI's ``--llm`` passes its own).
    """
    from assistant.triage.distribute import extract_all
    from assistant.triage.jobs import discover

    started = time.perf_counter()
    notes: list[str] = []
    specs = discover(paths, notes)
    if on_discovered is not None:
        on_discovered(len(specs), sum(_size(f) for s in specs for f in s.files))
    reports = extract_all(specs, engine=engine, jobs=jobs, ray_address=ray_address, options=options, on_job=on_job)
    if sacct is not None:
        from assistant.triage.sacct import load_sacct

        rows = load_sacct(sacct)
        reports, covered = apply_sacct(reports, rows)
        notes.append(f"scheduler accounting covered {covered} of {len(reports)} jobs")
    result = build_result(reports, engine_obj=engine_obj, diagnose_groups=diagnose_groups, notes=notes)
    return dataclasses.replace(result, elapsed_s=time.perf_counter() - started)


def apply_sacct(reports: Sequence[JobReport], rows: dict[str, Any]) -> tuple[list[JobReport], int]:
    """Let the scheduler's accounting win where it covers a job: GPUs, start, end and a failed state."""
    from assistant.triage.sacct import find_row

    out: list[JobReport] = []
    covered = 0
    for r in reports:
        row = find_row(rows, r.job_id, r.files)
        if row is None:
            out.append(r)
            continue
        covered += 1
        gpus = row.gpus or r.gpus
        start = row.start if row.start is not None else r.start
        end = row.end if row.end is not None else r.end
        hours = gpus * (end - start) / 3600.0 if gpus and start is not None and end is not None and end >= start else r.gpu_hours
        changes: dict[str, Any] = {"gpus": gpus, "start": start, "end": end, "gpu_hours": hours}
        reason = row.reason
        if r.status == SUCCEEDED and reason is not None:
            # The logs showed nothing, but the scheduler says the job ended badly.
            changes.update(status=FAILED, reason=reason, category=FALLBACK_CATEGORY.get(reason, "unknown"),
                           headline=f"sacct: {row.state} (exit code {row.exit_code})", title=f"Scheduler reports {row.state.split()[0].lower()}",
                           failure_text=f"sacct: job {row.job_id} {row.state} exit code {row.exit_code}",
                           notes=r.notes + ("status from the scheduler's accounting; the logs show no failure",))
        out.append(dataclasses.replace(r, **changes))
    return out, covered


def build_result(
    reports: Sequence[JobReport],
    *,
    engine_obj: Any = None,
    diagnose_groups: bool = True,
    notes: Sequence[str] = (),
    stop: Callable[[], bool] | None = None,
) -> TriageResult:
    """Group failed jobs, name and diagnose one representative per group, and rank the groups.

    The engine runs once per group, not once per job: jobs of one root cause share its category
    and title, and a thousand jobs with one error cost one diagnosis. ``stop`` is asked before
    every job is grouped and every group diagnosed: True raises
    :class:`~assistant.triage.extract.Cancelled` (the server's abandoned request).
    """
    from assistant.triage.extract import Cancelled, categorize
    from assistant.triage.grouping import group_reports

    ordered = sorted(reports, key=lambda r: r.job_id)
    keys, grouper = group_reports(ordered, stop)
    members: dict[str, list[JobReport]] = {}
    for r in ordered:
        if r.job_id in keys:
            members.setdefault(keys[r.job_id], []).append(r)
    engine = engine_obj
    if diagnose_groups and members and engine is None:
        from assistant.engine import default_engine

        engine = default_engine()
    by_id = {r.job_id: r for r in ordered}
    group_of: dict[str, str] = {}
    groups: list[Group] = []
    taken: set[str] = set()
    naming: dict[str, tuple[JobReport, Any, JobReport]] = {}
    for key, jobs in members.items():
        if stop is not None and stop():
            raise Cancelled()
        rep = _representative(jobs)
        diagnosis = None
        if diagnose_groups and engine is not None:
            diagnosis = engine.diagnose(rep.failure_text or rep.headline or rep.title or "job failed")
        if rep.category is not None:
            named = rep  # categorized already (per-job rules were asked for)
        elif diagnosis is not None and diagnosis.rule:
            named = categorize(rep, diagnosis.category, diagnosis.title, diagnosis.rule)
        else:
            named = categorize(rep)
        naming[key] = (rep, diagnosis, named)
    members = _merge_same_statement(members, {key: named for key, (_, _, named) in naming.items()})
    for key, jobs in members.items():
        rep, diagnosis, named = naming[key]
        category = named.category or "unknown"
        title = named.title or "Job failed"
        group_id = _final_id(key, category, taken)
        for j in jobs:
            by_id[j.job_id] = j if j.category is not None else dataclasses.replace(j, category=category, title=title, rule=named.rule)
            group_of[j.job_id] = group_id
        starts = [j.start for j in jobs if j.start is not None]
        ends = [j.end if j.end is not None else j.start for j in jobs if j.end is not None or j.start is not None]
        groups.append(Group(
            group_id=group_id,
            category=category,
            title=title,
            template=grouper.template(rep),
            location=rep.location,
            job_ids=tuple(j.job_id for j in jobs),
            gpu_hours=sum(j.gpu_hours or 0.0 for j in jobs),
            first_seen=min(starts) if starts else None,
            last_seen=max(e for e in ends if e is not None) if ends else None,
            representative=rep.job_id,
            excerpt="\n".join(rep.failure_text.splitlines()[-EXCERPT_LINES:]),
            diagnosis=diagnosis,
        ))
    groups.sort(key=lambda g: (-round(g.gpu_hours, 6), -len(g.job_ids), g.group_id))
    jobs_out = tuple(by_id[r.job_id] for r in ordered)
    return TriageResult(
        jobs=jobs_out,
        groups=tuple(groups),
        group_of=group_of,
        notes=tuple(notes),
        bytes_read=sum(r.size_bytes for r in ordered),
    )


def _merge_same_statement(members: dict[str, list[JobReport]], named: dict[str, JobReport]) -> dict[str, list[JobReport]]:
    """Groups whose representatives one rule names, failing at one statement of the user's code, made one.

    The grouper keys a failure at a user frame by its message's first words; another PyTorch version words the same
    failure otherwise ("expected scalar type Float but found Half" and "expected mat1 and mat2 to have the same dtype,
    but got: float != c10::Half" at one ``self.lm_head(h)``). The rule that names both, at the same source line, says
    they are one root cause. The first group (in job-id order) keeps its id and representative."""
    first_of: dict[tuple[str, str, str], str] = {}
    merged: dict[str, list[JobReport]] = {}
    for key, jobs in members.items():
        statement = _statement(named[key])
        into = first_of.setdefault(statement, key) if statement is not None else key
        merged.setdefault(into, []).extend(jobs)
    return {key: sorted(jobs, key=lambda r: r.job_id) for key, jobs in merged.items()}


def _statement(named: JobReport) -> tuple[str, str, str] | None:
    """(rule, category, source location) of a named representative; None without a rule or a source line."""
    from assistant.triage.grouping import normalize_location

    location = normalize_location(named.location)
    if not named.rule or not location.partition(": ")[2].strip():
        return None  # without the source line, one function's two statements would look alike
    return named.rule, named.category or "unknown", location


def _final_id(key: str, category: str, taken: set[str]) -> str:
    """A group id that names its category: ``<category>-<digest of the root cause>``."""
    digest = key.rsplit("-", 1)[-1]
    group_id = f"{category}-{digest}"
    n = 2
    while group_id in taken:
        group_id = f"{category}-{digest}-{n}"
        n += 1
    taken.add(group_id)
    return group_id


def _representative(jobs: list[JobReport]) -> JobReport:
    """The job whose failure is diagnosed for the group: the one with the most complete failure text."""
    with_trace = [j for j in jobs if "Traceback" in j.failure_text and j.headline]
    pool = with_trace or jobs
    return min(pool, key=lambda j: j.job_id)


def _size(path: str) -> int:
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0
