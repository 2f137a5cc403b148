"""Atlas entries from the string literals compiled into PyTorch's shared libraries (source "binary").

The messages a C++ check raises (``TORCH_CHECK(cond, "cdist only supports ...", x)``) are compiled into the
library's ``.rodata`` section as NUL-terminated literals, one literal per piece of a ``c10::str(...)`` message.
This module reads ``.rodata`` itself (a small ELF section-table reader, no dependency), keeps the literals that
read as user-facing messages, turns printf/fmt fields into typed holes and, where the layout allows, names the
source file:

* ``X INTERNAL ASSERT FAILED at "<path>":<line>, please report a bug to PyTorch.`` literals carry their own file,
  line and condition (``file_confidence: "exact"``);
* ``Expected <cond> to be true, but got false. (Could this error message be improved? ...)`` literals carry
  their condition (a TORCH_CHECK without a message);
* every other message gets the nearest ``__FILE__`` literal of its translation unit (``file_confidence:
  "nearby"``, never a line). GCC emits a translation unit's long literals (>= 32 bytes) into one mergeable
  section in first-use order and the linker keeps that order, so the ``__FILE__`` string sits among the messages
  of the same unit: right after the unit's first message, before the rest. Short literals (< 32 bytes) go into
  another section that holds no paths; they get no file.

Entry point: :func:`extract` (``scripts/build_atlas.py`` calls it).
"""

from __future__ import annotations

import hashlib
import re
import struct
from pathlib import Path

__all__ = ["extract", "read_rodata", "rodata_strings", "is_message", "to_template", "LIBS"]

# Libraries read, in order (the first library that holds a template owns its entry).
LIBS = ("libc10.so", "libtorch_cpu.so", "libtorch_python.so", "libc10_cuda.so", "libtorch_cuda.so", "libtorch_cuda_linalg.so")

HOLE = {k: f"\u27e6{k}\u27e7" for k in ("int", "float", "shape", "dtype", "device", "name", "any")}
_HOLE_RE = re.compile("\u27e6(int|float|shape|dtype|device|name|any)\u27e7")
MIN_FRAGMENT = 12

# --------------------------------------------------------------------------------------------------- ELF reading


def read_rodata(path: Path) -> tuple[bytes, int]:
    """The bytes of the ``.rodata`` section of an ELF file and its file offset; ``(b"", 0)`` when there is none."""
    with open(path, "rb") as f:
        ident = f.read(16)
        if len(ident) < 16 or ident[:4] != b"\x7fELF":
            raise ValueError(f"{path}: not an ELF file")
        is64 = ident[4] == 2
        e = "<" if ident[5] == 1 else ">"
        hdr = ident + f.read(64 - 16 if is64 else 52 - 16)
        if is64:
            (shoff,) = struct.unpack_from(e + "Q", hdr, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", hdr, 0x3A)
            fmt = e + "IIQQQQ"
        else:
            (shoff,) = struct.unpack_from(e + "I", hdr, 0x20)
            shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", hdr, 0x2E)
            fmt = e + "IIIIII"
        if not shoff or not shnum:
            return b"", 0
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        secs = [struct.unpack_from(fmt, table, i * shentsize) for i in range(shnum)]  # name, type, flags, addr, offset, size
        _, _, _, _, str_off, str_size = secs[shstrndx]
        f.seek(str_off)
        names = f.read(str_size)
        for name, typ, _flags, _addr, off, size in secs:
            if typ == 8:  # SHT_NOBITS
                continue
            end = names.find(b"\0", name)
            if names[name:end] == b".rodata":
                f.seek(off)
                return f.read(size), off
    return b"", 0


_CTRL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def rodata_strings(data: bytes, min_len: int = 4) -> list[tuple[int, str]]:
    """NUL-terminated, NUL-preceded UTF-8 strings of printable text (tabs and newlines allowed), with offsets."""
    out = []
    pos = 0
    n = len(data)
    while pos < n:
        end = data.find(b"\0", pos)
        if end < 0:
            break
        if end - pos >= min_len:
            raw = data[pos:end]
            try:
                s = raw.decode("utf-8")
            except UnicodeDecodeError:
                s = None
            if s is not None and not _CTRL_RE.search(s):
                out.append((pos, s))
        pos = end + 1
    return out


# ------------------------------------------------------------------------------------------------ classification

_PATH_RE = re.compile(r"^(?:[A-Za-z]:)?[\w./\\+~-]*[/\\][\w.+~-]+\.(?:cpp|cc|cxx|c|h|hpp|hh|cu|cuh|mm|inl|ipp)$")
_ROOTS = ("aten", "c10", "torch", "caffe2", "third_party", "functorch", "build", "test")


def is_path(s: str) -> bool:
    return bool(_PATH_RE.match(s))


def norm_path(p: str) -> str:
    """Repository-relative form of a compiled-in path: ``/__w/pytorch/pytorch/aten/src/X.cpp`` -> ``aten/src/X.cpp``."""
    p = p.replace("\\", "/")
    m = re.search(r"(?:^|/)pytorch/((?:" + "|".join(_ROOTS) + r")/.*)$", p)
    if m:
        return m.group(1)
    parts = p.split("/")
    for i, part in enumerate(parts):
        if part in _ROOTS and i + 1 < len(parts):
            return "/".join(parts[i:])
    return p.lstrip("./")


_INTERNAL_RE = re.compile(r"^(?P<cond>.*) INTERNAL ASSERT FAILED at \"(?P<path>[^\"]+)\":(?P<line>\d+), please report a bug to PyTorch\.\s*$", re.S)
_NOMSG_RE = re.compile(r"^Expected (?P<cond>.+) to be true, but got false\.\s+\(Could this error message be improved\?\s+If so, please report an enhancement request to PyTorch\.\)$", re.S)

# Phrasing typical of an error or warning message.
_CUES = re.compile(
    r"\b(?:must|mustn't|expected|expect|expects|expecting|got|get|gets|not supported|unsupported|supports?|supported|invalid|cannot|can't|can ?not|"
    r"could not|couldn't|unable|only|should|shouldn't|out of (?:range|bounds|memory)|mismatch(?:ed|es)?|not implemented|unimplemented|"
    r"assert(?:ion)?|failed|fails?|failure|error|errors|requires?|required|doesn't|does not|don't|do not|is not|are not|isn't|aren't|"
    r"was not|were not|wasn't|unknown|unexpected|unexpectedly|illegal|too (?:many|few|large|small|big|long)|exceeds?|exceeded|at least|"
    r"at most|missing|no such|not found|found|but|allowed|disallowed|not allowed|please|deprecated|deprecation|incompatible|"
    r"wrong|bad|empty|negative|non-negative|positive|non-positive|greater|less|larger|smaller|equal|same|match|matches|differ|different|"
    r"undefined|overflow|underflow|violat\w*|inconsistent|incorrect|ambiguous|already|yet|no longer|instead|received|receive|needs?|"
    r"attempt(?:ed|ing)?|tried|trying|impossible|forbidden|refus\w*|unrecognized|unrecognised|unknown|non-?empty|divisible|"
    r"contiguous|broadcast\w*|dimension|dimensions|dims?|shape|size|sizes|dtype|device|tensor|tensors|argument|arguments|"
    r"warning|warn|will be removed|in a future|timed out|timeout|abort\w*|corrupt\w*|lost|denied|rejected|ignor\w*|skip\w*)\b",
    re.I,
)
_STRONG_CUES = re.compile(
    r"\b(?:must|mustn't|expected|expects|expecting|got|not supported|unsupported|invalid|cannot|can't|can ?not|could not|couldn't|unable|"
    r"should|shouldn't|out of (?:range|bounds|memory)|mismatch(?:ed|es)?|not implemented|unimplemented|failed|fails|failure|error|"
    r"requires?|required|does not|doesn't|do not|don't|is not|are not|isn't|aren't|was not|were not|unknown|unexpected|illegal|"
    r"too (?:many|few|large|small|big|long)|exceeds?|exceeded|at least|at most|missing|not found|but|not allowed|please|deprecated|"
    r"incompatible|only|received|tried to|trying to|attempted|attempting to|inconsistent|incorrect|ambiguous|already|no longer|"
    r"impossible|overflow|underflow|violat\w*|unrecognized|unrecognised|forbidden|disallowed|wrong|bad|undefined|"
    r"timed out|aborted|corrupt\w*|denied|rejected|no such|not equal|differs?|different)\b",
    re.I,
)


# Function schema: ``name.overload(Tensor self, ...) -> Tensor`` (with or without a namespace).
_SCHEMA_RE = re.compile(r"^(?:[\w]+::)?[\w.]+\((?:[^()]|\([^()]*\))*\)\s*->\s*.+$|^[\w]+::[\w.]+$|^\w+::\w+\.\w+$", re.S)
_MANGLED_RE = re.compile(r"^(?:\*?_?Z|N\d|St\d|\*N\d|\*?Z\d|\*St)")
_CODE_PUNCT_RE = re.compile(r"::|->|\(\)\s*[;{]|[{};]\s*$|^\s*[{}#]|\b(?:return|auto|const|void|template|typename|namespace|def|self\.\w+\s*=)\b|%\w+\s*[=:]\s*\w+::|\w+\(%\w+")
_DOC_RE = re.compile(r"(?:^|\n)\s*(?:Args|Arguments|Returns|Example|Examples|Note|Attributes|Parameters|Inputs|Outputs|Type Constraints)\s*:+|>>>|\.\. (?:note|warning|math)::", re.S)
_LOG_RE = re.compile(r"^\s*(?:\[[^\]]*\]\s*)?(?:DEBUG|INFO|TRACE|VERBOSE|Dumping|After |Before |Running |Optimizing |Graph |graph\(|Original |New |Starting |Finished |Done |Loaded |Loading |Creating |Created )", re.I)
_PRINTF_RE = re.compile(r"%(?:\d+\$)?[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|z|j|t|q|I64|I32)?([diouxXeEfFgGaAcsp%])")
_FMT_RE = re.compile(r"\{(\d*)(?::([^{}]*))?\}")
_WORD_RE = re.compile(r"[A-Za-z][a-z]+|[A-Z]{2,}[a-z]*|[A-Za-z]\b")


def _letters_ratio(s: str) -> float:
    return sum(c.isalpha() for c in s) / max(1, len(s))


def _english_words(s: str) -> list[str]:
    """Lowercase-ish words that look like prose (not identifiers with underscores or digits)."""
    return [w for w in re.findall(r"(?<![\w.:/])[A-Za-z][a-z']{1,}(?![\w(])", s)]


def is_message(s: str) -> bool:
    """Whether a literal reads as (a fragment of) a user-facing error or warning message."""
    t = s.strip()
    if len(t) < MIN_FRAGMENT or not any(c.isalpha() for c in t):
        return False
    if _INTERNAL_RE.match(s) or _NOMSG_RE.match(s):
        return True
    if _MANGLED_RE.match(t) or is_path(t) or _SCHEMA_RE.match(t):
        return False
    if " " not in t:  # one token: a symbol, a key, a name
        return False
    if re.search(r"\(\s*(?:Tensor|Scalar|int|float|bool|str|SymInt|Tensor\??\[\]|Tensor\(\w!?\))\b[^)]*\)\s*->", t):
        return False  # a schema embedded in another string
    if _DOC_RE.search(t) or t.count("\n") > 6:
        return False  # docstrings, code blocks, graph dumps
    if _LOG_RE.match(t) or re.search(r"\w+ = \"|^\s*\w+\s*=\s*\S+\s*$", t):
        return False
    if _CODE_PUNCT_RE.search(t):
        return False
    if re.search(r"(?:^|\s)(?:https?://|www\.)", t) and len(_english_words(t)) < 4:
        return False
    if re.search(r"\bT\d?\s*=|\bShape\s*<|\bConstant\s*<|= \w+\s*\(|\w+ = \w+\(", t):
        return False  # ONNX function bodies
    # printf-heavy logging formats (``%sprimitive,create%s,...``), format-only strings
    fmt_stripped = _FMT_RE.sub(" ", _PRINTF_RE.sub(" ", t))
    words = _english_words(fmt_stripped)
    if len(words) < 2:
        return False
    if _letters_ratio(fmt_stripped) < 0.55:
        return False
    if len(_PRINTF_RE.findall(t)) >= 3 and "," in t and " " not in t.split(",")[0]:
        return False  # csv-like verbose logs
    toks = t.split()
    identish = sum(1 for w in toks if re.search(r"[a-z][A-Z]|_\w|\w_|\d[a-zA-Z]|[a-zA-Z]\d", w))
    if identish > len(toks) * 0.5:
        return False  # mostly identifiers: code, symbol lists
    if not _CUES.search(fmt_stripped):
        return False
    # weaker phrasing needs a strong cue, or message-like shape (a sentence, a continuation fragment)
    if _STRONG_CUES.search(fmt_stripped):
        return True
    if _DOC_OPENER_RE.match(t) or t.startswith("\n") or "\n" in t.strip():
        return False
    # weak phrasing only: a fragment of a longer message (``... of shape ``, ``, tensor id ``)
    return bool(re.search(r"(?:[:=]\s*|\s)$", s) or re.match(r"^(?:[,.;)]|\s)", s))


# ---------------------------------------------------------------------------------------------------- templates


def _hole_for_context(before: str, after: str, spec: str | None = None) -> str:
    """The typed hole a value in this textual context reads as."""
    if spec:
        c = spec[-1]
        if c in "diouxX":
            return "int"
        if c in "eEfFgGaA":
            return "float"
    b = before[-40:].lower()
    a = after[:12]
    if a.startswith("()") or re.search(r"(?:argument|keyword argument|attribute|function|module|parameter|operator|method|op|key|field|named?)\s*['\"`]$", b):
        return "name"
    if re.search(r"\b(?:dtypes?|scalar ?types?|scalartype)\b[^.;]{0,14}$", b):
        return "dtype"
    if re.search(r"\bdevices?\b[^.;]{0,12}$", b) and "index" not in b[-12:]:
        return "device"
    if re.search(r"\b(?:shapes?|sizes|size \[|of size|with size|input size|output size)\b[^.;a-z]{0,6}$", b) or re.search(r"\bshape\b[^.;]{0,10}$", b):
        return "shape"
    if re.search(r"\b(?:dim|dims|dimension|dimensions|ndim|ndims|index|position|numel|length|rank|count|number of [a-z ]+?|at most|at least|"
                 r"size|stride|offset|step|groups|channels|batch size|world size|rank|version)\b[^a-z.;]{0,6}$", b):
        return "int"
    if re.match(r"^(?:D\b|-?d\b| dimensions?\b| dims?\b| elements?\b| bytes?\b| channels?\b| times\b| arguments?\b| positional)", a):
        return "int"
    return "any"


def _merge_holes(t: str) -> str:
    def repl(m: re.Match) -> str:
        kinds = set(_HOLE_RE.findall(m.group(0)))
        return HOLE[kinds.pop()] if len(kinds) == 1 else HOLE["any"]

    return re.sub("(?:\u27e6(?:int|float|shape|dtype|device|name|any)\u27e7){2,}", repl, t)


def _fill_format_fields(s: str) -> str:
    """printf (``%d``, ``%s``, ``%ld``) and fmt (``{}``, ``{:d}``) fields -> typed holes; ``%%`` -> ``%``."""
    has_printf = bool(re.search(r"%(?!%)", s)) and bool(_PRINTF_RE.search(s))
    has_fmt = "{}" in s or bool(re.search(r"\{\d*:[^{}]*\}|\{\d+\}", s))
    out = []
    pos = 0
    pattern = []
    if has_printf:
        pattern.append(_PRINTF_RE.pattern)
    if has_fmt:
        pattern.append(_FMT_RE.pattern)
    if not pattern:
        return s
    rx = re.compile("|".join(f"(?:{p})" for p in pattern))
    for m in rx.finditer(s):
        tok = m.group(0)
        out.append(s[pos:m.start()])
        pos = m.end()
        if tok == "%%":
            out.append("%")
            continue
        if tok.startswith("%"):
            spec = tok[-1]
            out.append(HOLE[_hole_for_context("".join(out), s[m.end():], spec if spec not in "sc p" else None)])
        else:
            fspec = (m.groups()[-1] or "").strip()
            typ = None
            if fspec and fspec[-1] in "dxXob":
                typ = "int"
            elif fspec and fspec[-1] in "feEgG%":
                typ = "float"
            out.append(HOLE[typ or _hole_for_context("".join(out), s[m.end():])])
    out.append(s[pos:])
    return "".join(out)


def _continues_after(s: str) -> bool:
    return bool(re.search(r"(?:[:=]\s*|[\s(\[{'\"`])$", s)) or bool(re.search(r"\b(?:got|is|was|be|of|for|to|but|found|and|with|at|from|in|by|than|has|have|as)$", s.rstrip()))


def _continues_before(s: str) -> bool:
    return bool(re.match(r"^(?:[\s,.;:)\]}'\"`]|and\b|or\b|but\b|got\b|with\b|of\b|for\b|to\b|in\b|is\b|are\b|was\b|which\b|while\b|than\b|instead\b|should\b|must\b|does\b|has\b|have\b|not\b)", s))


def to_template(s: str) -> str:
    """The template of one literal: format fields as typed holes, and a hole at an end that clearly continues."""
    body = _fill_format_fields(s)
    if _continues_before(s) and not body.startswith("\u27e6"):
        body = HOLE["any"] + body
    if _continues_after(s) and not body.endswith("\u27e7"):
        body = body + HOLE[_hole_for_context(s, "")]
    return _merge_holes(body)


def literal_parts(template: str) -> list[str]:
    return [p for p in _HOLE_RE.split(template)[::2] if p]


def _matchable(template: str) -> bool:
    return any(len(p.strip()) >= MIN_FRAGMENT for p in literal_parts(template))


# -------------------------------------------------------------------------------------------------- attributes

_OP_AFTER = r"(?:\(\)\s*:?|:|\s+(?:only supports?|supports only|expects?|expected|requires?|does not support|doesn't support|is not supported|not supported|is only supported|received|got|must|cannot|can't|can only|should|is not implemented|not implemented))"
_OP_RE = re.compile(r"^\s*(?:torch\.)?(?:(?:nn\.)?functional\.)?(?P<name>[A-Za-z_][\w.]*?)(?:\.(?:out|Tensor|Scalar|default))?" + _OP_AFTER)
_OP_INNER = [
    re.compile(r"forward AD with (?P<name>\w+) that does not support"),
    re.compile(r"derivative for (?P<name>\w+) is not implemented"),
    re.compile(r"\bthe derivative for '(?P<name>\w+)'"),
    re.compile(r"\bmethod wrapper_\w+?__(?P<name>[a-z]\w+)\b"),
]
_OP_STOP = {"input", "output", "self", "other", "tensor", "error", "warning", "note", "value", "index", "dim", "size", "type", "expected", "the",
            "this", "it", "we", "you", "only", "but", "got", "and", "or", "not", "a", "an", "if", "in", "as", "for", "to", "with", "when"}


def infer_op(template: str, op_names: set[str]) -> str | None:
    m = _OP_RE.match(template)
    cands = []
    if m:
        cands.append(m.group("name"))
    for rx in _OP_INNER:
        mm = rx.search(template)
        if mm:
            cands.append(mm.group("name"))
    for name in cands:
        if name.lower() in _OP_STOP:
            continue
        for c in (name, name.replace(".", "_")):
            if c in op_names:
                return f"aten::{c}"
        if m and name == m.group("name") and re.match(r"^\s*torch\.[A-Za-z_][\w.]*(?:\(\))?\s*:?", template) and template.lstrip().startswith("torch."):
            return "torch." + name if not name.startswith("torch.") else name
    return None


def infer_exc_type(template: str, internal: bool) -> str | None:
    if internal:
        return "RuntimeError"  # c10::Error
    if template.startswith('\u27e6any\u27e7" not implemented for \'') or "Could not run '" in template:
        return "NotImplementedError"  # TORCH_CHECK_NOT_IMPLEMENTED in AT_DISPATCH_*; c10::NotImplementedError from the dispatcher
    return None


_WARN_RE = re.compile(r"\b(?:deprecated|will be removed|will change|in a future (?:release|version)|is being deprecated|warning:|UserWarning)\b", re.I)


# ---------------------------------------------------------------------------------------------------- extraction


def _attributed_strings(data: bytes) -> list[tuple[int, str, str | None]]:
    """Every literal of ``.rodata`` with the ``__FILE__`` literal of its translation unit where the layout shows it.

    Long literals are emitted 8-aligned and back to back, per translation unit in first-use order, and the unit's
    ``__FILE__`` literal comes right after its first message. A literal takes the path that precedes it in the same
    run of aligned, contiguous literals, or the path right after it when that path is the very next literal and
    starts its run's next unit. A run breaks at binary data or at an unaligned literal (the short-literal section).
    """
    chunks = []  # (offset, text or None for binary data)
    pos = 0
    n = len(data)
    while pos < n:
        end = data.find(b"\0", pos)
        if end < 0:
            end = n
        if end > pos:
            raw = data[pos:end]
            try:
                s = raw.decode("utf-8")
            except UnicodeDecodeError:
                s = None
            if s is not None and _CTRL_RE.search(s):
                s = None
            chunks.append((pos, s))
        pos = end + 1
    out: list[tuple[int, str, str | None]] = []
    prev_path: str | None = None
    for k, (off, s) in enumerate(chunks):
        if s is None or off % 8:
            prev_path = None  # binary data or the short-literal section: the run is over
            if s is None:
                continue
        if is_path(s):
            prev_path = norm_path(s) if off % 8 == 0 else None
            continue
        attr = prev_path
        if off % 8 == 0 and k + 1 < len(chunks):
            noff, ns = chunks[k + 1]
            if ns is not None and noff % 8 == 0 and is_path(ns) and noff - (off + len(s.encode("utf-8"))) < 16:
                attr = norm_path(ns)  # the unit's first message sits just before its __FILE__
        if len(s) >= 4:
            out.append((off, s, attr))
    return out


# Documentation compiled in (ONNX operator schemas, pybind docstrings) rather than messages.
_DOC_FILE_RE = re.compile(r"^third_party/onnx/onnx/defs/")
_DOC_OPENER_RE = re.compile(
    r"^\s*(?:The |This operator|This op |Output|Input|Inputs|Outputs|Whether|Indicates|Constrain|A list|List of|Tensor of|Optional|If set|If true|"
    r"Specifies|Specify|Number of|Type of|Default|Coefficient|Value of|Scale |Sequence |Keep the|Concatenate|Returns|Return |Compute|Computes|"
    r"Perform|Performs|Produces|Given |Takes |It |Note that|See |For example|Example|Intel\(R\)|Intel )")


def _lib_entries(path: Path, op_names: set[str]) -> list[dict]:
    data, _ = read_rodata(path)
    lib = path.name
    out = []
    for _off, s, attr in _attributed_strings(data):
        if not is_message(s):
            continue
        m = _INTERNAL_RE.match(s)
        if not m and attr and _DOC_FILE_RE.match(attr) and (_DOC_OPENER_RE.match(s) or not _STRONG_CUES.search(s) or re.search(r"\*\*|<br>|`\[", s)):
            continue
        entry: dict = {"file": None, "line": None, "file_confidence": None, "condition": None, "internal": False}
        nm = _NOMSG_RE.match(s)
        if m:
            rel = norm_path(m.group("path"))
            cond = m.group("cond")
            entry.update(file=rel, line=int(m.group("line")), file_confidence="exact", condition=cond, internal=True)
            # the prefix of the path differs between builds (/__w/pytorch/pytorch/, ../, /pytorch/) and the line between
            # versions; the message that follows at run time is c10::str of the assert's other arguments
            template = f'{cond} INTERNAL ASSERT FAILED at "{HOLE["any"]}{rel}":{HOLE["int"]}, please report a bug to PyTorch. {HOLE["any"]}'
        else:
            template = s if nm else to_template(s)
            if nm:
                entry["condition"] = nm.group("cond")
            if attr:
                entry.update(file=attr, file_confidence="nearby")
        kind = "warning" if _WARN_RE.search(template) and not entry["internal"] else "error"
        entry.update(template=template, kind=kind, lib=lib)
        out.append(entry)
    return out


def _op_names(lib_dir: Path) -> set[str]:
    names: set[str] = set()
    for lib in ("libtorch_cpu.so", "libtorch_cuda.so"):
        p = lib_dir / lib
        if p.exists():
            data, _ = read_rodata(p)
            names.update(m.decode() for m in re.findall(rb"\0aten::([a-z_][a-z0-9_]*)\0", data))
    return names


def _entry_id(lib: str, template: str) -> str:
    return f"binary:{lib}:{hashlib.sha1(template.encode('utf-8')).hexdigest()[:12]}"


def extract(lib_dir: Path, torch_version: str, commit: str) -> list[dict]:
    """Atlas entries (source "binary") from the PyTorch shared libraries under ``lib_dir`` (``torch/lib``)."""
    lib_dir = Path(lib_dir)
    op_names = _op_names(lib_dir)
    seen: set[str] = set()
    entries: list[dict] = []
    for lib in LIBS:
        p = lib_dir / lib
        if not p.exists():
            continue
        for e in _lib_entries(p, op_names):
            t = e["template"]
            if t in seen:
                continue
            seen.add(t)
            internal = e["internal"]
            entries.append({
                "id": _entry_id(e["lib"], t),
                "template": t,
                "kind": e["kind"],
                "exc_type": infer_exc_type(t, internal),
                "source": "binary",
                "file": e["file"],
                "line": e["line"],
                "function": None,
                "op": infer_op(t, op_names),
                "condition": e["condition"],
                "internal": internal,
                "category": None,
                "category_source": None,
                "torch_version": torch_version,
                "commit": commit,
                "lib": e["lib"],
                "file_confidence": e["file_confidence"],
                "matchable": _matchable(t),
            })
    return entries


def main(argv: list[str] | None = None) -> int:
    """``python -m assistant.atlas.extract_binary LIB_DIR OUT.jsonl.gz [--version V --commit C]``."""
    import argparse
    import gzip
    import json

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("lib_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--version")
    ap.add_argument("--commit")
    a = ap.parse_args(argv)
    version, commit = a.version, a.commit
    if version is None or commit is None:
        import torch  # only to label the entries

        version = version or torch.__version__
        commit = commit or (torch.version.git_version or "")
    entries = extract(a.lib_dir, version, commit)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(a.out, "wt", encoding="utf-8", compresslevel=9) as f:
        for e in entries:
            f.write(json.dumps(e, ensure_ascii=False, sort_keys=False) + "\n")
    print(f"{len(entries)} entries -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
