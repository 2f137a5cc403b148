"""`torchhelp eval score`: diagnose every capture (or outside case) and measure the answers.

Metrics, overall and per category: category accuracy, must-mention recall, must-not-mention
violations, citation validity (every cited source exists and was retrieved), abstention (answering
``unknown`` where that is right, and how often a wrong category is guessed instead of abstaining),
latency p50/p95. Baselines run side by side on the same items: rules only, retrieval only (the
category of the top retrieved document), lexical only, dense only, and the full engine.
"""

from __future__ import annotations

import re
import statistics
import time
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable, Iterable, Sequence

from assistant.types import CATEGORIES

VARIANTS = ("full", "full-noatlas", "rules", "retrieval", "atlas", "lexical", "dense", "regex")


@dataclass(frozen=True)
class Item:
    """One thing to diagnose and what the answer must contain."""

    id: str
    text: str
    category: str
    must_mention: tuple[str, ...]
    must_not_mention: tuple[str, ...] = ()
    device: str = "text"
    probes: dict[str, Any] | None = None  # the `torchhelp run` record, when the capture has one
    remedy_only: bool = False  # must_mention names a remedy: judged on the fixes alone, never on cause or echoed error
    regex_labels: bool = False  # must_mention / must_not_mention are regular expressions (searched case-insensitively)
    source: str | None = None  # the report's link: its own resolved case (same id or thread) is left out when it is scored


@dataclass
class Prediction:
    category: str
    answer: str
    cited: tuple[str, ...]
    sources: tuple[str, ...]
    latency_ms: float
    backend: str = "none"
    fix_text: str = ""  # the fixes only (titles, details, code): where a remedy must appear
    hypotheses: tuple[tuple[float, str], ...] = ()  # (likelihood, cause + fixes text) per ranked hypothesis
    confidence: float | None = None  # the answer's likelihood that its category is right
    atlas_matched: bool | None = None  # the atlas recognised the message (atlas variant; the full engine: it named the check)
    checks: tuple[str, ...] | None = None  # each ranked hypothesis's check, in order (None: this variant ranks no causes)


@dataclass
class ItemResult:
    item: Item
    prediction: Prediction
    correct: bool
    mention_recall: float
    missing: tuple[str, ...]
    violations: tuple[str, ...]
    citations_valid: bool
    lead_right: bool = False  # right family, and the leading hypothesis carries the remedy (when the item names one)
    top3_remedy: bool = False  # the remedy is among the fixes of the three most likely hypotheses


@dataclass
class VariantReport:
    name: str
    results: list[ItemResult] = field(default_factory=list)

    def metrics(self, results: Sequence[ItemResult] | None = None) -> dict[str, Any]:
        rs = list(self.results if results is None else results)
        if not rs:
            return {"n": 0}
        expect_unknown = [r for r in rs if r.item.category == "unknown"]
        known = [r for r in rs if r.item.category != "unknown"]
        with_kw = [r for r in rs if r.item.must_mention]
        labelled = [r for r in rs if r.item.must_not_mention]
        lat = sorted(r.prediction.latency_ms for r in rs)
        return {
            "n": len(rs),
            "category_accuracy": round(sum(r.correct for r in rs) / len(rs), 4),
            "must_mention_recall": round(statistics.fmean(r.mention_recall for r in rs), 4),
            "remedy_hit": round(sum(r.mention_recall == 1.0 for r in with_kw) / len(with_kw), 4) if with_kw else None,
            "must_not_mention_violations": sum(bool(r.violations) for r in rs),
            # Share of labelled items whose answer states a cause or remedy the item's report rules out.
            "contradicted": round(sum(bool(r.violations) for r in labelled) / len(labelled), 4) if labelled else None,
            "citation_validity": round(sum(r.citations_valid for r in rs) / len(rs), 4),
            "abstention_correct": round(sum(r.prediction.category == "unknown" for r in expect_unknown) / len(expect_unknown), 4) if expect_unknown else None,
            "abstained_on_known": round(sum(r.prediction.category == "unknown" for r in known) / len(known), 4) if known else None,
            "wrong_guess_rate": round(sum(r.prediction.category not in ("unknown", r.item.category) for r in known) / len(known), 4) if known else None,
            "llm_accepted": round(sum(r.prediction.backend not in ("none", "") for r in rs) / len(rs), 4),
            "latency_ms_p50": round(_percentile(lat, 50), 2),
            "latency_ms_p95": round(_percentile(lat, 95), 2),
            **_hypothesis_metrics(rs, with_kw),
            **_confidence_metrics(rs),
            **_atlas_metrics(rs),
            **_check_metrics(rs),
        }

    def per_category(self) -> dict[str, dict[str, Any]]:
        cats = sorted({r.item.category for r in self.results})
        return {c: self.metrics([r for r in self.results if r.item.category == c]) for c in cats}

    def per_kind(self) -> dict[str, dict[str, Any]]:
        """Metrics per kind of input (traceback, bare message, prose, or the capture's device)."""
        kinds = sorted({r.item.device for r in self.results})
        return {k: self.metrics([r for r in self.results if r.item.device == k]) for k in kinds}


RELIABILITY_BINS = ((0.8, 1.01), (0.6, 0.8), (0.4, 0.6), (0.2, 0.4), (0.0, 0.2))


def _hypothesis_metrics(rs: Sequence[ItemResult], with_kw: Sequence[ItemResult]) -> dict[str, Any]:
    """Usefulness of the ranked hypotheses, and how well the leading one's likelihood is calibrated."""
    ranked = [r for r in rs if r.prediction.hypotheses]
    if not ranked:
        return {}
    bins = []
    for lo, hi in RELIABILITY_BINS:
        inside = [r for r in ranked if lo <= r.prediction.hypotheses[0][0] < hi]
        bins.append({"bin": f"{lo:.1f}–{min(hi, 1.0):.1f}", "n": len(inside),
                     "right": round(sum(r.lead_right for r in inside) / len(inside), 4) if inside else None,
                     "mean_likelihood": round(statistics.fmean(r.prediction.hypotheses[0][0] for r in inside), 4) if inside else None})
    kw_ranked = [r for r in with_kw if r.prediction.hypotheses]
    return {
        "hypotheses_per_answer": round(statistics.fmean(len(r.prediction.hypotheses) for r in ranked), 3),
        "lead_right": round(sum(r.lead_right for r in ranked) / len(ranked), 4),
        "top3_remedy_hit": round(sum(r.top3_remedy for r in kw_ranked) / len(kw_ranked), 4) if kw_ranked else None,
        "reliability": bins,
    }


def _check_metrics(rs: Sequence[ItemResult]) -> dict[str, Any]:
    """How many hypotheses carry a concrete check (:func:`assistant.eval.checks.is_concrete_check`).

    ``check_share`` counts every ranked hypothesis of every answer; ``lead_check_share`` counts answers, and an
    answer with no hypothesis at all (an abstention, a category with no differential) has no check to give.
    """
    from assistant.eval.checks import is_concrete_check

    seen = [r for r in rs if r.prediction.checks is not None]
    if not seen:
        return {}
    every = [c for r in seen for c in r.prediction.checks or ()]
    leads = [(r.prediction.checks or ("",))[0] for r in seen]
    return {
        "check_share": round(sum(map(is_concrete_check, every)) / len(every), 4) if every else None,
        "lead_check_share": round(sum(map(is_concrete_check, leads)) / len(leads), 4),
        "hypotheses_counted": len(every),
    }


def _atlas_metrics(rs: Sequence[ItemResult]) -> dict[str, Any]:
    """How often the atlas recognised the message, and (atlas variant) how often its category alone is right when it did."""
    seen = [r for r in rs if r.prediction.atlas_matched is not None]
    if not seen:
        return {}
    matched = [r for r in seen if r.prediction.atlas_matched]
    out: dict[str, Any] = {"atlas_matched": round(len(matched) / len(seen), 4)}
    decided = [r for r in matched if r.prediction.category != "unknown"]
    if decided and not any(r.prediction.hypotheses for r in decided):  # the atlas variant: its category alone
        out["atlas_category_accuracy_when_matched"] = round(sum(r.correct for r in decided) / len(decided), 4)
    return out


def _confidence_metrics(rs: Sequence[ItemResult]) -> dict[str, Any]:
    """How often the answered category is right per band of the answer's confidence (abstentions excluded)."""
    answered = [r for r in rs if r.prediction.confidence is not None and r.prediction.category != "unknown"]
    if not answered:
        return {}
    bins = []
    for lo, hi in RELIABILITY_BINS:
        inside = [r for r in answered if lo <= float(r.prediction.confidence or 0.0) < hi]
        bins.append({"bin": f"{lo:.1f}–{min(hi, 1.0):.1f}", "n": len(inside),
                     "right": round(sum(r.correct for r in inside) / len(inside), 4) if inside else None,
                     "mean_confidence": round(statistics.fmean(float(r.prediction.confidence or 0.0) for r in inside), 4) if inside else None})
    high = [r for r in answered if float(r.prediction.confidence or 0.0) >= 0.8]
    return {"category_reliability": bins, "high_confidence_right": round(sum(r.correct for r in high) / len(high), 4) if high else None,
            "high_confidence_share": round(len(high) / len(rs), 4)}


def _percentile(sorted_values: Sequence[float], pct: float) -> float:
    if not sorted_values:
        return 0.0
    k = (len(sorted_values) - 1) * pct / 100
    lo, hi = int(k), min(int(k) + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def stratified(items: Sequence[Item], limit: int) -> list[Item]:
    """Up to ``limit`` items, taking categories in turn (for slow backends)."""
    by_cat: dict[str, list[Item]] = {}
    for it in items:
        by_cat.setdefault(it.category, []).append(it)
    out: list[Item] = []
    while len(out) < min(limit, len(items)):
        for cat in sorted(by_cat):
            if by_cat[cat] and len(out) < limit:
                out.append(by_cat[cat].pop(0))
    return out


def items_from_captures(captures: Iterable[dict[str, Any]]) -> list[Item]:
    return [
        Item(c["slug"], c["stderr"] or c.get("stdout_tail", ""), c["category"], tuple(c.get("must_mention", ())), tuple(c.get("must_not_mention", ())),
             c.get("device", "cpu"), (c.get("probes") or {}).get("record"))
        for c in captures
    ]


def items_from_outside(cases) -> list[Item]:  # type: ignore[no-untyped-def]
    return [Item(c.id, c.error_text, c.category, c.fix_keywords, tuple(getattr(c, "must_not_claim", ())), c.kind or "outside", remedy_only=True,
                 regex_labels=getattr(c, "label_syntax", "substring") == "regex", source=c.source) for c in cases]


def retrieved_fixes(passages: Sequence[Any]) -> list[Any]:
    """Plain retrieval's answer, fixes only: the documented fixes of the retrieved documents in rank order (a
    document's structured Fixes entries, else the items of its retrieved Fixes passages), at most as many as the
    engine shows."""
    from assistant.compose.deterministic import extract_fixes
    from assistant.compose.documents import MAX_FIXES
    from assistant.kb.remedies import filled_fix, remedies_of

    out: list[Any] = []
    for doc_id in dict.fromkeys(p.doc_id for p in passages):
        rem = remedies_of(doc_id)
        if rem is not None and rem.fixes:
            out.extend(filled_fix(fx, {}) for fx in rem.fixes)
        else:
            text = "\n".join(p.text.split("\n", 1)[-1] for p in passages if p.doc_id == doc_id and p.section.lower().startswith("fix"))
            out.extend(extract_fixes(text))
        if len(out) >= MAX_FIXES:
            break
    return out[:MAX_FIXES]


def _answer_text(parts: Iterable[str | None]) -> str:
    return "\n".join(p for p in parts if p)


def _fix_text(fixes: Iterable[Any]) -> str:
    return "\n".join(f"{f.title}\n{f.detail}\n{f.code or ''}" for f in fixes)


def _present(phrase: str, answer: str, low: str, regex: bool = False) -> bool:
    """A label is present: a regex label when it matches anywhere (case-insensitive); a plain one when any of
    its ``|``-separated alternatives is a substring (case-insensitive)."""
    if regex:
        try:
            return re.search(phrase, answer, re.I) is not None
        except re.error:  # a label that is not a valid pattern is matched literally
            return phrase.lower() in low
    return any(alt.strip().lower() in low for alt in phrase.split("|") if alt.strip())


def _mentions(answer: str, phrases: Sequence[str], regex: bool = False) -> tuple[float, tuple[str, ...]]:
    low = answer.lower()
    missing = tuple(p for p in phrases if not _present(p, answer, low, regex))
    return ((len(phrases) - len(missing)) / len(phrases) if phrases else 1.0), missing


class Scorer:
    """Runs the variants over items with a shared settings object and retriever."""

    def __init__(self, settings, known_doc_ids: set[str], backend: str = "none") -> None:  # type: ignore[no-untyped-def]
        """``backend`` writes the plain "full" variant; "full+<name>" variants name their own."""
        from assistant.engine import Engine

        self.settings = settings
        self.engine = Engine(settings)
        self.known_doc_ids = known_doc_ids
        self.backend = backend

    def predict(self, variant: str, text: str, probes: dict[str, Any] | None = None, exclude_cases: Sequence[str] = ()) -> Prediction:
        from assistant.engine import build_query

        start = time.perf_counter()
        engine = self.engine
        if variant in ("full", "full-noatlas") or variant.startswith("full+"):
            backend = variant.split("+", 1)[1] if "+" in variant else self.backend
            if variant == "full-noatlas":
                engine = engine.with_settings(atlas=False)
            evidence = None
            if probes:
                from assistant.probes.collect import evidence_from_record

                evidence = evidence_from_record(probes)
            # "local:<model>" picks one of the bundled GGUF models (or a .gguf path) for the local backend.
            name, _, model = backend.partition(":")
            d = engine.with_settings(llm=name, local_model_path=model or None).diagnose(text, evidence=evidence, exclude_cases=exclude_cases)
            fixes = _fix_text(d.fixes)
            cited = tuple(s for f in d.fixes for s in f.sources)
            ranked = tuple((h.likelihood, _answer_text([h.cause, _fix_text(h.fixes)])) for h in d.hypotheses)
            return Prediction(d.category, _answer_text([d.title, d.summary, d.cause, fixes]), cited, tuple(s.id for s in d.sources),
                              (time.perf_counter() - start) * 1000, d.backend, fixes, ranked, d.confidence, bool(d.raised_by),
                              tuple(h.check for h in d.hypotheses))
        if variant == "regex":
            from assistant.eval.baseline import regex_category

            return Prediction(regex_category(text), "", (), (), (time.perf_counter() - start) * 1000)
        failure = engine.parse(engine.read(text))
        if variant == "atlas":
            # The category of the PyTorch check the atlas recognises in the message, alone ("unknown" when none or uncategorised).
            origin = engine.origin(failure)
            category = str(origin.entry.get("category") or "unknown") if origin is not None else "unknown"
            return Prediction(category if category in CATEGORIES else "unknown", origin.template if origin else "", (), (),
                              (time.perf_counter() - start) * 1000, "none", "", (), None, origin is not None)
        if variant == "rules":
            hit = engine.match(failure).hit
            if hit is None:
                return Prediction("unknown", "", (), (), (time.perf_counter() - start) * 1000)
            fixes = _fix_text(hit.fixes)
            return Prediction(hit.category, _answer_text([hit.title, hit.full_cause, fixes]), tuple(s for f in hit.fixes for s in f.sources), hit.doc_ids,
                              (time.perf_counter() - start) * 1000, "none", fixes)
        mode = {"retrieval": "hybrid", "lexical": "lexical", "dense": "dense"}[variant]
        retriever = engine.retriever(dense=mode != "lexical")
        passages = retriever.search(build_query(failure, None), k=self.settings.top_k, mode=mode, signature_text=failure.search_text)  # type: ignore[arg-type]
        top = passages[0] if passages else None
        category = top.category if top and top.category in CATEGORIES else "unknown"
        answer = _answer_text(p.text for p in passages[:3])
        ids = tuple(p.doc_id for p in passages)
        # Judged like the engine: a remedy counts when it is among at most as many documented fixes as an answer
        # lists, taken from the retrieved documents in rank order (not anywhere in three passages' prose).
        fixes = _fix_text(retrieved_fixes(passages))
        return Prediction(category, answer, ids[:1], ids, (time.perf_counter() - start) * 1000, "none", fixes)

    def score(self, items: Sequence[Item], variants: Sequence[str], progress: Callable[[str, int, int], None] | None = None) -> dict[str, VariantReport]:
        reports = {v: VariantReport(v) for v in variants}
        total = len(items) * len(variants)
        done = 0
        for variant in variants:
            for item in items:
                pred = self.predict(variant, item.text, item.probes, exclude_cases=tuple(x for x in (item.id, item.source) if x))
                recall, missing = _mentions(pred.fix_text if item.remedy_only else pred.answer, item.must_mention, item.regex_labels)
                _, present = _mentions(pred.answer, item.must_not_mention, item.regex_labels)
                violations = tuple(p for p in item.must_not_mention if p not in present)
                valid = all(c in pred.sources for c in pred.cited) and all(s in self.known_doc_ids for s in pred.sources)
                correct = pred.category == item.category
                lead_right, top3 = _hypotheses_right(item, pred, correct)
                reports[variant].results.append(ItemResult(item, pred, correct, recall, missing, violations, valid, lead_right, top3))
                done += 1
                if progress:
                    progress(variant, done, total)
        return reports


def _hypotheses_right(item: Item, pred: Prediction, correct: bool) -> tuple[bool, bool]:
    """(the leading hypothesis is right, the remedy is among the top three hypotheses' fixes).

    A hypothesis is right when the family is right and, for an item that names its remedy, that
    hypothesis's own cause and fixes carry it: the same test as the answer's remedy hit, per hypothesis.
    """
    if not pred.hypotheses or not correct:
        return False, False
    if not item.must_mention:
        return True, True
    hits = [_mentions(text, item.must_mention, item.regex_labels)[0] == 1.0 for _, text in pred.hypotheses[:3]]
    return hits[0], any(hits)
