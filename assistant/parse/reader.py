"""Read user input safely: any bytes in, readable text out, bounded in size.

Huge logs are not read whole: only a window around the last traceback (or the tail) is analysed,
and the returned notes say so. Undecodable bytes and lone surrogates are replaced, never fatal.
Streams (stdin, pipes, character devices) are read up to :data:`MAX_STREAM` bytes keeping a head
and a tail; a pipe that never delivers data times out. Empty input, missing files and closed
streams raise :class:`~assistant.errors.InputError`.
"""

from __future__ import annotations

import os
import re
import select
import stat
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from assistant.errors import InputError
from assistant.parse.bounds import MAX_LINE, clip_line, keep_traceback_ends

DEFAULT_WINDOW = 1 << 20  # 1 MiB: far more than any traceback, small enough to parse in milliseconds
_HEADER = b"Traceback (most recent call last)"
_BLOCK = 4 << 20
_FILLER = b"\x00 \t\r\n"  # what a log ends with when it was blank-padded or zero-filled by a crash
MAX_STREAM = 256 << 20  # bytes read from a stream at most: /dev/zero or `yes |` never end
STREAM_HEAD = 64 << 10  # a stream's first bytes are kept too (launchers print the job's shape there)
MAX_REGION = 16 << 20  # bytes of a last traceback (and what follows it) read to pick the window from
FIRST_DATA_TIMEOUT = 10.0  # seconds a named pipe or device may stay silent before we give up
# Characters that do not occur in a log: C0/C1 controls other than tab, newline, CR and ESC, and the
# replacement character left by undecodable bytes. NUL is counted apart (zero-filled log regions).
_UNREADABLE = re.compile("[\x01-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f\ufffd]")
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class InputText:
    """Decoded input plus what the reader had to do to it."""

    text: str
    size: int
    notes: tuple[str, ...] = ()
    source: str = "<text>"


def read_path(path: str | os.PathLike[str], window: int = DEFAULT_WINDOW, *, wait: float = FIRST_DATA_TIMEOUT) -> InputText:
    """Read a file, analysing only the window around its last traceback when it is large.

    A named pipe or a device is read as a stream; ``wait`` bounds the seconds it may stay silent.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"no such file: {p}")
    if p.is_dir():
        raise InputError(f"{p} is a directory, not a log file")
    try:
        mode = p.stat().st_mode
        if not stat.S_ISREG(mode):
            return _read_special(p, window, wait)
        size = p.stat().st_size
        with p.open("rb") as fh:
            data, window_note = _window_from_file(fh, size, window)
    except PermissionError:
        raise InputError(f"permission denied reading {p}") from None
    except OSError as exc:
        raise InputError(f"cannot read {p}: {exc.strerror or exc}") from None
    return read_bytes(data, source=str(p), total_size=size, extra_notes=window_note)


def read_stream(stream: BinaryIO, window: int = DEFAULT_WINDOW, *, source: str = "<stdin>", limit: int = MAX_STREAM) -> InputText:
    """Read a byte stream (stdin) to its end or ``limit`` bytes, keeping its head and a bounded tail."""
    try:
        read = _terminal_read(stream) if _is_terminal(stream) else stream.read
        return _collect(read, window, source, limit)
    except (OSError, ValueError) as exc:  # a closed or unreadable descriptor, not a bug of ours
        raise InputError(f"cannot read {source}: {getattr(exc, 'strerror', None) or exc}") from None


def _collect(read, window: int, source: str, limit: int) -> InputText:
    keep = 4 * window
    head = b""
    chunks: deque[bytes] = deque()
    kept = 0
    total = 0
    while total < limit:
        chunk = read(min(1 << 16, limit - total))
        if not chunk:
            break
        if len(head) < STREAM_HEAD:
            head += chunk[: STREAM_HEAD - len(head)]
        total += len(chunk)
        chunks.append(chunk)
        kept += len(chunk)
        while kept - len(chunks[0]) >= keep:
            kept -= len(chunks.popleft())
    data = b"".join(chunks)
    notes: list[str] = []
    if total >= limit:
        notes.append(f"Stopped reading {source} after {_human(total)}; anything after that was not read.")
    if total > len(data):
        skipped = total - len(data) - len(head)
        notes.append(f"Input was {_human(total)}; kept its first {_human(len(head))} and last {_human(len(data))} "
                     f"({_human(max(skipped, 0))} in between skipped).")
    kept_data = data
    data, more = _window_from_bytes(data, window, total)
    if total > 4 * window and _HEADER not in data and _HEADER in head:
        # The last traceback starts in the head and runs past the whole middle (a recursion of many MiB):
        # its first frames are in the head, its last frames and error line in the kept tail.
        at = head.rfind(_HEADER)
        begin = max(0, at - 4096)
        head_end = max(begin, min(len(head), total - len(kept_data)))
        region = _join_cut(head[begin:head_end], kept_data, total - len(kept_data) - head_end)
        data, note = _condense(region, at - begin, window)
        more = (f"Input was {_human(total)}; its last traceback starts at byte {at:,}. {note}",)
    return read_bytes(data, source=source, total_size=total, extra_notes=(*notes, *more))


def _read_special(p: Path, window: int, wait: float) -> InputText:
    """A named pipe or device: opened without blocking, waited on for a while, read like a stream."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise InputError(f"cannot read {p}: {exc.strerror or exc}") from None
    try:
        os.set_blocking(fd, True)
        # A terminal (`ask /dev/stdin` typed by hand) may take its time; a pipe or device may not.
        ready, _, _ = select.select([fd], [], [], None if os.isatty(fd) else wait)
        if not ready:
            raise InputError(f"no data arrived from {p} within {wait:g} s (a pipe with no writer?); pass a regular file")
        return _collect(lambda n: os.read(fd, n), window, str(p), MAX_STREAM)
    except OSError as exc:
        raise InputError(f"cannot read {p}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _is_terminal(stream: BinaryIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _terminal_read(stream: BinaryIO):
    """A read that returns after one terminal read, so that the first Ctrl-D (an empty read) ends input.

    A buffered ``read(n)`` keeps reading until it has n bytes or sees an empty read; on a terminal
    the first Ctrl-D only ends that ``read`` call with the pasted text, and the next call blocks for
    a second Ctrl-D. ``read1`` makes at most one read of the terminal, so the loop sees the EOF itself.
    """
    read1 = getattr(stream, "read1", None)
    if read1 is not None:
        return read1
    fd = stream.fileno()
    return lambda n: os.read(fd, n)


def read_text(text: str, window: int = DEFAULT_WINDOW) -> InputText:
    """Text already in memory (the Python API): windowed like a file when it is very large.

    Lone surrogates (``\\udcff`` from a file name decoded with ``surrogateescape``) cannot be encoded
    and break tokenizers downstream; they are replaced by U+FFFD with a note.
    """
    notes: tuple[str, ...] = ()
    if _SURROGATE.search(text):
        text, n = _SURROGATE.subn("\ufffd", text)
        notes = (f"Input contains {n} lone surrogate code point(s) (undecodable bytes in a file name?); they were replaced.",)
    if not text.strip():
        raise InputError("nothing to diagnose: the input is empty")
    if len(text) <= window // 4:  # cannot exceed the window even at 4 bytes a character
        return InputText(text=text, size=len(text), notes=notes)
    data = text.encode("utf-8")
    if len(data) <= window:
        return InputText(text=text, size=len(data), notes=notes)
    chosen, more = _window_from_bytes(data, window, len(data))
    return read_bytes(chosen, total_size=len(data), extra_notes=notes + more)


def read_data(data: bytes | bytearray | memoryview, window: int = DEFAULT_WINDOW, source: str = "<bytes>") -> InputText:
    """Bytes already in memory (the Python API): windowed exactly like a file or a string."""
    data = bytes(data)
    chosen, notes = _window_from_bytes(data, window, len(data))
    return read_bytes(chosen, source=source, total_size=len(data), extra_notes=notes)


def _looks_binary(text: str) -> bool:
    """Mostly unreadable over the whole window (NULs already removed: they do not count, since
    zero-filled regions of a preallocated log, or one cut by a crash, surround real text)."""
    return len(_UNREADABLE.findall(text)) > 0.3 * len(text)


def read_bytes(
    data: bytes, source: str = "<text>", total_size: int | None = None, extra_notes: tuple[str, ...] = ()
) -> InputText:
    """Decode bytes best-effort; raise InputError when nothing readable is left."""
    notes = list(extra_notes)
    nul = data.count(b"\x00")
    if nul:
        notes.append(f"Input contains {nul} NUL byte(s) (binary data or a zero-filled region?); they were ignored.")
        data = data.replace(b"\x00", b"")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        bad = text.count("\ufffd")
        notes.append(f"Input is not valid UTF-8; {bad} undecodable byte sequence(s) were replaced.")
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        if nul and not data.strip():
            raise InputError(f"nothing to diagnose: the input holds only NUL bytes ({nul:,} read)")
        raise InputError("nothing to diagnose: the input is empty" if not data.strip() else "nothing to diagnose: the input holds no text")
    # Binary data decodes into replacement characters and control codes; a log is mostly readable text.
    if _looks_binary(text):
        raise InputError("the input looks binary, not a log or traceback")
    return InputText(text=text, size=total_size if total_size is not None else len(data), notes=tuple(notes), source=source)


def _window_from_file(fh: BinaryIO, size: int, window: int, *, trimmed: bool = False) -> tuple[bytes, tuple[str, ...]]:
    """The bytes to analyse among the file's first ``size`` bytes, and notes on what was left out."""
    if size <= window:
        fh.seek(0)
        return fh.read(size), ()
    end = size if trimmed else _content_end(fh, size)
    if end == 0:
        raise InputError(f"nothing to diagnose: the file's {_human(size)} are all NUL bytes or blanks")
    if end < size - 4096:  # a few trailing newlines are not worth a note
        data, notes = _window_from_file(fh, end, window, trimmed=True)
        return data, (*notes, f"The last {_human(size - end)} of the file are NUL bytes or blank (zero-filled?); they were skipped.")
    fh.seek(size - window)
    tail = fh.read(window)
    if _HEADER in tail:
        return tail, (f"Input is {_human(size)}; analysed the last {_human(len(tail))}, where the last traceback is.",)
    # No traceback in the tail: look backwards for the last one, block by block.
    end = size - window
    while end > 0:
        start = max(0, end - _BLOCK)
        fh.seek(start)
        block = fh.read(end - start + len(_HEADER))
        at = block.rfind(_HEADER)
        if at >= 0:
            begin = max(0, start + at - 4096)
            region = _read_region(fh, begin, size)
            data, note = _condense(region, start + at - begin, window)
            return data, (f"Input is {_human(size)}; the last traceback starts at byte {start + at:,}. {note}",)
        end = start
    return tail, (f"Input is {_human(size)}; no traceback found, analysed the last {_human(len(tail))}.",)


def _content_end(fh: BinaryIO, size: int, limit: int = 256 << 20) -> int:
    """The offset after the file's last byte that is not NUL or blank, looking back at most ``limit`` bytes."""
    end = size
    while end > 0 and size - end < limit:
        start = max(0, end - _BLOCK)
        fh.seek(start)
        kept = fh.read(end - start).rstrip(_FILLER)
        if kept:
            return start + len(kept)
        end = start
    return end


def _window_from_bytes(data: bytes, window: int, total: int) -> tuple[bytes, tuple[str, ...]]:
    if len(data) <= window:
        return data, ()
    stripped = data.rstrip(_FILLER)  # trailing blank lines or zero fill must not take the window's place
    if not stripped:
        return data[-window:], ()  # nothing but filler: read_bytes says which
    data = stripped
    if len(data) <= window:
        return data, (f"Analysed the last {_human(len(data))} of {_human(total)}; the rest was trailing whitespace or NUL bytes.",)
    tail = data[-window:]
    if _HEADER in tail:
        return tail, (f"Analysed the last {_human(len(tail))} of {_human(total)}, where the last traceback is.",)
    at = data.rfind(_HEADER)
    if at >= 0:
        begin = max(0, at - 4096)
        region = data[begin:] if len(data) - begin <= MAX_REGION else _head_and_tail(data[begin:], MAX_REGION)
        chosen, note = _condense(region, at - begin, window)
        return chosen, (f"Input is {_human(total)}; the last traceback starts at byte {at:,}. {note}",)
    return tail, (f"No traceback found; analysed the last {_human(len(tail))} of {_human(total)}.",)


def _read_region(fh: BinaryIO, begin: int, end: int) -> bytes:
    """The file's bytes from ``begin`` to ``end``; when more than :data:`MAX_REGION`, its head and tail."""
    fh.seek(begin)
    if end - begin <= MAX_REGION:
        return fh.read(end - begin)
    head = fh.read(MAX_REGION // 2)
    fh.seek(end - MAX_REGION // 2)
    return _join_cut(head, fh.read(MAX_REGION // 2), end - begin - MAX_REGION)


def _head_and_tail(data: bytes, limit: int) -> bytes:
    return _join_cut(data[: limit // 2], data[-(limit // 2) :], len(data) - limit)


def _join_cut(head: bytes, tail: bytes, skipped: int) -> bytes:
    """``head`` and ``tail`` of a longer text, with a marker line saying how many bytes were between."""
    first = tail.find(b"\n", 0, 1 << 16)
    if first >= 0:  # the tail starts mid-line: a fragment that could pass for an error line
        tail, skipped = tail[first + 1 :], skipped + first + 1
    # Indented, so that the parser reads it as decoration if it falls among frames.
    return head + f"\n  …[{max(skipped, 0):,} bytes not read]…\n".encode() + tail


def _condense(region: bytes, at: int, window: int) -> tuple[bytes, str]:
    """At most ``window`` bytes of ``region``, whose last traceback header is at offset ``at``.

    A window cut from the header would end among the frames of a deep recursion, or inside one
    huge message line, and lose the exception line that decides the diagnosis. So every line is
    shortened to its head and tail (as the parser would), then the traceback's first frames, its
    last frames and its error message are kept (see :func:`keep_traceback_ends`).
    """
    # surrogateescape: undecodable bytes survive the round trip untouched (read_bytes reports them).
    lines = region.decode("utf-8", "surrogateescape").split("\n")
    header = region.count(b"\n", 0, at)
    long_lines = sum(len(line) > MAX_LINE for line in lines)
    if long_lines:
        lines = [clip_line(line) for line in lines]
    kept, note = keep_traceback_ends(lines, header, window, _byte_cost)
    data = "\n".join(kept).encode("utf-8", "surrogateescape")
    if long_lines:
        note += f" {long_lines:,} line(s) longer than {MAX_LINE:,} characters were cut to their head and tail (the middle not read)."
    return data, f"Analysed {_human(len(data))} of the {_human(len(region))} from there on: {note}"


def _byte_cost(line: str) -> int:
    return len(line.encode("utf-8", "surrogateescape")) + 1


def _human(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"
