"""`torchhelp run -- CMD...`: run a program untouched; when it fails, diagnose it with live probes.

The child inherits the terminal (stdout/stderr are never captured or reordered). A sitecustomize
module on PYTHONPATH installs a crash hook in every Python process the command starts (the script,
torchrun's workers, spawned children); on an uncaught exception the hook writes the traceback and
the probe record into a private run folder. After the command exits, the runner picks the record
that holds the real failure, adds an environment report, diagnoses, prints the diagnosis to stderr
and exits with the command's own exit code.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assistant.errors import RunnerError

BOOT_DIR = Path(__file__).resolve().parent / "_boot"
PKG_PARENT = Path(__file__).resolve().parent.parent
RERUN_CATEGORIES = {"device_side_assert", "illegal_memory_access", "cudnn_error", "cublas_error"}
_SECONDARY = ("ChildFailedError", "SignalException", "KeyboardInterrupt")


@dataclass
class RunOutcome:
    """What happened: the exit code, the chosen probe record, and every record written."""

    exit_code: int
    duration_s: float
    record: dict[str, Any] | None
    records: list[dict[str, Any]]
    run_dir: Path


def _child_env(run_dir: Path, memory_history: bool, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["TORCHHELP_RUN_DIR"] = str(run_dir)
    env["TORCHHELP_PKG_PARENT"] = str(PKG_PARENT)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BOOT_DIR), env.get("PYTHONPATH", "")) if p)
    if memory_history:
        env["TORCHHELP_MEMORY_HISTORY"] = "1"
    env.update(extra or {})
    return env


def execute(argv: list[str], memory_history: bool = False, extra_env: dict[str, str] | None = None, capture_output: bool = False) -> RunOutcome:
    """Run the command once under the crash hook and collect what the hook wrote."""
    if not argv:
        raise RunnerError("no command given: use `torchhelp run -- python train.py ...`")
    if shutil.which(argv[0]) is None and not Path(argv[0]).exists():
        raise RunnerError(f"command not found: {argv[0]}")
    run_dir = Path(tempfile.mkdtemp(prefix="torchhelp-run-"))
    env = _child_env(run_dir, memory_history, extra_env)
    start = time.perf_counter()
    # The child gets the terminal's signals itself (same process group); the parent only waits.
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        kwargs: dict[str, Any] = {"env": env}
        if capture_output:
            kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            proc = subprocess.Popen(argv, **kwargs)
        except OSError as exc:
            raise RunnerError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
        out, err = proc.communicate()
    finally:
        signal.signal(signal.SIGINT, old_int)
    duration = time.perf_counter() - start
    records = _read_records(run_dir)
    if capture_output and err:
        (run_dir / "stderr.log").write_bytes(err)
    return RunOutcome(proc.returncode, duration, choose_record(records), records, run_dir)


def _read_records(run_dir: Path) -> list[dict[str, Any]]:
    out = []
    for p in sorted(run_dir.glob("evidence-*.json")):
        try:
            out.append(json.loads(p.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return sorted(out, key=lambda r: r.get("time", 0))


def choose_record(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first real failure: launcher summaries (ChildFailedError) lose to a worker's own error."""
    primary = [r for r in records if r.get("exc_type") not in _SECONDARY]
    return (primary or records)[0] if records else None


def signal_text(exit_code: int) -> str:
    """A readable line for a process that died without a Python traceback."""
    if exit_code < 0:
        try:
            name = signal.Signals(-exit_code).name
        except ValueError:
            name = f"signal {-exit_code}"
        extra = {"SIGKILL": "Killed", "SIGSEGV": "Segmentation fault", "SIGBUS": "Bus error", "SIGABRT": "Aborted (core dumped)"}.get(name, "")
        return f"The process exited with code {exit_code} ({name}) without a Python traceback. {extra}".strip()
    if exit_code in (137, 139, 134, 135):
        extra = {137: "Killed", 139: "Segmentation fault", 134: "Aborted (core dumped)", 135: "Bus error"}[exit_code]
        return f"The process exited with code {exit_code} without a Python traceback. {extra}"
    return f"The process exited with code {exit_code} without a Python traceback."


def rerun_summary(outcome: RunOutcome) -> dict[str, Any]:
    """What the CUDA_LAUNCH_BLOCKING=1 rerun shows: the operation that really failed."""
    from assistant.parse.traceback import parse_failure

    rec = outcome.record
    text = rec["traceback"] if rec else (outcome.run_dir / "stderr.log").read_text(errors="replace") if (outcome.run_dir / "stderr.log").exists() else ""
    failure = parse_failure(text) if text.strip() else None
    user = failure.user_frames[-1] if failure and failure.user_frames else None
    inner = failure.frames[-1] if failure and failure.frames else None
    return {
        "exit_code": outcome.exit_code,
        "headline": failure.headline if failure else signal_text(outcome.exit_code),
        "location": (f"{user.location()}" + (f": `{user.source}`" if user.source else "")) if user else None,
        "innermost": inner.location() if inner else None,
        "duration_s": round(outcome.duration_s, 2),
    }


def python_of(argv: list[str]) -> str | None:
    """The interpreter the command runs, when it is a Python command (for the environment report)."""
    first = Path(argv[0]).name
    if first.startswith("python"):
        return shutil.which(argv[0]) or argv[0]
    return None


def run(
    argv: list[str], report: Path | None = None, rerun_blocking: bool = False, memory_history: bool = False,
    evidence_out: Path | None = None, diagnose_failures: bool = True, settings=None, console=None,  # type: ignore[no-untyped-def]
) -> int:
    """The whole `torchhelp run`: execute, and on failure diagnose; returns the command's exit code."""
    outcome = execute(argv, memory_history=memory_history)
    try:
        if evidence_out is not None:
            evidence_out.write_text(json.dumps({"exit_code": outcome.exit_code, "record": outcome.record, "records": len(outcome.records)}, default=str))
        if outcome.exit_code == 0 or not diagnose_failures:
            return outcome.exit_code
        from assistant.pipeline import diagnose
        from assistant.probes.collect import evidence_from_record
        from assistant.probes.env import collect_environment

        env = collect_environment(python_of(argv))
        record = outcome.record or {}
        text = record.get("traceback") or signal_text(outcome.exit_code)
        notes = [] if outcome.record else ["No Python traceback was recorded (the process died in native code or was killed); diagnosed from its exit status."]
        evidence = evidence_from_record(record, env=_env_summary(env))
        diagnosis = diagnose(text, evidence=evidence, settings=settings, notes=notes)
        if rerun_blocking and diagnosis.category in RERUN_CATEGORIES:
            again = execute(argv, memory_history=False, extra_env={"CUDA_LAUNCH_BLOCKING": "1"}, capture_output=True)
            summary = rerun_summary(again)
            evidence = evidence_from_record(record, env=_env_summary(env), rerun=summary)
            diagnosis = diagnose(text, evidence=evidence, settings=settings, notes=notes + [f"Re-ran once with CUDA_LAUNCH_BLOCKING=1 ({summary['duration_s']} s, exit code {summary['exit_code']})."])
            shutil.rmtree(again.run_dir, ignore_errors=True)
        elif diagnosis.category in RERUN_CATEGORIES:
            diagnosis = _with_note(diagnosis, "Run again with `torchhelp run --rerun-blocking -- ...` to re-execute once with CUDA_LAUNCH_BLOCKING=1 and see the operation that really failed.")
        if report is not None:
            report.write_text(json.dumps(diagnosis.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        _render(diagnosis, console)
        return outcome.exit_code
    finally:
        shutil.rmtree(outcome.run_dir, ignore_errors=True)


def _with_note(diagnosis, note: str):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    return replace(diagnosis, notes=tuple(diagnosis.notes) + (note,))


def _env_summary(env: dict[str, Any]) -> dict[str, Any]:
    keys = ("python", "torch", "cuda", "cudnn", "nccl", "driver", "gpus", "arch_list", "cuda_available", "packages", "env", "notes", "torch_import_error")
    return {k: env[k] for k in keys if k in env}


def _render(diagnosis, console) -> None:  # type: ignore[no-untyped-def]
    from rich.console import Console

    from assistant.render.terminal import render_terminal

    render_terminal(diagnosis, console or Console(stderr=True))
