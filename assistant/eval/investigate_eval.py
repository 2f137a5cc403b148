"""`torchhelp eval reproduce --investigate`: what the experiments change, case by case.

Each case runs twice: once plain (the program's own failing run, for its time) and once under
``torchhelp run --investigate --yes``, which writes the diagnosis before and after the experiments.
Per case: the category and whether the first fix is right (every ``must_mention`` of the case in the
cause and first fix) before and after, the experiments and their outcomes, whether any verified or
ruled out a hypothesis, and the time against the plain run.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any
from collections.abc import Callable

from assistant.eval.cases import Case
from assistant.eval.reproduce import run_case


def first_fix_right(answer: dict[str, Any], case: Case) -> bool:
    """Every phrase the case requires appears in the cause or the first fix (case-insensitive)."""
    fixes = answer.get("fixes") or []
    first = fixes[0] if fixes else {}
    text = " ".join(str(x) for x in (answer.get("cause", ""), first.get("title", ""), first.get("detail", ""), first.get("code") or "")).lower()
    return all(m.lower() in text for m in case.must_mention)


def _lead(answer: dict[str, Any]) -> str | None:
    hyps = answer.get("hypotheses") or []
    return hyps[0]["id"] if hyps else answer.get("rule")


def investigate_case(case: Case, python: str | None = None, budget_s: float | None = None) -> dict[str, Any]:
    """One case: a plain run, then a run under --investigate; the row the summary is made of."""
    plain = run_case(case, python)
    with tempfile.TemporaryDirectory(prefix="torchhelp-inv-") as tmp:
        before_path, after_path = Path(tmp) / "before.json", Path(tmp) / "after.json"
        runner = [python or sys.executable, "-m", "assistant", "run", "--investigate", "--yes", "--report", str(after_path),
                  "--report-before", str(before_path)]
        if budget_s is not None:
            runner += ["--budget", str(budget_s)]
        # The case's time limit is for one run; the investigation re-runs it within its own bound (4x the failing run).
        run = run_case(case, python, runner=runner, timeout_factor=5.0)
        before = _load(before_path)
        after = _load(after_path)
    if after is None:
        after = before
    experiments = (after or {}).get("experiments") or []
    ran = [e for e in experiments if e.get("outcome") != "not_run"]
    row = {
        "slug": case.slug, "device": case.device, "expected": case.category,
        "plain_s": round(plain.duration_s, 2), "investigate_s": round(run.duration_s, 2),
        "time_ratio": round(run.duration_s / plain.duration_s, 2) if plain.duration_s > 0 else None,
        "before": _summary(before, case), "after": _summary(after, case),
        "experiments": [{k: e.get(k) for k in ("id", "outcome", "finding", "verified", "ruled_out", "duration_s")} for e in experiments],
        "applied": bool(ran),
        "settled": any(e.get("verified") or e.get("ruled_out") for e in ran),
        "reproduced": plain.matched(),
    }
    return row


def _load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _summary(answer: dict[str, Any] | None, case: Case) -> dict[str, Any]:
    if answer is None:
        return {"category": None, "lead": None, "fix_right": False, "category_right": False}
    return {"category": answer.get("category"), "lead": _lead(answer), "category_right": answer.get("category") == case.category,
            "fix_right": first_fix_right(answer, case)}


def summarise(rows: list[dict[str, Any]], machine: dict[str, Any]) -> dict[str, Any]:
    """Shares before/after, the share of answers an experiment settled (among those where one ran), and time ratios."""
    n = len(rows) or 1
    applied = [r for r in rows if r["applied"]]
    ratios = [r["time_ratio"] for r in rows if r["time_ratio"] is not None and r["applied"]]
    return {
        "cases": len(rows),
        "category_before": round(sum(r["before"]["category_right"] for r in rows) / n, 3),
        "category_after": round(sum(r["after"]["category_right"] for r in rows) / n, 3),
        "first_fix_before": round(sum(r["before"]["fix_right"] for r in rows) / n, 3),
        "first_fix_after": round(sum(r["after"]["fix_right"] for r in rows) / n, 3),
        "with_experiment": len(applied),
        "settled_share": round(sum(r["settled"] for r in applied) / len(applied), 3) if applied else None,
        "lead_changed": sum(1 for r in applied if r["before"]["lead"] != r["after"]["lead"]),
        "time_ratio_median": round(statistics.median(ratios), 2) if ratios else None,
        "time_ratio_max": round(max(ratios), 2) if ratios else None,
        "machine": machine,
    }


def investigate_cases(cases: list[Case], out: Path, python: str | None = None, budget_s: float | None = None,
                      on_row: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run every case, write ``out`` (summary and rows, as JSON), and return the summary."""
    from assistant.eval.reproduce import machine_summary
    from assistant.probes.env import collect_environment

    machine = machine_summary(collect_environment(python))
    rows = []
    for case in cases:
        row = investigate_case(case, python, budget_s)
        rows.append(row)
        if on_row:
            on_row(row)
    summary = summarise(rows, machine)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return summary
