"""Small extractors for the values PyTorch puts into its messages: shapes, sizes, dtypes, devices."""

from __future__ import annotations

import math
import re

_UNITS = {"B": 1, "bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
          "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_SIZE = re.compile(r"(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>TiB|GiB|MiB|KiB|TB|GB|MB|KB|bytes|B)\b")

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
    m = re.search(r"torch\.Size\(\[([^\]]*)\]\)", inner)
    if m:
        inner = m.group(1)
    inner = inner.strip("[]() ")
    if not inner:
        return ()
    parts = re.split(r"\s*[x×,]\s*", inner)
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


def flatten_explanations(got: int, expected: int) -> list[str]:
    """Explain two flatten sizes as the same channel count with different spatial sizes.

    ``7200`` vs ``8192`` -> ``["8×30×30 (got) vs 8×32×32 (expected)", ...]``: the classic
    "conv output is smaller than the size the Linear was built for" story.
    """
    out: list[str] = []
    for channels, side in square_factorizations(got, limit=12):
        rest = expected / channels
        if rest == int(rest) and rest > 0:
            other = math.isqrt(int(rest))
            if other * other == int(rest) and other != side:
                out.append(f"{channels}×{side}×{side} (got) vs {channels}×{other}×{other} (expected)")
    out.sort(key=lambda s: abs(int(s.split("×")[1].split(" ")[0]) - int(s.split(" vs ")[1].split("×")[1])))
    return out[:2]


def first_int(pattern: str, text: str, flags: int = 0) -> int | None:
    """First integer captured by group 1 of ``pattern``."""
    m = re.search(pattern, text, flags)
    return int(m.group(1)) if m else None
