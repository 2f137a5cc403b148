"""When a job ran and on how many GPUs: timestamps and GPU counts read from its log lines.

GPU time lost is GPUs x (end - start). Start and end are the first and last timestamps the logs
hold (logger lines, scheduler verdicts, ``date`` output, torchrun's summary); the GPU count comes
from the strongest statement available: the scheduler's variables, then ``nvidia-smi -L``, then
the launcher's process count, then the world size, then the ranks that wrote to the log.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
_ISO = re.compile(r"(?<!\d)(20\d{2})[-/](\d{2})[-/](\d{2})[T _](\d{2}):(\d{2}):(\d{2})(?:[.,]\d+)?\s?(Z|[+-]\d{2}:?\d{2})?(?!\d)")
_US = re.compile(r"(?<![\d/])(\d{2})/(\d{2})/(20\d{2})[ ,]+(\d{2}):(\d{2}):(\d{2})(?:\s?([AP]M))?")
_CTIME = re.compile(
    r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\w* +(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\w* +(\d{1,2}) +(\d{1,2}):(\d{2}):(\d{2})(?: ([AP]M))?(?: [A-Z]{2,5})? +(20\d{2})\b"
)
# glog lines ("E1126 02:08:31.145000 784 file.py:12]") give month and day but no year.
_GLOG = re.compile(r"(?:^|\[)[IWEF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})")


def line_time(text: str) -> float | None:
    """Epoch seconds of the first full timestamp (with a year) on the line; naive times are read as UTC."""
    if ":" not in text or len(text) < 14:
        return None
    m = _ISO.search(text)
    if m:
        y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
        return _epoch(y, mo, d, h, mi, s, m.group(7))
    m = _US.search(text)
    if m:
        a, b, y, h, mi, s = (int(x) for x in m.groups()[:6])
        mo, d = (a, b) if a <= 12 else (b, a)
        return _epoch(y, mo, d, _ampm(h, m.group(7)), mi, s, None)
    m = _CTIME.search(text)
    if m:
        mo = _MONTHS[m.group(1).lower()[:3]]
        return _epoch(int(m.group(7)), mo, int(m.group(2)), _ampm(int(m.group(3)), m.group(6)), int(m.group(4)), int(m.group(5)), None)
    return None


def order_time(text: str) -> float | None:
    """A timestamp good enough to order events within one job (glog month/day times included)."""
    t = line_time(text)
    if t is not None:
        return t
    m = _GLOG.search(text)
    if m:
        mo, d, h, mi, s = (int(x) for x in m.groups())
        if 1 <= mo <= 12 and 1 <= d <= 31:
            return float((((mo * 31 + d) * 24 + h) * 60 + mi) * 60 + s)
    return None


_HALF_YEAR = 183 * 86400.0


def has_glog_stamp(text: str) -> bool:
    """Whether the line opens with a glog / c10 stamp (month and day, no year)."""
    return _GLOG.match(text) is not None


def glog_time(text: str, near: float) -> float | None:
    """Epoch seconds of a glog / c10 stamp ("W1014 12:03:13.734285"), which has no year: the year that puts it nearest
    ``near`` (a full timestamp of the same job), so a job that ran over New Year still reads right. None: no stamp."""
    if not text or text[0] not in "IWEF[":
        return None  # glog stamps open the line (or its "[...]" prefix): a cheap test before the pattern
    m = _GLOG.match(text)
    if m is None:
        return None
    mo, d, h, mi, s = (int(x) for x in m.groups())
    year = time.gmtime(near).tm_year
    t = _epoch(year, mo, d, h, mi, s, None)
    if t is None or abs(t - near) < _HALF_YEAR:
        return t  # the usual case: one calendar call
    other = _epoch(year - 1 if t > near else year + 1, mo, d, h, mi, s, None)
    return other if other is not None and abs(other - near) < abs(t - near) else t


def _ampm(hour: int, marker: str | None) -> int:
    if marker == "PM" and hour < 12:
        return hour + 12
    if marker == "AM" and hour == 12:
        return 0
    return hour


def _epoch(y: int, mo: int, d: int, h: int, mi: int, s: int, tz: str | None) -> float | None:
    if not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and s < 62):
        return None
    try:
        t = calendar.timegm((y, mo, d, h, mi, min(s, 59), 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    if tz and tz != "Z":
        sign = -1 if tz[0] == "-" else 1
        digits = tz[1:].replace(":", "")
        t -= sign * (int(digits[:2]) * 3600 + int(digits[2:4] or 0) * 60)
    return float(t)


def span(lines: Iterable[str]) -> tuple[float | None, float | None]:
    """The first and last timestamps among ``lines`` (in the order given)."""
    first = last = None
    for text in lines:
        t = line_time(text)
        if t is None:
            continue
        if first is None or t < first:
            first = t if first is None else min(first, t)
        if last is None or t > last:
            last = t
    return first, last


_INT = r"(\d{1,6})"
_GPU_PATTERNS: dict[str, re.Pattern[str]] = {
    "slurm_gpus": re.compile(r"\bSLURM_GPUS=(?:[\w-]+:)?" + _INT + r"\b"),
    "gpus_on_node": re.compile(r"\bSLURM_GPUS_ON_NODE=" + _INT),
    "gpus_per_node": re.compile(r"\bSLURM_GPUS_PER_NODE=(?:[\w-]+:)?" + _INT + r"|--gpus-per-node[= ](?:[\w-]+:)?" + _INT + r"|--gres[= ]gpu:(?:[\w-]+:)?" + _INT),
    "job_gpus": re.compile(r"\bSLURM_(?:JOB|STEP)_GPUS=([\d,]+)"),
    "nnodes": re.compile(r"\bSLURM_(?:JOB_NUM_NODES|NNODES)=" + _INT + r"|--nnodes[= ]" + _INT + r"(?::\d+)?\b|#SBATCH (?:-N|--nodes)[= ]?" + _INT),
    "nproc": re.compile(r"--nproc[_-]per[_-]node[= ]" + _INT + r"|\bnproc_per_node\s*[:=]\s*" + _INT + r"|\bnum_processes\s*[:=]\s*" + _INT),
    # Not a number compared or multiplied: DeepSpeed's "... * world_size 272 != 16 * 2 * 8" names the batch size there.
    "world": re.compile(r"\bworld[_ ]size\s*[:=]?\s*" + _INT + r"\b(?!\s*(?:[!=<>]=|[*/+<>-]))|\bWORLD_SIZE=" + _INT + r"|\bMEMBER: \d+/" + _INT, re.IGNORECASE),
    "smi": re.compile(r"^GPU (\d+): .*\(UUID: (GPU-[0-9a-fA-F-]+)\)"),
}


_GPU_HINTS = ("slurm", "nproc", "world", "gpu", "nnodes", "num_processes", "member", "sbatch")


@dataclass
class GpuCount:
    """The facts a job's lines state about its GPUs; :meth:`best` picks the strongest."""

    slurm_gpus: int | None = None
    gpus_on_node: int | None = None
    gpus_per_node: int | None = None
    job_gpus: int | None = None
    nnodes: int | None = None
    nproc: int | None = None
    world: int | None = None
    smi_uuids: set[str] | None = None
    smi_indices: set[int] | None = None
    ranks_seen: int = 0

    def feed(self, text: str) -> None:
        """Read one line."""
        low = text.lower()
        if not any(w in low for w in _GPU_HINTS):
            return
        for key, pattern in _GPU_PATTERNS.items():
            m = pattern.search(text)
            if not m:
                continue
            if key == "smi":
                self.smi_uuids = (self.smi_uuids or set()) | {m.group(2)}
                self.smi_indices = (self.smi_indices or set()) | {int(m.group(1))}
                continue
            value = next(g for g in m.groups() if g is not None)
            number = len([x for x in value.split(",") if x]) if key == "job_gpus" else int(value)
            if number <= 0 or number > 100000:
                continue
            current = getattr(self, key)
            # keep the largest statement (a multi-node job prints per-node and total values)
            if current is None or number > current:
                setattr(self, key, number)

    def best(self) -> tuple[int | None, str]:
        """The GPU count and where it came from ("" when nothing said)."""
        nodes = self.nnodes or 1
        if self.slurm_gpus:
            return self.slurm_gpus, "SLURM_GPUS"
        per_node = self.gpus_on_node or self.gpus_per_node or self.job_gpus
        if per_node:
            return per_node * nodes, "SLURM GPUs per node x nodes"
        if self.smi_uuids:
            uuids = len(self.smi_uuids)
            # one listing from the batch host shows one node's GPUs; per-node listings show them all
            if self.nnodes and self.smi_indices and len(self.smi_indices) == uuids:
                return uuids * nodes, "nvidia-smi -L x nodes"
            return uuids, "nvidia-smi -L"
        if self.nproc:
            return self.nproc * nodes, "processes per node x nodes"
        if self.world:
            return self.world, "world size"
        if self.ranks_seen > 1:
            return self.ranks_seen, "ranks in the log"
        return None, ""
