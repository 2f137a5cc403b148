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

__all__ = ["extract", "extract_kernel_asserts", "read_rodata", "rodata_strings", "is_message", "to_template", "LIBS", "CPU_LIBS", "CUDA_LIBS"]

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
    r"timed out|aborted|corrupt\w*|denied|rejected|no such|not equal|differs?|different|greater|less|larger|smaller|same|"
    r"negative|non-negative|positive|non-positive|non-empty|empty|zero|contains? either|nan|inf|exceed\w*)\b",
    re.I,
)


# Function schema: ``name.overload(Tensor self, ...) -> Tensor`` (with or without a namespace).
_SCHEMA_RE = re.compile(r"^(?:[\w]+::)?[\w.]+\((?:[^()]|\([^()]*\))*\)\s*->\s*.+$|^[\w]+::[\w.]+$|^\w+::\w+\.\w+$", re.S)
# python_arg_parser signatures: ``greater(Tensor input, Scalar other, *, Tensor out=None)``
_SIGNATURE_RE = re.compile(
    r"^[\w.]+\(\s*(?:\*|(?:Tensor|Scalar|SymInt|IntArrayRef|SymIntArrayRef|ScalarType|Layout|Device|MemoryFormat|Generator|Dimname|"
    r"DimnameList|TensorList|Storage|Stream|int64_t|int|double|float|bool|c10::\w+|std::\w+|at::\w+)\b)[^()]*\)(?:\|\w+)?$")
_MANGLED_RE = re.compile(r"^(?:\*?_?Z|N\d|St\d|\*N\d|\*?Z\d|\*St)")
_CODE_PUNCT_RE = re.compile(r"::|->|\(\)\s*[;{]|[{};]\s*$|^\s*[{}#]|\b(?:return|auto|const|void|template|typename|namespace|def|self\.\w+\s*=)\b|%\w+\s*[=:]\s*\w+::|\w+\(%\w+")
_DOC_RE = re.compile(r"(?:^|\n)\s*(?:Args|Arguments|Returns|Example|Examples|Note|Attributes|Parameters|Inputs|Outputs|Type Constraints)\s*:+|>>>|\.\. (?:note|warning|math)::", re.S)
_LOG_RE = re.compile(r"^\s*(?:\[[^\]]*\]\s*)?(?:DEBUG|INFO|TRACE|VERBOSE|Dumping|After |Before |Running |Optimizing |Graph |graph\(|Original |New |Starting |Finished |Done |Loaded |Loading |Creating |Created )", re.I)
_PRINTF_RE = re.compile(r"%(?:\d+\$)?[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|z|j|t|q|I64|I32)?([diouxXeEfFgGaAcspUSRV%])")  # UVSR: PyErr_Format
_FMT_RE = re.compile(r"\{(\d*)(?::([^{}]*))?\}")
_WORD_RE = re.compile(r"[A-Za-z][a-z]+|[A-Z]{2,}[a-z]*|[A-Za-z]\b")


def _letters_ratio(s: str) -> float:
    """Share of letters among the non-blank characters."""
    return sum(c.isalpha() for c in s) / max(1, sum(not c.isspace() for c in s))


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
    if _DOC_RE.search(t) or t.count("\n") > 6 or (s.startswith("\n") and "\n" in t) or re.search(r"\n {6,}\S", t):
        return False  # docstrings, code blocks, graph dumps
    if _SIGNATURE_RE.match(t) or re.search(r"\)\|(?:deprecated|hidden)$", t) or t.startswith(("Failed cond ", "Exception raised when")):
        return False  # python_arg_parser signatures, fuser debug dumps, exception-class docstrings
    if _LOG_RE.match(t) or re.search(r"\w+ = \"|^\s*\w+\s*=\s*\S+\s*$", t):
        return False
    if _CODE_PUNCT_RE.search(_FMT_RE.sub("\u27e7", t)):
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
    if _letters_ratio(fmt_stripped) < 0.6:
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
    if re.match(r"^(?:D\b|-?d\b| dimensions?\b| dims?\b| elements?\b| bytes?\b| channels?\b| times\b| arguments?\b| positional| (?:were|was) given)", a):
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
    if re.search(r"\$\d", s) and not re.search(r"\$\{", s):
        s = re.sub(r"\$\d+", "{}", s)  # protobuf's Substitute() fields ($0, $1)
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
    return bool(re.match(r"^(?:[\s,.;:)\]}'\"`]|-[a-z]|and\b|or\b|but\b|got\b|with\b|of\b|for\b|to\b|in\b|is\b|are\b|was\b|which\b|while\b|than\b|instead\b|should\b|must\b|does\b|has\b|have\b|not\b)", s))


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

_OP_AFTER = r"(?:\(\)\s*:?|:(?!:)|\s+(?:only supports?|supports only|expects?|expected|requires?|does not support|doesn't support|is not supported|not supported|is only supported|received|got|must|cannot|can't|can only|should|is not implemented|not implemented))"
_OP_RE = re.compile(r"^\s*(?:torch\.)?(?:(?:nn\.)?functional\.)?(?P<name>[A-Za-z_][\w.]*?)(?:\.(?:out|Tensor|Scalar|default))?" + _OP_AFTER)
_OP_INNER = [
    re.compile(r"forward AD with (?P<name>\w+) that does not support"),
    re.compile(r"derivative for (?P<name>\w+) is not implemented"),
    re.compile(r"\bthe derivative for '(?P<name>\w+)'"),
    re.compile(r"\bmethod wrapper_\w+?__(?P<name>[a-z]\w+)\b"),
]
_OP_STOP = {"input", "output", "self", "other", "tensor", "error", "warning", "note", "value", "index", "dim", "size", "type", "expected", "the",
            "this", "it", "we", "you", "only", "but", "got", "and", "or", "not", "a", "an", "if", "in", "as", "for", "to", "with", "when"}


_PARAM_NAMES = {"pad", "stride", "padding", "dilation", "weight", "bias", "target", "mask", "scale", "alpha", "beta", "eps", "offsets",
                "indices", "values", "grad", "src", "source", "size", "sizes", "shape", "repeats", "lengths", "std", "mean", "lambda"}


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
        if name in _PARAM_NAMES and not template.lstrip().startswith((name + "(", name + ":")):
            continue  # ``pad should be ...``, ``grad requires ...``: an argument, not the op
        if "SymNode" in template:
            continue  # ``sub not supported by NestedIntSymNode``: a SymNode method
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


_HEADER_EXT = (".h", ".hpp", ".hh", ".cuh", ".inl", ".ipp")
_HEADER_REACH = 2  # literals after a header's __FILE__ that still take the header rather than the unit


def _attributed_strings(data: bytes) -> list[tuple[int, str, str | None]]:
    """Every literal of ``.rodata`` with the source file it most likely comes from, where the layout shows it.

    Long literals (>= 32 bytes) are emitted 8-aligned and back to back, per translation unit in first-use order; the
    unit's ``__FILE__`` literal comes right after its first message, and a header's ``__FILE__`` (an inline check
    of the header) sits among the unit's literals where the header's checks are first used. A literal takes the
    path right after it when that path is the next literal (a unit's first message), else the header path among
    the last ``_HEADER_REACH`` literals, else the unit's path. ``INTERNAL ASSERT FAILED at "<path>"`` literals
    count as path markers too. A run breaks at binary data or at an unaligned literal (the short-literal section,
    which holds no paths): literals there get no file.
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
    unit: str | None = None
    header: str | None = None
    since_header = 0
    for k, (off, s) in enumerate(chunks):
        aligned = off % 8 == 0
        if s is None or not aligned:
            unit = header = None  # binary data or the short-literal section: the run is over
            if s is None:
                continue
        if aligned and is_path(s):
            p = norm_path(s)
            if p.endswith(_HEADER_EXT):
                header, since_header = p, 0
            else:
                unit, header = p, None
            continue
        attr = header if header is not None and since_header < _HEADER_REACH else unit
        if aligned and k + 1 < len(chunks):
            noff, ns = chunks[k + 1]
            if ns is not None and noff % 8 == 0 and is_path(ns) and noff - (off + len(s.encode("utf-8"))) < 16:
                attr = norm_path(ns)  # a unit's first message sits just before its __FILE__
        if len(s) >= 4:
            out.append((off, s, attr))
            since_header += 1
        m = _INTERNAL_RE.match(s) if aligned and "INTERNAL ASSERT" in s else None
        if m:
            p = norm_path(m.group("path"))
            if p.endswith(_HEADER_EXT):
                header, since_header = p, 0
            else:
                unit, header = p, None
    return out


# Documentation compiled in (ONNX operator schemas, pybind docstrings) rather than messages.
_DOC_FILE_RE = re.compile(r"^third_party/onnx/")
_DOC_OPENER_RE = re.compile(
    r"^\s*(?:The |This operator|This op |Output|Input|Inputs|Outputs|Whether|Indicates|Constrain|A list|List of|Tensor of|Optional|If set|If true|"
    r"Specifies|Specify|Number of|Type of|Default|Coefficient|Value of|Scale |Sequence |Keep the|Concatenate|Returns|Return |Compute|Computes|"
    r"Perform|Performs|Produces|Given |Takes |It |Note that|See |For example|Example|Intel\(R\)|Intel |Tensor with |Result, |"
    r"Reshaped tensor|A 1-D tensor|A \w+ tensor|Values greater|Return true|1D int64 tensor)")


def _lib_entries(path: Path, op_names: set[str], in_headers: dict[str, set[str]] | None = None) -> list[dict]:
    data, _ = read_rodata(path)
    lib = path.name
    out = []
    for _off, s, attr in _attributed_strings(data):
        if not is_message(s):
            continue
        m = _INTERNAL_RE.match(s)
        if not m and attr and _DOC_FILE_RE.match(attr) and (
            _DOC_OPENER_RE.match(s) or not _STRONG_CUES.search(s) or "\n" in s.strip() or len(s) > 160 or re.search(r"\*\*|<br>|`\[|\.\s+[A-Z]", s)
        ):
            continue  # ONNX operator schema text: descriptions of inputs, outputs and attributes
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
            hdrs = (in_headers or {}).get(s, ())
            if attr and attr in hdrs:
                entry.update(file=attr, file_confidence="header")
            elif len(hdrs) == 1:
                entry.update(file=next(iter(hdrs)), file_confidence="header")  # the literal is written in that installed header
            elif attr:
                entry.update(file=attr, file_confidence="nearby")
        kind = "warning" if _WARN_RE.search(template) and not entry["internal"] else "error"
        entry.update(template=template, kind=kind, lib=lib)
        out.append(entry)
    return out


_C_LITERAL_RE = re.compile(r'(?<![\w\\\'])"(?:[^"\\\n]|\\.)*"(?:\s*"(?:[^"\\\n]|\\.)*")*')
_C_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'", "?": "?", "0": "\0", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
_INCLUDE_ROOTS = {"ATen": "aten/src/ATen", "c10": "c10", "torch": "torch", "caffe2": "caffe2"}


def _c_unescape(body: str) -> str:
    return re.sub(r"\\(.)", lambda m: _C_ESCAPES.get(m.group(1), m.group(0)), body)


def header_literals(include_dir: Path) -> dict[str, set[str]]:
    """String literals of PyTorch's own installed headers (``torch/include/{ATen,c10,torch}``): literal -> repo paths."""
    found: dict[str, set[str]] = {}
    for top, repo_top in _INCLUDE_ROOTS.items():
        root = include_dir / top
        if not root.is_dir():
            continue
        for p in root.rglob("*"):
            if p.suffix not in _HEADER_EXT or not p.is_file() or p.parts[-2:-1] == ("ops",) and top == "ATen":
                continue
            try:
                text = p.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if "TORCH" not in text and "throw" not in text and "AT_ERROR" not in text and "_CHECK" not in text and "WARN" not in text:
                continue
            rel = repo_top + "/" + p.relative_to(root).as_posix()
            for m in _C_LITERAL_RE.finditer(text):
                lit = "".join(_c_unescape(part) for part in re.findall(r'"((?:[^"\\\n]|\\.)*)"', m.group(0)))
                if len(lit) >= MIN_FRAGMENT:
                    found.setdefault(lit, set()).add(rel)
    return found


def _op_names(lib_dir: Path) -> set[str]:
    names: set[str] = set()
    for lib in ("libtorch_cpu.so", "libtorch_cuda.so"):
        p = lib_dir / lib
        if p.exists():
            data, _ = read_rodata(p)
            names.update(m.decode() for m in re.findall(rb"(?<=\0)aten::([a-z_][a-z0-9_]*)(?=\0)", data))
    return names


def _entry_id(lib: str, template: str) -> str:
    return f"binary:{lib}:{hashlib.sha1(template.encode('utf-8')).hexdigest()[:12]}"


def _make_entry(lib: str, e: dict, op_names: set[str], torch_version: str, commit: str) -> dict:
    t = e["template"]
    internal = e["internal"]
    return {
        "id": _entry_id(lib, t),
        "template": t,
        "kind": e["kind"],
        "exc_type": e.get("exc_type", infer_exc_type(t, internal)),
        "source": "binary",
        "file": e["file"],
        "line": e["line"],
        "function": e.get("function"),
        "op": None if internal or e["kind"] == "kernel_assert" else infer_op(t, op_names),
        "condition": e["condition"],
        "internal": internal,
        "category": None,
        "category_source": None,
        "torch_version": torch_version,
        "commit": commit,
        "lib": lib,
        "file_confidence": e["file_confidence"],
        "matchable": _matchable(t),
    }


CPU_LIBS = ("libc10.so", "libtorch_cpu.so", "libtorch_python.so")
CUDA_LIBS = ("libc10_cuda.so", "libtorch_cuda.so", "libtorch_cuda_linalg.so")


def extract(lib_dir: Path, torch_version: str, commit: str, libs: tuple[str, ...] | None = None) -> list[dict]:
    """Atlas entries (source "binary") from the PyTorch shared libraries under ``lib_dir`` (``torch/lib``).

    ``libs`` limits the libraries whose entries are returned (default: every one of :data:`LIBS` present); the
    others are still read first, so an entry is returned only for a template none of them holds.
    """
    lib_dir = Path(lib_dir)
    op_names = _op_names(lib_dir)
    in_headers = header_literals(lib_dir.parent / "include")
    seen: set[str] = set()
    entries: list[dict] = []
    for lib in LIBS:
        p = lib_dir / lib
        if not p.exists():
            continue
        for e in _lib_entries(p, op_names, in_headers):
            t = e["template"]
            if t in seen:
                continue
            seen.add(t)
            if libs is None or lib in libs:
                entries.append(_make_entry(lib, e, op_names, torch_version, commit))
    return entries


# ------------------------------------------------------------------------------------------ CUDA kernel asserts
#
# A failed CUDA_KERNEL_ASSERT(cond) prints, from the GPU, ``<file>:<line>: <function>: block: [x,y,z], thread:
# [x,y,z] Assertion `<cond>` failed.``; the condition text, __FILE__ and the function name are data of the device
# code (the cubins inside the library's fat binary), not of the host .rodata. ``cuobjdump -xelf <arch> lib.so``
# writes those cubins out; :func:`extract_kernel_asserts` reads their strings.

_COND_CHARS_RE = re.compile(r"^[\w\s<>=!&|()\[\]\.\-+*/%,:\"'?~^\\]+$")
_COND_OP_RE = re.compile(r"<=?|>=?|==|!=|&&|\|\||^\s*!|\bfalse\b")
_COND_PRINTF_RE = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?(?:ll|l|z|h)?[sdiufxXp]\b")
# CUDA_KERNEL_ASSERT_MSG/_PRINTF: ``[CUDA_KERNEL_ASSERT] <file>:<line>: %s: block: ... Assertion failed: `cond`: msg``
_KA_PREFIX_RE = re.compile(r"^\[CUDA_KERNEL_ASSERT\] (?P<path>[^\s:]+):(?P<line>\d+): (?P<rest>.*)$", re.S)
# generated kernel names in device messages (``FATAL: kernel `fmha_cutlassB_f16_aligned_64x64_k128_sm50` is for ...``)
_KERNEL_NAME_RE = re.compile(r"`(?=[A-Za-z_]\w*\d)(?=\w*_)\w+`")
UBIQUITOUS_SHARE = 0.25  # a path in more cubins than this share (a header every kernel includes) marks nothing


def elf_sections(data: bytes) -> list[tuple[str, int, bytes]]:
    """(name, type, bytes) of every section of an in-memory ELF image (cubins are ELF)."""
    if data[:4] != b"\x7fELF":
        return []
    is64 = data[4] == 2
    e = "<" if data[5] == 1 else ">"
    if is64:
        (shoff,) = struct.unpack_from(e + "Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", data, 0x3A)
        fmt = e + "IIQQQQ"
    else:
        (shoff,) = struct.unpack_from(e + "I", data, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", data, 0x2E)
        fmt = e + "IIIIII"
    if not shoff or shstrndx >= shnum:
        return []
    secs = [struct.unpack_from(fmt, data, shoff + i * shentsize) for i in range(shnum)]
    _, _, _, _, so, ss = secs[shstrndx]
    names = data[so:so + ss]
    out = []
    for name, typ, _flags, _addr, off, size in secs:
        end = names.find(b"\0", name)
        out.append((names[name:end].decode("latin-1"), typ, b"" if typ == 8 else data[off:off + size]))
    return out


def looks_like_condition(s: str) -> bool:
    t = s.strip()
    if not 3 <= len(t) <= 400 or "\n" in t or _COND_PRINTF_RE.search(t) or is_path(t) or t.startswith(("void ", "_Z", "$")):
        return False
    return bool(_COND_CHARS_RE.match(t) and _COND_OP_RE.search(t))


def cubin_literals(data: bytes) -> list[str]:
    """Printable NUL-terminated strings of a cubin's data sections (code, symbol and info sections skipped)."""
    out = []
    for name, typ, body in elf_sections(data):
        if typ != 1 or name.startswith((".text", ".nv.info", ".debug", ".nv.callgraph", ".nv.prototype", ".nv.rel", ".note")):
            continue
        out.extend(s for _, s in rodata_strings(body, min_len=3))
    return out


def _kernel_message(s: str) -> dict:
    """Template, condition and exact file/line of a device message (a printf of a kernel, a CUDA_KERNEL_ASSERT_MSG)."""
    out: dict = {"file": None, "line": None, "file_confidence": None, "condition": None}
    m = _KA_PREFIX_RE.match(s)
    if m:
        rel = norm_path(m.group("path"))
        rest = m.group("rest")
        out.update(file=rel, line=int(m.group("line")), file_confidence="exact")
        c = re.search(r"Assertion failed: `(.+?)`", rest)
        if c:
            out["condition"] = c.group(1)
        template = f"[CUDA_KERNEL_ASSERT] {HOLE['any']}{rel}:{HOLE['int']}: " + to_template(rest)
    else:
        template = to_template(s)
    out["template"] = _merge_holes(_KERNEL_NAME_RE.sub(f"`{HOLE['name']}`", template))
    return out


def extract_kernel_asserts(cubins: list[Path], lib: str, torch_version: str, commit: str, skip: set[str] | None = None) -> list[dict]:
    """``kernel_assert`` entries from cubins cut out of ``lib``: one per assert condition, plus device printf messages.

    A cubin is one translation unit; the order of its strings does not follow the source, so a condition takes the
    nearest preceding path of its cubin that is not a header every kernel includes (``c10/core/DynamicCast.h``),
    else the cubin's one unit path, else none.
    """
    per_cubin = []
    counts: dict[str, int] = {}
    for cubin in cubins:
        try:
            strings = cubin_literals(cubin.read_bytes())
        except (OSError, struct.error):
            continue
        per_cubin.append(strings)
        for p in {norm_path(s) for s in strings if is_path(s)}:
            counts[p] = counts.get(p, 0) + 1
    ubiquitous = {p for p, n in counts.items() if n >= 10 and n > UBIQUITOUS_SHARE * len(per_cubin)}
    seen = set(skip or ())
    entries = []
    for strings in per_cubin:
        paths = list(dict.fromkeys(p for p in (norm_path(s) for s in strings if is_path(s)) if p not in ubiquitous))
        units = [p for p in paths if not p.endswith(_HEADER_EXT)]
        unit = units[0] if len(units) == 1 else (paths[0] if len(paths) == 1 else None)
        near: str | None = None
        for s in strings:
            if is_path(s):
                p = norm_path(s)
                if p not in ubiquitous:
                    near = p
                continue
            attr = near or unit
            base = {"kind": "kernel_assert", "exc_type": None, "file": attr, "line": None, "file_confidence": "nearby" if attr else None,
                    "condition": None, "internal": False}
            if looks_like_condition(s):
                cond = s.strip()
                e = {**base, "template": f"{HOLE['any']} Assertion `{cond}` failed.", "condition": cond}
            elif is_message(s):
                km = _kernel_message(s)
                e = {**base, **{k: v for k, v in km.items() if v is not None or k == "condition"}}
                if km["file_confidence"] is None:
                    e.update(file=attr, file_confidence="nearby" if attr else None)
            else:
                continue
            if e["template"] in seen:
                continue
            seen.add(e["template"])
            entries.append(_make_entry(lib, e, set(), torch_version, commit))
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
