"""Run the failing command again with one change, under a deadline, and say what happened.

The re-run is quiet (its output goes to files in a private folder), runs in its own session so a
deadline or a stop can end every process it started, and carries the crash hook as the first run did.
Its outcome is "passed" (exit 0, or still running well past the point where the first run failed),
"same" (the same error), "other" (a different error) or "stopped" (cut off before it showed anything).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assistant.investigate.catalogue import ExperimentSpec
from assistant.investigate.switches import ENV as SWITCHES_ENV, MARK

TAIL_BYTES = 1 << 20
# A re-run still going this much longer than the first run took to fail has passed the point where it failed.
PASS_FACTOR = 1.3
PASS_SLACK_S = 1.5
GRACE_S = 2.0  # SIGTERM, then this long, then SIGKILL
# The crash hook's probes read tensors and memory after the failure. A re-run's reader needs them only to
# read allocation sites; otherwise the traceback is what it reads, and the probes' time is the user's wait.
PROBE_READERS = frozenset({"memory_sites"})
RERUN_PROBE_BUDGET_S = "0.5"


@dataclass
class Rerun:
    """One re-run: exit status, time, its output's tail, the crash hook's record, and how it ended."""

    exit_code: int | None
    duration_s: float
    text: str
    record: dict[str, Any]
    cut: bool  # ended by the deadline
    values: dict[str, Any] | None = None  # what a switch found, as values (see switches.VALUES_FILE)


RUN_DIR_MARK = "{run_dir}"  # in an experiment's variable: the re-run's private folder (where dumps are written)


def experiment_env(spec: ExperimentSpec, base: dict[str, str], run_dir: Path | None = None) -> dict[str, str]:
    """The environment variables the experiment sets, merged with the user's own allocator settings."""
    out: dict[str, str] = {}
    for key, value in spec.env:
        if RUN_DIR_MARK in value:
            value = value.replace(RUN_DIR_MARK, str(run_dir or tempfile.gettempdir()))
        if key == "PYTORCH_CUDA_ALLOC_CONF" and base.get(key):
            # Keep the user's other allocator options; the experiment changes one of them.
            kept = [p for p in base[key].split(",") if p and not p.startswith(value.split(":")[0] + ":")]
            value = ",".join([*kept, value])
        out[key] = value
    if spec.switches:
        out[SWITCHES_ENV] = ",".join(spec.switches)
    if spec.reader not in PROBE_READERS:
        out["TORCHHELP_PROBE_BUDGET"] = RERUN_PROBE_BUDGET_S
    return out


def rerun(argv: list[str], spec: ExperimentSpec, deadline_s: float) -> Rerun:
    """Run ``argv`` once with the experiment's change; stop it (and everything it started) at the deadline."""
    from assistant.run_child import child_env, choose_record, read_records

    run_dir = Path(tempfile.mkdtemp(prefix="torchhelp-exp-"))
    try:
        env = child_env(run_dir, memory_history=False, extra=experiment_env(spec, dict(os.environ), run_dir))
        out_path, err_path = run_dir / "stdout.log", run_dir / "stderr.log"
        start = time.perf_counter()
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
            cut = False
            try:
                proc.wait(timeout=max(deadline_s, 0.1))
            except subprocess.TimeoutExpired:
                cut = True
            finally:
                # Also on Ctrl-C or an error here: nothing of the re-run may outlive it.
                _end_group(proc)
        duration = time.perf_counter() - start
        records = read_records(run_dir)
        record = choose_record(records)
        text = _tail(err_path) or _tail(out_path)
        traceback_text = record.get("traceback", "") if record else ""
        if traceback_text and traceback_text.strip() not in text:
            text = f"{text}\n{traceback_text}"
        return Rerun(None if cut else proc.returncode, duration, text, record or {}, cut, _values(run_dir))
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def _values(run_dir: Path) -> dict[str, Any] | None:
    """What the re-run left as values: a switch's findings, and the collective traces of the ranks."""
    from assistant.investigate.flight import read_flight_dumps

    values = _switch_values(run_dir)
    flight = read_flight_dumps(run_dir)
    if flight is not None:
        values = {**(values or {}), "flight": flight}
    return values


def _switch_values(run_dir: Path) -> dict[str, Any] | None:
    """The first switch's values file in the run folder, if a switch stopped the program."""
    import json

    for path in sorted(run_dir.glob("switch-values-*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            return data
    return None


def _end_group(proc: subprocess.Popen) -> None:
    """SIGTERM the re-run's whole session, then SIGKILL what is left after a grace period."""
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
            if sig == signal.SIGTERM:
                # The leader is gone; its session may still hold children: SIGKILL them too.
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(size - TAIL_BYTES, 0))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


_VOLATILE = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?")


def signature(text: str) -> tuple[str, str]:
    """What makes two failures the same: the exception type and its first message line with numbers masked."""
    from assistant.parse.traceback import parse_failure

    failure = parse_failure(text) if text.strip() else None
    if failure is None:
        return "", ""
    first = failure.message.strip().splitlines()[0] if failure.message.strip() else ""
    return failure.exc_type or "", _VOLATILE.sub("#", first)[:200]


def classify(run: Rerun, original_text: str, original_duration_s: float) -> str:
    """passed / same / other / stopped, as described in the module docstring."""
    if run.cut:
        return "passed" if run.duration_s >= pass_point(original_duration_s) - 0.05 else "stopped"
    if run.exit_code == 0:
        return "passed"
    if MARK in run.text:
        return "other"
    mine, theirs = signature(run.text), signature(original_text)
    if mine == ("", ""):
        # No Python error to compare: died the same way (same status) or not.
        return "same" if theirs == ("", "") else "other"
    return "same" if mine == theirs else "other"


def pass_point(original_duration_s: float) -> float:
    """How long a re-run must keep going without failing to count as having passed the failing point."""
    return original_duration_s * PASS_FACTOR + PASS_SLACK_S
