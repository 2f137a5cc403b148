"""Rank the causes of a diagnosis: the rule's reading, the family's other common causes, context cues.

The rule says which family the error is in (its confidence is well calibrated for that) and, when
the text allows, which branch. Within a family the story around the message decides: the same OOM
"when resuming" and "after a few epochs" have different causes. Each alternative's score is its
prior share times the likelihood ratios of the cues present; the rule's own branch is multiplied by
:data:`RULE_WEIGHT` because the text itself pointed to it. Scores become likelihoods by sharing out
the category confidence, keeping :data:`OTHER_MASS` for causes outside the table.
"""

from __future__ import annotations

from dataclasses import replace
from collections.abc import Sequence

from assistant.differential.cues import Cue, read_cues
from assistant.differential.families import FAMILIES
from assistant.differential.family import Alternative, Family
from assistant.compose.deterministic import summary_of
from assistant.kb.remedies import FIX_STEPS
from assistant.types import Diagnosis, Fact, Failure, Fix, Hypothesis, Passage, Source, TensorSummary

RULE_WEIGHT = 25.0  # the text matched this branch's own wording: specific evidence, stronger than any single cue
OTHER_MASS = 0.12  # room for a cause no alternative describes
MAX_HYPOTHESES = 4
MIN_LIKELIHOOD = 0.03
UNCERTAIN = 0.35  # below this, no cause stands out: lead with the checks
# At or above this, the leading cause stands out enough that its fixes lead with the steps that remove it
# (dev: first fixes carrying the confirmed remedy 0.603 -> 0.652 over the 348 dev reports with one; 0.35 gave 0.635, 0.5 0.632;
# 0.658 once restarts were marked as steps that follow a fix).
REMEDIES_FIRST = 0.4
# A rule's confidence is calibrated for the error's family, not for its cause. On reports collected
# after the rules were written (fresh2 dev, measured before any tuning on it), one-cause answers at
# >= 0.8 carried the fix the thread confirmed only about 60% of the time, with the family right in
# all of them. So a single cause the rule did not read from decisive facts gets this share of the
# rule's confidence; decisive outcomes (the cause is in the message's own values) keep all of it.
UNRANKED_CAUSE_SHARE = 0.8


def _moved_by(alt: Alternative, cues: Sequence[Cue]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    supports = tuple(c.fact for c in cues if alt.cues.get(c.id, 1.0) > 1.0)
    weakens = tuple(c.fact for c in cues if alt.cues.get(c.id, 1.0) < 1.0)
    return supports, weakens


def _rule_check(d: Diagnosis) -> str:
    """The check of the document cause that the rule's own fixes remedy (the first fix that leads back to one)."""
    from assistant.kb.remedies import cause_of_fix

    for fx in d.fixes:
        cause = cause_of_fix(fx.title, fx.sources)
        if cause is not None and cause.check:
            return cause.check
    return ""


def _with_checks(d: Diagnosis, failure: Failure, tensors: Sequence[TensorSummary] = ()) -> Diagnosis:
    """Every hypothesis with a check, in the user's names: a hypothesis no cause entry gave one takes its category's
    first check (the ``first-checks`` guide); each check's ``{{placeholders}}`` are filled from the rule's facts and the
    failing line (a name on it the probes saw as a tensor first), like fixes."""
    if not d.hypotheses:
        return d
    from assistant.kb.remedies import fact_values, filled_check, first_checks

    values = fact_values(d.facts, failure, tensors)
    fallback = first_checks().get(d.category, "")
    hypotheses = tuple(replace(h, check=filled_check(h.check or fallback, values)) for h in d.hypotheses)
    return replace(d, hypotheses=hypotheses)


def _single(d: Diagnosis, check: str, decisive: bool, text: str = "", passages: Sequence[Passage] = ()) -> Diagnosis:
    """A rule that is certain (or a family with one common cause): the rule's own hypothesis. When the rule did not
    read its cause from decisive values, the share of the confidence it does not claim goes to the other causes the
    family's documents describe (the rule's own documents first, then the retrieved ones of its family) whose telling
    words the user's text carries: breadth from the knowledge, below the rule's reading and never in its fixes. A
    cause nothing in the text points to is not offered (the rule may have read facts that exclude it)."""
    likelihood = d.confidence if decisive else d.confidence * UNRANKED_CAUSE_SHARE
    h = Hypothesis(d.rule or d.category, d.cause, likelihood, check, d.fixes, supports=(f"read from the error: {d.title}",))
    others = () if decisive else _documented_alternatives(d, h, text, passages, d.confidence - likelihood)
    return replace(d, hypotheses=(h, *others))


DOCUMENTS_FOR_ALTERNATIVES = 2


def _documented_alternatives(d: Diagnosis, lead: Hypothesis, text: str, passages: Sequence[Passage], mass: float) -> tuple[Hypothesis, ...]:
    """Other causes of the lead's family, from its documents' structured entries, sharing ``mass``: those the user's
    words cue, less any whose fixes are the lead's own (the same story in the document's words)."""
    from assistant.compose.documents import ranked_causes
    from assistant.kb.remedies import remedies_of

    if mass < MIN_LIKELIHOOD:
        return ()
    own = [doc for f in lead.fixes for doc in f.sources]
    family_docs = [p.doc_id for p in passages if p.category == d.category]
    lead_fixes = {f.title for f in lead.fixes}
    out: list[Hypothesis] = []
    seen = {lead.cause}
    for doc in list(dict.fromkeys([*own, *family_docs]))[:DOCUMENTS_FOR_ALTERNATIVES]:
        rem = remedies_of(doc)
        if rem is None or not rem.causes:
            continue
        for h in ranked_causes(rem, text, mass / DOCUMENTS_FOR_ALTERNATIVES, {}):
            if not h.supports or {f.title for f in h.fixes} & lead_fixes or h.cause in seen or not h.fixes:
                continue
            seen.add(h.cause)
            out.append(h)
    out.sort(key=lambda h: -h.likelihood)
    return tuple(h for h in out if h.likelihood >= MIN_LIKELIHOOD)[: MAX_HYPOTHESES - 1]


def _score(alt: Alternative, cues: Sequence[Cue], rule: str | None, plain: frozenset[str]) -> float:
    score = alt.prior
    for cue in cues:
        score *= alt.cues.get(cue.id, 1.0)
    if rule is not None and rule in alt.outcomes and rule not in plain:
        score *= RULE_WEIGHT
    return score


def _grounded(hypotheses: Sequence[Hypothesis], d: Diagnosis, passages: Sequence[Passage]) -> tuple[tuple[Hypothesis, ...], tuple[Source, ...]]:
    """Sources that cover every hypothesis's citations (from the retrieved passages); citations nothing retrieved are dropped."""
    from assistant.compose.deterministic import sources_from

    cited = [doc for h in hypotheses for f in h.fixes for doc in f.sources]
    sources = sources_from(passages, keep=[*cited, *(s.id for s in d.sources)]) if passages else d.sources
    have = {s.id for s in sources}
    out = tuple(replace(h, fixes=tuple(replace(f, sources=tuple(x for x in f.sources if x in have)) for f in h.fixes)) for h in hypotheses)
    return out, sources


def differentiate(d: Diagnosis, failure: Failure, passages: Sequence[Passage] = (), tensors: Sequence[TensorSummary] = ()) -> Diagnosis:
    """The diagnosis with ranked hypotheses; ``cause`` and ``fixes`` become the leading hypothesis's. Each
    hypothesis's check is filled with the user's names (``tensors``: what the probes saw, when they ran), and
    its fixes list the steps that remove the cause before the ones that only find it."""
    return _remedies_first(_differentiate(d, failure, passages, tensors))


def _remedies_first(d: Diagnosis) -> Diagnosis:
    """Fixes that remove a cause before fixes that locate it (``- step: diagnose`` in the documents), and steps that
    only follow a fix (``- step: after``: restart the spoiled process) last, in every hypothesis and in the answer,
    once one cause stands out: finding the cause is then what the hypothesis's check is for, and the first fix a user
    tries should be one that can end the failure. When nothing stands out the written order stays (locating first),
    except that a step that follows a fix never leads."""
    if not d.hypotheses:
        return d
    stands_out = d.hypotheses[0].likelihood >= REMEDIES_FIRST

    def ordered(fixes: tuple[Fix, ...]) -> tuple[Fix, ...]:
        if not stands_out or not any(f.step == "fix" for f in fixes):
            return tuple(f for f in fixes if f.step != "after") + tuple(f for f in fixes if f.step == "after")
        return tuple(sorted(fixes, key=lambda f: FIX_STEPS.index(f.step) if f.step in FIX_STEPS else 0))  # stable: the written order within a kind

    return replace(d, fixes=ordered(d.fixes), hypotheses=tuple(replace(h, fixes=ordered(h.fixes)) for h in d.hypotheses))


def _differentiate(d: Diagnosis, failure: Failure, passages: Sequence[Passage] = (), tensors: Sequence[TensorSummary] = ()) -> Diagnosis:
    if d.category == "unknown" or d.hypotheses:
        return _with_checks(d, failure, tensors)
    family: Family | None = FAMILIES.get(d.category)
    if family is not None:
        # Only the causes whose words the knowledge in use holds (all of them with the shipped documents).
        family = replace(family, alternatives=tuple(a for a in family.alternatives if a.available))
        if not family.alternatives:
            family = None
    if family is None or not family.covers(d.rule) or (d.rule in family.decisive):
        mapped = next((a for a in family.alternatives if d.rule in a.outcomes), None) if family else None
        decisive = family is not None and d.rule in family.decisive
        single = _single(d, mapped.check if mapped else _rule_check(d), decisive, failure.text or failure.search_text, passages)
        if len(single.hypotheses) > 1:
            ranked, sources = _grounded(single.hypotheses, single, passages)
            single = replace(single, hypotheses=ranked, sources=sources)
        return _with_checks(single, failure, tensors)
    text = failure.text or failure.search_text
    # The message's boilerplate is the same for everyone; but a bare log or a prose report IS the user's story.
    exclude = failure.message if failure.exc_type and len(failure.message) < 0.8 * len(text) else ""
    cues = read_cues(text, exclude=exclude)
    scored = sorted(((_score(a, cues, d.rule, family.plain), a) for a in family.alternatives), key=lambda x: -x[0])
    total = sum(s for s, _ in scored) or 1.0
    share = max(d.confidence, 0.0) * (1.0 - OTHER_MASS)
    hypotheses: list[Hypothesis] = []
    for score, alt in scored:
        likelihood = share * score / total
        if likelihood < MIN_LIKELIHOOD and hypotheses:
            continue
        supports, weakens = _moved_by(alt, cues)
        if d.rule is not None and d.rule in alt.outcomes:
            # The rule's branch keeps the rule's own cause and fixes: they are written in the user's numbers.
            if d.rule not in family.plain:
                supports = (f"read from the error: {d.title}", *supports)
            hypotheses.append(Hypothesis(alt.id, d.cause, likelihood, alt.check, d.fixes, supports, weakens))
        else:
            hypotheses.append(Hypothesis(alt.id, alt.cause, likelihood, alt.check, alt.fixes, supports, weakens))
        if len(hypotheses) >= MAX_HYPOTHESES:
            break
    ranked, sources = _grounded(hypotheses, d, passages)
    lead = ranked[0]
    notes = d.notes
    if lead.likelihood < UNCERTAIN:
        notes = (*notes, "No single cause stands out from what the text says; the checks under each possible cause tell them apart.")
    cue_facts = tuple(f for f in {c.fact: None for c in cues if any(c.id in a.cues for a in family.alternatives)})
    evidence = (*d.evidence, *(Fact("context", f) for f in cue_facts))
    summary = d.summary if lead.cause == d.cause else summary_of(d.title, lead.cause)
    return _with_checks(replace(d, cause=lead.cause, fixes=lead.fixes, hypotheses=ranked, notes=notes, evidence=evidence, summary=summary, sources=sources), failure, tensors)
