"""Bound what the rules read, so that no pattern ever scans an unbounded line or message.

The reader already limits the input to a window (1 MiB); within it, one pasted line can still be
that whole megabyte, and a regular expression that backtracks is quadratic in the length of the
line it scans. Real error messages are short: the longest line in the evaluation corpora is under
2,000 characters and the longest message a few kilobytes. So every line a rule can see is cut to
:data:`MAX_LINE` characters (its head and tail kept), each message to :data:`MAX_MESSAGE` and the
whole text to :data:`MAX_TEXT`, with a visible marker where text was left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
        header = text.count("\n", 0, at)
        first = max(0, header - MAX_PARSE_LINES // 4)
        if traceback_end(lines, header) >= min(first, count - MAX_PARSE_LINES) + MAX_PARSE_LINES:
            # The traceback alone is longer than the budget (deep recursion): a window from its header
            # would end among its frames and miss the exception line, which decides everything.
            kept, note = keep_traceback_ends(lines, header, MAX_PARSE_LINES)
            return "\n".join(kept), (f"The input has {count:,} lines; parsed {len(kept):,}: {note}",)
    else:
        first = count - MAX_PARSE_LINES
    first = min(first, count - MAX_PARSE_LINES)
    kept = lines[first : first + MAX_PARSE_LINES]
    note = f"The input has {count:,} lines; parsed the {len(kept):,} from line {first + 1:,}{' (around the last traceback)' if at >= 0 else ''}."
    return "\n".join(kept), (note,)


def traceback_end(lines: Sequence[str], header: int) -> int:
    """Index of the first line after the traceback header ``lines[header]`` that is not in its frame
    list (normally the exception line), or ``len(lines)`` when the frames run to the end.

    Frame, source and caret lines are indented; a prefix before the header (``[rank0]: ``, a
    fixed-width time stamp) is repeated on every line, so that many characters are skipped first.
    """
    cut = max(lines[header].find(_HEADER), 0)
    for i in range(header + 1, len(lines)):
        body = lines[i][cut:]
        if body and not body[0].isspace():
            return i
    return len(lines)


def _one(_line: str) -> int:
    return 1


def _fit(lines: Sequence[str], limit: int, cost: Callable[[str], int], from_end: bool = False) -> tuple[int, int]:
    """How many of ``lines``, taken from the start (or the end), fit in ``limit``; and what they cost."""
    used = n = 0
    for line in reversed(lines) if from_end else lines:
        c = cost(line)
        if used + c > limit:
            break
        used += c
        n += 1
    return n, used


def keep_traceback_ends(lines: Sequence[str], header: int, budget: int, cost: Callable[[str], int] = _one) -> tuple[list[str], str]:
    """The lines of a traceback too long for ``budget``, and a note on what was left out.

    Kept, in order: a little context before the header, the head of the frame list (the program's
    own frames), a marker line, the tail of the frame list (where the error was raised) and the
    exception line with its message. ``cost`` prices a line (1 per line by default; the reader
    prices bytes). The marker is indented, so the parser takes it as decoration between frames.
    """
    end = traceback_end(lines, header)
    frames, message = lines[header:end], lines[end:]
    budget -= 2 * cost(_marker(10**9, 10**12))
    n_msg, msg_used = _fit(message, budget * 3 // 8, cost)
    if message and not n_msg:  # the exception line is kept whatever it costs (lines are already clipped)
        n_msg, msg_used = 1, cost(message[0])
    n_pre, pre_used = _fit(lines[:header], budget // 16, cost, from_end=True)
    left = budget - msg_used - pre_used
    n_head, head_used = _fit(frames, max(left // 4, 0), cost)
    n_tail, tail_used = _fit(frames[n_head:], max(left - head_used, 0), cost, from_end=True)
    if n_head + n_tail == len(frames):  # the frames fit: what they left over lengthens the message
        more, _ = _fit(message[n_msg:], max(left - head_used - tail_used, 0), cost)
        n_msg += more
    skipped = frames[n_head : len(frames) - n_tail]
    kept = [*lines[header - n_pre : header], *frames[:n_head]]
    if skipped:
        kept.append(_marker(len(skipped), sum(len(s) + 1 for s in skipped)))
    kept += [*frames[len(frames) - n_tail :], *message[:n_msg]]
    if skipped:
        note = (f"kept the first {n_head:,} and the last {n_tail:,} of the last traceback's {len(frames):,} frame lines and its "
                f"error line ({len(skipped):,} lines, {sum(map(len, skipped)):,} characters, in between not read)")
    else:
        note = f"kept the last traceback's {len(frames):,} frame lines and its error line"
    after = len(message) - n_msg
    if after:
        note += f"; the last {after:,} of the {len(message):,} lines from its error line on were not read"
    return kept, note + "."


def _marker(lines: int, chars: int) -> str:
    return f"  …[{lines:,} lines of frames ({chars:,} characters) not read]…"
