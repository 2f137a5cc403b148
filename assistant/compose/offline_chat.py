"""Follow-up answers without an LLM: the part of the diagnosis or the knowledge base a question asks for.

A question is read for what it asks: how to fix the failure (the diagnosis' fixes, each whole, with
its code), why it happened (the cause and the evidence), or anything else (the knowledge-base
section sharing the most words with the question, shown whole). An answer is a list of blocks,
headings, plain text, Markdown prose and code, so a terminal can render each kind properly and the
HTTP API can send the same answer as Markdown. Nothing is cut inside a paragraph or a code block:
sections are read from the documents as written (the index keeps only whitespace-flattened chunks)
and split on code fences, never through one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from assistant.kb.lexical import tokenize
from assistant.types import Diagnosis

Intent = Literal["fix", "why", "alternatives", "lookup"]
BlockKind = Literal["heading", "text", "markdown", "code"]

# "how do I fix it", "any workaround?", "what should I do" ask for the remedies.
_FIX_WORDS = re.compile(
    r"\b(fix(es|ed|ing)?|solv(e|ed|ing)|solution|resolv(e|ed|ing)|repair|workaround|remed(y|ies)|avoid|prevent|"
    r"get rid of|make it work|what (should|can|do) (i|we) do|what now)\b",
    re.I,
)
# "why?", "what caused this", "what does this error mean" ask for the cause and the evidence.
_WHY_WORDS = re.compile(
    r"\b(why|caus(e|ed|es|ing)|reasons?|how come|went wrong|what happened|explain|evidence|"
    r"what does (this|the|that|it)( error| message| exception)? mean)\b",
    re.I,
)
# "what else could it be?", "other causes?", "what if it's not that": the ranked hypotheses after the first.
_ELSE_WORDS = re.compile(
    r"\b(what else|anything else|other (possible )?(causes?|reasons?|explanations?|possibilit(y|ies))|alternatives?|"
    r"could it (also )?be|might it be|(it'?s|it is|that'?s) not (that|it)|rule (it )?out|how (do|can) i (tell|check|confirm)|differential)\b",
    re.I,
)
# Words that say how to answer rather than what about: they must not pick a section.
_NOT_TOPICAL = frozenset("tell show mean means meaning explain please thing things know get got want need like about me my".split())
_ATX_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_RST_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+])\1{2,}\s*$")
_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<mark>`{3,}|~{3,})[ \t]*(?P<lang>[^\s`]*)")
# A section longer than this is shown up to the block that crosses it (whole blocks only), then named.
MAX_SECTION_CHARS = 4000
SEE_ALSO = 2


@dataclass(frozen=True)
class Block:
    """One piece of an answer: a heading (level 1 or 2), plain text, Markdown prose, or code."""

    kind: BlockKind
    text: str
    lang: str = ""
    level: int = 1


@dataclass(frozen=True)
class Section:
    """A document section as written (Markdown, code fences intact)."""

    doc_id: str
    doc_title: str
    heading: str
    body: str


@dataclass(frozen=True)
class OfflineAnswer:
    """What a follow-up without an LLM answers: blocks to render and the document ids they cite."""

    blocks: tuple[Block, ...]
    cited: tuple[str, ...]
    intents: frozenset[str]

    def markdown(self) -> str:
        """The answer as Markdown (for the HTTP API and the chat history)."""
        out: list[str] = []
        for b in self.blocks:
            if b.kind == "heading":
                out.append(f"**{b.text}**")
            elif b.kind == "code":
                runs = [len(m.group()) for m in re.finditer(r"`{3,}", b.text)]
                fence = "`" * max([3, *(n + 1 for n in runs)])  # longer than any run inside: nothing closes it early
                out.append(f"{fence}{b.lang}\n{b.text}\n{fence}")
            else:
                out.append(b.text)
        return "\n\n".join(out) + "\n"


def question_intents(question: str) -> frozenset[Intent]:
    """What the question asks for: ``fix``, ``why`` (both possible), else ``lookup``."""
    found: set[Intent] = set()
    if _FIX_WORDS.search(question):
        found.add("fix")
    if _WHY_WORDS.search(question):
        found.add("why")
    if _ELSE_WORDS.search(question):
        found.add("alternatives")
        found.discard("why")  # "other causes?" asks past the leading cause, not for it again
    return frozenset(found or {"lookup"})


def _fence_open(line: str) -> re.Match[str] | None:
    """The opening fence on this line, if it is one (a backtick fence's info string holds no backtick)."""
    m = _FENCE_OPEN.match(line)
    if m and m.group("mark")[0] == "`" and "`" in line[m.end("mark"):]:
        return None
    return m


def _closes(line: str, mark: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and set(stripped) == {mark[0]} and len(stripped) >= len(mark)


def markdown_blocks(text: str) -> list[Block]:
    """Split Markdown into prose and code blocks at its fences; an unclosed fence runs to the end.

    Code keeps its lines exactly, less the fence's own indentation (a fence inside a list item).
    """
    blocks: list[Block] = []
    prose: list[str] = []
    code: list[str] = []
    mark, indent, lang, in_code = "", 0, "", False

    def flush_prose() -> None:
        body = "\n".join(prose).strip("\n")
        if body.strip():
            blocks.append(Block("markdown", _dedent_common(body)))
        prose.clear()

    for line in text.splitlines():
        if not in_code:
            m = _fence_open(line)
            if m:
                flush_prose()
                mark, indent, lang, in_code = m.group("mark"), len(m.group("indent")), m.group("lang"), True
                continue
            prose.append(line)
            continue
        if _closes(line, mark):
            blocks.append(Block("code", "\n".join(code).strip("\n"), lang or "python"))
            code.clear()
            in_code = False
            continue
        lead = len(line) - len(line.lstrip(" \t"))
        code.append(line[min(lead, indent):])
    if in_code and any(c.strip() for c in code):
        blocks.append(Block("code", "\n".join(code).strip("\n"), lang or "python"))
    flush_prose()
    return [b for b in blocks if b.text.strip()]


def _dedent_common(text: str) -> str:
    """Remove the indentation every line shares (prose after a fence inside a list item)."""
    lines = text.split("\n")
    widths = [len(ln) - len(ln.lstrip(" ")) for ln in lines if ln.strip()]
    cut = min(widths, default=0)
    return "\n".join(ln[cut:] for ln in lines)


def split_sections(doc_id: str, doc_title: str, body: str, suffix: str = ".md", max_level: int = 6) -> list[Section]:
    """A document's sections at its headings (Markdown ``#`` up to ``max_level``, or reStructuredText underlines), outside code."""
    lines = body.splitlines()
    heads: list[tuple[int, int, str]] = []  # (first line of the heading, first line of the body, title)
    fence = ""
    for i, line in enumerate(lines):
        m = _fence_open(line)
        if fence:
            if _closes(line, fence):
                fence = ""
            continue
        if m:
            fence = m.group("mark")
            continue
        if suffix == ".rst":
            if i and _RST_UNDERLINE.match(line) and lines[i - 1].strip() and not _RST_UNDERLINE.match(lines[i - 1]):
                heads.append((i - 1, i + 1, lines[i - 1].strip()))
            continue
        h = _ATX_HEADING.match(line)
        if h and len(h.group(1)) <= max_level:
            heads.append((i, i + 1, h.group(2)))
    out: list[Section] = []
    lead_end = heads[0][0] if heads else len(lines)
    lead = "\n".join(lines[:lead_end]).strip()
    if lead:
        out.append(Section(doc_id, doc_title, "overview" if heads else "text", lead))
    for n, (_start, first, title) in enumerate(heads):
        stop = heads[n + 1][0] if n + 1 < len(heads) else len(lines)
        text = "\n".join(lines[first:stop]).strip()
        if text:
            out.append(Section(doc_id, doc_title, title, text))
    return out


def read_sections(doc_id: str, doc_title: str, path: str) -> list[Section]:
    """The sections of one knowledge document, read from disk (built-in paths are relative to the package)."""
    from assistant.errors import KnowledgeError
    from assistant.kb.documents import builtin_knowledge_dir, read_user_doc, readable

    p = Path(path)
    builtin = not p.is_absolute()
    try:
        if builtin:
            p = builtin_knowledge_dir().parent / p
        body = read_user_doc(p).body  # front matter dropped; the id it derives is not used
    except (OSError, KnowledgeError):
        return []
    if builtin:
        # Our documents: sections are the `##` ones (their `###` cause and fix entries stay inside), shown as read.
        return split_sections(doc_id, doc_title, readable(body), p.suffix.lower(), max_level=2)
    return split_sections(doc_id, doc_title, body, p.suffix.lower())


def rank_sections(question: str, sections: Sequence[Section]) -> list[Section]:
    """Sections sharing words with the question, best first: distinct words matched (a word in the
    heading counts half again), then how often they occur (each word counted up to three times, so a
    long section does not win on length alone), then the given order."""
    terms = {t for t in tokenize(question) if t not in _NOT_TOPICAL}
    if not terms:
        return []
    scored: list[tuple[tuple[float, int, int], Section]] = []
    for rank, s in enumerate(sections):
        counts = Counter(tokenize(f"{s.heading}\n{s.body}"))
        matched = {t for t in terms if counts[t]}
        if not matched:
            continue
        in_heading = matched & set(tokenize(s.heading))
        occurrences = sum(min(counts[t], 3) for t in matched)
        scored.append(((len(matched) + 0.5 * len(in_heading), occurrences, -rank), s))
    scored.sort(key=lambda x: x[0], reverse=True)
    return [s for _, s in scored]


def _cite(ids: Iterable[str]) -> str:
    return " ".join(f"[{i}]" for i in dict.fromkeys(ids))


def fix_blocks(d: Diagnosis) -> list[Block]:
    """The diagnosis' fixes, each whole: title with its sources, what to do, and the code."""
    blocks = [Block("heading", "How to fix it (the fixes of the diagnosis, most likely first)")]
    for i, f in enumerate(d.fixes, 1):
        cite = f"  {_cite(f.sources)}" if f.sources else ""
        blocks.append(Block("heading", f"{i}. {f.title}{cite}", level=2))
        if f.detail:
            blocks.append(Block("text", f.detail))
        if f.code:
            blocks.append(Block("code", f.code.strip("\n"), "python"))
    return blocks


def why_blocks(d: Diagnosis) -> list[Block]:
    """The cause as the diagnosis states it, then every piece of evidence it rests on."""
    blocks = [Block("heading", "Why it failed"), Block("text", d.cause or d.summary or d.title)]
    if d.evidence:
        blocks.append(Block("heading", "Evidence"))
        blocks += [Block("text", f"{e.kind}: {e.text}") for e in d.evidence]
    return blocks


def alternative_blocks(d: Diagnosis) -> list[Block]:
    """The ranked causes with their likelihoods and the check that tells each apart, then each one's first fix."""
    if len(d.hypotheses) < 2:
        lead = d.hypotheses[0] if d.hypotheses else None
        text = ("The evidence points to one cause only" + (f"; to confirm it: {lead.check}" if lead and lead.check else ".")) if lead else \
            "torchhelp has no ranked causes for this failure; the general checks are in the fixes."
        return [Block("heading", "Other possible causes"), Block("text", text)]
    blocks = [Block("heading", "Possible causes, most likely first (and how to tell them apart)")]
    for i, h in enumerate(d.hypotheses, 1):
        blocks.append(Block("heading", f"{i}. {h.likelihood:.0%}: {h.cause}", level=2))
        blocks.append(Block("text", f"Check: {h.check}"))
        if h.supports or h.weakens:
            blocks.append(Block("text", "; ".join([*(f"for: {x}" for x in h.supports), *(f"against: {x}" for x in h.weakens)])))
        if h.fixes:
            top = h.fixes[0]
            blocks.append(Block("text", f"Fix: {top.title}" + (f"  {_cite(top.sources)}" if top.sources else "")))
            if top.code:
                blocks.append(Block("code", top.code.strip("\n"), "python"))
    return blocks


def section_blocks(s: Section, path_hint: str = "") -> list[Block]:
    """One section, whole blocks only; a very long one stops after the paragraph or code block that
    crosses the limit, and says where the rest is."""
    blocks = [Block("heading", f"[{s.doc_id}] {s.doc_title} › {s.heading}")]
    parts = markdown_blocks(s.body)
    if sum(len(b.text) for b in parts) > MAX_SECTION_CHARS:  # only then split prose into its paragraphs
        parts = [Block("markdown", p) if b.kind == "markdown" else b for b in parts
                 for p in (_paragraphs(b.text) if b.kind == "markdown" else [b.text])]
    used = 0
    for n, b in enumerate(parts):
        blocks.append(b)
        used += len(b.text)
        if used > MAX_SECTION_CHARS and n + 1 < len(parts):
            blocks.append(Block("text", f"(the section goes on{': ' + path_hint if path_hint else ''})"))
            break
    return blocks


def _paragraphs(text: str) -> list[str]:
    return [p.strip("\n") for p in re.split(r"\n[ \t]*\n", text) if p.strip()]


def _fixes_section(sections: Sequence[Section]) -> Section | None:
    return next((s for s in sections if re.search(r"\b(fix|fixes|solution|workaround|remed)", s.heading, re.I)), None)


def answer_offline(question: str, d: Diagnosis, sections: Sequence[Section], paths: dict[str, str] | None = None) -> OfflineAnswer:
    """Answer ``question`` from the diagnosis and the candidate ``sections`` (best retrieved documents first)."""
    intents = question_intents(question)
    paths = paths or {}
    blocks: list[Block] = []
    cited: list[str] = []
    source_ids = [s.id for s in d.sources]
    if "alternatives" in intents:
        blocks += alternative_blocks(d)
        cited += [c for h in d.hypotheses for c in (h.fixes[0].sources if h.fixes else ())]
    if "why" in intents:
        blocks += why_blocks(d)
        cited += source_ids
    if "fix" in intents:
        if d.fixes:
            blocks += fix_blocks(d)
            cited += [c for f in d.fixes for c in f.sources]
        else:
            best = _fixes_section(sections)
            if best is not None:
                blocks += section_blocks(best, paths.get(best.doc_id, ""))
                cited.append(best.doc_id)
    if "lookup" in intents or not blocks:
        ranked = rank_sections(question, sections)
        if ranked:
            best = ranked[0]
            blocks += section_blocks(best, paths.get(best.doc_id, ""))
            cited.append(best.doc_id)
            others = [s for s in ranked[1:] if (s.doc_id, s.heading) != (best.doc_id, best.heading)][:SEE_ALSO]
            if others:
                blocks.append(Block("text", "Also relevant: " + "; ".join(f"[{s.doc_id}] {s.heading}" for s in others)))
                cited += [s.doc_id for s in others]
        else:
            blocks.append(Block("text", "Nothing in this diagnosis or the knowledge base shares a word with that question. "
                                        "Ask how to fix it, why it failed, or about a term in the diagnosis' sources."))
            cited += source_ids  # pointers for the next question, not support for a claim
    cited = list(dict.fromkeys(cited))
    if cited:
        blocks.append(Block("text", "Sources: " + _cite(cited)))
    return OfflineAnswer(tuple(blocks), tuple(cited), frozenset(intents))
