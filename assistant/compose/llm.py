"""Let an LLM write the answer, then keep it only if it survives verification.

Whatever goes wrong — the backend is missing, offline mode forbids it, the server times out, the
reply is not JSON, it cites documents that were not retrieved, it contradicts a confident rule —
the user gets the deterministic diagnosis and a one-line note saying which backend was tried and
why its answer was not used.

Nothing unverified is shown: no caller receives draft text (the doors print the verified answer
only). A draft that might obey instructions injected into the log must not reach the terminal even
for a moment.
"""

from __future__ import annotations

from dataclasses import replace
from collections.abc import Sequence

from assistant.backends.base import get_backend
from assistant.compose.deterministic import sources_from, summary_of
from assistant.compose.notes import backend_fallback_note
from assistant.compose.prompts import build_messages, reply_schema
from assistant.compose.verify import verify
from assistant.errors import BackendError
from assistant.probes.redact import redact_text
from assistant.types import Diagnosis, Evidence, Failure, Fix, Passage, RuleHit

NO_RULE_CONFIDENCE_CAP = 0.6
MAX_REPLY_TOKENS = 700
MAX_NOTE_REASON = 200


def _one_line(reason: object) -> str:
    """A reason as one short line (reasons can carry a server's text, already sanitised by the backend)."""
    text = " ".join(str(reason).split())
    text = "".join(ch for ch in text if ch.isprintable())
    return text if len(text) <= MAX_NOTE_REASON else text[: MAX_NOTE_REASON - 1] + "…"


def _fallback(det: Diagnosis, reason: str) -> Diagnosis:
    """The deterministic diagnosis, with the note saying why the backend's answer is not shown."""
    return replace(det, notes=tuple(det.notes) + (backend_fallback_note(reason),))


def llm_compose(
    name: str, det: Diagnosis, failure: Failure, evidence: Evidence, passages: Sequence[Passage], hit: RuleHit | None, settings,  # type: ignore[no-untyped-def]
) -> Diagnosis:
    """The verified LLM diagnosis, or the deterministic one with a note."""
    try:
        backend = get_backend(name, settings)
    except BackendError as exc:
        return _fallback(det, f"LLM backend '{_one_line(name)}' not used: {_one_line(exc)}")
    messages = build_messages(failure, hit, evidence, passages, det)
    if backend.remote:
        # Secrets never leave the machine: tracebacks and probe facts can carry keys and tokens.
        messages = [{"role": m["role"], "content": redact_text(m["content"])} for m in messages]
    # No token sink: the backend returns the whole reply (a backend may still stream on the wire into
    # its own buffer), and only a verified reply reaches any door.
    try:
        text = backend.complete(messages, json_mode=True, max_tokens=MAX_REPLY_TOKENS, schema=reply_schema(passages, hit, det))
    except BackendError as exc:
        return _fallback(det, f"LLM backend '{_one_line(name)}' gave no usable answer ({_one_line(exc)})")
    verdict = verify(text, passages, hit, evidence, det, failure)
    if not verdict.ok or verdict.reply is None:
        return _fallback(det, f"The answer from '{_one_line(name)}' was discarded: {_one_line(verdict.reason)}")
    reply = verdict.reply
    allowed = {p.doc_id for p in passages}
    fixes = tuple(
        Fix(str(f.get("title", "")).strip(), str(f.get("detail") or "").strip(), (str(f["code"]) if f.get("code") else None),
            tuple(s for s in (f.get("sources") or []) if s in allowed))
        for f in reply["fixes"]
    )
    confidence = det.confidence if hit is not None else min(det.confidence + 0.2, NO_RULE_CONFIDENCE_CAP)
    return replace(
        det, category=reply["category"], sources=sources_from(passages, keep=[s for f in fixes for s in f.sources]), title=str(reply.get("title") or det.title).strip(), cause=reply["cause"].strip(),
        summary=summary_of(str(reply.get("title") or det.title).strip(), reply["cause"].strip()),
        fixes=fixes, confidence=confidence, backend=name,
        notes=tuple(det.notes) + (f"Written by the '{name}' backend and verified against the evidence and retrieved sources.",),
    )
