"""Read a pasted error, log or traceback into a :class:`Failure`.

Handles standard Python tracebacks with exception chains, IPython/Jupyter tracebacks, multi-line
messages (state_dict key lists, dynamo explanations, C++ frames), errors re-raised from DataLoader
workers and spawned processes, interleaved multi-rank logs, and a bare error line with no traceback.
The parser never raises on odd input: what it cannot read is written into ``Failure.notes``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from assistant.parse.normalize import Line, clean_lines
from assistant.parse import signals
from assistant.parse.bounds import bound_failure, bound_for_parse
from assistant.types import ExceptionRecord, Failure, Frame

TRACEBACK_HEADER = "Traceback (most recent call last):"
_CHAIN_MARKERS = {
    "During handling of the above exception, another exception occurred:": "context",
    "The above exception was the direct cause of the following exception:": "cause",
}
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?\s*$')
_IPY_HEADER = re.compile(r"^(?:(?P<type>[A-Za-z_][\w.]*)\s{2,})?Traceback \(most recent call last\)\s*$")
_IPY_FRAME = re.compile(
    r"^(?:Cell In\s*\[(?P<cell>\d*)\],? line (?P<cline>\d+)"
    r"|File (?P<file>.+?):(?P<line>\d+),? in (?P<func>[^(\s]+)"
    r"|(?P<oldfile><ipython-input-[\w-]+>|[~/]\S+\.py) in (?P<oldfunc>[^(\s]+))"
)
_IPY_CURRENT = re.compile(r"^-{1,4}> ?\s*(?P<num>\d+)\s?(?P<src>.*)$")
_EXC_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:\[[\w.]+\])?)(?::\s?(?P<msg>.*))?$")
_EXC_TYPE_HINT = re.compile(r"(?:Error|Exception|Exit|Interrupt|Failure|Failed|Unsupported|Warning|Exited|Timeout)$")
_CARETS = re.compile(r"^\s*[\^~]+\s*$")
_REPEATED = re.compile(r"^\s*\[Previous line repeated \d+ more times?\]")
_GLOG = re.compile(r"^[EWIF]\d{4} \d{2}:\d{2}:\d{2}")
_EMBEDDED_STARTS = ("Original Traceback (most recent call last):", "-- Process ")
# Exceptions that only report that something else failed; the real failure is elsewhere in the log.
_SECONDARY_TYPES = (
    "ChildFailedError",
    "SignalException",
    "KeyboardInterrupt",
    "SystemExit",
    "CalledProcessError",
)
# PyTorch < 1.0 re-raised worker errors as `KeyError: Traceback (most recent call last): ...`.
_OLD_RERAISE = re.compile(r"^[A-Za-z_][\w.]*: ['\"]?Traceback \(most recent call last\):")
_STDLIB_HINT = re.compile(r"[/\\]lib[/\\]python\d\.\d+[/\\](?!site-packages|dist-packages)")


@dataclass
class _Record:
    exc_type: str | None = None
    message_lines: list[str] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    link: str | None = None
    start: int = 0

    def freeze(self) -> ExceptionRecord:
        message = "\n".join(self.message_lines).strip("\n")
        return ExceptionRecord(self.exc_type, message, tuple(self.frames), self.link)


def is_user_file(path: str) -> bool:
    """True for the user's own code: not site-packages, not the stdlib, not frozen or built-in."""
    p = path.replace("\\", "/")
    if p.startswith("<") and not p.startswith(("<ipython-input", "<stdin", "<string", "<cell", "<input")):
        return False  # <frozen runpy>, <eval_with_key>, generated code
    if "site-packages/" in p or "dist-packages/" in p or "/torch/" in p and "/site-packages" in p:
        return False
    if _STDLIB_HINT.search(p):
        return False
    if "/torch/" in p and ("/nn/" in p or "/autograd/" in p or "/_tensor" in p or "/utils/" in p or "/distributed/" in p):
        return False  # a torch source checkout
    return True


def parse_failure(text: str) -> Failure:
    """Parse free text into a Failure (never raises); every field bounded for the rules (see bounds)."""
    bounded, notes = bound_for_parse(text)
    failure = bound_failure(_parse_failure(bounded))
    return replace(failure, notes=(*notes, *failure.notes)) if notes else failure


def _parse_failure(text: str) -> Failure:
    lines = clean_lines(text)
    streams = _split_by_rank(lines)
    chains: list[tuple[int | None, int, list[_Record]]] = []
    for rank, stream in streams.items():
        for position, chain in _parse_stream(stream):
            chains.append((rank, position, chain))
    chains.extend(_native_aborts(lines))
    asserts = signals.cuda_asserts(lines)
    nccl = signals.nccl_lines(lines)
    sig = signals.signal_lines(lines)
    notes: list[str] = []

    if not chains:
        # A pasted excerpt often starts mid-traceback: frames without the header line.
        first_frame = next((i for i, ln in enumerate(lines) if _FRAME.match(ln.text) or _IPY_FRAME.match(ln.text) and ln.text.startswith("File ")), None)
        if first_frame is not None:
            stream = [(i, ln.text) for i, ln in enumerate(lines)]
            stream.insert(first_frame, (first_frame, TRACEBACK_HEADER))
            chains = [(None, pos, chain) for pos, chain in _parse_stream(stream)]
            notes.append("The traceback's first lines are missing; parsed from the first frame shown.")
    if not chains:
        return _failure_without_traceback(lines, text, asserts, nccl, sig)

    rank, chain, consequences = _choose_chain(chains)
    if consequences:
        notes.append(consequences)
    records = [r.freeze() for r in chain]
    if not records[-1].message.strip() and not records[-1].exc_type:
        # The log was cut before the final error line: use the last record that has one, or the best line elsewhere.
        earlier = [r for r in records if r.message.strip()]
        if earlier:
            records = records[: records.index(earlier[-1]) + 1]
            notes.append("The final exception line is missing (cut-off log); used the last complete error in the chain.")
        else:
            fallback = _failure_without_traceback(lines, text, asserts, nccl, sig)
            return Failure(fallback.exc_type, fallback.message, tuple(records[-1].frames), fallback.chain, fallback.wrapper, rank, asserts, nccl, sig, text,
                           tuple(notes) + ("The traceback has no final exception line; the error line was taken from elsewhere in the log.",))
    if not records[-1].message.strip() and records[-1].exc_type:
        # A notebook traceback whose cell output was collapsed or cut ("N frames") names the type in its header but
        # ends before the error line; the same error line pasted elsewhere in the text gives its message.
        line = _typed_line_elsewhere(lines, records[-1].exc_type)
        if line is not None:
            records[-1] = replace(records[-1], message=line)
            notes.append("The traceback ends before its error line; the message was taken from the same error's line elsewhere in the text.")
    effective, wrapper, embedded = _unwrap(records[-1])
    last_chain = max(chains, key=lambda c: c[1])[2]
    if chain is not last_chain and _is_secondary(last_chain[-1]) and wrapper is None:
        # The log ends with a generic "a child died"; the child's own traceback came earlier.
        wrapper = "a child process (its traceback was printed before the parent's error)"
        final = last_chain[-1].freeze()
        first = next((ln.strip() for ln in final.message.splitlines() if any(c.isalpha() for c in ln)), "")
        label = f"{(final.exc_type or 'error').split('.')[-1]}: {first}".strip(": ")
        notes.append(f"The log ends with `{label[:160]}`, which only reports that a child process failed; the child's own error is used instead.")
    records.extend(embedded)
    if wrapper is None:
        wrapper = _wrapper_anywhere(lines)
    frames = effective.frames or records[-1].frames
    all_frames = tuple(frames)
    return Failure(
        exc_type=effective.exc_type,
        message=_clean_message(effective.message),
        frames=all_frames,
        chain=tuple(records),
        wrapper=wrapper,
        rank=rank,
        cuda_asserts=asserts,
        nccl_lines=nccl,
        signal_lines=sig,
        text=text,
        notes=tuple(notes),
    )


def _typed_line_elsewhere(lines: list[Line], exc_type: str) -> str | None:
    """The message of the last ``<exc_type>: message`` line in the text, or None."""
    prefix = exc_type + ":"
    for ln in reversed(lines):
        text = ln.text.strip()
        if text.startswith(prefix) and text[len(prefix):].strip():
            return text[len(prefix):].strip()
    return None


_TERMINATE = re.compile(r"terminate called after throwing an instance of '([^']+)'")
_WHAT = re.compile(r"^\s*what\(\):\s*(.*)$")


def _native_aborts(lines: list[Line]) -> list[tuple[int | None, int, list[_Record]]]:
    """C++ exceptions that abort the process (NCCL watchdog, c10::Error in a thread): no Python traceback,
    only ``terminate called after throwing an instance of 'X'`` and a ``what():`` line."""
    found = []
    for i, ln in enumerate(lines):
        m = _TERMINATE.search(ln.text)
        if not m:
            continue
        for j in range(i + 1, min(i + 4, len(lines))):
            w = _WHAT.match(lines[j].text)
            if w:
                record = _Record(exc_type=m.group(1), message_lines=[w.group(1)], start=i)
                found.append((ln.rank, i, [record]))
                break
    return found


def _split_by_rank(lines: list[Line]) -> dict[int | None, list[tuple[int, str]]]:
    """Interleaved ranks are parsed as separate streams; unprefixed lines form their own stream."""
    ranks = {ln.rank for ln in lines if ln.rank is not None}
    if not ranks:
        return {None: [(i, ln.text) for i, ln in enumerate(lines)]}
    streams: dict[int | None, list[tuple[int, str]]] = {}
    for i, ln in enumerate(lines):
        streams.setdefault(ln.rank, []).append((i, ln.text))
    return streams


def _parse_stream(stream: list[tuple[int, str]]) -> list[tuple[int, list[_Record]]]:
    """Find every traceback chain in one stream; returns (line position, records oldest first)."""
    chains: list[tuple[int, list[_Record]]] = []
    current: list[_Record] | None = None
    pending_link: str | None = None
    i = 0
    n = len(stream)
    while i < n:
        pos, text = stream[i]
        stripped = text.strip()
        if stripped in _CHAIN_MARKERS and current:
            pending_link = _CHAIN_MARKERS[stripped]
            i += 1
            continue
        ipy = _IPY_HEADER.match(stripped) if "Traceback (most recent call last)" in stripped else None
        if stripped == TRACEBACK_HEADER or stripped.endswith(TRACEBACK_HEADER) and not stripped.startswith("Original") and not _OLD_RERAISE.match(stripped):
            record, i = _read_python_traceback(stream, i + 1)
        elif ipy:
            record, i = _read_ipython_traceback(stream, i + 1, ipy.group("type"))
        else:
            i += 1
            continue
        record.start = pos
        if pending_link and current is not None:
            record.link = pending_link
            current.append(record)
        else:
            current = [record]
            chains.append((pos, current))
        pending_link = None
    return chains


def _read_python_traceback(stream: list[tuple[int, str]], i: int) -> tuple[_Record, int]:
    record = _Record()
    n = len(stream)
    while i < n:
        text = stream[i][1]
        m = _FRAME.match(text)
        if m:
            source = None
            j = i + 1
            # The source line follows, indented deeper than its File line (Python prints 2 and 4 spaces, but a log
            # prefix such as "[rank3]: " may have taken one of each); Python 3.11+ may add caret lines below it.
            if j < n and not _FRAME.match(stream[j][1]) and _deeper(stream[j][1], text) and not _CARETS.match(stream[j][1]):
                source = stream[j][1].strip()
                j += 1
            while j < n and (_CARETS.match(stream[j][1]) or _REPEATED.match(stream[j][1])):
                j += 1
            file = m.group("file")
            record.frames.append(
                Frame(file, int(m.group("line")), (m.group("func") or "").strip() or None, source, is_user_file(file))
            )
            i = j
            continue
        if not text.strip() or _REPEATED.match(text) or text.startswith("  "):
            i += 1  # blank or decoration inside the frame list (3.13 adds indented context)
            continue
        break
    return _read_message(stream, i, record)


def _indent(text: str) -> int:
    """How many blanks a line starts with."""
    return len(text) - len(text.lstrip(" \t"))


def _deeper(line: str, frame_line: str) -> bool:
    """Whether ``line`` is indented deeper than the ``File "..."`` line above it (so it is that frame's source line)."""
    return bool(line.strip()) and _indent(line) > _indent(frame_line) and _indent(line) >= 2


def _read_ipython_traceback(stream: list[tuple[int, str]], i: int, header_type: str) -> tuple[_Record, int]:
    record = _Record(exc_type=header_type)
    n = len(stream)
    frame: dict[str, object] | None = None

    def close() -> None:
        if frame is not None:
            record.frames.append(
                Frame(str(frame["file"]), frame.get("line"), frame.get("func"), frame.get("src"), is_user_file(str(frame["file"])))  # type: ignore[arg-type]
            )

    while i < n:
        text = stream[i][1]
        m = _IPY_FRAME.match(text)
        if m:
            close()
            if m.group("cline") is not None:
                frame = {"file": f"<cell {m.group('cell')}>", "line": int(m.group("cline")), "func": "<module>"}
            elif m.group("file") is not None:
                frame = {"file": m.group("file"), "line": int(m.group("line")), "func": m.group("func")}
            else:
                frame = {"file": m.group("oldfile"), "line": None, "func": m.group("oldfunc")}
            i += 1
            continue
        cur = _IPY_CURRENT.match(text)
        if cur and frame is not None:
            frame["src"] = cur.group("src").strip()
            if frame.get("line") is None:
                frame["line"] = int(cur.group("num"))
            i += 1
            continue
        if not text.strip() or text.startswith(" ") or text.startswith("...") or set(text.strip()) <= {"-"}:
            i += 1
            continue
        exc = _EXC_LINE.match(text.strip())
        if not exc or not (exc.group("msg") is not None or _EXC_TYPE_HINT.search(exc.group("type"))):
            i += 1  # a frame line wrapped by the terminal ("wargs)"), not the exception
            continue
        break
    close()
    return _read_message(stream, i, record)


def _read_message(stream: list[tuple[int, str]], i: int, record: _Record) -> tuple[_Record, int]:
    """Read the exception line and its continuation lines starting at ``i``."""
    n = len(stream)
    if i >= n:
        return record, i
    first = stream[i][1].strip()
    m = _EXC_LINE.match(first)
    if m and (m.group("msg") is not None or _EXC_TYPE_HINT.search(m.group("type")) or m.group("type") == record.exc_type):
        record.exc_type = m.group("type")
        record.message_lines.append(m.group("msg") or "")
    else:
        record.message_lines.append(first)
    i += 1
    embedded = record.message_lines[-1].lstrip("'\"").startswith(TRACEBACK_HEADER)
    while i < n:
        text = stream[i][1]
        stripped = text.strip()
        if stripped in _CHAIN_MARKERS or _IPY_HEADER.match(stripped):
            break
        if stripped == TRACEBACK_HEADER and not embedded:
            # A new traceback, unless the message announced an embedded one (spawn's "-- Process N").
            if not any(line.startswith(_EMBEDDED_STARTS) for line in record.message_lines[-3:]):
                break
            embedded = True
        if stripped.startswith(_EMBEDDED_STARTS):
            embedded = True
        if _GLOG.match(stripped) or stripped.startswith("wandb:"):
            break
        if not stripped:
            nxt = _next_nonblank(stream, i)
            if nxt is None or not _continues_message(stream[nxt][1], embedded):
                i += 1
                break
        record.message_lines.append(text)
        i += 1
    while record.message_lines and not record.message_lines[-1].strip():
        record.message_lines.pop()
    return record, i


_CONTINUATIONS = (
    "from user code:", "Set TORCH_LOGS", "You can suppress", "For debugging consider", "Compile with",
    "Exception raised from", "frame #", "-- Process", "Original Traceback", "CUDA kernel errors",
    "See documentation", "Missing key", "Unexpected key", "size mismatch for", "Hint:", "HINT:",
    "You can enable", "Parameter indices", "Parameters which did not", "Developer debug context",
    "Explanation:", "For more information", "While executing", "Original traceback:", "Traceback",
    "To enable traceback", "Use tensor.", "If you", "This error", "Please", "Note:", "Possible",
    "Last error:", "Failures:", "Root Cause", "=====", "-----", "Check the", "In addition",
    "WeightsUnpickler error:", "(1) ", "(2) ", "Unsupported", "Did you", "Is it possible",
)


def _continues_message(line: str, embedded: bool) -> bool:
    stripped = line.strip()
    if line.startswith((" ", "\t")):
        return True
    if embedded and (_FRAME.match(line) or _EXC_LINE.match(stripped)):
        return True
    return stripped.startswith(_CONTINUATIONS) or stripped.startswith("[") and "]:" in stripped[:12]


def _next_nonblank(stream: list[tuple[int, str]], i: int) -> int | None:
    for j in range(i, min(len(stream), i + 6)):
        if stream[j][1].strip():
            return j
    return None


def _choose_chain(chains: list[tuple[int | None, int, list[_Record]]]) -> tuple[int | None, list[_Record], str]:
    """Pick the chain holding the real failure.

    The last primary failure wins. In multi-rank logs, a rank that failed on its own beats ranks
    that only report collective timeouts or aborts: those are consequences of the first failure.
    """
    ordered = sorted(chains, key=lambda c: c[1])
    primary = [c for c in ordered if not _is_secondary(c[2][-1])]
    candidates = primary or ordered
    if len({c[0] for c in candidates}) > 1:
        own = [c for c in candidates if not _is_collective_fallout(c[2][-1])]
        if own and len(own) < len(candidates):
            others = sorted({c[0] for c in candidates if c not in own and c[0] is not None})
            chosen = own[0]
            note = (
                f"Rank {chosen[0]} failed first with its own error; "
                f"rank(s) {', '.join(map(str, others))} then failed in collectives as a consequence."
            ) if others else ""
            return chosen[0], chosen[2], note
    chosen = candidates[-1]
    return chosen[0], chosen[2], ""


_SECONDARY_MESSAGES = re.compile(
    r"DataLoader worker \(pid\(s\) [\d, ]+\) exited unexpectedly$|process \d+ terminated with (?:signal|exit code)"
)


def _is_secondary(record: _Record) -> bool:
    """Exceptions that only report that another process or step failed (its own traceback is elsewhere)."""
    t = record.exc_type or ""
    first = record.message_lines[0].strip() if record.message_lines else ""
    return any(t.endswith(s) for s in _SECONDARY_TYPES) or bool(_SECONDARY_MESSAGES.search(first))


def _is_collective_fallout(record: _Record) -> bool:
    msg = " ".join(record.message_lines)
    return bool(re.search(r"Watchdog caught collective|timed out|NCCL communicator was aborted|DistBackendError|Connection reset by peer|Broken pipe|ProcessGroupNCCL.*abort", msg + " " + (record.exc_type or "")))


def _unwrap(record: ExceptionRecord) -> tuple[ExceptionRecord, str | None, list[ExceptionRecord]]:
    """An error re-raised by a worker wrapper carries the original traceback in its message."""
    msg = record.message
    wrapper: str | None = None
    m = re.search(r"Caught (\w+) in (DataLoader worker process \d+|pin memory thread[^.]*)", msg)
    if m:
        wrapper = m.group(2)
    m2 = re.search(r"-- Process (\d+) terminated with the following error", msg)
    if m2:
        wrapper = f"spawned process {m2.group(1)}"
    m3 = re.search(r"Caught (\w+) in replica (\d+) on device (\d+)", msg)
    if m3:
        wrapper = f"DataParallel replica {m3.group(2)} on device {m3.group(3)}"
    if wrapper is None and msg.lstrip("'\" ").startswith(TRACEBACK_HEADER):
        wrapper = "DataLoader worker process" if "_worker_loop" in msg else "a re-raised error"
        if "\\n" in msg and "\n" not in msg.strip():
            msg = msg.encode("utf-8", "backslashreplace").decode("unicode_escape", errors="replace")
        msg = msg.strip("'\" \n")
    if wrapper is None:
        return record, None, []
    start = msg.find("Traceback (most recent call last):")
    if start < 0:
        start = msg.find("Original Traceback (most recent call last):")
    if start < 0:
        return record, wrapper, []
    inner_text = msg[start:].replace("Original Traceback (most recent call last):", TRACEBACK_HEADER, 1)
    inner_lines = [(k, ln.text) for k, ln in enumerate(clean_lines(inner_text))]
    parsed = _parse_stream(inner_lines)
    if not parsed:
        return record, wrapper, []
    inner_records = [r.freeze() for r in parsed[-1][1]]
    inner = inner_records[-1]
    embedded = [ExceptionRecord(r.exc_type, r.message, r.frames, "embedded") for r in inner_records]
    # The outer frames (the user's loop) plus the worker's frames tell the whole path.
    merged = ExceptionRecord(inner.exc_type, inner.message, record.frames + inner.frames, "embedded")
    return merged, wrapper, embedded


def _clean_message(message: str) -> str:
    """Drop C++ frame dumps (``frame #3: ...``): long, and never useful to a user."""
    kept: list[str] = []
    for ln in message.splitlines():
        s = ln.strip()
        if s.startswith("frame #") or s.startswith("Exception raised from "):
            continue
        kept.append(ln)
    return "\n".join(kept).strip()


_WRAPPER_LINE = re.compile(r"Caught \w+ in (DataLoader worker process \d+)")
_CONTEXT_LINES = 40


def _wrapper_anywhere(lines: list[Line]) -> str | None:
    """A DataLoader re-raise header pasted without its outer traceback still names the wrapper."""
    old_style = False
    for ln in lines:
        m = _WRAPPER_LINE.search(ln.text)
        if m:
            return m.group(1)
        old_style = old_style or bool(_OLD_RERAISE.match(ln.text.strip()))
    if old_style and any("_worker_loop" in ln.text for ln in lines):
        return "DataLoader worker process"
    return None


def _context_record(texts: list[str], end: int) -> ExceptionRecord | None:
    """The lines before the error, kept for rules and retrieval (they often hold the real clue)."""
    before = [t for t in texts[max(0, end - _CONTEXT_LINES) : end] if t.strip()]
    return ExceptionRecord(None, _clean_message("\n".join(before)), (), "log-context") if before else None


def _failure_without_traceback(lines: list[Line], text: str, asserts, nccl, sig) -> Failure:
    """No traceback: find the last line that looks like an exception, else the most informative line.

    The lines just before it are kept as a context record, so rules still see messages that were
    printed around (not in) the final line.
    """
    texts = [ln.text for ln in lines]
    notes = ["No Python traceback found; diagnosed from the error line and the lines around it."]
    wrapper = _wrapper_anywhere(lines)
    for idx in range(len(texts) - 1, -1, -1):
        s = texts[idx].strip()
        m = _EXC_LINE.match(s)
        if m and m.group("msg") is not None and (_EXC_TYPE_HINT.search(m.group("type")) or "." in m.group("type")):
            record, _ = _read_message([(k, t) for k, t in enumerate(texts)], idx, _Record())
            frozen = record.freeze()
            chain = tuple(r for r in (_context_record(texts, idx), frozen) if r is not None)
            return Failure(frozen.exc_type, _clean_message(frozen.message), (), chain, wrapper, lines[idx].rank, asserts, nccl, sig, text, tuple(notes))
    salient = signals.best_salient_line(texts)
    if salient is not None:
        message = texts[salient].strip()
        rank = lines[salient].rank
        context = _context_record(texts, len(texts))
    else:
        nonblank = [t for t in texts if t.strip()]
        message = "\n".join(nonblank[-20:]).strip()
        rank, context = None, None
    error = ExceptionRecord(None, message)
    chain = tuple(r for r in (context, error) if r is not None)
    return Failure(None, message, (), chain, wrapper, rank, asserts, nccl, sig, text, tuple(notes))
