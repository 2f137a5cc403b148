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
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assistant.triage.events import final_headline
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
        # Line numbers of the frame each signature was seen at: a log without source lines is matched by its line.
        self._lines: dict[tuple[str, int | str, str], set[int]] = {}

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
        part: int | str = f"stem:{failure_stem(_direct_cause(report.failure_text) or message)}" if location else cluster_id
        line = report.location_line if location else None
        signature = self._frame_signature(kind, part, location, line)
        if line is not None:
            self._lines.setdefault(signature, set()).add(line)
        group = self._groups.get(signature)
        if group is None:
            digest = hashlib.sha1(f"{self._miner.drain.id_to_cluster[cluster_id].get_template()}|{location}".encode("utf-8", "replace")).hexdigest()[:8]
            group = f"{kind}-{digest}"
            while group in self._groups.values():
                digest = hashlib.sha1(digest.encode()).hexdigest()[:8]
                group = f"{kind}-{digest}"
            self._groups[signature] = group
        return group

    def _frame_signature(self, kind: str, part: int | str, location: str, line: int | None = None) -> tuple[str, int | str, str]:
        """The group signature, the frame's source line included when the log shows it.

        Two source lines of one function are two frames (two groups); but some logs lack source lines (no source on the
        node). A job without one joins the group of its function seen at the same line number, else the single group of
        its function; a job with one joins a group made only of jobs without one (at its line number, when known)."""
        frame, source = _frame_of(location), _source_of(location)
        siblings = [sig for sig in self._groups if sig[0] == kind and sig[1] == part and _frame_of(sig[2]) == frame]
        if source:
            exact: tuple[str, int | str, str] = (kind, part, f"{frame}: {source}")
            if exact in self._groups or not siblings:
                return exact
            bare = [sig for sig in siblings if not _source_of(sig[2])]
            same_line = [sig for sig in bare if line is not None and line in self._lines.get(sig, ())]
            unnumbered = [sig for sig in bare if not self._lines.get(sig)]
            if same_line:
                self._groups[exact] = self._groups[same_line[0]]  # this frame's source line now names that group
            elif unnumbered and len(unnumbered) == len(bare) and len(bare) == len(siblings):
                self._groups[exact] = self._groups[unnumbered[0]]
            return exact
        # No source line: the line number stands in for it (the same code gives the same numbers).
        exact = (kind, part, frame if line is None else f"{frame} @{line}")
        if exact in self._groups or not siblings:
            return exact
        at_line = [sig for sig in siblings if line is not None and line in self._lines.get(sig, ())]
        if len({self._groups[sig] for sig in at_line}) == 1:
            return at_line[0]
        return siblings[0] if not at_line and len({self._groups[sig] for sig in siblings}) == 1 else exact

    def template(self, report: JobReport) -> str:
        """The masked template a failed job's message belongs to now."""
        message, _ = _signature(report)
        cluster = self._miner.match(message, full_search_strategy="fallback")
        return cluster.get_template() if cluster is not None else message

    def to_json(self) -> dict[str, Any]:
        """The miner and the group table as plain JSON data (no pickle: a state file is data, never code).

        Drain3's own persistence (jsonpickle) can instantiate any class named in the file, so it is not
        used: the clusters (id, template tokens, size), the prefix tree and the group table are written
        explicitly and read back field by field."""
        drain = self._miner.drain
        clusters = [{"id": int(c.cluster_id), "tokens": list(c.log_template_tokens), "size": int(c.size)}
                    for c in drain.id_to_cluster.values()]
        groups = [{"kind": k, "part": p, "location": loc, "group": g, "lines": sorted(self._lines.get((k, p, loc), ()))}
                  for (k, p, loc), g in self._groups.items()]
        return {"format": GROUPER_FORMAT, "clusters_counter": int(drain.clusters_counter), "clusters": clusters,
                "tree": _node_to_json(drain.root_node), "groups": groups}

    @classmethod
    def from_json(cls, data: Any) -> Grouper:
        """A grouper rebuilt from :meth:`to_json` data; TriageError when the data is not that shape."""
        from drain3.drain import LogCluster

        try:
            if not isinstance(data, dict) or data.get("format") != GROUPER_FORMAT:
                raise ValueError(f"not a {GROUPER_FORMAT} document")
            grouper = cls()
            drain = grouper._miner.drain
            for c in data["clusters"]:
                cluster = LogCluster([_text(t) for t in c["tokens"]], _int(c["id"]))
                cluster.size = _int(c["size"])
                drain.id_to_cluster[cluster.cluster_id] = cluster
            drain.clusters_counter = _int(data["clusters_counter"])
            drain.root_node = _node_from_json(data["tree"], depth=0)
            for g in data["groups"]:
                part = g["part"] if isinstance(g["part"], str) else _int(g["part"])
                signature = (_text(g["kind"]), part, _text(g["location"]))
                grouper._groups[signature] = _text(g["group"])
                lines = {_int(n) for n in g.get("lines", [])}  # absent in files saved before line numbers were kept
                if lines:
                    grouper._lines[signature] = lines
        except (KeyError, TypeError, ValueError) as exc:
            from assistant.errors import TriageError

            raise TriageError(f"the saved grouper is not valid {GROUPER_FORMAT} JSON ({type(exc).__name__}: {exc})") from None
        return grouper

    def save(self, path: str | Path) -> None:
        """Write the miner and the group table to ``path`` as JSON (see :meth:`to_json`)."""
        Path(path).write_text(json.dumps(self.to_json()), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Grouper:
        """A grouper restored from :meth:`save` (a fresh one when the file is absent).

        A file from an older version (a pickle) is refused with a TriageError, never unpickled."""
        p = Path(path)
        if not p.exists():
            return cls()
        return cls.from_json(parse_grouper_bytes(p.read_bytes(), str(p)))


GROUPER_FORMAT = "torchhelp-grouper-v1"
_MAX_TREE_DEPTH = 64  # Drain3's prefix tree is a few levels deep; a deeper document is not ours


def parse_grouper_bytes(raw: bytes, where: str) -> Any:
    """JSON data of a saved grouper; TriageError (never an unpickle) for a pickle or anything not JSON."""
    from assistant.errors import TriageError

    if raw[:1] == b"\x80":  # pickle protocol 2+: what versions before the JSON state wrote
        raise TriageError(f"{where} holds a grouper saved by an older torchhelp as a pickle, which is never loaded "
                          "(a pickle can run code). Move the file away (or delete it) to start fresh.")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise TriageError(f"{where}: the saved grouper is not JSON; move the file away to start fresh") from None


_LINE_SUFFIX = re.compile(r" @\d+$")


def _frame_of(location: str) -> str:
    """The frame part of a signature's location ("file.py:function"), without a source line or line number."""
    return _LINE_SUFFIX.sub("", location.partition(": ")[0].rstrip(":"))


def _source_of(location: str) -> str:
    """The source line part of a signature's location ("" when the log showed none)."""
    return location.partition(": ")[2]


def _text(value: Any) -> str:
    """A string field of the saved grouper (anything else is a ValueError)."""
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return value


def _int(value: Any) -> int:
    """An integer field of the saved grouper (anything else, booleans included, is a ValueError)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"expected an integer, got {type(value).__name__}")
    return value


def _node_to_json(node: Any) -> dict[str, Any]:
    """A Drain3 prefix-tree node as JSON: its children by token and its cluster ids."""
    return {"children": {str(k): _node_to_json(v) for k, v in node.key_to_child_node.items()},
            "cluster_ids": [int(i) for i in node.cluster_ids]}


def _node_from_json(data: Any, depth: int) -> Any:
    """A Drain3 prefix-tree node from :func:`_node_to_json` data."""
    from drain3.drain import Node

    if depth > _MAX_TREE_DEPTH or not isinstance(data, dict):
        raise ValueError("malformed prefix tree")
    node = Node()
    node.cluster_ids = [_int(i) for i in data["cluster_ids"]]
    for token, child in dict(data["children"]).items():
        node.key_to_child_node[_text(token)] = _node_from_json(child, depth + 1)
    return node


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


_DIRECT_CAUSE = "The above exception was the direct cause of the following exception"


def _direct_cause(text: str) -> str | None:
    """The exception line of the first cause in a ``raise ... from`` chain (None when the failure is not one).

    A wrapper raised from a cause ("DataLoader worker exited unexpectedly" from "worker is killed by signal: Killed",
    from "... Bus error") says the same for different root causes; the cause it was raised from tells them apart."""
    if _DIRECT_CAUSE not in text:
        return None
    return final_headline(text.split(_DIRECT_CAUSE, 1)[0].splitlines()) or None


def group_reports(reports: list[JobReport], stop: Callable[[], bool] | None = None) -> tuple[dict[str, str], Grouper]:
    """Group ids for every failed report (added in job-id order), and the grouper holding the templates.

    ``stop`` is asked before each report: True raises :class:`~assistant.triage.extract.Cancelled`.
    """
    from assistant.triage.extract import Cancelled

    grouper = Grouper()
    assigned: dict[str, str] = {}
    for report in sorted(reports, key=lambda r: r.job_id):
        if stop is not None and stop():
            raise Cancelled()
        if report.status == "failed":
            assigned[report.job_id] = grouper.key(report)
    return assigned, grouper


def _new_miner():
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
