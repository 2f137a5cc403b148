"""Salient non-traceback lines: CUDA kernel assertions, NCCL chatter, signals and kills.

These lines often say more than the Python exception: the ``.cu`` assertion names the kernel that
failed, ``Killed`` names the OOM killer, NCCL WARN lines name the broken transport.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence

from assistant.parse.normalize import Line
from assistant.types import CudaAssert

_CUDA_ASSERT = re.compile(
    r"(?<![\w./\\-])(?P<file>[\w./\\-]+\.cuh?):(?P<line>\d+):\s*(?P<kernel>[^:]+?):.{0,2000}?Assertion\s*[`'\"](?P<cond>.{1,1000}?)[`'\"]\s*failed"
)
_NCCL = re.compile(
    r"NCCL (?:WARN|INFO.*(?:error|fail|abort))|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|ncclInvalidUsage"
    r"|ncclRemoteError|Watchdog caught collective|ProcessGroupNCCL|NCCL error|NCCL communicator|NCCL version",
    re.IGNORECASE,
)
_SIGNAL = re.compile(
    r"^Killed$|\bKilled\b.{0,200}?(?:signal|process)|Segmentation fault|Bus error|core dumped|Aborted \(core"
    r"|exitcode\s*:\s*-?\d+|exit code[: ]+(?:137|139|134|-9)|Signal \d+ \(SIG\w+\)|killed by signal"
    r"|Out of memory: Kill|oom-kill|Xid\b|fallen off the bus|uncorrectable ECC",
    re.IGNORECASE,
)
_SALIENT = re.compile(
    r"out of memory|CUDA error|device-side assert|illegal memory access|NCCL|Killed|Segmentation fault"
    r"|Error|error:|Assertion|Exception|Traceback|FAILED|fatal",
)
_MAX_LINES = 12


def _folded(rx: re.Pattern[str]) -> re.Pattern[str]:
    """The same case-insensitive pattern, to run case-sensitively over lower-cased text.

    With IGNORECASE, ``re`` cannot skip ahead to a possible first character and tries every
    position (about 3 s per MB of log for ``_STRONG``); lower-casing the line first costs 0.3 s.
    """
    assert not re.search(r"\\[A-Z]", rx.pattern), "an upper-case escape would change meaning"
    return re.compile(rx.pattern.lower())


_NCCL_LOW = _folded(_NCCL)
_SIGNAL_LOW = _folded(_SIGNAL)


def cuda_asserts(lines: Sequence[Line]) -> tuple[CudaAssert, ...]:
    """Distinct kernel assertions with how many threads reported each (there can be thousands)."""
    found: OrderedDict[tuple[str, int, str, str], int] = OrderedDict()
    for ln in lines:
        if "Assertion" not in ln.text:
            continue
        m = _CUDA_ASSERT.search(ln.text)
        if m:
            key = (m.group("file"), int(m.group("line")), m.group("kernel").strip(), m.group("cond"))
            found[key] = found.get(key, 0) + 1
    return tuple(CudaAssert(f, line, k, c, n) for (f, line, k, c), n in found.items())


def nccl_lines(lines: Sequence[Line]) -> tuple[str, ...]:
    """Distinct NCCL-related lines, at most a dozen, in order of appearance."""
    return _distinct(ln.text.strip() for ln in lines if "nccl" in (low := ln.text.lower()) and _NCCL_LOW.search(low))


# Lower-case words without which _SIGNAL cannot match: checked first, so long logs cost substring
# scans instead of a case-insensitive regex per line.
_SIGNAL_HINTS = ("kill", "segmentation", "bus error", "core dumped", "aborted", "exitcode", "exit code", "signal", "out of memory", "xid", "fallen off", "ecc")


def signal_lines(lines: Sequence[Line]) -> tuple[str, ...]:
    """Lines that say a process was killed, crashed, or the hardware complained."""
    return _distinct(ln.text.strip() for ln in lines if _has_hint(low := ln.text.lower()) and _SIGNAL_LOW.search(low))


def _has_hint(low: str) -> bool:
    for word in _SIGNAL_HINTS:
        if word in low:
            return True
    return False


_STRONG = re.compile(
    r"out of memory|CUDA error|device-side assert|illegal memory access|NCCL|CUDNN_STATUS|CUBLAS_STATUS|Killed|Segmentation fault"
    r"|does not require grad|backward through the graph|must match|shapes cannot be multiplied|expected scalar type|same device"
    r"|not compiled with CUDA|No module named|No such file|Assertion|Unknown Error|timed out|Traceback|Error:",
    re.IGNORECASE,
)
_STRONG_LOW = _folded(_STRONG)


# A pasted source line (a call, optionally assigned) whose error-looking words are all inside string literals, such as
# a backend name passed as an argument: code, not a message.
_CODE_CALL = re.compile(r"^(?:[A-Za-z_][\w.\[\]]*\s*=\s*)?[A-Za-z_][\w.]*\(.*\)[\s,;]*$")
_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")


def _literal_in_code(line: str) -> bool:
    return bool(_CODE_CALL.match(line)) and not _STRONG_LOW.search(_QUOTED.sub("''", line).lower())


# A pasted ``raise SomeError("...")`` statement: the user's own code, not an error that was printed.
_RAISE_STATEMENT = re.compile(r"^raise\s+[A-Za-z_][\w.]*\(.*\)\s*$")


def best_salient_line(texts: Sequence[str]) -> int | None:
    """Index of the most informative error-looking line: the last strong one, else the last salient one.

    Short trailer lines ("python-BaseException", "Aborted") lose to a real message earlier on.
    """
    fallback = None
    for idx in range(len(texts) - 1, -1, -1):
        line = texts[idx].strip()
        if not line or line.startswith("frame #"):
            continue
        if len(line) >= 20 and _STRONG_LOW.search(line.lower()) and not _literal_in_code(line):
            return idx
        if fallback is None and _SALIENT.search(line) and not _RAISE_STATEMENT.match(line):
            fallback = idx
    return fallback


def _distinct(items) -> tuple[str, ...]:
    seen: OrderedDict[str, None] = OrderedDict()
    for item in items:
        if item and item not in seen:
            seen[item] = None
            if len(seen) >= _MAX_LINES:
                break
    return tuple(seen)
