"""Where extraction runs cannot change the result: local serial, a process pool and Ray give the same JSONL.

The Ray test starts a real local Ray instance (``ray.init(num_cpus=2)``) and runs ``triage(...,
engine="ray")``. The corpus comes from the corpus generator when it is there, else ~20 jobs are
built here from the real captures in eval/captured/.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import CAPTURED

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

_PICK = [
    "cpu/linear-after-conv-flatten", "cpu/linear-after-conv-flatten", "cpu/bce-with-logits-integer-labels",
    "cpu/checkpoint-dir-is-a-file", "cpu/collate-none-from-corrupt-sample", "cpu/module-missing-super-init",
    "cpu/truncated-checkpoint-download", "cuda/cuda-oom-fragmentation", "cuda/cuda-oom-fragmentation",
    "cuda/cuda-assert-ce-one-based-labels", "cuda/device-mismatch-labels-on-cpu", "cuda/nan-fp16-mse-overflow",
    "multi_gpu/nccl-allreduce-bincount-shape-mismatch", "multi_gpu/ddp-unused-parameters-aux-head",
]


def _build_corpus(logs: Path) -> None:
    """14 failed jobs (some sharing a cause, one gzipped, one per-rank, one loose file) and 6 succeeded."""
    for i, slug in enumerate(_PICK):
        text = json.loads((CAPTURED / f"{slug}.json").read_text(encoding="utf-8"))["stderr"]
        head = "".join(f"[2024-06-0{1 + i % 9} 0{i % 10}:1{s}:00] step {s * 100} loss {3 - s * 0.2:.2f}\n" for s in range(5))
        job = logs / f"job{i:03d}"
        job.mkdir()
        if i == 3:
            with gzip.open(job / "stdout.log.gz", "wt", encoding="utf-8") as fh:
                fh.write(head + text)
        elif i == 12:
            (job / "rank_0.log").write_text(head + text, encoding="utf-8")
            (job / "rank_1.log").write_text(head, encoding="utf-8")
        else:
            (job / f"slurm-{1000 + i}.out").write_text(f"SLURM_JOB_ID={1000 + i}\nSLURM_GPUS_ON_NODE=2\n" + head + text, encoding="utf-8")
    (logs / "loose-7.out").write_text("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                                      "    import apex\nModuleNotFoundError: No module named 'apex'\n", encoding="utf-8")
    for k in range(6):
        job = logs / f"ok{k:02d}"
        job.mkdir()
        (job / "stdout.log").write_text("".join(f"epoch {e} loss {1 / (e + 1):.3f}\n" for e in range(20)) + "Training complete.\n", encoding="utf-8")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("triage_corpus")
    try:
        from assistant.eval.triage_corpus import generate
    except ImportError:
        generate = None
    if generate is not None:
        generate(out, n_jobs=48, big_noise_mb=0)  # every trap at least once (the generator needs >= 43)
        return out / "logs"
    logs = out / "logs"
    logs.mkdir()
    _build_corpus(logs)
    return logs


@pytest.fixture(autouse=True)
def _hermetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHHELP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TORCHHELP_DENSE", "0")
    monkeypatch.setenv("TORCHHELP_LLM", "none")


@pytest.fixture(scope="module")
def local_rows(corpus: Path) -> list[dict]:
    from assistant.triage import triage

    rows = triage([corpus], diagnose_groups=False).jsonl_rows()
    assert len(rows) >= 20 and any(r["status"] == "failed" for r in rows) and any(r["status"] == "succeeded" for r in rows)
    return rows


@pytest.fixture(scope="module")
def local_ray() -> Iterator[object]:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield ray
    ray.shutdown()


def test_process_pool_gives_the_same_rows(corpus: Path, local_rows: list[dict], caplog: pytest.LogCaptureFixture) -> None:
    from assistant.triage import triage

    seen: list[str] = []
    with caplog.at_level("WARNING", logger="assistant.triage.distribute"):
        rows = triage([corpus], jobs=2, diagnose_groups=False, on_job=lambda r: seen.append(r.job_id)).jsonl_rows()
    assert not caplog.records, "the workers ran every job (no fallback to the main process)"
    assert rows == local_rows
    assert sorted(seen) == [r["job_id"] for r in local_rows]  # progress callback once per job


@pytest.mark.slow
def test_ray_engine_gives_the_same_rows(corpus: Path, local_rows: list[dict], local_ray: object) -> None:
    from assistant.triage import triage

    seen: list[str] = []
    rows = triage([corpus], engine="ray", diagnose_groups=False, on_job=lambda r: seen.append(r.job_id)).jsonl_rows()
    assert rows == local_rows
    assert sorted(seen) == [r["job_id"] for r in local_rows]
    assert local_ray.is_initialized(), "a Ray instance we did not start is left running"  # type: ignore[attr-defined]


@pytest.mark.slow
def test_ray_reports_equal_local_reports(corpus: Path, local_ray: object) -> None:
    from assistant.triage.distribute import extract_all
    from assistant.triage.jobs import discover

    specs = discover([corpus])
    assert extract_all(specs, engine="ray") == extract_all(specs)


@pytest.mark.slow
def test_ray_address_joins_an_existing_cluster_and_leaves_it_running(corpus: Path, local_rows: list[dict], local_ray: object, tmp_path: Path) -> None:
    """A second driver (another process) given the running cluster's address gets the same rows;
    disconnecting it does not stop the cluster."""
    import subprocess

    address = local_ray.get_runtime_context().gcs_address  # type: ignore[attr-defined]
    out = tmp_path / "rows.json"
    code = (
        "import json, sys; from assistant.triage import triage; "
        f"rows = triage([{str(corpus)!r}], engine='ray', ray_address={address!r}, diagnose_groups=False).jsonl_rows(); "
        f"open({str(out)!r}, 'w').write(json.dumps(rows))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert json.loads(out.read_text()) == local_rows
    assert local_ray.is_initialized()  # type: ignore[attr-defined]
    assert local_ray.get(local_ray.put(41)) == 41  # type: ignore[attr-defined]  # the cluster still answers


def test_ray_missing_is_a_clear_error(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.errors import TriageError
    from assistant.triage.distribute import extract_all
    from assistant.triage.jobs import discover

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(TriageError, match=r"pip install torchhelp\[ray\]"):
        extract_all(discover([corpus])[:2], engine="ray")


def test_bad_engine_and_jobs_are_refused(corpus: Path) -> None:
    from assistant.errors import TriageError
    from assistant.triage.distribute import extract_all

    with pytest.raises(TriageError, match="unknown triage engine"):
        extract_all([], engine="spark")
    with pytest.raises(TriageError, match="one per CPU"):
        extract_all([], jobs=-1)


def test_jobs_zero_uses_the_cpus_for_a_large_folder_only() -> None:
    from assistant.triage.distribute import POOL_MIN_JOBS, auto_jobs

    assert auto_jobs(POOL_MIN_JOBS - 1) == 1
    assert auto_jobs(POOL_MIN_JOBS) >= 1


def test_a_job_whose_extraction_raises_is_failed_unknown_not_hidden(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import assistant.triage.extract as extract_mod
    from assistant.triage.distribute import UNREADABLE, extract_all
    from assistant.triage.jobs import discover

    specs = discover([corpus])
    real = extract_mod.extract_job
    victim = specs[0].job_id

    def flaky(spec, options=None):  # type: ignore[no-untyped-def]
        if spec.job_id == victim:
            raise MemoryError("simulated")
        return real(spec, options)

    monkeypatch.setattr(extract_mod, "extract_job", flaky)
    reports = extract_all(specs)
    bad = reports[0]
    assert bad.job_id == victim and bad.status == "failed" and bad.category == "unknown" and bad.reason == UNREADABLE
    assert any(n.startswith("could not read: MemoryError: simulated") for n in bad.notes)
    assert bad.headline.endswith("MemoryError") and bad.failure_text  # groups by kind, diagnosable
    assert [r.job_id for r in reports] == [s.job_id for s in specs]  # the rest carried on


def test_chunks_cover_every_job_once_biggest_first(corpus: Path) -> None:
    from assistant.triage.distribute import chunk_specs
    from assistant.triage.jobs import discover

    specs = discover([corpus])
    chunks = chunk_specs(specs, 2)
    flat = [s.job_id for c in chunks for s in c]
    assert sorted(flat) == sorted(s.job_id for s in specs) and len(chunks) > 2
