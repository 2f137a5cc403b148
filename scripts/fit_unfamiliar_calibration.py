"""Fit how often an answer to a report unlike every resolved report is right, at each likelihood the decision states.

The decision (``assistant/decide/fitted.json``) is calibrated on dev, whose documents, rules and resolved reports
were written with those very reports in view, so its likelihoods are those of familiar text. The answers each dev part
got while it was still unseen (``eval/decision/<part>_answers_before_tuning.json``, written by
``scripts/record_answers_before_tuning.py``) show what the same likelihood is worth on new text: where no resolved
report is a near-duplicate, a monotone fit of right-or-wrong against the stated likelihood gives the table in
``assistant/decide/unfamiliar.json`` (a step-wise isotonic fit, a smooth two-parameter one, or the smooth one with a
log-odds shift per family answered often enough, whichever scores better on parts it did not see). The engine lowers (never raises) such a report's likelihood to the table's value.

Each part is also left out in turn and scored with the table fitted on the others (the numbers in the file's meta).

    python scripts/fit_unfamiliar_calibration.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "assistant" / "decide" / "unfamiliar.json"
BANDS = ((0.9, 1.01), (0.8, 0.9), (0.6, 0.8), (0.3, 0.6), (0.0, 0.3))


Point = tuple[float, bool, str]  # (stated likelihood, right or not, the family answered)
Fit = tuple[list[float], list[float], dict[str, float]]  # a table (x, y) and a log-odds shift per family
MIN_FAMILY = 12  # a family gets its own shift only with this many answers to fit it on (fewer: the shared table alone)


def _load() -> dict[str, list[Point]]:
    """Per part: (likelihood, right, family) of every answered report with no near-duplicate resolved report."""
    from assistant.decide import NEAR_DUPLICATE

    parts: dict[str, list[Point]] = {}
    for path in sorted((ROOT / "eval" / "decision").glob("*_answers_before_tuning.json")):
        answers = json.loads(path.read_text(encoding="utf-8"))["answers"]
        parts[path.name.removesuffix("_answers_before_tuning.json")] = [
            (float(a["likelihood"]), a["category"] == a["label"], a["category"]) for a in answers.values()
            if a["category"] != "unknown" and a["closest_case"] < NEAR_DUPLICATE]
    return parts


def _logit(x: float) -> float:
    x = min(max(x, 0.01), 0.99)
    return math.log(x / (1 - x))


def fit_isotonic(points: list[Point]) -> Fit:
    """A monotone step table (x, y) through (likelihood, right) pairs, thinned to its knots."""
    from sklearn.isotonic import IsotonicRegression

    iso = IsotonicRegression(y_min=0.02, y_max=0.98, out_of_bounds="clip").fit([p for p, _, _ in points], [float(r) for _, r, _ in points])
    knots = sorted({0.0, 1.0, *(round(float(x), 4) for x in iso.X_thresholds_)})
    return knots, [round(float(v), 4) for v in iso.predict(knots)], {}


def _platt(points: list[Point], families: list[str], strength: float) -> Fit:
    from sklearn.linear_model import LogisticRegression

    rows = [[_logit(p), *(1.0 if c == f else 0.0 for f in families)] for p, _, c in points]
    model = LogisticRegression(C=strength).fit(rows, [int(r) for _, r, _ in points])
    a, b = float(model.coef_[0][0]), float(model.intercept_[0])
    knots = [round(i / 50, 2) for i in range(51)]
    shift = {f: round(float(w), 4) for f, w in zip(families, model.coef_[0][1:], strict=True)}
    return knots, [round(1 / (1 + math.exp(-(a * _logit(x) + b))), 4) for x in knots], shift


def fit_platt(points: list[Point]) -> Fit:
    """A smooth table: right-or-wrong regressed on the likelihood's log-odds (two parameters), tabulated."""
    return _platt(points, [], 100.0)


def fit_platt_by_family(points: list[Point]) -> Fit:
    """The smooth table plus a log-odds shift for each family answered often enough to fit one (held in check by an L2
    penalty, so a family seen a dozen times moves only as far as its answers insist)."""
    counts: dict[str, int] = {}
    for _, _, c in points:
        counts[c] = counts.get(c, 0) + 1
    return _platt(points, sorted(c for c, n in counts.items() if n >= MIN_FAMILY), 1.0)


FITS = {"isotonic": fit_isotonic, "platt": fit_platt, "platt_by_family": fit_platt_by_family}


def _apply(x: float, family: str, fit: Fit) -> float:
    from assistant.decide.model import Unfamiliar

    return Unfamiliar(tuple(fit[0]), tuple(fit[1]), 0.0, fit[2]).adjust(x, family)


def _bands(pairs: list[tuple[float, bool]]) -> list[dict]:
    """How often answers in each likelihood band were right."""
    out = []
    for lo, hi in BANDS:
        inside = [r for p, r in pairs if lo <= p < hi]
        out.append({"band": f"{lo:.1f}-{min(hi, 1.0):.1f}", "n": len(inside), "right": round(sum(inside) / len(inside), 3) if inside else None})
    return out


def _brier(pairs: list[tuple[float, bool]]) -> float:
    """Mean squared gap between likelihood and outcome (lower is better)."""
    return round(sum((p - r) ** 2 for p, r in pairs) / len(pairs), 4)


def main() -> int:
    from assistant.decide import NEAR_DUPLICATE

    parts = _load()
    every = [pt for pts in parts.values() for pt in pts]
    # Each way of fitting is judged on the parts it did not see; the better one (Brier score) is fitted on all parts.
    judged = {}
    for name_fit, fit in FITS.items():
        held_out, pooled = {}, []
        for name, pts in parts.items():
            table = fit([pt for other, ps in parts.items() if other != name for pt in ps])
            adjusted = [(_apply(p, c, table), r) for p, r, c in pts]
            pooled.extend(adjusted)
            held_out[name] = {"n": len(pts), "adjusted": _bands(adjusted)}
        judged[name_fit] = {"brier": _brier(pooled), "pooled": _bands(pooled), "per_part": held_out}
    chosen = min(judged, key=lambda k: judged[k]["brier"])
    xs, ys, shift = FITS[chosen](every)
    body = {
        "why": "Likelihood of an answer to a report with no near-duplicate resolved report, fitted on the answers dev parts "
               "got before anything was tuned on them (scripts/fit_unfamiliar_calibration.py).",
        "near_duplicate": NEAR_DUPLICATE, "fit": chosen, "x": xs, "y": ys, "category_shift": shift,
        "meta": {"parts": sorted(parts), "answers": len(every), "as_stated": {"brier": _brier([(p, r) for p, r, _ in every]),
                                                                              "bands": _bands([(p, r) for p, r, _ in every])},
                 "leave_one_part_out": judged},
    }
    OUT.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
    print("as stated", body["meta"]["as_stated"])
    for k, v in judged.items():
        print(k, v["brier"], v["pooled"])
    print("chosen:", chosen, OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
