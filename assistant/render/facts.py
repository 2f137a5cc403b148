"""The typed facts of a diagnosis as one line of text, shared by the renderers."""

from __future__ import annotations

import re

from assistant.types import Diagnosis


def facts_line(d: Diagnosis) -> str:
    """The typed values the rule read, in one compact line (shapes, layer, devices, dtypes, argument, call)."""
    f = d.facts
    parts = []
    if f.shapes:
        parts.append(" vs ".join("×".join(str(n) for n in s) or "scalar" for s in f.shapes))
    if f.layer or f.layer_kind:
        parts.append(f"layer {f.layer or ''}" + (f" ({f.layer_kind})" if f.layer_kind else ""))
    if f.devices:
        parts.append("devices " + ", ".join(f.devices))
    if f.dtypes:
        parts.append("dtypes " + ", ".join(f.dtypes))
    if f.argument:
        parts.append(f"argument `{f.argument}`")
    if f.call:
        parts.append(f"call {f.call}")
    return " · ".join(p.strip() for p in parts)


# A sentence ends at . ! or ? followed by whitespace and a capital, a backtick or a quote; this keeps
# "e.g. the", "torch.from_numpy" and ".cuda() call" inside their sentence.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`'\"(])")


def split_cause(cause: str) -> tuple[str, str]:
    """The cause's first sentence (shown first) and the rest (shown after the fixes); rest may be ''."""
    text = " ".join(cause.split())
    parts = _SENTENCE_END.split(text, maxsplit=1)
    first = parts[0].strip()
    rest = parts[1].strip() if len(parts) > 1 else ""
    return first, rest
