"""The rule registry: every family's rules in the order they are tried. First match wins.

Order matters where messages overlap: hardware faults and CUDA-in-fork before generic CUDA
errors, cuDNN/cuBLAS statuses before the device-side assert they may hide, device before dtype
(``Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor)`` is a device
problem), DataLoader collate before generic shape errors, and the generic fallbacks last.
"""

from __future__ import annotations

import logging

from assistant.rules import (
    amp, autograd, compile, cuda, data, devices, distributed, dtypes, env, indexing, io, memory, multiproc, python, shapes,
)
from assistant.rules.base import Context, RuleFunc
from assistant.types import Evidence, Failure, RuleHit

log = logging.getLogger(__name__)

RULES: tuple[RuleFunc, ...] = (
    *cuda.EARLY_RULES,
    *multiproc.EARLY_RULES,
    *env.EARLY_RULES,
    *devices.EARLY_RULES,
    *memory.RULES,
    *cuda.RULES,
    *distributed.RULES,
    *amp.RULES,
    *devices.RULES,
    *dtypes.RULES,
    *data.RULES,
    *shapes.RULES,
    *autograd.RULES,
    *indexing.RULES,
    *io.RULES,
    *compile.RULES,
    *multiproc.RULES,
    *env.RULES,
    *python.RULES,
    *shapes.FALLBACK_RULES,
    *python.FALLBACK_RULES,
)


def match(failure: Failure, evidence: Evidence | None = None) -> RuleHit | None:
    """Run the rules in order and return the first hit (None when no rule recognises the failure).

    A rule that raises is a bug in that rule, not in the user's input: it is logged and skipped
    so one faulty rule never costs the user their diagnosis.
    """
    ctx = Context(failure, evidence or Evidence())
    for rule in RULES:
        try:
            result = rule(ctx)
        except Exception:  # noqa: BLE001 - isolate rule bugs, see docstring
            log.exception("rule %s failed", getattr(rule, "__name__", rule))
            continue
        if result is not None:
            return result
    return None


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


__all__ = ["Context", "RULES", "match", "with_evidence"]
