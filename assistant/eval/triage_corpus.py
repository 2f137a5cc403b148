"""Generate a realistic triage corpus with ground truth (issue 9): :func:`generate`.

``generate(out_dir)`` writes

- ``out_dir/logs/``: what ``torchhelp triage`` reads, one entry per job (a directory, or a loose
  log file whose job id is its name up to the first dot);
- ``out_dir/truth.jsonl``: one line per job, sorted by job id: ``{"job_id", "status", "category",
  "group", "first_failing_rank", "gpu_hours", "trap"}``;
- ``out_dir/manifest.jsonl``: what the generator did per job (source text, layout, GPUs, start and
  end), for debugging a miss; triage never reads it.

Every failure text is real: the project's captures (``eval/captured/{cpu,cuda,multi_gpu}``) and the
real-report texts of ``eval/corpus/`` (labelled through the rule examples that declare them; the
frozen test split is never read). What surrounds them (scheduler preamble, logger lines, progress
bars, launcher summaries, secondary errors on other ranks, scheduler verdicts) follows the formats
that SLURM, torchrun, ``mp.spawn``, NCCL and Python print; the few program texts that are not
failures (a caught and retried ``ConnectionError``, an ``Exception ignored in`` at shutdown, a
faulthandler dump, real PyTorch warnings) were captured here with the snippets named beside them.
``eval/triage/README.md`` says what the corpus holds and how truth is defined.

The output is a pure function of the repository's texts and ``seed``: the same seed gives the same
bytes.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

# ---------------------------------------------------------------------------------------------
# Traps: every job carries exactly one label saying what makes it hard. Weights are shares of
# the corpus (about 29% succeeded); every trap gets at least one job.
# ---------------------------------------------------------------------------------------------

SUCCEEDED_TRAPS: tuple[tuple[str, int], ...] = (
    ("ok_clean", 34),  # a clean run, any layout
    ("ok_multirank", 10),  # torchrun run with scary-looking [rankN]: warnings that ends well
    ("ok_caught_retry", 10),  # a logged ConnectionRefusedError traceback, then more training
    ("ok_exception_ignored", 8),  # "Exception ignored in: <function ...__del__>" at shutdown
    ("ok_scary_warnings", 12),  # FutureWarning/UserWarning, non-finite grad norm skips, NCCL WARN
    ("ok_metric_names", 8),  # "val error 0.12", "error_rate", "num_errors"
    ("ok_nonutf8", 5),  # binary junk and non-UTF-8 bytes in a clean log
    ("truncated_before", 8),  # cut before any sign of failure: indistinguishable from a good run
    ("attempts_final_ok", 6),  # attempt 0 failed, the final attempt finished
)
FAILED_TRAPS: tuple[tuple[str, int], ...] = (
    ("single_exception", 34),  # slurm-<id>.out: preamble, progress, a real traceback at the end
    ("split_streams", 8),  # stdout.log / stderr.log (or .out/.err): the traceback is not in the last file
    ("loose_file", 14),  # job-0412.log, 4412873.out (+ .err) directly in logs/
    ("gzipped", 10),  # *.log.gz, <id>.out.gz
    ("nonutf8_junk", 6),  # junk bytes inside a failed log
    ("big_noise", 2),  # ~big_noise_mb MB of progress noise, then the failure
    ("other_location", 10),  # a popular message raised at another place in the user's code
    ("varied_values", 10),  # a popular root cause with other sizes, paths, pids, hosts
    ("torchrun_cascade", 14),  # [rankN]: interleaved, one rank raises, the others get SIGTERM
    ("torchrun_no_root_cause", 8),  # the same without torchrun's summary: order and timestamps tell
    ("torchrun_old_format", 8),  # [defaultN]: prefixes, ERROR:torch.distributed.elastic... lines
    ("multinode_watchdog", 6),  # the other node's ranks time out in NCCL and print their own summary
    ("remote_error_cascade", 6),  # other ranks raise DistBackendError tracebacks (ncclRemoteError)
    ("sticky_cuda", 6),  # CUDA error on one rank, its watchdog re-reports it (sticky)
    ("srun_prefix", 8),  # srun -l "N: " prefixes, srun task exit lines
    ("per_rank_files", 12),  # rank_<N>.log per rank (+ launcher log)
    ("hardware_ecc", 5),  # uncorrectable ECC error on one rank
    ("hardware_bus", 4),  # a GPU fell off the bus on one rank (NVRM lines in the epilogue)
    ("pure_hang", 10),  # every rank times out on the same collective
    ("all_ranks_identical", 8),  # every rank raises the same ImportError / KeyError
    ("mp_spawn_raised", 6),  # mp.spawn ProcessRaisedException around a child's traceback
    ("mp_spawn_exited", 3),  # mp.spawn ProcessExitedException (signal / exit code)
    ("real_torchrun_capture", 6),  # a whole real torchrun log from the H200 captures
    ("sched_time_limit", 5),
    ("sched_preempted", 2),
    ("sched_node_failure", 3),
    ("sched_oom_kill", 4),
    ("sched_killed", 3),
    ("sched_segfault", 3),
    ("sched_bus_error", 2),
    ("sched_exit_code", 3),
    ("truncated_inside", 5),  # cut inside the traceback's frames
    ("truncated_after", 5),  # cut right after the exception line
    ("attempts", 8),  # attempt_<K>/ or stdout.log.1 + stdout.log: the final attempt decides
)
TRAPS: tuple[str, ...] = tuple(t for t, _ in SUCCEEDED_TRAPS + FAILED_TRAPS)
_SUCCEEDED = {t for t, _ in SUCCEEDED_TRAPS}

# Scheduler and infrastructure verdicts without a traceback: the category a platform team wants to
# see (README, "Truth"). Group = the verdict's own template.
SCHEDULER_CATEGORY = {
    "sched_time_limit": "environment_error",  # the job's resource request (time, checkpointing) is what must change
    "sched_preempted": "environment_error",  # the cluster's policy, not the code: requeue / checkpoint
    "sched_node_failure": "hardware_error",
    "sched_oom_kill": "cpu_oom",
    "sched_killed": "cpu_oom",  # a bare "Killed" is the kernel OOM killer's SIGKILL
    "sched_segfault": "unknown",
    "sched_bus_error": "dataloader_error",  # the engine's choice: a bare bus error is almost always a too-small /dev/shm
    "sched_exit_code": "unknown",
}

# mp.spawn texts of eval/corpus whose rule answers with several categories: the outcome's category.
_SPAWN_EXITED = {
    "corpus/multiprocessing/spawn_child_sigkill.txt": ("cpu_oom", 1),
    "corpus/multiprocessing/spawn_child_exit_code.txt": ("multiprocessing_error", 1),
    "corpus/multiprocessing/spawn_child_sigsegv.txt": ("multiprocessing_error", 0),
}

# Whole torchrun logs captured on the H200: the first failing rank, read from each log by hand.
# Both ranks raising the same error (after masking) means no first rank; the pipeline case is one
# process; in the uneven-shards hang only rank 0 timed out (rank 1 had finished its epoch).
_TORCHRUN_CAPTURES = {
    "captured/multi_gpu/ddp-model-mismatch-per-rank-vocab": 1,
    "captured/multi_gpu/ddp-unused-parameters-aux-head": None,
    "captured/multi_gpu/nccl-allreduce-bincount-shape-mismatch": None,
    "captured/multi_gpu/nccl-duplicate-gpu-no-set-device": None,
    "captured/multi_gpu/nccl-timeout-uneven-shards-ddp": 0,
}

# ---------------------------------------------------------------------------------------------
# Non-failure program texts captured here (python 3.11.7, torch 2.13.0 CPU).
# ---------------------------------------------------------------------------------------------

# captured: a logger.exception() around socket.create_connection(("127.0.0.1", 9)) in a retry loop
_CAUGHT_CONNECTION_ERROR = """\
Traceback (most recent call last):
  File "{root}/{script}", line 214, in <module>
    push_metrics("{host}", 9)
  File "{root}/{script}", line 206, in push_metrics
    with socket.create_connection((host, port), timeout=2) as s:
         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/lib/python3.11/socket.py", line 851, in create_connection
    raise exceptions[0]
  File "/usr/lib/python3.11/socket.py", line 836, in create_connection
    sock.connect(sa)
ConnectionRefusedError: [Errno 111] Connection refused"""

# captured: objects whose __del__ raises at interpreter shutdown
_EXCEPTION_IGNORED = (
    """\
Exception ignored in: <function AsyncCheckpointer.__del__ at 0x7f9d82658cc0>
Traceback (most recent call last):
  File "{root}/{script}", line 61, in __del__
  File "/usr/lib/python3.11/threading.py", line 1114, in join
RuntimeError: cannot join thread before it is started""",
    """\
Exception ignored in: <function Writer.__del__ at 0x7f607d637060>
Traceback (most recent call last):
  File "{root}/{script}", line 40, in __del__
ValueError: I/O operation on closed file.""",
)

# captured: python -X faulthandler, ctypes.string_at(0) inside the batch decoder
_FAULTHANDLER = """\
Fatal Python error: Segmentation fault

Current thread 0x00007fc0245e6b80 (most recent call first):
  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at
  File "{root}/{script}", line 5 in decode_batch
  File "{root}/{script}", line 9 in main
  File "{root}/{script}", line 11 in <module>"""

# captured: warnings torch 2.13.0 prints (GradScaler alias, scheduler order, read-only numpy array)
_TORCH_WARNINGS = (
    """\
{root}/{script}:88: FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated. Please use `torch.amp.GradScaler('cuda', args...)` instead.
  scaler = torch.cuda.amp.GradScaler(enabled=args.amp)""",
    """\
{env}/torch/optim/lr_scheduler.py:224: UserWarning: Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and later, you should call them in the opposite order: `optimizer.step()` before `lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first value of the learning rate schedule. See more details at https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate
  warnings.warn(""",
    """\
{root}/data.py:57: UserWarning: The given NumPy array is not writable, and PyTorch does not support non-writable tensors. This means writing to this tensor will result in undefined behavior. You may want to copy the array to protect its data or make it writable before converting it to a tensor. This type of warning will be suppressed for the rest of this program. (Triggered internally at /pytorch/torch/csrc/utils/tensor_numpy.cpp:213.)
  return torch.from_numpy(arr)""",
)

_GPU_MODELS = ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA H200", "NVIDIA L40S", "Tesla V100-SXM2-32GB")
_USERS = ("alice", "bwong", "chen", "dpatel", "emartin", "fkhan", "gsato", "hlee")
_PROJECTS = ("lm-pretrain", "vision-zoo", "asr-conformer", "detr-exp", "diffusion", "recsys", "seg3d", "rl-agents")
_ROOTS = ("/home/{user}/{proj}", "/scratch/{user}/{proj}", "/workspace/{proj}", "/mnt/shared/{user}/code/{proj}")
_ENVS = (
    "/opt/conda/lib/python3.12/site-packages",
    "/home/{user}/.venv/lib/python3.12/site-packages",
    "/opt/torch/.venv/lib/python3.12/site-packages",
    "/usr/local/lib/python3.12/dist-packages",
)
# A source raised at another place in the user's code: another script, other line numbers.
_LOCATIONS = (("train.py", 0), ("finetune.py", 113), ("pretrain.py", 57))
_HOST_STEMS = ("gpu-a", "node", "dgx", "hgx-b", "cn")

# ---------------------------------------------------------------------------------------------
# Timestamps
# ---------------------------------------------------------------------------------------------

_ISO_TS = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})([ T_])(\d{2}):(\d{2}):(\d{2})(?:([.,])(\d{1,9}))?")
_GLOG_TS = re.compile(r"(?<![\w/])([IWEF])(\d{3,4}) (\d{2}):(\d{2}):(\d{2})\.(\d{6,9})")
_DATE_TS = re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (?:UTC )?(\d{4})")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _fmt(dt: datetime, style: str, level: str = "I") -> str:
    ms = dt.microsecond // 1000
    if style == "py":  # logging's default asctime
        return f"{dt:%Y-%m-%d %H:%M:%S},{ms:03d}"
    if style == "sec":
        return f"{dt:%Y-%m-%d %H:%M:%S}"
    if style == "iso":
        return f"{dt:%Y-%m-%dT%H:%M:%S}.{ms:03d}Z"
    if style == "loguru":
        return f"{dt:%Y-%m-%d %H:%M:%S}.{ms:03d}"
    if style == "slurm":
        return f"{dt:%Y-%m-%dT%H:%M:%S}"
    if style == "rc":  # torchrun's summary "time" field
        return f"{dt:%Y-%m-%d_%H:%M:%S}"
    if style == "date":  # date(1)
        return f"{dt:%a %b} {dt.day:2d} {dt:%H:%M:%S} UTC {dt:%Y}"
    if style == "glog_py":  # torch's Python-side glog-style prefix (torchrun)
        return f"{level}{dt:%m%d %H:%M:%S}.{dt.microsecond:06d}"
    if style == "glog_c":  # c10 logging in C++ (month not padded, nanoseconds)
        return f"{level}{dt.month}{dt.day:02d} {dt:%H:%M:%S}.{dt.microsecond:06d}{(dt.microsecond * 7) % 1000:03d}"
    if style == "mid":  # torchrun 2.1-2.3 "[%Y-%m-%d %H:%M:%S,mmm]"
        return f"[{dt:%Y-%m-%d %H:%M:%S},{ms:03d}]"
    raise ValueError(style)


class _Clock:
    """The job's wall clock; every timestamp written is recorded so truth can be computed."""

    def __init__(self, start: datetime) -> None:
        self.now = start
        self.stamps: list[datetime] = []

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now

    def stamp(self, style: str, level: str = "I", at: datetime | None = None) -> str:
        dt = at or self.now
        self.stamps.append(dt)
        return _fmt(dt, style, level)


def _parse_stamps(text: str, year: int) -> list[tuple[int, int, datetime, str]]:
    """(start, end, time, style) of every timestamp of a known format in ``text``."""
    found: list[tuple[int, int, datetime, str]] = []
    for m in _ISO_TS.finditer(text):
        y, mo, d, sep, h, mi, s, fsep, frac = m.groups()
        us = int((frac or "0")[:6].ljust(6, "0"))
        try:
            dt = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), us)
        except ValueError:
            continue
        found.append((m.start(), m.end(), dt, f"iso:{sep}:{fsep or ''}:{len(frac or '')}"))
    for m in _GLOG_TS.finditer(text):
        lvl, md, h, mi, s, frac = m.groups()
        month, day = int(md[:-2]), int(md[-2:])
        try:
            dt = datetime(year, month, day, int(h), int(mi), int(s), int(frac[:6]))
        except ValueError:
            continue
        padded = len(md) == 4 and md.startswith("0")
        found.append((m.start(), m.end(), dt, f"glog:{lvl}:{'p' if padded or len(frac) == 6 else 'c'}:{len(frac)}"))
    for m in _DATE_TS.finditer(text):
        mon, day, h, mi, sec, y = m.groups()
        try:
            dt = datetime(int(y), _MONTHS.index(mon) + 1, int(day), int(h), int(mi), int(sec))
        except ValueError:
            continue
        found.append((m.start(), m.end(), dt, "date:::0"))
    return sorted(found)


def _format_like(dt: datetime, style: str) -> str:
    kind, a, b, n = style.split(":")
    if kind == "date":
        return _fmt(dt, "date")
    if kind == "iso":
        base = f"{dt:%Y-%m-%d}{a}{dt:%H:%M:%S}"
        return base + (f"{b}{dt.microsecond:06d}"[: int(n) + 1] if b else "")
    frac = f"{dt.microsecond:06d}".ljust(int(n), "0")[: int(n)]
    md = f"{dt:%m%d}" if b == "p" else f"{dt.month}{dt.day:02d}"
    return f"{a}{md} {dt:%H:%M:%S}.{frac}"


def _retime(text: str, clock: _Clock) -> str:
    """Shift the timestamps of a real text so its first one is the clock's now; records them."""
    own = _ISO_TS.search(text)  # glog stamps carry no year: take the text's own, else the job's
    stamps = _parse_stamps(text, int(own.group(1)) if own else clock.now.year)
    if not stamps:
        return text
    first = min(s[2] for s in stamps)
    out: list[str] = []
    pos = 0
    last = clock.now
    for start, end, dt, style in stamps:
        if start < pos:
            continue
        new = clock.now + (dt - first)
        clock.stamps.append(new)
        last = max(last, new)
        out.append(text[pos:start])
        out.append(_format_like(new, style))
        pos = end
    out.append(text[pos:])
    clock.now = last
    return "".join(out)


def has_timestamps(text: str) -> bool:
    """Whether ``text`` holds a timestamp of a format the generator writes or shifts."""
    return bool(_ISO_TS.search(text) or _GLOG_TS.search(text) or _DATE_TS.search(text))


# ---------------------------------------------------------------------------------------------
# Real failure texts
# ---------------------------------------------------------------------------------------------

_ERROR_LINE = re.compile(r"^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Interrupt)\b:?", re.M)
# An exception line "Name: message" (or a bare "MemoryError"), optionally behind a rank prefix.
_CLEAR_ERROR = re.compile(r"^(?:\[\w+\]: ?)*\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)(?::\s|\s*$)", re.M)
_STRAY_TIME = re.compile(r"(?<![\d-])\d{2}-\d{2} \d{2}:\d{2}:\d{2}\b")
_RANK_PREFIX = re.compile(r"^(?:\S+ )?(?:\[default\d+\]:)?\[rank\d+\]: ?")
_WRAPPED = ("ChildFailedError", "ProcessRaisedException", "ProcessExitedException", "Root Cause", "│")
_CLEAR_FAMILY = {
    "amp": "amp_error", "compile": "compile_error", "data": "dataloader_error", "dtypes": "dtype_mismatch",
    "env": "environment_error", "indexing": "index_error", "multiprocessing": "multiprocessing_error",
    "python": "python_error", "shapes": "shape_mismatch",
}
_CASE_PATH = re.compile(r"/tmp/torchhelp-case-\w+/job/repro\.py")
_SITE_PACKAGES = re.compile(r"(?:/opt/torch/\.venv|/work/venv)/lib/python3\.1\d/site-packages")
_USER_FRAME = re.compile(r'(File "\{SCRIPT\}", line )(\d+)')


@dataclass(frozen=True)
class Source:
    """A real failure text and its label."""

    id: str  # captured/<device>/<slug> or corpus/<family>/<file>
    text: str  # rank prefixes removed; ends without a newline
    category: str
    kind: str  # plain | torchrun | spawn_exited
    relocatable: bool  # its user frames can be moved to another script (captures)
    frames: int  # Python frame lines ('  File "...", line N, in f')
    timestamps: bool

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.text


def _frames(text: str) -> int:
    return len(re.findall(r'^\s*File "[^"]+", line \d+', text, re.M))


def _clean_capture(text: str) -> str:
    # The capture harness's own probe module warned in a few runs; a real job never prints it.
    lines = text.splitlines()
    out: list[str] = []
    skip = False
    for line in lines:
        if "/work/main/assistant/" in line:
            skip = True
            continue
        if skip and line.startswith("  "):
            skip = False
            continue
        skip = False
        out.append(line)
    return "\n".join(out).strip("\n")


def _strip_rank_prefixes(text: str) -> str:
    lines = text.splitlines()
    prefixed = sum(1 for line in lines if _RANK_PREFIX.match(line))
    if prefixed and prefixed >= len([line for line in lines if line.strip()]) // 2:
        lines = [_RANK_PREFIX.sub("", line) for line in lines]
    return "\n".join(lines)


def load_sources(root: Path) -> list[Source]:
    """Every real failure text the corpus may use, sorted by id."""
    from assistant.eval.examples import strip_origin

    sources: list[Source] = []
    for path in sorted((root / "eval" / "captured").glob("*/*.json")):
        device = path.parent.name
        sid = f"captured/{device}/{path.stem}"
        data = json.loads(path.read_text(encoding="utf-8"))
        text = _clean_capture(data.get("stderr") or "")
        if not text.strip() or data.get("category") not in _categories():
            continue
        command = " ".join(data.get("command") or [])
        kind = "torchrun" if "torch.distributed.run" in command or "torchrun" in command else "plain"
        if kind == "torchrun" and sid not in _TORCHRUN_CAPTURES:
            continue
        sources.append(Source(sid, text, data["category"], kind, bool(_CASE_PATH.search(text)), _frames(text), has_timestamps(text)))

    labels = _corpus_labels()
    for path in sorted((root / "eval" / "corpus").rglob("*.txt")):
        rel = path.relative_to(root / "eval" / "corpus").as_posix()
        sid = f"corpus/{rel}"
        family = rel.split("/", 1)[0]
        text = strip_origin(path.read_text(encoding="utf-8", errors="replace")).strip("\n")
        if sid in _SPAWN_EXITED:
            sources.append(Source(sid, text, _SPAWN_EXITED[sid][0], "spawn_exited", False, _frames(text), has_timestamps(text)))
            continue
        category = labels[sid] if sid in labels else _CLEAR_FAMILY.get(family)
        tb = "Traceback (most recent call last)" in text
        if category is None or family == "symptoms" and not tb:
            continue
        if not (tb or _CLEAR_ERROR.search(text)):
            continue
        if _STRAY_TIME.search(text):
            continue  # a timestamp without a year in a format we do not shift (vLLM's "ERROR 05-30 22:22:26"): truth hours would lie
        if any(w in text for w in _WRAPPED):
            continue
        text = _strip_rank_prefixes(text)
        if _prose_like(text):
            continue
        sources.append(Source(sid, text, category, "plain", False, _frames(text), has_timestamps(text)))
    return sources


_PROSE_START = re.compile(r"^\s*(?:Hi\b|Hello\b|Thanks?\b|I |I'm |I've |When I |Do you |Does anyone |Please |Any idea|Here is|This is )")


def _prose_like(text: str) -> bool:
    """A pasted report with the reporter's own words in it, not only the program's output."""
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        if re.search(r"[\u3000-\u30ff\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef]", line) or _PROSE_START.match(line):
            return True
        if line.rstrip().endswith("?") and not re.search(r"[(\[=]", line):
            return True
        if len(line.split()) >= 12 and not re.search(r"[:()\[\]=/'\"`<>]", line):
            return True
        if line.lstrip().startswith(("$ ", "```", ">>>")):
            return True
    return False


def _categories() -> set[str]:
    from assistant.types import CATEGORIES

    return set(CATEGORIES)


def _corpus_labels() -> dict[str, str | None]:
    """corpus/<path> -> category of the rule declaring it as an example (None: that rule has several categories)."""
    from assistant.rules.registry import all_rules

    labels: dict[str, str | None] = {}
    for spec in all_rules():
        for ex in spec.examples:
            if ex.source.startswith("corpus/"):
                # a rule answering several categories does not declare which one this outcome has
                labels.setdefault(ex.source, spec.category if len(spec.categories) == 1 else None)
    return labels


# ---------------------------------------------------------------------------------------------
# Per-job context and line buffer
# ---------------------------------------------------------------------------------------------


@dataclass
class _Line:
    text: str
    stream: str = "out"  # out | err
    rank: int | None = None
    prefixed: bool = True  # torchrun/srun put their rank prefix on it


@dataclass
class _Ctx:
    rng: random.Random
    job_id: str
    slurm_id: str
    clock: _Clock
    user: str
    proj: str
    root: str
    env: str
    python: str
    hosts: list[str]
    logfmt: str  # py | sec | iso | loguru | plain
    ansi: bool
    flavor: str  # lm | vision | generic
    lines: list[_Line] = field(default_factory=list)
    gpus: int | None = None
    notes: list[str] = field(default_factory=list)
    style: str = "none"  # rank prefix style when rendered into one file
    gpn: int = 1  # GPUs (ranks) per node
    per_rank: bool = False  # render as rank_<N>.log files
    world_line: str = ""  # "world_size=N" logger line, written once the workers run
    total_steps: int = 10000

    @property
    def host(self) -> str:
        return self.hosts[0]

    def add(self, text: str, *, stream: str = "out", rank: int | None = None, prefixed: bool = True) -> None:
        for line in text.split("\n"):
            self.lines.append(_Line(line, stream, rank, prefixed))

    def log(self, msg: str, *, level: str = "INFO", rank: int | None = None, stream: str | None = None, logger: str = "train") -> None:
        """One logger line in this job's format, stamped now (to stderr, where logging and loguru write; print() goes to stdout)."""
        fmt = self.logfmt
        stream = stream or ("out" if fmt == "plain" else "err")
        lvl = level
        if self.ansi:
            color = {"INFO": "32", "WARNING": "33", "ERROR": "31"}.get(level, "36")
            lvl = f"\x1b[{color}m{level}\x1b[0m"
        if fmt == "plain":
            line = msg
        elif fmt == "py":
            line = f"{self.clock.stamp('py')} {lvl} {logger}: {msg}"
        elif fmt == "sec":
            line = f"[{self.clock.stamp('sec')}] {lvl} {msg}"
        elif fmt == "iso":
            line = f"{self.clock.stamp('iso')} {lvl} [{logger}] {msg}"
        else:
            ts = self.clock.stamp("loguru")
            if self.ansi:
                ts = f"\x1b[32m{ts}\x1b[0m"
            line = f"{ts} | {lvl:<8} | {logger}:main:{self.rng.randint(40, 400)} - {msg}"
        self.add(line, stream=stream, rank=rank)

    def pid(self) -> int:
        return self.rng.randint(1200, 4_000_000)


def _rand_token(rng: random.Random, n: int, alphabet: str = string.ascii_lowercase + string.digits) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _new_ctx(rng: random.Random, job_id: str, slurm_id: str, start: datetime, *, nnodes: int = 1, logfmt: str | None = None) -> _Ctx:
    user = rng.choice(_USERS)
    proj = rng.choice(_PROJECTS)
    stem = rng.choice(_HOST_STEMS)
    base = rng.randint(1, 180)
    hosts = [f"{stem}{base + i:03d}" for i in range(nnodes)]
    env = rng.choice(_ENVS).format(user=user)
    python = env.split("/lib/")[0] + "/bin/python3" if "/lib/" in env else "/usr/bin/python3"
    fmt = logfmt or rng.choice(("py", "py", "sec", "iso", "loguru"))
    return _Ctx(
        total_steps=rng.choice((2000, 5000, 10000, 50000, 200000)),
        rng=rng, job_id=job_id, slurm_id=slurm_id, clock=_Clock(start), user=user, proj=proj,
        root=rng.choice(_ROOTS).format(user=user, proj=proj), env=env, python=python, hosts=hosts,
        logfmt=fmt, ansi=fmt == "loguru" and rng.random() < 0.6 or rng.random() < 0.1, flavor=rng.choice(("lm", "vision", "generic")),
    )


# ---------------------------------------------------------------------------------------------
# Text transforms on real failure texts
# ---------------------------------------------------------------------------------------------

_NUM = re.compile(r"(?<![\w.:/\\#-])(\d+\.\d+|\d{2,})(?![\w.])")
_KEEP_BEFORE = ("Errno ", "version ", "line ", "opset ", "sm_", "Python ", "CUDA ", "cuda:", "dim ", "dimension ")


def _vary_numbers(text: str, rng: random.Random) -> str:
    """Other sizes, counts and pids in the exception message (same root cause, same group)."""
    lines = text.split("\n")
    last_frame = max((i for i, line in enumerate(lines) if re.match(r'\s*File "', line)), default=-1)
    start = last_frame + 2 if last_frame >= 0 else 0
    scale = rng.uniform(0.45, 2.2)  # one factor per text keeps the message's numbers consistent with each other

    def repl(m: re.Match[str]) -> str:
        before = m.string[max(0, m.start() - 10): m.start()]
        if any(before.endswith(k) for k in _KEEP_BEFORE):
            return m.group(0)
        tok = m.group(1)
        factor = scale * rng.uniform(0.97, 1.03)
        if "." in tok:
            places = len(tok.split(".")[1])
            return f"{max(0.01, float(tok) * factor):.{places}f}"
        return str(max(2, round(int(tok) * factor)))

    for i in range(max(start, 0), len(lines)):
        if lines[i].startswith(("frame #", "Exception raised from")) or "site-packages" in lines[i]:
            continue
        lines[i] = _NUM.sub(repl, lines[i])
    return "\n".join(lines)


def _relocate(text: str, ctx: _Ctx, location: int) -> str:
    """Put a capture's user script in this job's checkout; location picks the script and its lines."""
    script, shift = _LOCATIONS[location]
    text = _CASE_PATH.sub("{SCRIPT}", text)
    if shift:
        text = _USER_FRAME.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + shift}", text)
    text = text.replace("{SCRIPT}", f"{ctx.root}/{script}")
    text = _SITE_PACKAGES.sub(ctx.env, text)
    return re.sub(r"/tmp/tmp\w{8}", lambda m: "/tmp/tmp" + _rand_token(ctx.rng, 8), text)


def _failure_text(src: Source, ctx: _Ctx, location: int, *, vary: bool = True) -> str:
    text = src.text
    if src.relocatable:
        text = _relocate(text, ctx, location)
    else:
        text = _SITE_PACKAGES.sub(ctx.env, text)
    if vary and src.id.startswith("captured/"):
        text = _vary_numbers(text, ctx.rng)
    return _retime(text, ctx.clock)


# ---------------------------------------------------------------------------------------------
# Job parts: preamble, training progress, warnings
# ---------------------------------------------------------------------------------------------


def _preamble(ctx: _Ctx, *, nnodes: int, gpn: int, multirank: bool, declare: bool = True) -> None:
    """Scheduler environment and GPU inventory; sets ctx.gpus to what the log declares."""
    rng = ctx.rng
    stamped = ctx.logfmt != "plain"
    if stamped and rng.random() < 0.7:
        ctx.add(f"{rng.choice(('Job started at', 'Start:', 'Starting job on'))} {ctx.clock.stamp('date')}")
    if not declare:
        return
    forms = ["slurm_env", "nvidia_smi"] + (["torchrun_cmd", "world_size"] if multirank else [])
    form = rng.choice(forms)
    nodelist = ctx.hosts[0] if nnodes == 1 else f"{ctx.hosts[0][:-3]}[{ctx.hosts[0][-3:]}-{ctx.hosts[-1][-3:]}]"
    if form == "slurm_env":
        env = [
            f"SLURM_JOB_ID={ctx.slurm_id}", f"SLURM_JOB_NAME={ctx.proj}", f"SLURM_JOB_NODELIST={nodelist}",
            f"SLURM_NNODES={nnodes}", f"SLURM_JOB_NUM_NODES={nnodes}", f"SLURM_GPUS_ON_NODE={gpn}",
            f"SLURM_NTASKS={nnodes * (gpn if multirank else 1)}", f"SLURM_CPUS_PER_TASK={rng.choice((4, 8, 12, 16))}",
            f"SLURM_SUBMIT_DIR={ctx.root}",
        ]
        if rng.random() < 0.5:
            env = [env[0]] + sorted(env[1:])
        ctx.add("\n".join(env))
    elif form == "nvidia_smi":
        model = rng.choice(_GPU_MODELS)
        if nnodes > 1:
            ctx.add(f"SLURM_JOB_NUM_NODES={nnodes}")
        ctx.add("+ nvidia-smi -L")
        for i in range(gpn):
            uuid = "-".join(_rand_token(rng, n, "0123456789abcdef") for n in (8, 4, 4, 4, 12))
            ctx.add(f"GPU {i}: {model} (UUID: GPU-{uuid})")
    elif form == "torchrun_cmd":
        ctx.add(f"+ torchrun --nnodes={nnodes} --nproc_per_node={gpn} --rdzv_backend=c10d "
                f"--rdzv_endpoint={ctx.host}:29500 {_script(ctx)} --config configs/{ctx.proj}.yaml")
    else:
        ctx.world_line = f"initialized process group: backend=nccl world_size={nnodes * gpn} rank=0 local_rank=0"
    ctx.gpus = nnodes * gpn


def _script(ctx: _Ctx, location: int = 0) -> str:
    return _LOCATIONS[location][0]


_BLOCKS = " ▏▎▍▌▋▊▉█"


def _tqdm(rng: random.Random, desc: str, total: int, parts: int = 4) -> str:
    """One physical line of tqdm updates joined by carriage returns."""
    out = []
    rate = rng.uniform(1.5, 40.0)
    for k in range(parts + 1):
        n = total * k // parts
        frac = n / total
        full = int(frac * 10)
        rest = int((frac * 10 - full) * 8)
        bar = "█" * full + (_BLOCKS[rest] if full < 10 else "") + " " * max(0, 9 - full)
        el = int(n / rate)
        left = int((total - n) / rate)
        out.append(f"{desc}: {int(frac * 100):3d}%|{bar[:10]:<10}| {n}/{total} [{el // 60:02d}:{el % 60:02d}<{left // 60:02d}:{left % 60:02d}, {rate:5.2f}it/s]")
    return "\r".join(out)


def _progress_msg(ctx: _Ctx, step: int, total: int, epoch: int, metrics_trap: bool) -> str:
    rng = ctx.rng
    loss = max(0.05, 4.0 * (1 - step / (total + 1)) + rng.uniform(-0.2, 0.2))
    if ctx.flavor == "lm":
        msg = f"iter {step}/{total} | loss {loss:.4f} | lr {rng.uniform(1e-5, 6e-4):.2e} | tok/s {rng.randint(20_000, 400_000)} | grad_norm {rng.uniform(0.2, 3.0):.3f}"
    elif ctx.flavor == "vision":
        msg = f"Epoch [{1 + step // 5005}/90] Batch [{step % 5005}/5005] Loss: {loss:.4f} Acc@1: {rng.uniform(20, 80):.2f}"
    else:
        msg = f"epoch {epoch} step {step} loss {loss:.4f} samples/s {rng.uniform(100, 4000):.1f}"
    if metrics_trap and rng.random() < 0.5:
        msg += rng.choice((f" | val error {rng.uniform(0.05, 0.4):.3f}", f" error_rate={rng.uniform(0.01, 0.2):.4f}",
                           f" top1 error: {rng.uniform(10, 40):.1f}%", " num_errors=0"))
    return msg


def _training(ctx: _Ctx, until: datetime, *, ranks: Sequence[int] = (), lines: int | None = None,
              tqdm: bool | None = None, metrics_trap: bool = False, warnings: Sequence[str] = (), world: int | None = None) -> None:
    """Setup and progress lines from now until ``until`` (the clock ends there)."""
    rng = ctx.rng
    ranked = list(ranks)
    r0 = ranked[0] if ranked else None
    ctx.log(rng.choice((f"loading dataset from /data/{ctx.proj}/train", f"building model ({rng.uniform(10, 7000):.1f}M parameters)",
                        f"config: configs/{ctx.proj}.yaml")), rank=r0)
    for r in ranked:
        ctx.log(f"rank {r}/{world or len(ranked)} ready on cuda:{r % 8}", rank=r)
        ctx.clock.advance(rng.uniform(0.01, 0.4))
    n = lines if lines is not None else rng.randint(12, 45)
    use_tqdm = rng.random() < 0.5 if tqdm is None else tqdm
    total = ctx.total_steps
    begin = ctx.clock.now
    span = max((until - begin).total_seconds(), float(n + 1))
    times = sorted(rng.uniform(0.02, 0.98) * span for _ in range(n))
    warn_at = {rng.randrange(n): w for w in warnings} if warnings else {}
    epoch = 1
    for i in range(n):
        ctx.clock.now = begin + timedelta(seconds=times[i])
        step = (i + 1) * total // (n + 1)
        if use_tqdm and i % 5 == 4:
            ctx.add(_tqdm(rng, f"Epoch {epoch}", rng.choice((250, 500, 1000))), stream="err", rank=r0)
            epoch += 1
        ctx.log(_progress_msg(ctx, step, total, epoch, metrics_trap), rank=r0)
        if i in warn_at:
            ctx.add(warn_at[i], stream="err", rank=r0)
        if metrics_trap and i % 7 == 3:
            ctx.log(f"eval: val loss {rng.uniform(0.5, 2.5):.4f} | val error {rng.uniform(0.05, 0.3):.4f} | error_rate {rng.uniform(0.01, 0.2):.4f}", rank=r0)
    ctx.clock.now = max(ctx.clock.now, until)


def _warning_texts(ctx: _Ctx, k: int) -> list[str]:
    rng = ctx.rng
    fill = {"root": ctx.root, "script": _script(ctx), "env": ctx.env, "host": ctx.host}
    pool = [w.format(**fill) for w in _TORCH_WARNINGS]
    pid = ctx.pid()
    pool += [
        f"non-finite gradient norm (nan) at step {rng.randint(100, 90000)}, skipping optimizer step",
        f"Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {2 ** rng.randint(8, 16)}.0",
        f"{ctx.host}:{pid}:{pid + 57} [0] graph/search.cc:765 NCCL WARN Could not find a path for pattern 4, falling back to simple order",
        f"{ctx.host}:{pid}:{pid + 61} [0] NCCL INFO NET/IB : No device found.",
        f"{ctx.host}:{pid}:{pid + 57} [1] graph/xml.cc:332 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:1b/../../0000:1b:00.0",
    ]
    return rng.sample(pool, min(k, len(pool)))


def _epilogue_ok(ctx: _Ctx) -> None:
    rng = ctx.rng
    ctx.log(rng.choice(("training complete", "finished training", "done.")) + f" best val loss {rng.uniform(0.2, 2.0):.4f}")
    ctx.clock.advance(rng.uniform(2, 40))
    ctx.log(f"saved checkpoint to /checkpoints/{ctx.user}/{ctx.proj}/final.pt")
    if ctx.logfmt != "plain" and rng.random() < 0.5:
        ctx.clock.advance(rng.uniform(1, 5))
        ctx.add(f"Job finished at {ctx.clock.stamp('date')}")


# ---------------------------------------------------------------------------------------------
# Launchers and secondary errors (torchrun, srun, NCCL watchdog)
# ---------------------------------------------------------------------------------------------


@dataclass
class _Assets:
    """Launcher and NCCL texts cut out of real logs once per generation."""

    launcher_new: str  # torchrun's own traceback up to "ChildFailedError: " (torch 2.x, Python 3.12)
    launcher_old: str  # the same from an older torchrun (console-script entry point, Python 3.10)
    watchdog: list[tuple[str, bool]]  # (line, rank-prefixed) of one rank's NCCL watchdog timeout dump
    collective_frames: str  # a real traceback of dist.all_reduce, up to its last frame
    remote_error: str  # DistBackendError ncclRemoteError message lines
    unknown_cuda_error: str  # a rank's traceback ending in "CUDA error: unknown error" (prefixes removed)
    fallen_off_bus: str  # the kernel's NVRM lines for a GPU that fell off the bus


def _load_assets(root: Path) -> _Assets:
    from assistant.eval.examples import strip_origin

    cap = json.loads((root / "eval/captured/multi_gpu/ddp-model-mismatch-per-rank-vocab.json").read_text(encoding="utf-8"))["stderr"]
    lines = cap.splitlines()
    i = next(k for k, line in enumerate(lines) if "failed (exitcode" in line) + 1
    j = next(k for k in range(i, len(lines)) if lines[k].startswith("torch.distributed.elastic.multiprocessing.errors.ChildFailedError"))
    launcher_new = "\n".join(lines[i:j])
    old = strip_origin((root / "eval/corpus/distributed/torchrun_sigkill_rank7.txt").read_text(encoding="utf-8")).splitlines()
    k = next(k for k, line in enumerate(old) if line.startswith("torch.distributed.elastic.multiprocessing.errors.ChildFailedError"))
    launcher_old = "\n".join(old[:k])

    hang = json.loads((root / "eval/captured/multi_gpu/nccl-timeout-uneven-shards-ddp.json").read_text(encoding="utf-8"))["stderr"].splitlines()
    a = next(k for k, line in enumerate(hang) if "Watchdog caught collective operation timeout" in line)
    b = next(k for k, line in enumerate(hang) if "torch/distributed/elastic/multiprocessing/api.py" in line)
    watchdog = []
    for line in hang[a:b]:
        if re.match(r"\d{4}-\d\d-\d\d ", line):
            continue  # the capture's own logger lines in between
        if line.startswith("[rank0]:"):
            watchdog.append((line[len("[rank0]:"):], True))
        else:
            watchdog.append((line, False))
    while watchdog and not watchdog[-1][0].strip():
        watchdog.pop()

    mism = json.loads((root / "eval/captured/multi_gpu/nccl-allreduce-bincount-shape-mismatch.json").read_text(encoding="utf-8"))["stderr"].splitlines()
    s = next(k for k, line in enumerate(mism) if line.startswith("[rank1]: Traceback"))
    e = next(k for k in range(s, len(mism)) if "RuntimeError: Detected mismatch" in mism[k])
    frames = "\n".join(line[len("[rank1]: "):] for line in mism[s:e])
    remote = strip_origin((root / "eval/corpus/distributed/nccl_remote_error_plain.txt").read_text(encoding="utf-8")).strip("\n")
    unknown = _strip_rank_prefixes(strip_origin((root / "eval/corpus/cuda/unknown_error_mid_training.txt").read_text(encoding="utf-8")).strip("\n"))
    bus = strip_origin((root / "eval/corpus/cuda/gpu_fallen_off_bus_dmesg.txt").read_text(encoding="utf-8")).strip("\n")
    return _Assets(launcher_new, launcher_old, watchdog, frames, remote, unknown, bus)


def _watchdog_dump(ctx: _Ctx, assets: _Assets, rank: int, *, seq: int, op: str, numel: int, timeout_ms: int,
                   message: str | None = None) -> list[tuple[str, bool]]:
    """One rank's NCCL watchdog dump (timeout, or ``message`` for a CUDA error the watchdog hit)."""
    rng = ctx.rng
    ran = timeout_ms + rng.randint(5, 900)
    out: list[tuple[str, bool]] = []
    for line, prefixed in assets.watchdog:
        if message is not None and any(k in line for k in ("FlightRecorder", "signal dumping", "failure detected by watchdog")):
            continue
        if message is not None and "Watchdog caught" in line and "terminated with exception" not in line and "what()" not in line:
            continue
        if message is not None:
            line = line.replace("checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:692",
                                "c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:44")
            line = re.sub(r"c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout\(.*?\) \+", "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool) +", line)
        line = line.replace("Rank 0", f"Rank {rank}")
        line = re.sub(r"SeqNum=\d+", f"SeqNum={seq}", line)
        line = re.sub(r"OpType=\w+", f"OpType={op}", line)
        line = re.sub(r"NumelIn=\d+, NumelOut=\d+", f"NumelIn={numel}, NumelOut={numel}", line)
        line = re.sub(r"Timeout\(ms\)=\d+\) ran for \d+", f"Timeout(ms)={timeout_ms}) ran for {ran}", line)
        line = re.sub(r"work sequence id: \d+ PG status: last enqueued work: \d+, last completed work: \d+",
                      f"work sequence id: {seq} PG status: last enqueued work: {seq}, last completed work: {seq - 1}", line)
        line = _SITE_PACKAGES.sub(ctx.env, line)
        if message is not None:
            line = re.sub(r"\[Rank \d+\] Watchdog caught collective operation timeout: .*?before timing out\.", lambda _m: message, line)
        out.append((line, prefixed))
    # the glog stamps of the real dump, moved to now (timeout lines first, abort ~20 s later)
    fixed: list[tuple[str, bool]] = []
    tick = 0
    for line, prefixed in out:
        m = _GLOG_TS.search(line)
        if m:
            tick += rng.randint(40, 900)
            late = "ProcessGroupNCCL.cpp:7" in line or "terminated" in line
            at = ctx.clock.now + timedelta(seconds=20 if late else 0, microseconds=tick)
            line = line[: m.start()] + ctx.clock.stamp("glog_c", "E", at) + line[m.end():]
        fixed.append((line, prefixed))
    return fixed


def _summary(ctx: _Ctx, script: str, failures: Sequence[dict[str, Any]], root: dict[str, Any] | None, width: int) -> str:
    """torchrun's ChildFailedError block."""
    def entry(i: int, f: dict[str, Any]) -> list[str]:
        ec = f["exitcode"]
        if ec < 0:
            sig = {-15: "SIGTERM", -6: "SIGABRT", -9: "SIGKILL", -11: "SIGSEGV", -7: "SIGBUS"}[ec]
            tb = f"Signal {-ec} ({sig}) received by PID {f['pid']}"
        else:
            tb = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
        return [f"[{i}]:", f"  time      : {ctx.clock.stamp('rc', at=f['time'])}", f"  host      : {f['host']}",
                f"  rank      : {f['rank']} (local_rank: {f['local_rank']})", f"  exitcode  : {ec} (pid: {f['pid']})",
                "  error_file: <N/A>", f"  traceback : {tb}"]

    out = ["=" * width, f"{script} FAILED", "-" * width, "Failures:"]
    if failures:
        for i, f in enumerate(failures, start=1):
            out += entry(i, f)
    else:
        out.append("  <NO_OTHER_FAILURES>")
    out.append("-" * width)
    if root is not None:
        out += ["Root Cause (first observed failure):"] + entry(0, root)
    out.append("=" * width)
    return "\n".join(out)


def _launcher_report(ctx: _Ctx, assets: _Assets, version: str, *, failed: dict[str, Any], others: Sequence[dict[str, Any]],
                     summary: bool, sigterm_pids: Sequence[int], list_others: bool = True) -> None:
    """What torchrun prints when a worker fails: SIGTERMs, the failed line, its traceback and summary."""
    agent = ctx.pid()
    for pid in sigterm_pids:
        if version == "new":
            ctx.add(f"{ctx.clock.stamp('glog_py', 'W')} {agent} torch/distributed/elastic/multiprocessing/api.py:1012] Sending process {pid} closing signal SIGTERM", stream="err", prefixed=False)
        elif version == "mid":
            ctx.add(f"{ctx.clock.stamp('mid')} torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process {pid} closing signal SIGTERM", stream="err", prefixed=False)
        else:
            ctx.add(f"WARNING:torch.distributed.elastic.multiprocessing.api:Sending process {pid} closing signal SIGTERM", stream="err", prefixed=False)
    ctx.clock.advance(ctx.rng.uniform(0.05, 1.5))
    what = f"failed (exitcode: {failed['exitcode']}) local_rank: {failed['local_rank']} (pid: {failed['pid']}) of binary: {ctx.python}"
    if version == "new":
        ctx.add(f"{ctx.clock.stamp('glog_py', 'E')} {agent} torch/distributed/elastic/multiprocessing/api.py:986] {what}", stream="err", prefixed=False)
    elif version == "mid":
        ctx.add(f"{ctx.clock.stamp('mid')} torch.distributed.elastic.multiprocessing.api: [ERROR] {what}", stream="err", prefixed=False)
    else:
        ctx.add(f"ERROR:torch.distributed.elastic.multiprocessing.api:{what}", stream="err", prefixed=False)
    if not summary:
        return
    tb = assets.launcher_new if version == "new" else assets.launcher_old
    tb = _SITE_PACKAGES.sub(ctx.env, tb).replace("/usr/local/lib/python3.10/dist-packages", ctx.env)
    ctx.add(tb, stream="err", prefixed=False)
    ctx.add("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", stream="err", prefixed=False)
    ctx.add(_summary(ctx, _script(ctx), others if list_others else [], failed, ctx.rng.choice((52, 60))), stream="err", prefixed=False)


def _worker(ctx: _Ctx, rank: int, gpn: int, exitcode: int, at: datetime | None = None) -> dict[str, Any]:
    return {"rank": rank, "local_rank": rank % gpn, "host": ctx.hosts[min(rank // gpn, len(ctx.hosts) - 1)],
            "exitcode": exitcode, "pid": ctx.pid(), "time": at or ctx.clock.now}


def _add_rank_lines(ctx: _Ctx, rank: int, text: str | Sequence[tuple[str, bool]], stream: str = "err") -> None:
    if isinstance(text, str):
        for line in text.split("\n"):
            ctx.lines.append(_Line(line, stream, rank, True))
    else:
        for line, prefixed in text:
            ctx.lines.append(_Line(line, stream, rank, prefixed))


def _interleave(blocks: Sequence[list[_Line]], rng: random.Random) -> list[_Line]:
    """Lines of several ranks written at the same moment: chunks interleave, each rank in order."""
    queues = [list(b) for b in blocks if b]
    out: list[_Line] = []
    while queues:
        q = rng.choice(queues)
        take = rng.randint(1, 6)
        out.extend(q[:take])
        del q[:take]
        queues = [q for q in queues if q]
    return out


# ---------------------------------------------------------------------------------------------
# Rendering a job to files
# ---------------------------------------------------------------------------------------------


def _prefix(style: str, line: _Line, gpn: int) -> str:
    if line.rank is None or not line.prefixed or style == "none":
        return line.text
    r, local = line.rank, line.rank % max(gpn, 1)
    sep = "" if line.text.startswith("[") else " "
    if style == "rank":
        return f"[rank{r}]:{sep}{line.text}"
    if style == "default":
        return f"[default{local}]:{line.text}"
    if style == "default_rank":
        return f"[default{local}]:[rank{r}]:{sep}{line.text}"
    if style == "srun":
        return f"{r}: {line.text}"
    raise ValueError(style)


def _join(lines: Iterable[str], final_newline: bool = True) -> str:
    text = "\n".join(lines)
    return text + "\n" if final_newline and text else text


def _render(ctx: _Ctx, *, style: str = "rank", gpn: int = 1, split: bool = False, by_rank: bool = False,
            final_newline: bool = True) -> dict[str, str]:
    """role -> text: 'main' (merged), 'out'/'err' (split), 'rank:N' + 'main' (per-rank files)."""
    if by_rank:
        files: dict[str, list[str]] = {}
        for line in ctx.lines:
            key = "main" if line.rank is None else f"rank:{line.rank}"
            files.setdefault(key, []).append(line.text)
        return {k: _join(v, final_newline) for k, v in files.items()}
    if split:
        out = [_prefix(style, line, gpn) for line in ctx.lines if line.stream == "out"]
        err = [_prefix(style, line, gpn) for line in ctx.lines if line.stream == "err"]
        return {"out": _join(out, final_newline), "err": _join(err, final_newline)}
    return {"main": _join((_prefix(style, line, gpn) for line in ctx.lines), final_newline)}


def _junk(rng: random.Random) -> bytes:
    choices = [
        bytes(rng.randrange(256) for _ in range(rng.randint(40, 300))),
        "température d'entraînement: 0.7 — café".encode("cp1252"),
        b"\xff\xfe\x00\x00invalid utf-8 \xc3\x28 \xa0\xa1",
        b"\x00" * rng.randint(16, 512),
    ]
    return rng.choice(choices) + b"\n"


def _inject_junk(data: bytes, rng: random.Random, count: int = 3) -> bytes:
    lines = data.split(b"\n")
    for _ in range(count):
        at = rng.randint(1, max(1, len(lines) // 2))
        lines.insert(at, _junk(rng).rstrip(b"\n"))
    return b"\n".join(lines)


def _noise_block(rng: random.Random, mb: float) -> str:
    """Roughly ``mb`` MB of tqdm progress updates (no timestamps)."""
    unit = "\n".join(_tqdm(rng, f"Epoch {e}", 1000, parts=20) for e in range(1, 40)) + "\n"
    reps = max(1, int(mb * 1024 * 1024 / len(unit.encode("utf-8"))))
    return unit * reps


# ---------------------------------------------------------------------------------------------
# Scenario builders
# ---------------------------------------------------------------------------------------------


@dataclass
class _Truth:
    status: str
    category: str | None = None
    group: str | None = None
    first_failing_rank: int | None = None


@dataclass
class _Pool:
    """The real failure texts and which root causes recur."""

    plain: list[Source]
    heads: list[tuple[Source, int]]  # (source, location) of the popular root causes
    weights: list[float]
    torchrun: list[Source]
    spawn_exited: list[Source]

    def pick(self, rng: random.Random, ok: Any = None, head_share: float = 0.7, plain_log: bool = False) -> tuple[Source, int]:
        def fits(s: Source) -> bool:
            return (ok is None or ok(s)) and not (plain_log and s.timestamps)

        heads = [(h, w) for h, w in zip(self.heads, self.weights, strict=True) if fits(h[0])]
        if heads and rng.random() < head_share:
            return rng.choices([h for h, _ in heads], weights=[w for _, w in heads])[0]
        tail = [s for s in self.plain if fits(s)]
        return rng.choice(tail), 0


def _group(src: Source, location: int) -> str:
    return f"{src.id}@{_LOCATIONS[location][0]}"


def _single(ctx: _Ctx, pool: _Pool, trap: str, *, src: tuple[Source, int] | None = None, tqdm: bool | None = None,
            noise_mb: float = 0.0) -> tuple[_Truth, dict[str, Any]]:
    """One process: preamble, progress, the failure, maybe srun's exit line."""
    rng = ctx.rng
    plain = ctx.logfmt == "plain"
    source, loc = src or pool.pick(rng, plain_log=plain)
    _preamble(ctx, nnodes=1, gpn=1, multirank=False, declare=not plain or rng.random() < 0.5)
    if _early(source):
        # an import or setup error stops the job before training starts
        fail_at = ctx.clock.now + timedelta(seconds=rng.uniform(5, 180))
        _training(ctx, fail_at, tqdm=False, lines=rng.randint(0, 2))
    else:
        fail_at = ctx.clock.now + timedelta(seconds=_duration(rng))
        _training(ctx, fail_at, tqdm=tqdm)
    if noise_mb:
        ctx.add(_noise_block(rng, noise_mb).rstrip("\n"), stream="err")
    ctx.clock.advance(rng.uniform(0.5, 30))
    ctx.add(_failure_text(source, ctx, loc), stream="err")
    if not plain and rng.random() < 0.5:
        ctx.clock.advance(rng.uniform(1, 20))
        ctx.add(f"srun: error: {ctx.host}: task 0: Exited with exit code 1", stream="err")
    return _Truth("failed", source.category, _group(source, loc)), {"source": source.id, "location": loc}


def _early(source: Source) -> bool:
    """A failure that happens while the job starts (imports, CUDA availability), not after hours of training."""
    return source.category in _EVERY_RANK or bool(re.search(r"^\s*(?:import |from \S+ import )", source.text, re.M))


def _duration(rng: random.Random) -> float:
    """Seconds a job ran before its end: minutes to two days, heavy-tailed."""
    return min(48 * 3600.0, max(300.0, rng.lognormvariate(8.3, 1.2)))


def _multirank_setup(ctx: _Ctx, *, nnodes: int, gpn: int, version: str) -> list[int]:
    rng = ctx.rng
    _preamble(ctx, nnodes=nnodes, gpn=gpn, multirank=True)
    agent = ctx.pid()
    banner = ["", "*****************************************",
              "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being "
              "overloaded, please further tune the variable for optimal performance in your application as needed. ",
              "*****************************************"]
    if version == "new":
        stamp = ctx.clock.stamp("glog_py", "W")
        for b in banner:
            ctx.add(f"{stamp} {agent} torch/distributed/run.py:803] {b}".rstrip() + (" " if not b else ""), stream="err", prefixed=False)
    elif version == "old" and rng.random() < 0.7:
        ctx.add("WARNING:torch.distributed.run:" + "\n".join(banner), stream="err", prefixed=False)
    if ctx.world_line:
        ctx.clock.advance(rng.uniform(2, 30))
        ctx.log(ctx.world_line, rank=0)
    return list(range(nnodes * gpn))


# Failures that hit every rank alike; a single first rank raising them is not believable.
_EVERY_RANK = ("environment_error", "cuda_unavailable")


def _cascade(ctx: _Ctx, pool: _Pool, assets: _Assets, trap: str) -> tuple[_Truth, dict[str, Any]]:
    """Multi-rank torchrun job: one rank raises a real error first, the others fail only as a consequence."""
    rng = ctx.rng
    gpn = rng.choice((2, 4, 8)) if trap != "multinode_watchdog" else rng.choice((2, 4))
    nnodes = 2 if trap == "multinode_watchdog" or (gpn <= 4 and rng.random() < 0.25) else 1
    ctx.hosts = [f"{ctx.host[:-3]}{int(ctx.host[-3:]) + i:03d}" for i in range(nnodes)]
    version = "old" if trap == "torchrun_old_format" else rng.choice(("new", "new", "mid"))
    style = {"torchrun_old_format": rng.choice(("default", "default_rank"))}.get(trap, "rank")
    if trap == "sticky_cuda":
        ok = lambda s: s.category in ("device_side_assert", "illegal_memory_access") and s.traceback  # noqa: E731
    else:
        ok = lambda s: s.traceback and s.category not in _EVERY_RANK  # noqa: E731
    source, loc = pool.pick(rng, ok)
    ranks = _multirank_setup(ctx, nnodes=nnodes, gpn=gpn, version=version)
    first = rng.choice(ranks)
    fail_at = ctx.clock.now + timedelta(seconds=_duration(rng))
    _training(ctx, fail_at, ranks=ranks, tqdm=False)
    ctx.clock.advance(rng.uniform(0.5, 20))
    t_fail = ctx.clock.now
    _add_rank_lines(ctx, first, _failure_text(source, ctx, loc))
    others = [r for r in ranks if r != first]
    summary = trap != "torchrun_no_root_cause"
    failed_exit = 1
    if trap == "sticky_cuda":
        # the failing rank's own watchdog trips over the same (sticky) CUDA error and aborts it
        msg_line = next((line for line in source.text.splitlines() if "CUDA error" in line), "CUDA error: device-side assert triggered")
        msg = msg_line[msg_line.index("CUDA error"):]
        ctx.clock.advance(rng.uniform(0.2, 3))
        dump = _watchdog_dump(ctx, assets, first, seq=rng.randint(100, 90000), op="ALLREDUCE", numel=rng.randint(1000, 10**8),
                              timeout_ms=600000, message=msg)
        _add_rank_lines(ctx, first, [(line, p) for line, p in dump if "Watchdog caught" not in line])
        failed_exit = -6
    if trap in ("multinode_watchdog",):
        # node of the failing rank: its agent stops local ranks at once; the other node's ranks wait in NCCL
        local = [r for r in ranks if r // gpn == first // gpn and r != first]
        remote = [r for r in ranks if r // gpn != first // gpn]
        failed = _worker(ctx, first, gpn, 1)
        _launcher_report(ctx, assets, version, failed=failed, others=[_worker(ctx, r, gpn, -15) for r in local],
                         summary=summary, sigterm_pids=[ctx.pid() for _ in local])
        timeout_ms = rng.choice((600000, 1800000))
        ctx.clock.now = t_fail + timedelta(milliseconds=timeout_ms + rng.randint(10, 900))
        seq, numel = rng.randint(100, 90000), rng.randint(1000, 10**8)
        op = rng.choice(("ALLREDUCE", "_ALLGATHER_BASE"))
        blocks = []
        for r in remote:
            saved = ctx.lines
            ctx.lines = []
            _add_rank_lines(ctx, r, _watchdog_dump(ctx, assets, r, seq=seq, op=op, numel=numel, timeout_ms=timeout_ms))
            blocks.append(ctx.lines)
            ctx.lines = saved
        ctx.lines.extend(_interleave(blocks, rng))
        ctx.clock.advance(rng.uniform(20, 40))
        root2 = _worker(ctx, remote[0], gpn, -6)
        _launcher_report(ctx, assets, version, failed=root2, others=[_worker(ctx, r, gpn, -6) for r in remote[1:]],
                         summary=summary, sigterm_pids=[])
    elif trap == "remote_error_cascade":
        ctx.clock.advance(rng.uniform(1, 30))
        blocks = []
        for r in others[: rng.randint(1, min(3, len(others)))]:
            saved = ctx.lines
            ctx.lines = []
            frames = _relocate(assets.collective_frames, ctx, 0)
            _add_rank_lines(ctx, r, frames + "\n" + assets.remote_error)
            blocks.append(ctx.lines)
            ctx.lines = saved
        ctx.lines.extend(_interleave(blocks, rng))
        ctx.clock.advance(rng.uniform(0.5, 5))
        failed = _worker(ctx, first, gpn, 1, at=t_fail + timedelta(seconds=1))
        rest = [_worker(ctx, r, gpn, 1 if i < 3 else -15) for i, r in enumerate(others)]
        _launcher_report(ctx, assets, version, failed=failed, others=rest, summary=summary, sigterm_pids=[w["pid"] for w in rest if w["exitcode"] < 0])
    else:
        ctx.clock.advance(rng.uniform(0.3, 2))
        failed = _worker(ctx, first, gpn, failed_exit)
        rest = [_worker(ctx, r, gpn, -15) for r in others]
        _launcher_report(ctx, assets, version, failed=failed, others=rest, summary=summary, sigterm_pids=[w["pid"] for w in rest],
                         list_others=rng.random() < 0.6)
    if rng.random() < 0.4:
        ctx.clock.advance(rng.uniform(1, 10))
        ctx.add(f"srun: error: {ctx.host}: task 0: Exited with exit code 1", stream="err", prefixed=False)
    ctx.notes.append(f"prefix={style} version={version} ranks={len(ranks)}")
    ctx.gpn = gpn
    ctx.style = style
    return _Truth("failed", source.category, _group(source, loc), first), {"source": source.id, "location": loc}


def _srun(ctx: _Ctx, pool: _Pool, assets: _Assets) -> tuple[_Truth, dict[str, Any]]:
    """srun -l: one task per rank, "N: " prefixes, srun's own exit lines."""
    rng = ctx.rng
    gpn = rng.choice((4, 8))
    nnodes = rng.choice((1, 2))
    ctx.hosts = [f"{ctx.host[:-3]}{int(ctx.host[-3:]) + i:03d}" for i in range(nnodes)]
    source, loc = pool.pick(rng, lambda s: s.traceback)
    _preamble(ctx, nnodes=nnodes, gpn=gpn, multirank=True)
    ranks = list(range(nnodes * gpn))
    first = rng.choice(ranks)
    fail_at = ctx.clock.now + timedelta(seconds=_duration(rng))
    _training(ctx, fail_at, ranks=ranks, tqdm=False)
    ctx.clock.advance(rng.uniform(0.5, 20))
    _add_rank_lines(ctx, first, _failure_text(source, ctx, loc))
    ctx.clock.advance(rng.uniform(0.5, 3))
    host = ctx.hosts[first // gpn]
    ctx.add(f"srun: error: {host}: task {first}: Exited with exit code 1", stream="err", prefixed=False)
    ctx.add(rng.choice((f"srun: Terminating StepId={ctx.slurm_id}.0", "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.")),
            stream="err", prefixed=False)
    ctx.add(f"slurmstepd: error: *** STEP {ctx.slurm_id}.0 ON {ctx.hosts[0]} CANCELLED AT {ctx.clock.stamp('slurm')} ***", stream="err", prefixed=False)
    for n, h in enumerate(ctx.hosts):
        tasks = [r for r in ranks if r // gpn == n and r != first]
        if tasks:
            ctx.add(f"srun: error: {h}: tasks {_task_ranges(tasks)}: Terminated", stream="err", prefixed=False)
    ctx.style = "srun"
    ctx.gpn = gpn
    return _Truth("failed", source.category, _group(source, loc), first), {"source": source.id, "location": loc}


def _task_ranges(tasks: Sequence[int]) -> str:
    out: list[str] = []
    start = prev = tasks[0]
    for t in list(tasks[1:]) + [None]:  # type: ignore[list-item]
        if t is not None and t == prev + 1:
            prev = t
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if t is not None:
            start = prev = t
    return ",".join(out)


def _per_rank(ctx: _Ctx, pool: _Pool, assets: _Assets) -> tuple[_Truth, dict[str, Any]]:
    """rank_<N>.log per rank: every rank logs with timestamps; the first error is the earliest."""
    rng = ctx.rng
    gpn = rng.choice((2, 4, 8))
    source, loc = pool.pick(rng, lambda s: s.traceback)
    version = rng.choice(("new", "mid"))
    ranks = _multirank_setup(ctx, nnodes=1, gpn=gpn, version=version)
    first = rng.choice(ranks)
    start = ctx.clock.now
    fail_at = start + timedelta(seconds=_duration(rng))
    timeout_ms = rng.choice((600000, 1800000))
    watchdog = rng.random() < 0.6
    t_fail = fail_at + timedelta(seconds=rng.uniform(1, 20))
    seq, numel = rng.randint(100, 90000), rng.randint(1000, 10**8)
    launcher = ctx.lines
    rank_lines: list[_Line] = []
    for r in ranks:
        ctx.lines = []
        ctx.clock.now = start + timedelta(seconds=rng.uniform(1, 5))
        stop = fail_at if r == first else t_fail + timedelta(seconds=rng.uniform(1, 30) if watchdog else rng.uniform(0.1, 0.9))
        _training(ctx, stop, ranks=[r], tqdm=False, lines=rng.randint(8, 25), world=len(ranks))
        if r == first:
            ctx.clock.now = t_fail
            _add_rank_lines(ctx, r, _failure_text(source, ctx, loc))
        elif watchdog:
            ctx.clock.now = t_fail + timedelta(milliseconds=timeout_ms + rng.randint(10, 900))
            _add_rank_lines(ctx, r, _watchdog_dump(ctx, assets, r, seq=seq, op="ALLREDUCE", numel=numel, timeout_ms=timeout_ms))
        rank_lines.extend(ctx.lines)
    ctx.lines = launcher
    ctx.clock.now = max(ctx.clock.stamps) + timedelta(seconds=rng.uniform(1, 30)) if watchdog else t_fail + timedelta(seconds=rng.uniform(0.5, 2))
    exit_first = 1
    failed = _worker(ctx, first, gpn, exit_first, at=t_fail + timedelta(seconds=1))
    rest = [_worker(ctx, r, gpn, -6 if watchdog else -15) for r in ranks if r != first]
    if rng.random() < 0.6:
        _launcher_report(ctx, assets, version, failed=failed, others=rest, summary=True, sigterm_pids=[] if watchdog else [w["pid"] for w in rest])
    ctx.lines.extend(rank_lines)
    ctx.per_rank = True
    return _Truth("failed", source.category, _group(source, loc), first), {"source": source.id, "location": loc, "watchdog": watchdog}


def _hardware(ctx: _Ctx, pool: _Pool, assets: _Assets, kind: str) -> tuple[_Truth, dict[str, Any]]:
    """One rank's GPU breaks (ECC, fell off the bus); the others are stopped as a consequence."""
    rng = ctx.rng
    gpn = rng.choice((4, 8))
    version = rng.choice(("new", "mid"))
    ranks = _multirank_setup(ctx, nnodes=1, gpn=gpn, version=version)
    first = rng.choice(ranks)
    fail_at = ctx.clock.now + timedelta(seconds=_duration(rng))
    _training(ctx, fail_at, ranks=ranks, tqdm=False)
    ctx.clock.advance(rng.uniform(0.5, 20))
    exitcode = -6
    if kind == "ecc":
        dump = _watchdog_dump(ctx, assets, first, seq=rng.randint(100, 90000), op="ALLREDUCE", numel=rng.randint(1000, 10**8),
                              timeout_ms=600000, message="CUDA error: uncorrectable ECC error encountered\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
        flat: list[tuple[str, bool]] = []
        for line, p in dump:
            if "Watchdog caught" in line:
                continue
            for k, part in enumerate(line.split("\n")):
                flat.append((part, p and k == 0))
        _add_rank_lines(ctx, first, flat)
    else:
        _add_rank_lines(ctx, first, _SITE_PACKAGES.sub(ctx.env, assets.unknown_cuda_error))
        exitcode = 1
    ctx.clock.advance(rng.uniform(0.3, 2))
    failed = _worker(ctx, first, gpn, exitcode)
    rest = [_worker(ctx, r, gpn, -15) for r in ranks if r != first]
    _launcher_report(ctx, assets, version, failed=failed, others=rest, summary=rng.random() < 0.7, sigterm_pids=[w["pid"] for w in rest])
    if kind == "bus":
        ctx.clock.advance(rng.uniform(2, 20))
        ctx.add(f"[epilogue] GPU health check on {ctx.host} at {ctx.clock.stamp('date')}", prefixed=False)
        pci = f"0000:{rng.choice(('1b', '3b', '5e', '86', 'b3', 'db'))}:00.0"
        if rng.random() < 0.5:
            ctx.add(assets.fallen_off_bus.replace("0000:b3:00.0", pci), prefixed=False)
        else:
            ctx.add(f"[{rng.uniform(1000, 900000):.6f}] NVRM: Xid (PCI:{pci[:-2]}): 79, pid={ctx.pid()}, GPU has fallen off the bus.", prefixed=False)
        ctx.add(f"Unable to determine the device handle for GPU {pci}: GPU is lost.  Reboot the system to recover this GPU", prefixed=False)
    ctx.gpn = gpn
    ctx.style = "rank"
    return _Truth("failed", "hardware_error", f"hardware:{kind}", first), {"kind": kind}


def _hang(ctx: _Ctx, assets: _Assets) -> tuple[_Truth, dict[str, Any]]:
    """Every rank times out on the same collective; nothing else failed."""
    rng = ctx.rng
    gpn = rng.choice((2, 4, 8))
    version = rng.choice(("new", "mid"))
    per_rank = rng.random() < 0.35
    ranks = _multirank_setup(ctx, nnodes=1, gpn=gpn, version=version)
    hang_at = ctx.clock.now + timedelta(seconds=_duration(rng))
    _training(ctx, hang_at, ranks=ranks, tqdm=False)
    timeout_ms = rng.choice((600000, 1800000))
    op = rng.choice(("ALLREDUCE", "BROADCAST"))
    seq, numel = rng.randint(2, 90000), rng.randint(1000, 10**8)
    t_dump = ctx.clock.now + timedelta(milliseconds=timeout_ms + rng.randint(10, 300))
    blocks = []
    for r in ranks:
        saved = ctx.lines
        ctx.lines = []
        ctx.clock.now = t_dump + timedelta(milliseconds=rng.randint(0, 400))
        _add_rank_lines(ctx, r, _watchdog_dump(ctx, assets, r, seq=seq, op=op, numel=numel, timeout_ms=timeout_ms))
        blocks.append(ctx.lines)
        ctx.lines = saved
    ctx.lines.extend(_interleave(blocks, rng))
    ctx.clock.now = max(ctx.clock.stamps) + timedelta(seconds=rng.uniform(1, 5))
    workers = [_worker(ctx, r, gpn, -6) for r in ranks]
    root = rng.choice(workers)
    _launcher_report(ctx, assets, version, failed=root, others=[w for w in workers if w is not root], summary=rng.random() < 0.8, sigterm_pids=[])
    ctx.gpn = gpn
    ctx.style = "rank"
    if per_rank:
        ctx.per_rank = True
    return _Truth("failed", "nccl_error", f"hang:{op}", None), {"op": op, "per_rank": per_rank}


def _identical(ctx: _Ctx, pool: _Pool, assets: _Assets) -> tuple[_Truth, dict[str, Any]]:
    """Every rank raises the same error (import, config, checkpoint): there is no first rank."""
    rng = ctx.rng
    cats = ("environment_error", "python_error", "state_dict_loading", "serialization_error")
    source, loc = pool.pick(rng, lambda s: s.category in cats and s.traceback, head_share=0.8)
    gpn = rng.choice((2, 4, 8))
    version = rng.choice(("new", "mid", "old"))
    ranks = _multirank_setup(ctx, nnodes=1, gpn=gpn, version=version)
    ctx.clock.advance(rng.uniform(3, 200))
    ctx.log("starting workers", rank=0)
    ctx.clock.advance(rng.uniform(1, 60))
    text = _failure_text(source, ctx, loc, vary=False)
    blocks = []
    for r in ranks:
        saved = ctx.lines
        ctx.lines = []
        _add_rank_lines(ctx, r, text)
        blocks.append(ctx.lines)
        ctx.lines = saved
    ctx.lines.extend(_interleave(blocks, rng))
    ctx.clock.advance(rng.uniform(0.3, 2))
    workers = [_worker(ctx, r, gpn, 1) for r in ranks]
    root = rng.choice(workers)
    _launcher_report(ctx, assets, version, failed=root, others=[w for w in workers if w is not root], summary=rng.random() < 0.8, sigterm_pids=[])
    ctx.gpn = gpn
    ctx.style = "rank" if version != "old" else "default"
    return _Truth("failed", source.category, _group(source, loc), None), {"source": source.id, "location": loc}


_SPAWN_OUTER = """\
Traceback (most recent call last):
  File "{root}/{script}", line {line}, in <module>
    mp.spawn(main, args=(world_size,), nprocs=world_size, join=True)
  File "{env}/torch/multiprocessing/spawn.py", line 340, in spawn
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{env}/torch/multiprocessing/spawn.py", line 296, in start_processes
    while not context.join():
              ^^^^^^^^^^^^^^
  File "{env}/torch/multiprocessing/spawn.py", line 211, in join
    raise ProcessRaisedException(msg, error_index, failed_process.pid)
torch.multiprocessing.spawn.ProcessRaisedException:{sp}

-- Process {index} terminated with the following error:
Traceback (most recent call last):
  File "{env}/torch/multiprocessing/spawn.py", line 87, in _wrap
    fn(i, *args)"""


def _spawn_raised(ctx: _Ctx, pool: _Pool) -> tuple[_Truth, dict[str, Any]]:
    """mp.spawn: the parent's ProcessRaisedException quotes the failing child's traceback."""
    rng = ctx.rng
    source, loc = pool.pick(rng, lambda s: s.traceback and s.frames >= 1)
    nprocs = rng.choice((2, 4, 8))
    _preamble(ctx, nnodes=1, gpn=nprocs, multirank=False)
    ctx.gpus = nprocs
    fail_at = ctx.clock.now + timedelta(seconds=_duration(rng))
    _training(ctx, fail_at)
    ctx.clock.advance(rng.uniform(0.5, 20))
    index = rng.randrange(nprocs)
    inner = _failure_text(source, ctx, loc)
    lines = inner.split("\n")
    t = next(i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line)
    before, after = lines[:t], lines[t + 1:]
    if after and re.match(r'\s*File ".*", line \d+, in <module>', after[0]):
        # the child starts in the spawned function, not at the script's top level
        after = after[1:]
        while after and not re.match(r'\s*File "', after[0]) and not _ERROR_LINE.match(after[0]):
            after = after[1:]
    if before:
        ctx.add("\n".join(before), stream="err")
    parent = ctx.pid()
    for _ in range(nprocs - 1):
        ctx.add(f"{ctx.clock.stamp('glog_py', 'W')} {parent} torch/multiprocessing/spawn.py:165] Terminating process {ctx.pid()} via signal SIGTERM", stream="err")
    outer = _SPAWN_OUTER.format(root=ctx.root, script=_script(ctx), line=rng.randint(120, 400), env=ctx.env, index=index, sp=" ")
    ctx.add(outer + "\n" + "\n".join(after), stream="err")
    return _Truth("failed", source.category, _group(source, loc), index), {"source": source.id, "location": loc, "nprocs": nprocs}


def _spawn_exited(ctx: _Ctx, pool: _Pool) -> tuple[_Truth, dict[str, Any]]:
    rng = ctx.rng
    source = rng.choice(pool.spawn_exited)
    _preamble(ctx, nnodes=1, gpn=2, multirank=False)
    ctx.gpus = 2
    _training(ctx, ctx.clock.now + timedelta(seconds=_duration(rng)))
    ctx.clock.advance(rng.uniform(0.5, 20))
    text = _SITE_PACKAGES.sub(ctx.env, source.text).replace("/tmp/cap/", ctx.root + "/")
    ctx.add(_retime(text, ctx.clock), stream="err")
    return _Truth("failed", source.category, _group(source, 0), _SPAWN_EXITED[source.id][1]), {"source": source.id}


def _real_torchrun(ctx: _Ctx, pool: _Pool) -> tuple[_Truth, dict[str, Any]]:
    """A whole torchrun log captured on the H200, inside a SLURM job."""
    rng = ctx.rng
    source = rng.choice(pool.torchrun)
    _preamble(ctx, nnodes=1, gpn=2, multirank=True)
    ctx.gpus = 2
    ctx.clock.advance(rng.uniform(60, 4000))
    text = _relocate(source.text, ctx, 0).replace("repro.py FAILED", f"{_script(ctx)} FAILED")
    ctx.add(_retime(text, ctx.clock), stream="err", prefixed=False)
    return _Truth("failed", source.category, _group(source, 0), _TORCHRUN_CAPTURES[source.id]), {"source": source.id}


def _scheduler(ctx: _Ctx, trap: str) -> tuple[_Truth, dict[str, Any]]:
    """A job the scheduler or the kernel ended: progress, then only the verdict."""
    rng = ctx.rng
    multirank = trap in ("sched_time_limit", "sched_preempted", "sched_node_failure") and rng.random() < 0.5
    gpn = rng.choice((4, 8)) if multirank else 1
    nnodes = 2 if trap == "sched_node_failure" and multirank else 1
    ctx.hosts = [f"{ctx.host[:-3]}{int(ctx.host[-3:]) + i:03d}" for i in range(nnodes)]
    _preamble(ctx, nnodes=nnodes, gpn=gpn, multirank=multirank)
    ranks = list(range(nnodes * gpn)) if multirank else []
    end = ctx.clock.now + timedelta(seconds=_duration(rng))
    _training(ctx, end, ranks=ranks)
    ctx.clock.advance(rng.uniform(1, 120))
    jid, host = ctx.slurm_id, ctx.hosts[-1]
    if trap in ("sched_time_limit", "sched_preempted", "sched_node_failure"):
        reason = {"sched_time_limit": "DUE TO TIME LIMIT", "sched_preempted": "DUE TO PREEMPTION",
                  "sched_node_failure": "DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS"}[trap]
        if trap == "sched_node_failure":
            ctx.add(f"srun: error: Node failure on {host}", stream="err", prefixed=False)
        if rng.random() < 0.6:
            ctx.add(f"srun: Job step aborted: Waiting up to {rng.choice((32, 47, 62))} seconds for job step to finish.", stream="err", prefixed=False)
        ctx.add(f"slurmstepd: error: *** JOB {jid} ON {ctx.host} CANCELLED AT {ctx.clock.stamp('slurm')} {reason} ***", stream="err", prefixed=False)
        if rng.random() < 0.5:
            ctx.add(f"slurmstepd: error: *** STEP {jid}.0 ON {ctx.host} CANCELLED AT {ctx.clock.stamp('slurm')} {reason} ***", stream="err", prefixed=False)
        if multirank and trap == "sched_time_limit" and rng.random() < 0.7:
            # torchrun turns the SIGTERM into a SignalException traceback: a symptom, not the cause
            ctx.clock.advance(rng.uniform(0.1, 2))
            agent = ctx.pid()
            ctx.add(f"{ctx.clock.stamp('glog_py', 'W')} {agent} torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death signal, shutting down workers", stream="err", prefixed=False)
            ctx.add("Traceback (most recent call last):\n"
                    f"  File \"{ctx.python.rsplit('/', 1)[0]}/torchrun\", line 8, in <module>\n    sys.exit(main())\n"
                    f"  File \"{ctx.env}/torch/distributed/elastic/multiprocessing/api.py\", line 84, in _terminate_process_handler\n"
                    "    raise SignalException(f\"Process {os.getpid()} got signal: {sigval}\", sigval=sigval)\n"
                    f"torch.distributed.elastic.multiprocessing.api.SignalException: Process {agent} got signal: 15", stream="err", prefixed=False)
        group = trap
    elif trap == "sched_oom_kill":
        if rng.random() < 0.5:
            ctx.add(f"slurmstepd: error: Detected 1 oom_kill event in StepId={jid}.batch. Some of the step tasks have been OOM Killed.", stream="err")
        else:
            ctx.add(f"srun: error: {host}: task 0: Out Of Memory", stream="err")
            ctx.add(f"slurmstepd: error: Detected 1 oom-kill event(s) in step {jid}.0 cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler.", stream="err")
        group = trap
    elif trap == "sched_killed":
        ctx.add(rng.choice(("Killed", f"/var/spool/slurmd/job{jid}/slurm_script: line {rng.randint(12, 60)}: {ctx.pid()} Killed                  python {_script(ctx)} --config configs/{ctx.proj}.yaml")), stream="err")
        group = trap
    elif trap == "sched_segfault":
        if rng.random() < 0.5:
            ctx.add(_FAULTHANDLER.format(root=ctx.root, script=_script(ctx)), stream="err")
        ctx.add(rng.choice(("Segmentation fault (core dumped)",
                            f"/var/spool/slurmd/job{jid}/slurm_script: line {rng.randint(12, 60)}: {ctx.pid()} Segmentation fault      (core dumped) python {_script(ctx)}")), stream="err")
        group = trap
    elif trap == "sched_bus_error":
        ctx.add(rng.choice(("Bus error (core dumped)", f"/var/spool/slurmd/job{jid}/slurm_script: line {rng.randint(12, 60)}: {ctx.pid()} Bus error               (core dumped) python {_script(ctx)}")), stream="err")
        group = trap
    else:
        ctx.log(rng.choice(("evaluating on the validation set", "saving checkpoint", "syncing results")))
        ctx.clock.advance(rng.uniform(1, 60))
        ctx.add(f"srun: error: {host}: task 0: Exited with exit code {rng.choice((1, 2, 3, 255))}", stream="err")
        group = trap
    ctx.gpn = gpn
    ctx.style = "rank" if multirank else "none"
    return _Truth("failed", SCHEDULER_CATEGORY[trap], group, None), {}


def _succeeded(ctx: _Ctx, trap: str, assets: _Assets) -> tuple[_Truth, dict[str, Any]]:
    rng = ctx.rng
    multirank = trap == "ok_multirank"
    gpn = rng.choice((2, 4, 8)) if multirank else 1
    if multirank:
        ranks = _multirank_setup(ctx, nnodes=1, gpn=gpn, version=rng.choice(("new", "mid")))
    else:
        _preamble(ctx, nnodes=1, gpn=1, multirank=False, declare=ctx.logfmt != "plain" or rng.random() < 0.5)
        ranks = []
    end = ctx.clock.now + timedelta(seconds=_duration(rng))
    warnings: list[str] = []
    if trap == "ok_scary_warnings":
        warnings = _warning_texts(ctx, rng.randint(2, 4))
    _training(ctx, end, ranks=ranks, metrics_trap=trap == "ok_metric_names", warnings=warnings)
    if trap == "ok_caught_retry":
        # a transient failure, logged with its traceback, then training goes on
        ctx.clock.advance(rng.uniform(5, 120))
        ctx.log("could not reach the metrics server, retrying in 10 s", level="ERROR", logger="metrics", stream="err")
        ctx.add(_CAUGHT_CONNECTION_ERROR.format(root=ctx.root, script=_script(ctx), host=ctx.host), stream="err")
        ctx.clock.now = max(ctx.clock.now, max(ctx.clock.stamps))
        _training(ctx, ctx.clock.now + timedelta(seconds=rng.uniform(600, 3600)), ranks=ranks, lines=rng.randint(4, 10))
    _epilogue_ok(ctx)
    if multirank:
        for r in ranks[: rng.randint(1, len(ranks))]:
            ctx.clock.advance(rng.uniform(0.01, 0.5))
            _add_rank_lines(ctx, r, f"[{ctx.clock.stamp('glog_c', 'W')} ProcessGroupNCCL.cpp:1575] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())")
        ctx.gpn = gpn
        ctx.style = rng.choice(("rank", "rank", "default"))
    if trap == "ok_exception_ignored":
        ctx.add(rng.choice(_EXCEPTION_IGNORED).format(root=ctx.root, script=_script(ctx)), stream="err")
    return _Truth("succeeded"), {}


# ---------------------------------------------------------------------------------------------
# Layouts
# ---------------------------------------------------------------------------------------------


def _gz(text: str | bytes) -> bytes:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return gzip.compress(data, compresslevel=6, mtime=0)


def _torchelastic_files(ctx: _Ctx, final_newline: bool) -> dict[str, bytes]:
    """torchrun --log-dir --redirects 3: <log dir>/<run id>/attempt_0/<local rank>/{stdout,stderr}.log, launcher lines apart."""
    rng = ctx.rng
    run = "-".join(_rand_token(rng, n, "0123456789abcdef") for n in (8, 4, 4, 4, 12)) + "_" + _rand_token(rng, 8)
    streams: dict[str, list[str]] = {}
    launcher: list[str] = []
    ranks = sorted({line.rank for line in ctx.lines if line.rank is not None})
    for r in ranks:
        for name in ("stdout", "stderr"):
            streams[f"torchelastic/{run}/attempt_0/{r}/{name}.log"] = []
    for line in ctx.lines:
        if line.rank is None:
            launcher.append(line.text)
        else:
            streams[f"torchelastic/{run}/attempt_0/{line.rank}/{'stdout' if line.stream == 'out' else 'stderr'}.log"].append(line.text)
    files = {k: _join(v, final_newline).encode("utf-8") for k, v in streams.items()}
    files[rng.choice(("stdout.log", f"slurm-{ctx.slurm_id}.out"))] = _join(launcher, final_newline).encode("utf-8")
    return files


def _files_for(ctx: _Ctx, trap: str, layout: str, final_newline: bool = True) -> tuple[dict[str, bytes], bool]:
    """(relative path -> bytes, loose) for this job's lines in the chosen layout."""
    style, gpn = ctx.style, ctx.gpn
    jid, sid = ctx.job_id, ctx.slurm_id
    if ctx.per_rank:
        if ctx.rng.random() < 0.5:
            return _torchelastic_files(ctx, final_newline), False
        parts = _render(ctx, by_rank=True, final_newline=final_newline)
        files = {f"rank_{k.split(':')[1]}.log": v.encode("utf-8") for k, v in parts.items() if k.startswith("rank:")}
        if parts.get("main", "").strip():
            files[f"slurm-{sid}.out"] = parts["main"].encode("utf-8")
        return files, False
    if layout == "split":
        parts = _render(ctx, style=style, gpn=gpn, split=True, final_newline=final_newline)
        names = ctx.rng.choice((("stdout.log", "stderr.log"), (f"slurm-{sid}.out", f"slurm-{sid}.err")))
        return {names[0]: parts["out"].encode("utf-8"), names[1]: parts["err"].encode("utf-8")}, False
    text = _render(ctx, style=style, gpn=gpn, final_newline=final_newline)["main"]
    data = text.encode("utf-8")
    if layout == "loose":
        if ctx.rng.random() < 0.3:
            parts = _render(ctx, style=style, gpn=gpn, split=True, final_newline=final_newline)
            return {f"{jid}.out": parts["out"].encode("utf-8"), f"{jid}.err": parts["err"].encode("utf-8")}, True
        return {f"{jid}.{ctx.rng.choice(('log', 'out', 'txt'))}": data}, True
    if layout == "loose_gz":
        return {f"{jid}.{ctx.rng.choice(('log', 'out'))}.gz": _gz(data)}, True
    if layout == "dir_gz":
        return {ctx.rng.choice(("stdout.log.gz", f"slurm-{sid}.out.gz")): _gz(data)}, False
    return {ctx.rng.choice((f"slurm-{sid}.out", f"slurm-{sid}.out", "stdout.log", "train.log")): data}, False


# ---------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------


def _counts(n_jobs: int) -> list[str]:
    weights = SUCCEEDED_TRAPS + FAILED_TRAPS
    if n_jobs < len(weights):
        raise ValueError(f"n_jobs must be at least {len(weights)} so that every trap appears")
    total = sum(w for _, w in weights)
    exact = [(t, w * n_jobs / total) for t, w in weights]
    counts = {t: max(1, int(x)) for t, x in exact}
    order = sorted(exact, key=lambda tx: -(tx[1] - int(tx[1])))
    i = 0
    while sum(counts.values()) < n_jobs:
        counts[order[i % len(order)][0]] += 1
        i += 1
    while sum(counts.values()) > n_jobs:
        biggest = max(counts, key=lambda t: (counts[t], t))
        counts[biggest] -= 1
    return [t for t, _ in weights for _ in range(counts[t])]


def _job_ids(rng: random.Random, n: int) -> list[str]:
    ids: list[str] = []
    seen: set[str] = set()
    slurm = rng.randint(3_100_000, 8_900_000)
    k = 0
    while len(ids) < n:
        k += 1
        r = rng.random()
        slurm += rng.randint(1, 400)
        if r < 0.6:
            jid = str(slurm)
        elif r < 0.85:
            jid = f"job-{rng.randint(1, 9999):04d}"
        else:
            jid = f"{rng.choice(_PROJECTS)}-{rng.randint(1, 999):03d}"
        if jid not in seen:
            seen.add(jid)
            ids.append(jid)
    return ids


def _make_pool(sources: list[Source], rng: random.Random) -> _Pool:
    plain = [s for s in sources if s.kind == "plain"]
    captures = [s for s in plain if s.relocatable]
    corpus_tb = [s for s in plain if s.id.startswith("corpus/") and s.traceback and s.frames >= 2]
    heads: list[tuple[Source, int]] = [(s, 0) for s in _one_per_category(captures, rng, 16)]
    heads += [(s, 0) for s in _one_per_category(corpus_tb, rng, 8)]
    # the same message raised at other places in the user's code
    moved = [s for s, _ in heads if s.relocatable][:8]
    heads += [(s, 1) for s in moved[:6]] + [(s, 2) for s in moved[6:8]]
    weights = [1.0 / (i + 1) ** 0.7 for i in range(len(heads))]
    return _Pool(plain, heads, weights, [s for s in sources if s.kind == "torchrun"], [s for s in sources if s.kind == "spawn_exited"])


# Categories in roughly the order a GPU cluster sees them; the first popular root causes come from these.
_COMMON = ("cuda_oom", "shape_mismatch", "dataloader_error", "device_side_assert", "state_dict_loading", "nccl_error",
           "cpu_oom", "nan_inf", "device_mismatch", "dtype_mismatch", "index_error", "python_error")


def _one_per_category(sources: list[Source], rng: random.Random, k: int) -> list[Source]:
    """Up to ``k`` sources, each of another category as long as categories last."""
    by_cat: dict[str, list[Source]] = {}
    for s in sources:
        by_cat.setdefault(s.category, []).append(s)
    rest = sorted(c for c in by_cat if c not in _COMMON)
    rng.shuffle(rest)
    # common failures first: they get the heaviest weights
    cats = [c for c in _COMMON if c in by_cat] + rest
    chosen: list[Source] = []
    while len(chosen) < k and any(by_cat.values()):
        for c in cats:
            if by_cat[c] and len(chosen) < k:
                chosen.append(by_cat[c].pop(rng.randrange(len(by_cat[c]))))
    return chosen


def _start_time(rng: random.Random) -> datetime:
    base = datetime(2024, 3, 1, 0, 0, 0)
    return base + timedelta(seconds=rng.uniform(0, 75 * 86400))


def _build_job(index: int, job_id: str, trap: str, seed: int, pool: _Pool, assets: _Assets, big_noise_mb: float) -> dict[str, Any]:
    rng = random.Random(f"triage-corpus:{seed}:{index}")
    slurm_id = job_id if job_id.isdigit() else str(rng.randint(3_100_000, 8_900_000))
    plain_ok = trap in ("single_exception", "loose_file", "gzipped", "ok_clean", "ok_metric_names", "ok_nonutf8")
    logfmt = "plain" if plain_ok and rng.random() < 0.18 else None
    ctx = _new_ctx(rng, job_id, slurm_id, _start_time(rng), logfmt=logfmt)
    layout = "slurm_dir"
    meta: dict[str, Any] = {}
    final_newline = True
    if trap in _SUCCEEDED and trap not in ("truncated_before", "attempts_final_ok"):
        truth, meta = _succeeded(ctx, trap, assets)
        layout = rng.choice(("slurm_dir", "slurm_dir", "loose", "loose_gz", "dir_gz", "split"))
    elif trap == "truncated_before":
        # a failing run whose log stops before anything went wrong
        _preamble(ctx, nnodes=1, gpn=1, multirank=False)
        _training(ctx, ctx.clock.now + timedelta(seconds=_duration(rng)))
        truth = _Truth("succeeded")
        final_newline = rng.random() < 0.5
        layout = rng.choice(("slurm_dir", "loose"))
    elif trap in ("single_exception", "loose_file", "gzipped", "nonutf8_junk", "split_streams", "big_noise", "other_location", "varied_values"):
        src = None
        if trap == "other_location":
            moved = [(h, w) for h, w in zip(pool.heads, pool.weights, strict=True) if h[1] > 0]
            src = rng.choices([h for h, _ in moved], weights=[w for _, w in moved])[0]
        elif trap == "varied_values":
            same = [h for h in pool.heads if h[1] == 0 and h[0].relocatable]
            src = rng.choice(same[:6])
        truth, meta = _single(ctx, pool, trap, src=src, noise_mb=(big_noise_mb if trap == "big_noise" else 0.0))
        layout = {"loose_file": "loose", "gzipped": rng.choice(("loose_gz", "dir_gz")), "split_streams": "split"}.get(trap, "slurm_dir")
    elif trap in ("torchrun_cascade", "torchrun_no_root_cause", "torchrun_old_format", "multinode_watchdog", "remote_error_cascade", "sticky_cuda"):
        truth, meta = _cascade(ctx, pool, assets, trap)
    elif trap == "srun_prefix":
        truth, meta = _srun(ctx, pool, assets)
    elif trap == "per_rank_files":
        truth, meta = _per_rank(ctx, pool, assets)
    elif trap in ("hardware_ecc", "hardware_bus"):
        truth, meta = _hardware(ctx, pool, assets, trap.split("_")[1])
    elif trap == "pure_hang":
        truth, meta = _hang(ctx, assets)
    elif trap == "all_ranks_identical":
        truth, meta = _identical(ctx, pool, assets)
    elif trap == "mp_spawn_raised":
        truth, meta = _spawn_raised(ctx, pool)
    elif trap == "mp_spawn_exited":
        truth, meta = _spawn_exited(ctx, pool)
    elif trap == "real_torchrun_capture":
        truth, meta = _real_torchrun(ctx, pool)
    elif trap.startswith("sched_"):
        truth, meta = _scheduler(ctx, trap)
        layout = rng.choice(("slurm_dir", "slurm_dir", "loose"))
    elif trap in ("truncated_inside", "truncated_after"):
        truth, meta, final_newline = _truncated(ctx, pool, trap)
    elif trap in ("attempts", "attempts_final_ok"):
        return _attempts(index, job_id, trap, seed, pool, assets, rng, ctx)
    else:  # pragma: no cover - every trap is handled above
        raise AssertionError(trap)

    files, loose = _files_for(ctx, trap, layout, final_newline)
    if trap in ("nonutf8_junk", "ok_nonutf8"):
        files = {name: (data if name.endswith(".gz") else _inject_junk(data, rng)) for name, data in files.items()}
    return _record(job_id, trap, truth, ctx, files, loose, {**meta, "layout": layout})


def _truncated(ctx: _Ctx, pool: _Pool, trap: str) -> tuple[_Truth, dict[str, Any], bool]:
    rng = ctx.rng
    if trap == "truncated_inside":
        source, loc = pool.pick(rng, lambda s: s.traceback and s.frames >= 2)
    else:
        source, loc = pool.pick(rng, lambda s: s.traceback)
    _preamble(ctx, nnodes=1, gpn=1, multirank=False)
    _training(ctx, ctx.clock.now + timedelta(seconds=_duration(rng)))
    ctx.clock.advance(rng.uniform(0.5, 30))
    lines = _failure_text(source, ctx, loc).split("\n")
    frame_idx = [i for i, line in enumerate(lines) if re.match(r'\s*File "', line)]
    if trap == "truncated_inside":
        # cut after some frame of the last traceback, before its exception line
        last_tb = max((i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line), default=-1)
        frames = [i for i in frame_idx if i > last_tb] or frame_idx
        cut = rng.choice(frames[:-1] or frames) + 1
        if cut < len(lines) and not re.match(r'\s*File "', lines[cut]) and not _ERROR_LINE.match(lines[cut]):
            cut += 1  # keep the frame's source line
        ctx.add("\n".join(lines[:cut]), stream="err")
        return _Truth("failed", "unknown", f"truncated:{ctx.job_id}"), {"source": source.id, "location": loc, "cut": cut}, False
    # after: stop right after the exception line (the rest of a long message and any summary are lost)
    exc = max(i for i, line in enumerate(lines) if _ERROR_LINE.match(line) or "Error:" in line) if any(
        _ERROR_LINE.match(line) or "Error:" in line for line in lines) else len(lines) - 1
    ctx.add("\n".join(lines[: exc + 1]), stream="err")
    return _Truth("failed", source.category, _group(source, loc)), {"source": source.id, "location": loc}, rng.random() < 0.5


def _attempts(index: int, job_id: str, trap: str, seed: int, pool: _Pool, assets: _Assets, rng: random.Random, ctx: _Ctx) -> dict[str, Any]:
    """Several attempts of one job; the final attempt decides. Times run on across attempts."""
    first = _new_ctx(rng, job_id, ctx.slurm_id, ctx.clock.now)
    t0, _ = _single(first, pool, "single_exception", src=pool.pick(rng, lambda s: s.traceback))
    gap = timedelta(seconds=rng.uniform(30, 600))
    final = _new_ctx(rng, job_id, ctx.slurm_id, max(first.clock.stamps or [first.clock.now]) + gap, logfmt=first.logfmt)
    final.root, final.env, final.user, final.proj = first.root, first.env, first.user, first.proj
    if trap == "attempts_final_ok":
        truth, meta = _succeeded(final, "ok_clean", assets)
    else:
        truth, meta = _single(final, pool, "single_exception")
    naming = rng.choice(("attempt_dirs", "rotated"))
    a = _render(first)["main"].encode("utf-8")
    b = _render(final)["main"].encode("utf-8")
    files = {"attempt_0/stdout.log": a, "attempt_1/stdout.log": b} if naming == "attempt_dirs" else {"stdout.log.1": a, "stdout.log": b}
    stamps = first.clock.stamps + final.clock.stamps
    merged = _Ctx(rng=rng, job_id=job_id, slurm_id=ctx.slurm_id, clock=_Clock(final.clock.now), user=first.user, proj=first.proj,
                  root=first.root, env=first.env, python=first.python, hosts=first.hosts, logfmt=first.logfmt, ansi=first.ansi,
                  flavor=first.flavor, gpus=final.gpus if final.gpus is not None else first.gpus)
    merged.clock.stamps = stamps
    return _record(job_id, trap, truth, merged, files, False, {**meta, "layout": naming, "first_attempt": t0.group})


def _record(job_id: str, trap: str, truth: _Truth, ctx: _Ctx, files: dict[str, bytes], loose: bool, meta: dict[str, Any]) -> dict[str, Any]:
    stamps = ctx.clock.stamps
    start = min(stamps) if stamps else None
    end = max(stamps) if stamps else None
    hours = None
    if start is not None and end is not None and ctx.gpus:
        hours = round(ctx.gpus * (end - start).total_seconds() / 3600.0, 4)
    row = {
        "job_id": job_id, "status": truth.status,
        "category": truth.category if truth.status == "failed" else None,
        "group": truth.group if truth.status == "failed" else None,
        "first_failing_rank": truth.first_failing_rank if truth.status == "failed" else None,
        "gpu_hours": hours, "trap": trap,
    }
    manifest = {"job_id": job_id, "trap": trap, "files": sorted(files), "loose": loose, "gpus": ctx.gpus,
                "start": start.isoformat() if start else None, "end": end.isoformat() if end else None,
                "logfmt": ctx.logfmt, "notes": ctx.notes, **meta}
    return {"truth": row, "manifest": manifest, "files": files, "loose": loose}


def generate(out_dir: Path, n_jobs: int = 320, seed: int = 0, big_noise_mb: int = 20, *, root: Path | None = None) -> Path:
    """Write ``out_dir/logs/``, ``out_dir/truth.jsonl`` and ``out_dir/manifest.jsonl``; returns ``out_dir/logs``.

    Deterministic for a given ``seed`` and repository state. ``big_noise_mb`` sizes the two
    ``big_noise`` logs (0 keeps them small, for tests). Raises ValueError when ``n_jobs`` is below
    the number of traps.
    """
    from assistant.eval.cases import repo_root

    root = root or repo_root()
    out_dir = Path(out_dir)
    logs = out_dir / "logs"
    if logs.exists():
        _clear(logs)
    logs.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"triage-corpus:{seed}")
    sources = load_sources(root)
    pool = _make_pool(sources, rng)
    assets = _load_assets(root)
    traps = _counts(n_jobs)
    rng.shuffle(traps)
    ids = _job_ids(rng, n_jobs)
    rows: list[dict[str, Any]] = []
    manifest: list[dict[str, Any]] = []
    for i, (job_id, trap) in enumerate(zip(ids, traps, strict=True)):
        job = _build_job(i, job_id, trap, seed, pool, assets, float(big_noise_mb) if big_noise_mb else 0.2)
        base = logs if job["loose"] else logs / job_id
        for name, data in sorted(job["files"].items()):
            path = base / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        rows.append(job["truth"])
        manifest.append(job["manifest"])
    rows.sort(key=lambda r: r["job_id"])
    manifest.sort(key=lambda r: r["job_id"])
    (out_dir / "truth.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    (out_dir / "manifest.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in manifest), encoding="utf-8")
    return logs


def _clear(path: Path) -> None:
    import shutil

    shutil.rmtree(path)


def load_truth(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``truth.jsonl`` (or any JSONL of contract rows)."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


__all__ = ["generate", "load_sources", "load_truth", "Source", "TRAPS", "SCHEDULER_CATEGORY", "has_timestamps"]
