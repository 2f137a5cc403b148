"""Fold a matching team runbook into a diagnosis.

When a user document quotes the failure's error text (see :mod:`assistant.kb.runbooks`), the team
has already written down what to do about it. Their fixes come first, cited to the runbook (the
renderers mark them as the team's), ahead of the built-in ones: a team fix ("use the 80 GB
partition", "our NFS mount needs num_workers=0") knows their cluster, which we do not.

When no rule recognised the failure, the runbook leads the whole answer: its title, its cause
section, its category when its front matter names one of ours. When, besides, no built-in document
quotes the error either, the runbook is the only document that covers it (:func:`only_runbook_covers`)
and its fixes are the answer's only fixes: the generic ones would be guesses beside the team's account.
"""

from __future__ import annotations

from dataclasses import replace
from collections.abc import Sequence

from assistant.kb.remedies import as_fix
from assistant.kb.runbooks import RunbookMatch, read_advice, runbook_sentences
from assistant.types import CATEGORIES, Diagnosis, Fact, Fix, Source

RUNBOOK_CONFIDENCE = 0.6  # a shared error string is strong evidence, but the runbook's scope is the team's call
MAX_FIXES = 5


def only_runbook_covers(d: Diagnosis, builtin_signed: Sequence[str]) -> bool:
    """Whether the team's runbook is the only document that covers this error.

    The rule: no built-in document's signature (an exact error string from its front matter) occurs in the
    failure, and no rule read the failure (``d.rule`` is None), so the decided family, if any, comes from
    shared words or similar reports, not from a built-in family's reading of this message. Then the
    built-in fixes are generic guesses and are not appended after the team's.
    """
    return d.rule is None and not builtin_signed


def with_runbooks(d: Diagnosis, matches: Sequence[RunbookMatch], builtin_signed: Sequence[str] = ()) -> Diagnosis:
    """The diagnosis with the strongest matching runbook's fixes first and the runbook cited.

    ``builtin_signed`` names the built-in documents whose signatures the failure carries; without any
    (and without a rule reading) the team's fixes are the only ones (see :func:`only_runbook_covers`)."""
    if not matches:
        return d
    top = matches[0]
    advice = read_advice(top)
    team_fixes = tuple(Fix(title, detail, code, (top.doc_id,)) for title, detail, code in advice.fixes)
    if not team_fixes:
        generic = as_fix("debugging-workflow#follow-team-runbook", {"title": top.title})
        team_fixes = (replace(generic, sources=(top.doc_id,)),) if generic else ()
    others = tuple(s for s in d.sources if s.id != top.doc_id)
    best = max((s.score for s in d.sources), default=1.0)
    sources = (Source(top.doc_id, top.title, top.path, best), *others)
    fragment = top.fragment if len(top.fragment) <= 160 else top.fragment[:157] + "..."
    fact = Fact("runbook", f"your team's runbook “{top.title}” quotes this error: {fragment}")
    note = f"Fixes marked “team runbook” come from your document {top.doc_id}, which quotes this error's text."
    only = only_runbook_covers(d, builtin_signed)
    rest = () if only else tuple(f for f in d.fixes if f.title not in {t.title for t in team_fixes})
    fixes = (team_fixes + rest)[:MAX_FIXES]
    if d.rule is not None:
        return replace(d, fixes=fixes, sources=sources, evidence=(*d.evidence, fact), notes=(*d.notes, note))
    # No rule knew the failure: the runbook is the best account of it there is.
    cause_text = runbook_sentences(advice.cause, 3)
    cause = f"Your team's runbook “{top.title}” covers this error" + (f": {cause_text}" if cause_text else ".")
    category = top.category if top.category in CATEGORIES else d.category
    kept_notes = tuple(n for n in d.notes if not n.startswith("No specific rule recognised"))
    return replace(
        d, title=top.title, cause=cause, summary=f"{top.title} (your team's runbook matches this error's text).",
        category=category, confidence=max(d.confidence, RUNBOOK_CONFIDENCE), fixes=fixes, sources=sources,
        evidence=(*d.evidence, fact), notes=(*kept_notes, note),
    )
