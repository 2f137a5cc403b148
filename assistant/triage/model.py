"""The data triage produces: one :class:`JobReport` per job, one :class:`Group` per root cause.

Every output (terminal table, JSONL, groups JSON, Markdown, HTML, webhook messages) is rendered
from a :class:`TriageResult`; nothing downstream re-reads the logs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from assistant.types import Diagnosis

FAILED = "failed"
SUCCEEDED = "succeeded"
# Endings decided outside the program (the scheduler, the host's OOM killer): their own line is the error to show.
VERDICT_REASONS = frozenset({"time_limit", "preempted", "cancelled", "node_failure", "oom_kill"})


@dataclass(frozen=True)
class JobSpec:
    """A job found on disk: its id and the log files that belong to it (absolute paths, sorted)."""

    job_id: str
    root: str  # the job's own directory, or the input directory for a loose log file
    files: tuple[str, ...]


@dataclass(frozen=True)
class JobReport:
    """What the streaming pass concluded about one job (picklable: it crosses process and Ray boundaries)."""

    job_id: str
    files: tuple[str, ...]  # paths relative to the job's root, as the JSONL shows them
    status: str  # FAILED | SUCCEEDED
    category: str | None = None
    title: str | None = None
    rule: str | None = None  # the rule outcome that named the category, when one did
    reason: str = ""  # how the job ended: exception | signal | time_limit | oom_kill | node_failure | preempted | hang | exit_code | ...
    headline: str = ""  # the failing line (exception line, signal line, scheduler verdict)
    failure_text: str = ""  # the extracted failure the engine diagnoses ("" for succeeded jobs)
    location: str | None = None  # the deepest frame in the user's own code: "file.py:function: source line"
    location_line: int | None = None  # that frame's line number (groups a log that shows no source line by it)
    first_failing_rank: int | None = None
    ranks_seen: int = 0  # distinct ranks that wrote to the logs
    gpus: int | None = None
    start: float | None = None  # epoch seconds (UTC when the log says nothing)
    end: float | None = None
    gpu_hours: float | None = None
    size_bytes: int = 0
    notes: tuple[str, ...] = ()  # files that could not be read, truncation, what was assumed

    def row(self, group: str | None) -> dict[str, Any]:
        """The JSONL contract line (README, "The JSONL contract": every key, its type and meaning).

        Log text made safe like every output (:func:`assistant.render.outgoing.shown_value`)."""
        from assistant.render.outgoing import shown_value

        failed = self.status == FAILED
        return shown_value({
            "job_id": self.job_id,
            "status": self.status,
            "group": group if failed else None,
            "category": self.category if failed else None,
            "first_failing_rank": self.first_failing_rank if failed else None,
            "gpu_hours": None if self.gpu_hours is None else round(self.gpu_hours, 4),
            "files": list(self.files),
            "title": self.title if failed else None,
            "reason": (self.reason or None) if failed else None,
        })


@dataclass(frozen=True)
class Group:
    """Jobs that failed for one root cause, with the cited diagnosis of a representative job."""

    group_id: str
    category: str
    title: str
    template: str  # the masked error template the jobs share
    location: str | None  # the shared user code location, when there is one
    job_ids: tuple[str, ...]
    gpu_hours: float
    first_seen: float | None
    last_seen: float | None
    representative: str  # the job whose failure was diagnosed
    excerpt: str  # a short excerpt of the representative's failure, for reports
    diagnosis: Diagnosis | None = None

    def to_dict(self) -> dict[str, Any]:
        """The `--groups-json` object for this group (log text made safe: no terminal controls, no credentials)."""
        from assistant.render.outgoing import shown_value

        return shown_value({
            "group": self.group_id,
            "category": self.category,
            "title": self.title,
            "template": self.template,
            "location": self.location,
            "jobs": list(self.job_ids),
            "job_count": len(self.job_ids),
            "gpu_hours": round(self.gpu_hours, 4),
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "representative": self.representative,
            "excerpt": self.excerpt,
            "diagnosis": self.diagnosis.to_dict() if self.diagnosis is not None else None,
        })


@dataclass(frozen=True)
class Known:
    """A group that matches a resolved signature: the team's note, its runbook, and the jobs that came back."""

    note: str
    by: str
    resolved_at: float  # epoch seconds, UTC
    resolved_day: str  # ``YYYY-MM-DD``
    resolved_group: str  # the group id it was resolved under
    runbook: str  # the runbook's document id ("user:...")
    runbook_path: str
    cutoff: float  # jobs that ended after this are regressions (the resolution time, or --regression-after)
    regression_jobs: tuple[str, ...] = ()

    @property
    def regression(self) -> bool:
        """Whether some job of the group ended after the cutoff."""
        return bool(self.regression_jobs)

    def to_dict(self) -> dict[str, Any]:
        """The ``known`` object of the JSONL, groups JSON and webhook (the team's note made safe to show)."""
        from assistant.render.outgoing import shown_value

        return shown_value({
            "note": self.note,
            "resolved": self.resolved_day,
            "resolved_by": self.by,
            "resolved_group": self.resolved_group,
            "runbook": self.runbook,
            "runbook_path": self.runbook_path,
        })


@dataclass(frozen=True)
class TriageResult:
    """Jobs (sorted by id) and groups (ranked by GPU hours lost, then job count)."""

    jobs: tuple[JobReport, ...]
    groups: tuple[Group, ...]
    group_of: dict[str, str] = field(default_factory=dict)  # job_id -> group_id, failed jobs only
    notes: tuple[str, ...] = ()
    elapsed_s: float = 0.0
    bytes_read: int = 0
    known: dict[str, Known] = field(default_factory=dict)  # group_id -> the resolution it matches (see triage.known)

    @property
    def failed(self) -> tuple[JobReport, ...]:
        """The failed jobs, sorted by id."""
        return tuple(j for j in self.jobs if j.status == FAILED)

    def job(self, job_id: str) -> JobReport:
        """The report of one job by id (KeyError when absent)."""
        for j in self.jobs:
            if j.job_id == job_id:
                return j
        raise KeyError(job_id)

    def jsonl_rows(self) -> list[dict[str, Any]]:
        """One contract row per job, sorted by job_id; a job of a resolved group adds ``known`` and ``regression``."""
        rows = []
        for j in sorted(self.jobs, key=lambda j: j.job_id):
            group = self.group_of.get(j.job_id)
            row = j.row(group)
            known = self.known.get(group) if group is not None and j.status == FAILED else None
            if known is not None:
                row["known"] = known.to_dict()
                row["regression"] = j.job_id in known.regression_jobs
            rows.append(row)
        return rows

    def groups_json(self) -> list[dict[str, Any]]:
        """One object per group, in rank order (a resolved group adds ``known`` and ``regression``)."""
        from assistant.render.outgoing import shown_value

        out = []
        for i, g in enumerate(self.groups):
            item = dict(g.to_dict(), rank=i + 1)
            known = self.known.get(g.group_id)
            if known is not None:
                item["known"] = known.to_dict()
                item["regression"] = known.regression
                item["regression_jobs"] = shown_value(list(known.regression_jobs))
            out.append(item)
        return out
