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
from collections.abc import Collection, Sequence

from assistant.errors import KnowledgeError
from assistant.parse.reader import InputText, read_data, read_text
from assistant.settings import Settings, load_settings
from assistant.types import CATEGORIES, Diagnosis, Evidence, Failure, Passage, RuleHit

if TYPE_CHECKING:
    from assistant.atlas.matcher import Atlas, AtlasMatch
    from assistant.decide import Decision
    from assistant.kb.cases import SimilarCase
    from assistant.kb.retrieve import Retriever
    from assistant.kb.runbooks import RunbookMatch
    from assistant.rules import Match

log = logging.getLogger(__name__)

CONFIDENT_RULE = 0.9  # at or above: the rule's documents are known, dense query embedding is skipped (policy "auto")
# A lexical-only decision this sure, agreeing with a confident rule, stands; anything less is decided again with embeddings.
CASCADE_SURE = 0.9


@dataclass(frozen=True)
class Retrieval:
    """What retrieval found: passages, and the document the answer comes from when no rule leads it."""

    passages: tuple[Passage, ...]
    answer_doc: str | None = None
    notes: tuple[str, ...] = ()
    runbooks: tuple[RunbookMatch, ...] = ()  # the team's own documents that quote this error, strongest first
    builtin_signed: tuple[str, ...] = ()  # built-in documents whose signatures the error carries (read when a runbook matched)


@dataclass(frozen=True)
class Proposals:
    """What each source proposes before anything is decided: retrieval without the rule's hints, the
    categories of documents whose error signature the text carries, and the closest resolved reports."""

    passages: tuple[Passage, ...]
    signature_categories: tuple[str, ...]
    similar: tuple[SimilarCase, ...]
    signed_docs: tuple[str, ...] = ()
    query: str = ""
    dense: bool = True  # whether retrieval embedded the query (the decision has one fit per mode)
    origin: AtlasMatch | None = None  # the PyTorch check that raised the message (error atlas), when recognised


def _referenced_docs(doc_id: str | None) -> tuple[str, ...]:
    """Other documents whose fixes a document's causes name (retrieved too, so the answer can cite them)."""
    if not doc_id:
        return ()
    from assistant.kb.remedies import remedies_of

    rem = remedies_of(doc_id)
    if rem is None:
        return ()
    return tuple(dict.fromkeys(ref.partition("#")[0] for c in rem.causes for ref in c.fix_refs if not ref.startswith(f"{doc_id}#")))


def related_documents(decision: Decision, proposals: Proposals, limit: int = 3) -> tuple[str, ...]:
    """The best retrieved documents of the decided family (their fixes may add to the answer's)."""
    if decision.abstained:
        return ()
    docs = [p.doc_id for p in proposals.passages if p.category == decision.category]
    return tuple(dict.fromkeys(docs))[:limit]


def build_query_text(proposals: Proposals) -> str:
    """The query the proposals were retrieved with."""
    return proposals.query


def build_query(failure: Failure, hit: RuleHit | None) -> str:
    """The retrieval query: the error line(s), kernel assertions, and the rule's own words."""
    parts = [failure.exc_type or "", failure.message[:500]]
    # Where in torch or a library it failed says what kind of failure it is (collate.py, conv.py, distributed_c10d.py).
    library = [f for f in failure.frames if not f.is_user][-2:]
    parts.extend(f"{f.file.replace(chr(92), '/').rsplit('/', 1)[-1].removesuffix('.py')} {f.function or ''}" for f in library)
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
        """Read the failure out of the text: exception chain, frames, rank, assertion and NCCL lines.

        A log of several processes is read the way triage reads a job: the error that ended the run and the rank
        that failed first come from :mod:`assistant.triage.verdict`, so ``ask``, ``run`` and ``triage`` agree."""
        from assistant.parse.multiprocess import job_failure
        from assistant.parse.traceback import parse_failure

        text = inp.text if isinstance(inp, InputText) else inp
        return job_failure(text) or parse_failure(text)

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

    def usable_retriever(self) -> Retriever:
        """The retriever, or its lexical-only form when the dense index cannot be had (no embedding model here)."""
        try:
            return self.retriever()
        except KnowledgeError:
            return self.retriever(dense=False)

    def retrieve(self, failure: Failure, hit: RuleHit | None, answer_doc: str | None = None, extra_docs: Sequence[str] = ()) -> Retrieval:
        """Hybrid retrieval for the answer: led by the rule's documents, or by ``answer_doc`` when the
        decision answers from a document no rule named.

        Falls back to lexical-only (with a note) when dense search is unavailable.
        """
        notes: list[str] = []
        query = build_query(failure, hit)
        dense_text = build_query(failure, None)  # the same text the proposals embedded: its vector is cached
        hints = hit.doc_ids if hit else ((answer_doc,) if answer_doc else ())
        from assistant.differential.families import family_docs

        # The documents behind the family's other causes are fetched too, so those hypotheses' fixes can cite them.
        must_include = (*hints, *family_docs(hit.category)) if hit else (*hints, *_referenced_docs(answer_doc))
        must_include = (*must_include, *extra_docs)  # documents whose fixes the answer may add
        confident = hit is not None and hit.confidence >= CONFIDENT_RULE
        use_dense = self.settings.dense_policy == "always" or not confident
        try:
            retriever = self.retriever()
            passages = retriever.search(query, k=self.settings.top_k, hint_docs=hints, signature_text=failure.search_text, must_include=must_include,
                                        use_dense=use_dense, dense_text=dense_text)
        except KnowledgeError as exc:  # the dense index is missing or broken (it loads on first use)
            if not self.settings.dense:
                raise
            notes.append(f"Dense retrieval unavailable ({exc}); used lexical retrieval only.")
            retriever = self.retriever(dense=False)
            passages = retriever.search(query, k=self.settings.top_k, hint_docs=hints, signature_text=failure.search_text, must_include=must_include, use_dense=False)
        notes.extend(getattr(retriever.index, "notes", ()))  # a repaired index or a fallback home, said once in the answer
        runbooks = self._runbooks(retriever, failure)
        if runbooks and not any(p.doc_id == runbooks[0].doc_id for p in passages):
            extra = retriever.search(query, k=self.settings.top_k, must_include=[runbooks[0].doc_id], signature_text=failure.search_text, use_dense=False)
            passages = [*passages, *(p for p in extra if p.doc_id == runbooks[0].doc_id)]
        signed = self._builtin_signed(retriever, failure) if runbooks else ()
        return Retrieval(tuple(passages), answer_doc, tuple(notes), tuple(runbooks), signed)

    def answer_document(self, decision: Decision, proposals: Proposals) -> str | None:
        """The document to answer from when the decided category is not the rule's: one quoting the error's
        signature first, else the best retrieved one of that category, else the category's main document."""
        if decision.abstained:
            return None
        from assistant.compose.documents import pick_document

        docs = self.usable_retriever().docs
        categories = {d: info.category for d, info in docs.items()}
        doc = pick_document(decision.category, proposals.passages, proposals.signed_docs, categories)
        if doc is None:
            wider = self.usable_retriever().search(build_query_text(proposals), k=40, use_dense=False)
            doc = next((p.doc_id for p in wider if p.category == decision.category), None)
        if doc is None:
            from assistant.differential.families import family_docs

            doc = next(iter(family_docs(decision.category)), None)
        return doc

    def _catch_all_yields(self, failure: Failure, hit: RuleHit | None) -> bool:
        """Whether the catch-all reading of a built-in exception ("the program's own logic") should give way: a document
        of another category, or one outside the plain-Python area (a training or nn family filed as python_error, such as
        the scheduler's own type check), carries a signature found in the exception's own message. A library's or
        PyTorch's own check raised it, and that document knows why. Only the message counts: a launcher's wrapper lines
        around a rank's plain ValueError (mp.spawn's "process 0 terminated") name the launcher, not the error."""
        if hit is None or hit.rule not in ("python.builtin", "python.type_error", "python.key_error"):
            return False
        message = f"{failure.exc_type}: {failure.message}" if failure.exc_type else failure.message
        if not message.strip():
            return False
        try:
            retriever = self.retriever()
            docs = retriever.docs
            signed = [d for d in retriever.signature_hits(message) if d in docs]
        except KnowledgeError:  # no index: keep the rule's reading
            return False
        if hit.rule == "python.builtin" and any(docs[d].category not in ("python_error", "unknown") for d in signed):
            return True
        return any("/python/" not in docs[d].path.replace("\\", "/") for d in signed)

    def propose(
        self, failure: Failure, exclude_cases: Sequence[str] = (), exclude_docs: Collection[str] = (), hit: RuleHit | None = None,
    ) -> Proposals:
        """Every source's proposal, independent of the rule: unhinted retrieval, signatures, similar resolved reports.

        ``exclude_cases`` names case ids or links to leave out (the eval scores a dev report without its own case);
        ``exclude_docs`` leaves documents out (fitting the decision simulates a family the knowledge base lacks).
        With ``dense_policy`` "auto" and a confident rule reading (``hit``), retrieval stays lexical: the decision has
        a fit for that mode, and embedding the query is the costliest part of a cold start (NumPy's import alone).
        """
        from assistant.kb.cases import load_casebase

        query = build_query(failure, None)
        k = 8 + (16 if exclude_docs else 0)
        dense = self.settings.dense_policy == "always" or hit is None or hit.confidence < CONFIDENT_RULE
        try:
            retriever = self.retriever()
            dense = dense and retriever.dense_available
            passages = retriever.search(query, k=k, signature_text=failure.search_text, use_dense=dense)
        except KnowledgeError:
            retriever, dense = self.retriever(dense=False), False
            passages = retriever.search(query, k=k, signature_text=failure.search_text, use_dense=False)
        passages = [p for p in passages if p.doc_id not in exclude_docs][:8]
        signed = tuple(d for d in retriever.signature_hits(failure.search_text) if retriever.docs[d].category in CATEGORIES and d not in exclude_docs)
        similar = tuple(load_casebase().search(failure.text or failure.search_text, k=5, exclude=exclude_cases))
        categories = tuple(dict.fromkeys(retriever.docs[d].category for d in signed))
        return Proposals(tuple(passages), categories, similar, signed, query, dense, self.origin(failure))

    def atlas(self) -> Atlas | None:
        """The error atlas in use (the user's rebuilt one, else the shipped one); None when turned off or absent."""
        if not self.settings.atlas:
            return None
        from assistant.atlas import atlas_for

        return atlas_for(self.settings.home)

    def origin(self, failure: Failure) -> AtlasMatch | None:
        """The PyTorch check that raised this failure's message, read from the atlas (None when it is not one of PyTorch's)."""
        atlas = self.atlas()
        if atlas is None:
            return None
        from assistant.atlas import origin_of

        return origin_of(atlas, failure.search_text, failure.text)

    def decide(self, failure: Failure, hit: RuleHit | None, proposals: Proposals) -> Decision:
        """The calibrated decision over the rule's reading and every proposal."""
        from assistant.decide import decide

        retriever = self.usable_retriever()  # without the dense index, the lexical one weighs words the same way
        mode = "hybrid" if proposals.dense and retriever.dense_available else "lexical"
        return decide(failure, hit, proposals.passages, proposals.signature_categories, proposals.similar, idf=retriever.idf, mode=mode,
                      origin=proposals.origin.entry if proposals.origin is not None else None)

    @staticmethod
    def _runbooks(retriever: Retriever, failure: Failure) -> list[RunbookMatch]:
        """Team documents that quote the failure's own error text (read only when the user added some)."""
        user_docs = [(d.id, d.path) for d in retriever.docs.values() if d.origin == "user"]
        if not user_docs:
            return []
        from assistant.kb.runbooks import match_runbooks

        return match_runbooks(failure.search_text, user_docs)

    @staticmethod
    def _builtin_signed(retriever: Retriever, failure: Failure) -> tuple[str, ...]:
        """Built-in documents (not the user's) whose error signature occurs in the failure's text."""
        return tuple(d for d in retriever.signature_hits(failure.search_text) if retriever.docs[d].origin != "user")

    def compose(
        self, failure: Failure, evidence: Evidence, hit: RuleHit | None, retrieval: Retrieval, notes: Sequence[str] = (),
        decision: Decision | None = None, similar: Sequence[SimilarCase] = (), related: Sequence[str] = (), origin: AtlasMatch | None = None,
        proposed: Sequence[Passage] = (),
    ) -> Diagnosis:
        """The deterministic answer: led by the rule when the decision agrees with it, else by the decided
        category's document, else an honest unknown; the similar resolved reports and the decision attached."""
        from assistant.compose.deterministic import compose_from_documents, compose_from_rule, compose_unknown, with_decision
        from assistant.compose.runbook import with_runbooks

        passages = list(retrieval.passages)
        if hit is not None:
            diagnosis = compose_from_rule(failure, evidence, hit, passages, notes)
        elif decision is not None and not decision.abstained and retrieval.answer_doc:
            diagnosis = compose_from_documents(failure, evidence, decision, retrieval.answer_doc, passages, notes)
        else:
            diagnosis = compose_unknown(failure, evidence, passages, notes)
        from assistant.differential import differentiate

        diagnosis = differentiate(with_decision(diagnosis, decision, similar, origin), failure, passages, evidence.tensors)
        # The answer's own fixes come first (a rule's, filled from the values it read, or the decided document's
        # leading cause's); what room is left goes to the retrieved documents' fixes whose words, and whose causes'
        # words, the user's text shares. Unseen reports often name a situation one document describes while the
        # decision picked another document of the family.
        docs = [*related, *(p.doc_id for p in passages), *(p.doc_id for p in proposed)]
        diagnosis = self._with_related_fixes(diagnosis, failure, evidence, hit, docs, [*passages, *proposed], family_docs=related)
        from assistant.compose.already_tried import leave_out_tried

        diagnosis = leave_out_tried(diagnosis, failure.text or failure.search_text)
        return with_runbooks(diagnosis, retrieval.runbooks, retrieval.builtin_signed)

    def _with_related_fixes(
        self, d: Diagnosis, failure: Failure, evidence: Evidence, hit: RuleHit | None, related: Sequence[str], passages: Sequence[Passage],
        limit: int = 3, family_docs: Sequence[str] = (),
    ) -> Diagnosis:
        """The answer's fixes, then the retrieved documents' other fixes that share the user's words (the decided
        family's best documents first, then what unhinted retrieval ranked); none that the diagnosis rules out.

        Beside a rule's reading only one joins, from the decided family's best document (``family_docs``), and only on
        a strong match; in an answer that names no family, strong matches go before the general next steps."""
        if d.category == "unknown" and not d.decision:
            return d
        from assistant.compose.claims import reply_proposals, ruled_out_action
        from assistant.compose.documents import BESIDE_RULE_MIN_SCORE, LEAD_UNKNOWN_MIN_SCORE, RELATED_FIXES, scored_related_fixes

        retrieved = {p.doc_id for p in passages}
        text = failure.text or failure.search_text
        idf = self.usable_retriever().idf
        unknown = d.category == "unknown"
        if hit is not None:
            # A rule chose its fixes from the values it read, and the differential lists the family's other causes with
            # theirs. Measured on the held-out parts, any retrieved fix beside a rule at a word-overlap floor joined 57 of
            # the 94 rule-led captures (a reinstall beside an autocast reading) to help 6 of 173 reports; the family's
            # whole document re-added what the reading set aside. One fix of the family's best document at a strong
            # match, taking no value a reader would fill and not a sibling of a fix the reader chose (it chose among
            # them), is the measured middle (BESIDE_RULE_MIN_SCORE).
            docs = [doc for doc in family_docs[:1] if doc in retrieved]
            scored = scored_related_fixes(text, docs, d.fixes, idf, limit=3, min_score=BESIDE_RULE_MIN_SCORE, beside_reading=True)
            keep = 1
        else:
            docs = list(dict.fromkeys(doc for doc in related if doc in retrieved))
            # The general next steps of an unknown answer leave the room of the fixes a family would have had.
            scored = scored_related_fixes(text, docs, d.fixes, idf, limit=limit + 2, room=RELATED_FIXES if unknown else None)
            keep = limit
        # The verifier's own test: a fix proposing what this diagnosis rules out (allocator settings when fragmentation
        # is ruled out, CUDA where there is none) is left out, as it would be from an LLM's reply.
        scored = tuple((score, f) for score, f in scored if ruled_out_action(reply_proposals([(f"{f.title}\n{f.detail}", False), (f.code or "", True)]),
                                                                             failure, evidence, hit, d) is None)[:keep]
        if not scored:
            return d
        from assistant.compose.deterministic import sources_from

        extra = tuple(f for _, f in scored)
        if unknown:
            lead = tuple(f for score, f in scored if score >= LEAD_UNKNOWN_MIN_SCORE)
            fixes = (*lead, *d.fixes, *(f for f in extra if f not in lead))
        else:
            fixes = (*d.fixes, *extra)
        # Every document a fix cites is listed among the sources (a retrieved passage may sit below the display floor).
        cited = [s for f in extra for s in f.sources]
        sources = sources_from(passages, keep=[*(s.id for s in d.sources), *cited])
        return replace(d, fixes=fixes, sources=sources)

    def verify(self, diagnosis: Diagnosis, failure: Failure, evidence: Evidence, hit: RuleHit | None, retrieval: Retrieval) -> Diagnosis:
        """Let the configured LLM write the answer; it is used only if it passes verification."""
        from assistant.backends.select import maybe_llm_compose

        written = maybe_llm_compose(diagnosis, failure, evidence, list(retrieval.passages), hit, self.settings)
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

    def diagnose(
        self, text: str | bytes, *, evidence: Evidence | None = None, notes: Sequence[str] = (), exclude_cases: Sequence[str] = (),
        failing_rank: int | None = None,
    ) -> Diagnosis:
        """Every stage in order; ``timings_ms`` on the result says where the time went.

        ``exclude_cases`` leaves resolved reports out of the comparison (the eval scores a dev report without its own case).
        ``failing_rank`` is the rank that failed first when the caller already decided it (a job folder read by triage's pass).
        """
        t0 = time.perf_counter()
        evidence = evidence or Evidence()
        inp = self.read(text)
        failure = self.parse(inp)
        if failing_rank is not None:
            failure = replace(failure, rank=failing_rank)
        t_parse = time.perf_counter()
        found = self.match(failure, evidence)
        t_rules = time.perf_counter()
        proposals = self.propose(failure, exclude_cases, hit=found.hit)
        if self._catch_all_yields(failure, found.hit):
            found = replace(found, hit=None)
        decision = self.decide(failure, found.hit, proposals)
        # Settled or not is judged on the fitted scale: the unfamiliar-text adjustment says how sure to sound, and would
        # otherwise send every unfamiliar text through the embedding pass.
        sure = decision.fitted if decision.fitted is not None else decision.likelihood
        if not proposals.dense and (sure < CASCADE_SURE or found.hit is None or decision.category != found.hit.category):
            # The lexical pass did not settle it: embed the query after all and decide with the hybrid fit.
            dense_proposals = self.propose(failure, exclude_cases, hit=None)
            if dense_proposals.dense:
                proposals, decision = dense_proposals, self.decide(failure, found.hit, dense_proposals)
        # The rule leads when the decision agrees with its family; otherwise the decided family's document does.
        hit = found.hit if found.hit is not None and found.hit.category == decision.category else None
        answer_doc = self.answer_document(decision, proposals) if hit is None else None
        related = related_documents(decision, proposals)
        retrieval = self.retrieve(failure, hit, answer_doc, related)
        t_retrieve = time.perf_counter()
        all_notes = [*inp.notes, *notes, *evidence.notes, *found.notes, *retrieval.notes]
        if found.hit is not None and hit is None and not decision.abstained:
            all_notes.append(f"A rule read this as {found.hit.category}, but the knowledge base and similar resolved reports point to {decision.category}.")
        diagnosis = self.compose(failure, evidence, hit, retrieval, all_notes, decision, proposals.similar, related, proposals.origin,
                                 proposals.passages)
        t_compose = time.perf_counter()
        # A fix taken from a document only the unhinted retrieval found is cited with it: the writer and the verifier
        # see that document's passages too, as they see every other cited one.
        have = {p.doc_id for p in retrieval.passages}
        cited = {doc for f in diagnosis.fixes for doc in f.sources} - have
        if cited:
            retrieval = replace(retrieval, passages=(*retrieval.passages, *(p for p in proposals.passages if p.doc_id in cited)))
        diagnosis = self.verify(diagnosis, failure, evidence, found.hit, retrieval)
        t_end = time.perf_counter()
        timings = {
            "parse": t_parse - t0, "rules": t_rules - t_parse, "retrieve": t_retrieve - t_rules,  # retrieve: proposals, decision and the answer's passages
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
