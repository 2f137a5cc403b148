"""Mark the groups of a triage result that the team already resolved, and the ones that came back.

A group is *known* when its signature (masked template and user frame, as
:mod:`assistant.triage.grouping` defines the group) matches a resolution runbook. Its jobs that
ended after the resolution (or after ``--regression-after``) are a *regression*: the fix did not
hold, or was undone. A job whose end time is unknown is never called a regression.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from assistant.triage.grouping import normalize_location
from assistant.triage.model import Group, Known, TriageResult
from assistant.triage.resolutions import Resolution, find_resolution


def group_signature(group: Group) -> tuple[str, str]:
    """The group's signature: its masked template and its user frame (numbers masked)."""
    return group.template, normalize_location(group.location)


def annotate(result: TriageResult, resolutions: Sequence[Resolution], *, regression_after: float | None = None) -> TriageResult:
    """``result`` with ``known`` filled: each group matching a resolution, and its jobs past the cutoff."""
    if not resolutions:
        return result
    by_id = {j.job_id: j for j in result.jobs}
    known: dict[str, Known] = {}
    pool = list(resolutions)
    for g in result.groups:
        template, location = group_signature(g)
        r = find_resolution(pool, template=template, location=location, category=g.category)
        if r is None:
            continue
        cutoff = regression_after if regression_after is not None else r.resolved_at
        back = []
        for job_id in g.job_ids:
            job = by_id.get(job_id)
            ended = None if job is None else (job.end if job.end is not None else job.start)
            if ended is not None and ended > cutoff:
                back.append(job_id)
        known[g.group_id] = known_of(r, cutoff, tuple(back))
    return dataclasses.replace(result, known=known)


def known_of(r: Resolution, cutoff: float, regression_jobs: tuple[str, ...] = ()) -> Known:
    """The :class:`Known` record of a resolution."""
    return Known(note=r.note, by=r.by, resolved_at=r.resolved_at, resolved_day=r.resolved_day, resolved_group=r.group_id,
                 runbook=r.doc_id, runbook_path=r.runbook, cutoff=cutoff, regression_jobs=regression_jobs)


def known_text(k: Known) -> str:
    """``known: <note> (resolved <date>)``: the line every renderer shows for a resolved group."""
    return f"known: {k.note} (resolved {k.resolved_day})"


def regression_text(k: Known) -> str:
    """``REGRESSION: N job(s) ended after <date>``, or "" when none came back."""
    if not k.regression_jobs:
        return ""
    from assistant.triage.render_terminal import fmt_time

    n = len(k.regression_jobs)
    return f"REGRESSION: {n} job{'s' if n != 1 else ''} ended after {fmt_time(k.cutoff)}"
