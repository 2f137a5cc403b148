"""`torchhelp run`, the probes, install()/watch(), the IPython extension and the rerun logic — on CPU,
with real programs failing for real."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from llm_servers import free_port

from conftest import ROOT

PY = sys.executable


def th(args: list[str], cwd: Path, home: Path, env_extra: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "TORCHHELP_HOME": str(home), "PYTHONPATH": str(ROOT), **(env_extra or {})}
    return subprocess.run([PY, "-m", "assistant", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def home(th_home: Path, retriever) -> Path:  # type: ignore[no-untyped-def]
    return th_home


def write(path: Path, code: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(code))
    return path


SHAPE_SCRIPT = """
    import torch, torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.flatten = nn.Flatten()
            self.classifier = nn.Linear(8192, 10)
        def forward(self, x):
            x = self.flatten(self.conv(x))
            return self.classifier(x)
    model = Net()
    print("stdout line before the crash")
    model(torch.randn(4, 3, 32, 32))
"""


def test_run_script_uses_probes_and_preserves_output(tmp_path: Path, home: Path) -> None:
    write(tmp_path / "train.py", SHAPE_SCRIPT)
    report = tmp_path / "diag.json"
    res = th(["run", "--report", str(report), "--", PY, "train.py"], tmp_path, home)
    direct = subprocess.run([PY, "train.py"], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == direct.returncode == 1
    assert res.stdout == direct.stdout == "stdout line before the crash\n"
    assert direct.stderr.strip() in res.stderr  # the program's own traceback, unchanged, comes first
    d = json.loads(report.read_text())
    assert d["category"] == "shape_mismatch"
    assert "7200 = 8×30×30" in d["cause"] and "`classifier`" in d["cause"]
    assert any(e["kind"] == "probe" and "Linear(in_features=8192" in e["text"] for e in d["evidence"])


def test_run_success_is_silent_and_exit_code_zero(tmp_path: Path, home: Path) -> None:
    write(tmp_path / "ok.py", "import sys\nprint('hello')\nprint('warn', file=sys.stderr)\n")
    res = th(["run", "--", PY, "ok.py"], tmp_path, home)
    assert (res.returncode, res.stdout, res.stderr) == (0, "hello\n", "warn\n")


def test_run_preserves_arbitrary_exit_codes(tmp_path: Path, home: Path) -> None:
    write(tmp_path / "exit3.py", "import sys\nsys.exit(3)\n")
    assert th(["run", "--", PY, "exit3.py"], tmp_path, home).returncode == 3


def test_run_python_dash_m_module(tmp_path: Path, home: Path) -> None:
    write(tmp_path / "proj" / "__init__.py", "")
    write(tmp_path / "proj" / "train.py", """
        import torch
        def main():
            labels = torch.zeros(4)            # float labels: a classic
            logits = torch.randn(4, 3, requires_grad=True)
            torch.nn.functional.cross_entropy(logits, labels.long() + 5)
        main()
    """)
    report = tmp_path / "d.json"
    res = th(["run", "--report", str(report), "--", PY, "-m", "proj.train"], tmp_path, home)
    assert res.returncode == 1
    d = json.loads(report.read_text())
    assert d["category"] == "index_error"
    assert any(e["kind"] == "probe" and "`labels`" in e["text"] for e in d["evidence"])


def test_run_dataloader_worker_failure(tmp_path: Path, home: Path) -> None:
    write(tmp_path / "loader.py", """
        import torch
        from torch.utils.data import DataLoader, Dataset
        class Clips(Dataset):
            label_map = {"cat": 0, "dog": 1}
            names = ["cat", "dog", "bird", "cat"]
            def __len__(self): return len(self.names)
            def __getitem__(self, i): return torch.zeros(3), self.label_map[self.names[i]]
        if __name__ == "__main__":
            loader = DataLoader(Clips(), batch_size=2, num_workers=2)
            for x, y in loader:
                pass
    """)
    report = tmp_path / "d.json"
    res = th(["run", "--report", str(report), "--", PY, "loader.py"], tmp_path, home)
    assert res.returncode == 1
    d = json.loads(report.read_text())
    assert d["category"] == "dataloader_error"
    assert "'bird'" in d["cause"]
    assert any("num_workers=2" in e["text"] for e in d["evidence"] if e["kind"] == "probe")


def test_run_multiprocessing_spawn_child_failure(tmp_path: Path, home: Path) -> None:
    write(tmp_path / "spawn.py", """
        import torch
        import torch.multiprocessing as mp
        def worker(rank):
            if rank == 1:
                torch.ones(2, 3) @ torch.ones(4, 5)
        if __name__ == "__main__":
            mp.spawn(worker, nprocs=2)
    """)
    report = tmp_path / "d.json"
    res = th(["run", "--report", str(report), "--", PY, "spawn.py"], tmp_path, home)
    assert res.returncode == 1
    d = json.loads(report.read_text())
    assert d["category"] == "shape_mismatch"
    assert "spawned process 1" in json.dumps(d["evidence"])


def test_probe_time_budget_is_enforced(tmp_path: Path, home: Path) -> None:
    write(tmp_path / "slow.py", """
        import time, torch
        from torch.utils.data import DataLoader, Dataset
        class Slow(Dataset):
            def __len__(self):
                time.sleep(30)   # the probe asks for len(dataset): it must not wait for this
                return 1
            def __getitem__(self, i): return torch.zeros(1)
        loader = DataLoader(Slow(), batch_size=1)
        raise ValueError("stop here with a slow object in scope")
    """)
    report = tmp_path / "d.json"
    res = th(["run", "--report", str(report), "--", PY, "slow.py"], tmp_path, home, env_extra={"TORCHHELP_PROBE_BUDGET": "1"}, timeout=120)
    assert res.returncode == 1
    d = json.loads(report.read_text())
    assert any("timed out" in n or "budget" in n for n in d["notes"]), d["notes"]


def test_env_probe_survives_a_broken_torch(tmp_path: Path) -> None:
    write(tmp_path / "fake" / "torch" / "__init__.py", "raise ImportError('libcudart.so.12: cannot open shared object file: No such file or directory')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'fake'}{os.pathsep}{ROOT}"}
    res = subprocess.run([PY, "-m", "assistant", "env", "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0
    report = json.loads(res.stdout)
    assert "libcudart.so.12" in report["torch_import_error"]
    assert any("torch could not be imported" in n for n in report["notes"])
    text = subprocess.run([PY, "-m", "assistant", "env"], env=env, capture_output=True, text=True, timeout=120).stdout
    assert "NOT IMPORTABLE" in text


def test_env_report_redacts_secrets(tmp_path: Path) -> None:
    planted = {"WANDB_API_KEY": "wandb-secret-value-123", "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz123456", "NCCL_SOCKET_IFNAME": "eth0",
               "TORCH_HOME": "https://alice:hunter2secret@example.com/cache"}
    env = {**os.environ, **planted, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([PY, "-m", "assistant", "env", "--json"], env=env, capture_output=True, text=True, timeout=120)
    out = res.stdout
    for secret in ("wandb-secret-value-123", "hf_abcdefghijklmnopqrstuvwxyz123456", "hunter2secret"):
        assert secret not in out
    assert "eth0" in out


def test_run_redacts_planted_secrets_everywhere(tmp_path: Path, home: Path) -> None:
    write(tmp_path / "leak.py", """
        import os, sys, torch
        API_KEY = "sk-proj-plantedsecret0123456789abcdef"
        token = os.environ["HF_TOKEN"]
        headers = {"Authorization": "Bearer plantedbearer0123456789abcdef"}
        raise RuntimeError(f"upload failed for key={API_KEY} token {token}")
    """)
    report = tmp_path / "d.json"
    evidence = tmp_path / "e.json"
    res = th(["run", "--report", str(report), "--evidence-out", str(evidence), "--", PY, "leak.py", "--api-key", "sk-live-argvsecret0123456789abcdef"],
             tmp_path, home, env_extra={"HF_TOKEN": "hf_plantedtokenplantedtoken123456", "WANDB_API_KEY": "plainwandbsecret"})
    assert res.returncode == 1
    ours = report.read_text() + evidence.read_text() + res.stderr.split("╭─ torchhelp", 1)[-1]
    for secret in ("plantedsecret0123456789abcdef", "hf_plantedtokenplantedtoken123456", "argvsecret0123456789abcdef", "plantedbearer0123456789abcdef", "plainwandbsecret"):
        assert secret not in ours, secret


def test_install_excepthook(tmp_path: Path, home: Path) -> None:
    write(tmp_path / "hooked.py", """
        import assistant, torch
        assistant.install()
        weights = torch.randn(3, 5, dtype=torch.float64)
        torch.randn(2, 3) @ weights
    """)
    env = {**os.environ, "TORCHHELP_HOME": str(home), "PYTHONPATH": str(ROOT)}
    res = subprocess.run([PY, "hooked.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 1
    assert "Traceback (most recent call last)" in res.stderr  # the normal traceback first
    assert "dtype_mismatch" in res.stderr and "float64" in res.stderr


def test_watch_context_manager(home: Path, settings) -> None:  # type: ignore[no-untyped-def]
    import torch

    import assistant

    stream = io.StringIO()
    with pytest.raises(RuntimeError):
        with assistant.watch(stream=stream):
            logits = torch.randn(4, 10, requires_grad=True)
            torch.nn.functional.cross_entropy(logits, torch.zeros(4))
    out = stream.getvalue()
    assert "Traceback" in out and "dtype_mismatch" in out and "Long" in out


def test_ipython_extension(tmp_path: Path, home: Path) -> None:
    pytest.importorskip("IPython")
    script = write(tmp_path / "nb.ipy", """
        %load_ext assistant
        import torch
        x = torch.randn(4, 6).t()
        x.view(24)
    """)
    env = {**os.environ, "TORCHHELP_HOME": str(home), "PYTHONPATH": str(ROOT)}
    res = subprocess.run([PY, "-m", "IPython", "--colors=NoColor", "--no-banner", "--quick", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    assert "view size is not compatible" in out
    assert "shape_mismatch" in out and "reshape" in out


REPLAY = """
    # Replays a real GPU capture so the rerun logic can be tested on CPU: without CUDA_LAUNCH_BLOCKING
    # the device-side assert surfaces at an innocent line; with it, at the loss.
    import json, os, sys
    cap = json.load(open(sys.argv[1]))
    asserts = [l for l in cap["stderr"].splitlines() if "Assertion" in l][:3]
    final = [l for l in cap["stderr"].splitlines() if "device-side assert triggered" in l][-1].split(": ", 1)[1]
    def log_metrics():
        raise RuntimeError(final)
    def compute_loss():
        raise RuntimeError(final)
    print("\\n".join(asserts), file=sys.stderr)
    if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1":
        compute_loss()
    else:
        log_metrics()
"""


def test_rerun_blocking_localises_the_real_operation(tmp_path: Path, home: Path) -> None:
    capture = ROOT / "eval" / "captured" / "cuda" / "cuda-assert-ce-one-based-labels.json"
    write(tmp_path / "replay.py", REPLAY)
    report = tmp_path / "d.json"
    res = th(["run", "--rerun-blocking", "--report", str(report), "--", PY, "replay.py", str(capture)], tmp_path, home)
    assert res.returncode == 1
    d = json.loads(report.read_text())
    assert d["category"] == "device_side_assert"
    assert "n_classes" in d["cause"]  # the kernel assertion line from stderr was used
    rerun = [e["text"] for e in d["evidence"] if e["kind"] == "rerun"]
    assert rerun and "compute_loss" in rerun[0], d["evidence"]
    # Without the flag, the diagnosis tells how to do it instead.
    res2 = th(["run", "--report", str(report), "--", PY, "replay.py", str(capture)], tmp_path, home)
    assert res2.returncode == 1
    assert any("--rerun-blocking" in n for n in json.loads(report.read_text())["notes"])


def test_the_failing_program_reports_its_own_torch_facts(tmp_path: Path, home: Path) -> None:
    """The dying program already has torch loaded: its record carries the facts the separate probe reads,
    so the diagnosis needs no second interpreter, and they are the same facts."""
    from assistant.probes.env import torch_facts

    write(tmp_path / "train.py", SHAPE_SCRIPT)
    evidence = tmp_path / "e.json"
    report = tmp_path / "d.json"
    res = th(["run", "--report", str(report), "--evidence-out", str(evidence), "--", PY, "train.py"], tmp_path, home)
    assert res.returncode == 1
    in_process = json.loads(evidence.read_text())["record"]["torch_env"]
    separate = torch_facts(PY)
    assert in_process == {k: separate[k] for k in in_process}
    assert {"torch", "cuda_build", "cudnn", "cuda_available"} <= set(in_process)
    # A program that never imported torch leaves the facts to the separate probe.
    write(tmp_path / "plain.py", "raise ValueError('no torch here')\n")
    res = th(["run", "--evidence-out", str(evidence), "--", PY, "plain.py"], tmp_path, home)
    assert res.returncode == 1
    assert "torch_env" not in json.loads(evidence.read_text())["record"]


BINCOUNT_SIZES_DIFFER = """
    import datetime
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=4))
    rank = dist.get_rank()
    labels = torch.tensor([0, 1, 1, 3]) if rank == 0 else torch.tensor([0, 2, 5])
    counts = torch.bincount(labels).float()   # its length depends on each rank's own labels
    dist.all_reduce(counts)
"""


def test_a_rank_that_aborts_in_cpp_is_read_by_its_own_message(tmp_path: Path, home: Path) -> None:
    """Gloo aborts rank 0 with a C++ exception (`terminate called ... what(): ...`) when the ranks' sizes differ; the
    launcher's own traceback follows it. The answer is that rank's message, read as a collective mismatch."""
    write(tmp_path / "counts.py", BINCOUNT_SIZES_DIFFER)
    report = tmp_path / "d.json"
    res = th(["run", "--report", str(report), "--", PY, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()),
              "counts.py"], tmp_path, home)
    assert res.returncode != 0
    assert "Received data size doesn't match expected size" in res.stderr  # the real message of this torch
    d = json.loads(report.read_text())
    assert d["category"] == "nccl_error"
    assert d["error"].startswith("gloo::EnforceNotMet: [enforce fail at")
    assert d["hypotheses"][0]["id"] == "gloo-errors#collective-mismatch"
