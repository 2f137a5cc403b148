"""Read user input safely: any bytes in, readable text out, bounded in size.

Huge logs are not read whole: only a window around the last traceback (or the tail) is analysed,
and the returned notes say so. Undecodable bytes are replaced, never fatal. Empty input and
missing files raise :class:`~assistant.errors.InputError`.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from assistant.errors import InputError

DEFAULT_WINDOW = 1 << 20  # 1 MiB: far more than any traceback, small enough to parse in milliseconds
_HEADER = b"Traceback (most recent call last)"
_BLOCK = 4 << 20


@dataclass(frozen=True)
class InputText:
    """Decoded input plus what the reader had to do to it."""

    text: str
    size: int
    notes: tuple[str, ...] = ()
    source: str = "<text>"


def read_path(path: str | os.PathLike[str], window: int = DEFAULT_WINDOW) -> InputText:
    """Read a file, analysing only the window around its last traceback when it is large."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"no such file: {p}")
    if p.is_dir():
        raise InputError(f"{p} is a directory, not a log file")
    try:
        size = p.stat().st_size
        with p.open("rb") as fh:
            data, window_note = _window_from_file(fh, size, window)
    except PermissionError:
        raise InputError(f"permission denied reading {p}") from None
    except OSError as exc:
        raise InputError(f"cannot read {p}: {exc.strerror or exc}") from None
    return read_bytes(data, source=str(p), total_size=size, extra_notes=window_note)


def read_stream(stream: BinaryIO, window: int = DEFAULT_WINDOW) -> InputText:
    """Read a byte stream (stdin) to the end, keeping only a bounded tail in memory."""
    keep = 4 * window
    chunks: deque[bytes] = deque()
    kept = 0
    total = 0
    read = _terminal_read(stream) if _is_terminal(stream) else stream.read
    while True:
        chunk = read(1 << 16)
        if not chunk:
            break
        total += len(chunk)
        chunks.append(chunk)
        kept += len(chunk)
        while kept - len(chunks[0]) >= keep:
            kept -= len(chunks.popleft())
    data = b"".join(chunks)
    notes: tuple[str, ...] = ()
    if total > len(data):
        notes = (f"Input was {_human(total)}; only the last {_human(len(data))} were kept.",)
    data, more = _window_from_bytes(data, window, total)
    return read_bytes(data, source="<stdin>", total_size=total, extra_notes=notes + more)


def _is_terminal(stream: BinaryIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _terminal_read(stream: BinaryIO):  # type: ignore[no-untyped-def]
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
    """Text already in memory (the Python API): windowed like a file when it is very large."""
    if not text.strip():
        raise InputError("nothing to diagnose: the input is empty")
    if len(text) <= window // 4:  # cannot exceed the window even at 4 bytes a character
        return InputText(text=text, size=len(text))
    data = text.encode("utf-8", errors="surrogateescape")
    if len(data) <= window:
        return InputText(text=text, size=len(data))
    chosen, notes = _window_from_bytes(data, window, len(data))
    return read_bytes(chosen, total_size=len(data), extra_notes=notes)


def read_bytes(
    data: bytes, source: str = "<text>", total_size: int | None = None, extra_notes: tuple[str, ...] = ()
) -> InputText:
    """Decode bytes best-effort; raise InputError when nothing readable is left."""
    notes = list(extra_notes)
    nul = data.count(b"\x00")
    if nul:
        notes.append(f"Input contains {nul} NUL byte(s) (binary data?); they were ignored.")
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
        raise InputError("nothing to diagnose: the input is empty" if not data.strip() else "nothing to diagnose: the input holds no text")
    # Binary data decodes into replacement characters and control codes; a log is mostly readable text.
    sample = text[:20000]
    unreadable = sum(ch == "\ufffd" or (not ch.isprintable() and ch not in "\n\t\r\x1b") for ch in sample)
    if unreadable + min(nul, 20000) > 0.3 * (len(sample) + min(nul, 20000)):
        raise InputError("the input looks binary, not a log or traceback")
    return InputText(text=text, size=total_size if total_size is not None else len(data), notes=tuple(notes), source=source)


def _window_from_file(fh: BinaryIO, size: int, window: int) -> tuple[bytes, tuple[str, ...]]:
    if size <= window:
        return fh.read(), ()
    fh.seek(size - window)
    tail = fh.read()
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
            fh.seek(begin)
            data = fh.read(window)
            return data, (
                f"Input is {_human(size)}; analysed {_human(len(data))} around the last traceback "
                f"(at byte {start + at:,}), not the whole log.",
            )
        end = start
    return tail, (f"Input is {_human(size)}; no traceback found, analysed the last {_human(len(tail))}.",)


def _window_from_bytes(data: bytes, window: int, total: int) -> tuple[bytes, tuple[str, ...]]:
    if len(data) <= window:
        return data, ()
    tail = data[-window:]
    if _HEADER in tail:
        return tail, (f"Analysed the last {_human(len(tail))} of {_human(total)}, where the last traceback is.",)
    at = data.rfind(_HEADER)
    if at >= 0:
        begin = max(0, at - 4096)
        return data[begin : begin + window], (f"Analysed {_human(window)} around the last traceback of {_human(total)}.",)
    return tail, (f"No traceback found; analysed the last {_human(len(tail))} of {_human(total)}.",)


def _human(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"
