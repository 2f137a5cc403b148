"""One failure per job, one rank logic: ``ask`` (a pasted log, or a job's folder) names the error and the first
failing rank that ``triage`` names for the same job (issue 20, item 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

from assistant.engine import default_engine
from assistant.triage.extract import categorize, extract_job
from assistant.triage.jobs import discover, job_of_folder
from assistant.triage.verdict import verdict_of_text

GPU_LOGS = ROOT / "eval" / "triage" / "gpu_captured"  # real 2-rank jobs captured on H100s


def _read(path: str) -> str:
    import gzip

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:  # type: ignore[operator]
        return fh.read()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from assistant.eval.triage_corpus import generate

    out = tmp_path_factory.mktemp("one-rank")
    generate(out, n_jobs=160, seed=5, big_noise_mb=0)
    return out


@pytest.mark.parametrize("job", sorted(p.name for p in GPU_LOGS.iterdir() if p.is_dir()))
def test_ask_on_a_real_multi_rank_log_names_what_triage_names(job: str) -> None:
    spec = job_of_folder(GPU_LOGS / job)
    report = categorize(extract_job(spec))
    if report.status != "failed":
        pytest.skip("the job succeeded")
    text = "\n".join(_read(f) for f in spec.files)
    failure = default_engine().parse(text)
    assert failure.rank == report.first_failing_rank
    assert default_engine().diagnose(text).category == report.category


def test_ask_agrees_with_triage_on_every_multi_rank_job_of_a_generated_corpus(corpus: Path) -> None:
    """A single log is read as text (what a user pastes); a job of several files as its folder (``ask <folder>``)."""
    engine = default_engine()
    truth = {json.loads(line)["job_id"]: json.loads(line) for line in (corpus / "truth.jsonl").read_text().splitlines()}
    seen = 0
    disagree = []
    for spec in discover([corpus / "logs"]):
        report = categorize(extract_job(spec))
        if report.status != "failed" or (report.ranks_seen <= 1 and truth[spec.job_id]["first_failing_rank"] is None):
            continue
        seen += 1
        if len(spec.files) == 1:
            text = _read(spec.files[0])
            diagnosis = engine.diagnose(text)
            rank = engine.parse(text).rank
        else:
            diagnosis = engine.diagnose(report.failure_text or report.headline, failing_rank=report.first_failing_rank)
            rank = report.first_failing_rank
        if rank != report.first_failing_rank or diagnosis.category != report.category:
            disagree.append((spec.job_id, rank, diagnosis.category, report.first_failing_rank, report.category))
    assert seen >= 20
    assert not disagree, disagree


def test_a_single_process_traceback_is_left_to_the_parser() -> None:
    capture = json.loads((ROOT / "eval" / "captured" / "cpu" / "accumulated-loss-backward.json").read_text())
    assert verdict_of_text(capture["stderr"]) is None


def test_ask_reads_a_job_folder_with_per_rank_files(tmp_path: Path) -> None:
    """Per-rank files carry their rank in the name only: the folder is read as triage reads it (CLI, real files)."""
    job = GPU_LOGS / "one_rank_value_error-tee"
    spec = job_of_folder(job)
    report = categorize(extract_job(spec))
    out = subprocess.run([sys.executable, "-m", "assistant", "ask", str(job), "--format", "json"], capture_output=True, text=True,
                         env={**__import__("os").environ, "TORCHHELP_HOME": str(tmp_path), "TORCHHELP_DENSE": "0"}, timeout=120)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["category"] == report.category
    if report.first_failing_rank is not None:
        assert any(e["kind"] == "rank" and str(report.first_failing_rank) in e["text"] for e in answer["evidence"])
