"""Issue 20: jobs of one root cause that triage split into several groups, and GPU hours that came out short.

The failure texts are real (CPU captures in eval/captured/cpu); the launcher lines around them are the shapes the v2
triage corpus writes on its dev seed (torchrun's "[rankN]:" prefix, DeepSpeed's pdsh host blocks).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.triage.api import triage
from assistant.triage.extract import user_location

ROOT = Path(__file__).resolve().parents[1]
CPU = ROOT / "eval" / "captured" / "cpu"

pytestmark = pytest.mark.usefixtures("th_home")


def stderr_of(slug: str) -> str:
    """The stderr of one real CPU capture."""
    return json.loads((CPU / f"{slug}.json").read_text())["stderr"]


def write_job(tmp: Path, name: str, text: str) -> None:
    """One job folder holding one log file."""
    job = tmp / name
    job.mkdir(parents=True, exist_ok=True)
    (job / "train.log").write_text(text)


def rank_prefixed(text: str, rank: int) -> str:
    """Every line behind torchrun's "[rankN]:" prefix with no separating space (the line's own indent kept whole)."""
    return "".join(f"[rank{rank}]:{ln}\n" for ln in text.splitlines())


LINEAR = "linear-after-conv-flatten"
DEEPEST_USER_LINE = "    return self.classifier(x)"


def test_a_rank_prefix_that_eats_one_space_keeps_the_frames_source_line() -> None:
    """The reader drops "[rank3]: " with its space; the source line is still the line indented deeper than its frame."""
    from assistant.triage.reading import text_file

    lines = text_file(rank_prefixed(stderr_of(LINEAR), 3)).lines
    assert any(ln.text.startswith(' File "') for ln in lines)  # one space of the frame's indent went with the prefix
    text = "\n".join(ln.text for ln in lines)
    assert user_location(text) == "repro.py:forward: return self.classifier(x)"


def test_the_same_failure_behind_a_rank_prefix_joins_its_group(tmp_path: Path) -> None:
    """Two source lines of one function are two groups; a rank-prefixed job joins the one at its own source line."""
    base = stderr_of(LINEAR)
    assert DEEPEST_USER_LINE in base
    other_site = base.replace(DEEPEST_USER_LINE, "    return self.aux_head(pooled)")
    write_job(tmp_path, "a1", base)
    write_job(tmp_path, "b1", other_site)
    write_job(tmp_path, "c1", rank_prefixed(other_site, 5))
    write_job(tmp_path, "c2", rank_prefixed(base, 2))
    g = triage([tmp_path], diagnose_groups=False).group_of
    assert g["a1"] != g["b1"]
    assert g["c1"] == g["b1"] and g["c2"] == g["a1"]


def test_gpu_hours_span_the_earliest_and_latest_stamp_not_the_first_and_last_line(tmp_path: Path) -> None:
    """DeepSpeed over pdsh prints each host's output as one block: the file's last line is not its latest."""
    host_blocks = (
        "[2025-01-31 10:15:20,180] [INFO] [multinode_runner.py:80:get_cmd] Running on the following workers: gpu-388,gpu-008\n"
        "gpu-388: [2025-01-31 10:15:20,180] [INFO] [launch.py:152:main] nnodes=2, num_local_procs=4, node_rank=0\n"
        "gpu-388: 2025-01-31 12:15:20,000 - INFO - __main__ - step 6666/20000 | loss 2.3258 | lr 2.46e-04 | 204965 tok/s\n"
        + "".join(f"gpu-388: {ln}\n" for ln in stderr_of(LINEAR).splitlines())
        + "gpu-008: [2025-01-31 10:15:20,180] [INFO] [launch.py:152:main] nnodes=2, num_local_procs=4, node_rank=1\n"
        "gpu-008: 2025-01-31 10:15:58,875 - INFO - __main__ - rank 7 ready on gpu-008 cuda:3\n"
    )
    write_job(tmp_path, "ds", "SLURM_GPUS=8\n" + host_blocks)
    job = triage([tmp_path], diagnose_groups=False).job("ds")
    assert job.gpu_hours == pytest.approx(8 * 2.0)


DATA = ROOT / "tests" / "data" / "triage_split"  # excerpts of the v2 triage corpus's dev seed (100), job by job


def test_a_spawn_childs_print_cut_by_a_kernel_assert_is_read_from_the_traceback_behind_it(tmp_path: Path) -> None:
    """mp.spawn's quoted child error is cut by the kernel's assert line; the traceback behind it names error and frame."""
    spawn = (DATA / "spawn_device_assert.log").read_text()
    child = spawn[spawn.rindex("Traceback (most recent call last):"):]
    write_job(tmp_path, "spawn", spawn)
    write_job(tmp_path, "single", "2025-10-14 11:52:49,221 - INFO - __main__ - step 100/1000\n" + child)
    result = triage([tmp_path], diagnose_groups=False)
    job = result.job("spawn")
    assert job.headline == "RuntimeError: CUDA error: device-side assert triggered"
    assert job.location == "model.py:forward: tok = self.tok_emb(idx)"
    assert result.group_of["spawn"] == result.group_of["single"]


def test_a_chain_is_one_failure_grouped_by_the_cause_it_was_raised_from(tmp_path: Path) -> None:
    """``raise ... from e`` across a blank line is one traceback (pdsh host prefixes or not); the cause splits groups."""
    write_job(tmp_path, "ds", (DATA / "deepspeed_worker_killed.log").read_text())
    write_job(tmp_path, "rank3", (DATA / "rank3_worker_killed.log").read_text())
    write_job(tmp_path, "shm", (DATA / "rank1_worker_bus_error.log").read_text())
    result = triage([tmp_path], diagnose_groups=False)
    ds = result.job("ds")
    assert ds.headline.startswith("RuntimeError: DataLoader worker (pid(s) 1422002) exited unexpectedly")
    assert ds.location == "train.py:train: for step, batch in enumerate(train_loader):"
    g = result.group_of
    assert g["ds"] == g["rank3"]
    assert g["shm"] != g["rank3"]  # same wrapper at the same frame, but not raised from a worker killed by a signal


def test_two_pytorch_wordings_of_one_failure_at_one_statement_are_one_group(tmp_path: Path) -> None:
    """Older PyTorch says "expected scalar type Float but found Half", newer "expected mat1 and mat2 to have the same
    dtype": one rule names both; at the same source line they are one group, at another line another group."""
    old = (DATA / "lightning_half_vs_float.log").read_text()
    old_words = "RuntimeError: expected scalar type Float but found Half"
    new_words = "RuntimeError: expected mat1 and mat2 to have the same dtype, but got: float != c10::Half"
    assert old_words in old
    write_job(tmp_path, "old", old)
    write_job(tmp_path, "new", old.replace(old_words, new_words))
    write_job(tmp_path, "other", old.replace(old_words, new_words).replace("    logits = self.lm_head(h)", "    h = self.proj(x)"))
    g = triage([tmp_path], diagnose_groups=False).group_of
    assert g["old"] == g["new"]
    assert g["other"] != g["new"]


def without_source(text: str) -> str:
    """The traceback as Python prints it when the source files are not on the node: frames without source lines."""
    return "".join(ln + "\n" for ln in text.splitlines() if not ln.startswith("    "))


def test_a_log_without_source_lines_joins_the_group_at_its_line_number(tmp_path: Path) -> None:
    """One function, two statements, two groups: a job whose log shows no source line joins the one at its line."""
    base = stderr_of(LINEAR)
    frame = '  File "/tmp/torchhelp-case-92veqald/job/repro.py", line 41, in forward'
    assert frame in base and DEEPEST_USER_LINE in base
    other_site = base.replace(DEEPEST_USER_LINE, "    return self.aux_head(pooled)").replace(frame, frame.replace("line 41", "line 45"))
    write_job(tmp_path, "a1", base)
    write_job(tmp_path, "b1", other_site)
    write_job(tmp_path, "c1", without_source(other_site))
    write_job(tmp_path, "c2", without_source(base))
    result = triage([tmp_path], diagnose_groups=False)
    assert result.job("c1").location == "repro.py:forward: " and result.job("c1").location_line == 45
    g = result.group_of
    assert g["a1"] != g["b1"]
    assert g["c1"] == g["b1"] and g["c2"] == g["a1"]


def test_the_line_numbers_survive_a_saved_grouper(tmp_path: Path) -> None:
    """Watch mode saves the grouper between runs: a source-less job after a restart still finds its line's group."""
    from assistant.triage.grouping import Grouper, group_reports

    base = stderr_of(LINEAR)
    frame = '  File "/tmp/torchhelp-case-92veqald/job/repro.py", line 41, in forward'
    other_site = base.replace(DEEPEST_USER_LINE, "    return self.aux_head(pooled)").replace(frame, frame.replace("line 41", "line 45"))
    write_job(tmp_path, "a1", base)
    write_job(tmp_path, "b1", other_site)
    write_job(tmp_path, "c1", without_source(other_site))
    jobs = {j.job_id: j for j in triage([tmp_path], diagnose_groups=False).jobs}
    ids, grouper = group_reports([jobs["a1"], jobs["b1"]])
    restored = Grouper.from_json(json.loads(json.dumps(grouper.to_json())))
    assert restored.key(jobs["c1"]) == ids["b1"]


def test_the_span_counts_pytorchs_yearless_c10_stamps(tmp_path: Path) -> None:
    """mp.spawn's last lines are c10 log lines ("W1014 12:03:13.734285 ..."), stamped without a year."""
    spawn = (DATA / "spawn_device_assert.log").read_text()
    assert spawn.startswith("Tue Oct 14 11:52:40 UTC 2025\n") and "\nW1014 12:03:13.734285 " in spawn
    write_job(tmp_path, "spawn", "SLURM_GPUS=8\n" + spawn)
    job = triage([tmp_path], diagnose_groups=False).job("spawn")
    assert job.gpu_hours == pytest.approx(8 * (10 * 60 + 33) / 3600)  # 11:52:40 to 12:03:13


def test_deepspeeds_batch_assertion_is_not_a_world_size(tmp_path: Path) -> None:
    """"... * world_size 272 != 16 * 2 * 8" names a batch size; the job ran 8 processes (world_size=8, dist_world_size=8)."""
    write_job(tmp_path, "ds", (DATA / "deepspeed_batch_assertion.log").read_text())
    job = triage([tmp_path], diagnose_groups=False).job("ds")
    assert job.gpus == 8
