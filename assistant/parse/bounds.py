"""Bound what the rules read, so that no pattern ever scans an unbounded line or message.

The reader already limits the input to a window (1 MiB); within it, one pasted line can still be
that whole megabyte, and a regular expression that backtracks is quadratic in the length of the
line it scans. Real error messages are short: the longest line in the evaluation corpora is under
2,000 characters and the longest message a few kilobytes. So every line a rule can see is cut to
:data:`MAX_LINE` characters (its head and tail kept), each message to :data:`MAX_MESSAGE` and the
whole text to :data:`MAX_TEXT`, with a visible marker where text was left out.
"""

from __future__ import annotations

from dataclasses import replace

from assistant.types import ExceptionRecord, Failure, Frame

MAX_LINE = 4000
MAX_MESSAGE = 32 * 1024
MAX_TEXT = 128 * 1024
# Without a traceback every rule, the symptom rules' many case-insensitive word lists included, reads
# the whole text; a description or an error-line log needs far less than this.
MAX_UNSTRUCTURED = 16 * 1024  # three quarters from the end: without a traceback, a log's end says most
MAX_SOURCE = 1000  # one line of the user's code, as printed under a frame
MAX_SIGNAL_LINES = 200


def clip_line(line: str, limit: int = MAX_LINE) -> str:
    """The line itself when short; else its head and tail around a marker."""
    if len(line) <= limit:
        return line
    half = limit // 2
    return f"{line[:half]} …[{len(line) - 2 * half:,} characters cut]… {line[-half:]}"


def clip_text(text: str, limit: int, line_limit: int = MAX_LINE, head_share: float = 0.75) -> str:
    """Every line clipped, then the text cut to ``limit`` characters (``head_share`` of them from the head)."""
    if len(text) > line_limit:
        lines = text.split("\n")
        if max(map(len, lines)) > line_limit:
            text = "\n".join(clip_line(ln, line_limit) for ln in lines)
    if len(text) <= limit:
        return text
    head = int(limit * head_share)
    tail = limit - head
    return f"{text[:head]}\n…[{len(text) - head - tail:,} characters cut]…\n{text[-tail:]}"


def _frame(fr: Frame) -> Frame:
    if len(fr.file) <= MAX_SOURCE and (fr.source is None or len(fr.source) <= MAX_SOURCE) and len(fr.function or "") <= MAX_SOURCE:
        return fr
    return replace(fr, file=clip_line(fr.file, MAX_SOURCE), source=fr.source and clip_line(fr.source, MAX_SOURCE),
                   function=fr.function and clip_line(fr.function, MAX_SOURCE))


def _record(rec: ExceptionRecord) -> ExceptionRecord:
    return replace(rec, exc_type=rec.exc_type and clip_line(rec.exc_type, MAX_SOURCE), message=clip_text(rec.message, MAX_MESSAGE),
                   frames=tuple(_frame(f) for f in rec.frames))


def bound_failure(failure: Failure) -> Failure:
    """The same failure with every text field bounded (a no-op for every real traceback)."""
    return replace(
        failure,
        exc_type=failure.exc_type and clip_line(failure.exc_type, MAX_SOURCE),
        message=clip_text(failure.message, MAX_MESSAGE),
        frames=tuple(_frame(f) for f in failure.frames),
        chain=tuple(_record(r) for r in failure.chain),
        nccl_lines=tuple(clip_line(x) for x in failure.nccl_lines[-MAX_SIGNAL_LINES:]),
        signal_lines=tuple(clip_line(x) for x in failure.signal_lines[-MAX_SIGNAL_LINES:]),
        cuda_asserts=failure.cuda_asserts[:MAX_SIGNAL_LINES],
        text=clip_text(failure.text, MAX_TEXT) if failure.exc_type or failure.frames else clip_text(failure.text, MAX_UNSTRUCTURED, head_share=0.25),
    )


MAX_PARSE_LINES = 4_000  # the parser costs 30-80 µs a line; a traceback with its context needs far fewer
_HEADER = "Traceback (most recent call last)"


def bound_for_parse(text: str) -> tuple[str, tuple[str, ...]]:
    """The text the parser reads: long lines clipped, at most :data:`MAX_PARSE_LINES` lines.

    When there are more lines, those around the last traceback are kept (a quarter of the budget
    before it), else the last ones; the note says how many were left out.
    """
    text = clip_text(text, len(text))
    count = text.count("\n") + 1
    if count <= MAX_PARSE_LINES:
        return text, ()
    lines = text.split("\n")
    at = text.rfind(_HEADER)
    if at >= 0:
        first = max(0, text.count("\n", 0, at) - MAX_PARSE_LINES // 4)
    else:
        first = count - MAX_PARSE_LINES
    first = min(first, count - MAX_PARSE_LINES)
    kept = lines[first : first + MAX_PARSE_LINES]
    note = f"The input has {count:,} lines; parsed the {len(kept):,} from line {first + 1:,}{' (around the last traceback)' if at >= 0 else ''}."
    return "\n".join(kept), (note,)
