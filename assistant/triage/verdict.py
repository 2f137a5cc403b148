"""One failure per job, one rank logic: which error ended a run and which rank failed first.

Used by ``triage`` (per job, over its files), and by ``ask`` and ``run`` (over one pasted or captured log:
:func:`verdict_of_text`), so the three doors name the same error and the same rank for the same log. The
reasoning: tracebacks the run survived are ignored; a rank's own error beats the NCCL errors, aborted
communicators and timeouts its peers report because it died; a launcher's summary (torchrun's root cause,
``srun: task N``) or the clock orders ranks; the scheduler's verdict or a signal ends a job that printed no
error of its own; a hang is a hang when every rank only timed out.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from assistant.triage import events as ev_kinds
from assistant.triage.clock import GpuCount, order_time
from assistant.triage.events import Event, StreamScan, scan
from assistant.triage.markers import may_show_several_processes
from assistant.triage.reading import FileText, LogLine, text_file

_SECONDARY = re.compile(
    r"DistBackendError: .{0,300}?(?:timed out|timeout|aborted|remote process exited|Connection reset|Broken pipe)|NCCL communicator was aborted|Watchdog caught collective|watchdog thread terminated|Connection reset by peer|Broken pipe"
    r"|ProcessGroupNCCL.{0,40}abort|Fatal Python error: Aborted|SignalException|KeyboardInterrupt|got signal: \d+|Socket Timeout|recvValue failed|recvVector failed"
    r"|Connection closed by peer|DistNetworkError: .*(?:reset|closed|Broken)|NCCL error.*remote process exited|another rank|peer process",
    re.IGNORECASE,
)
# Errors a rank reports because a peer died: NCCL failures, aborted communicators, closed connections.
_FALLOUT = re.compile(
    r"NCCL error|ncclRemoteError|ncclSystemError|ncclInternalError|unhandled system error|remote process exited|DistBackendError"
    r"|communicator was aborted|Connection reset by peer|Connection closed by peer|Broken pipe|timed out|Timeout",
    re.IGNORECASE,
)


@dataclass
class _Found:
    event: Event
    rank: int | None
    file: int
    stream_lines: list[LogLine]
    time: float | None


@dataclass
class Verdict:
    """Why a job failed, as the logs tell it."""

    reason: str
    headline: str
    text: str
    first_rank: int | None
    notes: list[str]


def decide(scans: Sequence[Scan], *, multi: bool, ranks_seen: int = 0, world: int = 0) -> Verdict | None:
    """The failure that ended the job and the rank that failed first, from every stream's events (None: nothing failed).

    ``multi`` says the job ran several processes (rank prefixes, a world size); ``ranks_seen`` how many ranks wrote;
    ``world`` how many processes the job ran, when the log says (0: unknown).
    """
    primaries: list[_Found] = []
    secondaries: list[_Found] = []
    launchers: list[_Found] = []
    schedulers: list[_Found] = []
    exits: list[_Found] = []
    for rank, file_index, lines, result in scans:
        if result.success:
            continue  # the stream ends with its own success marker after every failure it shows: it survived them
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
            elif ev.kind in (ev_kinds.WATCHDOG, ev_kinds.SIGTERM) or (
                    ev.kind in (ev_kinds.TRACEBACK, ev_kinds.CPP_ABORT, ev_kinds.ERROR_LINE, ev_kinds.SIGNAL) and _SECONDARY.search(ev.headline or "")):
                # A watchdog's own abort ("terminate called ... what(): ... Watchdog caught collective operation timeout",
                # then "Fatal Python error: Aborted") is the timeout again, not a failure of that rank's own.
                secondaries.append(found)
            elif ev.kind == ev_kinds.SIGNAL and ev.reason == "sigterm":
                secondaries.append(found)
            elif ev.kind == ev_kinds.TRACEBACK and not ev.headline:
                primaries.append(found)  # cut before its last line: still the failure
            else:
                primaries.append(found)
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
        if chosen.rank is None and first_rank is not None:
            first_rank = _not_a_timed_out_rank(first_rank, secondaries, world)
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
        behind = _desynchronised(scans)
        if behind is not None:
            rank, last, ahead = behind
            notes.append(f"rank {rank} is behind: its last enqueued collective is #{last}, the other ranks' #{ahead}; they waited for it"
                         " in a collective it never reached (a desync: it took another code path, or was slow or stuck before it)")
            return Verdict("collective_desync", first.event.headline, _failure_text(first), rank, notes)
        timed_out = {_watchdog_rank(w) for w in watchdogs} - {None}
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
        # The scheduler says how the job ended; the launcher, when it saw one, which rank went first (the one the
        # OOM killer picked, say).
        return Verdict(chosen.event.reason, chosen.event.headline, _failure_text(chosen), root_rank if multi else None, notes)
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
        final = max(exits, key=_order_key)
        return Verdict("exit_code", final.event.headline, _failure_text(final), None, notes)
    return None


_WATCHDOG_RANK = re.compile(r"\[(?:PG [^\]]*?)?Rank (\d+)\]")
_ENQUEUED = re.compile(r"Rank (\d+)\]\s+failure detected by watchdog.*?last enqueued work: (\d+)")


def _not_a_timed_out_rank(rank: int, secondaries: list[_Found], world: int) -> int | None:
    """The rank of an error printed without a rank prefix, when the launcher named ``rank``.

    torchrun's root cause is the first process that exited; when that rank's own lines show it only timed out in a
    collective, it waited for the failing rank rather than failed. Then the failing rank is the one rank of the world
    that did not time out, when exactly one is left; else it is not known."""
    timed_out = {r for f in secondaries if f.event.kind == ev_kinds.WATCHDOG or "Watchdog" in f.event.headline
                 if (r := _watchdog_rank(f)) is not None}
    if rank not in timed_out:
        return rank
    left = set(range(world)) - timed_out if world > 1 else set()
    return next(iter(left)) if len(left) == 1 else None


def _watchdog_rank(f: _Found) -> int | None:
    """The rank a watchdog line belongs to: its stream's, else the one the line names ("[Rank 4] Watchdog caught ...")."""
    if f.rank is not None:
        return f.rank
    m = _WATCHDOG_RANK.search(f.event.headline)
    return int(m.group(1)) if m else None


def _desynchronised(scans: Sequence[Scan]) -> tuple[int, int, int] | None:
    """(rank, its last enqueued collective, the others') when one rank is behind the rest.

    ProcessGroupNCCL's watchdog prints each rank's last enqueued work: ranks that enqueued a collective wait in it for a
    rank that never enqueued it. That rank (the lowest, when a few are behind together) is where the job went wrong."""
    last: dict[int, int] = {}
    for _, _, lines, _ in scans:
        for ln in lines:
            if "last enqueued work" in ln.text and (m := _ENQUEUED.search(ln.text)):
                last[int(m.group(1))] = int(m.group(2))
    if len(last) < 2 or len(set(last.values())) < 2:
        return None
    low, high = min(last.values()), max(last.values())
    behind = sorted(r for r, e in last.items() if e == low)
    if len(behind) * 2 > len(last):
        return None  # most are behind: the few ahead are not a laggard's peers, nothing to name
    return behind[0], low, high


_SIGNAL_DEATHS = {"segfault", "killed", "bus_error", "abort", "illegal_instruction", "fpe"}
_SCHEDULER_WEIGHT = {"oom_kill": 5, "node_failure": 4, "time_limit": 3, "preempted": 2, "cancelled": 1}


def _first_failure(candidates: list[_Found], *, multi: bool, root_rank: int | None, launchers: list[_Found]) -> tuple[_Found, int | None]:
    """The failure that came first, and its rank (None when single-process or when every rank failed alike)."""
    if not multi:
        # One process: the run ended with its last uncaught error.
        return max(candidates, key=_order_key), None
    ranked = [f for f in candidates if f.rank is not None]
    if not ranked:
        # Unprefixed output: when every process printed the same failure, none failed first (whichever the launcher
        # happened to see exit first).
        return min(candidates, key=_order_key), None if _identical(candidates) else root_rank
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
                by_message[failure_stem(f.event.headline)].append(f)
            rarest = min(by_message.values(), key=lambda fs: (len({f.rank for f in fs}), min(f.rank or 0 for f in fs)))
            first = min(rarest, key=lambda f: (f.rank, f.event.start))
    return first, first.rank


_TYPE_PREFIX = re.compile(r"^\s*(?:[\w.]+\.)?([A-Z]\w*):\s*")
_QUOTED = re.compile(r"'[^'\n]{0,200}'|\"[^\"\n]{0,200}\"|`[^`\n]{0,200}`")
_WORD = re.compile(r"[A-Za-z_]{2,}")
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.@~+-]+){2,}[\\/]?|\b[\w.-]+\.(?:so|py|pt|pth|bin|json|yaml|ckpt)\b")
STEM_WORDS = 6


def _is_name(word: str) -> bool:
    """A class or module name rather than a word: capitals after its first letter (CamelCase, ALLCAPS)."""
    return any(c.isupper() for c in word[1:])


def failure_stem(headline: str) -> str:
    """What a failure says, without what varies between runs and versions of it: the first words of its message
    (numbers, quoted names, paths, sizes and the exception's class dropped); the class alone when the message is only
    a value (``KeyError: 'label'``). Two ranks, or two jobs, with the same stem failed the same way."""
    head = headline.strip()
    m = _TYPE_PREFIX.match(head)
    message = head[m.end():] if m else head
    # Names of the user's classes and modules (LlamaForCausalLM, GPT, ResNet) vary between jobs of one root cause; the
    # words around them say what failed.
    words = [w for w in _WORD.findall(_PATH.sub(" ", _QUOTED.sub(" ", message))) if not _is_name(w)][:STEM_WORDS]
    return " ".join(words).lower() if words else (m.group(1) if m else head[:80])


def _identical(found: list[_Found]) -> bool:
    stems = {failure_stem(f.event.headline) for f in found}
    return len(stems) == 1 and len(found) > 1


def _order_key(f: _Found) -> tuple[float, int, int]:
    return (f.time if f.time is not None else float("inf"), f.file, f.event.start)


def _event_time(lines: list[LogLine], ev: Event) -> float | None:
    for j in range(ev.start, max(ev.start - 40, -1), -1):
        t = order_time(lines[j].timed)
        if t is not None:
            return t
    for j in range(ev.start + 1, min(ev.end + 1, len(lines))):
        t = order_time(lines[j].timed)
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


_EXCEPTION_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure|Warning)\b:?")


def _first_nonblank(lines: list[str]) -> str:
    """A headline for an event whose own was not read: its last exception line, else its first line that says something.

    Never the traceback header or a frame: those name no failure, and a group titled by one gathers unrelated jobs."""
    said = [ln.strip() for ln in lines if ln.strip()]
    exception = next((ln for ln in reversed(said) if _EXCEPTION_LINE.match(ln)), None)
    if exception:
        return exception
    return next((ln for ln in said if not ln.startswith(("Traceback (most recent call last)", "File \"", "^"))), said[0] if said else "")


def _streams(f: FileText) -> dict[int | None, list[LogLine]]:
    """Lines of one file split by rank, in order; a blank line marks the unread middle."""
    streams: dict[int | None, list[LogLine]] = defaultdict(list)
    for k, ln in enumerate(f.lines):
        streams[ln.rank].append(ln)
        if f.gap_after is not None and k == f.gap_after:
            for lines in streams.values():
                lines.append(LogLine(ln.rank, "", ln.file, -1))
    return dict(streams)


Scan = tuple[int | None, int, list[LogLine], StreamScan]  # (rank, file index, the stream's lines, its events)


# A file that holds several runs of one job (a requeued Slurm job appending to its output, torchelastic restarting its
# workers): only the run after the last of these lines decides how the job ended.
_RESTARTED = re.compile(
    r"\bjob \d+ requeued\b|\bRequeu(?:e|ing) job\b|SLURM_RESTART_COUNT=[1-9]|attempts left; will restart worker group"
    r"|Restarting worker group|restart_count=[1-9]",
    re.IGNORECASE,
)


def last_run(f: FileText) -> FileText:
    """The part of a file written by the job's last run (the whole file when it shows one run)."""
    cut = next((k for k in range(len(f.lines) - 1, -1, -1)
                if ("estart" in f.lines[k].text or "equeu" in f.lines[k].text or "ESTART" in f.lines[k].text) and _RESTARTED.search(f.lines[k].text)), None)
    if cut is None:
        return f
    kept = FileText(path=f.path, size=f.size, lines=f.lines[cut + 1:], bytes_read=f.bytes_read, notes=list(f.notes), readable=f.readable)
    kept.gap_after = f.gap_after - cut - 1 if f.gap_after is not None and f.gap_after > cut else None
    return kept


def scans_of(files: Sequence[FileText]) -> list[Scan]:
    """Every file's lines (of its last run) split by rank, each stream scanned for events."""
    out: list[Scan] = []
    for f in map(last_run, files):
        for rank, lines in _streams(f).items():
            out.append((rank, f.lines[0].file if f.lines else 0, lines, scan(list(lines))))
    return out


def feed_shape(f: FileText, gpus: GpuCount, ranks: set[int]) -> None:
    """Read one file's lines into the job's GPU count evidence and the ranks seen (see :func:`shape_of`)."""
    for ln in f.lines:
        gpus.feed(ln.text)
        if ln.rank is not None:
            ranks.add(ln.rank)


def shape_of(files: Sequence[FileText], gpus: GpuCount | None = None, ranks: set[int] | None = None) -> tuple[GpuCount, bool]:
    """The job's GPU count evidence (ranks seen, world size, process count) and whether it ran several processes.

    ``gpus`` and ``ranks`` carry what :func:`feed_shape` already read of files no longer kept."""
    gpus = gpus if gpus is not None else GpuCount()
    ranks = ranks if ranks is not None else set()
    for f in files:
        feed_shape(f, gpus, ranks)
    # Rank 7 writing means at least 8 processes, even when only it printed.
    gpus.ranks_seen = max(ranks) + 1 if ranks else 0
    # "[rank1]:" prefixes, a world size or a process count above one: ranks matter for this job.
    multi = gpus.ranks_seen > 1 or (gpus.world or 0) > 1 or (gpus.nproc or 0) > 1
    return gpus, multi


def world_size(gpus: GpuCount) -> int:
    """How many processes the job ran, as its log says (world size, process count, ranks seen; 0 when silent)."""
    if gpus.world:
        return gpus.world
    if gpus.nproc:
        return gpus.nproc * (gpus.nnodes or 1)  # processes per node x nodes
    return gpus.ranks_seen


def verdict_of_text(text: str) -> Verdict | None:
    """The job-level verdict over one log given as text (None when it shows a single process, or no failure)."""
    if not may_show_several_processes(text):
        return None
    log = text_file(text)
    gpus, multi = shape_of([log])
    verdict = decide(scans_of([log]), multi=multi, ranks_seen=gpus.ranks_seen, world=world_size(gpus))
    if verdict is not None and verdict.first_rank is None and not multi:
        return None  # one process (one rank's lines pasted, a one-process launcher): the parser reads it with its context
    return verdict
