"""`torchhelp run --investigate`: real failing programs re-run with one change each (CPU here; the CUDA
experiments are exercised on the device machine, see tests/test_gpu_investigate.py).

Every program below fails for real under torch; the assertions read the Diagnosis JSON `--report`
writes (its `experiments` list) and what the terminal showed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from llm_servers import free_port
from test_run_signals import run_on_terminal

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process sessions, ptys and /proc")

WORKER_KEYERROR = """
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Labels(Dataset):
        def __init__(self):
            self.by_name = {"cat": 0, "dog": 1}
            self.names = ["cat", "dog", "cat", "Dog"]
        def __len__(self):
            return len(self.names)
        def __getitem__(self, i):
            return torch.tensor(self.by_name[self.names[i]])

    if __name__ == "__main__":
        for batch in DataLoader(Labels(), batch_size=2, num_workers=2):
            pass
"""

EMBEDDING_OUT_OF_RANGE = """
    import torch
    import torch.nn as nn

    vocab = nn.Embedding(10, 4)
    token_ids = torch.tensor([[1, 2, 3], [4, 12, 5]])
    print(vocab(token_ids).shape)
"""

NAN_IN_DATA = """
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    features = torch.randn(16, 4)
    features[:, 2] = (features[:, 2] - features[:, 2].mean()) / torch.zeros(())  # a constant column normalised by its zero spread
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(features).pow(2).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
"""

# Fails only inside worker processes, then (once loading passes) keeps running: a re-run that passes is
# stopped at the point where it has clearly gone past the failure.
WORKERS_ONLY_THEN_LONG = """
    import time
    import torch
    from torch.utils.data import DataLoader, Dataset, get_worker_info

    class OnlyInMain(Dataset):
        def __len__(self):
            return 4
        def __getitem__(self, i):
            if get_worker_info() is not None:
                raise RuntimeError("this loader cannot run in a worker")
            return torch.tensor(i)

    if __name__ == "__main__":
        for batch in DataLoader(OnlyInMain(), batch_size=2, num_workers=1):
            pass
        print("loaded", flush=True)
        time.sleep(300)
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("th_home_investigate")
    clean = {k: v for k, v in os.environ.items() if k != "TORCHHELP_SWITCHES"}
    return {**clean, "TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0", "PYTHONPATH": str(ROOT)}


def _program(tmp_path: Path, code: str, name: str = "prog.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(code))
    return path


def _investigate(tmp_path: Path, env: dict[str, str], program: Path, *extra: str, timeout: float = 240) -> tuple[dict, subprocess.CompletedProcess]:
    report = tmp_path / "report.json"
    proc = subprocess.run([PY, "-m", "assistant", "run", "--investigate", "--yes", "--report", str(report), *extra, "--", PY, str(program)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    assert report.is_file(), proc.stderr[-3000:]
    return json.loads(report.read_text()), proc


def test_a_worker_error_is_reproduced_in_the_main_process(tmp_path: Path, env: dict[str, str]) -> None:
    program = _program(tmp_path, WORKER_KEYERROR)
    d, proc = _investigate(tmp_path, env, program)
    assert proc.returncode == 1  # the program's own status, not the experiments'
    assert d["category"] == "dataloader_error"
    (exp,) = [e for e in d["experiments"] if e["id"] == "dataloader_main"]
    assert exp["outcome"] == "same"
    assert "KeyError: 'Dog'" in exp["finding"] and "prog.py:12" in exp["finding"]
    assert exp["verified"], exp
    assert exp["command"].startswith("torchhelp run --investigate --experiment dataloader_main --yes -- ")
    assert "Experiments (re-runs with one change)" in proc.stderr and "same failure" in proc.stderr


def test_an_out_of_range_token_id_is_named_with_its_position_and_range(tmp_path: Path, env: dict[str, str]) -> None:
    program = _program(tmp_path, EMBEDDING_OUT_OF_RANGE)
    d, _ = _investigate(tmp_path, env, program)
    (exp,) = [e for e in d["experiments"] if e["id"] == "guard_index"]
    assert exp["outcome"] == "other"
    assert "holds 12 at flat position 4 (shape [2, 3])" in exp["finding"] and "0 to 9" in exp["finding"]
    assert "prog.py:7" in exp["finding"]  # the user's line, not the guard's own frame
    assert exp["verified"] and not exp["failure"]  # the guard found it: no second diagnosis of its own stop
    assert exp["values"]["op"] == "embedding" and exp["values"]["value"] == 12 and exp["values"]["high"] == 10
    # The failure is read again with what the guard found: the cause says it in the program's values.
    assert "`embedding` got 12 at flat position 4 of a [2, 3] argument" in d["cause"]


def test_nan_from_the_data_moves_the_lead_to_the_input_and_rules_out_the_learning_rate(tmp_path: Path, env: dict[str, str]) -> None:
    program = _program(tmp_path, NAN_IN_DATA)
    d, _ = _investigate(tmp_path, env, program)
    assert d["category"] == "nan_inf"
    (exp,) = [e for e in d["experiments"] if e["id"] == "nonfinite"]
    assert "input of Sequential.0 (Linear) already holds NaN or Inf at forward call 1" in exp["finding"]
    assert "nan.bad_input_or_op" in exp["verified"] and "nan.learning_rate" in exp["ruled_out"]
    assert d["hypotheses"][0]["id"] == "nan.bad_input_or_op"
    assert any("ruled out by re-running" in w for h in d["hypotheses"] if h["id"] == "nan.learning_rate" for w in h["weakens"])


def test_a_rerun_that_passes_is_stopped_past_the_failing_point_and_leaves_nothing_running(tmp_path: Path, env: dict[str, str]) -> None:
    program = _program(tmp_path, WORKERS_ONLY_THEN_LONG)
    start = time.monotonic()
    d, proc = _investigate(tmp_path, env, program, "--experiment", "dataloader_main")
    took = time.monotonic() - start
    (exp,) = d["experiments"]
    assert exp["outcome"] == "passed", exp
    assert "loading in the main process passes" in exp["finding"]
    assert took < 90  # not the program's 300 s sleep
    leftover = subprocess.run(["pgrep", "-f", str(program)], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", "a re-run outlived the investigation"


def test_the_budget_bounds_the_experiments(tmp_path: Path, env: dict[str, str]) -> None:
    program = _program(tmp_path, WORKERS_ONLY_THEN_LONG)
    start = time.monotonic()
    d, _ = _investigate(tmp_path, env, program, "--experiment", "dataloader_main", "--experiment", "nonfinite", "--budget", "1")
    # The failing run took longer than 1 s: no re-run could reach the failure, so none is started.
    assert [e["outcome"] for e in d["experiments"]] == ["not_run", "not_run"]
    assert all("budget" in e["finding"] and e["command"] for e in d["experiments"])
    assert time.monotonic() - start < 60


FAILS_AFTER_A_WHILE = """
    import time
    import torch

    weights = torch.randn(3, 5)
    time.sleep(2.5)
    weights @ weights
"""


def test_the_whole_command_keeps_within_four_failing_runs(tmp_path: Path, env: dict[str, str]) -> None:
    """Without --budget the experiments end in time for the whole command (start, failing run, diagnosis,
    experiments, answer) to stay within four failing runs: three re-runs of the same length cannot fit, so
    the last is reported as not run, with the command that repeats it."""
    program = _program(tmp_path, FAILS_AFTER_A_WHILE)
    chosen = ("nonfinite", "anomaly", "cudnn_off")
    d, _ = _investigate(tmp_path, env, program, *(a for e in chosen for a in ("--experiment", e)))
    outcomes = {e["id"]: e for e in d["experiments"]}
    assert outcomes["nonfinite"]["outcome"] == "same"
    last = outcomes["cudnn_off"]
    assert last["outcome"] == "not_run" and "budget" in last["finding"] and last["command"], last


# Two ranks on Gloo: rank 1's shard has one batch fewer, so it reaches the broadcast while rank 0 is still in
# its fourth gradient all-reduce; both time out.
UNEVEN_RANKS = """
    import datetime
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=4))
    rank = dist.get_rank()
    batches = 4 if rank == 0 else 3
    weights = torch.zeros(8)
    for step in range(batches):
        grad = torch.ones(8)
        dist.all_reduce(grad)
        weights -= 0.1 * grad
    best = torch.tensor([float(rank)])
    dist.broadcast(best, src=0)
"""


def test_the_flight_recorder_names_the_collective_each_rank_was_in(tmp_path: Path, env: dict[str, str]) -> None:
    program = _program(tmp_path, UNEVEN_RANKS)
    report = tmp_path / "report.json"
    argv = [PY, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()), str(program)]
    proc = subprocess.run([PY, "-m", "assistant", "run", "--investigate", "--yes", "--report", str(report), "--", *argv],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    d = json.loads(report.read_text())
    assert d["category"] == "nccl_error", proc.stderr[-2000:]
    (exp,) = [e for e in d["experiments"] if e["id"] == "flight_recorder"]
    assert "rank 0 was waiting in all_reduce #4 on inputs [[8]] after 3 completed collectives" in exp["finding"]
    assert "rank 1 was waiting in broadcast #4 on inputs [[1]] after 3 completed collectives" in exp["finding"]
    assert exp["verified"] == ["nccl.rank_desync"] and "nccl.transport" in exp["ruled_out"]
    assert exp["values"]["waiting"] == {"0": "all_reduce #4", "1": "broadcast #4"}
    assert exp["command"].startswith("TORCH_FR_BUFFER_SIZE=2000 ") and "TORCH_NCCL_DUMP_ON_TIMEOUT=1" in exp["command"]
    # Read again with the traces: the cause says where each rank was, and the uneven-steps fix comes first.
    assert "rank 0 in all_reduce #4 after 3 completed; rank 1 in broadcast #4 after 3 completed" in d["cause"]
    assert d["hypotheses"][0]["id"] == "nccl.rank_desync"
    assert d["fixes"][0]["title"] == "Give every rank the same number of steps"


def test_without_a_terminal_nothing_is_rerun_unless_yes(tmp_path: Path, env: dict[str, str]) -> None:
    program = _program(tmp_path, EMBEDDING_OUT_OF_RANGE)
    report = tmp_path / "r.json"
    proc = subprocess.run([PY, "-m", "assistant", "run", "--investigate", "--report", str(report), "--", PY, str(program)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    d = json.loads(report.read_text())
    assert d["experiments"] == []
    assert any("no terminal to ask; pass --yes" in n for n in d["notes"]), d["notes"]
    assert proc.returncode == 1


@pytest.mark.parametrize("answer, reruns", [(b"n\n", False), (b"y\n", True)])
def test_at_a_terminal_the_user_is_asked_first(tmp_path: Path, env: dict[str, str], answer: bytes, reruns: bool) -> None:
    program = _program(tmp_path, EMBEDDING_OUT_OF_RANGE)
    report = tmp_path / "r.json"
    argv = [PY, "-m", "assistant", "run", "--investigate", "--report", str(report), "--", PY, str(program)]
    shown, status = run_on_terminal(argv, tmp_path, env, keys=answer, after=b"[y/N]", deadline_s=120)
    assert "Each re-run repeats what the program does" in shown
    d = json.loads(report.read_text())
    assert bool(d["experiments"]) is reruns
    if not reruns:
        assert any("declined at the terminal" in n for n in d["notes"])
    else:
        assert "holds 12 at flat position 4" in d["experiments"][0]["finding"]
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 1


def test_an_unknown_experiment_is_refused_before_the_command_starts(tmp_path: Path, env: dict[str, str]) -> None:
    marker = tmp_path / "ran"
    program = _program(tmp_path, f"open({str(marker)!r}, 'w').close()\nraise SystemExit(3)\n")
    proc = subprocess.run([PY, "-m", "assistant", "run", "--experiment", "no_such_thing", "--", PY, str(program)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and not marker.exists()
    assert "unknown experiment 'no_such_thing'" in proc.stderr and "Traceback" not in proc.stderr
