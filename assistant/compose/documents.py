"""Answer from the knowledge documents when the decision names a family no rule read.

The document of the decided category that retrieval ranked highest (a document quoting the error's
exact signature first) supplies the causes, each with its check and its fixes, ranked by the order the
document gives and by the cues the user's own text carries. Older prose documents without structured
entries still give their Causes and Fixes sections.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from collections.abc import Callable, Mapping, Sequence

from assistant.compose.deterministic import extract_fixes, prose_sentences
from assistant.kb.remedies import DocCause, DocFix, Remedies, filled_fix, find_fix, remedies_of
from assistant.types import Fact, Failure, Fix, Hypothesis, Passage

CUE_WEIGHT = 4.0  # a cause whose telling words are in the user's text is this much more likely than its rank alone says
MAX_CAUSES = 4
MAX_FIXES = 5  # an answer lists at most this many fixes: the cause's own first, then the family's best matches


def document_remedies(doc_id: str) -> Remedies | None:
    """The structured causes and fixes of a built-in document."""
    return remedies_of(doc_id)


def pick_document(category: str, passages: Sequence[Passage], signed: Sequence[str], categories: Mapping[str, str]) -> str | None:
    """The document to answer from: a signed one of the category first, else the best retrieved one of the category."""
    for doc in signed:
        if categories.get(doc) == category:
            return doc
    return next((p.doc_id for p in passages if p.category == category), None)


def _cue_pattern(cue: str) -> str:
    """A cue as a whole word: bounded on a side only where it begins or ends with a letter or digit (so a cue such as
    ``module.`` matches ``module.encoder``, and ``fp16`` does not match inside ``bfp16x``)."""
    low = cue.lower()
    head = r"(?<![a-z0-9])" if low[:1].isalnum() else ""
    tail = r"(?![a-z0-9])" if low[-1:].isalnum() else ""
    return head + re.escape(low) + tail


@lru_cache(maxsize=8192)
def _cue_regex(cue: str) -> re.Pattern[str]:
    # Compiled once per cue: the documents hold more cues than the ``re`` module's own cache keeps.
    return re.compile(_cue_pattern(cue))


def _cue_hit(cause: DocCause, text: str) -> str | None:
    low = text.lower()
    for cue in cause.cues:
        if cue and _cue_regex(cue).search(low):
            return cue
    return None


def _fix(fx: DocFix, values: Mapping[str, object]) -> Fix:
    return filled_fix(fx, values)


def ranked_causes(rem: Remedies, text: str, likelihood: float, values: Mapping[str, object]) -> list[Hypothesis]:
    """The document's causes as hypotheses: order prior times cue evidence, sharing ``likelihood``."""
    scored = []
    for i, cause in enumerate(rem.causes):
        cue = _cue_hit(cause, text)
        scored.append((1.0 / (i + 1) * (CUE_WEIGHT if cue else 1.0), i, cause, cue))
    scored.sort(key=lambda s: (-s[0], s[1]))
    total = sum(s for s, *_ in scored) or 1.0
    out = []
    for score, _, cause, cue in scored[:MAX_CAUSES]:
        fixes = tuple(_fix(fx, values) for fx in (find_fix(r) for r in cause.fix_refs) if fx is not None)
        text_ = f"{cause.title}: {cause.text}" if cause.text else cause.title
        supports = (f"your text mentions “{cue}”",) if cue else ()
        out.append(Hypothesis(cause.ref, text_, round(likelihood * score / total, 4), cause.check, fixes, supports, (), guess=not cue))
    return out


def compose_fixes(lead: Hypothesis | None, rem: Remedies, values: Mapping[str, object]) -> tuple[Fix, ...]:
    """The leading cause's fixes, then the document's other fixes, without repeats."""
    fixes = list(lead.fixes) if lead else []
    seen = {f.title for f in fixes}
    for fx in rem.fixes:
        if len(fixes) >= MAX_FIXES - RELATED_FIXES + 1:  # room for the related fixes that share the user's words
            break
        f = _fix(fx, values)
        if f.title not in seen:
            fixes.append(f)
            seen.add(f.title)
    return tuple(fixes)


def prose_answer(doc_id: str, passages: Sequence[Passage]) -> tuple[str, tuple[Fix, ...]]:
    """(cause, fixes) from a document written as prose sections only."""
    doc_passages = [p for p in passages if p.doc_id == doc_id]
    causes = "\n".join(p.text.split("\n", 1)[-1] for p in doc_passages if p.section.lower().startswith("cause"))
    fix_text = "\n".join(p.text.split("\n", 1)[-1] for p in doc_passages if p.section.lower().startswith("fix"))
    fixes = tuple(Fix(f.title, f.detail, f.code, (doc_id,)) for f in extract_fixes(fix_text))[:MAX_FIXES]
    return prose_sentences(causes, 2) if causes else "", fixes


def facts_for(failure: Failure, doc_title: str, basis: Sequence[str]) -> tuple[Fact, ...]:
    facts = [Fact("error", failure.headline[:400] or "(no error line found)")]
    facts.append(Fact("match", f"closest knowledge: “{doc_title}” (from {', '.join(basis) or 'retrieval'})"))
    return tuple(facts)



_UNFILLED = re.compile(r"<[a-z_]+>")
RELATED_FIXES = 3
RELATED_MIN_SCORE = 1.2  # below this the overlap is a common word or two, not the user's situation
# A fix is matched on its own words and on the words of the causes that name it (how the situation is described,
# its cues): users describe their situation, not the remedy. Measured on three dev parts held out at the commits
# before any tuning on them (173 reports with a confirmed fix): remedy in the fixes 0.394 with fixes only from the
# decided family's documents, 0.428 with cause words and every retrieved document, at no more fixes than MAX_FIXES.
CAUSE_WORD_WEIGHT = 1.0
# Beside a rule's reading, one more fix of the decided family's best retrieved document joins only when the user's
# words match it this strongly (the rule chose its fixes from the values it read; a strong match is a situation the
# text itself describes). Held out on three dev parts (173 reports, 104 read by a rule): at 5.0 it joined 18 rule-led
# answers and carried the confirmed remedy into 7 that lacked it; at 3.0 it joined 41 for 8.
BESIDE_RULE_MIN_SCORE = 5.0
# An answer that names no family ("unknown") lists general next steps; a retrieved fix that matches the user's words at
# least this well goes before them (held out: the first step carried the remedy in 0 of 22 such answers, 3 after).
LEAD_UNKNOWN_MIN_SCORE = 3.0


def _overlap(tokens: set[str], words: set[str], idf: Callable[[str], float]) -> float:
    """The idf-weighted words ``tokens`` shares with the user's ``words``, normalised by the length of ``tokens``."""
    return sum(idf(t) for t in tokens & words) / (len(tokens) ** 0.5) if tokens else 0.0


@dataclass(frozen=True)
class _FixWords:
    """A documented fix ready to be matched: filled with its defaults, its words, and those of each cause naming it."""

    fix: DocFix
    filled: Fix
    words: frozenset[str]
    cause_words: tuple[frozenset[str], ...]


@lru_cache(maxsize=1024)
def _fix_words(rem: Remedies) -> tuple[_FixWords, ...]:
    """A document's offerable fixes (not diagnostic steps, not ones needing a value no reader supplies), tokenised once."""
    from assistant.kb.lexical import tokenize

    out = []
    for fx in rem.fixes:
        if fx.step != "fix":
            continue
        filled = _fix(fx, {})
        if _UNFILLED.search(f"{filled.title} {filled.detail} {filled.code or ''}"):
            continue  # it needs a value no reader supplied
        causes = [c for c in rem.causes if fx.ref in c.fix_refs]
        out.append(_FixWords(fx, filled, frozenset(tokenize(f"{fx.title} {fx.title} {fx.detail} {fx.code or ''}")),
                             tuple(frozenset(tokenize(f"{c.title} {c.text} {' '.join(c.cues)}")) for c in causes)))
    return tuple(out)


@lru_cache(maxsize=1024)
def _default_titles(rem: Remedies) -> tuple[tuple[str, str], ...]:
    """(title as shown with default values, ref) of every fix of a document, filled once per document."""
    return tuple((_fix(fx, {}).title, fx.ref) for fx in rem.fixes)


def _fix_match(entry: _FixWords, words: set[str], idf: Callable[[str], float]) -> float:
    """How well a documented fix matches the user's text: its own words, plus the best of the causes naming it."""
    cause = max((_overlap(set(cw), words, idf) for cw in entry.cause_words), default=0.0)
    return _overlap(set(entry.words), words, idf) + CAUSE_WORD_WEIGHT * cause


def related_fixes(
    text: str, doc_ids: Sequence[str], shown: Sequence[Fix], idf: Callable[[str], float], limit: int = RELATED_FIXES,
    min_score: float = RELATED_MIN_SCORE, *, beside_reading: bool = False, room: int | None = None,
) -> tuple[Fix, ...]:
    """Further documented fixes from the retrieved documents, ranked by the words they and the causes naming them
    share with the user's text (rare words count more): breadth from retrieval, at the level of single fixes.
    Diagnostic and follow-up steps are not offered here, and never more than MAX_FIXES fixes in all (``room`` says how
    many may still join when the caller counts differently).

    ``beside_reading``: ``shown`` are a reader's choices. A fix that takes a value is left out (the reader may have filled
    it under another title), and so are the other fixes of any cause whose fix the reader chose (it chose among them)."""
    return tuple(f for _, f in scored_related_fixes(text, doc_ids, shown, idf, limit, min_score, beside_reading=beside_reading, room=room))


def scored_related_fixes(
    text: str, doc_ids: Sequence[str], shown: Sequence[Fix], idf: Callable[[str], float], limit: int = RELATED_FIXES,
    min_score: float = RELATED_MIN_SCORE, *, beside_reading: bool = False, room: int | None = None,
) -> tuple[tuple[float, Fix], ...]:
    """:func:`related_fixes` with each fix's match score, best first."""
    from assistant.kb.lexical import tokenize

    room = max(0, MAX_FIXES - len(shown)) if room is None else max(0, room)
    if not room:
        return ()
    words = set(tokenize(text[:4000]))
    seen = {f.title for f in shown}
    scored: list[tuple[float, int, Fix]] = []
    for doc_id in dict.fromkeys(doc_ids):
        rem = remedies_of(doc_id)
        if rem is None:
            continue
        # A reader that chose one of a cause's fixes chose among that cause's alternatives (a rewrite without
        # activations rather than with): the others are not offered beside it.
        chosen = {ref for title, ref in _default_titles(rem) if title in seen} if beside_reading else set()
        set_aside = {ref for c in rem.causes if chosen & set(c.fix_refs) for ref in c.fix_refs}
        for entry in _fix_words(rem):
            if entry.fix.title in seen or (beside_reading and (entry.fix.params or entry.fix.ref in set_aside)):
                continue
            score = _fix_match(entry, words, idf)
            if score >= min_score:
                scored.append((score, len(scored), entry.filled))  # ties keep retrieval's order
                seen.add(entry.fix.title)
    scored.sort(key=lambda sf: (-sf[0], sf[1]))
    return tuple((round(score, 4), f) for score, _, f in scored[: min(limit, room)])
