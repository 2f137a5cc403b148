"""Group failed jobs by root cause: the masked error template (Drain3) plus the user's failing code location.

Volatile tokens (numbers, sizes, shapes, paths, hosts, addresses, pids, ranks, timestamps, job
ids) are masked by Drain3's masking instructions, and Drain3 mines the templates. A group is
(category, template cluster, location in the user's own code): the same allocator message at two
different lines of the user's code is two groups; the same error with another batch size or path
is one. Jobs are added in job-id order, so the result does not depend on how extraction was
scheduled.
"""

from __future__ import annotations

import hashlib
import pickle
import re
from pathlib import Path
from typing import Any

from assistant.triage.model import JobReport
from assistant.triage.verdict import failure_stem

# Order matters: specific shapes before bare numbers.
_MASKS: tuple[tuple[str, str], ...] = (
    (r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b", "UUID"),
    (r"\b\d{4}-\d{2}-\d{2}[T _]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?", "TIME"),
    (r"\b\d{2}:\d{2}:\d{2}(?:\.\d+)?\b", "TIME"),
    (r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b", "IP"),
    (r"\b0x[0-9a-fA-F]+\b", "HEX"),
    (r"(?:[A-Za-z]:)?(?:[\\/][\w.@~+-]+){2,}[\\/]?", "PATH"),
    (r"torch\.Size\(\[[\d, ]*\]\)|\[\d+(?:, ?\d+)+\]|\(\d+(?:, ?\d+)+\)|\b\d+(?:x\d+)+\b", "SHAPE"),
    (r"\b\d+(?:\.\d+)? ?(?:[KMGT]i?B|bytes|B)\b", "SIZE"),
    (r"\b[\w-]*?\d+[\w-]*\.(?:local|internal|cluster|com|net|org)\b|\b(?:node|gpu|host|compute|worker)[\w-]*?\d+\b", "HOST"),
    (r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.])", "NUM"),
)
# glog / rank decorations that precede an error line and vary per rank and per second.
_DECORATION = re.compile(r"^(?:\[(?:rank|default)\d+\]:\s*)?(?:\[?[IWEF]\d{4} [\d:.]+(?: \d+)? [\w./-]+:\d+\]\s*)?")
_MASKED_NUMBER = re.compile(r"\d+")


def normalize_location(location: str | None) -> str:
    """The part of a code location that names the root cause: file, function and source line, numbers masked."""
    if not location:
        return ""
    return _MASKED_NUMBER.sub("#", location.strip())


class Grouper:
    """Assign failed jobs to groups; state can be saved and loaded (watch mode keeps ids across restarts)."""

    def __init__(self) -> None:
        self._miner = _new_miner()
        self._groups: dict[tuple[str, int | str, str], str] = {}  # (category or reason, Drain3 cluster or stem, location) -> id

    def key(self, report: JobReport) -> str:
        """The group id of a failed job (adds its template to the miner)."""
        message, location = _signature(report)
        result = self._miner.add_log_message(message or "failed")
        cluster_id = int(result["cluster_id"])
        # The category when it is known (watch mode); in a batch, how the run ended (the category
        # is decided afterwards, once per group).
        kind = report.category or _SAME_ENDING.get(report.reason, report.reason) or "failed"
        # At a frame of the user's code, a failure is one root cause whatever its numbers, names or PyTorch version's
        # wording: its stem (first words of the message) stands for the template. Without a frame the mined template
        # does (scheduler verdicts, hangs, launcher reports).
        part: int | str = f"stem:{failure_stem(message)}" if location else cluster_id
        signature = self._frame_signature(kind, part, location)
        group = self._groups.get(signature)
        if group is None:
            digest = hashlib.sha1(f"{self._miner.drain.id_to_cluster[cluster_id].get_template()}|{location}".encode("utf-8", "replace")).hexdigest()[:8]
            group = f"{kind}-{digest}"
            while group in self._groups.values():
                digest = hashlib.sha1(digest.encode()).hexdigest()[:8]
                group = f"{kind}-{digest}"
            self._groups[signature] = group
        return group

    def _frame_signature(self, kind: str, part: int | str, location: str) -> tuple[str, int | str, str]:
        """The group signature, the frame's source line included when the log shows it.

        Two source lines of one function are two frames (two groups); but some logs lack source lines (no source on the
        node), so a job without one joins the single group of its function, and a job with one joins a group made only of
        jobs without one."""
        frame, _, source = location.partition(": ")
        frame = frame.rstrip(":")
        siblings = [sig for sig in self._groups if sig[0] == kind and sig[1] == part and sig[2].partition(": ")[0].rstrip(":") == frame]
        exact = (kind, part, f"{frame}: {source}" if source else frame)
        if exact in self._groups or not siblings:
            return exact
        if not source:
            return siblings[0] if len({self._groups[s] for s in siblings}) == 1 else exact
        bare = [sig for sig in siblings if not sig[2].partition(": ")[2]]
        with_source = [sig for sig in siblings if sig[2].partition(": ")[2]]
        if bare and not with_source:
            self._groups[exact] = self._groups[bare[0]]  # this frame's source line now names that group
        return exact

    def template(self, report: JobReport) -> str:
        """The masked template a failed job's message belongs to now."""
        message, _ = _signature(report)
        cluster = self._miner.match(message, full_search_strategy="fallback")
        return cluster.get_template() if cluster is not None else message

    def save(self, path: str | Path) -> None:
        """Write the miner and the group table to ``path`` (pickle of plain data and Drain3's own state)."""
        state: dict[str, Any] = {"drain": pickle.dumps(self._miner.drain), "groups": self._groups}
        Path(path).write_bytes(pickle.dumps(state))

    @classmethod
    def load(cls, path: str | Path) -> Grouper:
        """A grouper restored from :meth:`save` (a fresh one when the file is absent)."""
        grouper = cls()
        p = Path(path)
        if p.exists():
            state = pickle.loads(p.read_bytes())  # our own file under TORCHHELP_HOME, never user input
            grouper._miner.drain = pickle.loads(state["drain"])
            grouper._groups = dict(state["groups"])
        return grouper


# Endings whose root cause is the ending itself: the scheduler's verdict or a signal, however the
# scheduler version words it. A collective timeout is told apart by its collective.
_VERDICT_REASONS = {"time_limit", "preempted", "cancelled", "node_failure", "oom_kill", "killed", "segfault", "bus_error", "abort", "sigterm"}
_OP_TYPE = re.compile(r"OpType=(\w+)")
# Endings that are one root cause however they were seen: a SIGKILL with nothing else said is the OOM killer's (what
# the scheduler's oom_kill line or a pod's OOMKilled says outright).
_SAME_ENDING = {"killed": "oom_kill"}


def _signature(report: JobReport) -> tuple[str, str]:
    """The message Drain3 mines and the location part of a failed job's group key."""
    location = normalize_location(report.location)
    if report.reason in ("collective_timeout", "collective_desync"):
        op = _OP_TYPE.search(report.failure_text or report.headline)
        what = "timed out" if report.reason == "collective_timeout" else "desynchronised"
        return f"collective operation {what}", f"collective {op.group(1) if op else '?'} {what}"
    if report.reason in _VERDICT_REASONS and not location and "Traceback" not in report.failure_text:
        return f"job ended: {_SAME_ENDING.get(report.reason, report.reason).replace('_', ' ')}", ""
    message = _DECORATION.sub("", (report.headline or report.title or report.reason or "failed").strip())[:1000]
    return message, location


def group_reports(reports: list[JobReport]) -> tuple[dict[str, str], Grouper]:
    """Group ids for every failed report (added in job-id order), and the grouper holding the templates."""
    grouper = Grouper()
    assigned: dict[str, str] = {}
    for report in sorted(reports, key=lambda r: r.job_id):
        if report.status == "failed":
            assigned[report.job_id] = grouper.key(report)
    return assigned, grouper


def _new_miner():  # type: ignore[no-untyped-def]
    try:
        from drain3 import TemplateMiner
        from drain3.masking import MaskingInstruction
        from drain3.template_miner_config import TemplateMinerConfig
    except ImportError:
        from assistant.errors import TriageError

        raise TriageError("grouping needs Drain3: pip install 'torchhelp[triage]'") from None

    config = TemplateMinerConfig()
    config.masking_instructions = [MaskingInstruction(pattern, name) for pattern, name in _MASKS]
    config.drain_sim_th = 0.5
    config.drain_depth = 5
    config.parametrize_numeric_tokens = True
    config.profiling_enabled = False
    return TemplateMiner(config=config)
