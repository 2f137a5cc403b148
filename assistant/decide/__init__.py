"""One calibrated decision over every source of evidence: which failure family this is, and how sure.

The rule's reading, the documents whose error signature the text carries, the retrieved knowledge
sections and the closest resolved reports each propose categories; :mod:`assistant.decide.features`
turns them into comparable feature vectors, :mod:`assistant.decide.model` scores and calibrates them.
The answer is "unknown" only when nothing proposed is close enough to stand on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from assistant.decide.features import Candidate, candidates
from assistant.decide.model import Fitted, Unfamiliar, load_fitted, load_unfamiliar, raw_scores
from assistant.kb.cases import SimilarCase
from assistant.types import Failure, Passage, RuleHit

# A rule that read the message keeps its family unless another is at least this likely AND a resolved report close to
# this one was labelled with it. Out of fold on dev the model disagreed with a firing rule 4 times in 335, at likelihoods
# 0.27-0.51, and the rule was right in 3; a document's generic signature (a Python message) is no reason to drop a rule
# that read the specific context, a near-identical resolved report is.
OVERRIDE_RULE_AT = 0.8
# A resolved report this similar (cosine) is a near-duplicate: the report is familiar text, where the fitted
# calibration holds. Below it the likelihood is lowered to what it was worth on reports nothing was tuned on
# (assistant/decide/unfamiliar.json): on four dev parts recorded before tuning, answers stated at >= 0.9 were right
# 0.94 of the time with a near-duplicate (34) and 0.83 without one (90).
NEAR_DUPLICATE = 0.75
OVERRIDE_CASE_SIMILARITY = NEAR_DUPLICATE
# Abstention threshold when the atlas recognised the message (see decide()): on the 80 atlas probes (messages no
# document quotes, all raised by PyTorch) answers between 0.2 and 0.3 were right in 4 of 6; on text that is not a
# PyTorch message such answers are noise, and the fitted threshold applies.
RAISED_BY_PYTORCH_FLOOR = 0.2
# When the rule stands against the model, how often is it right? 3 of 4 on dev (above), shrunk toward even odds.
RULE_STANDS_LIKELIHOOD = 0.6


@dataclass(frozen=True)
class Decision:
    """The ranked categories with calibrated likelihoods; ``category`` is "unknown" when the decision abstains."""

    ranked: tuple[tuple[str, float], ...]
    category: str
    likelihood: float
    basis: tuple[str, ...]  # the sources that named the leading category
    candidates: tuple[Candidate, ...] = ()
    abstained: bool = False  # nothing proposed was strong enough: "unknown" with no document to answer from
    fitted: float | None = None  # the leading likelihood on the fitted (dev) scale, before the unfamiliar-text adjustment


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
    if f["atlas"]:
        parts.append("PyTorch's own check")
    return tuple(parts)


def _may_override(lead: Candidate, likelihood: float) -> bool:
    """Whether the evidence for another family is strong enough to set a firing rule's reading aside."""
    return likelihood >= OVERRIDE_RULE_AT and lead.as_dict()["case_best"] >= OVERRIDE_CASE_SIMILARITY


def decide(
    failure: Failure, hit: RuleHit | None, passages: Sequence[Passage], signature_categories: Sequence[str],
    similar: Sequence[SimilarCase], fitted: Fitted | None = None, idf: Callable[[str], float] | None = None, mode: str = "hybrid",
    origin: Mapping[str, object] | None = None, unfamiliar: Unfamiliar | None = None,
) -> Decision:
    """Score every proposed category and pick one, or abstain when the best is too weak to stand on.

    ``mode`` says whether retrieval had embeddings ("hybrid") or not ("lexical"): each has its own fit. ``unfamiliar``
    is the table for reports with no near-duplicate resolved report (the shipped one when None)."""
    fitted = fitted or load_fitted(mode)
    unfamiliar = unfamiliar or load_unfamiliar()
    cands = candidates(failure, hit, passages, signature_categories, similar, idf, origin)
    if not cands:
        return Decision((), "unknown", 0.0, (), abstained=True)
    shares = raw_scores(cands, fitted)
    by_cat = {c.category: c for c in cands}
    rule_stands = hit is not None and shares[0][0] != hit.category and not _may_override(by_cat[shares[0][0]], fitted.calibrate(shares[0][1]))
    if rule_stands and hit is not None:
        # The rule's reading stands: move its category to the front (its own share, calibrated, is its likelihood).
        rule_category = hit.category
        shares = sorted(shares, key=lambda cs: cs[0] != rule_category)
    lead_cat, lead_raw = shares[0]
    rule_leads = hit is not None and lead_cat == hit.category
    lead_p = max(fitted.calibrate(lead_raw), RULE_STANDS_LIKELIHOOD) if rule_stands else fitted.calibrate(lead_raw)
    scale = lead_p / lead_raw if lead_raw > 0 else 0.0
    ranked = tuple((c, round(min(p * scale, lead_p), 4)) for c, p in shares)
    # A message one of PyTorch's own checks raised (the atlas knows it) narrows the families to those of that check's
    # neighbourhood: a weaker reading is still worth giving there; anything else below the fitted threshold is not.
    floor = min(fitted.abstain_below, RAISED_BY_PYTORCH_FLOOR) if origin else fitted.abstain_below
    if lead_p < floor and not rule_leads:  # a rule that read the message is never answered with "unknown"
        return Decision(ranked, "unknown", round(lead_p, 4), _basis(by_cat[lead_cat]), tuple(cands), abstained=True)
    # Whether to answer was settled on the fitted scale (its threshold was fitted there); how sure to say it is depends
    # on whether the text is familiar.
    familiar = any(s.similarity >= NEAR_DUPLICATE for s in similar)
    fitted_p = lead_p
    if unfamiliar is not None and not familiar and lead_p > 0:
        stated = unfamiliar.adjust(lead_p, lead_cat)
        ranked = tuple((c, round(p * stated / lead_p, 4)) for c, p in ranked)
        lead_p = stated
    return Decision(ranked, lead_cat, round(lead_p, 4), _basis(by_cat[lead_cat]), tuple(cands), fitted=round(fitted_p, 4))
