"""The typed facts of a diagnosis as one line of text, shared by the renderers."""

from __future__ import annotations

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
