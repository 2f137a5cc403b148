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


STDERR_TAIL_BYTES = 1 << 20


@dataclass
class RunOutcome:
    """What happened: the exit code, the chosen probe record, every record written, and the stderr tail."""

    exit_code: int
    duration_s: float
    record: dict[str, Any] | None
    records: list[dict[str, Any]]
    run_dir: Path
    stderr_tail: str = ""


class _StderrTee:
    """Copy the child's stderr to ours as it arrives, keeping the last MiB for the diagnosis.

    CUDA kernel assertion lines, NCCL warnings and DataLoader worker tracebacks are printed to
    stderr, not carried by the final exception; without them a diagnosis loses its best clues.
    """

    def __init__(self, fd: int) -> None:
        import collections
        import threading

        self._fd = fd
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._thread = threading.Thread(target=self._pump, name="torchhelp-stderr-tee", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        out = getattr(sys.stderr, "buffer", None)
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            try:
                if out is not None:
                    out.write(chunk)
                    out.flush()
                else:
                    sys.stderr.write(chunk.decode("utf-8", errors="replace"))
            except (OSError, ValueError):
                pass
            self._chunks.append(chunk)
            self._size += len(chunk)
            while self._size - len(self._chunks[0]) > STDERR_TAIL_BYTES:
                self._size -= len(self._chunks.popleft())
        os.close(self._fd)

    def tail(self) -> str:
        self._thread.join(timeout=10)
        return b"".join(self._chunks).decode("utf-8", errors="replace")


def _child_env(run_dir: Path, memory_history: bool, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["TORCHHELP_RUN_DIR"] = str(run_dir)
    env["TORCHHELP_PKG_PARENT"] = str(PKG_PARENT)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BOOT_DIR), env.get("PYTHONPATH", "")) if p)
    if memory_history:
        env["TORCHHELP_MEMORY_HISTORY"] = "1"
    env.update(extra or {})
    return env


def execute(argv: list[str], memory_history: bool = False, extra_env: dict[str, str] | None = None, capture_output: bool = False,
            tee_stderr: bool = True) -> RunOutcome:
    """Run the command once under the crash hook and collect what the hook wrote.

    stdout is inherited untouched; stderr is teed (shown live, tail kept) unless ``tee_stderr`` is
    False; ``capture_output`` keeps both quiet (used for the CUDA_LAUNCH_BLOCKING rerun).
    """
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
        tee = None
        read_fd = write_fd = None
        if capture_output:
            kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        elif tee_stderr:
            read_fd, write_fd = os.pipe()
            kwargs["stderr"] = write_fd
        try:
            proc = subprocess.Popen(argv, **kwargs)
        except OSError as exc:
            for fd in (read_fd, write_fd):
                if fd is not None:
                    os.close(fd)
            raise RunnerError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
        if write_fd is not None:
            os.close(write_fd)  # the child holds the write end now
            tee = _StderrTee(read_fd)  # type: ignore[arg-type]
        out, err = proc.communicate()
    finally:
        signal.signal(signal.SIGINT, old_int)
    duration = time.perf_counter() - start
    records = _read_records(run_dir)
    tail = tee.tail() if tee is not None else (err or b"").decode("utf-8", errors="replace")[-STDERR_TAIL_BYTES:]
    if capture_output and err:
        (run_dir / "stderr.log").write_bytes(err)
    return RunOutcome(proc.returncode, duration, choose_record(records), records, run_dir, tail)


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


def diagnosis_text(outcome: RunOutcome) -> str:
    """What to diagnose: the program's stderr (kernel assertions, NCCL lines, worker tracebacks)
    followed by the hook's traceback, which the parser then takes as the final failure."""
    parts = [outcome.stderr_tail.strip()] if outcome.stderr_tail.strip() else []
    traceback_text = (outcome.record or {}).get("traceback", "")
    if traceback_text and traceback_text.strip() not in outcome.stderr_tail:
        parts.append(traceback_text)
    if not parts:
        parts.append(signal_text(outcome.exit_code))
    elif outcome.record is None:
        parts.append(signal_text(outcome.exit_code))
    return "\n".join(parts)


def rerun_summary(outcome: RunOutcome) -> dict[str, Any]:
    """What the CUDA_LAUNCH_BLOCKING=1 rerun shows: the operation that really failed."""
    from assistant.parse.traceback import parse_failure

    rec = outcome.record
    text = rec["traceback"] if rec else outcome.stderr_tail
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
        from assistant.engine import default_engine
        from assistant.probes.collect import evidence_from_record
        from assistant.probes.env import collect_environment

        env = collect_environment(python_of(argv))
        record = outcome.record or {}
        text = diagnosis_text(outcome)
        notes = [] if outcome.record else ["No Python traceback was recorded (the process died in native code or was killed); diagnosed from its exit status."]
        evidence = evidence_from_record(record, env=_env_summary(env))
        engine = default_engine(settings)
        diagnosis = engine.diagnose(text, evidence=evidence, notes=notes)
        if rerun_blocking and diagnosis.category in RERUN_CATEGORIES:
            again = execute(argv, memory_history=False, extra_env={"CUDA_LAUNCH_BLOCKING": "1"}, capture_output=True)
            summary = rerun_summary(again)
            evidence = evidence_from_record(record, env=_env_summary(env), rerun=summary)
            diagnosis = engine.diagnose(text, evidence=evidence, notes=notes + [f"Re-ran once with CUDA_LAUNCH_BLOCKING=1 ({summary['duration_s']} s, exit code {summary['exit_code']})."])
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
