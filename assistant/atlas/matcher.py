"""Recognise PyTorch messages in pasted text and read their values: the atlas matcher.

    atlas = Atlas.load()                     # the packaged data (assistant/atlas/data/*.jsonl.gz)
    for m in atlas.match(text):              # best first
        m.entry, m.verified, m.values, m.span
    facts = values_as_facts(atlas.best(text))

Every matchable template (an atlas entry's message with typed holes, ``⟦int⟧`` ... ``⟦any⟧``) is split on
its holes into literal fragments; one fragment, the *key* (the longest, unless many templates share it),
goes into a single multi-pattern finder. A key found in the text is only a candidate: the whole template
is then verified around it with the template's own regular expression (built on first use and cached),
whose holes are typed groups, so the values come back as ints, floats, shapes, dtypes, devices and names.
When every literal is in place but a typed hole holds something else (the extractor guessed the type),
a relaxed reading (typed holes as ⟦any⟧) still verifies, flagged ``relaxed``. A key without a verified
template is reported too, ``verified=False``.

The text is normalised first, keeping a map back to the original offsets: terminal escapes and
progress-bar segments dropped, per-line prefixes (``[rank0]:``, ``[default1]:``, timestamps) removed,
indentation dropped and whitespace runs collapsed (a line break stays a line break for the holes, and
counts as a space for the literals). So the message is found wherever PyTorch or a launcher put it: in a
DataLoader worker's re-raised traceback, after ``-- Process 1 terminated with the following error:``,
inside ``BackendCompilerFailed: backend='inductor' raised:``, before the C++ ``Exception raised from``
frames, wrapped over several lines, or in a CUDA kernel assertion line.

Two finders are implemented over the same keys: an Aho-Corasick automaton (``pyahocorasick``, the
default: its matching is 2-4x faster and its worst case 5x better, see ``benchmarks/atlas.json``) and a
pure-Python one that indexes each key by its rarest whole word (a set intersection with the text's words,
then ``str.find``), used when pyahocorasick is not installed. Both find exactly the same key occurrences.

Loading parses the gzip JSONL entry files once and keeps a compact index (templates and keys as single
strings, integer arrays, the entries as JSONL read one at a time on use) in ``$TORCHHELP_HOME/atlas/``,
keyed by the data files' content; later loads read the index and build the automaton (about 20 ms).
"""

from __future__ import annotations

import bisect
import gc
import gzip
import hashlib
import io
import json
import os
import pickle
import re
import sys
import zlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # the engine's types are imported on use: loading and matching need only the stdlib
    from assistant.types import Facts

INDEX_VERSION = 4
MIN_KEY = 12  # a key (literal fragment) must be at least this long (ATLAS_BRIEF: otherwise too generic)
SHARED_KEY = 4  # a longest fragment shared by more templates than this gives way to a rarer one
AC_WORD = 12  # the automaton holds each key's first AC_WORD characters (= MIN_KEY); the rest is checked with startswith
MAX_TEXT = 1 << 20  # longer texts: the last MAX_TEXT characters (errors end a log; the reader's window is 1 MiB too)
MAX_VERIFY = 400  # regex verifications per text, at most
KEEP_CACHED = 4  # parsed atlases kept in the cache folder
MAX_TRIES = 3  # verifications per template per text (occurrences tried from the last one back)
DEFAULT_FINDER = "ac"
try:
    import ahocorasick  # noqa: F401  (imported for real by _ACFinder)

    _HAVE_AC = True
except ImportError:  # pragma: no cover - a dependency; the words finder stands in
    _HAVE_AC = False
DATA_DIR = Path(__file__).with_name("data")

HOLE_RE = re.compile(r"⟦(\w+)⟧")
HOLE_KINDS = ("int", "float", "shape", "dtype", "device", "name", "any")
_WS = re.compile(r"\s+")
_TOKEN = re.compile(r"\w+")
_EXC_PREFIX = re.compile(r"^(?:[\w.]*(?:Error|Exception|Warning|Interrupt|Failed|Failure)\s*:\s*)+")

# ---------------------------------------------------------------------------------------------- holes

# dtype spellings in messages -> torch names (the same table as assistant.parse.messages, extended; kept
# here so that matching imports nothing from the engine)
_DTYPE_ALIASES = {
    "float": "float32", "float32": "float32", "single": "float32", "double": "float64", "float64": "float64",
    "half": "float16", "float16": "float16", "bfloat16": "bfloat16", "long": "int64", "int64": "int64", "int": "int32",
    "int32": "int32", "short": "int16", "int16": "int16", "byte": "uint8", "uint8": "uint8", "char": "int8", "int8": "int8",
    "bool": "bool", "complexfloat": "complex64", "complex64": "complex64", "cfloat": "complex64", "complexdouble": "complex128",
    "complex128": "complex128", "cdouble": "complex128", "complexhalf": "complex32", "complex32": "complex32", "chalf": "complex32",
    "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "qint8": "qint8", "quint8": "quint8", "qint32": "qint32",
    "quint4x2": "quint4x2", "quint2x4": "quint2x4", "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
    "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz", "float8_e8m0fnu": "float8_e8m0fnu",
}
# Typed holes are kept cheap to compile (a template's regex is built on its first hit): dtype and device
# read a word of their shape and are normalised afterwards. A hole that starts the template may not start
# inside a word, one that ends it may not end inside one; between literals the literals anchor it.
_HOLE_PATTERN = {
    "int": r"[-+]?\d+",
    "float": r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf|nan)",
    "shape": r"(?:torch\.Size\(\[[^\[\]\n]{0,400}\]\)|\[(?:[^\[\]\n]|\[[^\[\]\n]{0,100}\]){0,400}\]|\((?:[^()\n]|\([^()\n]{0,100}\)){0,400}\)|\d+(?:\s?[x×]\s?\d+)+)",
    "dtype": r"(?:torch\.(?:cuda\.)?|c10::)?[A-Za-z]\w*",
    "device": r"(?:device\(type=['\"]\w+['\"](?:,\s?index=\d+)?\)|[A-Za-z]\w*(?::\d+)?)",
    "name": r"[A-Za-z_]\w*(?:(?:\.|::)\w+)*",
}
# window budgets (characters of text) a hole may take, for the search around a key hit
_HOLE_BUDGET = {"int": 24, "float": 40, "shape": 1000, "dtype": 48, "device": 48, "name": 240, "any": 2000}
_ANY_MID = r"[^\n]{0,2000}?"  # lazy up to the next literal, on the same line
_ANY_LAST = r"[^\n]{0,2000}"  # to the end of the line
_ANY_FIRST = r"[^\n]*?"  # from the start of the line (matched, not searched: see _Compiled)


class HoleValue(NamedTuple):
    """One hole of a verified template: its kind, the text it matched and the typed value."""

    kind: str
    text: str
    value: Any  # int | float | tuple (shape) | str (dtype, device: normalised; name, any)
    context: str  # the word of the template just before the hole ("size", "dim", "argument"), or ""


# ---------------------------------------------------------------------------------------------- templates


def parse_template(template: str) -> list[tuple[str, str]]:
    """The template as ``("lit", text)`` / ``("hole", kind)`` parts: whitespace runs collapsed to one space,
    the ends stripped, unknown hole kinds read as ``any``, adjacent holes merged."""
    parts: list[tuple[str, str]] = []
    pos = 0
    text = template.strip()
    for m in HOLE_RE.finditer(text):
        if m.start() > pos:
            parts.append(("lit", _WS.sub(" ", text[pos : m.start()])))
        kind = m.group(1) if m.group(1) in HOLE_KINDS else "any"
        if parts and parts[-1][0] == "hole":
            prev = parts[-1][1]
            parts[-1] = ("hole", prev if prev == kind else "any")
        else:
            parts.append(("hole", kind))
        pos = m.end()
    if pos < len(text):
        parts.append(("lit", _WS.sub(" ", text[pos:])))
    return parts


def canonical_template(template: str) -> str:
    return "".join(v if t == "lit" else f"⟦{v}⟧" for t, v in parse_template(template))


def literal_fragments(template: str) -> list[str]:
    """The literal fragments (whitespace collapsed, stripped), in order."""
    return [v.strip() for t, v in parse_template(template) if t == "lit" and v.strip()]


def template_key(template: str) -> str | None:
    """The longest literal fragment (>= MIN_KEY characters), or None when the template is too generic."""
    frags = [f for f in literal_fragments(template) if len(f) >= MIN_KEY]
    return max(frags, key=len) if frags else None


def choose_keys(templates: Sequence[str], fragments: Sequence[Sequence[str]] | None = None) -> list[str | None]:
    """One key per template: its longest fragment, unless more than SHARED_KEY templates have that same
    fragment, then the rarest of its fragments (longest among equally rare). Deterministic.
    ``fragments``: each template's literal fragments, when the caller has them already."""
    if fragments is None:
        fragments = [literal_fragments(t) for t in templates]
    frags = [sorted({f for f in fs if len(f) >= MIN_KEY}, key=lambda f: (-len(f), f)) for fs in fragments]
    df: dict[str, int] = {}
    for fs in frags:
        for f in fs:
            df[f] = df.get(f, 0) + 1
    keys: list[str | None] = []
    for fs in frags:
        if not fs:
            keys.append(None)
        elif df[fs[0]] <= SHARED_KEY:
            keys.append(fs[0])
        else:
            keys.append(min(fs, key=lambda f: (df[f], -len(f), f)))
    return keys


def _anchor_words(keys: Sequence[str]) -> tuple[dict[str, tuple[int, ...]], tuple[int, ...]]:
    """For the pure-Python finder: each key under its rarest whole word (a word not touching the key's
    ends, which may be cut mid-word by a hole); keys without such a word are scanned for directly."""
    toks: list[list[str]] = []
    df: dict[str, int] = {}
    for k in keys:
        words = _TOKEN.findall(k)
        if words and _TOKEN.match(k):  # the first word touches the key's start: it may be cut
            words = words[1:]
        if words and (k[-1].isalnum() or k[-1] == "_"):
            words = words[:-1]
        toks.append(words)
        for w in set(words):
            df[w] = df.get(w, 0) + 1
    anchors: dict[str, list[int]] = {}
    scan: list[int] = []
    for i, words in enumerate(toks):
        if not words:
            scan.append(i)
            continue
        w = min(words, key=lambda w: (df[w], -len(w), w))
        anchors.setdefault(w, []).append(i)
    return {w: tuple(v) for w, v in anchors.items()}, tuple(scan)


# ---------------------------------------------------------------------------------------------- text


_PREFIX = (
    r"(?:\[(?:global_)?rank[ =]?\d+\]:?|\[default\d+\]:|rank\d+:|\d{1,3}: (?=\s|Traceback|File|[A-Z])"
    r"|\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?"
    r"(?:\s*[-|]?\s*(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b:?)?(?:\s*[-|]\s*[\w.]+(?=\s*[-|]\s))?(?:\s*[-|:])?"
    r"|\[\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]|(?:stderr|stdout)[:|])[ \t]*"
)
_PREFIXES = re.compile(r"(?:" + _PREFIX + r")+")
# Where something may change: a cheap scan (no branch can start anywhere else), then the piece at that spot.
_SPOT = re.compile(r"[\n\t\f\v\r\x1b]| [ \n]")
_PIECE = re.compile(
    r"(?P<esc>\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]{0,512}(?:\x07|\x1b\\)?|\x1b[@-Z\\-_])"
    r"|(?P<nl>[ \t\f\v\r]*\n(?:[ \t\f\v\r]*\n)*[ \t\f\v]*(?:" + _PREFIX + r")*)"
    r"|(?P<cr>\r(?!\n))"
    r"|(?P<sp>[ \t\f\v]{2,}|[\t\f\v])"
)


class _Text:
    """The normalised text (``norm``, line breaks kept), its one-line twin (``flat``, same offsets) and
    the map from normalised offsets back to the original's."""

    __slots__ = ("norm", "flat", "_nstarts", "_ostarts", "base")

    def __init__(self, text: str) -> None:
        self.base = 0
        if len(text) > MAX_TEXT:
            self.base = len(text) - MAX_TEXT
            text = text[self.base :]
        out: list[str] = []
        nstarts = [0]  # normalised offset where each kept stretch of the original starts
        ostarts = [0]  # ... and its original offset
        last = 0
        npos = 0
        line = (0, 0, 1)  # where the current line starts: len(out), npos, len(nstarts) (for a carriage return)
        m0 = _PREFIXES.match(text)
        if m0 is not None and m0.end() > 0:
            last = m0.end()
            ostarts[0] = last
        for spot in _SPOT.finditer(text):
            s = spot.start()
            if s < last:
                continue
            m = _PIECE.match(text, s)
            if m is None:
                continue
            e = m.end()
            kind = m.lastgroup
            if s > last:
                out.append(text[last:s])
                npos += s - last
            if kind == "cr":  # a progress bar redrew the line: keep what follows the last \r only
                del out[line[0] :]
                npos = line[1]
                del nstarts[line[2] :], ostarts[line[2] :]
            elif kind == "nl":
                out.append("\n")
                npos += 1
            elif kind == "sp":
                out.append(" ")
                npos += 1
            last = e
            nstarts.append(npos)
            ostarts.append(e)
            if kind == "nl":
                line = (len(out), npos, len(nstarts))
        if last < len(text):
            out.append(text[last:])
        self.norm = "".join(out)
        self.flat = self.norm.replace("\n", " ")
        self._nstarts = nstarts
        self._ostarts = ostarts

    def orig(self, pos: int, end: bool = False) -> int:
        """The original offset of a normalised one (for an end offset: just after the last character)."""
        if end and pos > 0:
            return self.orig(pos - 1) + 1
        i = bisect.bisect_right(self._nstarts, pos) - 1
        return self.base + self._ostarts[i] + (pos - self._nstarts[i])


# ---------------------------------------------------------------------------------------------- compiled template


class _Compiled:
    """A template's regex (holes typed), the budgets of text before and after its key, and its literal
    coverage; and, built on first need, its relaxed twin, where typed holes read like ⟦any⟧ (for the
    extractor's guess of a hole's type that the text does not bear out: the literals must still match)."""

    __slots__ = ("_parts", "_key_at", "_inner", "_key", "rx", "holes", "contexts", "pre", "post", "line_start", "coverage", "_relaxed")

    def __init__(self, template: str, key: str) -> None:
        parts = parse_template(template)
        self._parts = parts
        self._key = key
        key_at = next((i for i, (t, v) in enumerate(parts) if t == "lit" and key in v), 0)
        self._key_at = key_at
        self._inner = max(parts[key_at][1].find(key), 0) if parts and parts[key_at][0] == "lit" else 0
        self.holes = tuple(v for t, v in parts if t == "hole")
        contexts = []
        for i, (t, _v) in enumerate(parts):
            if t == "hole":
                words = _TOKEN.findall(parts[i - 1][1]) if i > 0 else []
                contexts.append(words[-1].lower() if words else "")
        self.contexts = tuple(contexts)
        self.coverage = sum(len(v.strip()) for t, v in parts if t == "lit")
        self.rx, self.pre, self.post, self.line_start = self._build(relaxed=False)
        self._relaxed: tuple[re.Pattern[str], int, int, bool] | None = None

    def _build(self, relaxed: bool) -> tuple[re.Pattern[str], int, int, bool]:
        parts = self._parts
        n = len(parts)
        kinds = [("any" if relaxed and t == "hole" else v) if t == "hole" else "" for t, v in parts]
        rx: list[str] = []
        budgets: list[int] = []
        g = 0
        for i, (typ, val) in enumerate(parts):
            if typ == "lit":
                rx.append(_literal_rx(val, lead_opt=i > 0 and kinds[i - 1] == "any", trail_opt=i + 1 < n and kinds[i + 1] == "any"))
                budgets.append(len(val) + 8 + len(val) // 8)
                continue
            kind = kinds[i]
            if kind == "any":
                pat = _ANY_FIRST if i == 0 else (_ANY_LAST if i == n - 1 else _ANY_MID)
            else:
                pat = (r"(?<![\w.])" if i == 0 else "") + _HOLE_PATTERN[kind] + (r"(?!\w)" if i == n - 1 else "")
            rx.append(f"(?P<h{g}>{pat})")
            g += 1
            budgets.append(_HOLE_BUDGET[kind])
        k = self._key_at
        lit_len = len(parts[k][1]) if parts and parts[k][0] == "lit" else 0
        pre = sum(budgets[:k]) + self._inner + 8
        post = sum(budgets[k + 1 :]) + max(lit_len - self._inner - len(self._key), 0) + 8
        return re.compile("".join(rx)), pre, post, bool(parts) and kinds[0] == "any"

    def _run(self, built: tuple[re.Pattern[str], int, int, bool], norm: str, start: int, end: int) -> re.Match[str] | None:
        rx, pre, post, line_start = built
        lo = max(0, start - pre)
        hi = min(len(norm), end + post)
        if not line_start:
            return rx.search(norm, lo, hi)
        # a leading ⟦any⟧ runs from the start of the line (or of the window); when literals come before
        # the key, the message may have been wrapped before it: then from the line before, too
        ls = max(lo, norm.rfind("\n", lo, start) + 1)
        m = rx.match(norm, ls, hi)
        if m is None and self._key_at > 1 and ls > lo:
            m = rx.match(norm, max(lo, norm.rfind("\n", lo, ls - 1) + 1), hi)
        return m

    def verify(self, text: _Text, start: int, end: int) -> re.Match[str] | None:
        return self._run((self.rx, self.pre, self.post, self.line_start), text.norm, start, end)

    def verify_relaxed(self, text: _Text, start: int, end: int) -> re.Match[str] | None:
        if not any(h != "any" for h in self.holes):
            return None  # nothing to relax
        if self._relaxed is None:
            self._relaxed = self._build(relaxed=True)
        return self._run(self._relaxed, text.norm, start, end)

    def relaxed_line_start(self) -> bool:
        return self._relaxed is not None and self._relaxed[3]


def _literal_rx(lit: str, lead_opt: bool, trail_opt: bool) -> str:
    """A literal as a regex: case-sensitive, each whitespace run matching any run of whitespace (optional
    next to an ⟦any⟧ hole, which may be empty)."""
    out: list[str] = []
    pieces = lit.split(" ")
    for j, piece in enumerate(pieces):
        if j:
            opt = (j == 1 and pieces[0] == "" and lead_opt) or (j == len(pieces) - 1 and piece == "" and trail_opt)
            out.append(r"\s*" if opt else r"\s+")
        out.append(re.escape(piece))
    return "".join(out)


# ---------------------------------------------------------------------------------------------- values


def _dtype_value(raw: str) -> str:
    """``Float``, ``torch.cuda.FloatTensor``, ``c10::Half``, ``CUDAFloatType`` -> torch names (float32,
    float16); an unknown spelling comes back as written."""
    s = raw.strip().strip("'\"`")
    s = re.sub(r"^(?:torch\.(?:cuda\.)?|c10::)", "", s)
    s = re.sub(r"^(?:CPU|CUDA)(?=[A-Z])", "", s)
    s = re.sub(r"(?<=[a-z0-9])(?:Tensor|Type)$", "", s)
    return _DTYPE_ALIASES.get(s.lower(), s)


_KNOWN_DTYPES = frozenset(_DTYPE_ALIASES.values())
_KNOWN_DEVICES = frozenset(
    ("cpu", "cuda", "mps", "meta", "xpu", "hpu", "xla", "lazy", "ipu", "mtia", "privateuseone", "vulkan", "hip", "mkldnn", "maia", "ve", "opengl", "opencl", "ideep", "fpga", "ort")
)


def _device_value(raw: str) -> str:
    m = re.match(r"device\(type=['\"](\w+)['\"](?:,\s?index=(\d+))?\)", raw)
    if m:
        return m.group(1) + (f":{m.group(2)}" if m.group(2) else "")
    name, _, idx = raw.partition(":")
    name = {"privateuse1": "privateuseone"}.get(name.lower(), name.lower())
    return f"{name}:{idx}" if idx else name


def _shape_value(raw: str) -> tuple[int | str, ...]:
    s = raw.strip()
    if s.startswith("torch.Size("):
        s = s[len("torch.Size(") : -1]
    if s[:1] in "[(":
        s = s[1:-1]
        items = [x.strip() for x in s.split(",") if x.strip()]
    else:
        items = [x.strip() for x in re.split(r"[x×]", s)]
    out: list[int | str] = []
    for x in items:
        out.append(int(x) if re.fullmatch(r"-?\d+", x) else x)
    return tuple(out)


_ANY_INT = re.compile(r"[-+]?\d+")
_ANY_FLOAT = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?\d+[eE][-+]?\d+|[-+]?(?:inf|nan)")
_ANY_SHAPE = re.compile(r"torch\.Size\(\[[\d, ]*\]\)|\[[\d, ]*\]|\(\)|\((?:\d+, ?)+\d*\)")
_SCALAR_TYPES = frozenset(("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool", "ComplexFloat", "ComplexDouble", "ComplexHalf"))
_ANY_DEVICE = re.compile(r"(?:cpu|cuda|mps|meta|xpu|hpu|xla|mtia)(?::\d+)?")


def _typed(kind: str, raw: str) -> Any:
    """A hole's text as its type; for ⟦any⟧, a number or a shape when that is all the text is."""
    try:
        if kind == "any":
            s = raw.strip()
            if _ANY_INT.fullmatch(s):
                return int(s)
            if _ANY_FLOAT.fullmatch(s):
                return float(s)
            if _ANY_SHAPE.fullmatch(s):
                return _shape_value(s)
            return s
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
        if kind == "shape":
            return _shape_value(raw)
        if kind == "dtype":
            return _dtype_value(raw)
        if kind == "device":
            return _device_value(raw)
    except (ValueError, IndexError):
        return raw
    return raw.strip()


# ---------------------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class AtlasMatch:
    """One atlas template recognised in a text.

    ``verified``: the whole template matched (its holes typed in ``values``); otherwise only its key was
    found (``values`` empty, ``span`` the key's). ``span`` is in the original text; ``matched`` the
    normalised text it covers. ``coverage``: literal characters of the template that matched (the
    ranking), ``share`` the same as a fraction of the template's literal characters. ``count``: how many
    times the key occurs in the text. ``entry`` is the preferred entry of the template (source order
    python, header, cpp, cuda, binary); ``also`` the other entries with the same template.
    """

    entry: dict[str, Any]
    template: str
    verified: bool
    span: tuple[int, int]
    matched: str
    values: tuple[HoleValue, ...] = ()
    coverage: int = 0
    share: float = 0.0
    count: int = 1
    also: tuple[dict[str, Any], ...] = field(default=())
    relaxed: bool = False
    frame_shown: bool | None = None

    @property
    def id(self) -> str:
        return str(self.entry.get("id"))

    def value(self, kind: str, n: int = 0) -> Any:
        """The n-th hole value of a kind, or None."""
        vals = [v.value for v in self.values if v.kind == kind]
        return vals[n] if n < len(vals) else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "template": self.template,
            "verified": self.verified,
            "span": list(self.span),
            "matched": self.matched,
            "values": [{"kind": v.kind, "text": v.text, "value": list(v.value) if isinstance(v.value, tuple) else v.value, "context": v.context} for v in self.values],
            "coverage": self.coverage,
            "share": round(self.share, 3),
            "count": self.count,
            "entry": self.entry,
            "also": [e.get("id") for e in self.also],
            "relaxed": self.relaxed,
            "frame_shown": self.frame_shown,
        }


_MATCH_KIND_RANK = {"kernel_assert": 0, "error": 1, "warning": 2}


def _legacy(entry: dict[str, Any]) -> bool:
    """An entry from a pre-1.0 PyTorch (the old checkout the atlas also reads)."""
    return str(entry.get("torch_version") or "").startswith("0.")


def _frame_shown(entry: dict[str, Any], t: _Text) -> bool | None:
    f = entry.get("file")
    if entry.get("source") != "python" or not isinstance(f, str) or "Traceback (most recent call last)" not in t.norm:
        return None
    return f in t.norm


def _by_evidence(entries: list[dict[str, Any]], t: _Text) -> list[dict[str, Any]]:
    """The entries of one template, the likeliest raise site first: one whose Python file appears in the
    text's traceback; then, when the text has a Python traceback that shows none of them, the C++ ones
    (a Python raise would have left its frame); current PyTorch before pre-1.0; otherwise the stored order."""
    if len(entries) < 2:
        return entries
    tb = "Traceback (most recent call last)" in t.norm

    def score(e: dict[str, Any]) -> tuple[int, int]:
        f = e.get("file")
        shown = isinstance(f, str) and e.get("source") == "python" and f in t.norm
        hidden_python = tb and e.get("source") == "python" and not shown
        return (0 if shown else (2 if hidden_python else 1), 1 if _legacy(e) else 0)

    return sorted(entries, key=score)


def _rank(m: AtlasMatch) -> tuple[Any, ...]:
    """Best first: verified before key-only; a kernel assertion line (the cause of the CUDA error around
    it), then errors, then warnings; the most literal characters matched; typed holes read as typed before a
    relaxed reading; current PyTorch before pre-1.0; more typed holes; the later in the text."""
    typed = sum(1 for v in m.values if v.kind != "any")
    kind = str(m.entry.get("kind"))
    if kind == "kernel_assert" and "Assertion" not in m.matched:
        kind = "error"  # first only when the text is an assertion line
    return (not m.verified, _MATCH_KIND_RANK.get(kind, 1), -m.coverage, m.relaxed, _legacy(m.entry), -typed, -m.span[0], m.id)


def values_as_facts(match: AtlasMatch) -> Facts:
    """The hole values as :class:`assistant.types.Facts`: shapes (all-integer ones, in order), numbers
    (ints and floats named by the template word before each hole: ``size``, ``dim``, ``index``; a repeated
    name gets ``_2``, ``_3``; a hole without a word is ``value1``...), dtypes and devices (normalised,
    distinct, in order; only values that are a dtype or a device), names (name holes), ``argument`` when a name follows the word "argument" or
    "parameter", and ``call`` when the entry's op is a public Python API path (``torch.``..., no private part)."""
    from assistant.types import Facts

    shapes: list[tuple[int, ...]] = []
    numbers: dict[str, float] = {}
    dtypes: list[str] = []
    devices: list[str] = []
    names: list[str] = []
    argument: str | None = None
    for i, v in enumerate(match.values):
        if v.kind == "any" and isinstance(v.value, str):  # an ⟦any⟧ that is exactly a dtype or a device counts as one
            if v.value.startswith("torch.") or v.value.endswith("Tensor") or v.value in _SCALAR_TYPES:
                v = v._replace(kind="dtype", value=_dtype_value(v.value))
            elif _ANY_DEVICE.fullmatch(v.value):
                v = v._replace(kind="device", value=_device_value(v.value))
        if v.kind in ("shape", "any") and isinstance(v.value, tuple) and all(isinstance(x, int) for x in v.value):
            shapes.append(v.value)
        elif v.kind in ("int", "float", "any") and isinstance(v.value, int | float) and not isinstance(v.value, bool):
            base = v.context if v.context and not v.context.isdigit() else f"value{i + 1}"
            key, n = base, 1
            while key in numbers:
                n += 1
                key = f"{base}_{n}"
            numbers[key] = v.value
        elif v.kind == "dtype" and v.value in _KNOWN_DTYPES and v.value not in dtypes:
            dtypes.append(v.value)
        elif v.kind == "device" and v.value.partition(":")[0] in _KNOWN_DEVICES and v.value not in devices:
            devices.append(v.value)
        elif v.kind == "name" and v.value:
            names.append(v.value)
            if argument is None and v.context in ("argument", "parameter", "arg", "param"):
                argument = v.value
    op = match.entry.get("op")
    public = isinstance(op, str) and op.startswith("torch.") and not any(p.startswith("_") for p in op.split("."))
    call = op if public else None
    return Facts(
        shapes=tuple(shapes), numbers=numbers, devices=tuple(devices), dtypes=tuple(dtypes), argument=argument, call=call, names=tuple(dict.fromkeys(names))
    )


# ---------------------------------------------------------------------------------------------- finders


def _ac_words(keys: Sequence[str]) -> tuple[list[str], array[int], array[int]]:
    """The automaton's words (each key's first AC_WORD characters, distinct) and, per word, its keys."""
    words: dict[str, list[int]] = {}
    for kid, k in enumerate(keys):
        words.setdefault(k[:AC_WORD], []).append(kid)
    ptr, kids = array("i", [0]), array("i")
    for v in words.values():
        kids.extend(v)
        ptr.append(len(kids))
    return list(words), ptr, kids


class _ACFinder:
    """Aho-Corasick over each key's first AC_WORD characters (pyahocorasick): short words keep the
    automaton small and quick to build. The full key is then checked with ``startswith``; a word shared by
    many keys gets, on its first hit, a tree keyed by the ``_NEXT`` characters that follow."""

    name = "ac"
    _NEXT = 8

    def __init__(self, keys: Sequence[str], words: tuple[list[str], array[int], array[int]] | None = None) -> None:
        import ahocorasick

        self._w = AC_WORD
        self._words, self._ptr, self._kids = words if words is not None else _ac_words(keys)
        self._split: dict[int, tuple[list[int], dict[str, Any]]] = {}
        self._keys = keys
        self._short = {wid: len(x) for wid, x in enumerate(self._words) if len(x) < self._w}  # none while AC_WORD <= MIN_KEY
        auto = ahocorasick.Automaton(ahocorasick.STORE_INTS)
        add = auto.add_word
        for wid, w in enumerate(self._words):
            add(w, wid)
        auto.make_automaton()
        self._auto = auto

    def _node(self, kids: Sequence[int], offset: int) -> tuple[list[int], dict[str, Any]]:
        """Keys shorter than offset + _NEXT, and the rest by their characters [offset, offset + _NEXT):
        a list, or a deeper node when many keys still share them (file paths do)."""
        short: list[int] = []
        groups: dict[str, list[int]] = {}
        for kid in kids:
            k = self._keys[kid]
            if len(k) < offset + self._NEXT:
                short.append(kid)
            else:
                groups.setdefault(k[offset : offset + self._NEXT], []).append(kid)
        return short, {c: (g if len(g) <= 8 else self._node(g, offset + self._NEXT)) for c, g in groups.items()}

    def find(self, flat: str) -> Iterator[tuple[int, int]]:
        """(start, key id) of every occurrence of every key in ``flat``."""
        ptr, allkids, keys, split, step, w, short = self._ptr, self._kids, self._keys, self._split, self._NEXT, self._w, self._short
        for end, wid in self._auto.iter(flat):
            start = end - (short[wid] if short and wid in short else w) + 1
            kids = allkids[ptr[wid] : ptr[wid + 1]]
            if len(kids) > 8:  # many keys begin with this word: walk down by the characters that follow
                node = split.get(wid)
                if node is None:
                    node = split[wid] = self._node(kids, w)
                kids = array("i")
                pos = end + 1
                while True:
                    kids.extend(node[0])
                    child = node[1].get(flat[pos : pos + step])
                    if child is None:
                        break
                    if isinstance(child, list):
                        kids.extend(child)
                        break
                    node = child
                    pos += step
            for kid in kids:
                k = keys[kid]
                if len(k) <= w or flat.startswith(k, start):
                    yield start, kid


class _WordFinder:
    """Pure Python: each key under its rarest whole word; the text's words intersected with those, then
    ``str.find`` for each key under a word present (plus the few keys without an interior word)."""

    name = "words"

    def __init__(self, keys: Sequence[str], anchors: dict[str, tuple[int, ...]] | None = None, scan: tuple[int, ...] | None = None) -> None:
        if anchors is None or scan is None:
            anchors, scan = _anchor_words(keys)
        self._keys = keys
        self._anchors = anchors
        self._scan = scan

    def find(self, flat: str) -> Iterator[tuple[int, int]]:
        keys = self._keys
        present = self._anchors.keys() & set(_TOKEN.findall(flat))
        kids: list[int] = list(self._scan)
        for w in present:
            kids.extend(self._anchors[w])
        for kid in kids:
            k = keys[kid]
            i = flat.find(k)
            while i >= 0:
                yield i, kid
                i = flat.find(k, i + 1)


# ---------------------------------------------------------------------------------------------- the atlas

_SOURCE_RANK = {"python": 0, "header": 1, "cpp": 2, "cuda": 3, "binary": 4}
_KIND_RANK = {"error": 0, "kernel_assert": 1, "warning": 2}


class _NoGlobals(pickle.Unpickler):
    """The index holds only builtin containers, strings, numbers and bytes: refuse anything else."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"atlas index: refusing {module}.{name}")


class _Entries:
    """The entries, by index: in memory (built from entries), or read one by one from the cached JSONL
    next to the index (byte offsets), so that loading reads no entry at all."""

    def __init__(self, items: list[dict[str, Any]] | None = None, path: Path | None = None, offsets: bytes = b"", sources: Sequence[str] = ()) -> None:
        self._items = items
        self._path = path
        self._offsets = array("q")
        self._offsets.frombytes(offsets)
        self._sources = tuple(sources)
        self._memo: dict[int, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self._items) if self._items is not None else max(len(self._offsets) - 1, 0)

    def __getitem__(self, i: int) -> dict[str, Any]:
        if self._items is not None:
            return self._items[i]
        e = self._memo.get(i)
        if e is None:
            try:
                with open(self._path, "rb") as fh:  # type: ignore[arg-type]
                    fh.seek(self._offsets[i])
                    e = json.loads(fh.read(self._offsets[i + 1] - self._offsets[i]))
            except (OSError, ValueError, TypeError):  # the cache went away: read the sources again
                self._items = [x for f in self._sources for x in read_entries(f)]
                return self._items[i]
            self._memo[i] = e
        return e


class Atlas:
    """All matchable atlas templates, compiled into one finder. Build with :meth:`load` (entry files)
    or :meth:`from_entries`; then :meth:`match`."""

    def __init__(self, index: dict[str, Any], entries: _Entries, finder: str = DEFAULT_FINDER) -> None:
        self.keys: list[str] = index["keys"].split("\n")  # key id -> key (no key holds a line break)
        self._templates: str = index["templates"]  # every canonical template, one a line
        self._tpl_off = _ints(index["tpl_off"])
        # flat integer arrays (few objects: quick to load, nothing for the garbage collector to walk)
        self._tpl_key = _ints(index["tpl_key"])  # template id -> key id
        self._key_ptr, self._key_tids = _ints(index["key_ptr"]), _ints(index["key_tids"])  # key id -> template ids
        self._ent_ptr, self._ent_ids = _ints(index["ent_ptr"]), _ints(index["ent_ids"])  # template id -> entries, preferred first
        self.sources: tuple[str, ...] = tuple(index.get("sources", ()))
        self._entries = entries
        self._compiled: dict[int, _Compiled | None] = {}
        if finder == "ac" and not _HAVE_AC:
            finder = "words"  # pyahocorasick missing: the pure-Python finder gives the same matches, slower
        if finder == "ac":
            words = index["ac_words"].split("\n") if index.get("ac_word") == AC_WORD else None
            self._finder: _ACFinder | _WordFinder = _ACFinder(self.keys, (words, _ints(index["ac_ptr"]), _ints(index["ac_kids"])) if words else None)
        elif finder == "words":
            anchors, scan = _NoGlobals(io.BytesIO(index["anchors"])).load() if index.get("anchors") else _anchor_words(self.keys)
            self._finder = _WordFinder(self.keys, anchors, scan)
        else:
            raise ValueError(f"unknown finder {finder!r} (ac or words)")
        self.finder = finder

    # ------------------------------------------------------------------ building

    @classmethod
    def from_entries(cls, entries: Iterable[dict[str, Any]], finder: str = DEFAULT_FINDER) -> Atlas:
        items = list(entries)
        return cls(build_index(items, anchors=finder == "words" or not _HAVE_AC), _Entries(items=items), finder=finder)

    @classmethod
    def load(cls, paths: Iterable[str | os.PathLike[str]] | None = None, *, finder: str = DEFAULT_FINDER, cache: bool | str | os.PathLike[str] = True) -> Atlas:
        """The atlas of these gzip JSONL entry files (default: every ``*.jsonl.gz`` under the packaged
        ``assistant/atlas/data``). ``cache``: True keeps the parsed index and the entries in
        ``$TORCHHELP_HOME/atlas`` (keyed by the files' content) and loads from there next time; a path
        keeps them in that folder; False parses the files every time."""
        files = sorted(Path(p) for p in paths) if paths is not None else sorted(DATA_DIR.glob("*.jsonl.gz"))
        sources = [str(f) for f in files]
        gc_was = gc.isenabled()
        gc.disable()  # loading makes many objects and no cycles: a collection in the middle is pure cost
        try:
            base: Path | None = None
            if cache:
                cdir = Path(cache) if not isinstance(cache, bool) else Path(os.environ.get("TORCHHELP_HOME") or "~/.cache/torchhelp").expanduser() / "atlas"
                base = cdir / f"matcher-{_fingerprint(files)}"
                index = _read_index(base.with_suffix(".index"))
                if index is not None:
                    return cls(index, _Entries(path=base.with_suffix(".jsonl"), offsets=index["offsets"], sources=sources), finder=finder)
            items = [x for f in files for x in read_entries(f)]
            index = build_index(items, anchors=finder == "words" or not _HAVE_AC)
            index["sources"] = sources
            if base is not None:
                _write_cache(base, index, items)
            return cls(index, _Entries(items=items), finder=finder)
        finally:
            if gc_was:
                gc.enable()

    # ------------------------------------------------------------------ entries

    def __len__(self) -> int:
        return len(self._tpl_off) - 1

    def template(self, tid: int) -> str:
        """The canonical template of a template id."""
        return self._templates[self._tpl_off[tid] : self._tpl_off[tid + 1] - 1]

    @property
    def n_entries(self) -> int:
        return len(self._entries)

    def entry(self, i: int) -> dict[str, Any]:
        return self._entries[i]

    def entries_of(self, tid: int) -> list[dict[str, Any]]:
        """The entries of a template id, preferred first."""
        return [self._entries[i] for i in self._ent_ids[self._ent_ptr[tid] : self._ent_ptr[tid + 1]]]

    def _compiled_for(self, tid: int) -> _Compiled | None:
        try:
            return self._compiled[tid]
        except KeyError:
            pass
        try:
            c: _Compiled | None = _Compiled(self.template(tid), self.keys[self._tpl_key[tid]])
        except re.error:
            c = None
        self._compiled[tid] = c
        return c

    # ------------------------------------------------------------------ matching

    def match(self, text: str, limit: int = 20) -> list[AtlasMatch]:
        """The templates found in ``text``, best first (see :func:`_rank`). Key-only hits inside a
        verified match are left out."""
        if not text:
            return []
        t = _Text(text)
        occ: dict[int, list[int]] = {}  # key id -> starts in the text
        for start, kid in self._finder.find(t.flat):
            occ.setdefault(kid, []).append(start)
        if not occ:
            return []
        keys = self.keys
        cands: list[tuple[int, int]] = []  # (template id, key id)
        ptr, tids = self._key_ptr, self._key_tids
        for kid in occ:
            cands.extend((tid, kid) for tid in tids[ptr[kid] : ptr[kid + 1]])
        cands.sort(key=lambda c: (-len(keys[c[1]]), c[0]))  # longest keys first: they verify the most
        verified: list[tuple[int, re.Match[str], _Compiled, int, bool]] = []
        keyonly: list[tuple[int, int, int]] = []
        budget = MAX_VERIFY
        for tid, kid in cands:
            starts = occ[kid]
            comp = self._compiled_for(tid) if budget > 0 else None
            m = None
            relaxed = False
            if comp is not None:
                klen = len(keys[kid])
                for s in starts[: -MAX_TRIES - 1 : -1]:  # the last occurrences first: the error ends the log
                    if budget <= 0:
                        break
                    budget -= 1
                    m = comp.verify(t, s, s + klen)
                    if m is not None:
                        break
                if m is None and budget > 0:  # every literal in place, but a hole not of its declared type?
                    budget -= 1
                    m = comp.verify_relaxed(t, starts[-1], starts[-1] + klen)
                    relaxed = m is not None
            if m is not None and comp is not None:
                verified.append((tid, m, comp, len(starts), relaxed))
            else:
                keyonly.append((tid, kid, starts[-1]))
        out: list[AtlasMatch] = []
        spans: list[tuple[int, int]] = []
        for tid, m, comp, count, relaxed in verified:
            s, e = m.span()
            spans.append((s, e))
            line_start = comp.relaxed_line_start() if relaxed else comp.line_start
            values = []
            for j, (kind, ctx) in enumerate(zip(comp.holes, comp.contexts, strict=True)):
                raw = m.group(f"h{j}") or ""
                if j == 0 and line_start:
                    raw = _EXC_PREFIX.sub("", raw)
                values.append(HoleValue(kind, raw, _typed(kind, raw), ctx))
            out.append(self._result(tid, True, t, s, e, tuple(values), comp.coverage, count, relaxed))
        for tid, kid, s in keyonly:
            e = s + len(keys[kid])
            if any(vs <= s and e <= ve for vs, ve in spans):
                continue
            out.append(self._result(tid, False, t, s, e, (), len(keys[kid]), len(occ[kid]), False))
        out.sort(key=_rank)
        return out[:limit]

    def _result(self, tid: int, verified: bool, t: _Text, s: int, e: int, values: tuple[HoleValue, ...], coverage: int, count: int, relaxed: bool) -> AtlasMatch:
        entries = _by_evidence(self.entries_of(tid), t)
        comp = self._compiled_for(tid)
        total = comp.coverage if comp is not None else sum(len(f) for f in literal_fragments(self.template(tid)))
        return AtlasMatch(
            entry=entries[0],
            template=self.template(tid),
            verified=verified,
            span=(t.orig(s), t.orig(e, end=True)),
            matched=t.norm[s:e],
            values=values,
            coverage=coverage,
            share=min(1.0, coverage / total) if total else 0.0,
            count=count,
            also=tuple(entries[1:]),
            relaxed=relaxed,
            frame_shown=_frame_shown(entries[0], t),
        )

    def best(self, text: str) -> AtlasMatch | None:
        """The best match, or None."""
        found = self.match(text, limit=1)
        return found[0] if found else None


# ---------------------------------------------------------------------------------------------- index


def read_entries(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The entries of one gzip JSONL (or plain JSONL) file."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


def _ints(data: bytes) -> array[int]:
    out = array("i")
    out.frombytes(data)
    return out


def build_index(entries: Sequence[dict[str, Any]], anchors: bool = True) -> dict[str, Any]:
    """Group the matchable entries by canonical template, choose one key per template, and index the keys
    (flat integer arrays, stored as bytes). ``anchors``: also index the keys for the pure-Python finder
    (otherwise it does that when it is built)."""
    groups: dict[str, list[int]] = {}
    fragments: dict[str, list[str]] = {}
    seen: dict[str, str] = {}  # raw template -> canonical
    for i, e in enumerate(entries):
        tpl = e.get("template")
        if not isinstance(tpl, str) or e.get("matchable") is False:
            continue
        canon = seen.get(tpl)
        if canon is None:
            parts = parse_template(tpl)
            canon = seen[tpl] = "".join(v if t == "lit" else f"⟦{v}⟧" for t, v in parts)
            if canon not in fragments:
                fragments[canon] = [v.strip() for t, v in parts if t == "lit" and v.strip()]
        groups.setdefault(canon, []).append(i)
    templates = list(groups)
    tkeys = choose_keys(templates, [fragments[t] for t in templates])
    keys: list[str] = []
    key_ids: dict[str, int] = {}
    key_tpls: list[list[int]] = []
    kept: list[str] = []
    tpl_key = array("i")
    ent_ptr, ent_ids = array("i", [0]), array("i")
    for tpl, k in zip(templates, tkeys, strict=True):
        if k is None:
            continue
        tid = len(kept)
        kept.append(tpl)
        eids = groups[tpl]
        if len(eids) > 1:
            eids = sorted(eids, key=lambda i: (_KIND_RANK.get(entries[i].get("kind"), 9), _SOURCE_RANK.get(entries[i].get("source"), 9), str(entries[i].get("id"))))
        ent_ids.extend(eids)
        ent_ptr.append(len(ent_ids))
        kid = key_ids.get(k)
        if kid is None:
            kid = key_ids[k] = len(keys)
            keys.append(k)
            key_tpls.append([])
        key_tpls[kid].append(tid)
        tpl_key.append(kid)
    key_ptr, key_tids = array("i", [0]), array("i")
    for tids in key_tpls:
        key_tids.extend(tids)
        key_ptr.append(len(key_tids))
    tpl_off = array("i", [0])
    for t in kept:
        tpl_off.append(tpl_off[-1] + len(t) + 1)
    words, ac_ptr, ac_kids = _ac_words(keys)
    return {
        "version": INDEX_VERSION,
        "templates": "".join(t + "\n" for t in kept),
        "tpl_off": tpl_off.tobytes(),
        "keys": "\n".join(keys),
        "ac_word": AC_WORD,
        "ac_words": "\n".join(words),
        "ac_ptr": ac_ptr.tobytes(),
        "ac_kids": ac_kids.tobytes(),
        "tpl_key": tpl_key.tobytes(),
        "key_ptr": key_ptr.tobytes(),
        "key_tids": key_tids.tobytes(),
        "ent_ptr": ent_ptr.tobytes(),
        "ent_ids": ent_ids.tobytes(),
        "anchors": pickle.dumps(_anchor_words(keys), protocol=pickle.HIGHEST_PROTOCOL) if anchors else b"",  # for the words finder only
    }


def _fingerprint(files: Sequence[Path]) -> str:
    """Content-keyed: for gzip files the trailer (CRC32 and size of the data) and the file size; otherwise
    a CRC32 of the bytes. Plus the index version, so that a matcher change rebuilds."""
    h = hashlib.sha1(f"v{INDEX_VERSION}".encode())
    for f in files:
        try:
            size = f.stat().st_size
            with f.open("rb") as fh:
                if fh.read(2) == b"\x1f\x8b" and size >= 18:
                    fh.seek(-8, io.SEEK_END)
                    tag = fh.read(8).hex()
                else:
                    fh.seek(0)
                    tag = f"{zlib.crc32(fh.read()):08x}"
        except OSError:
            size, tag = -1, "missing"
        h.update(f"{f.name}:{size}:{tag};".encode())
    return h.hexdigest()[:16]


def _read_index(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as fh:
            index = _NoGlobals(fh).load()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError):
        return None
    if not isinstance(index, dict) or index.get("version") != INDEX_VERSION or "offsets" not in index:
        return None
    return index


def _write_cache(base: Path, index: dict[str, Any], items: Sequence[dict[str, Any]]) -> None:
    """The entries as JSONL with their byte offsets, then the index (written last: it is what a load
    looks for). Best effort: a read-only home only costs the next load its parse."""
    try:
        base.parent.mkdir(parents=True, exist_ok=True)
        offsets = array("q", [0])
        buf = bytearray()
        for e in items:
            buf += json.dumps(e, ensure_ascii=False).encode("utf-8")
            buf += b"\n"
            offsets.append(len(buf))
        tag = f".{os.getpid()}.tmp"
        tmp = base.with_suffix(tag)
        tmp.write_bytes(bytes(buf))
        os.replace(tmp, base.with_suffix(".jsonl"))
        with tmp.open("wb") as fh:
            pickle.dump({**index, "offsets": offsets.tobytes()}, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, base.with_suffix(".index"))
        # keep the few most recent indexes (other data versions, other atlases); drop the rest
        old = sorted(base.parent.glob("matcher-*.index"), key=lambda p: p.stat().st_mtime, reverse=True)[KEEP_CACHED:]
        for p in old:
            for f in (p, p.with_suffix(".jsonl")):
                f.unlink(missing_ok=True)
    except OSError as exc:
        print(f"torchhelp: atlas index not cached ({exc})", file=sys.stderr)


_DEFAULT: Atlas | None = None


def default_atlas() -> Atlas | None:
    """The packaged atlas, loaded once per process; None when no data ships."""
    global _DEFAULT
    if _DEFAULT is None and any(DATA_DIR.glob("*.jsonl.gz")):
        _DEFAULT = Atlas.load()
    return _DEFAULT
