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
        self._tfs = [Counter(tokenize(t)) for t in texts]
        self._lens = [sum(tf.values()) for tf in self._tfs]
        self._avg = (sum(self._lens) / len(self._lens)) if self._lens else 1.0
        df: Counter[str] = Counter()
        for tf in self._tfs:
            df.update(tf.keys())
        n = len(self._tfs)
        self._idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}

    def scores(self, query: str) -> list[float]:
        """A score per document (0 where no query term occurs)."""
        terms = Counter(tokenize(query))
        out = [0.0] * len(self._tfs)
        for term, qcount in terms.items():
            idf = self._idf.get(term)
            if idf is None:
                continue
            weight = idf * (1.0 + math.log(qcount))  # repeated query words count, but sublinearly
            for i, tf in enumerate(self._tfs):
                f = tf.get(term)
                if f:
                    norm = self.k1 * (1 - self.b + self.b * self._lens[i] / self._avg)
                    out[i] += weight * f * (self.k1 + 1) / (f + norm)
        return out
