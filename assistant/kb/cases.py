"""Similar resolved reports: the labelled real reports of the dev split as a case base.

Each case keeps what is needed to recognise the next report like it and to say what resolved it: a
masked signature (the error line with run-specific values replaced), the category, the root cause and
fix in our own words, and the link to the thread. ``scripts/build_casebase.py`` writes
``knowledge/cases/resolved.jsonl`` from the dev split only (a frozen-test thread never becomes a case).

Matching is TF-IDF cosine over the signature's words and identifiers (bounded in [0, 1], so a fixed
threshold means the same thing for every query), plus an exact-template bonus. The closest cases are
shown with their links when they are close, and their votes feed the decision.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from assistant.kb.lexical import tokenize

CASES_FILE = ("cases", "resolved.jsonl")
CLOSE = 0.55  # cosine at or above: a case is shown as a similar resolved report
_ERROR_LINE = re.compile(r"^[\s`'\">*#-]{0,6}(?:\[[^\]]{0,20}\]:?\s*)?(?:E\s+)?(?:[\w.]*(?:Error|Exception|Warning)\b[^:\n]{0,80}:|.*?\b(?:Error|error|ERROR)\b:)")
_ENDING = re.compile(r"exitcode\s*:|exit code|exit status|\bSignal \d+|\(SIG[A-Z]+\)|killed by signal|Killed\b")
_MASKS = (
    (re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.@~+-]+){2,}[\\/]?"), "<path>"),
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s*(?:[KMGT]i?B|bytes)\b"), "<size>"),
    (re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])"), "<n>"),
)


_KEPT_NUMBER = re.compile(r"(?i)\b(exitcode|exit code|exit status|signal|status)(\s*:?\s*)(-?\d+)")


def mask(text: str) -> str:
    """Run-specific values (paths, addresses, sizes, numbers) replaced by placeholders; names kept.

    Exit codes and signal numbers are kept as words (``exitcode_m9``): they say how a process died."""
    text = _KEPT_NUMBER.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(1).split()[0].lower()}_{m.group(3).replace('-', 'm')}", text)
    for pattern, repl in _MASKS:
        text = pattern.sub(repl, text)
    return re.sub(r"[ \t]+", " ", text).strip()


def signature_of(text: str, limit: int = 400) -> str:
    """What identifies a report: its error lines (last ones first matter most), else its opening words; masked."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # An error line that only names the type ("RuntimeError:") has its message on the next line.
    errors = [ln if len(ln) >= 40 or i + 1 >= len(lines) else f"{ln} {lines[i + 1]}"
              for i, ln in enumerate(lines) if _ERROR_LINE.match(ln) and not ln.startswith("Traceback")]
    asserts = [ln for ln in lines if "Assertion" in ln and "failed" in ln][:1]
    # How a process ended tells summaries apart ("ChildFailedError:" alone is every torchrun failure's line).
    endings = [ln for ln in lines if _ENDING.search(ln)][:2]
    picked = list(dict.fromkeys([*errors[-2:], *asserts, *endings])) or lines[:3]
    return mask(" ".join(picked))[:limit]


@dataclass(frozen=True)
class Case:
    """A resolved real report."""

    id: str
    category: str
    signature: str
    resolution: str  # root cause and fix, in our own words
    link: str | None = None
    kind: str | None = None


@dataclass(frozen=True)
class SimilarCase:
    """A case and how close it is to the query."""

    case: Case
    similarity: float


class CaseBase:
    """TF-IDF cosine search over case signatures."""

    def __init__(self, cases: Sequence[Case]) -> None:
        self.cases = tuple(cases)
        counts = [Counter(tokenize(c.signature)) for c in self.cases]
        df: Counter[str] = Counter()
        for c in counts:
            df.update(c.keys())
        n = max(len(counts), 1)
        self._idf = {t: math.log((1 + n) / (1 + f)) + 1.0 for t, f in df.items()}
        self._unseen_idf = math.log(1 + n) + 1.0  # a query word no case has: as rare as can be (it still counts in the query's norm)
        self._vectors = [self._vector(c) for c in counts]
        self._postings: dict[str, list[int]] = {}
        for i, vec in enumerate(self._vectors):
            for term in vec:
                self._postings.setdefault(term, []).append(i)

    def _vector(self, counts: Counter[str]) -> dict[str, float]:
        vec = {t: (1.0 + math.log(f)) * self._idf.get(t, self._unseen_idf) for t, f in counts.items()}
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        return {t: v / norm for t, v in vec.items()}

    def search(self, text: str, k: int = 5, exclude: Iterable[str] = ()) -> list[SimilarCase]:
        """The ``k`` closest cases to a report's text (its signature is taken first); ``exclude`` names case ids or links to skip."""
        # Words no case has stay in the query: they lower every similarity, as they should.
        query = self._vector(Counter(tokenize(signature_of(text))))
        skip = set(exclude)
        scores: dict[int, float] = {}
        for term, weight in query.items():
            for i in self._postings.get(term, ()):
                scores[i] = scores.get(i, 0.0) + weight * self._vectors[i][term]
        ranked = sorted(scores.items(), key=lambda kv: -kv[1])
        out: list[SimilarCase] = []
        for i, s in ranked:
            case = self.cases[i]
            if case.id in skip or (case.link and case.link in skip):
                continue
            out.append(SimilarCase(case, round(min(s, 1.0), 4)))
            if len(out) >= k:
                break
        return out


def cases_path(knowledge_dir: Path | None = None) -> Path:
    from assistant.kb.documents import builtin_knowledge_dir

    return (knowledge_dir or builtin_knowledge_dir()).joinpath(*CASES_FILE)


def read_cases(path: Path) -> list[Case]:
    """Cases from a JSONL file (missing file: none)."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out.append(Case(row["id"], row["category"], row["signature"], row.get("resolution", ""), row.get("link"), row.get("kind")))
    return out


@lru_cache(maxsize=2)
def load_casebase(path: str | None = None) -> CaseBase:
    """The shipped case base (loaded once per process)."""
    return CaseBase(read_cases(Path(path) if path else cases_path()))


def case_from_report(row: dict) -> Case:
    """A dev report as a case: masked signature, label, our note, link."""
    return Case(str(row["id"]), str(row["category"]), signature_of(str(row["error_text"])), str(row.get("note") or ""), row.get("source"), row.get("kind"))
