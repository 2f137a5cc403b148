"""`torchhelp eval reproduce`: run every case in its own process, check it failed as expected, save it.

A capture holds the raw output (what a user would paste), the exit code, the parsed failure, and
the machine it ran on, so scoring can happen later on any machine (GPU captures are scored in CI
on CPU). A case that does not fail, or fails differently, is reported loudly.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable

from assistant.eval.cases import Case, repo_root
from assistant.parse.traceback import parse_failure
from assistant.probes.redact import redact_text

MAX_CAPTURE_CHARS = 200_000
# Never let a case enable NVLink multicast on shared hosts (see the device notes).
_SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1", "PYTHONUNBUFFERED": "1"}


@dataclass
class RunResult:
    """What happened when a case ran."""

    case: Case
    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool

    @property
    def output(self) -> str:
        return self.stderr if self.stderr.strip() else self.stdout

    def matched(self) -> bool:
        """Failed (non-zero exit or timeout kill) and the output matches the expected exception."""
        failed = self.timed_out or (self.exit_code not in (0, None))
        return failed and re.search(self.case.expect_exception, self.stdout + "\n" + self.stderr, re.M) is not None


def command_for(case: Case, python: str | None = None) -> list[str]:
    """The command line that runs a case (torchrun for multi-process cases)."""
    py = python or sys.executable
    if case.launcher == "torchrun":
        return [py, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "repro.py"]
    return [py, "repro.py"]


def run_case(case: Case, python: str | None = None, runner: list[str] | None = None, timeout_factor: float = 1.0) -> RunResult:
    """Run one case in its own process group; kill the whole group on timeout.

    ``runner`` prefixes the command (e.g. ``torchhelp run --report X --``) to capture live probes;
    ``timeout_factor`` stretches the case's own time limit for a runner that re-runs it (``--investigate``).
    """
    import shutil
    import tempfile

    cmd = (runner or []) + command_for(case, python)
    env = {**os.environ, **case.env, **_SAFE_ENV}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(repo_root()), env.get("PYTHONPATH", "")) if p)
    # Run a copy from a neutral folder: the case's slug in traceback paths would hint at the answer.
    with tempfile.TemporaryDirectory(prefix="torchhelp-case-") as tmp:
        workdir = Path(tmp) / "job"
        shutil.copytree(case.directory, workdir, ignore=shutil.ignore_patterns("case.toml", "__pycache__"))
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        timed_out = False
        try:
            out, err = proc.communicate(timeout=case.timeout * timeout_factor)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            out, err = proc.communicate()
        duration = time.perf_counter() - start
    return RunResult(case, proc.returncode, _tail(out), _tail(err), duration, timed_out)


def _kill_group(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    import signal

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= MAX_CAPTURE_CHARS else text[-MAX_CAPTURE_CHARS:]


def capture_record(result: RunResult, environment: dict[str, Any], probes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON document written for one case."""
    case = result.case
    failure = parse_failure(result.output)
    return {
        "slug": case.slug,
        "device": case.device,
        "category": case.category,
        "expect_exception": case.expect_exception,
        "must_mention": list(case.must_mention),
        "must_not_mention": list(case.must_not_mention),
        "why": case.why,
        "command": command_for(case, "python"),
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "matched_expectation": result.matched(),
        "duration_s": round(result.duration_s, 2),
        "stderr": redact_text(result.stderr),
        "stdout_tail": redact_text(result.stdout[-4000:]),
        "failure": {
            "exc_type": failure.exc_type, "headline": failure.headline, "wrapper": failure.wrapper, "rank": failure.rank,
            "frames": len(failure.frames), "user_frames": [asdict(f) for f in failure.user_frames[-3:]],
            "cuda_asserts": [asdict(a) for a in failure.cuda_asserts], "nccl_lines": list(failure.nccl_lines),
        },
        "environment": environment,
        "probes": probes,
        "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def machine_summary(environment: dict[str, Any]) -> dict[str, Any]:
    """The parts of the environment report worth storing with every capture."""
    keys = ("python", "platform", "torch", "cuda_build", "cudnn", "nccl", "driver", "gpus", "nvidia_smi", "cuda_available")
    return {k: environment.get(k) for k in keys if k in environment}


def reproduce(
    cases: list[Case], out_dir: Path, python: str | None = None, on_result: Callable[[RunResult], None] | None = None,
    with_probes: bool = False,
) -> list[RunResult]:
    """Run cases, write ``<out_dir>/<device>/<slug>.json`` for each, and return the results."""
    from assistant.probes.env import collect_environment

    environment = machine_summary(collect_environment(python))
    results = []
    for case in cases:
        probes = None
        if with_probes:
            result, probes = _run_with_probes(case, python)
        else:
            result = run_case(case, python)
        target = out_dir / case.device / f"{case.slug}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(capture_record(result, environment, probes), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        results.append(result)
        if on_result:
            on_result(result)
    return results


def _run_with_probes(case: Case, python: str | None) -> tuple[RunResult, dict[str, Any] | None]:
    """Run the case under `torchhelp run` so the capture also holds the live probe evidence."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "evidence.json"
        runner = [python or sys.executable, "-m", "assistant", "run", "--evidence-out", str(report), "--no-diagnose", "--"]
        result = run_case(case, python, runner=runner)
        probes = json.loads(report.read_text()) if report.is_file() else None
    return result, probes


def load_captures(directory: Path) -> list[dict[str, Any]]:
    """Every capture under a directory (recursively), sorted by device and slug."""
    out = []
    for p in sorted(directory.rglob("*.json")):
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except ValueError:
            continue
        if isinstance(data, dict) and "slug" in data and "stderr" in data:
            out.append(data)
    return out
