"""The per-job pass: read a job's logs once, decide whether it failed, and extract the real failure.

This is a pure function of the files (no shared state), so it runs the same serially, in a
process pool or as a Ray task. Job-level reasoning lives here: which attempt counts, which
tracebacks the run survived, which rank failed first and which ranks only failed because of it,
and what to tell the engine (only the extracted failure, never the whole log).
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from assistant.triage import events as ev_kinds
from assistant.triage.clock import GpuCount, line_time, order_time
from assistant.triage.events import Event, StreamScan, scan
from assistant.triage.model import FAILED, SUCCEEDED, JobReport, JobSpec
from assistant.triage.reading import HEAD_BYTES, TAIL_BYTES, FileText, LogLine, read_file

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
}
_SECONDARY = re.compile(
    r"DistBackendError: .{0,300}?(?:timed out|timeout|aborted|remote process exited|Connection reset|Broken pipe)|NCCL communicator was aborted|Watchdog caught collective|watchdog thread terminated|Connection reset by peer|Broken pipe"
    r"|ProcessGroupNCCL.{0,40}abort|SignalException|KeyboardInterrupt|got signal: \d+|Socket Timeout|recvValue failed|recvVector failed"
    r"|Connection closed by peer|DistNetworkError: .*(?:reset|closed|Broken)|NCCL error.*remote process exited|another rank|peer process",
    re.IGNORECASE,
)
# Errors a rank reports because a peer died: NCCL failures, aborted communicators, closed connections.
_FALLOUT = re.compile(
    r"NCCL error|ncclRemoteError|ncclSystemError|ncclInternalError|unhandled system error|remote process exited|DistBackendError"
    r"|communicator was aborted|Connection reset by peer|Connection closed by peer|Broken pipe|timed out|Timeout",
    re.IGNORECASE,
)
_ATTEMPT = re.compile(r"(?:^|[/_.-])(?:attempt|restart|retry|requeue|try)[_-]?(\d+)(?=$|[/_.-])", re.IGNORECASE)
_ROTATED = re.compile(r"\.(\d{1,3})(?:\.gz)?$")
_MASK = re.compile(r"0x[0-9a-fA-F]+|\d+")


@dataclass(frozen=True)
class ExtractOptions:
    """Knobs of the per-job pass."""

    head_bytes: int = HEAD_BYTES
    tail_bytes: int = TAIL_BYTES
    categorize: bool = False  # run the rules per job (triage runs them once per group instead)


@dataclass
class _Found:
    event: Event
    rank: int | None
    file: int
    stream_lines: list[LogLine]
    time: float | None


def extract_job(spec: JobSpec, options: ExtractOptions | None = None) -> JobReport:
    """Read one job's logs and report its status, first failing rank, GPU time and extracted failure."""
    opts = options or ExtractOptions()
    root = Path(spec.root)
    rel = tuple(_relative(p, root) for p in spec.files)
    files = [read_file(p, i, head_bytes=opts.head_bytes, tail_bytes=opts.tail_bytes) for i, p in enumerate(spec.files)]
    notes = [n for f in files for n in f.notes]
    size = sum(f.size for f in files)
    readable = [f for f in files if f.readable]
    if not readable:
        return JobReport(spec.job_id, rel, FAILED if files else SUCCEEDED, category="unknown" if files else None,
                         title="No log could be read" if files else None, reason="unreadable", size_bytes=size,
                         notes=tuple(notes) or ("no log files",))

    gpus = GpuCount()
    start = end = None
    ranks: set[int] = set()
    for f in readable:
        for ln in f.lines:
            gpus.feed(ln.text)
            if ln.rank is not None:
                ranks.add(ln.rank)
        first, last = _file_span(f)
        if first is not None:
            start = first if start is None else min(start, first)
        if last is not None:
            end = last if end is None else max(end, last)
    # Rank 7 writing means at least 8 processes, even when only it printed.
    gpus.ranks_seen = max(ranks) + 1 if ranks else 0

    deciding = _final_attempt(readable)
    scans: list[tuple[int | None, int, list[LogLine], StreamScan]] = []
    for f in deciding:
        for rank, lines in _streams(f).items():
            scans.append((rank, f.lines[0].file if f.lines else 0, lines, scan([ln for ln in lines])))

    # "[rank1]:" prefixes, a world size or a process count above one: ranks matter for this job.
    multi = gpus.ranks_seen > 1 or (gpus.world or 0) > 1 or (gpus.nproc or 0) > 1
    verdict = _decide(scans, multi=multi, ranks_seen=gpus.ranks_seen)
    count, _ = gpus.best()
    if count is None and start is not None:
        count = 1
        notes.append("no GPU count in the logs; assumed 1 GPU")
    hours = count * (end - start) / 3600.0 if count is not None and start is not None and end is not None and end > start else None

    if verdict is None:
        return JobReport(spec.job_id, rel, SUCCEEDED, ranks_seen=gpus.ranks_seen, gpus=count, start=start, end=end,
                         gpu_hours=hours, size_bytes=size, notes=tuple(notes))
    report = JobReport(
        job_id=spec.job_id,
        files=rel,
        status=FAILED,
        title=_default_title(verdict),
        reason=verdict.reason,
        headline=verdict.headline[:500],
        failure_text=verdict.text,
        location=user_location(verdict.text) if "File " in verdict.text else None,
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


@dataclass
class Verdict:
    """Why a job failed, as the logs tell it."""

    reason: str
    headline: str
    text: str
    first_rank: int | None
    notes: list[str]


def _decide(scans: list[tuple[int | None, int, list[LogLine], StreamScan]], *, multi: bool, ranks_seen: int = 0) -> Verdict | None:
    primaries: list[_Found] = []
    secondaries: list[_Found] = []
    launchers: list[_Found] = []
    schedulers: list[_Found] = []
    exits: list[_Found] = []
    for rank, file_index, lines, result in scans:
        for ev in result.events:
            if ev.ignored or ev.survived:
                continue
            found = _Found(ev, rank, file_index, lines, _event_time(lines, ev))
            if ev.launcher:
                launchers.append(found)
            elif ev.kind == ev_kinds.SCHEDULER:
                schedulers.append(found)
            elif ev.kind == ev_kinds.EXIT_CODE:
                exits.append(found)
            elif ev.kind in (ev_kinds.WATCHDOG, ev_kinds.SIGTERM) or (ev.kind == ev_kinds.TRACEBACK and _SECONDARY.search(ev.headline or "")):
                secondaries.append(found)
            elif ev.kind == ev_kinds.SIGNAL and ev.reason == "sigterm":
                secondaries.append(found)
            elif ev.kind == ev_kinds.TRACEBACK and not ev.headline:
                primaries.append(found)  # cut before its last line: still the failure
            else:
                primaries.append(found)
        if result.success and not any(not e.ignored and not e.survived for e in result.events):
            continue
    root_rank = next((f.event.named_rank for f in launchers if f.event.named_rank is not None), None)
    # A launcher naming rank 3 proves several ranks; one naming rank 0 ("srun: task 0") does not.
    multi = multi or any(f.event.multi_hint for f in launchers) or len({f.rank for f in primaries + secondaries if f.rank is not None}) > 1
    notes: list[str] = []

    strong = [f for f in primaries if f.event.kind in (ev_kinds.TRACEBACK, ev_kinds.CPP_ABORT)]
    weak = [f for f in primaries if f.event.kind not in (ev_kinds.TRACEBACK, ev_kinds.CPP_ABORT)]
    # A launcher that carries the child's traceback (torchrun with @record) counts as that rank's own error.
    for f in launchers:
        if f.event.lines and f.event.kind == ev_kinds.LAUNCHER and any("Traceback" in ln for ln in f.event.lines):
            strong.append(_Found(Event(ev_kinds.TRACEBACK, f.event.start, f.event.end, f.event.headline, f.event.lines), f.event.named_rank, f.file, f.stream_lines, f.time))
    candidates = strong or weak
    if candidates:
        chosen, first_rank = _first_failure(candidates, multi=multi, root_rank=root_rank, launchers=launchers)
        if first_rank is None and multi and chosen.rank is None and root_rank is not None and not _identical(candidates):
            first_rank = root_rank
        reason = "exception" if chosen.event.kind in (ev_kinds.TRACEBACK, ev_kinds.CPP_ABORT, ev_kinds.ERROR_LINE) else chosen.event.reason
        text = _failure_text(chosen)
        if secondaries and first_rank is not None:
            others = sorted({f.rank for f in secondaries if f.rank is not None and f.rank != first_rank})
            if others:
                notes.append(f"rank(s) {', '.join(map(str, others))} failed only as a consequence of rank {first_rank}")
        return Verdict(reason, chosen.event.headline or _first_nonblank(chosen.event.lines), text, first_rank, notes)
    watchdogs = [f for f in secondaries if f.event.kind == ev_kinds.WATCHDOG or "Watchdog" in f.event.headline or "timed out" in f.event.headline.lower()]
    if watchdogs:
        first = min(watchdogs, key=_order_key)
        root = next((f for f in launchers if f.event.named_rank is not None), None)
        if root is not None and root.event.exit_code is not None and root.event.exit_code > 0 and root.event.named_rank not in {w.rank for w in watchdogs}:
            # The launcher saw a rank exit with an error of its own (not killed by the watchdog), whose
            # output is not in these logs: the others' timeouts are its fallout, not a hang.
            notes.append(f"rank {root.event.named_rank} exited with code {root.event.exit_code} first; its own output is not in these logs")
            return Verdict("collective_timeout", first.event.headline, _failure_text(first), root.event.named_rank, notes)
        timed_out = {w.rank for w in watchdogs if w.rank is not None}
        if len(timed_out) == 1 and ranks_seen > 1:
            # One rank of several waited in a collective the others never joined (they finished or
            # went elsewhere): that rank is where the job failed.
            rank = next(iter(timed_out))
            notes.append(f"only rank {rank} timed out in a collective; the other ranks did not join it")
            return Verdict("collective_timeout", first.event.headline, _failure_text(first), rank, notes)
        notes.append("every failing rank reports a collective timeout and none failed on its own: a hang")
        return Verdict("collective_timeout", first.event.headline, _failure_text(first), None, notes)
    if schedulers:
        chosen = max(schedulers, key=lambda f: _SCHEDULER_WEIGHT.get(f.event.reason, 0))
        return Verdict(chosen.event.reason, chosen.event.headline, _failure_text(chosen), None, notes)
    named = [f for f in launchers if f.event.named_rank is not None]
    if named:
        # The launcher saw which child died first and how (a signal, an exit code): nothing better was printed.
        first = min(named, key=_order_key)
        text = _failure_text(first)
        if first.event.reason in _SIGNAL_DEATHS and first.event.kind == ev_kinds.LAUNCHER:
            # A child killed by a signal: the signal is the story, not the launcher's report around it.
            text = next((ln.strip() for ln in first.event.lines if "SIG" in ln or "signal" in ln.lower()), first.event.headline)
        return Verdict(first.event.reason or "exit_code", first.event.headline, text, first.event.named_rank if multi else None, notes)
    if secondaries:
        first = min(secondaries, key=_order_key)
        return Verdict(first.event.reason or "exception", first.event.headline, _failure_text(first), first.rank if multi else None, notes)
    if launchers:
        first = min(launchers, key=_order_key)
        return Verdict(first.event.reason or "exit_code", first.event.headline, _failure_text(first), None, notes)
    if exits:
        last = max(exits, key=_order_key)
        return Verdict("exit_code", last.event.headline, _failure_text(last), None, notes)
    return None


_SIGNAL_DEATHS = {"segfault", "killed", "bus_error", "abort", "illegal_instruction", "fpe"}
_SCHEDULER_WEIGHT = {"oom_kill": 5, "node_failure": 4, "time_limit": 3, "preempted": 2, "cancelled": 1}


def _first_failure(candidates: list[_Found], *, multi: bool, root_rank: int | None, launchers: list[_Found]) -> tuple[_Found, int | None]:
    """The failure that came first, and its rank (None when single-process or when every rank failed alike)."""
    if not multi:
        # One process: the run ended with its last uncaught error.
        return max(candidates, key=_order_key), None
    ranked = [f for f in candidates if f.rank is not None]
    if not ranked:
        return min(candidates, key=_order_key), root_rank
    if _identical(ranked) and len({f.rank for f in ranked}) > 1:
        return min(ranked, key=_order_key), None
    own = [f for f in ranked if not _FALLOUT.search(f.event.headline + "\n" + "\n".join(f.event.lines[-6:]))]
    if own and len(own) < len(ranked):
        # NCCL errors and aborted communicators on the other ranks are consequences of a rank's own error.
        ranked = own
    by_rank = {r: [f for f in ranked if f.rank == r] for r in {f.rank for f in ranked}}
    if root_rank is not None and root_rank in by_rank:
        return min(by_rank[root_rank], key=_order_key), root_rank
    timed = [f for f in ranked if f.time is not None]
    same_file = len({f.file for f in ranked}) == 1
    if same_file:
        first = min(ranked, key=lambda f: f.event.start)
    elif len(timed) == len(ranked):
        first = min(ranked, key=lambda f: (f.time, f.rank))
    else:
        srun_first = next((f.event.named_rank for f in sorted(launchers, key=_order_key) if f.event.named_rank in by_rank), None)
        if srun_first is not None:
            first = min(by_rank[srun_first], key=_order_key)
        else:
            # No clock and no launcher verdict: the odd one out (one rank's error unlike the others') came first.
            by_message: dict[str, list[_Found]] = defaultdict(list)
            for f in ranked:
                by_message[_MASK.sub("#", f.event.headline)].append(f)
            rarest = min(by_message.values(), key=lambda fs: (len({f.rank for f in fs}), min(f.rank or 0 for f in fs)))
            first = min(rarest, key=lambda f: (f.rank, f.event.start))
    return first, first.rank


def _identical(found: list[_Found]) -> bool:
    heads = {_MASK.sub("#", f.event.headline) for f in found}
    return len(heads) == 1 and len(found) > 1


def _order_key(f: _Found) -> tuple[float, int, int]:
    return (f.time if f.time is not None else float("inf"), f.file, f.event.start)


def _event_time(lines: list[LogLine], ev: Event) -> float | None:
    for j in range(ev.start, max(ev.start - 40, -1), -1):
        t = order_time(lines[j].text)
        if t is not None:
            return t
    for j in range(ev.start + 1, min(ev.end + 1, len(lines))):
        t = order_time(lines[j].text)
        if t is not None:
            return t
    return None


def _failure_text(found: _Found) -> str:
    ev = found.event
    body = list(ev.lines)
    if ev.kind in (ev_kinds.SIGNAL, ev_kinds.SCHEDULER, ev_kinds.EXIT_CODE, ev_kinds.LAUNCHER, ev_kinds.ERROR_LINE) and not any("Traceback" in b for b in body):
        # A bare verdict: give the engine the lines just before it too (what the program was doing).
        before = [ln.text for ln in found.stream_lines[max(0, ev.start - 12):ev.start] if ln.text.strip()]
        body = before + body
    text = "\n".join(body).strip("\n")
    return text[:20000]


def _first_nonblank(lines: list[str]) -> str:
    return next((ln.strip() for ln in lines if ln.strip()), "")


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
        "exit_code": "Process exited with an error code",
    }
    return titles.get(v.reason) or (v.headline[:120] if v.headline else "Job failed")


def user_location(text: str) -> str | None:
    """The deepest frame in the user's own code: "file.py:function: source line" (None without one)."""
    from assistant.engine import default_engine

    user = default_engine().parse(text).user_frames
    if not user:
        return None
    f = user[-1]
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


def _streams(f: FileText) -> dict[int | None, list[LogLine]]:
    """Lines of one file split by rank, in order; a blank line marks the unread middle."""
    streams: dict[int | None, list[LogLine]] = defaultdict(list)
    for k, ln in enumerate(f.lines):
        streams[ln.rank].append(ln)
        if f.gap_after is not None and k == f.gap_after:
            for lines in streams.values():
                lines.append(LogLine(ln.rank, "", ln.file, -1))
    return dict(streams)


_SPAN_LINES = 2000  # a job's first and last timestamps sit near its log's ends


def _file_span(f: FileText) -> tuple[float | None, float | None]:
    first = next((t for ln in f.lines[:_SPAN_LINES] if (t := line_time(ln.text)) is not None), None)
    last = next((t for ln in reversed(f.lines[-_SPAN_LINES:]) if (t := line_time(ln.text)) is not None), None)
    return first, last


def _relative(path: str, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return Path(path).name
