"""The per-job pass: read a job's logs once, decide whether it failed, and extract the real failure.

This is a pure function of the files (no shared state), so it runs the same serially, in a
process pool or as a Ray task. Here: which files count (the latest attempt), the job's span and GPU
hours, and what to tell the engine (only the extracted failure, never the whole log). Which error
ended the job and which rank failed first is :mod:`assistant.triage.verdict`, shared with ``ask``.
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from assistant.triage.clock import GpuCount, glog_time, has_glog_stamp, line_time
from assistant.types import Frame
from assistant.triage.model import FAILED, SUCCEEDED, JobReport, JobSpec
from assistant.triage.reading import HEAD_BYTES, MAX_INFLATE, TAIL_BYTES, FileText, LogLine, ReadCancelled, read_file
from assistant.triage.verdict import Verdict, decide, feed_shape, scans_of, shape_of, world_size

# What the run's ending means when no rule of the engine recognises the extracted text.
FALLBACK_CATEGORY = {
    "time_limit": "environment_error",
    "preempted": "environment_error",
    "cancelled": "environment_error",
    "sigterm": "environment_error",
    "node_failure": "hardware_error",
    "oom_kill": "cpu_oom",
    "killed": "cpu_oom",
    "bus_error": "dataloader_error",
    "collective_timeout": "nccl_error",
    "collective_desync": "nccl_error",
}
_ATTEMPT = re.compile(r"(?:^|[/_.-])(?:attempt|restart|retry|requeue|try)[_-]?(\d+)(?=$|[/_.-])", re.IGNORECASE)
_ROTATED = re.compile(r"\.(\d{1,3})(?:\.gz)?$")


JOB_BUDGET = 24 << 20  # head + tail bytes kept over all of one job's files: memory is flat in files per job
MIN_FILE_BYTES = 8 << 10  # ... but never fewer than this per file (a traceback sits in a file's last lines)


class Cancelled(Exception):
    """The per-job pass stopped because its caller asked (an abandoned request)."""


@dataclass(frozen=True)
class ExtractOptions:
    """Knobs of the per-job pass."""

    head_bytes: int = HEAD_BYTES
    tail_bytes: int = TAIL_BYTES
    categorize: bool = False  # run the rules per job (triage runs them once per group instead)
    job_budget: int = JOB_BUDGET  # head + tail bytes over all of a job's files (split among them when many)
    max_inflate: int = MAX_INFLATE  # decompressed bytes read of one .gz log
    stop: Callable[[], bool] | None = field(default=None, compare=False)  # asked before each file: True cancels


def file_window(n_files: int, opts: ExtractOptions) -> tuple[int, int]:
    """Head and tail bytes kept per file for a job of ``n_files`` files: the defaults, or the job's budget split among them."""
    per_file = opts.head_bytes + opts.tail_bytes
    if n_files * per_file <= opts.job_budget:
        return opts.head_bytes, opts.tail_bytes
    share = max(MIN_FILE_BYTES, opts.job_budget // n_files)
    head = max(1024, share * opts.head_bytes // per_file)
    return head, max(1024, share - head)


def extract_job(spec: JobSpec, options: ExtractOptions | None = None) -> JobReport:
    """Read one job's logs and report its status, first failing rank, GPU time and extracted failure.

    Files are read one at a time: every file feeds the job's GPU count and span as it is read, and
    only the files that decide how the job ended (its latest attempt) keep their lines."""
    opts = options or ExtractOptions()
    root = Path(spec.root)
    rel = tuple(_relative(p, root) for p in spec.files)
    head_bytes, tail_bytes = file_window(len(spec.files), opts)
    deciding_paths = set(_final_attempt_paths(list(spec.files)))
    notes: list[str] = []
    if (head_bytes, tail_bytes) != (opts.head_bytes, opts.tail_bytes):
        notes.append(f"{len(spec.files)} files in this job: kept the first {head_bytes // 1024} KiB and last "
                     f"{tail_bytes // 1024} KiB of each (a {opts.job_budget >> 20} MiB budget per job)")
    gpus, ranks = GpuCount(), set[int]()
    start: float | None = None
    end: float | None = None
    size = 0
    kept: list[FileText] = []
    others: list[tuple[int, str]] = []  # readable files whose lines were let go (not of the deciding attempt)
    for i, p in enumerate(spec.files):
        if opts.stop is not None and opts.stop():
            raise Cancelled(spec.job_id)
        try:
            f = read_file(p, i, head_bytes=head_bytes, tail_bytes=tail_bytes, max_inflate=opts.max_inflate, stop=opts.stop)
        except ReadCancelled:
            raise Cancelled(spec.job_id) from None
        notes.extend(f.notes)
        size += f.size
        if not f.readable:
            continue
        feed_shape(f, gpus, ranks)
        first, last = _file_span(f)
        if first is not None:
            start = first if start is None else min(start, first)
        if last is not None:
            end = last if end is None else max(end, last)
        if p in deciding_paths:
            kept.append(f)
        else:
            others.append((i, p))
    if not kept and not others:
        return JobReport(spec.job_id, rel, FAILED if spec.files else SUCCEEDED, category="unknown" if spec.files else None,
                         title="No log could be read" if spec.files else None, reason="unreadable", size_bytes=size,
                         notes=tuple(notes) or ("no log files",))
    if not kept:  # the latest attempt's files could not be read: the readable ones decide, read again
        kept = [read_file(p, i, head_bytes=head_bytes, tail_bytes=tail_bytes, max_inflate=opts.max_inflate) for i, p in others]
        kept = _final_attempt(kept)
    gpus, multi = shape_of([], gpus, ranks)
    verdict = decide(scans_of(kept), multi=multi, ranks_seen=gpus.ranks_seen, world=world_size(gpus))
    count, _ = gpus.best()
    if count is None and start is not None:
        count = 1
        notes.append("no GPU count in the logs; assumed 1 GPU")
    hours = count * (end - start) / 3600.0 if count is not None and start is not None and end is not None and end > start else None

    if verdict is None:
        return JobReport(spec.job_id, rel, SUCCEEDED, ranks_seen=gpus.ranks_seen, gpus=count, start=start, end=end,
                         gpu_hours=hours, size_bytes=size, notes=tuple(notes))
    frame = user_frame(verdict.text) if "File " in verdict.text else None
    report = JobReport(
        job_id=spec.job_id,
        files=rel,
        status=FAILED,
        title=_default_title(verdict),
        reason=verdict.reason,
        headline=verdict.headline[:500],
        failure_text=verdict.text,
        location=_where(frame),
        location_line=frame.line if frame is not None else None,
        first_failing_rank=verdict.first_rank,
        ranks_seen=gpus.ranks_seen,
        gpus=count,
        start=start,
        end=end,
        gpu_hours=hours,
        size_bytes=size,
        notes=tuple(notes + verdict.notes),
    )
    return categorize(report) if opts.categorize else report


def _default_title(v: Verdict) -> str:
    titles = {
        "time_limit": "Job stopped at its time limit",
        "preempted": "Job preempted by the scheduler",
        "cancelled": "Job cancelled",
        "node_failure": "Node failure",
        "oom_kill": "Killed by the host's out-of-memory killer",
        "killed": "Process killed (SIGKILL)",
        "segfault": "Segmentation fault",
        "bus_error": "Bus error",
        "collective_timeout": "Collective operation timed out (hang)",
        "collective_desync": "Collective desync: one rank never reached the collective the others wait in",
        "exit_code": "Process exited with an error code",
    }
    from assistant.render.outgoing import shown_text

    # Masked before the cut: a token cut in half would no longer look like one.
    return titles.get(v.reason) or (shown_text(v.headline)[:120] if v.headline else "Job failed")


def user_location(text: str) -> str | None:
    """The deepest frame in the user's own code: "file.py:function: source line" (None without one)."""
    return _where(user_frame(text))


def user_frame(text: str) -> Frame | None:
    """The deepest frame in the user's own code, as parsed (None without one)."""
    from assistant.engine import default_engine

    user = default_engine().parse(text).user_frames
    return user[-1] if user else None


def _where(f: Frame | None) -> str | None:
    """A frame as a group location: "file.py:function: source line" (the source empty when the log shows none)."""
    if f is None:
        return None
    return f"{Path(f.file.replace(chr(92), '/')).name}:{f.function or '?'}: {(f.source or '').strip()[:160]}"


def categorize(report: JobReport, category: str | None = None, title: str | None = None, rule: str | None = None) -> JobReport:
    """A failed report with its category, title and rule: those given, or the engine's rules on its failure.

    When no rule names a family, how the run ended does (a time limit, the OOM killer, a hang).
    """
    if report.status != FAILED:
        return report
    if category is None:
        from assistant.engine import default_engine

        engine = default_engine()
        try:
            hit = engine.match(engine.parse(report.failure_text or report.headline)).hit
        except Exception:  # noqa: BLE001 - a rule bug must not stop triage; the category falls back
            hit = None
        if hit is not None:
            category, title, rule = hit.category, hit.title, hit.rule
    if category in (None, "unknown"):
        category = FALLBACK_CATEGORY.get(report.reason, "unknown")
    return dataclasses.replace(report, category=category, title=title or report.title, rule=rule)


def _final_attempt_paths(paths: list[str]) -> list[str]:
    """The paths of the files that decide the job's status (see :func:`_final_attempt`), from names alone."""
    attempts: dict[int | None, list[str]] = defaultdict(list)
    for p in paths:
        attempts[_attempt_of(p)].append(p)
    numbered = [a for a in attempts if a is not None and a >= 0]
    if numbered:
        return attempts.get(None, []) + attempts[max(numbered)]
    if attempts.get(None):
        return attempts[None]
    return attempts[max(a for a in attempts if a is not None)] if attempts else []


def _final_attempt(files: list[FileText]) -> list[FileText]:
    """Files that decide the job's status: job-wide files plus those of the latest attempt.

    ``attempt_<K>/`` (or restart/retry/requeue) folders and names number attempts; rotated logs
    (``stdout.log.1``) are older than the unnumbered file beside them.
    """
    attempts: dict[int | None, list[FileText]] = defaultdict(list)
    for f in files:
        attempts[_attempt_of(f.path)].append(f)
    numbered = [a for a in attempts if a is not None and a >= 0]
    if numbered:
        return attempts.get(None, []) + attempts[max(numbered)]
    if attempts.get(None):
        return attempts[None]
    return attempts[max(a for a in attempts if a is not None)]


def _attempt_of(path: str) -> int | None:
    p = path.replace("\\", "/")
    found = _ATTEMPT.findall(p)
    if found:
        return int(found[-1])
    name = Path(p).name
    rotated = _ROTATED.search(name)
    if rotated and name.count(".") >= 2:
        return -int(rotated.group(1))
    return None


_SPAN_LINES = 2000  # a job's first and last timestamps sit near its log's ends
_YEARLESS_START = ("I", "W", "E", "F", "[")  # how a glog / c10 line opens


def _file_span(f: FileText) -> tuple[float | None, float | None]:
    """The earliest timestamp near the file's start and the latest near its end (None where the file shows none).

    The earliest and latest, not the first and last line's: a file is not always in time order (pdsh prints each
    host's output as one block, ranks' output may come rank by rank, skewed clocks interleave), and its last line can
    be hours older than a line above it, which would shrink the job's GPU hours to a fraction."""
    lines = f.lines
    small = len(lines) <= 2 * _SPAN_LINES  # head and tail windows are then the whole file: read it once
    first = _times(lines if small else lines[:_SPAN_LINES], min)
    last = first if small else _times(lines[-_SPAN_LINES:], max)
    return (min(first) if first else None), (max(last) if last else None)


# A time of day: every timestamp line_time reads holds one. One cheap search keeps its three patterns off most lines.
_TIME_OF_DAY = re.compile(r"\d:\d\d:\d\d")


def _times(lines: list[LogLine], pick: Callable[[list[float]], float]) -> list[float]:
    """The times on ``lines``: the logger stamp the reader took off a line, else one in its text.

    PyTorch's own C++ log lines (glog / c10: "W1014 12:03:13.734285 ...") carry no year: they count with the year of
    the ``pick`` (earliest or latest) of the full timestamps (mp.spawn's last words, the NCCL watchdog's, are such)."""
    out: list[float] = []
    yearless: list[str] = []
    iso: list[str] = []  # plain UTC ISO stamps, compared as text: only the earliest and latest are parsed
    for ln in lines:
        if ln.stamp:
            key = _iso_key(ln.stamp)
            if key is not None:
                iso.append(key)
                continue
            t = line_time(ln.stamp)
        elif ":" in (text := ln.text) and _TIME_OF_DAY.search(text):
            if text[:1] in _YEARLESS_START and has_glog_stamp(text):
                yearless.append(text)  # read once the year is known (below); line_time would find no full stamp
                continue
            t = line_time(text)
        else:
            continue
        if t is not None:
            out.append(t)
    if iso:
        out += [t for key in (min(iso), max(iso)) if (t := line_time(key)) is not None]
    if out and yearless:
        near = pick(out)
        out += [t for text in yearless if (t := glog_time(text, near)) is not None]
    return out


_ISO_STAMP = re.compile(r"\[?(20\d\d-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:[.,]\d+)?Z?\]?\s*(?:-\s*)?$|\[?(20\d\d-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:[.,]\d+)?Z?\]?\s")


def _iso_key(stamp: str) -> str | None:
    """"YYYY-MM-DD HH:MM:SS" of a stamp that is a plain ISO time, naive or UTC (such keys sort as their times do, so a
    file's thousands of stamps are compared as text and only two are parsed); None for any other stamp."""
    m = _ISO_STAMP.match(stamp)
    if m is None:
        return None
    day, clock = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    return f"{day} {clock}"


def _relative(path: str, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return Path(path).name
