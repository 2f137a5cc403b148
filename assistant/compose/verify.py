"""Verification of an LLM reply against the evidence: it is used only if every check passes.

Checks: the reply parses as the requested JSON and fits the answer schema (pydantic: a number
where a list belongs is a rejection, not a crash); its citations are among the passages given;
it keeps the deterministic category whenever a rule or a retrieved passage supports that
category; it proposes no risky action (running shell commands, deleting files, installing
packages, fetching URLs) that the deterministic answer did not propose, in code or in prose; it
keeps at least one of the specific values the rule read (its typed facts); and no fix contradicts
the evidence (moving a model to a device the probes show it already is on; allocator settings
when the numbers rule fragmentation out; CUDA calls when CUDA is not available).

Rejection reasons are shown to the user, so they never quote the reply's own text beyond ids
that look like ids: a hostile reply must not reach the screen through its rejection.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, StrictStr, ValidationError

from assistant.compose.actions import Action, find_actions, url_allowed, url_targets
from assistant.types import CATEGORIES, Diagnosis, Evidence, Passage, RuleHit

_MOVE_MODEL = re.compile(r"\b(?:model|net|module)\w*(?:\.\w+)*\s*(?:=\s*\w+\s*)?\.\s*(?:to\(\s*['\"]?(cuda(?::\d)?|cpu)|(cuda|cpu)\(\))", re.I)


_SAFE_ID = re.compile(r"[\w:.#/-]{1,80}")
_ACTION_WORDS = {"shell": "runs shell commands", "delete": "deletes files", "install": "installs packages", "fetch": "fetches URLs"}


class _Fix(BaseModel):
    model_config = ConfigDict(extra="ignore")
    title: StrictStr
    detail: StrictStr | None = None
    code: StrictStr | None = None
    sources: list[StrictStr] = []


class ReplyModel(BaseModel):
    """The answer object an LLM must write (the same shape the prompt and reply_schema ask for)."""

    model_config = ConfigDict(extra="ignore")
    category: StrictStr
    title: StrictStr | None = None
    cause: StrictStr
    fixes: list[_Fix]
    citations: list[StrictStr] = []


@dataclass(frozen=True)
class Verdict:
    """The outcome of verification: the parsed reply, or why it was rejected."""

    ok: bool
    reason: str = ""
    reply: dict[str, Any] | None = field(default=None)


def parse_reply(text: str) -> dict[str, Any]:
    """Extract the JSON object from a reply (bare, in a ``` fence, or surrounded by prose)."""
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S)
    candidates = [fenced.group(1)] if fenced else []
    start = text.find("{")
    if start >= 0:
        depth = 0
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    candidates.append(text[start : i + 1])
                    break
    for c in candidates:
        try:
            data = json.loads(c)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    raise ValueError("no JSON object in the reply")


def _contradictions(reply: dict[str, Any], hit: RuleHit | None, evidence: Evidence, deterministic: Diagnosis) -> str | None:
    fixes_text = "\n".join(f"{f.get('title', '')} {f.get('detail', '')} {f.get('code') or ''}" for f in reply.get("fixes", []) if isinstance(f, dict))
    for m in _MOVE_MODEL.finditer(fixes_text):
        target = (m.group(1) or m.group(2) or "").lower()
        for mod in evidence.modules:
            devices = {d.split(":")[0] for d in mod.param_devices}
            if devices and devices == {target.split(":")[0]}:
                return f"a fix moves the model to {target}, but the probes show `{mod.name}` already has all parameters on {', '.join(mod.param_devices)}"
    if "expandable_segments" in fixes_text and hit is not None and "fragmentation_ruled_out" in hit.facts.flags:
        return "a fix recommends expandable_segments, but the allocator's numbers show fragmentation is not the problem"
    if re.search(r"\.cuda\(\)|to\(['\"]cuda", fixes_text) and (evidence.env.get("cuda_available") is False or (hit and hit.category == "cuda_unavailable")):
        return "a fix moves work to CUDA, but CUDA is not available in this environment"
    return None


def _fact_values(hit: RuleHit) -> set[str]:
    """The specific values a rule read (its typed facts), as they would be written in prose."""
    f = hit.facts
    values = {str(int(v)) if float(v).is_integer() else str(v) for v in f.numbers.values() if abs(float(v)) >= 2}
    values |= {str(n) for shape in f.shapes for n in shape if n >= 2}
    values |= {v for v in (f.layer, f.argument, f.call) if v}
    values |= set(f.names) | set(f.devices) | set(f.dtypes)
    return {v for v in values if len(v) >= 2}


def _dropped_facts(reply: dict[str, Any], hit: RuleHit | None) -> str | None:
    """A reply must keep at least one of the specific values the rule read: a generic essay is not
    an improvement on a specific deterministic answer."""
    if hit is None:
        return None
    values = _fact_values(hit)
    if not values:
        return None
    text = " ".join([str(reply.get("cause", ""))] + [f"{f.get('title', '')} {f.get('detail', '')} {f.get('code') or ''}" for f in reply.get("fixes", []) if isinstance(f, dict)])
    if any(re.search(rf"(?<![\w.]){re.escape(v)}(?![\w])", text) for v in values):
        return None
    shown = ", ".join(sorted(values)[:5])
    return f"it drops every specific value the rule read from the error ({shown})"


def _shown_ids(ids: Iterable[str]) -> str:
    """Ids for a message: only those that look like ids (a hostile reply chooses these strings)."""
    ids = sorted(set(ids))
    safe = [i for i in ids if _SAFE_ID.fullmatch(i)]
    rest = len(ids) - len(safe)
    return ", ".join(safe[:5]) + (f" (+{rest} malformed)" if rest else "")


def protected_category(det: Diagnosis, hit: RuleHit | None, passages: Sequence[Passage]) -> str | None:
    """Why the deterministic category may not be changed (a rule hit, or a retrieved passage of that category), or None."""
    if hit is not None:
        return f"the rule {hit.rule} ({det.category}, confidence {hit.confidence:.2f})"
    support = sorted({p.doc_id for p in passages if p.category == det.category})
    if support and det.category != "unknown":
        return f"the retrieved passages ({_shown_ids(support[:2])}, category {det.category})"
    return None


def _fix_texts(fixes: Iterable[Any]) -> list[tuple[str, bool]]:
    """(text, is_code) pairs of fixes given as dicts or Fix objects."""
    out: list[tuple[str, bool]] = []
    for f in fixes:
        get = f.get if isinstance(f, dict) else (lambda k, f=f: getattr(f, k, None))
        out.append((f"{get('title') or ''}\n{get('detail') or ''}", False))
        if get("code"):
            out.append((str(get("code")), True))
    return out


_LITERAL = re.compile(r"'[^'\n]{0,300}'|\"[^\"\n]{0,300}\"")


def allowed_actions(det: Diagnosis) -> set[Action]:
    """The risky actions the deterministic answer itself proposes: in its fixes only (the cause and
    evidence quote the log, which is untrusted), and outside string literals (a fix can quote a
    checkpoint key or a path from the log: data, not a command it proposes)."""
    return {a for text, code in _fix_texts(det.fixes) for a in find_actions(_LITERAL.sub("''", text), code=code)}


def unproposed_actions(texts: Sequence[tuple[str, bool]], det: Diagnosis, passages: Sequence[Passage], cited: Iterable[str]) -> list[Action]:
    """Risky actions in ``texts`` that the deterministic answer did not propose. URLs are also
    allowed when a cited passage carries them."""
    allowed = allowed_actions(det)
    cited = set(cited)
    allowed_urls = {a.target for a in allowed if a.label == "URL"}
    for p in passages:
        if p.doc_id in cited:
            allowed_urls |= url_targets(p.text)
    bad = []
    for text, code in texts:
        for a in find_actions(text, code=code):
            if a in allowed or (a.label == "URL" and url_allowed(a.target, allowed_urls)):
                continue
            bad.append(a)
    return sorted(bad, key=lambda a: (a.kind, a.label))


def describe_actions(bad: Sequence[Action]) -> str:
    """A short reason naming the kinds of action, never their text."""
    kinds = []
    for a in bad:
        words = f"{_ACTION_WORDS[a.kind]} ({a.label})"
        if words not in kinds:
            kinds.append(words)
    return "it " + "; ".join(kinds[:3]) + ", which the deterministic answer does not propose"


def screen_free_text(reply: str, det: Diagnosis, passages: Sequence[Passage]) -> str | None:
    """For free-text replies (follow-up chat): the reason to withhold one that proposes risky
    actions the diagnosis did not, or None. Citations are checked by the caller."""
    bad = unproposed_actions([(reply, True)], det, passages, {p.doc_id for p in passages if f"[{p.doc_id}]" in reply})
    return describe_actions(bad) if bad else None


def verify(text: str, passages: Sequence[Passage], hit: RuleHit | None, evidence: Evidence, deterministic: Diagnosis) -> Verdict:
    """Check a reply; any failure rejects it with a reason a user can read."""
    try:
        raw = parse_reply(text)
    except ValueError as exc:
        return Verdict(False, f"the reply is not valid JSON ({exc})")
    try:
        model = ReplyModel.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "reply"
        return Verdict(False, f"the reply does not follow the answer schema ({where}: {err.get('msg', 'invalid')})"[:200])
    reply = model.model_dump()
    category = model.category
    if category not in CATEGORIES:
        return Verdict(False, f"unknown category {category[:40]!r}")
    if len(model.cause.strip()) < 20:
        return Verdict(False, "the reply has no usable cause")
    if not model.fixes or not all(f.title.strip() for f in model.fixes):
        return Verdict(False, "the reply has no usable fixes")
    allowed = {p.doc_id for p in passages}
    cited = [c for f in model.fixes for c in f.sources] + list(model.citations)
    if not cited:
        return Verdict(False, "the reply cites no passage")
    bad = set(cited) - allowed
    if bad:
        return Verdict(False, f"it cites sources that were not retrieved: {_shown_ids(bad)}")
    if category != deterministic.category:
        support = protected_category(deterministic, hit, passages)
        if support:
            return Verdict(False, f"its category {category} contradicts {support}")
    texts = [(f"{model.title or ''}\n{model.cause}", False)] + _fix_texts(reply["fixes"])
    risky = unproposed_actions(texts, deterministic, passages, cited)
    if risky:
        return Verdict(False, describe_actions(risky))
    problem = _contradictions(reply, hit, evidence, deterministic) or _dropped_facts(reply, hit)
    if problem:
        return Verdict(False, problem)
    return Verdict(True, reply=reply)
