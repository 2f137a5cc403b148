"""Follow-up answers without an LLM: only what the diagnosis and its family's knowledge actually cover.

A question is classified into the intents this module can answer honestly from the
:class:`~assistant.types.Diagnosis`:

- ``why`` ("why?", "what caused this"): the cause's explanation beyond its first sentence (which the
  user has read already), the evidence read from the user's values, and the ranked causes with their
  likelihoods and the leading one's check. The cause is never repeated verbatim.
- ``fix`` ("how do I fix it") and ``more`` ("what else can I try?"): the fixes not yet shown in this
  chat, the diagnosis' own first, then those of the other possible causes, as one list numbered 1..n.
- ``alternatives`` ("what else could it be?") and ``check`` ("how do I confirm it?"): the ranked
  causes with their checks (and, for alternatives, each one's first fix).
- ``sources``: the documents the diagnosis cites.
- ``lookup`` (anything else, "what does mmap mean?"): a short quote (at most six lines, with its
  citation) from a knowledge section of the SAME failure family (or a team runbook), only when the
  quoted passage shares real words with the question: the idf-weighted share of the question's words
  it holds must reach half, and their weight a floor, so one common word ("memory") is not enough.

Whatever none of these can answer ("would flash attention help?" on a CPU OOM) gets one honest line:
what the diagnosis covers, and that an open question needs an LLM backend (and how to set one up).
Knowledge sections are never concatenated or pasted whole.

An answer is a list of blocks, headings, plain text, Markdown prose and code, so a terminal can render
each kind properly and the HTTP API can send the same answer as Markdown. Sections are read from the
documents as written (the index keeps only whitespace-flattened chunks) and split on code fences,
never through one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from assistant.kb.lexical import tokenize
from assistant.sentences import split_first
from assistant.types import USER_DOC_PREFIX, Diagnosis, Fix, Hypothesis

Intent = Literal["fix", "more", "why", "alternatives", "check", "sources", "lookup"]
BlockKind = Literal["heading", "text", "markdown", "code"]
Idf = Callable[[str], float]

# "how do I fix it", "any workaround?", "what should I do" ask for the remedies.
_FIX_WORDS = re.compile(
    r"\b(fix(es|ed|ing)?|solv(e|ed|ing)|solution|resolv(e|ed|ing)|repair|workaround|remed(y|ies)|avoid|prevent|"
    r"get rid of|make it work|what (should|can|do) (i|we) do|what now)\b",
    re.I,
)
# "what else can I try?", "any other options?": the fixes past those already shown.
_MORE_WORDS = re.compile(
    r"\b(what else|anything else|something else|other (fix(es)?|options?|solutions?|ways?|ideas?|things)|"
    r"more (fix(es)?|options?|solutions?|ways?|ideas?))\b",
    re.I,
)
# "why?", "what caused this", "what does this error mean" ask for the cause and the evidence.
_WHY_WORDS = re.compile(
    r"\b(why|caus(e|ed|es|ing)|reasons?|how come|went wrong|what happened|explain|evidence|"
    r"what does (this|the|that|it)( error| message| exception)? mean)\b",
    re.I,
)
# "what else could it be?", "other causes?", "what if it's not that": the ranked causes after the first.
_ELSE_WORDS = re.compile(
    r"\b(what else (could|might|can|would) (it|this|that) be|other (possible )?(causes?|reasons?|explanations?|possibilit(y|ies))|"
    r"alternatives?|could it (also )?be|might it be|(it'?s|it is|that'?s) not (that|it)|rule (it )?out|differential)\b",
    re.I,
)
# "how do I check?", "how can I confirm it": each cause's check.
_CHECK_WORDS = re.compile(
    r"\b(how (do|can|would|should) (i|we) (tell|know|be sure)|check|confirm|verify|make sure|tell (them|it|which) apart)\b",
    re.I,
)
# "sources?", "where is this documented?": the documents the diagnosis cites.
_SOURCE_WORDS = re.compile(
    r"\b(sources?|references?|citations?|cited|documentation|documented|docs|read more|learn more|links?)\b", re.I,
)
_INTENT_WORDS: tuple[tuple[Intent, re.Pattern[str]], ...] = (
    ("fix", _FIX_WORDS), ("more", _MORE_WORDS), ("why", _WHY_WORDS), ("alternatives", _ELSE_WORDS),
    ("check", _CHECK_WORDS), ("sources", _SOURCE_WORDS),
)
# Words that say how to ask rather than what about: they must not pick a section.
_NOT_TOPICAL = frozenset(
    "tell show mean means meaning explain please thing things know get got want need like about me my "
    "help helps helpful work works working try trying happen happens instead better good bad idea really think maybe "
    "ok okay still now".split()
)
# A builtin cause entry's wiring (the ids of its fixes, its cue words): data for the engine, not prose to quote.
_WIRING_LINE = re.compile(r"^\s*-\s*(fixes|cues):", re.I)
# A new passage inside a section: a heading, or a list item at the margin.
_PASSAGE_START = re.compile(r"^(#{1,6}\s|\d+[.)]\s|[-*+]\s)")
_ATX_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_RST_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+])\1{2,}\s*$")
_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<mark>`{3,}|~{3,})[ \t]*(?P<lang>[^\s`]*)")

MAX_QUOTE_LINES = 6
MAX_FIXES = 5  # fixes per answer; "what else?" shows the next ones
MAX_SECTION_CHARS = 1000  # a quote from a section: whole paragraphs and code blocks up to this many characters
MIN_COVERAGE = 0.5  # the share of the question's word weight (idf) a quoted passage must hold
IDF_FLOOR = 2.0  # ...and the least weight it must hold: one common word ("memory", "batch") is no overlap
RARE_IDF = 5.0  # without a corpus to weigh them, every word counts as rare (plain word overlap)
LLM_SETUP = ("set TORCHHELP_LLM_URL to an OpenAI-compatible server, "
             "or TORCHHELP_LLM=local with TORCHHELP_LOCAL_MODEL=<file.gguf>")


@dataclass(frozen=True)
class Block:
    """One piece of an answer: a heading (level 1 or 2), plain text, Markdown prose, or code."""

    kind: BlockKind
    text: str
    lang: str = ""
    level: int = 1


@dataclass(frozen=True)
class Section:
    """A document section as written (Markdown, code fences intact), with its document's failure family."""

    doc_id: str
    doc_title: str
    heading: str
    body: str
    category: str = ""


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
    """What the question asks for (one or more of fix, more, why, alternatives, check, sources), else ``lookup``.

    "Other causes?" asks past the leading cause, not for it again, and its answer holds the checks;
    "what else could it be" asks for causes, not for more fixes.
    """
    found: set[Intent] = {intent for intent, words in _INTENT_WORDS if words.search(question)}
    if "alternatives" in found:
        found -= {"why", "more", "check"}
    if "more" in found:
        found.discard("fix")
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


def split_sections(doc_id: str, doc_title: str, body: str, suffix: str = ".md", max_level: int = 6, category: str = "") -> list[Section]:
    """A document's sections at its headings (Markdown ``#`` up to ``max_level``, or reStructuredText underlines), outside code;
    each carries the document's ``category`` (its failure family)."""
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
        out.append(Section(doc_id, doc_title, "overview" if heads else "text", lead, category))
    for n, (_start, first, title) in enumerate(heads):
        stop = heads[n + 1][0] if n + 1 < len(heads) else len(lines)
        text = "\n".join(lines[first:stop]).strip()
        if text:
            out.append(Section(doc_id, doc_title, title, text, category))
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
        doc = read_user_doc(p)  # front matter dropped (its category kept); the id it derives is not used
    except (OSError, KnowledgeError):
        return []
    if builtin:
        # Our documents: sections are the `##` ones (their `###` cause and fix entries stay inside), shown as read.
        return split_sections(doc_id, doc_title, readable(doc.body), p.suffix.lower(), max_level=2, category=doc.category)
    return split_sections(doc_id, doc_title, doc.body, p.suffix.lower(), category=doc.category)


def topical_terms(question: str) -> set[str]:
    """The words of the question that name a topic (not stop words, not words about asking)."""
    return {t for t in tokenize(question) if t not in _NOT_TOPICAL}


def rank_sections(question: str, sections: Sequence[Section]) -> list[Section]:
    """Sections sharing words with the question, best first: distinct words matched (a word in the
    heading counts half again), then how often they occur (each word counted up to three times, so a
    long section does not win on length alone), then the given order."""
    terms = topical_terms(question)
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


# --------------------------------------------------------------------------- the diagnosis' own answers


def _cite(ids: Iterable[str]) -> str:
    return " ".join(f"[{i}]" for i in dict.fromkeys(ids))


def _lead(text: str) -> str:
    """The first sentence of a cause: what names it in a list."""
    return split_first(text)[0] or text


def fix_blocks(fixes: Sequence[Fix], heading: str) -> list[Block]:
    """Fixes as one list numbered 1..n: each one's title with its sources, what to do, and the code whole."""
    blocks = [Block("heading", heading)]
    for i, f in enumerate(fixes, 1):
        cite = f"  {_cite(f.sources)}" if f.sources else ""
        blocks.append(Block("heading", f"{i}. {f.title}{cite}", level=2))
        if f.detail:
            blocks.append(Block("text", f.detail))
        if f.code:
            blocks.append(Block("code", f.code.strip("\n"), "python"))
    return blocks


def other_fixes(d: Diagnosis) -> list[Fix]:
    """The fixes of the other possible causes that the diagnosis' own list does not hold (by title or by
    code), in rank order."""
    seen = {key for f in d.fixes for key in _fix_keys(f)}
    out: list[Fix] = []
    for h in d.hypotheses:
        for f in h.fixes:
            if not seen & set(_fix_keys(f)):
                seen.update(_fix_keys(f))
                out.append(f)
    return out


def _fix_keys(f: Fix) -> tuple[str, ...]:
    """What makes two fixes the same: the title, or the same code."""
    code = " ".join((f.code or "").split())
    return (f.title, code) if code else (f.title,)


def unshown(fixes: Iterable[Fix], earlier: Sequence[str]) -> list[Fix]:
    """The fixes whose titles no earlier answer of this chat holds."""
    return [f for f in fixes if not any(f.title in text for text in earlier)]


def _numbered_fixes(fixes: Sequence[Fix], heading: str) -> tuple[list[Block], list[str]]:
    """At most MAX_FIXES of them as one numbered list, saying how many more a "what else?" shows."""
    shown = list(fixes[:MAX_FIXES])
    blocks = fix_blocks(shown, heading)
    if len(fixes) > len(shown):
        blocks.append(Block("text", f'({len(fixes) - len(shown)} more: ask "what else?")'))
    return blocks, [c for f in shown for c in f.sources]


def _fix_answer(d: Diagnosis, intents: frozenset[Intent], earlier: Sequence[str]) -> tuple[list[Block], list[str]]:
    """The fixes not yet shown: for "how do I fix it" the diagnosis' own first; for "what else" (or once
    those were shown) those of the other possible causes; else one line saying there are no more."""
    own = [] if "more" in intents else unshown(d.fixes, earlier)
    if own:
        return _numbered_fixes(own, "How to fix it (the diagnosis' fixes, most likely first)")
    more = unshown(other_fixes(d), earlier)
    if more:
        return _numbered_fixes(more, "Other fixes (for the other possible causes, not shown yet)")
    total = len(d.fixes) + len(other_fixes(d))
    told = (f"This diagnosis has no fixes beyond its {total}, all shown already (in the diagnosis and this chat)" if total
            else "This diagnosis has no fixes for this failure") + \
        f"; for ideas beyond them, ask with an LLM backend ({LLM_SETUP})."
    return [Block("text", told)], []


def ranked_blocks(d: Diagnosis, heading: str, *, checks: Literal["lead", "all"], fixes: bool = False, lead_name: str = "") -> list[Block]:
    """The ranked causes (each named by its first sentence, the leading one by ``lead_name`` if given)
    with their likelihoods, their checks (the leading one's, or every one's), and optionally each one's first fix."""
    blocks = [Block("heading", heading)]
    for i, h in enumerate(d.hypotheses, 1):
        name = lead_name if i == 1 and lead_name else _lead(h.cause)
        blocks.append(Block("heading", f"{i}. {h.likelihood:.0%}: {name}", level=2))
        if h.check and (checks == "all" or i == 1):
            blocks.append(Block("text", f"Check: {h.check}"))
        if fixes:
            blocks += _first_fix_blocks(h)
    return blocks


def _first_fix_blocks(h: Hypothesis) -> list[Block]:
    """A cause's first fix: its title with its sources, and its code."""
    if not h.fixes:
        return []
    top = h.fixes[0]
    blocks = [Block("text", f"Fix: {top.title}" + (f"  {_cite(top.sources)}" if top.sources else ""))]
    return blocks + ([Block("code", top.code.strip("\n"), "python")] if top.code else [])


def why_blocks(d: Diagnosis, with_ranking: bool = True) -> list[Block]:
    """Why it failed, past the cause's first sentence: the rest of the explanation, the values read from
    the user's error, and how likely each cause is (with the leading one's check)."""
    _, rest = split_first(d.cause or d.summary or d.title)
    blocks = [Block("heading", "Why it failed")]
    if rest:
        blocks.append(Block("text", rest))
    if d.evidence:
        blocks.append(Block("heading", "What torchhelp read from your error", level=2))
        blocks += [Block("text", f"{e.kind}: {e.text}") for e in d.evidence]
    if not with_ranking:
        return blocks
    if len(d.hypotheses) > 1:
        return blocks + ranked_blocks(d, "How likely each cause is", checks="lead", lead_name="the diagnosis' cause (above)")
    return blocks + ([Block("text", _only_cause(d.hypotheses[0]))] if d.hypotheses else [])


def _only_cause(lead: Hypothesis) -> str:
    """The line for a diagnosis with a single ranked cause: how likely, and its check."""
    return f"It is the only cause the evidence points to ({lead.likelihood:.0%})" + (f"; to confirm it: {lead.check}" if lead.check else ".")


def alternative_blocks(d: Diagnosis) -> list[Block]:
    """The ranked causes with their likelihoods, the check that tells each apart, and each one's first fix."""
    if len(d.hypotheses) > 1:
        return ranked_blocks(d, "Possible causes, most likely first (and how to tell them apart)", checks="all", fixes=True)
    text = _only_cause(d.hypotheses[0]) if d.hypotheses else "torchhelp has no ranked causes for this failure; the general checks are in the fixes."
    return [Block("heading", "Other possible causes"), Block("text", text)]


def check_blocks(d: Diagnosis) -> list[Block]:
    """How to confirm the cause: every ranked cause's check, most likely first."""
    if any(h.check for h in d.hypotheses):
        return ranked_blocks(d, "How to confirm it (each cause's check, most likely first)", checks="all")
    return [Block("heading", "How to confirm it"),
            Block("text", "The diagnosis names no check beyond the values it read from your error (ask \"why?\" to see them).")]


def source_blocks(d: Diagnosis) -> list[Block]:
    """The documents the diagnosis cites, with where each one is."""
    if not d.sources:
        return [Block("text", "This diagnosis cites no knowledge document.")]
    return [Block("heading", "Where this comes from (the documents the diagnosis cites)"),
            *(Block("text", f"[{s.id}] {s.title} ({s.path})") for s in d.sources)]


def covers_line(d: Diagnosis) -> Block:
    """One honest line for a question the diagnosis and its knowledge do not answer."""
    offers = ['why it failed ("why?")']
    fixes = len(d.fixes) + len(other_fixes(d))
    if fixes:
        offers.append(f'{fixes} fix{"es" if fixes != 1 else ""} ("how do I fix it?", "what else can I try?")')
    if any(h.check for h in d.hypotheses):
        offers.append(f'{len(d.hypotheses)} ranked cause{"s" if len(d.hypotheses) != 1 else ""} with checks ("how do I check?")')
    offers.append('its sources ("sources?")')
    return Block("text", f"Nothing in this diagnosis or its knowledge answers that question. Without an LLM, torchhelp can tell "
                         f"{', '.join(offers[:-1])} and {offers[-1]}, and what a term in its documents means. "
                         f"An open question like this needs an LLM backend: {LLM_SETUP}.")


# --------------------------------------------------------------------------- a short quote from the family's knowledge


@dataclass(frozen=True)
class Excerpt:
    """One passage of a section (a paragraph, a list item, or a ``###`` entry, with its code), as blocks."""

    section: Section
    index: int
    blocks: tuple[Block, ...]

    @property
    def lines(self) -> int:
        return sum(b.text.count("\n") + 1 for b in self.blocks)

    @property
    def chars(self) -> int:
        return sum(len(b.text) for b in self.blocks)


def in_family(s: Section, d: Diagnosis) -> bool:
    """Whether a section may answer about this diagnosis: a document of the same failure family, or a team runbook."""
    return s.doc_id.startswith(USER_DOC_PREFIX) or (bool(s.category) and s.category == d.category)


def _passage_texts(markdown: str) -> list[str]:
    """Split prose at blank lines, headings and list items at the margin; a ``###`` entry keeps its bullets.
    A builtin entry's wiring lines are dropped."""
    out: list[list[str]] = []
    for line in markdown.split("\n"):
        if _WIRING_LINE.match(line):
            continue
        current = out[-1] if out else None
        if not line.strip():
            if current:
                out.append([])
            continue
        starts = _PASSAGE_START.match(line) and not (current and current[0].startswith("#") and not line.startswith("#"))
        if current is None or (starts and current):
            out.append([line])
        else:
            current.append(line)
    return ["\n".join(p) for p in out if p]


def excerpts(s: Section) -> list[Excerpt]:
    """A section's passages in order; a code block belongs to the passage it follows."""
    groups: list[list[Block]] = []
    for b in markdown_blocks(s.body):
        if b.kind == "code":
            if groups:
                groups[-1].append(b)
            else:
                groups.append([b])
            continue
        groups += [[Block("markdown", _dedent_common(t))] for t in _passage_texts(b.text)]
    return [Excerpt(s, i, tuple(g)) for i, g in enumerate(groups)]


def _plain_overlap(term: str) -> float:
    """Without a retrieval index to weigh them, every word counts as rare: plain word overlap."""
    return RARE_IDF


def _weight(terms: set[str], p: Excerpt, idf: Idf) -> float:
    """The idf weight of the question's words that this passage (or its section's heading) holds."""
    words = set(tokenize(p.section.heading)).union(*(tokenize(b.text) for b in p.blocks))
    return sum(idf(t) for t in terms & words)


def best_passage(question: str, sections: Sequence[Section], idf: Idf) -> Excerpt | None:
    """The passage sharing the most idf weight with the question, if it holds at least half of the
    question's weight and no less than the floor; ties go to the earlier section and passage."""
    terms = topical_terms(question)
    total = sum(idf(t) for t in terms)
    best: tuple[float, Excerpt] | None = None
    for s in sections:
        for p in excerpts(s):
            w = _weight(terms, p, idf)
            if best is None or w > best[0]:
                best = (w, p)
    if best is None or best[0] < IDF_FLOOR or best[0] < MIN_COVERAGE * total:
        return None
    return best[1]


def _within(blocks: Sequence[Block], lines: int, chars: int) -> list[Block]:
    """Whole blocks within the budget; a first prose block longer than it keeps its first lines."""
    out: list[Block] = []
    for b in blocks:
        n = b.text.count("\n") + 1
        if n <= lines and len(b.text) <= chars:
            out.append(b)
            lines, chars = lines - n, chars - len(b.text)
        elif not out and b.kind == "markdown":
            out.append(Block("markdown", "\n".join(b.text.split("\n")[:lines])))
            break
        else:
            break
    return out


def quote_blocks(p: Excerpt, path_hint: str = "") -> list[Block]:
    """The passage that answers, quoted briefly (at most MAX_QUOTE_LINES lines) under its citation,
    with where the rest of its section is."""
    s = p.section
    shown = _within(p.blocks, MAX_QUOTE_LINES, MAX_SECTION_CHARS)
    blocks = [Block("heading", f"[{s.doc_id}] {s.doc_title} › {s.heading}"), *shown]
    if sum(len(b.text) for b in shown) < len(s.body.strip()):
        blocks.append(Block("text", f"(the section goes on{': ' + path_hint if path_hint else ''})"))
    return blocks


# --------------------------------------------------------------------------- the answer


def answer_offline(
    question: str, d: Diagnosis, sections: Sequence[Section], paths: dict[str, str] | None = None,
    idf: Idf | None = None, earlier: Sequence[str] = (),
) -> OfflineAnswer:
    """Answer ``question`` from the diagnosis, or from the candidate ``sections`` (best retrieved first).

    ``idf`` weighs the question's words (the retrieval index's; without it, over ``sections``);
    ``earlier`` holds this chat's earlier answers, so fixes already shown are not shown again.
    """
    intents = question_intents(question)
    blocks: list[Block] = []
    cited: list[str] = []
    source_ids = [s.id for s in d.sources]
    if "why" in intents:
        blocks += why_blocks(d, with_ranking=not intents & {"check", "alternatives"})
        cited += source_ids
    if "alternatives" in intents:
        blocks += alternative_blocks(d)
        cited += [c for h in d.hypotheses for c in (h.fixes[0].sources if h.fixes else ())]
    elif "check" in intents:
        blocks += check_blocks(d)
        cited += source_ids
    if intents & {"fix", "more"}:
        more, ids = _fix_answer(d, intents, earlier)
        blocks += more
        cited += ids
    if "sources" in intents:
        blocks += source_blocks(d)
        cited += source_ids
    if "lookup" in intents:
        family = [s for s in sections if in_family(s, d)]
        found = best_passage(question, family, idf or _plain_overlap)
        if found is not None:
            blocks += quote_blocks(found, (paths or {}).get(found.section.doc_id, ""))
            cited.append(found.section.doc_id)
        else:
            blocks.append(covers_line(d))
            cited += source_ids  # pointers for the next question, not support for a claim
    cited = list(dict.fromkeys(cited))
    if cited:
        blocks.append(Block("text", "Sources: " + _cite(cited)))
    return OfflineAnswer(tuple(blocks), tuple(cited), frozenset(intents))
