"""Recognise PyTorch messages in pasted text and read their values: the atlas matcher.

Every matchable template (an atlas entry's message with typed holes, ``⟦int⟧`` ... ``⟦any⟧``) is split on
its holes into literal fragments; one fragment, the *key* (the longest, unless many templates share it),
goes into a single multi-pattern finder. A key found in the text is only a candidate: the whole template
is then verified around it with the template's own regular expression (built on first use and cached),
whose holes are typed groups, so the values come back as ints, floats, shapes, dtypes, devices and names.

The text is normalised first, keeping a map back to the original offsets: terminal escapes and
progress-bar segments dropped, per-line prefixes (``[rank0]:``, ``[default1]:``, timestamps) removed,
indentation dropped and whitespace runs collapsed (a line break stays a line break for the holes, and
counts as a space for the literals). So the message is found wherever PyTorch or a launcher put it: in a
DataLoader worker's re-raised traceback, after ``-- Process 1 terminated with the following error:``,
inside ``BackendCompilerFailed: backend='inductor' raised:``, before the C++ ``Exception raised from``
frames, wrapped over several lines, or in a CUDA kernel assertion line.

Two finders are implemented over the same keys: an Aho-Corasick automaton (``pyahocorasick``) and a
pure-Python one that indexes each key by its rarest whole word (a set intersection with the text's words,
then ``str.find``). ``scripts/bench_atlas.py`` measures both; the default is the one that measured faster
overall (see ``DEFAULT_FINDER``).

Loading parses the gzip JSONL entry files once and keeps a compact index (columnar entries, templates,
keys) in ``$TORCHHELP_HOME/atlas/`` keyed by the data files' content; later loads read that.
"""

from __future__ import annotations

import bisect
import gzip
import hashlib
import io
import json
import os
import pickle
import re
import sys
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # the engine's types are imported on use: loading and matching need only the stdlib
    from assistant.types import Facts

INDEX_VERSION = 3
MIN_KEY = 12  # a key (literal fragment) must be at least this long (ATLAS_BRIEF: otherwise too generic)
SHARED_KEY = 4  # a longest fragment shared by more templates than this gives way to a rarer one
AC_WORD = 32  # the automaton holds each key's first AC_WORD characters; the rest is checked with startswith
MAX_TEXT = 2_000_000  # longer texts: the last MAX_TEXT characters (errors end a log)
MAX_VERIFY = 400  # regex verifications per text, at most
MAX_TRIES = 3  # verifications per template per text (occurrences tried from the last one back)
DEFAULT_FINDER = "ac"
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
# read a word of their shape and are normalised afterwards.
_DTYPE = r"(?<![\w.])(?:torch\.(?:cuda\.)?|c10::)?[A-Za-z]\w*(?![\w])"
_DEVICE = r"(?<![\w.])(?:device\(type=['\"]\w+['\"](?:,\s?index=\d+)?\)|[A-Za-z]\w*(?::\d+)?)(?![\w])"
_SHAPE = (
    r"(?:torch\.Size\(\[[^\[\]\n]{0,400}\]\)"
    r"|\[(?:[^\[\]\n]|\[[^\[\]\n]{0,100}\]){0,400}\]"
    r"|\((?:[^()\n]|\([^()\n]{0,100}\)){0,400}\)"
    r"|(?<![\w.])\d+(?:\s?[x×]\s?\d+)+(?![\w.]))"
)
_FLOAT = r"(?<![\w.])[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf|nan)(?![\w])"
_INT = r"(?<![\w.])[-+]?\d+(?![\d])"
_NAME = r"(?<![\w.])[A-Za-z_]\w*(?:(?:\.|::)\w+)*"
_HOLE_PATTERN = {"int": _INT, "float": _FLOAT, "shape": _SHAPE, "dtype": _DTYPE, "device": _DEVICE, "name": _NAME}
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


def choose_keys(templates: Sequence[str]) -> list[str | None]:
    """One key per template: its longest fragment, unless more than SHARED_KEY templates have that same
    fragment, then the rarest of its fragments (longest among equally rare). Deterministic."""
    frags = [sorted({f for f in literal_fragments(t) if len(f) >= MIN_KEY}, key=lambda f: (-len(f), f)) for t in templates]
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
        words = [m.group() for m in _TOKEN.finditer(k) if m.start() > 0 and m.end() < len(k)]
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
_PIECES = re.compile(
    r"(?P<esc>\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]{0,512}(?:\x07|\x1b\\)?|\x1b[@-Z\\-_])"
    r"|(?P<cr>(?:(?<=\n)|\A)[^\n]*\r(?=[^\n]))"
    r"|(?P<nl>(?:[ \t\f\v\r]*\n|\A)(?:[ \t\f\v\r]*\n)*[ \t\f\v]*(?:" + _PREFIX + r")*)"
    r"|(?P<sp>[ \t\f\v\r]{2,}|[\t\f\v\r])"
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
        for m in _PIECES.finditer(text):
            s, e = m.span()
            if s == e and s == 0 and m.lastgroup == "nl":
                continue
            if s > last:
                out.append(text[last:s])
                npos += s - last
            rep = "\n" if (m.lastgroup == "nl" and "\n" in m.group()) else (" " if m.lastgroup == "sp" else "")
            if rep:
                out.append(rep)
                npos += 1
            last = e
            nstarts.append(npos)
            ostarts.append(e)
        if last < len(text):
            out.append(text[last:])
        norm = "".join(out)
        if norm.startswith("\n"):
            norm = " " + norm[1:]
        self.norm = norm
        self.flat = norm.replace("\n", " ")
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
    """A template's regex, the budgets of text before and after its key, and its literal coverage."""

    __slots__ = ("rx", "holes", "contexts", "pre", "post", "line_start", "coverage")

    def __init__(self, template: str, key: str) -> None:
        parts = parse_template(template)
        n = len(parts)
        rx: list[str] = []
        holes: list[str] = []
        contexts: list[str] = []
        budgets: list[int] = []
        key_at = -1
        for i, (typ, val) in enumerate(parts):
            if typ == "lit":
                after_any = i > 0 and parts[i - 1] == ("hole", "any")
                before_any = i + 1 < n and parts[i + 1] == ("hole", "any")
                rx.append(_literal_rx(val, lead_opt=after_any, trail_opt=before_any))
                budgets.append(len(val) + 8 + len(val) // 8)
                if key_at < 0 and key in val:
                    key_at = i
            else:
                g = f"h{len(holes)}"
                if val == "any":
                    pat = _ANY_FIRST if i == 0 else (_ANY_LAST if i == n - 1 else _ANY_MID)
                else:
                    pat = _HOLE_PATTERN[val]
                rx.append(f"(?P<{g}>{pat})")
                holes.append(val)
                prev = parts[i - 1][1] if i > 0 else ""
                words = _TOKEN.findall(prev)
                contexts.append(words[-1].lower() if words else "")
                budgets.append(_HOLE_BUDGET[val])
        self.rx = re.compile("".join(rx))
        self.holes = tuple(holes)
        self.contexts = tuple(contexts)
        key_at = max(key_at, 0)
        lit = parts[key_at][1] if parts[key_at][0] == "lit" else ""
        inner = lit.find(key)
        self.pre = sum(budgets[:key_at]) + max(inner, 0) + 8
        self.post = sum(budgets[key_at + 1 :]) + max(len(lit) - inner - len(key), 0) + 8
        self.line_start = bool(parts) and parts[0] == ("hole", "any")
        self.coverage = sum(len(v.strip()) for t, v in parts if t == "lit")

    def verify(self, text: _Text, start: int, end: int) -> re.Match[str] | None:
        norm = text.norm
        lo = max(0, start - self.pre)
        hi = min(len(norm), end + self.post)
        if self.line_start:  # a leading ⟦any⟧ runs from the start of the line (or of the window)
            ls = norm.rfind("\n", lo, start) + 1
            return self.rx.match(norm, max(lo, ls), hi)
        return self.rx.search(norm, lo, hi)


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


def _typed(kind: str, raw: str) -> Any:
    try:
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
        }


def values_as_facts(match: AtlasMatch) -> Facts:
    """The hole values as :class:`assistant.types.Facts`: shapes (all-integer ones, in order), numbers
    (ints and floats named by the template word before each hole: ``size``, ``dim``, ``index``; a repeated
    name gets ``_2``, ``_3``; a hole without a word is ``value1``...), dtypes and devices (normalised,
    distinct, in order), names (name holes), ``argument`` when a name follows the word "argument" or
    "parameter", and ``call`` when the entry's op is a Python API path (``torch.``...)."""
    from assistant.types import Facts

    shapes: list[tuple[int, ...]] = []
    numbers: dict[str, float] = {}
    dtypes: list[str] = []
    devices: list[str] = []
    names: list[str] = []
    argument: str | None = None
    for i, v in enumerate(match.values):
        if v.kind == "shape" and isinstance(v.value, tuple) and all(isinstance(x, int) for x in v.value):
            shapes.append(v.value)
        elif v.kind in ("int", "float") and isinstance(v.value, int | float):
            base = v.context if v.context and not v.context.isdigit() else f"value{i + 1}"
            key, n = base, 1
            while key in numbers:
                n += 1
                key = f"{base}_{n}"
            numbers[key] = v.value
        elif v.kind == "dtype" and v.value not in dtypes:
            dtypes.append(v.value)
        elif v.kind == "device" and v.value not in devices:
            devices.append(v.value)
        elif v.kind == "name" and v.value:
            names.append(v.value)
            if argument is None and v.context in ("argument", "parameter", "arg", "param"):
                argument = v.value
    op = match.entry.get("op")
    call = op if isinstance(op, str) and op.startswith("torch.") else None
    return Facts(
        shapes=tuple(shapes), numbers=numbers, devices=tuple(devices), dtypes=tuple(dtypes), argument=argument, call=call, names=tuple(dict.fromkeys(names))
    )


# ---------------------------------------------------------------------------------------------- finders


class _ACFinder:
    """Aho-Corasick over each key's first AC_WORD characters (pyahocorasick); the full key is then
    checked with ``startswith``."""

    name = "ac"

    def __init__(self, keys: Sequence[str]) -> None:
        import ahocorasick

        words: dict[str, list[int]] = {}
        for kid, k in enumerate(keys):
            words.setdefault(k[:AC_WORD], []).append(kid)
        self._words = list(words)
        self._wkeys = [tuple(v) for v in words.values()]
        self._keys = keys
        auto = ahocorasick.Automaton(ahocorasick.STORE_INTS)
        for wid, w in enumerate(self._words):
            auto.add_word(w, wid)
        auto.make_automaton()
        self._auto = auto

    def find(self, flat: str) -> Iterator[tuple[int, int]]:
        """(start, key id) of every occurrence of every key in ``flat``."""
        words, wkeys, keys = self._words, self._wkeys, self._keys
        for end, wid in self._auto.iter(flat):
            start = end - len(words[wid]) + 1
            for kid in wkeys[wid]:
                k = keys[kid]
                if len(k) <= AC_WORD or flat.startswith(k, start):
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
    """The index holds only builtin containers, strings and numbers: refuse anything else."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"atlas index: refusing {module}.{name}")


class Atlas:
    """All matchable atlas templates, compiled into one finder. Build with :meth:`load` (entry files)
    or :meth:`from_entries`; then :meth:`match`."""

    def __init__(self, index: dict[str, Any], finder: str = DEFAULT_FINDER) -> None:
        self._fields: tuple[str, ...] = tuple(index["fields"])
        self._columns: list[list[Any]] = index["columns"]
        self.templates: list[str] = index["templates"]  # canonical template per template id
        self._tpl_entries: list[tuple[int, ...]] = index["tpl_entries"]  # entry indices, preferred first
        self.keys: list[str] = index["keys"]
        self._key_tpls: list[tuple[int, ...]] = index["key_tpls"]
        self._tpl_key: list[int] = index["tpl_key"]
        self.source_files: tuple[str, ...] = tuple(index.get("sources", ()))
        self._compiled: dict[int, _Compiled | None] = {}
        self._entries: dict[int, dict[str, Any]] = {}
        if finder == "ac":
            self._finder: _ACFinder | _WordFinder = _ACFinder(self.keys)
        elif finder == "words":
            self._finder = _WordFinder(self.keys, index.get("anchors"), index.get("scan"))
        else:
            raise ValueError(f"unknown finder {finder!r} (ac or words)")
        self.finder = finder

    # ------------------------------------------------------------------ building

    @classmethod
    def from_entries(cls, entries: Iterable[dict[str, Any]], finder: str = DEFAULT_FINDER) -> Atlas:
        return cls(build_index(list(entries)), finder=finder)

    @classmethod
    def load(cls, paths: Iterable[str | os.PathLike[str]] | None = None, *, finder: str = DEFAULT_FINDER, cache: bool | str | os.PathLike[str] = True) -> Atlas:
        """The atlas of these gzip JSONL entry files (default: every ``*.jsonl.gz`` under the packaged
        ``assistant/atlas/data``). ``cache``: True keeps the parsed index in ``$TORCHHELP_HOME/atlas``
        (keyed by the files' content), a path keeps it there, False parses every time."""
        files = sorted(Path(p) for p in paths) if paths is not None else sorted(DATA_DIR.glob("*.jsonl.gz"))
        cache_file: Path | None = None
        if cache:
            cdir = Path(cache) if not isinstance(cache, bool) else Path(os.environ.get("TORCHHELP_HOME") or "~/.cache/torchhelp").expanduser() / "atlas"
            cache_file = cdir / f"matcher-{_fingerprint(files)}.pickle"
            index = _read_index(cache_file)
            if index is not None:
                return cls(index, finder=finder)
        entries: list[dict[str, Any]] = []
        for f in files:
            entries.extend(read_entries(f))
        index = build_index(entries)
        index["sources"] = [str(f) for f in files]
        if cache_file is not None:
            _write_index(cache_file, index)
        return cls(index, finder=finder)

    # ------------------------------------------------------------------ entries

    def __len__(self) -> int:
        return len(self.templates)

    @property
    def n_entries(self) -> int:
        return len(self._columns[0]) if self._columns else 0

    def entry(self, i: int) -> dict[str, Any]:
        e = self._entries.get(i)
        if e is None:
            e = {f: col[i] for f, col in zip(self._fields, self._columns, strict=True) if col[i] is not None or f in _SCHEMA_FIELDS}
            self._entries[i] = e
        return e

    def _compiled_for(self, tid: int) -> _Compiled | None:
        try:
            return self._compiled[tid]
        except KeyError:
            pass
        try:
            c: _Compiled | None = _Compiled(self.templates[tid], self.keys[self._tpl_key[tid]])
        except re.error:
            c = None
        self._compiled[tid] = c
        return c

    # ------------------------------------------------------------------ matching

    def match(self, text: str, limit: int = 20) -> list[AtlasMatch]:
        """The templates found in ``text``, best first: verified before key-only, then by literal
        coverage, then the later in the text. Key-only hits inside a verified match are left out."""
        if not text:
            return []
        t = _Text(text)
        flat = t.flat
        occ: dict[int, list[int]] = {}  # key id -> starts
        for start, kid in self._finder.find(flat):
            occ.setdefault(kid, []).append(start)
        if not occ:
            return []
        # candidates: (template id, key id), longest keys first (they verify the most and cost the same)
        cands = sorted(((tid, kid) for kid in occ for tid in self._key_tpls[kid]), key=lambda c: (-len(self.keys[c[1]]), c[0]))
        verified: list[tuple[int, re.Match[str], _Compiled, int]] = []
        keyonly: list[tuple[int, int, int]] = []
        budget = MAX_VERIFY
        for tid, kid in cands:
            starts = occ[kid]
            klen = len(self.keys[kid])
            comp = self._compiled_for(tid) if budget > 0 else None
            m = None
            if comp is not None:
                for s in starts[: -MAX_TRIES - 1 : -1]:  # the last occurrences first: the error ends the log
                    if budget <= 0:
                        break
                    budget -= 1
                    m = comp.verify(t, s, s + klen)
                    if m is not None:
                        break
            if m is not None and comp is not None:
                verified.append((tid, m, comp, len(starts)))
            else:
                keyonly.append((tid, kid, starts[-1]))
        out: list[AtlasMatch] = []
        spans: list[tuple[int, int]] = []
        for tid, m, comp, count in verified:
            s, e = m.span()
            spans.append((s, e))
            values = []
            for j, (kind, ctx) in enumerate(zip(comp.holes, comp.contexts, strict=True)):
                raw = m.group(f"h{j}") or ""
                if kind == "any" and j == 0 and comp.line_start:
                    raw = _EXC_PREFIX.sub("", raw)
                values.append(HoleValue(kind, raw, _typed(kind, raw), ctx))
            out.append(self._result(tid, True, t, s, e, tuple(values), comp.coverage, count))
        for tid, kid, s in keyonly:
            e = s + len(self.keys[kid])
            if any(vs <= s and e <= ve for vs, ve in spans):
                continue
            out.append(self._result(tid, False, t, s, e, (), len(self.keys[kid]), len(occ[kid])))
        out.sort(key=lambda r: (not r.verified, -r.coverage, -r.span[0], r.id))
        return out[:limit]

    def _result(self, tid: int, verified: bool, t: _Text, s: int, e: int, values: tuple[HoleValue, ...], coverage: int, count: int) -> AtlasMatch:
        eids = self._tpl_entries[tid]
        total = self._coverage_total(tid)
        return AtlasMatch(
            entry=self.entry(eids[0]),
            template=self.templates[tid],
            verified=verified,
            span=(t.orig(s), t.orig(e, end=True)),
            matched=t.norm[s:e],
            values=values,
            coverage=coverage,
            share=min(1.0, coverage / total) if total else 0.0,
            count=count,
            also=tuple(self.entry(i) for i in eids[1:]),
        )

    def _coverage_total(self, tid: int) -> int:
        comp = self._compiled_for(tid)
        if comp is not None:
            return comp.coverage
        return sum(len(f) for f in literal_fragments(self.templates[tid]))

    def best(self, text: str) -> AtlasMatch | None:
        found = self.match(text, limit=1)
        return found[0] if found else None


_SCHEMA_FIELDS = frozenset(
    ("id", "template", "kind", "exc_type", "source", "file", "line", "function", "op", "condition", "internal", "category", "category_source", "torch_version", "commit")
)

# ---------------------------------------------------------------------------------------------- index


def read_entries(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The entries of one gzip JSONL (or plain JSONL) file."""
    p = Path(path)
    raw = p.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    text = raw.decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def build_index(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Group entries by canonical template, choose keys, and store the entries column by column."""
    fields = list(_SCHEMA_FIELDS)
    for e in entries:
        for k in e:
            if k not in fields:
                fields.append(k)
    fields.sort()
    interned: dict[Any, Any] = {}
    columns: list[list[Any]] = []
    for f in fields:
        col = []
        for e in entries:
            v = e.get(f)
            if isinstance(v, str):
                v = interned.setdefault(v, v)
            col.append(v)
        columns.append(col)
    groups: dict[str, list[int]] = {}
    for i, e in enumerate(entries):
        tpl = e.get("template")
        if not isinstance(tpl, str) or e.get("matchable") is False:
            continue
        groups.setdefault(canonical_template(tpl), []).append(i)
    templates = list(groups)
    tkeys = choose_keys(templates)
    keys: list[str] = []
    key_ids: dict[str, int] = {}
    key_tpls: list[list[int]] = []
    kept_templates: list[str] = []
    tpl_entries: list[tuple[int, ...]] = []
    tpl_key: list[int] = []
    for tpl, k in zip(templates, tkeys, strict=True):
        if k is None:
            continue
        tid = len(kept_templates)
        kept_templates.append(tpl)
        eids = sorted(groups[tpl], key=lambda i: (_KIND_RANK.get(entries[i].get("kind"), 9), _SOURCE_RANK.get(entries[i].get("source"), 9), str(entries[i].get("id"))))
        tpl_entries.append(tuple(eids))
        kid = key_ids.get(k)
        if kid is None:
            kid = key_ids[k] = len(keys)
            keys.append(k)
            key_tpls.append([])
        key_tpls[kid].append(tid)
        tpl_key.append(kid)
    anchors, scan = _anchor_words(keys)
    return {
        "version": INDEX_VERSION,
        "fields": fields,
        "columns": columns,
        "templates": kept_templates,
        "tpl_entries": tpl_entries,
        "keys": keys,
        "key_tpls": [tuple(v) for v in key_tpls],
        "tpl_key": tpl_key,
        "anchors": anchors,
        "scan": scan,
    }


def _fingerprint(files: Sequence[Path]) -> str:
    """Content-keyed: for gzip files the trailer (CRC32 and size of the data) and the file size; otherwise
    a CRC32 of the bytes. Plus the index version, so a matcher change rebuilds."""
    h = hashlib.sha1(f"v{INDEX_VERSION}".encode())
    for f in files:
        try:
            size = f.stat().st_size
            with f.open("rb") as fh:
                head = fh.read(2)
                if head == b"\x1f\x8b" and size >= 18:
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
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError):
        return None
    if not isinstance(index, dict) or index.get("version") != INDEX_VERSION:
        return None
    return index


def _write_index(path: Path, index: dict[str, Any]) -> None:
    """Best effort (a read-only home only costs the next load its parse)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with tmp.open("wb") as fh:
            pickle.dump(index, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError as exc:
        print(f"torchhelp: atlas index not cached ({exc})", file=sys.stderr)


_DEFAULT: Atlas | None = None


def default_atlas() -> Atlas | None:
    """The packaged atlas, loaded once per process; None when no data ships."""
    global _DEFAULT
    if _DEFAULT is None and any(DATA_DIR.glob("*.jsonl.gz")):
        _DEFAULT = Atlas.load()
    return _DEFAULT
