"""Small extractors for the values PyTorch puts into its messages: shapes, sizes, dtypes, devices."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_UNITS = {"B": 1, "bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
          "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_SIZE = re.compile(r"(?<!\d)(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>TiB|GiB|MiB|KiB|TB|GB|MB|KB|bytes|B)\b")

DTYPE_ALIASES = {
    "float": "float32", "float32": "float32", "floattensor": "float32", "single": "float32",
    "double": "float64", "float64": "float64", "doubletensor": "float64",
    "half": "float16", "float16": "float16", "halftensor": "float16", "c10::half": "float16",
    "bfloat16": "bfloat16", "c10::bfloat16": "bfloat16", "bfloat16tensor": "bfloat16",
    "long": "int64", "int64": "int64", "longtensor": "int64",
    "int": "int32", "int32": "int32", "inttensor": "int32",
    "short": "int16", "int16": "int16", "byte": "uint8", "uint8": "uint8", "bytetensor": "uint8",
    "char": "int8", "int8": "int8", "bool": "bool", "booltensor": "bool",
    "complexfloat": "complex64", "complexdouble": "complex128",
}


def parse_bytes(text: str) -> int | None:
    """``"20.00 MiB"`` -> 20971520; None when no size is present."""
    m = _SIZE.search(text)
    if not m:
        return None
    return int(float(m.group("num")) * _UNITS[m.group("unit")])


def fmt_bytes(n: float | int | None) -> str:
    """Human-readable binary size (``1.50 GiB``)."""
    if n is None:
        return "?"
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} TiB"


def parse_shape(text: str) -> tuple[int, ...] | None:
    """Parse ``[1, 3, 28, 28]``, ``torch.Size([4, 10])``, ``(4 x 4)``, ``4x7200`` or ``[32 x 512]``."""
    inner = text.strip()
    m = re.search(r"torch\.Size\(\[([^\][]*)\]\)", inner)
    if m:
        inner = m.group(1)
    inner = inner.strip("[]() ")
    if not inner:
        return ()
    parts = re.split(r"(?<!\s)\s*[x×,]\s*", inner)
    try:
        return tuple(int(p) for p in parts if p != "")
    except ValueError:
        return None


def fmt_shape(shape: tuple[int, ...] | None) -> str:
    """``(4, 7200)`` style, for prose."""
    if shape is None:
        return "?"
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def normalize_dtype(name: str) -> str:
    """Map the many spellings of a dtype (Float, torch.cuda.HalfTensor, c10::Half) to torch names."""
    key = name.strip().strip("'\"`").lower()
    key = key.removeprefix("torch.").removeprefix("cuda.").removeprefix("torch.cuda.")
    return DTYPE_ALIASES.get(key, key)


def tensor_type_parts(name: str) -> tuple[str, str]:
    """``torch.cuda.HalfTensor`` -> ("float16", "cuda"); ``torch.FloatTensor`` -> ("float32", "cpu")."""
    device = "cuda" if ".cuda." in name else "cpu"
    base = name.split(".")[-1]
    return normalize_dtype(base), device


def square_factorizations(n: int, limit: int = 3) -> list[tuple[int, int]]:
    """Ways to write n as C×S×S with S >= 2 (a flattened C-channel S×S feature map), largest S first."""
    out: list[tuple[int, int]] = []
    for side in range(int(math.isqrt(n)), 1, -1):
        if n % (side * side) == 0:
            out.append((n // (side * side), side))
            if len(out) >= limit:
                break
    return out


def flatten_candidates(got: int, expected: int) -> list[tuple[int, int, int]]:
    """Every ``(C, S_got, S_expected)`` with ``got = C×S_got²`` and ``expected = C×S_expected²``.

    Each is one way the two sizes could be the same C-channel feature map at two spatial sizes;
    there are usually several (6272 vs 1152 fits 2×56×56, 8×28×28, 32×14×14 and 128×7×7), so a
    candidate alone is arithmetic, not a fact. Closest spatial sizes first.
    """
    out: list[tuple[int, int, int]] = []
    for channels, side in square_factorizations(got, limit=64):
        if expected % channels:
            continue
        rest = expected // channels
        other = math.isqrt(rest)
        if rest > 0 and other * other == rest and other != side:
            out.append((channels, side, other))
    out.sort(key=lambda c: abs(c[1] - c[2]))
    return out


# A standalone integer (not part of a float, a path, a hex id or an identifier such as conv2 or 3x3).
_INT_TOKEN = re.compile(r"(?<![\w.])\d+(?![\w.])")


def int_hints(text: str) -> frozenset[int]:
    """The integers written in source lines or messages that could be a channel count or a side (>= 2)."""
    return frozenset(n for n in (int(m.group()) for m in _INT_TOKEN.finditer(text)) if n >= 2)


def flatten_explanations(got: int, expected: int, hints: frozenset[int] | set[int] = frozenset()) -> list[str]:
    """Explain two flatten sizes as the same channel count with different spatial sizes — only when determined.

    ``hints`` are the integers the failure text itself shows (source lines, message). A factorisation
    is stated only when exactly one candidate is backed by them: its channel count appears (best with
    a spatial size too), or both of its spatial sizes do. Anything else is a guess among several
    factorisations, so nothing is returned and the caller gives the two numbers instead.
    ``7200`` vs ``8192`` with ``8`` in the failing line -> ``["8×30×30 (got) vs 8×32×32 (expected)"]``.
    """
    scored: list[tuple[int, tuple[int, int, int]]] = []
    for cand in flatten_candidates(got, expected):
        channels, side, other = cand
        score = 2 * (channels in hints) + (side in hints) + (other in hints)
        if score >= 2:
            scored.append((score, cand))
    if not scored:
        return []
    best = max(score for score, _ in scored)
    top = [cand for score, cand in scored if score == best]
    if len(top) != 1:
        return []
    channels, side, other = top[0]
    return [f"{channels}×{side}×{side} (got) vs {channels}×{other}×{other} (expected)"]


def first_int(pattern: str, text: str, flags: int = 0) -> int | None:
    """First integer captured by group 1 of ``pattern``."""
    m = re.search(pattern, text, flags)
    return int(m.group(1)) if m else None


# An OSError's own text: ``[Errno 2] No such file or directory: 'x'`` (also ``[WinError 3] ...``), the
# path written as Python's repr: single quotes, double quotes when it holds a single quote, escaped backslashes.
_OS_ERROR = re.compile(
    r"\[(?P<code>(?:Errno|WinError) \d+)\] (?P<what>[^\n'\"\[\]]*?): "
    r"(?P<path>'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\")"
)
NOT_FOUND_CODES = frozenset({"Errno 2", "WinError 2", "WinError 3"})


@dataclass(frozen=True)
class OsErrorPath:
    """The code (``Errno 2``), the strerror (``No such file or directory``) and the path of an OSError's text."""

    code: str
    what: str
    path: str


def _unquote(quoted: str) -> str:
    """A path as Python's repr wrote it, read back (``'C:\\\\x'`` -> ``C:\\x``); text that is not a repr stays as written."""
    import ast

    try:
        value = ast.literal_eval(quoted)
    except (ValueError, SyntaxError):
        return quoted[1:-1]
    return value if isinstance(value, str) and value.isprintable() else quoted[1:-1]


def os_error_path(text: str, codes: frozenset[str] | None = None) -> OsErrorPath | None:
    """The first ``[Errno N] what: 'path'`` in ``text`` (of one of ``codes`` when given), path unquoted; None when none.

    A two-path message (``os.rename``: ``'a' -> 'b'``) gives the first path, the one that was missing.
    """
    for m in _OS_ERROR.finditer(text):
        if codes is None or m.group("code") in codes:
            return OsErrorPath(m.group("code"), m.group("what"), _unquote(m.group("path")))
    return None
