"""Read one log file in constant memory: its head and its tail, decoded and split into clean lines.

A job log can be gigabytes of progress output with the failure in its last screenful, so a file
is never read whole: the first ``head_bytes`` (where launchers print the job's shape: SLURM
variables, ``nvidia-smi -L``, the command line) and the last ``tail_bytes`` (where a run ends)
are kept. Plain files are read by seeking; gzip files are decompressed as a stream that keeps
only a ring of the last chunks. Colours, ``\\r`` progress redraws, NUL bytes and undecodable
bytes are removed or replaced; nothing here raises on bad content.
"""

from __future__ import annotations

import gzip
import os
import re
import stat
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from assistant.parse.normalize import strip_timestamp
from assistant.render.safe_text import safe_text

HEAD_BYTES = 256 * 1024
TAIL_BYTES = 1024 * 1024
MAX_LINE = 4000  # longer lines are cut: no log line worth reading is longer
_CHUNK = 1 << 20
MAX_INFLATE = 4 << 30  # a .gz log is decompressed up to this many bytes; the tail is what came before the ceiling
MAX_RATIO = 200  # ... and to at most this many times its compressed size past INFLATE_FREE (a log compresses 5-30x)
INFLATE_FREE = 64 << 20
MAX_NUL_SCAN = 256 << 20  # leading NUL padding looked through, at most
_COMPRESSED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"PK\x03\x04", b"(\xb5/\xfd")


class ReadCancelled(Exception):
    """Reading stopped because the caller asked (its request was abandoned)."""

_BINARY_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f]")
# torch's own "[rank3]: " carries one separating space; torchrun's tee "[default3]:" and mpirun's
# "[1,3]<stderr>:" carry none, so the indentation of traceback lines after them must be kept whole.
_RANK_PREFIX = re.compile(r"^\[(?:rank|global_rank)(\d{1,5})\]: ?|^\[default(\d{1,5})\]:|^\[1,(\d{1,5})\]<(?:stdout|stderr)>:")
_SRUN_LABEL = re.compile(r"^\s{0,3}(\d{1,5}): ")
_HOST_LABEL = re.compile(r"^([A-Za-z][\w.-]{0,62}): ")  # a host name is checked by _is_host (bounded: linear on any text)
_MAY_HAVE_STAMP = re.compile(r"\[?\d{4}-|\[\d{2}:")  # cheap test before the timestamp patterns
_RANK_IN_PATH = re.compile(r"(?:^|[/_.-])(?:rank|worker|proc|process|local_rank|lrank)[_-]?(\d{1,5})(?=$|[/_.-])", re.IGNORECASE)
_TORCHELASTIC_DIR = re.compile(r"/attempt_\d+/(\d{1,5})/(?:stdout|stderr|error)\.")


@dataclass(frozen=True, slots=True)
class LogLine:
    """One clean line: the rank it belongs to (prefix or per-rank file), its text, and where it was."""

    rank: int | None
    text: str
    file: int  # index of the file within the job
    number: int  # position within the file's kept lines
    stamp: str = ""  # the timestamp prefix removed from the line (a shipper's or logger's), read for ordering
    host: str = ""  # the host label removed from the line (pdsh, DeepSpeed's multi-node runner), when lines carry one

    @property
    def timed(self) -> str:
        """The text to read a time from: the removed timestamp when there was one, else the line."""
        return self.stamp or self.text


@dataclass
class FileText:
    """What was kept of one file."""

    path: str
    size: int  # bytes on disk
    lines: list[LogLine] = field(default_factory=list)
    gap_after: int | None = None  # index in ``lines`` after which unread middle bytes were skipped
    bytes_read: int = 0  # decompressed bytes looked at
    notes: list[str] = field(default_factory=list)
    readable: bool = True


def rank_from_path(path: str) -> int | None:
    """The rank a per-rank log file belongs to, from its name or torchelastic's folder layout."""
    p = path.replace("\\", "/")
    m = _TORCHELASTIC_DIR.search(p)
    if m:
        return int(m.group(1))
    m = _RANK_IN_PATH.search(Path(p).name)
    return int(m.group(1)) if m else None


def read_file(path: str, index: int, *, head_bytes: int = HEAD_BYTES, tail_bytes: int = TAIL_BYTES,
              max_inflate: int = MAX_INFLATE, stop: Callable[[], bool] | None = None) -> FileText:
    """Read the head and tail of one file as clean lines (never raises but :class:`ReadCancelled`; problems become notes).

    Only a regular file is opened (a FIFO or device would block or never end); a .gz file is decompressed up to
    ``max_inflate`` bytes (and :data:`MAX_RATIO` times its size); ``stop`` is asked between chunks."""
    out = FileText(path=path, size=0)
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            out.readable = False
            out.notes.append(f"{Path(path).name}: not a regular file (a FIFO, device or socket), skipped")
            return out
        out.size = st.st_size
        with open(path, "rb") as fh:
            magic = fh.read(2)
        if magic == b"\x1f\x8b":
            head, tail, total, note = _read_gzip(path, head_bytes, tail_bytes, max_inflate=max_inflate, stop=stop)
        else:
            head, tail, total, note = _read_plain(path, out.size, head_bytes, tail_bytes)
    except OSError as exc:
        out.readable = False
        out.notes.append(f"{Path(path).name}: could not be read ({exc.strerror or exc.__class__.__name__})")
        return out
    out.bytes_read = len(head) + len(tail)
    if note:
        out.notes.append(f"{Path(path).name}: {note}")
    if _looks_binary(head[:65536] or tail[:65536]):
        out.readable = False
        out.notes.append(f"{Path(path).name}: binary content, skipped")
        return out
    file_rank = rank_from_path(path)
    head_text = _decode(head)
    head_lines = _split(head_text, drop_last_partial=bool(tail))
    tail_lines = _split(_decode(tail), drop_first_partial=True) if tail else []
    labels = _line_labels(head_lines or tail_lines)
    for raw in head_lines:
        out.lines.append(_log_line(raw, file_rank, labels, index, len(out.lines)))
    if tail:
        out.gap_after = len(out.lines) - 1
        skipped = total - len(head) - len(tail)
        if skipped > 0:
            out.notes.append(f"{Path(path).name}: {skipped / 1e6:.0f} MB in the middle not read (only the head and tail matter)")
        for raw in tail_lines:
            out.lines.append(_log_line(raw, file_rank, labels, index, len(out.lines)))
    return out


def text_file(text: str, index: int = 0, name: str = "<input>") -> FileText:
    """A log given as text (pasted, or captured from a run) as the same clean lines a file gives."""
    lines = _split(text)
    out = FileText(path=name, size=len(text))
    labels = _line_labels(lines)
    for raw in lines:
        out.lines.append(_log_line(raw, None, labels, index, len(out.lines)))
    return out


def clean(text: str) -> str:
    """Remove terminal escapes and control characters from one line of untrusted text.

    The one sanitiser shared with the renderers (:func:`assistant.render.safe_text.safe_text`):
    escape removal repeated until nothing changes, so a split sequence cannot join up again.
    """
    return safe_text(text)


def _log_line(raw: str, file_rank: int | None, labels: str, file_index: int, number: int) -> LogLine:
    # kubectl --timestamps, log shippers and Python logging put a time (and level) before every line, even before
    # "[rank3]:" and inside tracebacks: removed first (and after the rank prefix), kept aside for ordering.
    text, stamp = strip_timestamp(clean(raw)) if _MAY_HAVE_STAMP.match(raw) else (clean(raw), "")
    rank = file_rank
    host = ""
    m = _RANK_PREFIX.match(text)
    if m:
        rank = int(next(g for g in m.groups() if g is not None))
        text = text[m.end():]
        # torchrun stacks prefixes on tee'd output ("[default0]:[rank0]: ...")
        m2 = _RANK_PREFIX.match(text)
        if m2:
            text = text[m2.end():]
    elif labels == "srun":
        m = _SRUN_LABEL.match(text)
        if m:
            rank = int(m.group(1))
            text = text[m.end():]
    elif labels == "host":
        m = _HOST_LABEL.match(text)
        if m and _is_host(m.group(1)):
            host = m.group(1)
            text = text[m.end():]
            m = _RANK_PREFIX.match(text)  # "node-3: [rank5]: ..."
            if m:
                rank = int(next(g for g in m.groups() if g is not None))
                text = text[m.end():]
    if not stamp and (text[:1].isdigit() or text[:1] == "["):
        text, stamp = strip_timestamp(text)
    if len(text) > MAX_LINE:
        text = text[:MAX_LINE]
    return LogLine(rank, text.rstrip(), file_index, number, stamp, host)


def _is_host(label: str) -> bool:
    """A host name has a digit, a dash or a dot ("INFO" and "Epoch" are words)."""
    return any(c.isdigit() or c in ".-" for c in label)


def _line_labels(lines: list[str]) -> str:
    """The label most lines carry: "srun" (``srun --label``: "3: "), "host" (pdsh, clush, DeepSpeed's multi-node
    runner: "gpu-07: "), or "" (none). Trusted only when most lines carry one (a lone "10: loss" is not a label)."""
    sample = [ln for ln in lines[:400] if ln.strip()]
    if len(sample) < 3:
        return ""
    if sum(1 for ln in sample if _SRUN_LABEL.match(ln)) >= 0.6 * len(sample):
        return "srun"
    hosts = [m.group(1) for ln in sample if (m := _HOST_LABEL.match(ln)) and _is_host(m.group(1))]
    # A host name has a digit, a dash or a dot ("INFO: " and "Epoch: " are words), and a few hosts write many lines.
    if len(hosts) >= 0.6 * len(sample) and len(set(hosts)) <= max(2, len(hosts) // 4):
        return "host"
    return ""


def _split(text: str, *, drop_first_partial: bool = False, drop_last_partial: bool = False) -> list[str]:
    parts = text.split("\n")
    if drop_first_partial and len(parts) > 1:
        parts = parts[1:]
    if drop_last_partial and len(parts) > 1:
        parts = parts[:-1]
    lines: list[str] = []
    for raw in parts:
        if "\r" in raw:
            # A terminal shows only what the last carriage return left: keep the last non-empty segment.
            segments = [s for s in raw.split("\r") if s.strip()]
            raw = segments[-1] if segments else ""
        if len(raw) > MAX_LINE:
            raw = raw[:MAX_LINE]
        lines.append(raw)
    return lines


def _decode(data: bytes) -> str:
    if b"\x00" in data:
        data = data.replace(b"\x00", b"")
    return data.decode("utf-8", errors="replace")


def _looks_binary(sample: bytes) -> bool:
    if not sample:
        return False
    # A log with a few runs of junk (NULs from a crashed writer, stray bytes) is still a log: only
    # a file that is mostly not text is binary.
    text = sample.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") + len(_BINARY_CONTROL.findall(text))
    return bad > len(text) * 0.3


def _leading_nuls(fh: IO[bytes], size: int) -> int:
    """How many NUL bytes the file starts with (a preallocated or truncated-and-rewritten log), read in chunks
    (at most :data:`MAX_NUL_SCAN`: past it, the tail is read as usual)."""
    skipped = 0
    while skipped < min(size, MAX_NUL_SCAN):
        fh.seek(skipped)
        block = fh.read(_CHUNK)
        if not block:
            break
        rest = block.lstrip(b"\x00")
        skipped += len(block) - len(rest)
        if rest:
            break
    return skipped


def _read_plain(path: str, size: int, head_bytes: int, tail_bytes: int) -> tuple[bytes, bytes, int, str]:
    """The head and tail of a plain file; leading NUL padding is skipped (the log starts after it)."""
    note = ""
    with open(path, "rb") as fh:
        start = _leading_nuls(fh, size) if fh.read(1) == b"\x00" else 0
        if start:
            note = f"{start} leading NUL bytes skipped (a preallocated or truncated file); read from the first text"
        fh.seek(start)
        if size - start <= head_bytes + tail_bytes:
            return fh.read(), b"", size - start, note
        head = fh.read(head_bytes)
        fh.seek(max(size - tail_bytes, start + head_bytes))
        tail = fh.read(tail_bytes)
    return head, tail, size - start, note


def inflate_limit(compressed: int, max_inflate: int = MAX_INFLATE) -> int:
    """The most a compressed file of ``compressed`` bytes may decompress to: the ceiling, and a ratio past the free part."""
    return min(max_inflate, max(INFLATE_FREE, compressed * MAX_RATIO))


def _read_gzip(path: str, head_bytes: int, tail_bytes: int, *, max_inflate: int = MAX_INFLATE,
               stop: Callable[[], bool] | None = None) -> tuple[bytes, bytes, int, str]:
    """Stream-decompress, keeping the first ``head_bytes`` and a ring of the last ``tail_bytes``.

    Decompression stops at :func:`inflate_limit` bytes (a note says so; the tail is what came before), and a
    compressed stream inside (gzip in gzip) is not opened: at most one layer of compression is read."""
    head = bytearray()
    ring: deque[bytes] = deque()
    ring_size = 0
    total = 0
    nuls = 0
    note = ""
    limit = inflate_limit(os.stat(path).st_size, max_inflate)
    try:
        with gzip.open(path, "rb") as fh:
            while True:
                if stop is not None and stop():
                    raise ReadCancelled(path)
                chunk = fh.read(min(_CHUNK, limit - total - nuls + 1))
                if not chunk:
                    break
                if not head and not total and chunk.startswith(_COMPRESSED_MAGIC):
                    note = "compressed again inside (nested compression), not opened"
                    return b"", b"", 0, note
                if not head and chunk[:1] == b"\x00":
                    rest = chunk.lstrip(b"\x00")  # leading NUL padding: the log starts after it (counted in the ceiling)
                    nuls += len(chunk) - len(rest)
                    chunk = rest
                    if not chunk:
                        if total + nuls >= limit:
                            note = f"only NUL bytes up to the {limit / (1 << 20):.0f} MiB decompression ceiling"
                            break
                        continue
                if total + nuls + len(chunk) > limit:
                    chunk = chunk[:max(0, limit - total - nuls)]
                    note = (f"decompressed size over the {limit / (1 << 20):.0f} MiB ceiling; read the first "
                            f"{limit / (1 << 20):.0f} MiB (the tail shown is where reading stopped)")
                    if not chunk:
                        break
                total += len(chunk)
                if len(head) < head_bytes:
                    take = head_bytes - len(head)
                    head += chunk[:take]
                    chunk = chunk[take:]
                    if not chunk:
                        continue
                ring.append(chunk)
                ring_size += len(chunk)
                while ring and ring_size - len(ring[0]) >= tail_bytes:
                    ring_size -= len(ring.popleft())
                if total + nuls >= limit:
                    break
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        note = f"compressed stream is damaged or cut ({exc.__class__.__name__}); read what came before"
    if nuls and not note:
        note = f"{nuls} leading NUL bytes skipped (a preallocated or truncated file); read from the first text"
    tail = b"".join(ring)
    if len(tail) > tail_bytes:
        tail = tail[-tail_bytes:]
    if total <= head_bytes + tail_bytes:
        # Small enough: hand back one continuous text, as for a small plain file.
        return bytes(head) + tail, b"", total, note
    return bytes(head), tail, total, note
