"""The deterministic composer: rule hit + evidence + passages -> Diagnosis.

It is the floor every answer stands on: no LLM needed, every cause and fix cites documents that
retrieval actually returned, and when nothing recognises the failure it says ``unknown`` with
honest next steps instead of guessing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from assistant.types import CATEGORIES, Diagnosis, Evidence, Fact, Failure, Fix, Passage, RuleHit, Source

SIGNATURE_CONFIDENCE = 0.55
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
        out.append(Fix(f.title, f.detail, f.code, cites))
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


def _summary(title: str, cause: str) -> str:
    first = re.split(r"(?<=[.!?])\s+", cause.strip(), maxsplit=1)[0]
    return f"{title}. {first}" if first and not first.startswith(title) else title


def compose_from_rule(failure: Failure, evidence: Evidence, hit: RuleHit, passages: Sequence[Passage], notes: Sequence[str] = ()) -> Diagnosis:
    """A diagnosis led by a rule: its facts, cause and fixes, cited against retrieved passages."""
    sources = sources_from(passages, keep=[s for f in hit.fixes for s in f.sources])
    available = {s.id for s in sources}
    fixes = _cited(hit.fixes, available, hit.doc_ids)
    return Diagnosis(
        category=hit.category,
        title=hit.title,
        summary=_summary(hit.title, hit.full_cause),
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


def compose_from_signature(failure: Failure, evidence: Evidence, doc_id: str, passages: Sequence[Passage], notes: Sequence[str] = ()) -> Diagnosis:
    """No rule fired, but the text contains a documented error string: answer from that document."""
    sources = sources_from(passages)
    doc_passages = [p for p in passages if p.doc_id == doc_id]
    title = doc_passages[0].title if doc_passages else doc_id
    category = doc_passages[0].category if doc_passages else "unknown"
    if category not in CATEGORIES:
        category = "unknown"
    causes = _section_text(doc_passages, "cause")
    fixes = tuple(Fix(f.title, f.detail, f.code, (doc_id,)) for f in extract_fixes(_section_text(doc_passages, "fix")))[:4]
    cause = (f"The error matches a known message documented in “{title}”. " + (first_sentences(causes, 2) if causes else "See the cited document for the causes."))
    facts = (Fact("error", failure.headline[:400]), Fact("match", f"matches a signature of knowledge document {doc_id}"))
    return Diagnosis(
        category=category, title=title, summary=f"{title} (matched by its error text; no specific rule applied).", cause=cause,
        fixes=fixes or (Fix("Read the cited document", "It lists the causes and fixes of this error family.", None, (doc_id,)),),
        evidence=_evidence(failure, evidence, facts), sources=sources, confidence=SIGNATURE_CONFIDENCE, backend="none", rule=None,
        notes=tuple(notes) + ("No specific rule recognised this failure; the answer comes from the matching knowledge document.",),
        error=failure.headline[:500], location=_location(failure),
    )


def compose_unknown(failure: Failure, evidence: Evidence, passages: Sequence[Passage], notes: Sequence[str] = ()) -> Diagnosis:
    """Nothing recognises the failure: say so, show what was read, and give honest next steps."""
    sources = sources_from(passages, keep=[GENERAL_GUIDE])
    cited = generic_citation(sources)
    steps = [
        Fix("Start at the last frame in your own code", "The innermost frame of your code is where the bad value entered; print shapes, dtypes, devices and values there.", "breakpoint()  # or python -m pdb -c continue train.py", cited),
        Fix("Make a minimal reproduction", "Cut the script down until the error disappears; the last removed line is usually the cause. Run one batch, on CPU if possible, with num_workers=0.", None, cited),
        Fix("Collect the environment", "Versions decide many failures; `torchhelp env` (or python -m torch.utils.collect_env) prints them.", "torchhelp env", cited),
    ]
    if re.search(r"cuda|gpu|nccl", failure.search_text, re.I):
        steps.insert(1, Fix("Rule out asynchronous CUDA reporting", "Re-run with synchronous kernel launches so the traceback points at the real operation.", "CUDA_LAUNCH_BLOCKING=1 python train.py", cited))
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


def _location(failure: Failure) -> str | None:
    frames = failure.user_frames
    if not frames:
        return None
    fr = frames[-1]
    return fr.location() + (f": {fr.source}" if fr.source else "")


def _section_text(passages: Sequence[Passage], name: str) -> str:
    parts = [p.text.split("\n", 1)[-1] for p in passages if p.section.lower().startswith(name)]
    return "\n".join(parts)


def first_sentences(text: str, n: int) -> str:
    """The first ``n`` sentences of a document's prose, markup and line breaks removed."""
    clean = re.sub(r"[*`#>]", "", text)
    clean = re.sub(r"\s+", " ", clean).strip()
    sentences = re.split(r"(?<=[.!?])\s+", clean)
    return " ".join(sentences[:n])


_ITEM = re.compile(r"(?m)^(?:#{3,4}\s+|\d+[.)]\s+|[-*]\s+(?=\*\*))")


def extract_fixes(text: str) -> list[Fix]:
    """Turn a document's Fixes section (numbered items, bullets with bold titles, or ### headings) into Fix objects."""
    if not text.strip():
        return []
    starts = [m.start() for m in _ITEM.finditer(text)]
    if not starts:
        return [Fix("Apply the documented fix", first_sentences(text, 2), None)]
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
        detail = first_sentences(detail, 2)
        if title:
            out.append(Fix(title[:140], detail, code))
    return out
