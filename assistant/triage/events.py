"""Find what happened in one stream of log lines (one rank of one file): failures and how the run ended.

The scanner walks the lines once and emits :class:`Event` records: Python tracebacks (with their
chained parts and continuation lines), C++ aborts, NCCL watchdog timeouts, signals, launcher
summaries (torchrun, ``mp.spawn``, srun), scheduler verdicts and exit codes. It also marks lines
that show the run making progress, so that a traceback the program survived (a retried
connection, a warning printed with its stack) is not taken for the failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from assistant.triage.reading import LogLine

TRACEBACK = "traceback"
CPP_ABORT = "cpp_abort"
WATCHDOG = "watchdog"
SIGTERM = "sigterm"
SIGNAL = "signal"
SCHEDULER = "scheduler"
LAUNCHER = "launcher"
EXIT_CODE = "exit_code"
ERROR_LINE = "error_line"

_TB_HEADER = "Traceback (most recent call last):"
_CHAIN = re.compile(r"^(?:During handling of the above exception, another exception occurred|The above exception was the direct cause of the following exception):?\s*$")
_FRAME_LINE = re.compile(r"^\s+File \"|^\s+File <|^\s|^\s*\^+\s*$|^\s*~+\^*~*\s*$|^\s*\.\.\.\s*<\d+ lines>\s*\.\.\.\s*$|^\s*\[Previous line repeated")
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Fault|Timeout|Exhausted|Iteration|error|exception)|[A-Za-z_][\w.]*\.[A-Z]\w*|KeyboardInterrupt|StopIteration|SystemExit|AssertionError)(?::|$)")
_NEW_RECORD = re.compile(
    r"^(?:\[?\d{4}[-/]\d{2}[-/]\d{2}[ T_]\d{2}:\d{2}|\d{2}/\d{2}/\d{4} \d{2}:\d{2}|[IWEF]\d{4} \d{2}:\d{2}:\d{2}|\[[IWEF]\d{4} |\[?(?:INFO|WARNING|ERROR|DEBUG)\b"
    r"|wandb:|srun:|slurmstepd:|Traceback \(most|terminate called|Exception ignored in|Exception in thread"
    r"|(?:WARNING|ERROR|INFO):torch\.|(?:Epoch|Step|Iter)\b|={10,}|-{10,}|Root Cause \(first observed failure\))",
)
_IGNORED_HEADER = re.compile(r"^Exception ignored (?:in|on calling|while)|^Error in atexit\._run_exitfuncs")
_THREAD_HEADER = re.compile(r"^Exception in thread ")

_TERMINATE = re.compile(r"terminate called after throwing an instance of '([^']+)'")
_WHAT = re.compile(r"^\s*what\(\):\s*(.*)$")
# A watchdog thread that died of a CUDA error (an ECC fault, an illegal access) reports that rank's
# own failure; only timeouts are the fallout of another rank.
_WATCHDOG_OWN_ERROR = re.compile(r"watchdog thread terminated with exception: (?!.*(?:timeout|timed out))(?P<error>.+)$", re.IGNORECASE)
_WATCHDOG = re.compile(
    r"Watchdog caught collective operation timeout|watchdog thread terminated with exception: .*(?:timeout|timed out)|Some NCCL operations have failed or timed out"
    r"|ProcessGroupNCCL's watchdog got stuck|(?:NCCL|collective) operation (?:timed out|timeout)|Timed out waiting \d+ms for send operation to complete"
    r"|heartbeat monitor.*(?:timeout|detected)|No heartbeat received",
    re.IGNORECASE,
)
_SIGTERM = re.compile(r"Signal 15 \(SIGTERM\) received by PID|received signal SIGTERM|got signal: 15|SignalException|Sending process \d+ closing signal SIGTERM|Received SIGTERM|caught SIGTERM", re.IGNORECASE)
_SCHEDULER = re.compile(
    r"\*\*\* (?:JOB|STEP) [\w.]+ ON \S+ CANCELLED AT \S+(?: DUE TO (?P<due>[A-Z ]+?))?(?: \*\*\*|$)"
    r"|(?P<oom>Detected \d+ oom[_-]kill event|oom[_-]kill event\(s\)|Some of your processes may have been killed by the cgroup out-of-memory handler|Out of memory: Killed? process|\bOOMKilled\b|Exceeded job memory limit|exceeded memory limit)"
    r"|(?P<walltime>PBS: job killed: walltime \d+ exceeded limit|TERM_RUNLIMIT|=>> PBS: job killed: walltime|DeadlineExceeded|JOB \d+ CANCELLED .*TIME LIMIT)"
    r"|(?P<node>Node failure on \S+|NODE_FAIL\b|lost connection to node|slurmstepd: error: \*\*\* JOB .* NODE FAILURE)"
    r"|(?P<preempt>\bPREEMPTED\b|preemption notice|instance (?:is being|was) preempted|spot instance (?:interruption|termination))",
    re.IGNORECASE,
)
_SIGNAL = re.compile(
    r"^(?:.*: line \d+:\s+\d+\s+)?(?P<name>Killed|Segmentation fault|Bus error|Aborted|Illegal instruction|Floating point exception|Terminated)(?: \(core dumped\))?(?:\s+.*)?$"
    r"|^Fatal Python error: (?P<fatal>Segmentation fault|Bus error|Aborted|Floating point exception|Illegal instruction)"
    r"|(?:signal|Signal) (?P<num>\d+) \((?P<sig>SIG[A-Z]+)\)(?! received by PID)",
)
_SRUN_EXIT = re.compile(r"srun: error: (?P<host>\S+): tasks? (?P<tasks>[\d,\- ]+): (?P<how>Exited with exit code (?P<code>\d+)|Killed|Segmentation fault|Bus error|Aborted|Terminated)")
_EXIT_CODE = re.compile(
    r"(?:exit(?:ed|s)?(?: with)? (?:return )?(?:code|status)|exitcode|Exit status|returned non-zero exit status|finished with exit code|non-zero status)\s*[:=]?\s*(?P<code>-?\d+)",
    re.IGNORECASE,
)
_TORCHRUN_FAILED = re.compile(r"ChildFailedError|Root Cause \(first observed failure\)|failed \(exitcode: -?\d+\) local_rank: \d+")
_ROOT_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)\s*\(local_rank")
_ROOT_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")
_ROOT_TB = re.compile(r"^\s*traceback\s*:\s*(.*)$")
_DS_EXIT = re.compile(r"sigkill_handler\b.*--local_rank=(\d+).*exits with return code = (-?\d+)")
_DS_NODE = re.compile(r"num_local_procs=(\d+), node_rank=(\d+)")
_FAILED_LOCAL = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)")
_SPAWN = re.compile(r"-- Process (\d+) terminated with the following error|process (\d+) terminated with (?:signal|exit code)")
_LAUNCHER_TYPES = re.compile(r"(?:ChildFailedError|ProcessRaisedException|ProcessExitedException|CalledProcessError|SignalException)\b")
_BARE_ERROR = re.compile(r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception): \S")
# Lines that show the program doing work: training progress, evaluation, checkpointing, retries.
_PROGRESS = re.compile(
    r"\b(?:epoch|step|iter(?:ation)?|batch|global_step)\b\s*[:=#\[(]?\s*\d|\bloss\b\s*[:=]\s*-?[\d.]|(?<!\d)\d+%\|[^|]*\|\s*\d+/\d+|(?<!\d)\d+it/s|(?<![\d.])\d+(?:\.\d+)?s/it"
    r"|\bretry(?:ing)?\b|\breconnect|\bresum(?:ing|ed)\b|\bsaved? checkpoint|\bcheckpoint saved",
    re.IGNORECASE,
)
_NOT_PROGRESS = re.compile(r"^(?:wandb:|srun:|slurmstepd:|\s)")
_SUCCESS = re.compile(r"\b(?:training (?:complete|completed|finished|done)|finished training|job (?:finished|completed|done) successfully|all done|exits successfully)\b"
                      r"|exit(?:ed)?(?: with)? (?:code|status)[:= ]+0\b", re.IGNORECASE)


@dataclass
class Event:
    """Something that happened in a stream (indices point into that stream's list of lines)."""

    kind: str
    start: int
    end: int  # inclusive
    headline: str
    lines: list[str] = field(default_factory=list)
    reason: str = ""  # time_limit | oom_kill | node_failure | preempted | cancelled | segfault | bus_error | abort | killed | exit_code ...
    exit_code: int | None = None
    named_rank: int | None = None  # a rank the event itself names (torchrun root cause, spawn process, srun task)
    ignored: bool = False  # printed at shutdown or in a thread that did not stop the run
    survived: bool = False  # the run made progress after it
    launcher: bool = False  # the launcher's own report that a child failed
    multi_hint: bool = False  # the event itself proves the job ran several processes (mp.spawn, "task 3", rank 2)


@dataclass
class StreamScan:
    """Events and progress markers of one stream."""

    events: list[Event]
    progress: list[int]  # indices of lines that show progress
    success: bool  # an explicit success marker near the end


def scan(lines: list[LogLine]) -> StreamScan:
    """Scan one stream (one rank of one file, in order) into events."""
    texts = [ln.text for ln in lines]
    events: list[Event] = []
    progress: list[int] = []
    success_at = -1
    ds_nodes: dict[str, tuple[int, int]] = {}  # DeepSpeed launcher's (processes per node, node rank) per host label
    i = 0
    n = len(texts)
    while i < n:
        t = texts[i]
        low = t.lower()
        if not _has(low, _EVENT_HINTS):
            # Most lines are progress output: two substring passes decide them without a regex.
            if _has(low, _PROGRESS_HINTS) and not _NOT_PROGRESS.match(t):
                progress.append(i)  # confirmed by the pattern only where it matters (_mark_survived)
            if _has(low, _SUCCESS_HINTS) and _SUCCESS.search(t):
                success_at = i
            i += 1
            continue
        stripped = t.lstrip()
        if stripped.startswith(_TB_HEADER) or (_TB_HEADER in t and _ROOT_TB.match(t) is None and t.rstrip().endswith(_TB_HEADER)):
            ev = _traceback(texts, i)
            ev.ignored = _preceded_by_ignored(texts, i)
            events.append(ev)
            i = ev.end + 1
            continue
        if "terminate called" in t and _TERMINATE.search(t):
            ev = _cpp_abort(texts, i)
            events.append(ev)
            i = ev.end + 1
            continue
        if ("Root Cause" in t or "failed (exitcode" in t) and _TORCHRUN_FAILED.search(t):
            ev = _torchrun_summary(texts, i)
            events.append(ev)
            i = ev.end + 1
            continue
        m = _SCHEDULER.search(t) if _has(low, _SCHEDULER_HINTS) else None
        if m:
            events.append(Event(SCHEDULER, i, i, t.strip(), [t], reason=_scheduler_reason(m)))
            i += 1
            continue
        m = _SRUN_EXIT.search(t) if "srun: error" in t else None
        if m:
            events.append(_srun_exit(t, i, m))
            i += 1
            continue
        m = _WATCHDOG_OWN_ERROR.search(t) if "watchdog thread terminated" in low else None
        if m:
            events.append(Event(CPP_ABORT, i, i, m.group("error").strip(), [m.group("error").strip()], reason="abort"))
            i += 1
            continue
        if _has(low, _WATCHDOG_HINTS) and _WATCHDOG.search(t):
            events.append(Event(WATCHDOG, i, i, t.strip(), [t], reason="collective_timeout"))
            i += 1
            continue
        if _has(low, _SIGTERM_HINTS) and _SIGTERM.search(t):
            events.append(Event(SIGTERM, i, i, t.strip(), [t], reason="sigterm"))
            i += 1
            continue
        m = _SIGNAL.search(t) if len(t) < 300 and _has(low, _SIGNAL_HINTS) else None
        if m:
            events.append(Event(SIGNAL, i, i, t.strip(), [t], reason=_signal_reason(m)))
            i += 1
            continue
        if _BARE_ERROR.match(stripped) and not stripped.startswith(("Warning", "UserWarning", "FutureWarning", "DeprecationWarning")):
            events.append(Event(ERROR_LINE, i, i, stripped, [t]))
            i += 1
            continue
        if "node_rank=" in t and (m := _DS_NODE.search(t)):
            ds_nodes[lines[i].host] = (int(m.group(1)), int(m.group(2)))
        m = _DS_EXIT.search(t) if "sigkill_handler" in t else None
        if m:
            events.append(_deepspeed_exit(t, i, m, ds_nodes.get(lines[i].host) or (next(iter(ds_nodes.values())) if len(ds_nodes) == 1 else None)))
            i += 1
            continue
        m = _EXIT_CODE.search(t) if _has(low, _EXIT_HINTS) else None
        if m and not _NOT_PROGRESS.match(t) or (m and t.startswith(("srun", "slurmstepd"))):
            code = int(m.group("code"))
            if code != 0:
                events.append(Event(EXIT_CODE, i, i, t.strip(), [t], reason="exit_code", exit_code=code))
            else:
                success_at = i
            i += 1
            continue
        if _has(low, _SUCCESS_HINTS) and _SUCCESS.search(t):
            success_at = i
        if _has(low, _PROGRESS_HINTS) and not _NOT_PROGRESS.match(t):
            progress.append(i)
        i += 1
    _supersede_cut(events)
    progress = _mark_survived(events, progress, texts)
    success = success_at >= 0 and not any(e.start > success_at and not e.ignored for e in events)
    return StreamScan(events, progress, success)


# Lower-case words without which no event pattern below can match (a cheap filter run on every line).
_EVENT_HINTS = (
    "traceback", "terminate called", "root cause", "exitcode", "cancel", "oom", "out of memory", "memory limit", "walltime",
    "runlimit", "deadline", "node", "lost connection", "preempt", "srun", "watchdog", "timed out", "timeout", "heartbeat",
    "sig", "killed", "segmentation", "bus error", "aborted", "illegal", "floating point", "terminated", "fatal", "error",
    "exception", "exit", "status", "received",
)
_PROGRESS_HINTS = ("epoch", "step", "iter", "batch", "loss", "%|", "it/s", "s/it", "retry", "retrying", "reconnect", "resum", "checkpoint")
# Words each pattern needs (lower case): a line without them skips the pattern. Most event-path lines are NCCL chatter
# and exception lines; the full patterns run on the few that could match.
_SCHEDULER_HINTS = ("cancelled", "oom", "out of memory", "memory limit", "walltime", "runlimit", "deadline", "node", "lost connection",
                    "preempt", "spot instance")
_WATCHDOG_HINTS = ("watchdog", "timed out", "timeout", "heartbeat")
_SIGTERM_HINTS = ("sigterm", "signal: 15", "signalexception")
_SIGNAL_HINTS = ("killed", "segmentation", "bus error", "aborted", "illegal instruction", "floating point", "terminated", "signal")
_EXIT_HINTS = ("exit", "status")
_SUCCESS_HINTS = ("complete", "finish", "done", "success", "exit", "status")


def _has(low: str, words: tuple[str, ...]) -> bool:
    for w in words:
        if w in low:
            return True
    return False


SURVIVED_AFTER = 3  # progress lines after a failure that show the run went on


def _mark_survived(events: list[Event], candidates: list[int], texts: list[str]) -> list[int]:
    """A failure followed by several progress lines in the same stream did not end the run.

    ``candidates`` are lines that carry a progress word; the progress pattern (the costly part of a scan, run on most
    lines of a training log) confirms only those after a failure, and only until enough are found. Returns the
    confirmed progress lines."""
    import bisect

    confirmed: dict[int, bool] = {}

    def is_progress(k: int) -> bool:
        if k not in confirmed:
            confirmed[k] = bool(_PROGRESS.search(texts[k]))
        return confirmed[k]

    for ev in events:
        if ev.kind in (TRACEBACK, ERROR_LINE, WATCHDOG, CPP_ABORT):
            found = 0
            for k in candidates[bisect.bisect_right(candidates, ev.end):]:
                found += is_progress(k)
                if found >= SURVIVED_AFTER:
                    break
            ev.survived = found >= SURVIVED_AFTER
    return sorted(k for k, yes in confirmed.items() if yes)


def _preceded_by_ignored(texts: list[str], i: int) -> bool:
    for j in range(i - 1, max(i - 4, -1), -1):
        if _IGNORED_HEADER.match(texts[j].lstrip()):
            return True
        if texts[j].strip() and not texts[j].startswith(" "):
            break
    return False


def _traceback(texts: list[str], start: int) -> Event:
    """A Python traceback block with its chained parts and the message's continuation lines."""
    n = len(texts)
    j = start + 1
    block_end = start
    while True:
        while j < n and (not texts[j].strip() or _FRAME_LINE.match(texts[j])) and not texts[j].lstrip().startswith(_TB_HEADER):
            if texts[j].strip():
                block_end = j
            j += 1
        if j >= n or texts[j].lstrip().startswith(_TB_HEADER):
            break  # cut before its exception line, or a new traceback started
        if not _EXC_LINE.match(texts[j]) and _traceback_within(texts, j + 1, _INTERLEAVED):
            # Another process's line (a CUDA kernel's assert, slurmstepd's oom_kill notice) landed in the middle of this
            # print and a traceback follows at once: this block was cut there; that line is an event of its own.
            break
        block_end = j  # the exception line
        j += 1
        chained = False
        cont = 0
        while j < n and cont < 40:
            nxt = texts[j]
            s = nxt.strip()
            if _CHAIN.match(s):
                k = j + 1
                while k < n and not texts[k].strip():
                    k += 1
                if k < n and texts[k].lstrip().startswith(_TB_HEADER):
                    block_end = k
                    j = k + 1
                    chained = True
                break
            if not s:
                k = _next_nonblank(texts, j + 1)
                if k < n and _CHAIN.match(texts[k].strip()):
                    j = k  # Python prints a blank line before "The above exception was ...": the chain goes on
                    continue
                # a blank line ends the message unless the next line continues it with an indent
                if j + 1 < n and texts[j + 1].startswith(("\t", "    ")) and not texts[j + 1].lstrip().startswith("File "):
                    j += 1
                    continue
                break
            if _NEW_RECORD.match(nxt) or (not nxt.startswith((" ", "\t")) and (_EXC_LINE.match(nxt) or _PROGRESS.search(nxt))):
                break
            block_end = j
            j += 1
            cont += 1
        if not chained:
            break
    lines = texts[start:block_end + 1]
    headline = final_headline(lines)
    ev = Event(TRACEBACK, start, block_end, headline, lines)
    if _LAUNCHER_TYPES.search(headline):
        ev.launcher = True
        ev.reason = _exit_reason(None, headline)
        m = _SPAWN.search("\n".join(lines + texts[block_end + 1:block_end + 4]))
        if m:
            ev.named_rank = int(m.group(1) or m.group(2))
            ev.multi_hint = True  # mp.spawn numbers its processes: there were several
    return ev


_INTERLEAVED = 2  # lines a foreign print may put between a cut traceback and the one that carries its failure


def _next_nonblank(texts: list[str], j: int) -> int:
    """The index of the first line from ``j`` on that says something (``len(texts)`` when none does)."""
    while j < len(texts) and not texts[j].strip():
        j += 1
    return j


def _traceback_within(texts: list[str], j: int, lines: int) -> bool:
    """Whether a traceback header starts within ``lines`` lines from ``j``."""
    return any(t.lstrip().startswith(_TB_HEADER) for t in texts[j:j + lines])


def _supersede_cut(events: list[Event]) -> None:
    """A traceback cut before its exception line, with the next traceback of the stream right behind it, is ignored.

    The two are one failure whose print something else interrupted (mp.spawn's quoted child error, a kernel's assert
    line written into the middle of it): the complete one names the error and the frame, the cut one names nothing."""
    tracebacks = [e for e in events if e.kind == TRACEBACK]
    for cut, after in zip(tracebacks, tracebacks[1:], strict=False):
        if not cut.headline and after.headline and after.start - cut.end <= _INTERLEAVED + 1:
            cut.ignored = True


def final_headline(lines: list[str]) -> str:
    """The last exception line of the block (the one a chain ends with); "" when the block was cut before it."""
    for ln in reversed(lines):
        s = ln.rstrip()
        if s and not s.startswith((" ", "\t")) and _EXC_LINE.match(s) and not s.startswith(_TB_HEADER):
            return s.strip()
    return ""


def _cpp_abort(texts: list[str], start: int) -> Event:
    m = _TERMINATE.search(texts[start])
    what = ""
    end = start
    for j in range(start + 1, min(start + 12, len(texts))):
        w = _WHAT.match(texts[j])
        if w:
            what = w.group(1).strip()
            end = j
            # the message may continue on the next lines until the C++ frame dump
            for k in range(j + 1, min(j + 8, len(texts))):
                s = texts[k]
                if not s.strip() or s.startswith(("Exception raised from", "frame #")):
                    break
                end = k
            break
    lines = texts[start:end + 1]
    headline = what or (m.group(1) if m else texts[start].strip())
    ev = Event(CPP_ABORT, start, end, headline, lines, reason="abort")
    own = _WATCHDOG_OWN_ERROR.search(headline)
    if own:
        ev.headline = own.group("error").strip()
    elif _WATCHDOG.search(" ".join(lines)):
        ev.kind = WATCHDOG
        ev.reason = "collective_timeout"
    return ev


def _torchrun_summary(texts: list[str], start: int) -> Event:
    """torchrun's failure summary: the root-cause rank, its exit code and (with @record) its traceback."""
    end = start
    rank: int | None = None
    code: int | None = None
    tb: list[str] = []
    m = _FAILED_LOCAL.search(texts[start])
    if m and "Root Cause" not in texts[start]:
        code = int(m.group(1))
        return Event(LAUNCHER, start, start, texts[start].strip(), [texts[start]], reason="exit_code", exit_code=code, launcher=True)
    in_root = False
    for j in range(start, min(start + 400, len(texts))):
        s = texts[j]
        end = j
        if "Root Cause" in s:
            in_root = True
            continue
        if not in_root:
            continue
        if rank is None and (rm := _ROOT_RANK.match(s)):
            rank = int(rm.group(1))
        elif code is None and (em := _ROOT_EXIT.match(s)):
            code = int(em.group(1))
        elif (tm := _ROOT_TB.match(s)) and not tb:
            tb.append(tm.group(1))
            for k in range(j + 1, min(j + 200, len(texts))):
                if texts[k].startswith("====="):
                    end = k
                    break
                tb.append(texts[k])
            break
        if s.startswith("=====") and rank is not None:
            break
    headline = next((ln.strip() for ln in reversed(tb) if _EXC_LINE.match(ln.strip())), tb[0].strip() if tb else "child process failed")
    summary = [t for t in texts[start:end + 1] if t.strip() and not t.startswith("=====")]
    has_traceback = any(_TB_HEADER in t for t in tb)
    return Event(LAUNCHER, start, end, headline, tb if has_traceback else summary, reason=_exit_reason(code, headline),
                 exit_code=code, named_rank=rank, launcher=True, multi_hint=bool(rank))


def _deepspeed_exit(t: str, i: int, m: re.Match[str], node: tuple[int, int] | None) -> Event:
    """DeepSpeed's launcher reporting a worker's exit: it names the worker by ``--local_rank``; with its node's rank
    (the node's launcher line, read from the same host's lines) that is the global rank, else it stays unnamed."""
    local, code = int(m.group(1)), int(m.group(2))
    rank = local + node[0] * node[1] if node is not None else None
    return Event(LAUNCHER, i, i, t.strip(), [t], reason=_exit_reason(code, t) if code < 0 else "exit_code", exit_code=code,
                 named_rank=rank, launcher=True, multi_hint=True)


# Negative exit codes (torchrun, mp.spawn) and 128+N shell codes name the signal that killed the process.
_SIGNAL_REASONS = {9: "killed", 11: "segfault", 7: "bus_error", 6: "abort", 15: "sigterm", 4: "illegal_instruction", 8: "fpe"}


def _exit_reason(code: int | None, text: str = "") -> str:
    m = re.search(r"\b(SIG[A-Z]+)\b", text)
    if m:
        by_name = {"SIGKILL": "killed", "SIGSEGV": "segfault", "SIGBUS": "bus_error", "SIGABRT": "abort", "SIGTERM": "sigterm"}
        if m.group(1) in by_name:
            return by_name[m.group(1)]
    if code is not None and code < 0:
        return _SIGNAL_REASONS.get(-code, "signal")
    if code is not None and code > 128:
        return _SIGNAL_REASONS.get(code - 128, "exit_code")
    return "exit_code"


def _srun_exit(text: str, i: int, m: re.Match[str]) -> Event:
    how = m.group("how")
    code = int(m.group("code")) if m.group("code") else None
    reason = "exit_code" if code is not None else {"Killed": "killed", "Segmentation fault": "segfault", "Bus error": "bus_error", "Aborted": "abort", "Terminated": "sigterm"}.get(how, "exit_code")
    tasks = m.group("tasks").strip()
    first = re.match(r"\d+", tasks)
    ev = Event(LAUNCHER, i, i, text.strip(), [text], reason=reason, exit_code=code, launcher=True)
    if first and "," not in tasks and "-" not in tasks:
        ev.named_rank = int(first.group(0))
    ev.multi_hint = bool(ev.named_rank) or "," in tasks or "-" in tasks
    return ev


def _scheduler_reason(m: re.Match[str]) -> str:
    due = (m.group("due") or "").upper()
    if m.group("oom"):
        return "oom_kill"
    if m.group("walltime") or "TIME LIMIT" in due:
        return "time_limit"
    if m.group("node") or "NODE FAIL" in due:
        return "node_failure"
    if m.group("preempt") or "PREEMPT" in due:
        return "preempted"
    return "cancelled"


def _signal_reason(m: re.Match[str]) -> str:
    name = (m.group("name") or m.group("fatal") or m.group("sig") or "").lower()
    if "segmentation" in name or name == "sigsegv":
        return "segfault"
    if "bus" in name or name == "sigbus":
        return "bus_error"
    if name in ("killed", "sigkill"):
        return "killed"
    if name in ("aborted", "sigabrt"):
        return "abort"
    if name in ("terminated", "sigterm"):
        return "sigterm"
    return name or "signal"
