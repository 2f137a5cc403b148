"""The engine: one object, six public stages, shared by every door.

    read ─► parse ─► match ─► retrieve ─► compose ─► verify
    (text)  (Failure) (RuleHit) (passages) (Diagnosis) (LLM answer, checked; else the deterministic one)

``diagnose()``, the CLI, ``torchhelp run``, the eval harness, triage and the server all call these
stages and nothing below them. An ``Engine`` holds the settings and, once first needed, the loaded
knowledge index; build one per process and share it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from collections.abc import Sequence

from assistant.errors import KnowledgeError
from assistant.parse.reader import InputText, read_data, read_text
from assistant.settings import Settings, load_settings
from assistant.types import CATEGORIES, Diagnosis, Evidence, Failure, Passage, RuleHit

if TYPE_CHECKING:
    from assistant.kb.retrieve import Retriever
    from assistant.kb.runbooks import RunbookMatch
    from assistant.rules import Match

log = logging.getLogger(__name__)

CONFIDENT_RULE = 0.9  # at or above: the rule's documents are known, dense query embedding is skipped (policy "auto")


@dataclass(frozen=True)
class Retrieval:
    """What retrieval found: passages, and the document whose exact error signature the text carries."""

    passages: tuple[Passage, ...]
    signature_doc: str | None = None
    notes: tuple[str, ...] = ()
    runbooks: tuple[RunbookMatch, ...] = ()  # the team's own documents that quote this error, strongest first


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


class Engine:
    """The diagnosis engine. Stages are public so that every door composes the same pieces."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or load_settings()

    def with_settings(self, **overrides: Any) -> Engine:
        """An engine with some settings changed (the loaded index is shared through the retriever cache)."""
        if not any(v is not None for v in overrides.values()):
            return self
        return Engine(self.settings.with_overrides(**overrides))

    # -- stages -----------------------------------------------------------------------------

    def read(self, text: str | bytes) -> InputText:
        """Decode and bound the input (bytes best-effort; huge input is windowed, with a note)."""
        return read_text(text, self.settings.window_bytes) if isinstance(text, str) else read_data(text, self.settings.window_bytes)

    def parse(self, inp: InputText | str) -> Failure:
        """Read the failure out of the text: exception chain, frames, rank, assertion and NCCL lines."""
        from assistant.parse.traceback import parse_failure

        return parse_failure(inp.text if isinstance(inp, InputText) else inp)

    def match(self, failure: Failure, evidence: Evidence | None = None, *, strict: bool = False) -> Match:
        """Run the rules (first answer wins, wrapper rules may re-frame it), refined by live probe facts."""
        from assistant import rules

        found = rules.match(failure, evidence, strict=strict)
        refined = rules.with_evidence(found.hit, failure, evidence)
        return replace(found, hit=refined) if refined is not found.hit else found

    def retriever(self, *, dense: bool | None = None) -> Retriever:
        """The loaded knowledge index (built on first use; cached per process)."""
        from assistant.kb.retrieve import get_retriever

        use_dense = self.settings.dense if dense is None else dense
        return get_retriever(self.settings.home, dense=use_dense, encoder_kind=self.settings.encoder)

    def retrieve(self, failure: Failure, hit: RuleHit | None) -> Retrieval:
        """Hybrid retrieval for the failure; when no rule answered, also the document its text signs.

        Falls back to lexical-only (with a note) when dense search is unavailable.
        """
        notes: list[str] = []
        query = build_query(failure, hit)
        hints = hit.doc_ids if hit else ()
        from assistant.differential.families import family_docs

        # The documents behind the family's other causes are fetched too, so those hypotheses' fixes can cite them.
        must_include = (*hints, *family_docs(hit.category)) if hit else ()
        confident = hit is not None and hit.confidence >= CONFIDENT_RULE
        use_dense = self.settings.dense_policy == "always" or not confident
        try:
            retriever = self.retriever()
            passages = retriever.search(query, k=self.settings.top_k, hint_docs=hints, signature_text=failure.search_text, must_include=must_include, use_dense=use_dense)
        except KnowledgeError as exc:  # the dense index is missing or broken (it loads on first use)
            if not self.settings.dense:
                raise
            notes.append(f"Dense retrieval unavailable ({exc}); used lexical retrieval only.")
            retriever = self.retriever(dense=False)
            passages = retriever.search(query, k=self.settings.top_k, hint_docs=hints, signature_text=failure.search_text, must_include=must_include, use_dense=False)
        notes.extend(getattr(retriever.index, "notes", ()))  # a repaired index or a fallback home, said once in the answer
        signature_doc = None
        if hit is None:
            signed = [d for d in retriever.signature_hits(failure.search_text) if retriever.docs[d].category in CATEGORIES]
            if signed:
                signature_doc = signed[0]
                # A second pass that must include the signed document, so the answer can quote it.
                extra = retriever.search(query, k=self.settings.top_k, must_include=signed[:1], signature_text=failure.search_text)
                passages = list({p.id: p for p in [*passages, *extra]}.values())
        runbooks = self._runbooks(retriever, failure)
        if runbooks and not any(p.doc_id == runbooks[0].doc_id for p in passages):
            extra = retriever.search(query, k=self.settings.top_k, must_include=[runbooks[0].doc_id], signature_text=failure.search_text, use_dense=False)
            passages = [*passages, *(p for p in extra if p.doc_id == runbooks[0].doc_id)]
        return Retrieval(tuple(passages), signature_doc, tuple(notes), tuple(runbooks))

    @staticmethod
    def _runbooks(retriever: Retriever, failure: Failure) -> list[RunbookMatch]:
        """Team documents that quote the failure's own error text (read only when the user added some)."""
        user_docs = [(d.id, d.path) for d in retriever.docs.values() if d.origin == "user"]
        if not user_docs:
            return []
        from assistant.kb.runbooks import match_runbooks

        return match_runbooks(failure.search_text, user_docs)

    def compose(self, failure: Failure, evidence: Evidence, hit: RuleHit | None, retrieval: Retrieval, notes: Sequence[str] = ()) -> Diagnosis:
        """The deterministic answer: led by the rule, else by the signed document, else an honest unknown."""
        from assistant.compose.deterministic import compose_from_rule, compose_from_signature, compose_unknown
        from assistant.compose.runbook import with_runbooks

        passages = list(retrieval.passages)
        if hit is not None:
            diagnosis = compose_from_rule(failure, evidence, hit, passages, notes)
        elif retrieval.signature_doc:
            diagnosis = compose_from_signature(failure, evidence, retrieval.signature_doc, passages, notes)
        else:
            diagnosis = compose_unknown(failure, evidence, passages, notes)
        from assistant.differential import differentiate

        return with_runbooks(differentiate(diagnosis, failure, passages), retrieval.runbooks)

    def verify(self, diagnosis: Diagnosis, failure: Failure, evidence: Evidence, hit: RuleHit | None, retrieval: Retrieval, on_token: Any = None) -> Diagnosis:
        """Let the configured LLM write the answer; it is used only if it passes verification."""
        from assistant.backends.select import maybe_llm_compose

        written = maybe_llm_compose(diagnosis, failure, evidence, list(retrieval.passages), hit, self.settings, on_token=on_token)
        return self._hypotheses_after_llm(diagnosis, written)

    @staticmethod
    def _hypotheses_after_llm(det: Diagnosis, written: Diagnosis) -> Diagnosis:
        """The ranked causes after the LLM rewrote the answer: it may reword the leading one (that text was
        verified), never add a cause or a fact; the others stay the engine's, with their cited sources."""
        if written.backend == "none" or not det.hypotheses:
            return written
        if written.category != det.category:
            return replace(written, hypotheses=())  # a verified change of family: the engine's ranking no longer applies
        lead = replace(det.hypotheses[0], cause=written.cause, fixes=written.fixes)
        others = det.hypotheses[1:]
        cited = {doc for h in others for f in h.fixes for doc in f.sources}
        have = {s.id for s in written.sources}
        extra = tuple(s for s in det.sources if s.id in cited and s.id not in have)
        return replace(written, hypotheses=(lead, *others), sources=(*written.sources, *extra))

    # -- the whole way ------------------------------------------------------------------------

    def diagnose(self, text: str | bytes, *, evidence: Evidence | None = None, notes: Sequence[str] = (), on_token: Any = None) -> Diagnosis:
        """Every stage in order; ``timings_ms`` on the result says where the time went."""
        t0 = time.perf_counter()
        evidence = evidence or Evidence()
        inp = self.read(text)
        failure = self.parse(inp)
        t_parse = time.perf_counter()
        found = self.match(failure, evidence)
        t_rules = time.perf_counter()
        retrieval = self.retrieve(failure, found.hit)
        t_retrieve = time.perf_counter()
        all_notes = [*inp.notes, *notes, *evidence.notes, *found.notes, *retrieval.notes]
        diagnosis = self.compose(failure, evidence, found.hit, retrieval, all_notes)
        t_compose = time.perf_counter()
        diagnosis = self.verify(diagnosis, failure, evidence, found.hit, retrieval, on_token=on_token)
        t_end = time.perf_counter()
        timings = {
            "parse": t_parse - t0, "rules": t_rules - t_parse, "retrieve": t_retrieve - t_rules,
            "compose": t_compose - t_retrieve, "llm": t_end - t_compose, "total": t_end - t0,
        }
        return replace(diagnosis, timings_ms={k: round(v * 1000, 2) for k, v in timings.items()})


_DEFAULT: dict[Settings, Engine] = {}


def default_engine(settings: Settings | None = None) -> Engine:
    """The process's shared engine for these settings."""
    settings = settings or load_settings()
    try:
        engine = _DEFAULT.get(settings)
    except TypeError:  # settings holding unhashable values: no sharing, still correct
        return Engine(settings)
    if engine is None:
        engine = _DEFAULT.setdefault(settings, Engine(settings))
    return engine
