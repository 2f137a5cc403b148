"""Inputs for fuzzing: Hypothesis strategies for the test suite, a plain generator for ``scripts/fuzz.py``.

Both draw from one vocabulary: lines of real PyTorch failures (captured stderr in eval/captured),
the fragments that make regular expressions backtrack (tests/adversarial_inputs.py), escapes,
controls, NULs, lone surrogates and arbitrary characters, each repeated into long runs.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from hypothesis import strategies as st

from adversarial_inputs import GENERIC

ROOT = Path(__file__).resolve().parents[1]
WINDOW = 1 << 20  # the reader's analysis window: smaller inputs are charged as one window


def _real_lines(limit: int = 400) -> tuple[str, ...]:
    lines: list[str] = []
    for path in sorted((ROOT / "eval" / "captured").rglob("*.json")):
        stderr = json.loads(path.read_text(encoding="utf-8")).get("stderr") or ""
        lines.extend(ln + "\n" for ln in stderr.splitlines()[-12:] if ln.strip())
    rng = random.Random(0)
    rng.shuffle(lines)
    return tuple(dict.fromkeys(lines))[:limit]


REAL = _real_lines()
HOSTILE = (
    "\x1b[31m", "\x1b]52;c;cm0gLXJmIH4K\x07", "\x1b]8;;http://x\x1b\\", "\x9b", "\r", "\x00", "\udcff", "\ud800", "\ufeff",
    "\u202e", "\t", "\x7f", "[rank0]: ", "[default3]:", "0: ", "Traceback (most recent call last):\n",
    '  File "/tmp/x.py", line 3, in <module>\n', "RuntimeError: ", "During handling of the above exception, another exception occurred:\n",
    "torch.Size([", "CUDA out of memory. Tried to allocate ", "NCCL WARN ", "Assertion `t >= 0` failed.", "Killed\n",
)
VOCABULARY = tuple(GENERIC) + HOSTILE + REAL


def charged_mb(data: str | bytes) -> float:
    """Megabytes an input is charged for: its UTF-8 size, at least one analysis window."""
    size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
    return max(size, WINDOW) / 1e6


def any_text(max_repeat: int = 20_000, max_parts: int = 6) -> st.SearchStrategy[str]:
    """Text made of a few pieces, each repeated: long runs of fragments and arbitrary characters."""
    piece = st.one_of(st.sampled_from(VOCABULARY), st.text(st.characters(codec=None, exclude_categories=()), min_size=1, max_size=12))
    part = st.tuples(piece, st.integers(1, max_repeat) | st.just(1))
    return st.lists(part, min_size=1, max_size=max_parts).map(lambda parts: "".join(p * n for p, n in parts))


def any_bytes() -> st.SearchStrategy[bytes]:
    """Arbitrary bytes, text encoded with odd codecs, and text with raw invalid bytes spliced in."""
    encoded = any_text().map(lambda t: t.encode("utf-8", "surrogatepass"))
    spliced = st.tuples(any_text(max_repeat=2000), st.binary(min_size=1, max_size=64), st.integers(1, 5000)).map(
        lambda t: t[0].encode("utf-8", "surrogatepass") + t[1] * t[2])
    return st.one_of(st.binary(max_size=4096), encoded, spliced)


def log_bytes() -> st.SearchStrategy[bytes]:
    """A job log's bytes: fuzzed text, sometimes with long NUL runs or binary in the middle."""
    return st.one_of(any_bytes(), st.tuples(any_text(max_repeat=5000), st.integers(0, 300_000)).map(
        lambda t: b"\x00" * t[1] + t[0].encode("utf-8", "surrogatepass")))


# -- a plain generator for long runs (Hypothesis is too slow for a million inputs) -----------------


def random_text(rng: random.Random, max_repeat: int = 20_000) -> tuple[str, str]:
    """(strategy name, text): the same families as :func:`any_text`, drawn with ``rng``."""
    kind = rng.choice(("real", "adversarial", "hostile", "unicode", "mixed"))
    parts = []
    for _ in range(rng.randint(1, 6)):
        pool = {"real": REAL, "adversarial": GENERIC, "hostile": HOSTILE}.get(kind) or VOCABULARY
        if kind == "unicode" or (kind == "mixed" and rng.random() < 0.3):
            piece = "".join(chr(rng.randrange(0x110000)) for _ in range(rng.randint(1, 12)))
        else:
            piece = rng.choice(pool)
        repeat = 1 if rng.random() < 0.4 else int(rng.paretovariate(0.8)) % max_repeat + 1
        parts.append(piece * repeat)
    return kind, "".join(parts)


def random_bytes(rng: random.Random) -> tuple[str, bytes]:
    """(strategy name, bytes): raw bytes, encoded fuzzed text, or text with invalid bytes spliced in."""
    kind = rng.choice(("raw-bytes", "encoded", "spliced"))
    if kind == "raw-bytes":
        return kind, rng.randbytes(rng.randint(1, 4096))
    text = random_text(rng)[1].encode("utf-8", "surrogatepass")
    if kind == "spliced":
        cut = rng.randint(0, len(text))
        text = text[:cut] + rng.randbytes(rng.randint(1, 64)) * rng.randint(1, 3000) + text[cut:]
    return kind, text
