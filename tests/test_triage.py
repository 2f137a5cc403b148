"""Triage's core: jobs, reading, failed-or-not, first failing rank, GPU hours, sacct, grouping, API and CLI.

Failure texts are real: the 2-rank logs captured on an H100 pair (eval/triage/gpu_captured) and the
CPU captures (eval/captured/cpu). Around them go launcher and scheduler lines in the formats
Slurm, bash and torchrun print.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from assistant.errors import TriageError
from assistant.triage.api import build_result, triage
from assistant.triage.extract import ExtractOptions, extract_job
from assistant.triage.jobs import discover
from assistant.triage.model import FAILED, SUCCEEDED
from assistant.triage.reading import read_file, rank_from_path

ROOT = Path(__file__).resolve().parents[1]
GPU_JOBS = ROOT / "eval" / "triage" / "gpu_captured"
CPU = ROOT / "eval" / "captured" / "cpu"

pytestmark = pytest.mark.usefixtures("th_home")


def stderr_of(slug: str) -> str:
    return json.loads((CPU / f"{slug}.json").read_text())["stderr"]


def only(tmp: Path, name: str, text: str | bytes) -> Path:
    """One job folder holding one log file."""
    job = tmp / name
    job.mkdir(parents=True, exist_ok=True)
    path = job / "slurm-1.out"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return job


def report_of(tmp: Path, name: str, text: str | bytes):  # type: ignore[no-untyped-def]
    job = only(tmp, name, text)
    return extract_job(next(s for s in discover([tmp]) if s.job_id == job.name), RULES)


RULES = ExtractOptions(categorize=True)  # per-job rules, as `triage` applies them per group
SLURM_HEAD = (
    "SLURM_JOB_ID=424242\nSLURM_JOB_NUM_NODES=2\nSLURM_GPUS_ON_NODE=4\n"
    "2024-05-01 10:00:00,000 INFO starting training\n"
)
PROGRESS = "".join(f"2024-05-01 10:{m:02d}:00,000 INFO epoch 1 step {m * 10} loss {2.5 - m / 100:.3f}\n" for m in range(1, 30))


# --- jobs -----------------------------------------------------------------------------------------

def test_discover_subdirectories_and_loose_files(tmp_path: Path) -> None:
    (tmp_path / "job-a").mkdir()
    (tmp_path / "job-a" / "rank_0.log").write_text("x\n")
    (tmp_path / "job-a" / "model.pt").write_bytes(b"\x00" * 10)  # never a log
    (tmp_path / "1234.out").write_text("x\n")
    (tmp_path / "1234.err").write_text("y\n")
    (tmp_path / "job-0412.log.gz").write_bytes(gzip.compress(b"z\n"))
    (tmp_path / ".hidden.log").write_text("h\n")
    specs = discover([tmp_path])
    assert [s.job_id for s in specs] == ["1234", "job-0412", "job-a"]
    assert [Path(f).name for f in specs[0].files] == ["1234.err", "1234.out"]
    assert [Path(f).name for f in specs[2].files] == ["rank_0.log"]


def test_discover_globs_and_several_directories(tmp_path: Path) -> None:
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / f"job-{d}.log").write_text("x\n")
    assert [s.job_id for s in discover([str(tmp_path / "*")])] == ["job-a", "job-b"]
    assert [s.job_id for s in discover([tmp_path / "a", tmp_path / "b"])] == ["job-a", "job-b"]


def test_discover_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(TriageError, match="no such file"):
        discover([tmp_path / "missing"])
    with pytest.raises(TriageError, match="no job logs"):
        discover([tmp_path])
    with pytest.raises(TriageError, match="no files match"):
        discover([str(tmp_path / "nothing-*")])


# --- reading --------------------------------------------------------------------------------------

def test_reading_strips_colours_progress_redraws_and_rank_prefixes(tmp_path: Path) -> None:
    p = tmp_path / "log.txt"
    p.write_bytes(b"\x1b[32mINFO\x1b[0m ok\n" + b"\r".join(b"%d%%|##| %d/100" % (i, i) for i in range(101)) + b"\n[rank3]: Traceback (most recent call last):\n")
    lines = read_file(str(p), 0).lines
    assert lines[0].text == "INFO ok"
    assert lines[1].text == "100%|##| 100/100"
    assert (lines[2].rank, lines[2].text) == (3, "Traceback (most recent call last):")


def test_reading_non_utf8_binary_and_damaged_gzip(tmp_path: Path) -> None:
    bad = tmp_path / "bad.log"
    bad.write_bytes(b"caf\xe9 \xff\xfe ok\n")
    assert "ok" in read_file(str(bad), 0).lines[0].text
    binary = tmp_path / "core.log"
    binary.write_bytes(os.urandom(4096) + b"\x00" * 4096)
    r = read_file(str(binary), 0)
    # Random bytes may begin with a NUL (one run in 256): that note then comes first, before the binary verdict.
    assert not r.readable and any("binary" in note for note in r.notes), r.notes
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(gzip.compress(("line\n" * 50000 + stderr_of("linear-after-conv-flatten")).encode())[:-40])
    r = read_file(str(cut), 0)
    assert r.readable and "damaged or cut" in r.notes[0] and r.lines


def test_reading_keeps_head_and_tail_of_big_files(tmp_path: Path) -> None:
    p = tmp_path / "big.log"
    with p.open("w") as fh:
        fh.write("SLURM_GPUS_ON_NODE=8\n")
        line = "2024-05-01 10:00:00,000 INFO epoch 1 step 10 loss 2.000\n"
        fh.write(line * 60000)  # ~3.4 MB
        fh.write(stderr_of("linear-after-conv-flatten"))
    r = read_file(str(p), 0, head_bytes=64 * 1024, tail_bytes=256 * 1024)
    assert r.gap_after is not None and "not read" in r.notes[0]
    assert r.lines[0].text == "SLURM_GPUS_ON_NODE=8"
    assert any("mat1 and mat2" in ln.text for ln in r.lines[-5:])


def test_rank_from_per_rank_file_names() -> None:
    assert rank_from_path("/j/rank_3.log") == 3
    assert rank_from_path("/j/worker-12.out") == 12
    assert rank_from_path("/j/run/attempt_0/5/stderr.log") == 5
    assert rank_from_path("/j/stdout.log") is None


# --- failed or not ---------------------------------------------------------------------------------

def test_uncaught_exception_at_the_end_fails_the_job(tmp_path: Path) -> None:
    r = report_of(tmp_path, "j", SLURM_HEAD + PROGRESS + stderr_of("linear-after-conv-flatten"))
    assert r.status == FAILED and r.category == "shape_mismatch" and r.first_failing_rank is None
    assert r.location and "repro.py" in r.location


def test_survived_tracebacks_warnings_and_metric_names_do_not_fail_a_job(tmp_path: Path) -> None:
    caught = (GPU_JOBS / "caught_retry_then_success-torchrun" / "stdout.log").read_text()
    assert "ConnectionError" in caught
    shutdown = SLURM_HEAD + PROGRESS + (
        "2024-05-01 11:00:00,000 INFO val error 0.124 error_rate 0.03\n"
        "/usr/lib/python3/site-packages/torch/nn/modules/module.py:1: UserWarning: this is deprecated\n"
        "2024-05-01 11:00:01,000 WARNING non-finite gradient norm nan, skipping step\n"
        "node12:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so.\n"
        "Training complete\n"
        "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f>\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 1479, in __del__\n'
        "    self._shutdown_workers()\n"
        "AttributeError: '_MultiProcessingDataLoaderIter' object has no attribute '_workers_status'\n"
    )
    for name, text in (("caught", caught), ("shutdown", shutdown)):
        assert report_of(tmp_path, name, text).status == SUCCEEDED, name


def test_log_cut_inside_the_traceback_is_still_a_failure(tmp_path: Path) -> None:
    text = stderr_of("linear-after-conv-flatten")
    cut = text[: text.index("RuntimeError")]
    r = report_of(tmp_path, "cut", SLURM_HEAD + PROGRESS + cut)
    assert r.status == FAILED


def test_scheduler_verdicts_and_signals_without_a_traceback(tmp_path: Path) -> None:
    cases = {
        "tl": ("slurmstepd: error: *** JOB 424242 ON gpu-node-7 CANCELLED AT 2024-05-01T14:00:00 DUE TO TIME LIMIT ***\n", "time_limit"),
        "nf": ("slurmstepd: error: *** JOB 424242 ON gpu-node-7 CANCELLED AT 2024-05-01T14:00:00 DUE TO NODE FAILURE ***\n", "node_failure"),
        "oom": ("slurmstepd: error: Detected 1 oom_kill event(s) in StepId=424242.batch. Some of your processes may have been killed by the cgroup out-of-memory handler.\n", "oom_kill"),
        "killed": ("/var/spool/slurmd/job424242/slurm_script: line 14: 81234 Killed                  python train.py --config cfg.yaml\n", "killed"),
        "segv": ("Segmentation fault (core dumped)\n", "segfault"),
    }
    for name, (tail, reason) in cases.items():
        r = report_of(tmp_path, name, SLURM_HEAD + PROGRESS + tail)
        assert r.status == FAILED and r.reason == reason, name
        if reason != "segfault":  # a bare segfault says nothing of its cause: unknown is the honest answer
            assert r.category not in (None, "unknown"), name


# --- multi-rank: the real failure -------------------------------------------------------------------

EXPECTED_GPU_JOBS = {
    "all_ranks_config_key-torchrun": (FAILED, "python_error", None),
    "all_ranks_import_error-torchrun": (FAILED, "environment_error", None),
    "caught_retry_then_success-torchrun": (SUCCEEDED, None, None),
    # rank 1 never joins the all_reduce; only rank 0 times out: not every rank hung, rank 0 failed
    "hang_mismatched_collectives-torchrun": (FAILED, "nccl_error", 0),
    "one_rank_device_assert-torchrun": (FAILED, "device_side_assert", 1),
    "one_rank_oom-tee": (FAILED, "cuda_oom", 1),
    "one_rank_oom-torchrun": (FAILED, "cuda_oom", 1),
    "one_rank_shape-torchrun": (FAILED, "shape_mismatch", 1),
    "one_rank_segfault-torchrun": (FAILED, None, 1),
    "one_rank_sigkill-spawn": (FAILED, None, 1),
    "one_rank_sigkill-torchrun": (FAILED, None, 1),
    "one_rank_value_error-spawn": (FAILED, "python_error", 1),
    "one_rank_value_error-tee": (FAILED, "python_error", 1),
    "one_rank_value_error-torchrun": (FAILED, "python_error", 1),
}


@pytest.fixture(scope="module")
def gpu_result():  # type: ignore[no-untyped-def]
    return triage([GPU_JOBS], diagnose_groups=False)


@pytest.mark.parametrize("job_id", sorted(EXPECTED_GPU_JOBS))
def test_real_two_rank_jobs(gpu_result, job_id: str) -> None:  # type: ignore[no-untyped-def]
    status, category, rank = EXPECTED_GPU_JOBS[job_id]
    r = gpu_result.job(job_id)
    assert r.status == status
    if category is not None:
        assert r.category == category
    assert r.first_failing_rank == rank


def test_cascade_category_comes_from_the_first_rank_not_the_watchdogs(tmp_path: Path) -> None:
    """Rank 2 dies of an uncorrectable ECC error; ranks 0, 1, 3 then time out in the collective."""
    dump = (GPU_JOBS / "hang_mismatched_collectives-torchrun" / "stdout.log").read_text()
    watchdog = next(ln for ln in dump.splitlines() if "Watchdog caught collective operation timeout" in ln)
    watchdog = watchdog.split("]:", 1)[-1] if watchdog.startswith("[rank") else watchdog
    job = tmp_path / "ecc"
    job.mkdir()
    (job / "rank_2.log").write_text(
        "2024-05-01 10:00:00,000 INFO epoch 1 step 10 loss 2.000\n"
        "2024-05-01 10:05:00,000 INFO epoch 1 step 20 loss 1.900\n"
        "Traceback (most recent call last):\n"
        '  File "/home/u/train.py", line 88, in <module>\n'
        "    loss.backward()\n"
        "RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    )
    for r in (0, 1, 3):
        (job / f"rank_{r}.log").write_text(
            "2024-05-01 10:00:00,000 INFO epoch 1 step 10 loss 2.000\n"
            "2024-05-01 10:05:00,000 INFO epoch 1 step 20 loss 1.900\n"
            f"2024-05-01 10:15:01,000 ERROR {watchdog.replace('[Rank 0]', f'[Rank {r}]')}\n"
        )
    report = extract_job(discover([tmp_path])[0], RULES)
    assert report.status == FAILED and report.first_failing_rank == 2
    assert report.category == "hardware_error"


# --- GPU hours, sacct ----------------------------------------------------------------------------------

def test_gpu_hours_from_slurm_variables_and_timestamps(tmp_path: Path) -> None:
    r = report_of(tmp_path, "h", SLURM_HEAD + PROGRESS + "2024-05-01 12:00:00,000 INFO saving\n" + stderr_of("linear-after-conv-flatten"))
    assert r.gpus == 8  # 4 per node x 2 nodes
    assert r.gpu_hours == pytest.approx(8 * 2.0)


def test_gpu_count_from_nvidia_smi_listing(tmp_path: Path) -> None:
    smi = (ROOT / "eval" / "triage" / "gpu_captured.md").read_text()
    listing = "\n".join(ln for ln in smi.splitlines() if ln.startswith("GPU "))
    r = report_of(tmp_path, "smi", listing + "\n2024-05-01 10:00:00 start\n2024-05-01 11:30:00 x\n" + stderr_of("linear-after-conv-flatten"))
    assert r.gpus == 2 and r.gpu_hours == pytest.approx(3.0)


def test_sacct_wins_where_it_covers_a_job(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    only(logs, "424242", SLURM_HEAD + PROGRESS)  # looks like it ran fine
    only(logs, "777", SLURM_HEAD + PROGRESS + stderr_of("linear-after-conv-flatten"))
    sacct = tmp_path / "sacct.txt"
    sacct.write_text(
        "JobID|JobName|State|ExitCode|Start|End|Elapsed|AllocTRES|NodeList\n"
        "424242|train|TIMEOUT|0:0|2024-05-01T10:00:00|2024-05-01T14:00:00|04:00:00|billing=64,cpu=64,gres/gpu=16,mem=512G,node=2|gpu-node-[1-2]\n"
        "424242.batch|batch|CANCELLED|0:15|2024-05-01T10:00:00|2024-05-01T14:00:00|04:00:00|cpu=32,mem=256G,node=1|gpu-node-1\n"
        "777|train|FAILED|1:0|2024-05-01T10:00:00|2024-05-01T11:00:00|01:00:00|billing=8,cpu=8,gres/gpu:h100=4,node=1|gpu-node-3\n"
    )
    result = triage([logs], sacct=sacct, diagnose_groups=False)
    timed_out = result.job("424242")
    assert timed_out.status == FAILED and timed_out.reason == "time_limit" and timed_out.gpu_hours == pytest.approx(64.0)
    assert result.job("777").gpu_hours == pytest.approx(4.0) and result.job("777").category == "shape_mismatch"
    bad = tmp_path / "bad.txt"
    bad.write_text("not sacct output\n")
    with pytest.raises(TriageError, match="parsable2"):
        triage([logs], sacct=bad, diagnose_groups=False)


# --- attempts -------------------------------------------------------------------------------------------

def test_the_final_attempt_decides(tmp_path: Path) -> None:
    job = tmp_path / "requeued"
    (job / "attempt_0").mkdir(parents=True)
    (job / "attempt_1").mkdir()
    (job / "attempt_0" / "stdout.log").write_text(SLURM_HEAD + stderr_of("linear-after-conv-flatten"))
    (job / "attempt_1" / "stdout.log").write_text(SLURM_HEAD + PROGRESS + "Training complete\n")
    assert extract_job(discover([tmp_path])[0]).status == SUCCEEDED
    shutil.rmtree(job)
    job.mkdir()
    (job / "stdout.log.1").write_text(SLURM_HEAD + PROGRESS + "Training complete\n")
    (job / "stdout.log").write_text(SLURM_HEAD + stderr_of("linear-after-conv-flatten"))
    assert extract_job(discover([tmp_path])[0]).status == FAILED


# --- grouping ----------------------------------------------------------------------------------------------

def _variant(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new)


def test_grouping_by_root_cause_not_by_message(tmp_path: Path) -> None:
    base = stderr_of("linear-after-conv-flatten")
    line = next(ln for ln in base.splitlines() if "mat1 and mat2" in ln)
    other_numbers = line.replace(line[line.index("("):], "(128x9999 and 512x10)")
    deepest_user_line = "    return self.classifier(x)"
    jobs = {
        "a1": base,
        "a2": _variant(base, line, other_numbers),  # another batch / feature size: same cause
        "a3": _variant(base, "/job/repro.py", "/other/user/dir/repro.py"),  # another path: same cause
        "b1": _variant(base, deepest_user_line, "    return self.aux_head(pooled)"),  # same message, other code: other group
        "c1": stderr_of("dataset-relative-path-not-found"),
        "c2": stderr_of("config-key-renamed-keyerror"),
    }
    for name, text in jobs.items():
        only(tmp_path, name, SLURM_HEAD + PROGRESS + text)
    result = triage([tmp_path], diagnose_groups=False)
    g = result.group_of
    assert g["a1"] == g["a2"] == g["a3"]
    assert g["b1"] != g["a1"]
    assert len({g["c1"], g["c2"], g["a1"]}) == 3


def test_result_ranks_groups_by_gpu_hours_and_diagnoses_each(tmp_path: Path) -> None:
    only(tmp_path, "big", "SLURM_GPUS=64\n2024-05-01 10:00:00 start\n2024-05-01 20:00:00 x\n" + stderr_of("config-key-renamed-keyerror"))
    for i in range(3):
        only(tmp_path, f"small{i}", "SLURM_GPUS=1\n2024-05-01 10:00:00 start\n2024-05-01 11:00:00 x\n" + stderr_of("linear-after-conv-flatten"))
    result = triage([tmp_path])
    assert [len(g.job_ids) for g in result.groups] == [1, 3]
    assert result.groups[0].gpu_hours == pytest.approx(640.0)
    d = result.groups[1].diagnosis
    assert d is not None and d.category == "shape_mismatch" and d.sources
    rows = result.jsonl_rows()
    assert [r["job_id"] for r in rows] == sorted(r["job_id"] for r in rows)
    assert set(rows[0]) == {"job_id", "status", "group", "category", "first_failing_rank", "gpu_hours", "files", "title", "reason"}
    again = build_result(list(result.jobs), diagnose_groups=False)
    assert again.group_of == result.group_of


def test_python_api_is_importable_from_the_package(tmp_path: Path) -> None:
    from assistant import triage as api

    only(tmp_path, "x", stderr_of("linear-after-conv-flatten"))
    assert api([tmp_path], diagnose_groups=False).job("x").status == FAILED


# --- memory and the command line ------------------------------------------------------------------------

def test_a_1gb_log_is_read_in_flat_memory(tmp_path: Path) -> None:
    """A 1 GB plain log and a gzip log of 300 MB decompressed: peak RSS of the whole child stays low."""
    job = tmp_path / "huge"
    job.mkdir()
    block = ("2024-05-01 10:00:00,000 INFO epoch 1 step 10 loss 2.000 " + "x" * 60 + "\n") * 8192
    with (job / "train.log").open("w") as fh:
        for _ in range(1024 * 1024 * 1024 // len(block) + 1):
            fh.write(block)
        fh.write(stderr_of("linear-after-conv-flatten"))
    with gzip.open(job / "train.log.1.gz", "wt", compresslevel=1) as fh:
        for _ in range(300 * 1024 * 1024 // len(block) + 1):
            fh.write(block)
    code = (
        "import resource, sys; from assistant.triage.jobs import discover; from assistant.triage.extract import extract_job\n"
        "r = extract_job(discover([sys.argv[1]])[0]); assert r.status == 'failed', r\n"
        # VmHWM, not ru_maxrss: a forked child's ru_maxrss starts at the parent's peak (pytest's own memory).
        "print(int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) // 1024)\n"
    )
    try:
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300, env={**os.environ, "TORCHHELP_DENSE": "0"})
    finally:
        shutil.rmtree(job)  # pytest keeps old temp dirs; a gigabyte each is too much to keep
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.strip().splitlines()[-1]) < 300


def test_cli_writes_every_output_and_errors_in_one_line(tmp_path: Path) -> None:
    from assistant.cli import main

    out = tmp_path / "out"
    code = main(["triage", str(GPU_JOBS), "--jsonl", str(out / "t.jsonl"), "--groups-json", str(out / "g.json"),
                 "--markdown", str(out / "r.md"), "--html", str(out / "r.html"), "--quiet"])
    assert code == 0
    rows = [json.loads(ln) for ln in (out / "t.jsonl").read_text().splitlines()]
    assert len(rows) == len(EXPECTED_GPU_JOBS)
    groups = json.loads((out / "g.json").read_text())
    assert groups and all(g["diagnosis"]["category"] for g in groups)
    assert "<html" in (out / "r.html").read_text() and (out / "r.md").read_text().startswith("#")
    assert main(["triage", str(tmp_path / "nope")]) == 2


def test_every_rank_timing_out_is_a_hang_with_no_first_rank(tmp_path: Path) -> None:
    dump = (GPU_JOBS / "hang_mismatched_collectives-torchrun" / "stdout.log").read_text()
    watchdog = next(ln for ln in dump.splitlines() if "Watchdog caught collective operation timeout" in ln).split("]:", 1)[-1]
    job = tmp_path / "hang"
    job.mkdir()
    for r in range(4):
        (job / f"rank_{r}.log").write_text(
            "2024-05-01 10:00:00,000 INFO epoch 1 step 10 loss 2.000\n"
            f"2024-05-01 10:15:0{r},000 ERROR {watchdog.replace('[Rank 0]', f'[Rank {r}]')}\n"
        )
    report = extract_job(discover([tmp_path])[0], RULES)
    assert (report.status, report.category, report.first_failing_rank, report.reason) == (FAILED, "nccl_error", None, "collective_timeout")


def test_the_same_nccl_error_on_every_rank_has_no_first_rank(tmp_path: Path) -> None:
    """Real H200 log: both ranks on one GPU, NCCL refuses on both (DistBackendError is their own error, not fallout)."""
    capture = json.loads((ROOT / "eval" / "captured" / "multi_gpu" / "nccl-duplicate-gpu-no-set-device.json").read_text())
    r = report_of(tmp_path, "dup", capture["stderr"])
    assert (r.status, r.category, r.first_failing_rank) == (FAILED, "nccl_error", None)
