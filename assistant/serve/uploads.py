"""`/v1/triage`'s upload path: unpack an uploaded log or archive safely, then triage it, cancellably.

What an upload is comes from its first bytes (magic), never from its name or a search for a trailer:
a zip starts with ``PK\\x03\\x04``, a tar has ``ustar`` at byte 257 (or a valid header checksum), and
gzip, bzip2 and xz have their own signatures. At most one layer of compression is opened around the
archive (``.tar.gz``) and one around each member (``rank0.log.gz``, stored decompressed under its own
name); a compressed stream found inside a compressed stream is refused.

Every byte the archive reader produces (headers, GNU long names, PAX records, members, padding) and
every byte a compressed member inflates to counts against one budget: ``max_bytes``, and no more than
:data:`MAX_RATIO` times the upload past :data:`RATIO_FREE`. Over budget is a 413, nested compression a
422, anything malformed or hostile (``..``, absolute paths, links, devices) a 400. The work runs in a
worker thread that checks a cancellation flag on every chunk read and before every file and job: when
the request is abandoned (its deadline passed, the client left), the flag is set and the work stops.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import re
import shutil
import stat
import tarfile
import tempfile
import threading
import zipfile
import zlib
from pathlib import Path
from typing import Any, IO, Protocol, cast

from assistant.errors import InputError

MAX_RATIO = 100  # uncompressed bytes per uploaded byte, past RATIO_FREE (logs compress 5-30x)
RATIO_FREE = 16 << 20
_CHUNK = 1 << 16
_GZIP, _BZ2, _XZ, _ZSTD = b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"(\xb5/\xfd"
_ZIP = (b"PK\x03\x04", b"PK\x05\x06")  # a local file header, or the end record of an empty zip
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
_COMPRESSED_SUFFIX = re.compile(r"\.(?:gz|bz2|xz)$", re.IGNORECASE)


class ArchiveError(InputError):
    """An uploaded archive that is malformed or tries to write outside its folder (HTTP 400)."""

    status = 400


class ArchiveTooLarge(ArchiveError):
    """An upload that expands past its budget: bytes, members or inflation ratio (HTTP 413)."""

    status = 413


class NestedCompression(ArchiveError):
    """Compression inside compression (gzip in gzip, a compressed tar in a compressed tar) (HTTP 422)."""

    status = 422


class UploadCancelled(Exception):
    """The request behind this work was abandoned; the work stopped."""


def sniff(head: bytes) -> str:
    """What data starting with ``head`` (512 bytes or all there is) holds: gzip, bz2, xz, zstd, zip, tar or plain."""
    if head.startswith(_GZIP):
        return "gzip"
    if head.startswith(_BZ2) and head[3:4].isdigit():
        return "bz2"
    if head.startswith(_XZ):
        return "xz"
    if head.startswith(_ZSTD):
        return "zstd"
    if head.startswith(_ZIP):
        return "zip"
    if _is_tar_header(head):
        return "tar"
    return "plain"


def _is_tar_header(block: bytes) -> bool:
    """A POSIX/GNU tar header (``ustar`` magic) or an old v7 one whose checksum is right."""
    if len(block) < 512:
        return False
    if block[257:262] == b"ustar":
        return True
    try:
        recorded = int(block[148:156].strip(b" \x00") or b"-1", 8)
    except ValueError:
        return False
    return recorded in _tar_checksums(block[:512]) and block[:1] != b"\x00"


class Budget:
    """One budget for everything an upload expands to: bytes, members, ratio to its size; and the cancellation flag."""

    def __init__(self, max_members: int, max_bytes: int, upload_bytes: int, cancel: threading.Event | None = None) -> None:
        self.max_members = max_members
        self.max_bytes = min(max_bytes, max(RATIO_FREE, upload_bytes * MAX_RATIO))
        self.members = 0
        self.bytes = 0
        self.cancel = cancel

    def member(self) -> None:
        """Count one archive entry."""
        self.check()
        self.members += 1
        if self.members > self.max_members:
            raise ArchiveTooLarge(f"the archive holds more than {self.max_members} entries")

    def add(self, n: int) -> None:
        """Count ``n`` bytes produced (by the archive reader or a decompressor)."""
        self.check()
        self.bytes += n
        if self.bytes > self.max_bytes:
            raise ArchiveTooLarge(f"the upload expands to more than {self.max_bytes / (1 << 20):.0f} MiB "
                                  f"(archive headers, names and members counted; at most {MAX_RATIO}x its size)")

    def check(self) -> None:
        """Raise :class:`UploadCancelled` once the request is abandoned."""
        if self.cancel is not None and self.cancel.is_set():
            raise UploadCancelled()


class Readable(Protocol):
    """What the upload readers need of a stream: bytes on read (files, decompressors, counting readers alike)."""

    def read(self, size: int = ..., /) -> bytes: ...


def _tar_checksums(header: bytes) -> tuple[int, int]:
    """A tar header's checksum as unsigned and as signed bytes, its own checksum field read as spaces (POSIX)."""
    rest = header[:148] + b" " * 8 + header[156:512]
    return sum(rest), sum(b - 256 if b > 127 else b for b in rest)


class CountingReader(io.RawIOBase):
    """A read-only stream that counts every byte read through it against a :class:`Budget`."""

    def __init__(self, inner: Readable, budget: Budget, prefix: bytes = b"") -> None:
        super().__init__()
        self.inner = inner
        self.budget = budget
        self.prefix = prefix  # bytes already read (to sniff) and counted, handed back first

    def readable(self) -> bool:
        return True

    def read(self, n: int | None = -1) -> bytes:
        """Up to ``n`` bytes (a chunk when ``n`` is negative: never the whole stream at once)."""
        want = _CHUNK if n is None or n < 0 else n
        if self.prefix:
            data, self.prefix = self.prefix[:want], self.prefix[want:]
            return data
        self.budget.check()
        data = self.inner.read(min(want, _CHUNK * 16))
        self.budget.add(len(data))
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def _decompressor(kind: str, raw: Readable) -> Readable:
    """A stream of ``raw`` decompressed (one layer)."""
    source = cast(IO[bytes], raw)  # the decompressors only call read() on it
    if kind == "gzip":
        return gzip.GzipFile(fileobj=source, mode="rb")
    if kind == "bz2":
        return bz2.BZ2File(source, "rb")
    if kind == "xz":
        return lzma.LZMAFile(source, "rb")
    raise ArchiveError(f"{kind} compression is not accepted (gzip, bzip2 or xz)")


def _opened(raw: Readable, kind: str, budget: Budget) -> tuple[CountingReader, str]:
    """One layer of ``kind`` compression opened, counted, and what it holds (sniffed); nested compression refused."""
    stream = CountingReader(_decompressor(kind, raw), budget)
    head = _read_up_to(stream, 512)
    inner = sniff(head)
    if inner in ("gzip", "bz2", "xz", "zstd", "zip"):
        raise NestedCompression(f"the upload is {kind} around {inner}: compression inside compression is not opened (at most one layer)")
    stream.prefix = head
    return stream, inner


def _read_up_to(stream: Readable, n: int) -> bytes:
    """Exactly ``n`` bytes, or fewer at the end of the stream."""
    out = bytearray()
    while len(out) < n:
        block = stream.read(n - len(out))
        if not block:
            break
        out += block
    return bytes(out)


def safe_filename(name: str | None, default: str = "upload.log") -> str:
    """A plain file name from a client's: the last path component, odd characters replaced, no leading dots."""
    last = re.split(r"[\\/]", name or "")[-1]
    clean = _UNSAFE_CHARS.sub("_", last).lstrip(".")[:120]
    return clean or default


def member_parts(name: str) -> list[str] | None:
    """The path parts of an archive member, or ArchiveError for absolute paths and ``..``; None for the root."""
    if not name or "\x00" in name:
        raise ArchiveError("the archive holds an entry with an empty or invalid name")
    norm = name.replace("\\", "/")
    if norm.startswith("/") or re.match(r"^[A-Za-z]:", norm):
        raise ArchiveError(f"the archive entry {name!r} has an absolute path")
    parts = [p for p in norm.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ArchiveError(f"the archive entry {name!r} points outside the archive ('..')")
    return parts or None


def _target(root: Path, parts: list[str]) -> Path:
    dest = root.joinpath(*parts)
    if not dest.resolve().is_relative_to(root.resolve()):  # belt and braces: parts hold no '..' and no links exist
        raise ArchiveError(f"the archive entry {'/'.join(parts)!r} points outside the archive")
    return dest


def _copy_member(src: IO[bytes], dest: Path, budget: Budget, *, counted: bool) -> None:
    """Write a member (decompressed when it is gzip, bzip2 or xz: one layer), counting what it inflates to.

    ``counted``: the member's own bytes already went through the budget (a tar's stream)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    raw_budget = Budget(1, 1 << 62, 0, budget.cancel) if counted else budget
    head = _read_up_to(src, 512)
    raw_budget.add(len(head))
    raw = CountingReader(src, raw_budget, prefix=head)
    kind = sniff(head)
    stream: Readable = _opened(raw, kind, budget)[0] if kind in ("gzip", "bz2", "xz") else raw
    with dest.open("wb") as out:
        while block := stream.read(_CHUNK):
            out.write(block)


def _extract_tar(stream: Readable, root: Path, budget: Budget) -> None:
    """Extract a tar read as a stream (``r|``: no seeks; every byte tarfile reads goes through ``stream``)."""
    with tarfile.open(fileobj=cast(IO[bytes], stream), mode="r|") as tar:  # stream mode only calls read()
        for member in tar:
            budget.member()
            parts = member_parts(member.name)
            if member.issym() or member.islnk():
                raise ArchiveError(f"the archive entry {member.name!r} is a link; links are not accepted")
            if parts is None or parts[0] == "__MACOSX":
                continue
            if member.isdir():
                _target(root, parts).mkdir(parents=True, exist_ok=True)
                continue
            if not member.isreg():
                raise ArchiveError(f"the archive entry {member.name!r} is not a regular file or folder")
            src = tar.extractfile(member)
            if src is not None:
                _copy_member(src, _target(root, parts), budget, counted=True)


def _extract_zip(fileobj: IO[bytes], root: Path, budget: Budget) -> None:
    with zipfile.ZipFile(fileobj) as zf:
        for info in zf.infolist():
            budget.member()
            budget.add(len(info.filename) + len(info.extra) + len(info.comment))
            parts = member_parts(info.filename)
            kind = stat.S_IFMT(info.external_attr >> 16)  # 0 when the zip tool recorded no Unix file type
            if kind == stat.S_IFLNK:
                raise ArchiveError(f"the archive entry {info.filename!r} is a link; links are not accepted")
            if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
                raise ArchiveError(f"the archive entry {info.filename!r} is not a regular file or folder")
            if info.flag_bits & 0x1:
                raise ArchiveError(f"the archive entry {info.filename!r} is encrypted")
            if parts is None or parts[0] == "__MACOSX":
                continue
            if info.is_dir():
                _target(root, parts).mkdir(parents=True, exist_ok=True)
                continue
            with zf.open(info) as src:
                _copy_member(src, _target(root, parts), budget, counted=False)


_DECODE_ERRORS = (tarfile.TarError, zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, OSError, ValueError,
                  RuntimeError, zlib.error, lzma.LZMAError)


def unpack_upload(fileobj: IO[bytes], filename: str | None, root: Path, *, max_members: int, max_bytes: int,
                  cancel: threading.Event | None = None) -> Path:
    """Write an upload under ``root`` safely; return the folder whose entries are the jobs.

    The format comes from the first bytes (see the module doc). A tar (plain, or in one layer of gzip,
    bzip2 or xz) or a zip is extracted member by member into paths we build (never a client path, never
    a link, a device or a FIFO); anything else is one log file (decompressed when it is compressed), named
    after the upload's base name (its job id is that name up to the first dot).
    """
    name = safe_filename(filename)
    fileobj.seek(0, io.SEEK_END)
    budget = Budget(max_members, max_bytes, fileobj.tell(), cancel)
    fileobj.seek(0)
    kind = sniff(_read_up_to(fileobj, 512))
    fileobj.seek(0)
    try:
        if kind == "zip":
            _extract_zip(fileobj, root, budget)
        elif kind == "tar":
            _extract_tar(CountingReader(fileobj, budget), root, budget)
        elif kind in ("gzip", "bz2", "xz", "zstd"):
            stream, inner = _opened(fileobj, kind, budget)
            if inner == "tar":
                _extract_tar(stream, root, budget)
            else:
                _write(stream, root / name, budget)
                return root
        else:
            if name.lower().endswith((".tar", ".tgz", ".zip", ".tar.gz", ".tar.bz2", ".tar.xz")):
                raise ArchiveError(f"{name} is not a readable archive (its first bytes are not a tar, zip, gzip, bzip2 or xz signature)")
            _write(CountingReader(fileobj, budget), root / name, budget)
            return root
    except (ArchiveError, UploadCancelled):
        raise
    except _DECODE_ERRORS as exc:
        raise ArchiveError(f"cannot read the {kind} upload: {type(exc).__name__}: {exc}"[:300]) from None
    # An archive of one folder that holds the job folders: the jobs are inside it.
    entries = [p for p in root.iterdir() if not p.name.startswith(".")]
    if len(entries) == 1 and entries[0].is_dir():
        inner_entries = [p for p in entries[0].iterdir() if not p.name.startswith(".")]
        if inner_entries and all(p.is_dir() for p in inner_entries):
            return entries[0]
    if not entries:
        raise ArchiveError("the archive holds no files")
    return root


def _write(stream: Readable, dest: Path, budget: Budget) -> None:
    """Write one log (already counted by ``stream``), checking for cancellation as it goes."""
    with dest.open("wb") as out:
        while block := stream.read(_CHUNK):
            budget.check()
            out.write(block)


def triage_upload(engine: Any, fileobj: IO[bytes], filename: str | None, config: Any,
                  cancel: threading.Event | None = None) -> dict[str, Any]:
    """Unpack an upload into a temporary folder, triage it locally (no Ray), and return the JSON.

    ``cancel`` is checked on every chunk unpacked, before every job and every file read, and before
    every job grouped and every group diagnosed: once set, :class:`UploadCancelled` ends the work
    (the temporary folder is removed)."""
    from assistant.triage.api import build_result
    from assistant.triage.distribute import safe_extract
    from assistant.triage.extract import Cancelled, ExtractOptions
    from assistant.triage.jobs import discover

    stop = cancel.is_set if cancel is not None else None
    tmp = Path(tempfile.mkdtemp(prefix="torchhelp-triage-"))
    try:
        root = tmp / "upload"
        root.mkdir()
        jobs_dir = unpack_upload(fileobj, filename, root, max_members=config.max_archive_members, max_bytes=config.max_archive_bytes,
                                 cancel=cancel)
        notes: list[str] = []
        specs = discover([jobs_dir], notes)
        options = ExtractOptions(max_inflate=config.max_archive_bytes, stop=stop)
        reports = []
        for spec in specs:
            if stop is not None and stop():
                raise UploadCancelled()
            try:
                reports.append(safe_extract(spec, options))
            except Cancelled:
                raise UploadCancelled() from None
        try:
            result = build_result(sorted(reports, key=lambda r: r.job_id), engine_obj=engine, stop=stop)  # the server's engine
        except Cancelled:
            raise UploadCancelled() from None
        # Job files are relative to their job's folder: no path of this server's temporary folder leaks.
        return {"jobs": result.jsonl_rows(), "groups": result.groups_json()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
