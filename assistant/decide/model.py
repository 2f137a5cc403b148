"""The fitted decision: a logistic score per candidate, shared out, then calibrated.

The weights, the calibration table and the abstention threshold live in ``fitted.json`` beside this
module, written by ``scripts/fit_decision.py`` from the dev split only (with the numbers it measured).
Inference is plain Python: no NumPy or scikit-learn at run time.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from assistant.decide.features import FEATURES, Candidate
from assistant.errors import KnowledgeError

FITTED = Path(__file__).with_name("fitted.json")


@dataclass(frozen=True)
class Fitted:
    """What the fit produced: a weight per feature, a monotone calibration table, an abstention threshold."""

    weights: tuple[float, ...]
    calib_x: tuple[float, ...]
    calib_y: tuple[float, ...]
    abstain_below: float
    meta: dict

    def calibrate(self, raw: float) -> float:
        """The calibrated probability for a raw share (piecewise linear through the fitted table)."""
        return piecewise(raw, self.calib_x, self.calib_y)


def piecewise(x: float, xs: Sequence[float], ys: Sequence[float]) -> float:
    """The value at ``x`` of the piecewise-linear function through the knots (xs, ys), flat beyond them; ``x`` itself
    when there are no knots."""
    if not xs:
        return x
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    i = bisect.bisect_right(xs, x)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)


UNFAMILIAR = Path(__file__).with_name("unfamiliar.json")


@dataclass(frozen=True)
class Unfamiliar:
    """What a likelihood is worth on a report unlike every resolved one (fitted on dev parts' answers from before
    anything was tuned on them): a monotone table the engine lowers such a likelihood to."""

    xs: tuple[float, ...]
    ys: tuple[float, ...]
    near_duplicate: float
    # Log-odds added for an answered family whose answers were worth more or less than the table says (python_error,
    # for one, was right far less often than its stated likelihood on new text); families not named get none.
    shift: Mapping[str, float] = field(default_factory=dict)

    def adjust(self, likelihood: float, category: str | None = None) -> float:
        """The likelihood, lowered to what the table (and the family's shift) says answers stated at it were worth
        (never raised)."""
        worth = piecewise(likelihood, self.xs, self.ys)
        step = self.shift.get(category, 0.0) if category else 0.0
        if step and 0.0 < worth < 1.0:
            worth = 1.0 / (1.0 + math.exp(-(math.log(worth / (1.0 - worth)) + step)))
        return min(likelihood, worth)


@lru_cache(maxsize=2)
def load_unfamiliar(path: str | None = None) -> Unfamiliar | None:
    """The fitted table (None when the file is absent: likelihoods are then left as the decision states them)."""
    file = Path(path) if path else UNFAMILIAR
    if not file.exists():
        return None
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        shift = {str(k): float(v) for k, v in data.get("category_shift", {}).items()}
        return Unfamiliar(tuple(float(x) for x in data["x"]), tuple(float(y) for y in data["y"]), float(data["near_duplicate"]), shift)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise KnowledgeError(f"the unfamiliar-report calibration is unreadable ({file}): {exc}") from None


MODES = ("hybrid", "lexical")  # retrieval with embeddings, or lexical only (TORCHHELP_DENSE=0): fitted separately


@lru_cache(maxsize=4)
def load_fitted(mode: str = "hybrid", path: str | None = None) -> Fitted:
    """The fitted decision for a retrieval mode (read once per process)."""
    file = Path(path) if path else FITTED
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        body = data["modes"][mode]
    except (OSError, ValueError, KeyError) as exc:
        raise KnowledgeError(f"the fitted decision is missing or unreadable ({file}, mode {mode}): {exc}") from None
    names = tuple(data["features"])
    if names != FEATURES:
        raise KnowledgeError(f"{file} was fitted for other features ({', '.join(names)}); run scripts/fit_decision.py")
    return Fitted(tuple(float(w) for w in body["weights"]), tuple(body["calibration"]["x"]), tuple(body["calibration"]["y"]),
                  float(body["abstain_below"]), dict(body.get("meta", {})))


def raw_scores(cands: Sequence[Candidate], fitted: Fitted) -> list[tuple[str, float]]:
    """Each candidate's share: its logistic probability, normalised so the shares sum to at most one."""
    probs = []
    for c in cands:
        z = sum(w * x for w, x in zip(fitted.weights, c.values, strict=True))
        probs.append(1.0 / (1.0 + math.exp(-max(min(z, 30.0), -30.0))))
    total = max(1.0, sum(probs))
    return sorted(((c.category, p / total) for c, p in zip(cands, probs, strict=True)), key=lambda cp: -cp[1])
