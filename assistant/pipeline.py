"""diagnose(): the only place where the stages meet.

    text ─► parse ─► Failure ─► rules ─► RuleHit ─► retrieve ─► Passages ─► compose ─► Diagnosis
                         evidence (probes) ──┘                       (LLM, verified) ─┘
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any, Sequence

from assistant import rules
from assistant.compose.deterministic import compose_from_rule, compose_from_signature, compose_unknown
from assistant.errors import KnowledgeError
from assistant.parse.reader import InputText, read_bytes, read_text
from assistant.parse.traceback import parse_failure
from assistant.settings import Settings, load_settings
from assistant.types import CATEGORIES, Diagnosis, Evidence, Failure, Fix, Passage, RuleHit

log = logging.getLogger(__name__)

CONFIDENT_RULE = 0.9  # at or above: the rule's documents are known, dense query embedding is skipped (policy "auto")
# Categories that, raised inside a DataLoader worker, are really "your Dataset code failed".
_WORKER_GENERIC = {"python_error", "index_error", "environment_error", "unknown", "shape_mismatch", "dtype_mismatch", "serialization_error"}


def analyse(text: str | bytes, settings: Settings | None = None) -> tuple[Failure, InputText]:
    """Read and parse input text (bytes are decoded best-effort; huge input is windowed)."""
    settings = settings or load_settings()
    inp = read_text(text, settings.window_bytes) if isinstance(text, str) else read_bytes(text)
    return parse_failure(inp.text), inp


def adjust_for_wrapper(failure: Failure, hit: RuleHit | None) -> RuleHit | None:
    """An ordinary error raised inside a DataLoader worker is a Dataset bug: say so and how to debug it."""
    wrapper = failure.wrapper or ""
    if not wrapper.startswith("DataLoader worker"):
        return hit
    inner_category = hit.category if hit else "unknown"
    if inner_category not in _WORKER_GENERIC:
        return hit
    inner = f"{failure.exc_type or 'An error'}: {failure.message.splitlines()[0] if failure.message else ''}".strip()
    cause = (f"The error was raised inside {wrapper} — while loading a sample in your Dataset's __getitem__, a transform or the collate_fn — "
             f"and re-raised in the main process. The original error is `{inner[:300]}`." + (f" {hit.cause}" if hit else ""))
    fixes = [Fix("Reproduce it without workers", "With num_workers=0 the same code runs in the main process: the traceback points straight at the line, and a debugger works.",
                 "loader = DataLoader(dataset, batch_size=..., num_workers=0)\nsample = dataset[i]  # call __getitem__ directly for the failing index", ("dataloader-worker-crash",))]
    if hit:
        fixes.extend(hit.fixes)
    docs = ("dataloader-worker-crash",) + tuple(d for d in (hit.doc_ids if hit else ()) if d != "dataloader-worker-crash")
    title = "Error inside a DataLoader worker" + (f": {hit.title}" if hit else "")
    return RuleHit("data.worker_exception", "dataloader_error", title, cause, tuple(fixes), hit.facts if hit else (), docs, min(0.9, hit.confidence if hit else 0.8), "dataloader worker")


def build_query(failure: Failure, hit: RuleHit | None) -> str:
    """The retrieval query: the error line(s), kernel assertions, and the rule's own words."""
    parts = [failure.exc_type or "", failure.message[:500]]
    parts.extend(f"{a.kernel} Assertion {a.condition}" for a in failure.cuda_asserts[:2])
    parts.extend(failure.nccl_lines[:2])
    if failure.wrapper:
        parts.append(failure.wrapper)
    if hit:
        parts.append(hit.title)
        parts.append(hit.query_hint)
    return "\n".join(p for p in parts if p)


def retrieve(failure: Failure, hit: RuleHit | None, settings: Settings, notes: list[str]) -> tuple[list[Passage], Any]:
    """Hybrid retrieval; falls back to lexical-only (with a note) when dense search is unavailable."""
    from assistant.kb.retrieve import get_retriever

    query = build_query(failure, hit)
    try:
        retriever = get_retriever(settings.home, dense=settings.dense, encoder_kind=settings.encoder)
    except KnowledgeError as exc:
        if not settings.dense:
            raise
        notes.append(f"Dense retrieval unavailable ({exc}); used lexical retrieval only.")
        retriever = get_retriever(settings.home, dense=False)
    hints = hit.doc_ids if hit else ()
    confident = hit is not None and hit.confidence >= CONFIDENT_RULE
    use_dense = settings.dense_policy == "always" or not confident
    passages = retriever.search(query, k=settings.top_k, hint_docs=hints, signature_text=failure.search_text, must_include=hints, use_dense=use_dense)
    return passages, retriever


def diagnose(
    text: str | bytes,
    *,
    evidence: Evidence | None = None,
    settings: Settings | None = None,
    notes: Sequence[str] = (),
    llm: str | None = None,
    on_token: Any = None,
    **overrides: Any,
) -> Diagnosis:
    """Diagnose a PyTorch failure from its text (a traceback, a log, or a bare error line).

    ``evidence`` carries live probe facts (from ``torchhelp run``); ``llm`` picks a backend
    (``none``, ``local``, ``openai``…; default from settings); other keyword overrides are
    settings fields (e.g. ``dense=False``, ``top_k=3``); ``on_token`` receives streamed LLM text.
    Raises ``InputError`` for empty input.
    """
    t0 = time.perf_counter()
    settings = (settings or load_settings()).with_overrides(**overrides, llm=llm)
    evidence = evidence or Evidence()
    failure, inp = analyse(text, settings)
    t_parse = time.perf_counter()
    hit = rules.with_evidence(adjust_for_wrapper(failure, rules.match(failure, evidence)), failure, evidence)
    t_rules = time.perf_counter()
    all_notes = list(inp.notes) + list(notes) + list(evidence.notes)
    passages, retriever = retrieve(failure, hit, settings, all_notes)
    t_retrieve = time.perf_counter()
    if hit is not None:
        diagnosis = compose_from_rule(failure, evidence, hit, passages, all_notes)
    else:
        sig_docs = [d for d in retriever.signature_hits(failure.search_text) if retriever.docs[d].category in CATEGORIES]
        if sig_docs:
            extra = retriever.search(build_query(failure, None), k=settings.top_k, must_include=sig_docs[:1], signature_text=failure.search_text)
            merged = {p.id: p for p in passages + extra}
            diagnosis = compose_from_signature(failure, evidence, sig_docs[0], list(merged.values()), all_notes)
        else:
            diagnosis = compose_unknown(failure, evidence, passages, all_notes)
    t_compose = time.perf_counter()
    from assistant.backends.select import maybe_llm_compose

    diagnosis = maybe_llm_compose(diagnosis, failure, evidence, passages, hit, settings, on_token=on_token)
    t_end = time.perf_counter()
    timings = {
        "parse": (t_parse - t0) * 1000, "rules": (t_rules - t_parse) * 1000, "retrieve": (t_retrieve - t_rules) * 1000,
        "compose": (t_compose - t_retrieve) * 1000, "llm": (t_end - t_compose) * 1000, "total": (t_end - t0) * 1000,
    }
    return replace(diagnosis, timings_ms={k: round(v, 2) for k, v in timings.items()})
