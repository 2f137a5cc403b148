"""Turn raw log text into clean lines: colours, carriage returns and per-line prefixes removed.

Job logs decorate every line: ``[rank3]:``, ``[default0]:``, ``0: ``, timestamps, logger names.
The traceback parser wants the bare lines, but the rank is a fact worth keeping, so each line
keeps the rank its prefix named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from assistant.render.safe_text import strip_escapes

# Prefixes seen in front of traceback lines in real logs, tried repeatedly until none matches.
_RANK_PREFIXES = (
    re.compile(r"^\[rank(\d+)\]:\s?"),  # torch.distributed / torchrun (2.2+)
    re.compile(r"^\[default(\d+)\]:\s?"),  # torchrun --tee / log_dir redirects
    re.compile(r"^\[(?:global_)?rank[ =]?(\d+)\](?!:)\s?"),
    re.compile(r"^rank(\d+):\s?"),
    re.compile(r"^(\d{1,3}): (?=\s|Traceback|File|[A-Z])"),  # srun --label / deepspeed "0: "
)
_OTHER_PREFIXES = (
    # 2024-05-01 10:00:00,123 / 2024-05-01T10:00:00.123Z, optional level and logger after it
    re.compile(
        r"^\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?"
        r"(?:\s*[-|]?\s*(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b:?)?"  # level
        r"(?:\s*[-|]\s*[\w.]+(?=\s*[-|]\s))?"  # logger name between separators
        r"(?:\s*[-|:]\s?|\s)?"  # the separator before the message: exactly one space kept off
    ),
    re.compile(r"^\[\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]\s?"),
    re.compile(r"^(?:stderr|stdout)[:|]\s?", re.IGNORECASE),
    re.compile(r"^[\w.-]+\s*\|\s"),  # docker compose / k8s "service | line"
)


_TIMESTAMPS = _OTHER_PREFIXES[:2]  # a date-time (with level and logger) or a bare [HH:MM:SS]: never a word of the log itself


def strip_timestamp(text: str) -> tuple[str, str]:
    """A line without the timestamp (and its level and logger) a log shipper or logger put in front of every line.

    Returns the rest and what was removed (kept by the caller for ordering by time). Only time-shaped prefixes are
    removed, so a log line that happens to start with a word and a bar stays whole.
    """
    removed = ""
    for _ in range(2):  # "2024-05-01T10:00:00Z 2024-05-01 10:00:00,123 INFO ..." (shipper, then logger)
        for pattern in _TIMESTAMPS:
            m = pattern.match(text)
            if m and m.end() > 0:
                removed, text = removed + text[:m.end()], text[m.end():]
                break
        else:
            break
    return text, removed


@dataclass(frozen=True)
class Line:
    """A cleaned line and the rank its prefix named, if any."""

    text: str
    rank: int | None = None


def strip_ansi(text: str) -> str:
    """Remove terminal escape sequences (colours, cursor moves, OSC strings, C1 controls).

    The same core as every renderer's (:func:`assistant.render.safe_text.strip_escapes`), repeated
    until nothing changes; ``\\r`` and ``\\t`` stay, for :func:`clean_lines` to interpret.
    """
    return strip_escapes(text)


def clean_lines(text: str) -> list[Line]:
    """Split text into lines with colours and known prefixes removed.

    A ``\\r`` inside a line (progress bars) keeps only the last segment, like a terminal would.
    """
    lines: list[Line] = []
    for raw in strip_ansi(text).split("\n"):
        if "\r" in raw:
            segments = [s for s in raw.split("\r") if s.strip()]
            raw = segments[-1] if segments else ""
        lines.append(_strip_prefixes(raw))
    return lines


def _strip_prefixes(raw: str) -> Line:
    rank: int | None = None
    text = raw
    for _ in range(4):  # prefixes stack, e.g. "[rank1]:[W501 10:00:00] ..." or "ts | [rank0]: ..."
        changed = False
        for pattern in _RANK_PREFIXES:
            m = pattern.match(text)
            if m:
                rank = int(m.group(1))
                text = text[m.end():]
                changed = True
        for pattern in _OTHER_PREFIXES:
            m = pattern.match(text)
            if m and m.end() > 0:
                text = text[m.end():]
                changed = True
        if not changed:
            break
    return Line(text=text.rstrip(), rank=rank)
