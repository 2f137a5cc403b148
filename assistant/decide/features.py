"""What the decision reads: one feature vector per candidate category, from every source of evidence.

Candidates are the categories any source names: the rule that read the message, documents whose exact
error signature is in the text, the retrieved knowledge sections, the closest resolved reports (and, once
it exists, the PyTorch check that raised the message). Each candidate gets the same features, so one
model scores them all and their scores are comparable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from assistant.kb.cases import SimilarCase
from assistant.types import CATEGORIES, Failure, Passage, RuleHit

FEATURES: tuple[str, ...] = (
    "rule",            # the rule's category is this one
    "rule_conf",       # ... times the rule's confidence
    "rule_prose",      # ... and the input is prose (rules read messages best)
    "rule_other",      # a rule named another category
    "sig",             # a document of this category quotes an error string found in the text
    "sig_first",       # ... the longest such string
    "ret_top1",        # the best retrieved section is of this category
    "ret_best",        # best section score of this category / best score overall
    "ret_share",       # share of the top sections' score mass
    "ret_abs",         # best section score of this category (absolute: low everywhere means nothing is close)
    "case_top1",       # the closest resolved report is of this category (times its similarity)
    "case_best",       # best similarity among resolved reports of this category
    "case_vote",       # similarity-weighted share of the closest reports
    "bias",
)
TOP_PASSAGES = 8
TOP_CASES = 5


@dataclass(frozen=True)
class Candidate:
    """A category some source proposed, with the features the model scores."""

    category: str
    values: tuple[float, ...]

    def as_dict(self) -> dict[str, float]:
        return dict(zip(FEATURES, self.values, strict=True))


def is_prose(failure: Failure) -> bool:
    """No exception line was read: the text describes the failure in words."""
    return not failure.exc_type and not failure.cuda_asserts and not failure.nccl_lines and not failure.signal_lines


def candidates(
    failure: Failure, hit: RuleHit | None, passages: Sequence[Passage], signature_categories: Sequence[str], similar: Sequence[SimilarCase],
) -> list[Candidate]:
    """Every proposed category with its feature vector (categories outside the taxonomy are dropped)."""
    passages = [p for p in passages[:TOP_PASSAGES] if p.category in CATEGORIES and p.category != "unknown"]
    similar = list(similar[:TOP_CASES])
    proposed: list[str] = []
    if hit is not None:
        proposed.append(hit.category)
    proposed.extend(signature_categories)
    proposed.extend(p.category for p in passages)
    proposed.extend(s.case.category for s in similar)
    cats = [c for c in dict.fromkeys(proposed) if c in CATEGORIES and c != "unknown"]
    top_score = max((p.score for p in passages), default=0.0) or 1.0
    mass = sum(max(p.score, 0.0) for p in passages) or 1.0
    case_mass = sum(s.similarity for s in similar) or 1.0
    prose = 1.0 if is_prose(failure) else 0.0
    out = []
    for c in cats:
        rule = 1.0 if hit is not None and hit.category == c else 0.0
        best = max((p.score for p in passages if p.category == c), default=0.0)
        values = (
            rule,
            rule * (hit.confidence if hit is not None else 0.0),
            rule * prose,
            1.0 if hit is not None and hit.category != c else 0.0,
            1.0 if c in signature_categories else 0.0,
            1.0 if signature_categories and signature_categories[0] == c else 0.0,
            1.0 if passages and passages[0].category == c else 0.0,
            best / top_score,
            sum(max(p.score, 0.0) for p in passages if p.category == c) / mass,
            min(best, 3.0),
            (similar[0].similarity if similar and similar[0].case.category == c else 0.0),
            max((s.similarity for s in similar if s.case.category == c), default=0.0),
            sum(s.similarity for s in similar if s.case.category == c) / case_mass,
            1.0,
        )
        out.append(Candidate(c, values))
    return out
