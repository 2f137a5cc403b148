"""The usefulness eval: contradiction labels from a sidecar file, top-three remedy hits, reliability bins.

Runs `torchhelp eval score` for real on a small case file (texts from captured runs) with a claims
sidecar, and reads the results document it writes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from assistant.errors import EvalError
from assistant.eval.cases import load_claims, load_outside_cases, with_claims

ROOT = Path(__file__).resolve().parents[1]


def _capture(rel: str) -> str:
    return json.loads((ROOT / "eval" / "captured" / rel).read_text(encoding="utf-8"))["stderr"]


def _write_cases(tmp_path: Path) -> tuple[Path, Path]:
    oom = _capture("cuda/cuda-oom-big-vocab-backward.json")
    cases = [
        # The report's story is a resume: an answer leading with a smaller batch is contradicted by it.
        {"id": "oom-resume", "error_text": "Only when resuming from a checkpoint on 4 GPUs:\n" + oom, "category": "cuda_oom", "fix_keywords": ["map_location"]},
        {"id": "oom-plain", "error_text": oom, "category": "cuda_oom", "fix_keywords": ["batch"]},
        {"id": "prefix", "error_text": _capture("cpu/load-dataparallel-checkpoint-module-prefix.json"), "category": "state_dict_loading", "fix_keywords": ["module."]},
    ]
    case_file = tmp_path / "cases.jsonl"
    case_file.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    claims = tmp_path / "claims.jsonl"
    claims.write_text(
        json.dumps({"id": "oom-resume", "must_not_claim": ["reduce the batch|shrink the micro-batch"], "why": "the thread shows a resume"}) + "\n"
        + json.dumps({"id": "oom-plain", "must_not_claim": ["micro-batch|batch size"], "why": "a label the plain answer does state"}) + "\n",
        encoding="utf-8",
    )
    return case_file, claims


def test_claims_attach_by_id_and_bad_lines_are_named(tmp_path: Path) -> None:
    case_file, claims = _write_cases(tmp_path)
    cases = with_claims(load_outside_cases(case_file), load_claims(claims))
    by_id = {c.id: c for c in cases}
    assert by_id["oom-plain"].must_not_claim == ("micro-batch|batch size",) and by_id["prefix"].must_not_claim == ()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "must_not_claim": ["a"]}\nnot json\n', encoding="utf-8")
    with pytest.raises(EvalError, match=r"bad.jsonl:2"):
        load_claims(bad)


def test_eval_score_reports_contradictions_top3_and_reliability(tmp_path: Path) -> None:
    case_file, claims = _write_cases(tmp_path)
    env = {**os.environ, "TORCHHELP_HOME": str(tmp_path / "home"), "TORCHHELP_DENSE": "0", "TORCHHELP_LLM": "none"}
    run = subprocess.run([sys.executable, "-m", "assistant", "eval", "score", "--cases", str(case_file), "--claims", str(claims),
                          "--variants", "full", "--name", "mini", "--results-dir", str(tmp_path / "res")],
                         capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    overall = json.loads((tmp_path / "res" / "mini.json").read_text())["variants"]["full"]["overall"]
    # Two labelled cases: the resume answer leads with map_location (no smaller batch); the plain one does state its labelled claim.
    assert overall["contradicted"] == 0.5
    assert overall["top3_remedy_hit"] == 1.0
    assert sum(b["n"] for b in overall["reliability"]) == 3
    report = (tmp_path / "res" / "REPORT.md").read_text()
    assert "Reliability of the leading hypothesis" in report and "| likelihood | n | right |" in report


def test_ceilings_bound_rates_where_lower_is_better() -> None:
    """`<metric>_max` keys are ceilings: a contradiction rate above one fails the check, one below passes;
    plain keys stay floors."""
    from assistant.eval.report import check_thresholds, describe_thresholds

    doc = {"name": "dev", "variants": {"full": {"overall": {"contradicted": 0.12, "remedy_hit": 0.7}}}}
    assert check_thresholds(doc, {"remedy_hit": 0.6, "contradicted_max": 0.15}) == []
    problems = check_thresholds(doc, {"remedy_hit": 0.8, "contradicted_max": 0.1})
    assert len(problems) == 2 and "above the recorded ceiling 0.1" in problems[1] and "below the recorded floor 0.8" in problems[0]
    assert describe_thresholds({"remedy_hit": 0.6, "contradicted_max": 0.15}) == "remedy_hit >= 0.6, contradicted <= 0.15"
