"""The scheduler's own accounting: parse ``sacct --parsable2`` text and match its rows to jobs.

Expected columns (any order, header line required):
``JobID|JobName|State|ExitCode|Start|End|Elapsed|AllocTRES|NodeList``. Step rows
(``123.batch``, ``123.0``, ``123.extern``) are folded into their job; the job row wins.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from pathlib import Path

from assistant.errors import TriageError

_GPU_TRES = re.compile(r"gres/gpu(?::[\w-]+)?=(\d+)")
_SLURM_ID_IN_NAME = re.compile(r"(?:slurm[-_])?(\d+(?:_\d+)?)(?=\D|$)")
# sacct state -> how the job ended (None: it ended well)
_STATE_REASON = {
    "COMPLETED": None,
    "FAILED": "exit_code",
    "TIMEOUT": "time_limit",
    "OUT_OF_MEMORY": "oom_kill",
    "NODE_FAIL": "node_failure",
    "PREEMPTED": "preempted",
    "CANCELLED": "cancelled",
    "BOOT_FAIL": "node_failure",
    "DEADLINE": "time_limit",
}


@dataclass(frozen=True)
class SacctRow:
    """One job as the scheduler accounted it."""

    job_id: str
    name: str
    state: str
    exit_code: int | None
    start: float | None
    end: float | None
    gpus: int | None

    @property
    def reason(self) -> str | None:
        """How the job ended by the scheduler's account (None when it completed with exit code 0)."""
        base = self.state.split()[0] if self.state else ""
        if base == "COMPLETED" and self.exit_code not in (None, 0):
            return "exit_code"
        return _STATE_REASON.get(base, "exit_code" if base else None)


def parse_sacct(text: str) -> dict[str, SacctRow]:
    """Rows keyed by job id (steps folded into their job). Raises TriageError when there is no header."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines or "|" not in lines[0] or "JobID" not in lines[0]:
        raise TriageError("the --sacct file must be `sacct --parsable2` output with its header line (JobID|JobName|State|...)")
    header = [h.strip() for h in lines[0].split("|")]
    col = {name: i for i, name in enumerate(header)}
    if "JobID" not in col or "State" not in col:
        raise TriageError("the --sacct header needs at least the JobID and State columns")
    rows: dict[str, SacctRow] = {}
    steps: dict[str, list[SacctRow]] = {}
    for raw in lines[1:]:
        cells = raw.split("|")
        if len(cells) < len(header):
            cells += [""] * (len(header) - len(cells))

        def cell(name: str, cells: list[str] = cells) -> str:
            return cells[col[name]].strip() if name in col else ""

        full_id = cell("JobID")
        if not full_id:
            continue
        base, _, step = full_id.partition(".")
        row = SacctRow(
            job_id=base,
            name=cell("JobName"),
            state=cell("State"),
            exit_code=_exit(cell("ExitCode")),
            start=_time(cell("Start")),
            end=_time(cell("End")),
            gpus=_gpus(cell("AllocTRES")),
        )
        if step:
            steps.setdefault(base, []).append(row)
        else:
            rows[base] = row
    for base, step_rows in steps.items():
        if base in rows:
            job = rows[base]
            if job.gpus is None:
                gpus = max((s.gpus for s in step_rows if s.gpus), default=None)
                rows[base] = SacctRow(job.job_id, job.name, job.state, job.exit_code, job.start, job.end, gpus)
        else:
            first = step_rows[0]
            rows[base] = SacctRow(base, first.name, first.state, first.exit_code,
                                  min((s.start for s in step_rows if s.start), default=None),
                                  max((s.end for s in step_rows if s.end), default=None),
                                  max((s.gpus for s in step_rows if s.gpus), default=None))
    return rows


def load_sacct(path: str | Path) -> dict[str, SacctRow]:
    """Parse a sacct file (one-line TriageError when it cannot be read)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise TriageError(f"cannot read --sacct file {path}: {exc.strerror or exc}") from None
    return parse_sacct(text)


def find_row(rows: dict[str, SacctRow], job_id: str, files: tuple[str, ...]) -> SacctRow | None:
    """The row for a job: by its id, by a Slurm id inside its id or file names, or by job name."""
    if job_id in rows:
        return rows[job_id]
    for candidate in [job_id, *(Path(f).name for f in files)]:
        for m in _SLURM_ID_IN_NAME.finditer(candidate):
            if m.group(1) in rows:
                return rows[m.group(1)]
    by_name = [r for r in rows.values() if r.name and r.name == job_id]
    return by_name[0] if len(by_name) == 1 else None


def _exit(text: str) -> int | None:
    code, _, signal = text.partition(":")
    try:
        c = int(code)
        s = int(signal) if signal else 0
    except ValueError:
        return None
    return c if c else (128 + s if s else 0)


def _time(text: str) -> float | None:
    m = re.match(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})", text)
    if not m:
        return None
    return float(calendar.timegm(tuple(int(x) for x in m.groups()) + (0, 0, 0)))


def _gpus(tres: str) -> int | None:
    m = _GPU_TRES.search(tres)
    return int(m.group(1)) if m else None
