"""Matching a failure against the registered rules (see :mod:`assistant.rules.registry`).

Dispatch is by exception family first (:mod:`assistant.rules.dispatch`): the rules that read the
family of the failure's effective exception are tried in that family's priority order, and the first
answer wins. If none answers, the families of the chain's other exceptions follow (the wrapper of a
re-raised error, the other links of a chain; a type that names no known family is also read as a bare
message), then the rules that read any failure. Wrapper rules may then re-frame the answer.

A rule that raises is a bug in that rule, not in the user's input: at run time it is logged,
skipped and named in the match's notes (so the diagnosis says an answer may be missing); with
``strict=True`` (the registry test) it propagates.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from assistant.rules.base import Context
from assistant.rules.dispatch import ANY, families
from assistant.rules.registry import RuleSpec, family_rules, wrapper_rules
from assistant.types import Evidence, Failure, RuleHit

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Match:
    """The answer of the rules (None when none recognised the failure) and what went wrong on the way."""

    hit: RuleHit | None
    notes: tuple[str, ...] = ()


def _run(spec: RuleSpec, args: tuple, strict: bool, notes: list[str]) -> RuleHit | None:
    try:
        result = spec.func(*args)
        return spec.finish(result) if result is not None else None
    except Exception as exc:  # noqa: BLE001 - isolate rule bugs, see module docstring
        if strict:
            raise
        log.exception("rule %s failed", spec.id)
        notes.append(f"Internal error in rule {spec.id} ({type(exc).__name__}); it was skipped, so a more specific answer may be missing.")
        return None


def candidates(failure: Failure) -> tuple[RuleSpec, ...]:
    """The answering rules tried for ``failure``, in order: its families' rules, then the rules that read any failure."""
    seen: dict[str, RuleSpec] = {}
    for fam in (*families(failure), ANY):
        for spec in family_rules(fam):
            seen.setdefault(spec.id, spec)
    return tuple(seen.values())


def match(failure: Failure, evidence: Evidence | None = None, *, strict: bool = False) -> Match:
    """Run the failure's rules (:func:`candidates`) in order; the first answer, re-framed by any wrapper rule that applies."""
    ctx = Context(failure, evidence or Evidence())
    notes: list[str] = []
    found: RuleHit | None = None
    for spec in candidates(failure):
        found = _run(spec, (ctx,), strict, notes)
        if found is not None:
            break
    for spec in wrapper_rules():
        wrapped = _run(spec, (ctx, found), strict, notes)
        if wrapped is not None:
            found = wrapped
            break
    return Match(found, tuple(notes))


def with_evidence(hit: RuleHit | None, failure: Failure, evidence: Evidence | None) -> RuleHit | None:
    """Refine a (final) hit with live probe facts; a failing refinement keeps the plain hit."""
    if hit is None or evidence is None or evidence.empty:
        return hit
    from assistant.rules.evidence import enrich

    try:
        return enrich(hit, Context(failure, evidence))
    except Exception:  # noqa: BLE001 - probe facts are a bonus, never a reason to lose the answer
        log.exception("enriching %s with probe facts failed", hit.rule)
        return hit


__all__ = ["Context", "Match", "candidates", "match", "with_evidence"]
