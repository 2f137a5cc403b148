"""BM25 over chunk texts: error messages are token-exact, so words like ``CUBLAS_STATUS_ALLOC_FAILED``
or ``expandable_segments`` must match literally, which dense embeddings blur."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

_TOKEN = re.compile(r"[a-z_][a-z0-9_]*[a-z0-9]|[a-z]")
_STOP = frozenset(
    "the a an of to in and or is are be it this that for on with as by at from was were not but if then else you your "
    "can cannot can't when which what where how why use used using do does did has have had so such than into its their "
    "one two all any each more most other some no only same also may might will would should could very".split()
)


def tokenize(text: str) -> list[str]:
    """Lowercased identifiers and words; numbers and stop words dropped (numbers vary between runs)."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOP and len(t) > 1]


class BM25:
    """Okapi BM25 with the usual k1/b defaults, over a fixed list of documents."""

    def __init__(self, texts: Sequence[str], k1: float = 1.4, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        tfs = [Counter(tokenize(t)) for t in texts]
        self._n = len(tfs)
        lens = [sum(tf.values()) for tf in tfs]
        avg = (sum(lens) / len(lens)) if lens else 1.0
        # Postings: term -> [(document, term frequency, length norm)]. A query touches only the documents
        # that contain its terms instead of probing every document's counter for every term.
        self._postings: dict[str, list[tuple[int, int, float]]] = {}
        for i, tf in enumerate(tfs):
            norm = k1 * (1 - b + b * lens[i] / avg)
            for term, f in tf.items():
                self._postings.setdefault(term, []).append((i, f, norm))
        self._idf = {t: math.log(1 + (self._n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self._postings.items()}
        self._norms: list[float] = []
        self._raw: dict[str, list[list[int]]] = {}  # postings as stored, for an index read back (from_data)

    def to_data(self) -> dict:
        """The postings as plain data (written into the index at build time: rebuilding them costs more than reading)."""
        for term in self._idf:
            self._posting(term)  # read back lazily: every term's postings are needed here
        norms = [0.0] * self._n
        for plist in self._postings.values():
            for i, _f, norm in plist:
                norms[i] = norm
        return {"n": self._n, "k1": self.k1, "b": self.b, "norms": norms,
                "terms": {t: [[i for i, _, _ in p], [f for _, f, _ in p]] for t, p in self._postings.items()}}

    @classmethod
    def from_data(cls, data: dict) -> BM25:
        """A BM25 read back from :meth:`to_data` (same scores as building it from the texts).

        A term's postings are put together the first time a query uses it: a diagnosis touches a few dozen of
        the index's thousands of terms, and building them all was a quarter of a cold ``ask``'s index load."""
        self = cls.__new__(cls)
        self.k1, self.b, self._n = float(data["k1"]), float(data["b"]), int(data["n"])
        self._norms, self._raw = data["norms"], data["terms"]
        self._postings = {}
        self._idf = {t: math.log(1 + (self._n - len(ids) + 0.5) / (len(ids) + 0.5)) for t, (ids, _tfs) in self._raw.items()}
        return self

    def _posting(self, term: str) -> list[tuple[int, int, float]]:
        plist = self._postings.get(term)
        if plist is None:
            ids, tfs = self._raw[term]
            norms = self._norms
            plist = self._postings[term] = [(i, f, norms[i]) for i, f in zip(ids, tfs, strict=True)]
        return plist

    def idf(self, term: str) -> float:
        """The term's inverse document frequency over the chunks; a term no chunk has is as rare as can be."""
        idf = self._idf.get(term)
        return idf if idf is not None else math.log(1 + (self._n + 0.5) / 0.5)

    def scores(self, query: str) -> list[float]:
        """A score per document (0 where no query term occurs)."""
        out = [0.0] * self._n
        k1_plus_1 = self.k1 + 1
        for term, qcount in Counter(tokenize(query)).items():
            idf = self._idf.get(term)
            if idf is None:
                continue
            weight = idf * (1.0 + math.log(qcount))  # repeated query words count, but sublinearly
            for i, f, norm in self._posting(term):
                out[i] += weight * f * k1_plus_1 / (f + norm)
        return out
