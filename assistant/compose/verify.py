"""Verification of an LLM reply against the evidence: it is used only if every check passes.

Checks: the reply parses as the requested JSON and fits the answer schema (pydantic: a number
where a list belongs is a rejection, not a crash); its citations are among the passages given;
it keeps the deterministic category whenever a rule or a retrieved passage supports that
category; it proposes no risky action (running shell commands, deleting files, installing
packages, fetching URLs) that the deterministic answer did not propose, in code or in prose; it
keeps at least one of the specific values the rule read (its typed facts) when the deterministic
answer does; it states no size, shape, count or index that the failure does not contain; and it
proposes nothing the diagnosis rules out, in code, in a fix's prose or in the cause (moving a model
to a device the probes show it already is on, or to the CPU where a mismatch is fixed the other
way; allocator settings when the numbers rule fragmentation out or the failure is no OOM; CUDA
calls when CUDA is not available): :mod:`assistant.compose.claims`.

Every field has a generous length bound (several times what the prompt asks for): an accepted
reply is small, so nothing after verification (sentence splitting, highlighting, rendering) ever
works on 32,000 characters of one field. Every pattern run on the reply is linear.

Rejection reasons are shown to the user, so they never quote the reply's own text beyond ids
that look like ids: a hostile reply must not reach the screen through its rejection.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Annotated, Any
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator

from assistant.compose.actions import Action, find_actions, runs_installer, url_allowed, url_targets
from assistant.compose.claims import known_numbers, reply_proposals, ruled_out_action, unknown_number
from assistant.types import CATEGORIES, Diagnosis, Evidence, Failure, Passage, RuleHit

# Bounds on an accepted reply's fields: about five times what the prompt and reply_schema ask for
# (a 700-token reply is about 3,000 characters in all), so only a runaway or hostile reply meets them.
MAX_TITLE = 300
MAX_CAUSE = 2_000
MAX_DETAIL = 1_500
MAX_CODE = 2_000
MAX_CODE_LINES = 60  # a terminal prints code line by line: thousands of short lines cost more than their characters
MAX_FIXES = 8
MAX_IDS = 12
_Id = Field(max_length=120)

_SAFE_ID = re.compile(r"[\w:.#/-]{1,80}")
_ACTION_WORDS = {"shell": "runs shell commands", "delete": "deletes files", "install": "installs packages", "fetch": "fetches URLs"}


class _Fix(BaseModel):
    model_config = ConfigDict(extra="ignore")
    title: StrictStr = Field(max_length=MAX_TITLE)
    detail: StrictStr | None = Field(default=None, max_length=MAX_DETAIL)
    code: StrictStr | None = Field(default=None, max_length=MAX_CODE)
    sources: list[Annotated[StrictStr, _Id]] = Field(default=[], max_length=MAX_IDS)

    @field_validator("code")
    @classmethod
    def _few_lines(cls, code: str | None) -> str | None:
        if code is not None and code.count("\n") >= MAX_CODE_LINES:
            raise ValueError(f"code should have at most {MAX_CODE_LINES} lines")
        return code


class ReplyModel(BaseModel):
    """The answer object an LLM must write (the same shape the prompt and reply_schema ask for)."""

    model_config = ConfigDict(extra="ignore")
    category: Annotated[StrictStr, _Id]
    title: StrictStr | None = Field(default=None, max_length=MAX_TITLE)
    cause: StrictStr = Field(max_length=MAX_CAUSE)
    fixes: list[_Fix] = Field(max_length=MAX_FIXES)
    citations: list[Annotated[StrictStr, _Id]] = Field(default=[], max_length=MAX_IDS)


@dataclass(frozen=True)
class Verdict:
    """The outcome of verification: the parsed reply, or why it was rejected."""

    ok: bool
    reason: str = ""
    reply: dict[str, Any] | None = field(default=None)


def _fenced_object(text: str) -> str | None:
    """The ``{...}`` inside the first code fence that opens with one (```` ```json {...} ``` ````), or None.

    Read with str.find, not a lazy ``.*?`` pattern: tried from every fence of a reply made of fences,
    that pattern rescanned the rest of the reply each time (0.3 CPU s on 32,000 characters).
    """
    opening = text.find("```")
    while opening >= 0:
        body = opening + 3
        if text.startswith("json", body):
            body += 4
        while body < len(text) and text[body].isspace():
            body += 1
        if text.startswith("{", body):
            break
        opening = text.find("```", opening + 3)
    else:
        return None
    # The first closing fence that follows a "}" (spaces between allowed): where the object ends.
    close = text.find("```", body + 1)
    while close >= 0:
        end = close
        while end > body and text[end - 1].isspace():
            end -= 1
        if text[end - 1] == "}":
            return text[body:end]
        close = text.find("```", close + 3)
    return None


def _balanced_object(text: str) -> str | None:
    """The text from the first ``{`` to the brace that closes it (linear), or None."""
    start = text.find("{")
    if start < 0:
        return None
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return None


def parse_reply(text: str) -> dict[str, Any]:
    """Extract the JSON object from a reply (bare, in a ``` fence, or surrounded by prose)."""
    for c in (_fenced_object(text), _balanced_object(text)):
        if c is None:
            continue
        try:
            data = json.loads(c)
        except (ValueError, RecursionError):  # RecursionError: thousands of nested brackets
            continue
        if isinstance(data, dict):
            return data
    raise ValueError("no JSON object in the reply")


def _fact_values(hit: RuleHit) -> set[str]:
    """The specific values a rule read (its typed facts), as they would be written in prose."""
    f = hit.facts
    values = {str(int(v)) if float(v).is_integer() else str(v) for v in f.numbers.values() if abs(float(v)) >= 2}
    # Byte counts as the error and every writer show them: 28336046735 is "26.39 GiB".
    values |= {_as_size(v) for k, v in f.numbers.items() if k.endswith("bytes") and v >= 1 << 20}
    values |= {str(n) for shape in f.shapes for n in shape if n >= 2}
    values |= {v for v in (f.layer, f.argument, f.call) if v}
    values |= set(f.names) | set(f.devices) | set(f.dtypes)
    return {v for v in values if len(v) >= 2}


def _as_size(n: float) -> str:
    """Bytes as PyTorch's allocator message writes them (``26.39 GiB``, ``128.00 MiB``)."""
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.2f} MiB"


def _keeps(text: str, values: set[str]) -> bool:
    return any(re.search(rf"(?<![\w.]){re.escape(v)}(?![\w])", text) for v in values)


def _dropped_facts(reply: dict[str, Any], hit: RuleHit | None, det: Diagnosis) -> str | None:
    """A reply must keep at least one of the specific values the rule read when the deterministic
    answer does: a generic essay is not an improvement on a specific answer (but an answer that is
    itself general asks no more of the reply)."""
    if hit is None:
        return None
    values = _fact_values(hit)
    if not values:
        return None
    own = " ".join([det.cause] + [f"{f.title} {f.detail} {f.code or ''}" for f in det.fixes])
    if not _keeps(own, values):
        return None
    text = " ".join([str(reply.get("cause", ""))] + [f"{f.get('title', '')} {f.get('detail', '')} {f.get('code') or ''}" for f in reply.get("fixes", []) if isinstance(f, dict)])
    if _keeps(text, values):
        return None
    shown = ", ".join(sorted(values)[:5])
    return f"it drops every specific value the rule read from the error ({shown})"


def _contradictions(texts: Sequence[tuple[str, bool]], failure: Failure, evidence: Evidence, hit: RuleHit | None, det: Diagnosis,
                    passages: Sequence[Passage]) -> str | None:
    """A claim or proposal of the reply that the failure contradicts (numbers it does not contain,
    actions the diagnosis rules out), or None."""
    problem = ruled_out_action(reply_proposals(texts), failure, evidence, hit, det)
    if problem:
        return problem
    known = known_numbers(failure, evidence, hit, det, passages)
    claims = "\n".join(t for t, code in texts[:1])  # title and cause
    prose = "\n".join(t for t, code in texts[1:] if not code)  # the fixes' titles and details
    number = unknown_number(claims, prose, known)
    if number:
        return f"it states {number} that appears nowhere in the error, the evidence or the cited passages"
    return None


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
    checkpoint key or a path from the log: data, not a command it proposes). An action a fix proposes outside any
    literal may carry a quoted argument (``pip install "numpy>=2"``): that same field's action with its argument is
    allowed too; an action found only inside quotes never is."""
    allowed: set[Action] = set()
    for text, code in _fix_texts(det.fixes):
        bare = _LITERAL.sub("''", text)
        outside = find_actions(bare, code=code)
        kinds = {a.kind for a in outside} | ({"install"} if runs_installer(bare) else set())
        allowed.update(outside)
        allowed.update(a for a in find_actions(text, code=code) if a.kind in kinds)
    return allowed


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


def verify(text: str, passages: Sequence[Passage], hit: RuleHit | None, evidence: Evidence, deterministic: Diagnosis,
           failure: Failure | None = None) -> Verdict:
    """Check a reply; any failure rejects it with a reason a user can read. ``failure`` is what the
    user's text said (its numbers may be stated); without it, the deterministic answer's error line stands for it."""
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
    failure = failure or Failure(exc_type=None, message=deterministic.error or "", text=deterministic.error or "")
    cited_passages = [p for p in passages if p.doc_id in set(cited)]
    problem = _contradictions(texts, failure, evidence, hit, deterministic, cited_passages) or _dropped_facts(reply, hit, deterministic)
    if problem:
        return Verdict(False, problem)
    return Verdict(True, reply=reply)
