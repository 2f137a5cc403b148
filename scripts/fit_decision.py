"""Fit the calibrated decision (assistant/decide/fitted.json) on the dev split only.

For every dev report: the rule's reading, unhinted retrieval, signature documents and the closest
resolved reports (its own case left out) become candidate feature vectors (assistant/decide/features.py).
A logistic regression scores candidates; out-of-fold shares (5 folds) fit an isotonic calibration of the
leading share and the abstention threshold; the final weights are fitted on all of dev.

For the dev_fresh2 reports the rule reading is the one the rules gave *before* they were tuned on those
reports (eval/decision/dev_fresh2_rules_before_tuning.json): on every other dev report the rules have
been tuned, and a decision fitted only on those would learn that a rule is never wrong.

    python scripts/fit_decision.py            # writes assistant/decide/fitted.json and eval/decision/fit_report.json
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEV_PARTS = ("dev.jsonl", "dev_fresh.jsonl", "dev_fresh2.jsonl")
BEFORE_TUNING = ROOT / "eval" / "decision" / "dev_fresh2_rules_before_tuning.json"
FOLDS = 5
SEED = 20261127


def _rows() -> list[dict]:
    rows = []
    for name in DEV_PARTS:
        for line in (ROOT / "eval" / "realworld" / name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                row["_part"] = name
                rows.append(row)
    return rows


def _dataset(rows: list[dict]):  # type: ignore[no-untyped-def]
    """Candidates per report, with the report's label."""
    from assistant.decide.features import candidates
    from assistant.engine import Engine
    from assistant.settings import load_settings
    from assistant.types import RuleHit

    engine = Engine(load_settings(llm="none"))
    before = json.loads(BEFORE_TUNING.read_text(encoding="utf-8"))["answers"]
    out = []
    for row in rows:
        failure = engine.parse(engine.read(row["error_text"]))
        hit = engine.match(failure).hit
        if row["_part"] == "dev_fresh2.jsonl" and row["id"] in before:
            old = before[row["id"]]
            hit = None if old["category"] is None else (replace(hit, category=old["category"], confidence=old["confidence"]) if hit is not None
                                                         else RuleHit(old["rule"] or "before-tuning", old["category"], "", "", (), confidence=old["confidence"]))
        proposals = engine.propose(failure, exclude_cases=(row["id"], row.get("source") or ""))
        cands = candidates(failure, hit, proposals.passages, proposals.signature_categories, proposals.similar)
        out.append((row, cands))
    return out


def _fit(pairs, c_value: float):  # type: ignore[no-untyped-def]
    from sklearn.linear_model import LogisticRegression

    xs = [list(c.values) for _, cands in pairs for c in cands]
    ys = [int(c.category == row["category"]) for row, cands in pairs for c in cands]
    # The bias is a feature column; sklearn's own intercept is off so the stored weights are the whole model.
    model = LogisticRegression(C=c_value, fit_intercept=False, max_iter=2000)
    model.fit(xs, ys)
    return tuple(float(w) for w in model.coef_[0])


def _shares(cands, weights):  # type: ignore[no-untyped-def]
    from assistant.decide.model import Fitted, raw_scores

    return raw_scores(cands, Fitted(weights, (), (), 0.0, {}))


def _oof(data, c_value: float):  # type: ignore[no-untyped-def]
    """Out-of-fold (lead category, lead share, label) per report."""
    import random

    order = list(range(len(data)))
    random.Random(SEED).shuffle(order)
    out = [None] * len(data)
    for k in range(FOLDS):
        held = set(order[k::FOLDS])
        weights = _fit([d for i, d in enumerate(data) if i not in held], c_value)
        for i in held:
            row, cands = data[i]
            shares = _shares(cands, weights) if cands else []
            out[i] = (shares[0][0], shares[0][1], row["category"], row) if shares else ("unknown", 0.0, row["category"], row)
    return out


def _isotonic(points):  # type: ignore[no-untyped-def]
    """Calibration table (x, y) from (share, right) pairs; a monotone fit, thinned to a few knots."""
    from sklearn.isotonic import IsotonicRegression

    xs = [p for p, _ in points]
    ys = [float(r) for _, r in points]
    iso = IsotonicRegression(y_min=0.02, y_max=0.98, out_of_bounds="clip").fit(xs, ys)
    knots = sorted(set([0.0, 1.0, *[round(x, 3) for x in iso.X_thresholds_]]))
    return knots, [round(float(v), 4) for v in iso.predict(knots)]


def _reliability(preds):  # type: ignore[no-untyped-def]
    bins = [(0.8, 1.01), (0.6, 0.8), (0.4, 0.6), (0.2, 0.4), (0.0, 0.2)]
    out = []
    for lo, hi in bins:
        inside = [right for p, right in preds if lo <= p < hi]
        out.append({"bin": f"{lo:.1f}-{min(hi, 1.0):.1f}", "n": len(inside), "right": round(sum(inside) / len(inside), 3) if inside else None})
    return out


def main() -> int:
    from assistant.decide.features import FEATURES

    t0 = time.time()
    rows = _rows()
    data = _dataset(rows)
    print(f"{len(rows)} dev reports, {sum(len(c) for _, c in data)} candidates ({time.time() - t0:.0f} s)", file=sys.stderr)
    covered = sum(any(c.category == row["category"] for c in cands) for row, cands in data)
    best = None
    for c_value in (0.1, 0.3, 1.0, 3.0):
        oof = _oof(data, c_value)
        acc = sum(cat == gold for cat, _, gold, _ in oof) / len(oof)
        print(f"C={c_value}: out-of-fold lead accuracy {acc:.3f}", file=sys.stderr)
        if best is None or acc > best[1] + 1e-9:
            best = (c_value, acc, oof)
    c_value, _, oof = best  # type: ignore[misc]
    knots, values = _isotonic([(share, cat == gold) for cat, share, gold, _ in oof])

    def calibrated(share: float) -> float:
        from assistant.decide.model import Fitted

        return Fitted((), tuple(knots), tuple(values), 0.0, {}).calibrate(share)

    # Abstain below the threshold that maximises out-of-fold accuracy, "unknown" counted right on unknown-labelled reports.
    scored = [(calibrated(share), cat, gold) for cat, share, gold, _ in oof]
    thresholds = sorted({0.0, *(round(p, 3) for p, _, _ in scored)})
    def accuracy(t: float) -> float:
        return sum(((cat if p >= t else "unknown") == gold) for p, cat, gold in scored) / len(scored)
    abstain = max(thresholds, key=lambda t: (round(accuracy(t), 4), -t))
    weights = _fit(data, c_value)
    reliability = _reliability([(p, cat == gold) for p, cat, gold in scored if p >= abstain])
    per_part = {}
    for part in DEV_PARTS:
        sub = [(p, cat, gold) for (p, cat, gold), (_, _, _, row) in zip(scored, oof, strict=True) if row["_part"] == part]
        per_part[part] = round(sum(((cat if p >= abstain else "unknown") == gold) for p, cat, gold in sub) / len(sub), 4)
    meta = {
        "fitted_on": "dev split only: " + ", ".join(DEV_PARTS), "reports": len(rows), "candidates": sum(len(c) for _, c in data),
        "gold_among_candidates": round(covered / len(rows), 4), "C": c_value, "folds": FOLDS, "seed": SEED,
        "out_of_fold_accuracy": round(accuracy(abstain), 4), "out_of_fold_accuracy_by_part": per_part,
        "out_of_fold_reliability": reliability, "date": time.strftime("%Y-%m-%d"),
    }
    fitted = {"features": list(FEATURES), "weights": [round(w, 5) for w in weights], "calibration": {"x": knots, "y": values},
              "abstain_below": abstain, "meta": meta}
    target = ROOT / "assistant" / "decide" / "fitted.json"
    target.write_text(json.dumps(fitted, indent=1) + "\n", encoding="utf-8")
    report = {**meta, "weights": dict(zip(FEATURES, [round(w, 4) for w in weights], strict=True)),
              "misses": [{"id": row["id"], "gold": gold, "lead": cat, "likelihood": round(p, 3)}
                         for (p, cat, gold), (_, _, _, row) in zip(scored, oof, strict=True) if (cat if p >= abstain else "unknown") != gold]}
    (ROOT / "eval" / "decision" / "fit_report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in meta.items() if k != "out_of_fold_reliability"}, indent=1), file=sys.stderr)
    print("reliability (out of fold):", reliability, file=sys.stderr)
    print("median candidates per report:", statistics.median(len(c) for _, c in data), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
