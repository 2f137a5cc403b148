"""Score triage rows (the JSONL contract) against a corpus's ``truth.jsonl``.

:func:`score` reports, over the jobs of the truth:

- detection precision / recall / F1, positive = failed;
- category accuracy over truly failed jobs (a job we call succeeded counts wrong);
- grouping over truly failed jobs: pairwise precision / recall / F1 and the adjusted Rand index
  (ARI, from the contingency table); a job we call succeeded, or failed without a group, is a
  group of its own;
- first-failing-rank accuracy over truly failed jobs (null == null is right);
- top-5 groups by GPU hours: the share of the true top 5 (summed truth ``gpu_hours``, ties by job
  count) whose majority predicted group is among our top 5 (summed predicted ``gpu_hours``);
- GPU hours: median relative error over failed jobs that have truth hours (a missing prediction
  counts as error 1.0), and the share of them we gave hours for;
- a per-trap breakdown (detection and category accuracy, first rank accuracy).

A job missing from the predictions counts as succeeded with every field null.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from typing import Any

FAILED = "failed"
_EMPTY = {"status": "succeeded", "group": None, "category": None, "first_failing_rank": None, "gpu_hours": None}


def _comb2(n: int) -> int:
    return n * (n - 1) // 2


def _ratio(num: float, den: float, empty: float = 1.0) -> float:
    return num / den if den else empty


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


def pair_counts(labels_true: Sequence[Hashable], labels_pred: Sequence[Hashable]) -> tuple[int, int, int, int]:
    """(pairs together in both, pairs together in truth, pairs together in prediction, all pairs)."""
    if len(labels_true) != len(labels_pred):
        raise ValueError("label sequences differ in length")
    cells = Counter(zip(labels_true, labels_pred, strict=True))
    both = sum(_comb2(n) for n in cells.values())
    true_pairs = sum(_comb2(n) for n in Counter(labels_true).values())
    pred_pairs = sum(_comb2(n) for n in Counter(labels_pred).values())
    return both, true_pairs, pred_pairs, _comb2(len(labels_true))


def adjusted_rand_index(labels_true: Sequence[Hashable], labels_pred: Sequence[Hashable]) -> float:
    """Hubert and Arabie's adjusted Rand index of two flat clusterings of the same items.

    1.0 for identical partitions (including the degenerate all-singletons / all-one-cluster cases
    where the formula is 0/0), about 0 for a random one, negative when worse than chance.
    """
    both, true_pairs, pred_pairs, total = pair_counts(labels_true, labels_pred)
    if total == 0:
        return 1.0
    expected = true_pairs * pred_pairs / total
    maximum = (true_pairs + pred_pairs) / 2
    if maximum == expected:
        return 1.0
    return (both - expected) / (maximum - expected)


def _ranked_groups(rows: Sequence[dict[str, Any]]) -> list[tuple[str, float, int]]:
    """(group, summed hours, job count) ranked by hours, then job count, then name."""
    hours: dict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    for r in rows:
        g = r.get("group")
        if r.get("status") != FAILED or g is None:
            continue
        hours[g] += float(r.get("gpu_hours") or 0.0)
        count[g] += 1
    return sorted(((g, hours[g], count[g]) for g in count), key=lambda t: (-t[1], -t[2], str(t[0])))


def _pred_label(job_id: str, p: dict[str, Any]) -> Hashable:
    if p.get("status") == FAILED and p.get("group") is not None:
        return ("pred", p["group"])
    return ("single", job_id)


def _acc(hits: Sequence[bool]) -> float | None:
    return round(sum(hits) / len(hits), 4) if hits else None


def score(pred_rows: Sequence[dict[str, Any]], truth_rows: Sequence[dict[str, Any]], top_k: int = 5) -> dict[str, Any]:
    """All triage measures of ``pred_rows`` against ``truth_rows`` (see the module docstring)."""
    truth = {r["job_id"]: r for r in truth_rows}
    given = {r["job_id"]: r for r in pred_rows}
    pred = {j: given.get(j, _EMPTY) for j in truth}
    ids = sorted(truth)
    failed_ids = [j for j in ids if truth[j]["status"] == FAILED]

    tp = sum(1 for j in ids if truth[j]["status"] == FAILED and pred[j].get("status") == FAILED)
    fp = sum(1 for j in ids if truth[j]["status"] != FAILED and pred[j].get("status") == FAILED)
    fn = len(failed_ids) - tp
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)

    def called_failed(j: str) -> bool:
        return pred[j].get("status") == FAILED

    category_hits = [called_failed(j) and pred[j].get("category") == truth[j]["category"] for j in failed_ids]
    rank_hits = [(pred[j].get("first_failing_rank") if called_failed(j) else None) == truth[j]["first_failing_rank"] for j in failed_ids]

    labels_true = [truth[j]["group"] for j in failed_ids]
    labels_pred = [_pred_label(j, pred[j]) for j in failed_ids]
    both, true_pairs, pred_pairs, _ = pair_counts(labels_true, labels_pred)
    pair_p, pair_r = _ratio(both, pred_pairs), _ratio(both, true_pairs)

    true_ranked = _ranked_groups([truth[j] for j in ids])[:top_k]
    pred_ranked = _ranked_groups([dict(pred[j], job_id=j) for j in ids])
    pred_top = [g for g, _, _ in pred_ranked[:top_k]]
    majority: dict[str, Any] = {}
    for g, _, _ in true_ranked:
        members = [j for j in failed_ids if truth[j]["group"] == g]
        votes = Counter(pred[j].get("group") if called_failed(j) else None for j in members)
        majority[g] = sorted(votes.items(), key=lambda kv: (-kv[1], str(kv[0])))[0][0]
    top_hits = [g for g, _, _ in true_ranked if majority[g] is not None and majority[g] in pred_top]

    errors: list[float] = []
    covered = 0
    for j in failed_ids:
        t = truth[j].get("gpu_hours")
        if not t:
            continue
        p = pred[j].get("gpu_hours")
        if p is None:
            errors.append(1.0)
        else:
            covered += 1
            errors.append(abs(float(p) - float(t)) / float(t))

    per_trap: dict[str, dict[str, Any]] = {}
    for trap in sorted({truth[j].get("trap", "") for j in ids}):
        members = [j for j in ids if truth[j].get("trap", "") == trap]
        failed = [j for j in members if truth[j]["status"] == FAILED]
        per_trap[trap] = {
            "jobs": len(members),
            "truth": "failed" if failed else "succeeded",
            "detection": _acc([(pred[j].get("status") == FAILED) == (truth[j]["status"] == FAILED) for j in members]),
            "category": _acc([called_failed(j) and pred[j].get("category") == truth[j]["category"] for j in failed]),
            "first_rank": _acc([(pred[j].get("first_failing_rank") if called_failed(j) else None) == truth[j]["first_failing_rank"] for j in failed]),
        }
    per_category: dict[str, dict[str, Any]] = {}
    for cat in sorted({str(truth[j]["category"]) for j in failed_ids}):
        members = [j for j in failed_ids if str(truth[j]["category"]) == cat]
        per_category[cat] = {"jobs": len(members), "accuracy": _acc([called_failed(j) and pred[j].get("category") == truth[j]["category"] for j in members])}

    return {
        "jobs": len(ids),
        "failed": len(failed_ids),
        "missing_predictions": sum(1 for j in ids if j not in given),
        "extra_predictions": sum(1 for j in given if j not in truth),
        "detection": {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(_f1(precision, recall), 4),
                      "tp": tp, "fp": fp, "fn": fn, "tn": len(ids) - tp - fp - fn},
        "category_accuracy": _acc(category_hits),
        "grouping": {"pairwise_precision": round(pair_p, 4), "pairwise_recall": round(pair_r, 4), "pairwise_f1": round(_f1(pair_p, pair_r), 4),
                     "ari": round(adjusted_rand_index(labels_true, labels_pred), 4),
                     "true_groups": len(set(labels_true)), "predicted_groups": len(set(labels_pred))},
        "first_rank_accuracy": _acc(rank_hits),
        "top5_gpu_hours": {"score": round(_ratio(len(top_hits), len(true_ranked)), 4),
                           "true": [{"group": g, "gpu_hours": round(h, 3), "jobs": n, "our_group": majority[g]} for g, h, n in true_ranked],
                           "ours": [{"group": g, "gpu_hours": round(h, 3), "jobs": n} for g, h, n in pred_ranked[:top_k]]},
        "gpu_hours": {"median_relative_error": round(statistics.median(errors), 4) if errors else None,
                      "coverage": round(_ratio(covered, len(errors), 0.0), 4), "jobs": len(errors)},
        "per_trap": per_trap,
        "per_category": per_category,
    }


def headline(result: dict[str, Any]) -> dict[str, float | None]:
    """The flat numbers a table or a threshold file compares."""
    return {
        "detection_precision": result["detection"]["precision"],
        "detection_recall": result["detection"]["recall"],
        "detection_f1": result["detection"]["f1"],
        "category_accuracy": result["category_accuracy"],
        "pairwise_f1": result["grouping"]["pairwise_f1"],
        "ari": result["grouping"]["ari"],
        "first_rank_accuracy": result["first_rank_accuracy"],
        "top5_gpu_hours": result["top5_gpu_hours"]["score"],
        "gpu_hours_median_rel_error": result["gpu_hours"]["median_relative_error"],
    }
