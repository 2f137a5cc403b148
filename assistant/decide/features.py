"""What the decision reads: one feature vector per candidate category, from every source of evidence.

Candidates are the categories any source names: the rule that read the message, documents whose exact
error signature is in the text, the retrieved knowledge sections, the closest resolved reports and
the PyTorch check that raised the message (from the error atlas). Each candidate gets the same features, so one
model scores them all and their scores are comparable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from assistant.kb.cases import CLOSE, SimilarCase
from assistant.kb.lexical import tokenize
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
    "ret_dense",       # best embedding cosine of a section of this category (a shared word or two is not closeness in meaning)
    "ret_cover",       # share of the text's words (rarer words weigh more) that the best section of this category contains
    "ret_top1_cover",  # ret_top1 x ret_cover: being ranked first means little when the section shares few of the text's words
    "ret_top1_dense",  # ret_top1 x ret_dense: ... or is far from it in meaning
    "case_top1",       # the closest resolved report is of this category (times its similarity)
    "case_best",       # best similarity among resolved reports of this category
    "case_vote",       # summed similarity of the closest reports of this category (weak matches add little)
    "case_close",      # a resolved report of this category is close (similarity >= CLOSE): near-duplicates are strong evidence, weak matches none
    "atlas",           # the PyTorch check that raised the message (error atlas) belongs to this category
    "atlas_other",     # ... belongs to another category
    "atlas_internal",  # ... and it is an internal assertion (a PyTorch bug)
    "atlas_alone",     # atlas names this category and neither a rule nor a document's signature read the message
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


def coverage(words: dict[str, float], text: str) -> float:
    """The idf-weighted share of ``words`` that ``text`` contains."""
    total = sum(words.values())
    if not total:
        return 0.0
    have = set(tokenize(text))
    return sum(w for t, w in words.items() if t in have) / total


def candidates(
    failure: Failure, hit: RuleHit | None, passages: Sequence[Passage], signature_categories: Sequence[str], similar: Sequence[SimilarCase],
    idf: Callable[[str], float] | None = None, origin: Mapping[str, object] | None = None,
) -> list[Candidate]:
    """Every proposed category with its feature vector (categories outside the taxonomy are dropped).

    ``idf`` weighs the text's words for the coverage feature (how rare each is in the knowledge base); ``origin``
    is the atlas entry of the check that raised the message, when one was recognised."""
    # "unknown" is a category like the others here: a document or a resolved report can say that a failure lies
    # outside the taxonomy (a third-party bug, a custom extension), which is an answer, not an abstention.
    passages = [p for p in passages[:TOP_PASSAGES] if p.category in CATEGORIES]
    similar = list(similar[:TOP_CASES])
    proposed: list[str] = []
    if hit is not None:
        proposed.append(hit.category)
    proposed.extend(signature_categories)
    proposed.extend(p.category for p in passages)
    proposed.extend(s.case.category for s in similar)
    atlas_cat = str(origin["category"]) if origin and origin.get("category") in CATEGORIES else None
    if atlas_cat:
        proposed.append(atlas_cat)
    cats = [c for c in dict.fromkeys(proposed) if c in CATEGORIES]
    top_score = max((p.score for p in passages), default=0.0) or 1.0
    mass = sum(max(p.score, 0.0) for p in passages) or 1.0
    prose = 1.0 if is_prose(failure) else 0.0
    query = tokenize((failure.search_text or failure.text)[:2000])
    words = {t: (idf(t) if idf else 1.0) for t in dict.fromkeys(query)}
    cover: dict[str, float] = {}
    for p in passages:  # best passage per category: the first one, passages come best first
        cover.setdefault(p.category, coverage(words, p.text))
    out = []
    for c in cats:
        rule = 1.0 if hit is not None and hit.category == c else 0.0
        best = max((p.score for p in passages if p.category == c), default=0.0)
        top1 = 1.0 if passages and passages[0].category == c else 0.0
        values = (
            rule,
            rule * (hit.confidence if hit is not None else 0.0),
            rule * prose,
            1.0 if hit is not None and hit.category != c else 0.0,
            1.0 if c in signature_categories else 0.0,
            1.0 if signature_categories and signature_categories[0] == c else 0.0,
            top1,
            best / top_score,
            sum(max(p.score, 0.0) for p in passages if p.category == c) / mass,
            min(best, 3.0),
            max((p.dense for p in passages if p.category == c), default=0.0),
            cover.get(c, 0.0),
            top1 * cover.get(c, 0.0),
            top1 * max((p.dense for p in passages if p.category == c), default=0.0),
            (similar[0].similarity if similar and similar[0].case.category == c else 0.0),
            max((s.similarity for s in similar if s.case.category == c), default=0.0),
            sum(s.similarity for s in similar if s.case.category == c) / TOP_CASES,
            1.0 if any(s.case.category == c and s.similarity >= CLOSE for s in similar) else 0.0,
            1.0 if atlas_cat == c else 0.0,
            1.0 if atlas_cat is not None and atlas_cat != c else 0.0,
            1.0 if atlas_cat == c and origin and origin.get("internal") else 0.0,
            # When no rule and no document knows the message, the check that raised it is the most specific evidence
            # left; where they do know it, they read it in context and the atlas adds little (measured on dev).
            1.0 if atlas_cat == c and hit is None and not signature_categories else 0.0,
            1.0,
        )
        out.append(Candidate(c, values))
    return out
