"""The deterministic composer: rule hit + evidence + passages -> Diagnosis.

It is the floor every answer stands on: no LLM needed, every cause and fix cites documents that
retrieval actually returned, and when nothing recognises the failure it says ``unknown`` with
honest next steps instead of guessing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from assistant.kb.cases import CLOSE
from assistant.sentences import first_sentence, first_sentences
from assistant.types import Diagnosis, Evidence, Fact, Failure, Fix, Hypothesis, Passage, RuleHit, SimilarReport, Source

if TYPE_CHECKING:
    from assistant.atlas.matcher import AtlasMatch
    from assistant.decide import Decision
    from assistant.kb.cases import SimilarCase

UNKNOWN_CONFIDENCE = 0.15


RELATIVE_SOURCE_FLOOR = 0.35  # passages scoring below this share of the best one are not shown as sources

# The built-in guide whose Fixes section holds the generic next steps (last frame in your code, a minimal
# repro, CUDA_LAUNCH_BLOCKING=1, collect_env): the only document that supports that advice.
GENERAL_GUIDE = "debugging-workflow"


def sources_from(passages: Sequence[Passage], keep: Iterable[str] = ()) -> tuple[Source, ...]:
    """One source per document, best passage score first; weak matches are dropped unless in ``keep``."""
    best: dict[str, Passage] = {}
    for p in passages:
        if p.doc_id not in best or p.score > best[p.doc_id].score:
            best[p.doc_id] = p
    ranked = sorted(best.values(), key=lambda p: -p.score)
    top = ranked[0].score if ranked else 0.0
    wanted = set(keep)
    return tuple(Source(p.doc_id, p.title, p.path, p.score) for p in ranked if p.score >= RELATIVE_SOURCE_FLOOR * top or p.doc_id in wanted)


def generic_citation(sources: Sequence[Source]) -> tuple[str, ...]:
    """What generic next steps may cite: the general debugging guide when it was retrieved, else nothing.

    Whatever else retrieval returned (a specific failure's document, a team runbook) does not say
    "start at the last frame" or "set CUDA_LAUNCH_BLOCKING=1", so citing it would claim support it lacks.
    """
    return (GENERAL_GUIDE,) if any(s.id == GENERAL_GUIDE for s in sources) else ()


def _cited(fixes: Iterable[Fix], available: set[str], fallback: tuple[str, ...]) -> tuple[Fix, ...]:
    """Keep only citations that are among the retrieved sources; fall back to the rule's best doc."""
    out = []
    for f in fixes:
        cites = tuple(s for s in f.sources if s in available) or tuple(s for s in fallback if s in available)[:1]
        out.append(replace(f, sources=cites))
    return tuple(out)


def _evidence(failure: Failure, evidence: Evidence, facts: Sequence[Fact]) -> tuple[Fact, ...]:
    out = list(facts)
    if failure.wrapper and not any(f.kind == "worker" for f in out):
        out.append(Fact("worker", f"raised inside {failure.wrapper} and re-raised in the main process"))
    if failure.rank is not None:
        out.append(Fact("rank", f"reported by rank {failure.rank}"))
    for n in failure.notes:
        out.append(Fact("log", n))
    if evidence.env:
        env = evidence.env
        gpu = env.get("gpus")
        parts = [f"torch {env.get('torch')}" if env.get("torch") else None, f"CUDA {env.get('cuda')}" if env.get("cuda") else None]
        if gpu:
            parts.append(", ".join(g.get("name", "?") for g in gpu[:2]))
        line = ", ".join(p for p in parts if p)
        if line:
            out.append(Fact("env", line))
    seen: set[tuple[str, str]] = set()
    unique = []
    for f in out:
        key = (f.kind, f.text)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return tuple(unique)


def summary_of(title: str, cause: str) -> str:
    """The one-line summary: the title and the cause's first sentence (the title alone when the cause starts with it)."""
    first = first_sentence(cause)
    return f"{title}. {first}" if first and not first.startswith(title) else title


def compose_from_rule(failure: Failure, evidence: Evidence, hit: RuleHit, passages: Sequence[Passage], notes: Sequence[str] = ()) -> Diagnosis:
    """A diagnosis led by a rule: its facts, cause and fixes, cited against retrieved passages."""
    sources = sources_from(passages, keep=[s for f in hit.fixes for s in f.sources])
    available = {s.id for s in sources}
    fixes = _cited(hit.fixes, available, hit.doc_ids)
    return Diagnosis(
        category=hit.category,
        title=hit.title,
        summary=summary_of(hit.title, hit.full_cause),
        cause=hit.full_cause,
        fixes=fixes,
        evidence=_evidence(failure, evidence, hit.evidence),
        sources=sources,
        confidence=hit.confidence,
        backend="none",
        rule=hit.rule,
        facts=hit.facts,
        notes=tuple(notes),
        error=failure.headline[:500],
        location=_location(failure),
    )


def compose_from_documents(failure: Failure, evidence: Evidence, decision: Decision, doc_id: str, passages: Sequence[Passage], notes: Sequence[str] = ()) -> Diagnosis:
    """No rule read the failure (or the evidence outweighed it): answer from the decided family's document.

    A structured document gives its causes as ranked hypotheses, each with its check and fixes; a prose
    one gives its Causes and Fixes sections.
    """
    from assistant.compose.documents import compose_fixes, document_remedies, facts_for, prose_answer, ranked_causes

    title = next((p.title for p in passages if p.doc_id == doc_id), doc_id)
    rem = document_remedies(doc_id)
    text = failure.text or failure.search_text
    hypotheses: tuple[Hypothesis, ...] = ()
    if rem is not None and rem.causes:
        hypotheses = tuple(ranked_causes(rem, text, decision.likelihood, {}))
        cause = hypotheses[0].cause
        fixes = compose_fixes(hypotheses[0], rem, {})
    else:
        prose, fixes = prose_answer(doc_id, passages)
        cause = f"The error matches “{title}”. " + (prose or "See the cited document for its causes.")
        if rem is not None and rem.fixes:  # documented fix entries beat fixes scraped from prose
            fixes = compose_fixes(None, rem, {})
    if not fixes:
        fixes = general_steps(False)
    cited = [s for f in (*fixes, *(f for h in hypotheses for f in h.fixes)) for s in f.sources]
    sources = sources_from(passages, keep=[doc_id, *cited])
    available = {s.id for s in sources}
    # A fix whose document was not retrieved cannot be cited: a documented one is dropped rather than shown unbacked,
    # the general steps keep their advice without a citation (as in an unknown answer).
    general = {f.title for f in general_steps(False)}
    fixes = tuple(f if all(s in available for s in f.sources) else replace(f, sources=()) for f in fixes
                  if all(s in available for s in f.sources) or f.title in general)
    hypotheses = tuple(replace(h, fixes=tuple(f for f in h.fixes if all(s in available for s in f.sources))) for h in hypotheses)
    basis = " and ".join(decision.basis) or "retrieval"
    return Diagnosis(
        category=decision.category, title=title, summary=summary_of(title, cause), cause=cause,
        fixes=fixes,
        evidence=_evidence(failure, evidence, facts_for(failure, title, decision.basis)), sources=sources, confidence=decision.likelihood,
        backend="none", rule=None, hypotheses=hypotheses,
        notes=tuple(notes) + (f"No rule read the values of this message; the family comes from the {basis}.",),
        error=failure.headline[:500], location=_location(failure),
    )


def with_decision(d: Diagnosis, decision: Decision | None, similar: Sequence[SimilarCase], origin: AtlasMatch | None = None) -> Diagnosis:
    """The diagnosis with the decision's likelihood and ranking, the close resolved reports and the check that raised it."""
    close = tuple(SimilarReport(s.case.id, s.case.category, s.similarity, s.case.resolution, s.case.link) for s in similar if s.similarity >= CLOSE)[:2]
    if origin is not None:
        from assistant.atlas import raised_by, raised_by_line

        info = raised_by(origin)
        notes = d.notes
        if info["internal"]:
            notes = (*notes, "The message is one of PyTorch's internal assertions: it reports a bug in PyTorch (or in a library built against it), not in your code.")
        d = replace(d, raised_by=info, evidence=(*d.evidence, Fact("raised by", raised_by_line(info))), notes=notes)
    if decision is None:
        return replace(d, similar=close)
    ranked = [{"category": c, "likelihood": p} for c, p in decision.ranked[:4]]
    info = {"basis": list(decision.basis), "ranked": ranked, "abstained": decision.abstained}
    confidence = decision.likelihood if d.category == decision.category and not decision.abstained else d.confidence
    return replace(d, confidence=confidence, similar=close, decision=info)


def compose_unknown(failure: Failure, evidence: Evidence, passages: Sequence[Passage], notes: Sequence[str] = ()) -> Diagnosis:
    """Nothing recognises the failure: say so, show what was read, and give honest next steps."""
    sources = sources_from(passages, keep=[GENERAL_GUIDE])
    cited = generic_citation(sources)
    cuda = bool(re.search(r"cuda|gpu|nccl", failure.search_text, re.I))
    steps = [replace(f, sources=cited) for f in general_steps(cuda)]
    related = ", ".join(f"“{s.title}”" for s in sources[:3])
    cause = ("No rule or known error signature matches this failure, so torchhelp cannot say what caused it with confidence."
             + (f" Possibly related documents: {related}." if related else ""))
    facts = [Fact("error", failure.headline[:400] or "(no error line found)")]
    if failure.user_frames:
        fr = failure.user_frames[-1]
        facts.append(Fact("location", f"last frame in your code: {fr.location()}" + (f" (`{fr.source}`)" if fr.source else "")))
    return Diagnosis(
        category="unknown", title="Unrecognised failure", summary="torchhelp does not recognise this failure; here is what it read and how to narrow it down.",
        cause=cause, fixes=tuple(steps), evidence=_evidence(failure, evidence, facts), sources=sources, confidence=UNKNOWN_CONFIDENCE,
        backend="none", rule=None, notes=tuple(notes), error=failure.headline[:500], location=_location(failure),
    )


def general_steps(cuda: bool) -> tuple[Fix, ...]:
    """The general guide's next steps for a failure nothing recognises (the words live in the guide)."""
    from assistant.kb.remedies import as_fix

    ids = ("last-user-frame", "sync-cuda-launches", "minimal-repro", "collect-env") if cuda else ("last-user-frame", "minimal-repro", "collect-env")
    return tuple(f for f in (as_fix(f"{GENERAL_GUIDE}#{i}") for i in ids) if f is not None)


def _location(failure: Failure) -> str | None:
    frames = failure.user_frames
    if not frames:
        return None
    fr = frames[-1]
    return fr.location() + (f": {fr.source}" if fr.source else "")


def _section_text(passages: Sequence[Passage], name: str) -> str:
    parts = [p.text.split("\n", 1)[-1] for p in passages if p.section.lower().startswith(name)]
    return "\n".join(parts)


def prose_sentences(text: str, n: int) -> str:
    """The first ``n`` sentences of a document's prose, its markdown markup removed."""
    return first_sentences(re.sub(r"[*`#>]", "", text), n)


_ITEM = re.compile(r"(?m)^(?:#{3,4}\s+|\d+[.)]\s+|[-*]\s+(?=\*\*))")


def _starts_a_sentence(text: str) -> bool:
    """Whether a piece of prose begins where a sentence does (a capital, a code span, emphasis), not mid-sentence."""
    head = text.lstrip()[:1]
    return head.isupper() or head in ("`", "*", "_")


def extract_fixes(text: str) -> list[Fix]:
    """Turn a document's Fixes section (numbered items, bullets with bold titles, or ### headings) into Fix objects."""
    if not text.strip():
        return []
    starts = [m.start() for m in _ITEM.finditer(text)]
    if not starts:
        if not _starts_a_sentence(text):
            return []  # a retrieved chunk that begins mid-item: its words are the tail of another fix, not one of their own
        from assistant.kb.remedies import as_fix

        generic = as_fix(f"{GENERAL_GUIDE}#apply-documented-fix", {"summary": prose_sentences(text, 2)})
        return [replace(generic, sources=())] if generic else []
    out: list[Fix] = []
    for i, start in enumerate(starts):
        block = text[start : starts[i + 1] if i + 1 < len(starts) else len(text)]
        code_m = re.search(r"```\w*\n(.*?)```", block, re.S)
        code = code_m.group(1).strip() if code_m else None
        prose = re.sub(r"```.*?```", " ", block, flags=re.S)
        prose = _ITEM.sub("", prose, count=1).strip()
        title_m = re.match(r"\*\*(.+?)\*\*[.:]?\s*(.*)", prose, re.S)
        if title_m:
            title, detail = title_m.group(1).strip(), title_m.group(2)
        else:
            first_line, _, rest = prose.partition("\n")
            title, detail = first_line.strip(), rest
        title = re.sub(r"[*`]", "", title).strip().rstrip(".:")
        detail = prose_sentences(detail, 2)
        if title:
            out.append(Fix(title[:140], detail, code))
    return out
