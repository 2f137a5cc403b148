"""Jobs that end without a Python traceback: the scheduler's verdict, the launcher's summary, a native crash.

A cluster log often ends with a line from the batch system instead of an exception: Slurm's
``*** JOB 123 ON node CANCELLED AT ... DUE TO TIME LIMIT ***``, PBS's ``job killed: walltime ...``,
LSF's ``TERM_RUNLIMIT``, a cgroup ``oom_kill event``, Kubernetes' ``OOMKilled``; or the launcher only
reports how each task ended (``srun: error: node: task 3: Exited with exit code 1``); or the process
dies in native code (``Segmentation fault (core dumped)``, ``Bus error``).

Where such a line sits beside a real Python error, the Python error wins: the verdict rules decline
when the text holds an exception that is not itself fallout of the signal (``SignalException``,
``KeyboardInterrupt``, a peer's broken connection), and the launcher and crash rules read any failure
(``reads=("any",)``), so they run late, after every rule of the failure's exception family.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime

from assistant.parse.messages import fmt_bytes
from assistant.rules.base import Context, hit, lazy_re, remedy
from assistant.rules.registry import NORMAL, Example, rule
from assistant.types import Fact, Facts, Fix, RuleHit

# The families a job log that ends in a scheduler's line arrives as: no exception at all, or only the
# fallout of the stop (a peer's NCCL/store error, torchrun's ChildFailedError: RuntimeError; a broken
# connection: OSError; SIGTERM/Ctrl+C: Interrupt; a library's own type, a job name taken for a type: other).
# The verdict rules read these before the family's own rules: the scheduler's line says why it all stopped.
JOB_LOG = ("text", "RuntimeError", "OSError", "Interrupt", "other")

# --- the scheduler's own verdict lines ---------------------------------------------------------------

# Slurm's slurmstepd: "*** JOB 123 ON node CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME LIMIT ***" and its older forms
# ("*** JOB 123 CANCELLED AT <t> DUE TO TIME LIMIT on node ***", "*** JOB 123 CANCELLED AT <t> *** on node",
# "*** JOB 123 ON node CANCELLED DUE TO TIME LIMIT ***"); newer releases say "DUE to SIGNAL Terminated" for scancel.
_SLURM_VERDICT = lazy_re(
    r"\*\*\*\s*(?P<what>JOB|STEP)(?:\s+(?P<id>\d[\w.+\-]*))?(?:\s+ON\s+(?P<node>\S+))?\s+CANCELLED(?:\s+AT\s+(?P<at>\S+))?"
    r"(?:\s+DUE\s+TO\s+(?P<due>[A-Za-z][A-Za-z ]*?))?(?:\s+on\s+(?P<node2>[\w.\-]+))?(?:,[^*\n]*)?\s*\*\*\*(?:\s+on\s+(?P<node3>[\w.\-]+))?",
    re.IGNORECASE,
)
# Slurm's verdict when the step failed on its own (a task exited non-zero under --kill-on-bad-exit).
_SLURM_FAILED = lazy_re(r"\*\*\*\s*(?:JOB|STEP)\s+\S+\s+ON\s+\S+\s+FAILED \(non-zero exit code|DUE TO TASK FAILURE", re.IGNORECASE)
_TIME_LIMIT = lazy_re(
    r"PBS: job killed: walltime (?P<pbs_used>\d+) exceeded limit (?P<pbs_limit>\d+)"
    r"|(?P<lsf>TERM_RUNLIMIT)(?:: job killed after reaching LSF run time limit)?"
    r"|job exceeded (?:its )?wall ?clock limit|exceeded (?:hard |soft )?wall ?clock (?:time|limit)"
    r"|(?P<k8s>\bDeadlineExceeded\b|Job was active longer than specified deadline)"
    r"|Job cancelled because time value exceeded|CANCELLED[^\n]{0,40}DUE TO TIME LIMIT"
    r"|(?-i:JobState=TIMEOUT|\bState\s*[:=]\s*TIMEOUT\b)",  # the accounting state, upper case only
    re.IGNORECASE,
)
_PREEMPT = lazy_re(
    r"\bDUE TO (?:PREEMPTION|JOB REQUEUE)\b|\bPREEMPTED\b"
    r"|\b(?:job|instance|node|vm|pod) (?:is |was |has been |got |is being )?preempted\b"
    r"|(?:spot|preemptible) (?:instance|vm|node|capacity)s?\b[^.\n]{0,40}\b(?:interrupt|preempt|reclaim)\w*"
    r"|\b(?:preemption|interruption) notice\b"
)
_CANCEL_OTHER = lazy_re(
    r"\bCANCELLED by (?P<uid>\d+)|Job deleted at request of (?P<who>\S+)|TERM_OWNER: job killed by owner|TERM_ADMIN: job killed by root or LSF administrator"
)
_NODE_FAIL = lazy_re(
    r"Node failure on (?P<node>[\w.\-\[\],]+)|\bNODE_FAIL\b|Nodes (?P<node2>\S+) are still not ready|job preempted \(node failure\)"
    r"|DUE TO NODE FAILURE|lost connection to (?:the )?node"
)
# The job's own memory limit (a cgroup, the scheduler's accounting, a container limit), not the machine running dry.
_MEM_LIMIT = lazy_re(
    r"Detected (?P<events>\d+) oom[-_]kill events?(?:\(s\))?(?: in (?:StepId=|step )?(?P<step>[\w.]+))?"
    r"|Some of (?:your processes|the step tasks) (?:may have been|have been) (?:killed by the cgroup out-of-memory handler|OOM Killed)"
    r"|tasks? [\d,\- ]+: Out Of Memory"
    r"|(?:Job \d+|StepId=[\w.]+|[Ss]tep [\w.]+) exceeded (?:job |step )?(?:virtual )?memory limit \((?P<used>\d+) ?> ?(?P<limit>\d+)\)"
    r"|Exceeded (?:job|step) memory limit"
    r"|(?P<lsf>TERM_MEMLIMIT)(?:: job killed after reaching LSF memory usage limit)?"
    r"|PBS: job killed: (?P<pbs_kind>p?v?mem)(?: job total)? (?P<pbs_used>\d+)\s?(?P<pbs_unit>[kmgt]?b)?\s+exceeded limit\s+(?P<pbs_limit>\d+)\s?(?P<pbs_unit2>[kmgt]?b)?"
    r"|Job exceeded a memory resource limit"
    r"|(?P<k8s>\bOOMKilled\b)"
    r"|Memory cgroup out of memory",
    re.IGNORECASE,
)
_CUDA_OOM_WORDS = lazy_re(r"CUDA out of memory|OutOfMemoryError|MPS backend out of memory|HIP out of memory")

# --- the launcher's summary of how each task ended ---------------------------------------------------

_SRUN_TASK = lazy_re(
    r"srun: error: (?P<host>\S+): tasks? (?P<tasks>[\d,\- ]+?): (?P<how>Exited with exit code (?P<code>\d+)|Killed|Segmentation fault|Bus error|Aborted|Terminated)"
)
_MPI_TASK = lazy_re(r"process rank (?P<tasks>\d+) with PID \S+ on node (?P<host>\S+) exited on\s+signal (?P<sig>\d+) \((?P<name>[^)]+)\)")
_LSF_EXIT = lazy_re(r"^Exited with exit code (?P<code>\d+)\.", re.M)

# --- native crashes -----------------------------------------------------------------------------------

_SEGV = lazy_re(
    r"Segmentation fault|\bSIGSEGV\b|\bsignal:? 11\b|exit(?:ed with)? code:? 139\b|exitcode\s*:\s*-11\b|segfault at [0-9a-f]+ ip|Signals\.SIGSEGV",
    re.IGNORECASE,
)
_BUS = lazy_re(r"Bus error|\bSIGBUS\b|\bsignal:? 7\b|exit(?:ed with)? code:? 135\b|exitcode\s*:\s*-7\b", re.IGNORECASE)
# The crash happened while importing (a binary that does not match its environment).
_IMPORT_LINE = lazy_re(r"(?:^\s*>>>\s*|(?:^|[$#>]\s*)python\d?(?:\.\d+)?\s+-c\s+['\"]\s*)(?:import|from)\s+[\w.]+")
# Starts only at a word start and with bounded suffixes: "crash\w*" tried at every letter of a long word was quadratic.
_IMPORT_PROSE = lazy_re(r"(?<!\w)(?:segment\w{0,12}|segfault|core dump\w{0,4}|crash\w{0,6})[^.\n]{0,40}\b(?:when|while|on|at|after) import\w{0,6}|\b(?:can ?not|unable to|fails? to) import\b", re.I)
_MISMATCH = lazy_re(r"undefined symbol|GLIBCXX_\d|version `GLIBC|(?:compiled|built) (?:with|against|for) (?:a different|another|an older|a newer)|ABI (?:mismatch|incompatib)", re.I)
# A package that bundles its own native copies (CUDA, BLAS, OpenMP, protobuf) imported before torch in the user's code.
_NATIVE_FIRST = lazy_re(r"^[ \t]*(?:import|from)\s+(open3d|tensorflow|cv2|pyarrow|jax|jaxlib|onnxruntime|mxnet|paddle|faiss|pyrealsense2|tensorrt|cupy"
                        r"|mindspore|pymeshlab|vtk|pyvista|dgl)\b", re.M)
_TORCH_IMPORT = lazy_re(r"^[ \t]*(?:import[ \t]+torch\b|from[ \t]+torch\b)", re.M)  # [ \t], not \s: \s* from every line start spans blank lines (quadratic)
# Unstable hardware: the same code works elsewhere, the crash moves around, other programs crash too, or memory settings are named.
_HW_ELSEWHERE = lazy_re(r"\b(?:works?|worked|working|trained|trains?|runs?|ran|running)\b[^.\n]{0,40}?\bon (?:my |several |the |)(?:other|another|different) "
                        r"(?:machines?|computers?|pcs?|servers?|systems?|workstations?|nodes?)\b"
                        r"|\b(?:other|unrelated) (?:programs?|applications?|workloads?|software|builds?) (?:also |too )?(?:crash|segfault|fail)\w*", re.I)
_HW_RANDOM = lazy_re(r"\brandomly\b|\bat random\b|\b(?:crash\w*|fails?|happens?|occurs?|segfaults?|dies)\b[^.\n]{0,30}?\brandom\b|\bat (?:different|random|varying) (?:points|times|places|steps|iterations|epochs)\b"
                     r"|\bafter (?:some|several|a few|a random number of|varying|a variable number of|a different number of) (?:epochs|iterations|steps|hours|minutes|batches)\b"
                     r"|\bnot (?:always )?(?:at )?the same (?:place|point|step|iteration|epoch)\b|\bGarbage-collecting\b", re.I)
_HW_MEMORY = lazy_re(r"\bmemtest\w*|\bXMP\b|\bEXPO\b|\boverclock\w*|\bbit[- ]?flips?\b|\b(?:RAM|memory) (?:sticks?|modules?|DIMMs?)\b|\bfaulty (?:RAM|memory)\b")
_DATALOADER_WORKER = lazy_re(r"DataLoader worker|Unexpected (?:segmentation fault|bus error) encountered in worker|_worker_loop")
_SHM_CONTEXT = lazy_re(r"/dev/shm|shared memory|share_memory|\bshm\b|shm[-_]size|--ipc|docker|container|DataLoader|num_workers|workers?\b", re.I)

# --- what counts as the real error ---------------------------------------------------------------------

# An exception line, or a message that is an error in its own right.
_ERROR_LINE = lazy_re(
    r"^(?:\[rank\d+\]:\s*|\[\d+\]:\s*|\d+: )?(?:[\w]+\.)*(?P<type>[A-Z]\w*(?:Error|Exception|Interrupt|Exit))(?::|$)"
    r"|(?P<cuda>CUDA out of memory|CUDA error: |NCCL error|Watchdog caught collective operation timeout)",
    re.M,
)
# Exceptions that a signal or a dead peer causes: consequences of the verdict, never its cause.
_FALLOUT_TYPES = frozenset({
    "SignalException", "KeyboardInterrupt", "SystemExit", "ChildFailedError", "CalledProcessError", "BrokenPipeError",
    "ConnectionResetError", "ConnectionAbortedError", "ConnectionRefusedError", "DistNetworkError", "DistBackendError",
    "ProcessExitedException", "TerminatedWorkerError",
})
_FALLOUT_WORDS = lazy_re(
    r"got signal|death signal|SIGTERM|SIGKILL|SIGINT|Terminated|Connection (?:reset|closed|refused)|Broken pipe|remote process exited"
    r"|communicator was aborted|peer|Socket Timeout|killed by signal|exited unexpectedly",
    re.I,
)


def _raw(ctx: Context) -> str:
    return ctx.failure.text or ctx.text


def _has_real_error(ctx: Context, raw: str, *, ignore_crash: bool = False) -> bool:
    """The text holds an error that is not fallout of a signal (the Python error that must win)."""
    for m in _ERROR_LINE.finditer(raw):
        end = raw.find("\n", m.start())
        line = raw[m.start(): end if end != -1 else len(raw)]
        if m.group("type"):
            if m.group("type") in _FALLOUT_TYPES or _FALLOUT_WORDS.search(line):
                continue
        elif _FALLOUT_WORDS.search(line) or (ignore_crash and re.search(r"Segmentation|Bus error", line)):
            continue
        return True
    # The parser found an exception whose line the scan above did not (an indented or prefixed report).
    exc = ctx.exc_type
    return bool(exc and re.search(r"(?:Error|Exception|Interrupt|Exit)$", exc) and exc not in _FALLOUT_TYPES
                and not _FALLOUT_WORDS.search(ctx.message[:300]))


@dataclass(frozen=True)
class Verdict:
    """The scheduler's statement about how the job ended."""

    reason: str  # time_limit | preempted | requeued | cancelled | signal | node_failure
    line: str
    job: str | None = None
    node: str | None = None
    at: datetime | None = None
    pos: int = 0


def _slurm_verdicts(raw: str) -> list[Verdict]:
    out = []
    for m in _SLURM_VERDICT.finditer(raw):
        due = (m.group("due") or "").upper()
        reason = ("time_limit" if "TIME LIMIT" in due else "preempted" if "PREEMPT" in due else "requeued" if "REQUEUE" in due
                  else "node_failure" if "NODE FAIL" in due else "task_failure" if "TASK FAIL" in due else "signal" if due.startswith("SIGNAL") else "cancelled")
        at = None
        if m.group("at"):
            try:
                at = datetime.fromisoformat(m.group("at").rstrip(","))
            except ValueError:
                at = None
        node = m.group("node") or m.group("node2") or m.group("node3")
        out.append(Verdict(reason, m.group(0).strip(), m.group("id"), None if node in (None, "...") else node, at, m.start()))
    return out


_VERDICT_WORDS = ("cancel", "node", "walltime", "wall clock", "wallclock", "term_", "preempt", "deadline", "time limit", "timeout", "deleted", "killed by", "spot", "interrupt", "reclaim", "requeue")


@functools.lru_cache(maxsize=64)
def _verdict(raw: str) -> Verdict | None:
    """The decisive verdict: a time limit, preemption or node failure outranks the plain cancellation of a step.

    Several rules ask for it on the same text, so it is computed once per text.
    """
    low = raw.lower()
    if not any(w in low for w in _VERDICT_WORDS):
        return None  # none of the patterns below can match: skip the long case-insensitive searches
    slurm = _slurm_verdicts(raw)
    rank = {"node_failure": 0, "time_limit": 1, "preempted": 2, "requeued": 2, "task_failure": 3, "signal": 4, "cancelled": 5}
    if slurm:
        return sorted(slurm, key=lambda v: (rank[v.reason], v.pos))[0]
    for pattern, reason in ((_NODE_FAIL, "node_failure"), (_TIME_LIMIT, "time_limit"), (_PREEMPT, "preempted"), (_CANCEL_OTHER, "cancelled")):
        m = pattern.search(raw)
        if m:
            node = m.groupdict().get("node") or m.groupdict().get("node2")
            return Verdict(reason, _line_of(raw, m.start()), node=node, pos=m.start())
    return None


def _line_of(raw: str, pos: int) -> str:
    start = raw.rfind("\n", 0, pos) + 1
    end = raw.find("\n", pos)
    return raw[start: end if end != -1 else len(raw)].strip()


def _verdict_facts(v: Verdict) -> list[Fact]:
    found = [Fact("scheduler", v.line[:300])]
    where = [f"job {v.job}" if v.job else "", f"on {v.node}" if v.node else "", f"at {v.at:%Y-%m-%d %H:%M:%S}" if v.at else ""]
    if any(where):
        found.append(Fact("job", " ".join(w for w in where if w)))
    return found


# Timestamps in the log lines before the verdict: ISO dates ("2024-05-07 15:51:09", "[2024-05-07T15:51:09.123]").
_STAMP = lazy_re(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})")
_STALL_WORDS = lazy_re(
    r"\b(?:hangs?|hanging|hung|stuck|freez\w*|frozen|stall\w*|deadlock\w*|no (?:progress|output|new (?:log|output)))\b|Stalled ranks|stall_inspector",
    re.I,
)


def _stall(raw: str, v: Verdict) -> str | None:
    """Evidence that the job had stopped making progress before the scheduler killed it."""
    before = raw[: v.pos]
    if v.at is not None:
        stamps = []
        for m in _STAMP.finditer(before):
            try:
                y, mo, d, h, mi, s = (int(g) for g in m.groups())
                stamps.append(datetime(y, mo, d, h, mi, s))
            except ValueError:
                continue
        if stamps:
            gap = (v.at - stamps[-1]).total_seconds()
            if gap >= 1800:
                hours, minutes = int(gap // 3600), int(gap % 3600 // 60)
                return (f"the last time-stamped log line before the kill is from {stamps[-1]:%Y-%m-%d %H:%M}, "
                        f"{hours} h {minutes:02d} min before the scheduler stopped the job: nothing was logged in between")
    m = _STALL_WORDS.search(raw)
    if m:
        return f"the text says the job stopped making progress (“{_line_of(raw, m.start())[:160]}”)"
    return None


_TIME_DOCS = ("job-time-limit", "distributed-hang")


@rule(
    "scheduler.verdict",
    category="environment_error",
    docs=_TIME_DOCS,
    reads=JOB_LOG,
    priority=17,
    outcomes=("scheduler.time_limit", "scheduler.preempted", "scheduler.cancelled"),
    examples=(
        Example("corpus/scheduler/time_limit_lightning_step_sigterm.txt", "scheduler.time_limit"),
        Example("corpus/scheduler/time_limit_job_and_step_zetta.txt", "scheduler.time_limit"),
        Example("corpus/scheduler/time_limit_progress_lines_canu.txt", "scheduler.time_limit"),
        Example("corpus/scheduler/time_limit_srun_tasks_terminated.txt", "scheduler.time_limit"),
        Example("corpus/scheduler/time_limit_old_wording_host_after.txt", "scheduler.time_limit"),
        Example("corpus/scheduler/time_limit_feat_logs.txt", "scheduler.time_limit"),
        Example("corpus/scheduler/time_limit_pbs_walltime_torque.txt", "scheduler.time_limit"),
        Example("corpus/scheduler/time_limit_pbs_walltime_several_jobs.txt", "scheduler.time_limit"),
        Example("corpus/scheduler/time_limit_lsf_runlimit.txt", "scheduler.time_limit"),
        Example("corpus/scheduler/time_limit_moab_wallclock.txt", "scheduler.time_limit"),
        Example("corpus/scheduler/time_limit_k8s_deadline_exceeded.txt", "scheduler.time_limit"),
        Example("corpus/scheduler/preempted_slurm_nextflow_docs.txt", "scheduler.preempted"),
        Example("corpus/scheduler/preempted_submitit_job_requeue.txt", "scheduler.preempted"),
        Example("corpus/scheduler/preempted_ci_state_prose.txt", "scheduler.preempted"),
        Example("corpus/scheduler/cancelled_scancel_step_and_job.txt", "scheduler.cancelled"),
        Example("corpus/scheduler/cancelled_step_during_data_preparation.txt", "scheduler.cancelled"),
        Example("corpus/scheduler/cancelled_old_wording_host_after.txt", "scheduler.cancelled"),
    ),
)
def verdict(ctx: Context) -> RuleHit | None:
    """The scheduler stopped the job: its wall-clock limit, a preemption or requeue, or a cancellation."""
    raw = _raw(ctx)
    v = _verdict(raw)
    if v is None or v.reason == "node_failure":
        return None
    if _has_real_error(ctx, raw):
        return None  # a Python error in the log is the root cause; the scheduler only ended what was left (a hung peer)
    if _MEM_LIMIT.search(raw) and not _CUDA_OOM_WORDS.search(raw):
        return None  # a process killed at the memory limit (the rest then waited for it) is the cause: the memory rule explains it
    if _first_task_failure(raw, before=v.pos) or (v.reason in ("cancelled", "task_failure", "signal") and (v.reason == "task_failure" or _SLURM_FAILED.search(raw))):
        return None  # a task failed before the verdict (the rest were torn down, or hung until the limit): the launcher rule names that task
    if v.reason == "time_limit":
        return _time_limit(ctx, raw, v)
    if v.reason in ("preempted", "requeued"):
        return _preempted(ctx, raw, v)
    return _cancelled(ctx, raw, v)


def _time_limit(ctx: Context, raw: str, v: Verdict) -> RuleHit:
    found = _verdict_facts(v)
    numbers: dict[str, float] = {}
    pbs = re.search(r"walltime (\d+) exceeded limit (\d+)", raw)
    system = "Slurm"
    if pbs:
        numbers.update(walltime_used_s=float(pbs.group(1)), walltime_limit_s=float(pbs.group(2)))
        found.append(Fact("limit", f"ran {_hms(int(pbs.group(1)))} against a walltime limit of {_hms(int(pbs.group(2)))}"))
        system = "PBS/Torque"
    elif "TERM_RUNLIMIT" in raw:
        system = "LSF"
        run = re.search(r"Run time :\s+(\d+) sec", raw)
        if run:
            numbers["run_time_s"] = float(run.group(1))
            found.append(Fact("limit", f"the job ran {_hms(int(run.group(1)))} before LSF's run limit stopped it"))
    elif re.search(r"DeadlineExceeded|active longer than specified deadline", raw):
        system = "Kubernetes (activeDeadlineSeconds)"
    elif re.search(r"wall ?clock", raw, re.I):
        system = "the batch system (Moab/Torque or SGE)"
    caught = re.search(r"Received SIGTERM|Bypassing SIGTERM|Bypassing signal SIGTERM|got signal: 15|death signal", raw)
    stall = _stall(raw, v)
    cause = (f"{system} stopped the job because it reached its wall-clock time limit; nothing in the program failed. The scheduler signals the "
             "job (SIGTERM, or a warning signal if one was requested) and kills it after a short grace period, so whatever was not saved by then is lost"
             + (" — the log shows the program received that signal and kept going until it was killed" if caught else "") + ".")
    if stall:
        found.append(Fact("stall", stall))
        cause += (" The log also suggests the job had stopped making progress before the limit: a hang (often one rank stuck in a collective "
                  "while the others wait) burns the remaining time, so a longer limit would not help.")
    fixes = []
    if stall:
        fixes.append(remedy("distributed-hang#find-hang-before-more-time"))
    fixes += [
        remedy("job-time-limit#checkpoint-and-resume-sigterm-seen" if caught else "job-time-limit#checkpoint-and-resume"),
        remedy(_MORE_TIME.get(system, "job-time-limit#request-more-time-slurm")),
        remedy("job-time-limit#fit-work-to-limit"),
    ]
    return hit("scheduler.time_limit", "environment_error", "Job stopped at its time limit" + (" (after a stall)" if stall else ""), cause, fixes,
               _TIME_DOCS, found, 0.92, "scheduler time limit walltime checkpoint requeue",
               facts=Facts(numbers=numbers, names=tuple(x for x in (v.job, v.node) if x), flags=frozenset({"scheduler_verdict", "time_limit"} | ({"stalled"} if stall else set()))))


# The batch system's own way to ask for more time / more memory and to read the peak (Slurm's when none is recognised).
_MORE_TIME = {"PBS/Torque": "job-time-limit#request-more-time-pbs", "LSF": "job-time-limit#request-more-time-lsf",
              "Kubernetes (activeDeadlineSeconds)": "job-time-limit#request-more-time-kubernetes"}
_MORE_MEMORY = {"PBS/Torque": "job-memory-limit#request-more-memory-pbs", "LSF": "job-memory-limit#request-more-memory-lsf",
                "Kubernetes (the container's memory limit)": "job-memory-limit#request-more-memory-kubernetes"}
_PEAK_MEMORY = {"PBS/Torque": "job-memory-limit#measure-peak-memory-pbs", "LSF": "job-memory-limit#measure-peak-memory-lsf",
                "Kubernetes (the container's memory limit)": "job-memory-limit#measure-peak-memory-kubernetes"}


def _hms(seconds: int) -> str:
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}"


def _preempted(ctx: Context, raw: str, v: Verdict) -> RuleHit:
    found = _verdict_facts(v)
    requeue = v.reason == "requeued" or bool(re.search(r"requeue", raw, re.I))
    cause = ("The scheduler preempted the job: it took the resources back for higher-priority work (a preemptible partition or QOS, or spot/"
             "preemptible cloud capacity). Nothing in the program failed." + (" The job was put back in the queue and will restart from the "
             "beginning of its script, so it must be able to resume (and must not fail on outputs left by the interrupted run)." if requeue else
             " Unless the job is requeued, the work since the last checkpoint is lost."))
    fixes = [
        remedy("job-preemption#make-job-resumable"),
        remedy("job-preemption#save-on-preemption-signal"),
        remedy("job-preemption#run-where-not-preempted"),
    ]
    return hit("scheduler.preempted", "environment_error", "Job preempted" + (" and requeued" if requeue else ""), cause, fixes,
               ("job-preemption", "job-time-limit"), found, 0.88, "scheduler preemption requeue checkpoint",
               facts=Facts(names=tuple(x for x in (v.job, v.node) if x), flags=frozenset({"scheduler_verdict", "preempted"})))


def _cancelled(ctx: Context, raw: str, v: Verdict) -> RuleHit:
    found = _verdict_facts(v)
    other = _CANCEL_OTHER.search(raw)
    who = ""
    if other and other.group("uid"):
        who = f" by user id {other.group('uid')}"
    elif other and other.group("who"):
        who = f" at the request of {other.group('who')}"
    terminated = v.reason == "signal" or "Terminated" in v.line
    admin = bool(re.search(r"root@|TERM_ADMIN|by root", raw))
    cause = (f"The job was cancelled{who} and the scheduler gives no reason (no time limit, preemption or node failure): someone ran "
             "scancel/qdel/bkill on it — you, a workflow tool or script acting for you, or an administrator"
             + (" (here root, i.e. an administrator or the system)" if admin else "") + ". Nothing in the program failed"
             + (" at that point; the tasks were ended with SIGTERM" if terminated else "") + ".")
    fixes = [
        remedy("job-cancelled#find-who-cancelled"),
        remedy("job-cancelled#tools-that-cancel-for-you"),
        remedy("job-time-limit#resubmit-from-last-checkpoint"),
    ]
    return hit("scheduler.cancelled", "environment_error", "Job cancelled" + (" by an administrator" if admin else ""), cause, fixes,
               ("job-cancelled", "job-time-limit"), found, 0.8, "scheduler job cancelled scancel",
               facts=Facts(names=tuple(x for x in (v.job, v.node) if x), flags=frozenset({"scheduler_verdict", "cancelled"})))


@rule(
    "scheduler.node_failure",
    category="hardware_error",
    docs=("node-failure", "gpu-hardware-faults"),
    reads=JOB_LOG,
    priority=11,
    examples=(
        Example("corpus/scheduler/node_failure_step_cancelled_after_validation.txt", "scheduler.node_failure"),
        Example("corpus/scheduler/node_failure_interactive_session.txt", "scheduler.node_failure"),
        Example("corpus/scheduler/node_failure_salloc_worker.txt", "scheduler.node_failure"),
    ),
)
def node_failure(ctx: Context) -> RuleHit | None:
    """A node of the job went down (hardware, kernel or network): the scheduler ended the job."""
    raw = _raw(ctx)
    v = _verdict(raw)
    if v is None or v.reason != "node_failure":
        return None
    nodes = list(dict.fromkeys(m.group("node") or m.group("node2") for m in _NODE_FAIL.finditer(raw) if m.group("node") or m.group("node2")))
    found = _verdict_facts(v)
    if nodes:
        found.append(Fact("node", "failed node: " + ", ".join(nodes)))
    cause = ("A node the job was running on stopped responding to the scheduler (it crashed, rebooted, lost power or its network link), so the "
             "scheduler ended the job" + (f"; the failed node is {', '.join(nodes)}" if nodes else "") + ". This is a fault of the machine, not of "
             "the program: the same job usually runs on other nodes. Errors printed by the other ranks at that moment (lost NCCL connections, "
             "a dead peer) are consequences.")
    fixes = [
        remedy("node-failure#resubmit-excluding-node", node=nodes[0] if nodes else None),
        remedy("node-failure#report-node-to-admins"),
        remedy("node-failure#requeue-on-node-failure"),
    ]
    return hit("scheduler.node_failure", "hardware_error", "Node failure" + (f" ({nodes[0]})" if nodes else ""), cause, fixes,
               ("node-failure", "gpu-hardware-faults"), found, 0.85, "node failure slurm hardware requeue exclude",
               facts=Facts(names=tuple(nodes), flags=frozenset({"scheduler_verdict", "node_failure"})))


_MEM_DOCS = ("job-memory-limit", "cpu-oom")


@rule(
    "scheduler.memory_limit",
    category="cpu_oom",
    docs=_MEM_DOCS,
    reads=(*JOB_LOG, "MemoryError"),
    priority=18,
    examples=(
        Example("corpus/scheduler/memory_limit_slurm_oom_kill_bash_killed.txt", "scheduler.memory_limit"),
        Example("corpus/scheduler/memory_limit_slurm_oom_kill_srun_out_of_memory.txt", "scheduler.memory_limit"),
        Example("corpus/scheduler/memory_limit_slurm_oom_kill_new_wording.txt", "scheduler.memory_limit"),
        Example("corpus/scheduler/memory_limit_slurm_oom_kill_old_step_cgroup.txt", "scheduler.memory_limit"),
        Example("corpus/scheduler/memory_limit_lsf_memlimit.txt", "scheduler.memory_limit"),
        Example("corpus/scheduler/memory_limit_lsf_memlimit_resource_summary.txt", "scheduler.memory_limit"),
        Example("corpus/scheduler/memory_limit_pbs_mem_exceeded.txt", "scheduler.memory_limit"),
        Example("corpus/scheduler/memory_limit_pbs_mem_job_total.txt", "scheduler.memory_limit"),
        Example("corpus/scheduler/memory_limit_pbs_vmem_mpi.txt", "scheduler.memory_limit"),
        Example("corpus/scheduler/memory_limit_torque_memory_resource_aborted.txt", "scheduler.memory_limit"),
        Example("corpus/scheduler/memory_limit_k8s_oomkilled_pod.txt", "scheduler.memory_limit"),
    ),
)
def memory_limit(ctx: Context) -> RuleHit | None:
    """The job exceeded the memory it was given (cgroup / scheduler / container limit) and was killed for it."""
    raw = _raw(ctx)
    m = _MEM_LIMIT.search(raw)
    if not m or _CUDA_OOM_WORDS.search(raw):
        return None  # GPU memory is the CUDA rules' to explain
    found = [Fact("scheduler", _line_of(raw, m.start())[:300])]
    numbers: dict[str, float] = {}
    system = "Slurm's cgroup"
    used = limit = None
    events = re.search(r"Detected (\d+) oom[-_]kill event", raw, re.I)
    if events:
        numbers["oom_kill_events"] = float(events.group(1))
    slurm = re.search(r"exceeded (?:job |step )?((?:virtual )?memory) limit \((\d+) ?> ?(\d+)\)", raw)
    pbs = re.search(r"PBS: job killed: (p?v?mem)(?: job total)? (\d+)\s?([kmgt]?b)?\s+exceeded limit\s+(\d+)\s?([kmgt]?b)?", raw, re.I)
    kind = "memory"
    if slurm:
        # The units depend on the Slurm release (kilobytes in old ones, bytes now): report the numbers as printed, and their ratio.
        kind = slurm.group(1)
        numbers.update(used_reported=float(slurm.group(2)), limit_reported=float(slurm.group(3)))
        if int(slurm.group(3)):
            found.append(Fact("memory", f"{kind} used {slurm.group(2)} against a limit of {slurm.group(3)} (as Slurm reports them): "
                                        f"{int(slurm.group(2)) / int(slurm.group(3)):.0%} of the allowance"))
    elif pbs:
        system = "PBS/Torque"
        kind = {"vmem": "virtual memory", "pvmem": "per-process virtual memory", "pmem": "per-process memory"}.get(pbs.group(1).lower(), "memory")
        used = _batch_bytes(pbs.group(2), pbs.group(3))
        limit = _batch_bytes(pbs.group(4), pbs.group(5) or pbs.group(3))
    elif re.search(r"TERM_MEMLIMIT", raw):
        system = "LSF"
        peak = re.search(r"Max Memory :\s+([\d.]+) ([KMGT]?B)\b", raw)
        if peak:
            used = _batch_bytes(peak.group(1), peak.group(2))
    elif re.search(r"OOMKilled", raw):
        system = "Kubernetes (the container's memory limit)"
    elif re.search(r"Job exceeded a memory resource limit", raw):
        system = "PBS/Torque"
    if used:
        numbers["used_bytes"] = float(used)
    if limit:
        numbers["limit_bytes"] = float(limit)
    if used and limit:
        found.append(Fact("memory", f"{kind} used {fmt_bytes(used)} against a limit of {fmt_bytes(limit)}"))
    elif used:
        found.append(Fact("memory", f"peak {kind} {fmt_bytes(used)} when the limit was hit"))
    loader = bool(re.search(r"DataLoader|num_workers", raw))
    vmem = "virtual" in kind
    cause = (f"{system} memory limit killed the job: its processes together used more host RAM than the job was allowed"
             + (f" ({fmt_bytes(used)} against {fmt_bytes(limit)})" if used and limit else "") + ". This is the job's own allowance (what was "
             "requested, or the partition's default), not the machine's RAM, so the node can have memory free and the job is still killed. No "
             "Python traceback appears because the process is ended with SIGKILL.")
    if vmem:
        cause += (" The limit is on virtual memory, which PyTorch, CUDA and threaded libraries reserve far beyond what they use: the job can be "
                  "killed with little resident memory in use.")
    fixes = [
        remedy("job-memory-limit#request-more-memory-pbs-vmem" if system == "PBS/Torque" and vmem else
               _MORE_MEMORY.get(system, "job-memory-limit#request-more-memory-slurm")),
        remedy(_PEAK_MEMORY.get(system, "job-memory-limit#measure-peak-memory-slurm")),
        remedy("cpu-oom#reduce-host-memory-per-process"),
    ]
    if loader:
        fixes.insert(1, remedy("cpu-oom#count-dataloader-workers"))
    return hit("scheduler.memory_limit", "cpu_oom", "Job killed at its memory limit", cause, fixes, _MEM_DOCS, found, 0.9,
               "job memory limit cgroup oom_kill slurm mem", facts=Facts(numbers=numbers, flags=frozenset({"host_memory", "job_memory_limit"})))


def _batch_bytes(number: str, unit: str | None) -> int:
    """A size as batch systems print it: PBS "38427376kb", LSF "512 MB" (binary multiples; no unit means bytes)."""
    power = {"": 0, "b": 0, "kb": 1, "mb": 2, "gb": 3, "tb": 4}.get((unit or "").lower(), 0)
    return int(float(number) * 1024 ** power)


# --- native crashes ----------------------------------------------------------------------------------

_SEGV_DOCS = ("native-crash-segfault", "library-version-mismatch")


@rule(
    "scheduler.native_crash",
    category="unknown",
    docs=_SEGV_DOCS,
    reads=("any",),
    priority=NORMAL,  # after every rule that reads an exception: a Python error printed before the crash wins
    also=("environment_error", "dataloader_error", "hardware_error"),
    outcomes=("scheduler.segfault", "scheduler.segfault_at_import", "scheduler.bus_error", "scheduler.bus_error_mps", "scheduler.segfault_import_order",
              "scheduler.segfault_unstable_hardware"),
    examples=(
        Example("corpus/scheduler/segfault_fatal_python_error_midtraining.txt", "scheduler.segfault"),
        Example("corpus/scheduler/segfault_exit_139_in_forward.txt", "scheduler.segfault"),
        Example("corpus/scheduler/segfault_exit_139_face_alignment.txt", "scheduler.segfault"),
        Example("corpus/scheduler/mpirun_rank_segfault_signal_11.txt", "scheduler.segfault"),
        Example("corpus/scheduler/segfault_gc_after_epochs_main_process_fetch.txt", "scheduler.segfault"),
        Example("corpus/scheduler/segfault_import_torch_repl.txt", "scheduler.segfault_at_import"),
        Example("corpus/scheduler/segfault_import_torch_command.txt", "scheduler.segfault_at_import"),
        Example("corpus/scheduler/segfault_import_torch_cuda_call.txt", "scheduler.segfault_at_import"),
        Example("corpus/scheduler/bus_error_share_memory_workers.txt", "scheduler.bus_error"),
        Example("corpus/scheduler/bus_error_model_share_memory.txt", "scheduler.bus_error"),
        Example("corpus/scheduler/bus_error_docker_container_prose.txt", "scheduler.bus_error"),
        Example("corpus/scheduler/bus_error_mps_training_macos_beta.txt", "scheduler.bus_error_mps"),
        Example("corpus/scheduler/segfault_open3d_imported_before_torch.txt", "scheduler.segfault_import_order"),
        Example("corpus/scheduler/segfault_random_epochs_works_other_machines.txt", "scheduler.segfault_unstable_hardware"),
    ),
)
def native_crash(ctx: Context) -> RuleHit | None:
    """The process died in native code (SIGSEGV, SIGBUS) without a Python exception."""
    raw = _raw(ctx)
    segv, bus = _SEGV.search(raw), _BUS.search(raw)
    if not (segv or bus) or _DATALOADER_WORKER.search(raw):
        return None  # a DataLoader worker's crash is the data rules' to explain
    if _has_real_error(ctx, raw, ignore_crash=True):
        return None  # a Python exception printed before the crash is the failure to fix
    if segv and (not bus or segv.start() <= bus.start()):
        return _segfault(ctx, raw, segv)
    return _bus_error(ctx, raw, bus) if bus else None


def _faulthandler_frames(raw: str) -> list[tuple[str, str, str]]:
    """The innermost Python frames faulthandler printed for the crashing thread ("Current thread ... (most recent call first)")."""
    m = re.search(r"Current thread 0x[0-9a-f]+ \(most recent call first\):\n((?:\s+File \"[^\"]+\", line \d+ in \S+\n?)+)", raw)
    return re.findall(r"File \"([^\"]+)\", line (\d+) in (\S+)", m.group(1)) if m else []


def _segfault(ctx: Context, raw: str, m: re.Match[str]) -> RuleHit:
    found = [Fact("signal", _line_of(raw, m.start())[:200])]
    at_import = _crash_at_import(raw, m.start())
    mismatch = _MISMATCH.search(raw)
    frames = _faulthandler_frames(raw)
    if frames:
        f, line, fn = frames[0]
        found.append(Fact("location", f"innermost Python frame at the crash: {f.rsplit('/', 1)[-1]}:{line} in {fn}"))
    diagnose = [
        remedy("native-crash-segfault#python-stack-faulthandler"),
        remedy("native-crash-segfault#native-stack-gdb"),
    ]
    first = _native_import_before_torch(raw)
    if first and not mismatch:
        return _segfault_import_order(ctx, first, found, diagnose)
    hw_strong = bool(_HW_MEMORY.search(raw)) or bool(_HW_ELSEWHERE.search(raw) and _HW_RANDOM.search(raw))
    if hw_strong and not at_import and not mismatch:
        return _segfault_hardware(ctx, raw, found)
    if at_import or mismatch:
        cause = ("The interpreter crashed in native code " + ("while importing, " if at_import else "")
                 + "before any Python code of yours ran: a compiled library does not match the environment it is loaded into — a torch build "
                 "for another CUDA/driver or CPU, an extension (torch_scatter, mmcv, apex, a custom op) built against a different torch, or "
                 "two copies of a shared library (mixed pip and conda packages) loaded together.")
        if mismatch:
            found.append(Fact("evidence", _line_of(raw, mismatch.start())[:200]))
        fixes = [
            remedy("library-version-mismatch#reinstall-torch-and-extensions-together"),
            remedy("native-crash-segfault#find-crashing-import"),
            *diagnose,
        ]
        return hit("scheduler.segfault_at_import", "environment_error", "Segmentation fault " + ("at import" if at_import else "(binary mismatch)"),
                   cause, fixes, _SEGV_DOCS, found, 0.7, "segmentation fault import torch extension mismatch",
                   facts=Facts(flags=frozenset({"native_crash", "segfault"})))
    cause = ("The process was killed by a segmentation fault (SIGSEGV): code in a compiled library read memory it did not own. No Python "
             "exception is raised, so the text does not say which library; the usual culprits are a compiled extension built against a "
             "different torch, a torch build that does not match the CUDA driver, a bug in a C extension (data decoding, custom ops), or "
             "threads in native libraries.")
    fixes = [
        *diagnose,
        remedy("library-version-mismatch#reinstall-extensions-for-installed-torch"),
    ]
    if not re.search(r"_utils[/\\]fetch\.py", raw):
        # fetch.py in the crashing process's stack means the batches are already loaded in the main process.
        fixes.append(remedy("native-crash-segfault#segfault-without-dataloader-workers"))
    moving = _HW_RANDOM.search(raw)
    if moving:
        # A crash that moves around (after a varying time, in the garbage collector) is also what bad RAM looks like.
        cause += (" The text says it happens " + f"“{moving.group(0)}”" + ": a crash at varying points can also come from unstable hardware "
                  "(RAM errors, an overclocked or XMP/EXPO memory profile), worth ruling out if the native stack shows no single library.")
        fixes.append(remedy("gpu-hardware-faults#rule-out-unstable-memory"))
    return hit("scheduler.segfault", "unknown", "Segmentation fault (native crash)", cause, fixes, _SEGV_DOCS, found, 0.4,
               "segmentation fault native crash faulthandler gdb", facts=Facts(flags=frozenset({"native_crash", "segfault"})))


def _native_import_before_torch(raw: str) -> str | None:
    """The package with its own native libraries that the user's code imports before torch, if any."""
    first = _NATIVE_FIRST.search(raw)
    torch_import = _TORCH_IMPORT.search(raw)
    if not first or not torch_import or first.start() > torch_import.start():
        return None
    return first.group(1)


def _segfault_import_order(ctx: Context, package: str, found: list[Fact], diagnose: list[Fix]) -> RuleHit:
    """A segfault in code that imports a package bundling its own native libraries before torch."""
    found = [*found, Fact("import_order", f"`{package}` is imported before torch")]
    cause = (f"The process was killed by a segmentation fault, and the code imports `{package}` before torch. Packages like it ship their own "
             "copies of native libraries (CUDA runtime pieces, BLAS, OpenMP, protobuf, the C++ runtime); whichever is imported first decides "
             "which copy the process uses, and torch's kernels can then call into an incompatible one and crash. Changing the import order "
             "(import torch first) is the quick test.")
    fixes = [
        remedy("native-crash-segfault#import-torch-first", package=package),
        remedy("library-version-mismatch#same-native-libraries-as-torch", package=package),
        *diagnose,
    ]
    return hit("scheduler.segfault_import_order", "unknown", "Segmentation fault (native library clash from import order)", cause, fixes, _SEGV_DOCS,
               found, 0.5, "segmentation fault import order native library clash", facts=Facts(names=(package,), flags=frozenset({"native_crash", "segfault"})))


def _segfault_hardware(ctx: Context, raw: str, found: list[Fact]) -> RuleHit:
    """A segfault the text ties to the machine: works elsewhere and crashes at varying points, or memory settings named."""
    elsewhere, moving, memory = _HW_ELSEWHERE.search(raw), _HW_RANDOM.search(raw), _HW_MEMORY.search(raw)
    for cue in (memory, elsewhere, moving):
        if cue:
            found = [*found, Fact("description", f"your words: “{cue.group(0)}”")]
    story = [part for part, seen in (("at varying points", moving), ("while the same code works elsewhere", elsewhere),
                                     ("and the text names the machine's memory or its settings", memory)) if seen]
    cause = ("The process dies with segmentation faults " + " ".join(story) + ": that points at this "
             "machine's hardware rather than a library bug, most often unstable system memory (a failing RAM module, or an overclocked or "
             "XMP/EXPO memory profile), less often an unstable CPU overclock or power supply. Bit errors in RAM corrupt whatever happens to "
             "live there, so the crash moves around and other memory-heavy programs can fail too.")
    fixes = [
        remedy("gpu-hardware-faults#test-the-memory"),
        remedy("gpu-hardware-faults#stock-memory-cpu-settings"),
        remedy("gpu-hardware-faults#same-job-another-machine"),
    ]
    return hit("scheduler.segfault_unstable_hardware", "hardware_error", "Segmentation faults at varying points (unstable hardware)", cause, fixes,
               ("gpu-hardware-faults", "native-crash-segfault"), found, 0.6, "segmentation fault random hardware RAM memtest",
               facts=Facts(flags=frozenset({"native_crash", "segfault"})))


def _crash_at_import(raw: str, pos: int) -> bool:
    """The line just before the crash imports a module, or the text says the crash happens on import."""
    before = [ln for ln in raw[:pos].splitlines() if ln.strip() and not ln.strip().startswith("```")]
    if before and _IMPORT_LINE.search(before[-1]):
        return True
    return bool(_IMPORT_PROSE.search(raw))


def _bus_error(ctx: Context, raw: str, m: re.Match[str]) -> RuleHit:
    found = [Fact("signal", _line_of(raw, m.start())[:200])]
    if re.search(r"\bMPS\b|device\s*=\s*['\"]?mps\b|\.to\(\s*['\"]mps", raw) and not re.search(r"/dev/shm|\bshm\b|docker|container|--ipc", raw, re.I):
        # Apple's MPS device and no shared-memory setting in sight: the crash is in the MPS backend of this torch on this macOS.
        cause = ("The process died with a bus error while running on Apple's MPS device, with no shared-memory limit involved: the crash is in the "
                 "MPS backend of this PyTorch build on this macOS (typical of nightlies, early MPS releases and macOS betas).")
        fixes = [remedy("mps-macos-version-ops#upgrade-pytorch-with-macos"), remedy("mps-macos-version-ops#cpu-on-old-macos")]
        return hit("scheduler.bus_error_mps", "environment_error", "Bus error on the MPS device", cause, fixes, ("mps-macos-version-ops", "bus-error"),
                   found, 0.5, "mps bus error crash macos nightly", facts=Facts(flags=frozenset({"native_crash", "bus_error"})))
    context = _SHM_CONTEXT.search(raw)
    if context:
        found.append(Fact("context", f"shared memory context: “{_line_of(raw, context.start())[:160]}”"))
    cause = ("The process was killed by a bus error (SIGBUS): it touched a memory-mapped page that could not be backed. In PyTorch jobs that is "
             "almost always shared memory running out: tensors passed between processes (DataLoader workers, share_memory(), "
             "torch.multiprocessing) live in /dev/shm, which containers limit to 64 MB by default. A memory-mapped file that was truncated "
             "or lives on a failing filesystem is the other cause.")
    fixes = [
        remedy("bus-error#more-container-shared-memory"),
        remedy("dataloader-shared-memory#use-less-shared-memory"),
        remedy("dataloader-shared-memory#file-system-sharing-strategy"),
    ]
    return hit("scheduler.bus_error", "dataloader_error", "Bus error (shared memory exhausted)", cause, fixes, ("bus-error", "dataloader-shared-memory"),
               found, 0.6 if context else 0.5, "bus error shared memory shm docker", facts=Facts(flags=frozenset({"native_crash", "bus_error"})))


# --- the launcher's summary --------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskEnd:
    """One line of the launcher's summary: which tasks ended how."""

    host: str
    tasks: str
    how: str  # "exit" | "Killed" | "Terminated" | "Aborted" | ...
    code: int | None
    line: str
    pos: int


def _task_ends(raw: str) -> list[TaskEnd]:
    ends = []
    for m in _SRUN_TASK.finditer(raw):
        code = int(m.group("code")) if m.group("code") else None
        ends.append(TaskEnd(m.group("host"), m.group("tasks").strip(), "exit" if code is not None else m.group("how"), code, _line_of(raw, m.start()), m.start()))
    for m in _MPI_TASK.finditer(raw):
        ends.append(TaskEnd(m.group("host"), m.group("tasks"), m.group("name"), 128 + int(m.group("sig")), _line_of(raw, m.start()), m.start()))
    if not ends:
        for m in _LSF_EXIT.finditer(raw):
            ends.append(TaskEnd("", "", "exit", int(m.group("code")), _line_of(raw, m.start()), m.start()))
    return sorted(ends, key=lambda e: e.pos)


def _first_task_failure(raw: str, before: int | None = None) -> TaskEnd | None:
    """The first task that ended abnormally on its own (not a task stopped by SIGTERM/SIGKILL after another failed)."""
    for e in _task_ends(raw):
        if before is not None and e.pos > before:
            break
        if e.how == "exit" and e.code:
            return e
    return None


_EXIT_DOCS = ("launcher-exit-codes", "debugging-workflow")


@rule(
    "scheduler.task_exit",
    category="python_error",
    docs=_EXIT_DOCS,
    reads=("any",),
    priority=NORMAL + 1,
    also=("cpu_oom", "environment_error", "unknown"),
    outcomes=("scheduler.task_exit", "scheduler.task_killed"),
    examples=(
        Example("corpus/scheduler/srun_tasks_exit_code_1.txt", "scheduler.task_exit"),
        Example("corpus/scheduler/srun_task_exit_then_step_cancelled.txt", "scheduler.task_exit"),
        Example("corpus/scheduler/srun_task_killed_interactive.txt", "scheduler.task_killed"),
        Example("corpus/scheduler/mpirun_rank_killed_signal_9.txt", "scheduler.task_killed"),
    ),
)
def task_exit(ctx: Context) -> RuleHit | None:
    """Only the launcher's summary of how the tasks ended (srun, mpirun, LSF): say what each code means and where the real error is."""
    raw = _raw(ctx)
    ends = _task_ends(raw)
    if not ends or _has_real_error(ctx, raw):
        return None
    first = _first_task_failure(raw) or ends[0]
    later = [e for e in ends if e.pos > first.pos]
    found = [Fact("launcher", first.line[:200])]
    if later:
        found.append(Fact("launcher", f"{len(later)} later line(s) report tasks stopped after it ({', '.join(sorted({e.how if e.how != 'exit' else f'exit {e.code}' for e in later}))})"))
    who = f"task {first.tasks}" if first.tasks and re.fullmatch(r"\d+", first.tasks) else (f"tasks {first.tasks}" if first.tasks else "the job")
    where = f" on {first.host}" if first.host else ""
    facts = Facts(numbers={"exit_code": float(first.code)} if first.code is not None else {}, names=tuple(x for x in (first.host, first.tasks) if x),
                  flags=frozenset({"launcher_summary"}))
    if first.how == "Killed" or first.code in (137, 9) or (first.how not in ("exit", "Terminated") and "Killed" in first.how):
        cause = (f"The launcher reports that {who}{where} was killed with SIGKILL and printed no error of its own. Nothing else in the text says "
                 "who sent it.")
        conjecture = ("A SIGKILL that nobody sent by hand is most often the out-of-memory killer: the job exceeded its memory allowance (or the "
                      "node's RAM). Check the job's accounting before anything else.")
        fixes = [
            remedy("job-memory-limit#check-whether-memory-killed-task"),
            remedy("cpu-oom#request-more-or-use-less-memory"),
            remedy("launcher-exit-codes#look-for-first-failure"),
        ]
        return hit("scheduler.task_killed", "cpu_oom", f"{who.capitalize()} killed (SIGKILL)", cause, fixes, ("launcher-exit-codes", "job-memory-limit", "cpu-oom"),
                   found, 0.45, "srun task killed sigkill oom", facts=facts, conjecture=conjecture)
    code = first.code if first.code is not None else 0
    category = "python_error"
    if first.how == "Terminated":
        category = "environment_error"
        meaning = ("was stopped with SIGTERM: the scheduler or a person ended it (time limit, cancellation, preemption), and the line that says "
                   "which is not in the text")
    elif code == 1:
        meaning = ("exited with status 1, which is what Python returns for an uncaught exception (or sys.exit(1)). The traceback itself is in "
                   "that task's own output, which is not in the text")
    elif code == 2:
        meaning = ("exited with status 2: Python's status for a command-line usage error (argparse) or a script path it cannot open. The message "
                   "is the first lines of that task's output")
    elif code in (126, 127):
        category = "environment_error"
        meaning = (f"exited with status {code}: the command could not be " + ("executed (not executable or permission denied)" if code == 126 else
                   "found (not installed in the job's environment, or a module/conda environment not loaded in the batch script)"))
    elif code > 128 or first.how not in ("exit", "Terminated"):
        category = "unknown"
        signal_no = code - 128 if code > 128 else None
        meaning = (f"ended from signal {signal_no} (exit status {code} = 128 + signal number)" if signal_no else f"ended with {first.how}")
        if signal_no == 6 or first.how == "Aborted":
            meaning += ": native code called abort(), typically an uncaught C++ exception or a failed assertion, whose message is printed just before"
    else:
        meaning = f"exited with status {code}, which the program chose; its own output says why"
    v = _verdict(raw)
    after = v if v is not None and v.pos > first.pos and v.reason in ("time_limit", "cancelled", "signal", "task_failure") else None
    if after:
        found.append(Fact("scheduler", f"afterwards: {after.line[:200]}"))
    cause = (f"The launcher only summarises that {who}{where} {meaning}."
             + (" The other tasks were stopped afterwards because one failed: they are not separate problems." if later else "")
             + (" The scheduler's later verdict is a consequence too: the remaining tasks waited for the failed one"
                + (" until the time limit." if after.reason == "time_limit" else " until the step was torn down.") if after else ""))
    fixes = [
        remedy("launcher-exit-codes#read-failing-task-output"),
        remedy("debugging-workflow#record-every-rank-traceback"),
    ]
    if category == "environment_error":
        fixes.insert(0, remedy("launcher-exit-codes#environment-in-batch-script"))
    title = f"{who.capitalize()} exited with code {code}" if first.how == "exit" else f"{who.capitalize()} {first.how.lower()}"
    return hit("scheduler.task_exit", category, title, cause, fixes, _EXIT_DOCS, found, {"python_error": 0.4, "environment_error": 0.55}.get(category, 0.35),
               "srun task exited with exit code", facts=facts)
