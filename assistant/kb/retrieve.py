"""Hybrid retrieval: BM25 (token-exact) fused with dense cosine similarity, plus exact signature hits.

Scores are fused per chunk as a weighted sum of the normalised lexical and dense scores. A chunk
whose document lists a *signature* (an exact error string) found verbatim in the query gets a
bonus: that is the strongest evidence retrieval can have. Results keep at most two chunks per
document so the top results name different documents.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from collections.abc import Iterable

from assistant.kb.encoder import DEFAULT_ENCODER
from assistant.kb.index import DocInfo, LoadedIndex, ensure_index
from assistant.kb.lexical import BM25
from assistant.types import Passage

log = logging.getLogger(__name__)
Mode = Literal["hybrid", "lexical", "dense"]
LEXICAL_WEIGHT = 0.45
DENSE_WEIGHT = 0.55
SIGNATURE_BONUS = 0.6
HINT_BONUS = 0.35
DENSE_FLOOR = 0.15  # cosine below this is noise for MiniLM
MAX_QUERY_CHARS = 700


@dataclass
class Retriever:
    """Search over a loaded index (lexical always; dense when the index has vectors)."""

    index: LoadedIndex
    encoder_kind: str = DEFAULT_ENCODER

    def __post_init__(self) -> None:
        from collections import OrderedDict

        data = self.index.lexical
        self._bm25 = BM25.from_data(data) if data and data.get("n") == len(self.index.chunks) else BM25([c.text for c in self.index.chunks])
        # One diagnosis searches more than once with the same dense text (proposals, then the answer's passages).
        self._dense_cache: OrderedDict[str, list[float]] = OrderedDict()
        self._sigs = [(s.lower(), d.id) for d in self.index.docs.values() for s in d.signatures if len(s) >= 12]
        self._automaton: Any = None  # built on first use; False where pyahocorasick is missing
        self._sig_memo: tuple[str, tuple[str, ...]] | None = None
        self._doc_chunks: dict[str, tuple[int, ...]] | None = None

    def idf(self, term: str) -> float:
        """How rare a (tokenized) word is across the knowledge chunks."""
        return self._bm25.idf(term)

    @property
    def dense_available(self) -> bool:
        return self.index.has_dense

    @property
    def docs(self) -> dict[str, DocInfo]:
        return self.index.docs

    def signature_hits(self, text: str) -> list[str]:
        """Documents with a signature found verbatim (case-insensitive) in the text, longest match first (ties in the
        order the documents list their signatures)."""
        if self._sig_memo is not None and self._sig_memo[0] == text:
            return list(self._sig_memo[1])  # one diagnosis asks for the same text several times
        low = text.lower()
        found: dict[str, tuple[int, int]] = {}  # doc -> (longest matching signature, first matching signature's position)
        automaton = self._sig_automaton()
        if automaton is not None:
            matches: Iterable[tuple[int, int, str]] = (entry for _, entries in automaton.iter(low) for entry in entries)
        else:  # no pyahocorasick here: a substring test per signature, the same hits
            matches = ((position, len(sig), doc) for position, (sig, doc) in enumerate(self._sigs) if sig in low)
        for position, length, doc in matches:
            best, first = found.get(doc, (0, position))
            found[doc] = (max(best, length), min(first, position))
        hits = sorted(found, key=lambda d: (-found[d][0], found[d][1]))
        self._sig_memo = (text, tuple(hits))
        return hits

    def _sig_automaton(self) -> Any:  # an ahocorasick.Automaton, or None where pyahocorasick is not installed
        """Every signature in one automaton: a pass over the text finds them all (a substring test per signature cost
        about 0.35 ms a call over the shipped documents, three calls a diagnosis)."""
        if self._automaton is False:
            return None
        if self._automaton is None:
            try:
                import ahocorasick
            except ImportError:  # a dependency, but some images lack it (the GPU machines'): the plain test stands in
                self._automaton = False
                return None

            by_sig: dict[str, list[tuple[int, int, str]]] = {}
            for position, (sig, doc) in enumerate(self._sigs):
                by_sig.setdefault(sig, []).append((position, len(sig), doc))
            automaton = ahocorasick.Automaton()
            for sig, entries in by_sig.items():
                automaton.add_word(sig, tuple(entries))
            automaton.make_automaton()
            self._automaton = automaton
        return self._automaton

    def search(
        self, query: str, k: int = 5, mode: Mode = "hybrid", hint_docs: Iterable[str] = (), signature_text: str | None = None,
        must_include: Iterable[str] = (),
        use_dense: bool | None = None,
        dense_text: str | None = None,
    ) -> list[Passage]:
        """Top-k passages for the query.

        ``hint_docs`` (from a rule) are nudged up; documents in ``must_include`` that did not make
        the top k are appended with their best-scoring passage, so a rule's documents can always be
        cited as retrieved evidence. ``dense_text`` (default: the query) is what the dense side embeds.
        """
        query = query[:MAX_QUERY_CHARS]
        n = len(self.index.chunks)
        lex = self._bm25.scores(query) if mode in ("hybrid", "lexical") else [0.0] * n
        top_lex = max(lex) if lex and max(lex) > 0 else 1.0
        lex_n = [s / top_lex for s in lex]
        dense = [0.0] * n
        use_dense = mode in ("hybrid", "dense") and self.dense_available and (use_dense is not False or mode == "dense")
        if use_dense:
            dense = self._dense_scores((dense_text or query)[:MAX_QUERY_CHARS])
        dense_n = self._normalise_dense(dense) if use_dense else [0.0] * n
        sig_docs = set(self.signature_hits(signature_text if signature_text is not None else query)) if mode == "hybrid" else set()
        if mode == "lexical" or (mode != "dense" and not use_dense):
            scores = list(lex_n)  # hybrid without vectors: lexical + bonuses
        elif mode == "dense":
            scores = list(dense_n)
        else:
            scores = [LEXICAL_WEIGHT * a + DENSE_WEIGHT * b for a, b in zip(lex_n, dense_n, strict=True)]
        # Bonuses touch only their documents' chunks; a loop over every chunk with set tests was most of a search.
        chunks_of = self._chunks_of_doc()
        for bonus, docs in ((SIGNATURE_BONUS, sig_docs), (HINT_BONUS, set(hint_docs))):
            for doc in docs:
                for i in chunks_of.get(doc, ()):
                    scores[i] += bonus
        # Highest first; equal scores keep chunk order (sorted is stable, with reverse too).
        order = sorted([i for i, v in enumerate(scores) if v > 0], key=scores.__getitem__, reverse=True)
        chunks = self.index.chunks

        def passage(i: int) -> Passage:
            c = chunks[i]
            return Passage(c.id, c.doc_id, c.title, c.section, c.path, c.category, c.text, round(max(scores[i], 0.0), 4),
                           round(lex_n[i], 4), round(dense[i], 4))

        out: list[Passage] = []
        per_doc: dict[str, int] = {}
        for i in order:
            doc = chunks[i].doc_id
            if per_doc.get(doc, 0) >= 2:
                continue
            per_doc[doc] = per_doc.get(doc, 0) + 1
            out.append(passage(i))
            if len(out) >= k:
                break
        # A rule's documents that missed the top k: each one's best chunk (first in chunk order on a tie), best first.
        wanted = [d for d in dict.fromkeys(must_include) if d in self.index.docs and d not in per_doc]
        best = [min(chunks_of[d], key=lambda i: (-scores[i], i)) for d in wanted if chunks_of.get(d)]
        out.extend(passage(i) for i in sorted(best, key=lambda i: (-scores[i], i)))
        return out

    def _chunks_of_doc(self) -> dict[str, tuple[int, ...]]:
        """Each document's chunk positions, built on first use."""
        if self._doc_chunks is None:
            by_doc: dict[str, list[int]] = {}
            for i, c in enumerate(self.index.chunks):
                by_doc.setdefault(c.doc_id, []).append(i)
            self._doc_chunks = {d: tuple(v) for d, v in by_doc.items()}
        return self._doc_chunks

    def _dense_scores(self, query: str) -> list[float]:
        cached = self._dense_cache.get(query)
        if cached is not None:
            self._dense_cache.move_to_end(query)
            return cached
        scores = self._dense_scores_uncached(query)
        self._dense_cache[query] = scores
        if len(self._dense_cache) > 64:
            self._dense_cache.popitem(last=False)
        return scores

    def _dense_scores_uncached(self, query: str) -> list[float]:
        import numpy as np

        from assistant.kb.encoder import get_encoder

        vec = np.asarray(get_encoder(self.encoder_kind).encode([query]), dtype="float32")
        index = self.index.faiss_index()
        sims, ids = index.search(vec, index.ntotal)  # type: ignore[attr-defined]
        out = [0.0] * len(self.index.chunks)
        for s, i in zip(sims[0], ids[0], strict=True):
            if i >= 0:
                out[int(i)] = float(s)
        return out

    @staticmethod
    def _normalise_dense(dense: list[float]) -> list[float]:
        top = max(dense) if dense else 0.0
        if top <= DENSE_FLOOR:
            return [0.0] * len(dense)
        span = top - DENSE_FLOOR
        return [(d - DENSE_FLOOR) / span if d > DENSE_FLOOR else 0.0 for d in dense]


_CACHE: dict[tuple[str, bool, str], Retriever] = {}


def get_retriever(home: Path, dense: bool = True, encoder_kind: str = DEFAULT_ENCODER, progress=None) -> Retriever:
    """A process-wide retriever per (home, dense) — loading is done once, searches are cheap."""
    key = (str(home), dense, encoder_kind)
    cached = _CACHE.get(key)
    if cached is None:
        index = ensure_index(home, dense=dense, encoder_kind=encoder_kind, progress=progress)
        cached = Retriever(index, encoder_kind)
        _CACHE[key] = cached
    return cached


def clear_cache() -> None:
    """Forget loaded retrievers (after `kb add` / `kb build`)."""
    _CACHE.clear()
