"""Categories for atlas entries the hand rules leave open: the calibrated decision, asked about the message itself.

Each uncategorised error template is turned into the message a user would see (its holes filled with
ordinary values), prefixed with its exception type, and diagnosed with the atlas turned off (the atlas
must not vote on its own entries). The decided category is kept when its likelihood reaches
``MIN_LIKELIHOOD``, with ``category_source: "decision"`` and the likelihood; the rest stay open.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

MIN_LIKELIHOOD = 0.5
_SAMPLE = {"int": "3", "float": "0.5", "shape": "[2, 3]", "dtype": "float", "device": "cuda:0", "name": "x", "any": "x"}
_HOLE = re.compile(r"⟦(\w+)⟧")


def sample_message(entry: dict) -> str:
    """The template as a user would see it: holes filled with ordinary values, the exception type in front."""
    text = _HOLE.sub(lambda m: _SAMPLE.get(m.group(1), "x"), str(entry.get("template", "")))
    exc = entry.get("exc_type")
    return f"{exc}: {text}" if exc and entry.get("kind") != "kernel_assert" else text


def categorize(entries: Iterable[dict], progress: Callable[[int], None] | None = None) -> dict[str, int]:
    """Fill ``category`` of open error entries in place from the decision; returns counts (decided, left open)."""
    from assistant.engine import Engine
    from assistant.settings import load_settings

    engine = Engine(load_settings(llm="none", atlas=False))
    counts = {"decided": 0, "open": 0}
    for n, entry in enumerate(entries, 1):
        if entry.get("category") or entry.get("kind") == "warning" or entry.get("internal"):
            continue
        d = engine.diagnose(sample_message(entry))
        if d.category != "unknown" and d.confidence >= MIN_LIKELIHOOD:
            entry["category"], entry["category_source"], entry["category_likelihood"] = d.category, "decision", round(d.confidence, 3)
            counts["decided"] += 1
        else:
            counts["open"] += 1
        if progress is not None and n % 500 == 0:
            progress(n)
    return counts
