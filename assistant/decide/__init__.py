"""One calibrated decision over every source of evidence: which failure family this is, and how sure.

The rule's reading, the documents whose error signature the text carries, the retrieved knowledge
sections and the closest resolved reports each propose categories; :mod:`assistant.decide.features`
turns them into comparable feature vectors, :mod:`assistant.decide.model` scores and calibrates them.
The answer is "unknown" only when nothing proposed is close enough to stand on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from assistant.decide.features import Candidate, candidates
from assistant.decide.model import Fitted, load_fitted, raw_scores
from assistant.kb.cases import SimilarCase
from assistant.types import Failure, Passage, RuleHit


@dataclass(frozen=True)
class Decision:
    """The ranked categories with calibrated likelihoods; ``category`` is "unknown" when the decision abstains."""

    ranked: tuple[tuple[str, float], ...]
    category: str
    likelihood: float
    basis: tuple[str, ...]  # the sources that named the leading category
    candidates: tuple[Candidate, ...] = ()

    @property
    def abstained(self) -> bool:
        return self.category == "unknown"


def _basis(c: Candidate) -> tuple[str, ...]:
    f = c.as_dict()
    parts = []
    if f["rule"]:
        parts.append("rule")
    if f["sig"]:
        parts.append("error signature")
    if f["ret_top1"] or f["ret_best"] >= 0.8:
        parts.append("knowledge")
    if f["case_best"] >= 0.5:
        parts.append("similar reports")
    return tuple(parts)


def decide(
    failure: Failure, hit: RuleHit | None, passages: Sequence[Passage], signature_categories: Sequence[str],
    similar: Sequence[SimilarCase], fitted: Fitted | None = None,
) -> Decision:
    """Score every proposed category and pick one, or abstain when the best is too weak to stand on."""
    fitted = fitted or load_fitted()
    cands = candidates(failure, hit, passages, signature_categories, similar)
    if not cands:
        return Decision((), "unknown", 0.0, ())
    shares = raw_scores(cands, fitted)
    lead_cat, lead_raw = shares[0]
    lead_p = fitted.calibrate(lead_raw)
    scale = lead_p / lead_raw if lead_raw > 0 else 0.0
    ranked = tuple((c, round(min(p * scale, lead_p), 4)) for c, p in shares)
    by_cat = {c.category: c for c in cands}
    if lead_p < fitted.abstain_below:
        return Decision(ranked, "unknown", round(lead_p, 4), _basis(by_cat[lead_cat]), tuple(cands))
    return Decision(ranked, lead_cat, round(lead_p, 4), _basis(by_cat[lead_cat]), tuple(cands))
