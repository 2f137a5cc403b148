"""Verification of an LLM reply against the evidence: it is used only if every check passes.

Checks: the reply parses as the requested JSON; its citations are among the passages given; its
category agrees with a confident rule; it keeps at least one of the specific values the rule read
(its typed facts); and no fix contradicts the evidence (moving a model to a
device the probes show it already is on; allocator settings when the numbers rule fragmentation
out; CUDA calls when CUDA is not available).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Sequence

from assistant.types import CATEGORIES, Diagnosis, Evidence, Passage, RuleHit

CONFIDENT = 0.9
_MOVE_MODEL = re.compile(r"\b(?:model|net|module)\w*(?:\.\w+)*\s*(?:=\s*\w+\s*)?\.\s*(?:to\(\s*['\"]?(cuda(?::\d)?|cpu)|(cuda|cpu)\(\))", re.I)


@dataclass(frozen=True)
class Verdict:
    """The outcome of verification: the parsed reply, or why it was rejected."""

    ok: bool
    reason: str = ""
    reply: dict[str, Any] | None = field(default=None)


def parse_reply(text: str) -> dict[str, Any]:
    """Extract the JSON object from a reply (bare, in a ``` fence, or surrounded by prose)."""
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S)
    candidates = [fenced.group(1)] if fenced else []
    start = text.find("{")
    if start >= 0:
        depth = 0
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    candidates.append(text[start : i + 1])
                    break
    for c in candidates:
        try:
            data = json.loads(c)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    raise ValueError("no JSON object in the reply")


def _contradictions(reply: dict[str, Any], hit: RuleHit | None, evidence: Evidence, deterministic: Diagnosis) -> str | None:
    fixes_text = "\n".join(f"{f.get('title', '')} {f.get('detail', '')} {f.get('code') or ''}" for f in reply.get("fixes", []) if isinstance(f, dict))
    for m in _MOVE_MODEL.finditer(fixes_text):
        target = (m.group(1) or m.group(2) or "").lower()
        for mod in evidence.modules:
            devices = {d.split(":")[0] for d in mod.param_devices}
            if devices and devices == {target.split(":")[0]}:
                return f"a fix moves the model to {target}, but the probes show `{mod.name}` already has all parameters on {', '.join(mod.param_devices)}"
    if "expandable_segments" in fixes_text and hit is not None and "fragmentation_ruled_out" in hit.facts.flags:
        return "a fix recommends expandable_segments, but the allocator's numbers show fragmentation is not the problem"
    if re.search(r"\.cuda\(\)|to\(['\"]cuda", fixes_text) and (evidence.env.get("cuda_available") is False or (hit and hit.category == "cuda_unavailable")):
        return "a fix moves work to CUDA, but CUDA is not available in this environment"
    return None


def _fact_values(hit: RuleHit) -> set[str]:
    """The specific values a rule read (its typed facts), as they would be written in prose."""
    f = hit.facts
    values = {str(int(v)) if float(v).is_integer() else str(v) for v in f.numbers.values() if abs(float(v)) >= 2}
    values |= {str(n) for shape in f.shapes for n in shape if n >= 2}
    values |= {v for v in (f.layer, f.argument, f.call) if v}
    values |= set(f.names) | set(f.devices) | set(f.dtypes)
    return {v for v in values if len(v) >= 2}


def _dropped_facts(reply: dict[str, Any], hit: RuleHit | None) -> str | None:
    """A reply must keep at least one of the specific values the rule read: a generic essay is not
    an improvement on a specific deterministic answer."""
    if hit is None:
        return None
    values = _fact_values(hit)
    if not values:
        return None
    text = " ".join([str(reply.get("cause", ""))] + [f"{f.get('title', '')} {f.get('detail', '')} {f.get('code') or ''}" for f in reply.get("fixes", []) if isinstance(f, dict)])
    if any(re.search(rf"(?<![\w.]){re.escape(v)}(?![\w])", text) for v in values):
        return None
    shown = ", ".join(sorted(values)[:5])
    return f"it drops every specific value the rule read from the error ({shown})"


def verify(text: str, passages: Sequence[Passage], hit: RuleHit | None, evidence: Evidence, deterministic: Diagnosis) -> Verdict:
    """Check a reply; any failure rejects it with a reason a user can read."""
    try:
        reply = parse_reply(text)
    except ValueError as exc:
        return Verdict(False, f"the reply is not valid JSON ({exc})")
    category = reply.get("category")
    if category not in CATEGORIES:
        return Verdict(False, f"unknown category {category!r}")
    cause = reply.get("cause")
    if not isinstance(cause, str) or len(cause.strip()) < 20:
        return Verdict(False, "the reply has no usable cause")
    fixes = reply.get("fixes")
    if not isinstance(fixes, list) or not fixes or not all(isinstance(f, dict) and isinstance(f.get("title"), str) and f["title"].strip() for f in fixes):
        return Verdict(False, "the reply has no usable fixes")
    allowed = {p.doc_id for p in passages}
    cited = [c for f in fixes for c in (f.get("sources") or []) if isinstance(f.get("sources"), list)] + list(reply.get("citations") or [])
    if not cited:
        return Verdict(False, "the reply cites no passage")
    bad = sorted({str(c) for c in cited} - allowed)
    if bad:
        return Verdict(False, f"it cites sources that were not retrieved: {', '.join(bad)}")
    if hit is not None and hit.confidence >= CONFIDENT and category != hit.category:
        return Verdict(False, f"its category {category} contradicts the rule {hit.rule} ({hit.category}, confidence {hit.confidence:.2f})")
    problem = _contradictions(reply, hit, evidence, deterministic) or _dropped_facts(reply, hit)
    if problem:
        return Verdict(False, problem)
    return Verdict(True, reply=reply)
