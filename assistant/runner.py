"""`torchhelp run -- CMD...`: run a program untouched; when it fails, diagnose it with live probes.

The child inherits the terminal and its signals (stdout untouched, stderr shown live through a pipe,
or a pseudo-terminal when ours is a terminal; see run_stderr and run_signals). A sitecustomize
module on PYTHONPATH installs a crash hook in every Python process the command starts (the script,
torchrun's workers, spawned children); on an uncaught exception the hook writes the traceback and
the probe record into a private run folder. After the command exits, the runner picks the record
that holds the real failure, adds an environment report, diagnoses, prints the diagnosis to stderr
and exits with the command's own status: the same code, or death by the same signal.
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

from assistant.errors import InputError, RunnerError
from assistant.run_child import SECONDARY_TYPES, child_env, choose_record, read_records
from assistant.run_launch import command_not_found, missing_launch
from assistant.run_signals import RunAbandoned, SignalRelay, stoppable
from assistant.run_stderr import STDERR_TAIL_BYTES, StderrTee

RERUN_CATEGORIES = {"device_side_assert", "illegal_memory_access", "cudnn_error", "cublas_error"}


@dataclass
class RunOutcome:
    """What happened: the exit code, the chosen probe record, every record written, and the stderr tail."""

    exit_code: int
    duration_s: float
    record: dict[str, Any] | None
    records: list[dict[str, Any]]
    run_dir: Path
    stderr_tail: str = ""
    forwarded: tuple[int, ...] = ()  # SIGTERM/SIGHUP (or a non-terminal SIGINT) passed on to the child
    stops: tuple[int, ...] = ()  # every stop signal torchhelp received while the command ran (Ctrl-C included)

    @property
    def stopped(self) -> bool:
        """Someone asked the command to stop (Ctrl-C, SIGTERM, SIGHUP...), or it died of SIGINT."""
        return bool(self.stops) or self.exit_code == -signal.SIGINT


def execute(argv: list[str], memory_history: bool = False, extra_env: dict[str, str] | None = None, capture_output: bool = False,
            tee_stderr: bool = True) -> RunOutcome:
    """Run the command once under the crash hook and collect what the hook wrote.

    stdout is inherited untouched; stderr is teed (shown live, tail kept) unless ``tee_stderr`` is
    False; ``capture_output`` keeps both quiet (used for the CUDA_LAUNCH_BLOCKING rerun).
    """
    if not argv:
        raise RunnerError("no command given: use `torchhelp run -- python train.py ...`")
    if shutil.which(argv[0]) is None and not Path(argv[0]).exists():
        raise _start_error(command_not_found(argv[0]), 127)
    run_dir = Path(tempfile.mkdtemp(prefix="torchhelp-run-"))
    env = child_env(run_dir, memory_history, extra_env)
    kwargs: dict[str, Any] = {"env": env}
    tee = None
    if capture_output:
        kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elif tee_stderr:
        tee = StderrTee()
        kwargs["stderr"] = tee.child_fd
    start = time.perf_counter()
    # The child shares our process group, so the terminal's Ctrl-C reaches it directly, with the
    # default disposition; the relay keeps us alive through it and forwards SIGTERM/SIGHUP.
    with SignalRelay(on_resize=tee.sync_size if tee is not None else None) as relay:
        try:
            proc = subprocess.Popen(argv, **kwargs)
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in an argument
            if tee is not None:
                tee.abandon()
            shutil.rmtree(run_dir, ignore_errors=True)
            reason = getattr(exc, "strerror", None) or exc
            raise _start_error(f"cannot start {argv[0]}: {reason}", 126 if isinstance(exc, PermissionError) else 127) from None
        relay.attach(proc.pid)
        if tee is not None:
            tee.started()
        try:
            out, err = proc.communicate()
            relay.child_exited()
            # After a stop the last writers are dying too: do not wait long for them.
            tail = tee.tail(1.0 if relay.stops else 10.0) if tee is not None else ""
        except RunAbandoned:
            if proc.returncode is None:  # stopped twice while it ran: its processes were killed
                shutil.rmtree(run_dir, ignore_errors=True)
                raise
            # Stopped while its last output was collected: the command's own status stands.
            err, tail = None, tee.tail(0) if tee is not None else ""
    duration = time.perf_counter() - start
    records = read_records(run_dir)
    if tee is None:
        tail = (err or b"").decode("utf-8", errors="replace")[-STDERR_TAIL_BYTES:]
    if capture_output and err:
        (run_dir / "stderr.log").write_bytes(err)
    return RunOutcome(proc.returncode, duration, choose_record(records), records, run_dir, tail, tuple(relay.forwarded), tuple(relay.stops))


def _start_error(message: str, shell_code: int) -> RunnerError:
    """A RunnerError that exits like the shell would: 127 not found, 126 not executable."""
    err = RunnerError(message)
    err.exit_code = shell_code
    return err


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
    if not parts or (outcome.record is None and not interrupted(outcome)):
        parts.append(signal_text(outcome.exit_code))
    return "\n".join(parts)


def interrupted(outcome: RunOutcome) -> bool:
    """The program died of Ctrl-C after printing its KeyboardInterrupt traceback (which the crash
    hook leaves unrecorded): that traceback is the failure, not a missing one."""
    return outcome.exit_code == -signal.SIGINT and "KeyboardInterrupt" in outcome.stderr_tail


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


def check_output_path(path: Path, option: str) -> None:
    """Refuse, before the command starts, an output file that could not be written after it ends."""
    parent = path.parent
    problem = None
    if path.is_dir():
        problem = "is a directory"
    elif parent.exists() and not parent.is_dir():
        problem = f"{parent} is not a directory"
    elif not parent.is_dir():
        problem = f"directory {parent} does not exist"
    elif not os.access(parent, os.W_OK | os.X_OK):
        problem = f"directory {parent} is not writable"
    elif path.exists() and not os.access(path, os.W_OK):
        problem = "the file is not writable"
    if problem:
        raise InputError(f"{option} {path}: {problem}")


@dataclass(frozen=True)
class InvestigateOptions:
    """`--investigate`: re-run the failing command with one change per experiment (see assistant.investigate)."""

    enabled: bool = False
    budget_s: float | None = None  # None: BUDGET_FACTOR times the failing run
    only: tuple[str, ...] = ()  # experiment ids to run, whether or not they would be chosen
    assume_yes: bool = False  # consent given on the command line (--yes)
    report_before: Path | None = None  # the diagnosis before the experiments, as JSON (`eval reproduce --investigate`)


def run(
    argv: list[str], report: Path | None = None, rerun_blocking: bool = False, memory_history: bool = False,
    evidence_out: Path | None = None, diagnose_failures: bool = True, settings=None, console=None,
    investigate: InvestigateOptions | None = None,
) -> int:
    """The whole `torchhelp run`: execute, and on failure diagnose.

    Returns the command's own status as subprocess reports it (-N: killed by signal N); nothing that
    goes wrong inside torchhelp after the start changes it (see ``run_signals.die_like`` for the exit).
    """
    started = process_started()
    for option, path in (("--report", report), ("--evidence-out", evidence_out), ("--report-before", (investigate or InvestigateOptions()).report_before)):
        if path is not None:
            check_output_path(path, option)
    try:
        outcome = execute(argv, memory_history=memory_history)
    except RunAbandoned as exc:
        _note("torchhelp: stopped at once; the command's processes were killed.")
        return -exc.signum
    try:
        # SIGTERM/SIGHUP now stop the diagnosis (as KeyboardInterrupt), not torchhelp's exit status.
        with stoppable():
            _after_exit(outcome, argv, report, rerun_blocking, evidence_out, diagnose_failures, settings, console,
                        investigate or InvestigateOptions(), started)
    except (KeyboardInterrupt, RunAbandoned):  # RunAbandoned: stopped twice during the CUDA_LAUNCH_BLOCKING rerun
        _note("torchhelp: diagnosis interrupted.")
    except Exception as exc:  # noqa: BLE001 - the edge of `run`: our failure must not replace the program's status
        if os.environ.get("TORCHHELP_DEBUG"):
            import traceback

            traceback.print_exc()
        # One printable line: the message may quote the program's own (untrusted) text.
        first = "".join(c if c.isprintable() else "?" for c in (str(exc).splitlines() or [""])[0][:200])
        _note(f"torchhelp: could not diagnose this failure ({type(exc).__name__}: {first}); the exit status is the command's own.")
    finally:
        shutil.rmtree(outcome.run_dir, ignore_errors=True)
    return outcome.exit_code


def stop_line(outcome: RunOutcome) -> str:
    """The one line shown when the command was stopped on request: which stop, and that nothing is diagnosed."""
    forwarded = next((s for s in outcome.forwarded if s in (signal.SIGTERM, signal.SIGHUP)), None)
    if forwarded is not None:
        return f"torchhelp: {signal.Signals(forwarded).name} was passed on to the command; no diagnosis."
    return "torchhelp: interrupted; no diagnosis."


def _note(text: str) -> None:
    """One line to stderr, which may itself be gone (a closed terminal after SIGHUP)."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def process_started() -> float:
    """The ``time.perf_counter()`` value at which this process started, so that a time bound on the whole
    command counts the interpreter's own start too (Linux reads it from /proc; elsewhere it is now)."""
    now = time.perf_counter()
    try:
        after_name = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start_ticks = int(after_name[19])  # field 22 of stat(5); the fields after the name start at field 3
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        age = uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return now
    return now - min(max(age, 0.0), 60.0)  # a bound: a clock oddity must not spend the whole budget


def _after_exit(outcome: RunOutcome, argv: list[str], report: Path | None, rerun_blocking: bool, evidence_out: Path | None,
                diagnose_failures: bool, settings, console, investigate: InvestigateOptions, started: float | None = None) -> None:
    """Write the evidence file and, for a failure the user did not ask to stop, the diagnosis."""
    if evidence_out is not None:
        from assistant.render.outgoing import shown_value  # the record quotes the program's output: no secrets

        evidence_out.write_text(json.dumps({"exit_code": outcome.exit_code, "record": shown_value(outcome.record), "records": len(outcome.records)}, default=str))
    if outcome.exit_code == 0 or not diagnose_failures:
        return
    if outcome.stopped:
        # Someone asked the job to end; a diagnosis of that would only delay it.
        _note(stop_line(outcome))
        return
    launcher_only = outcome.record is None or outcome.record.get("exc_type") in SECONDARY_TYPES  # e.g. torchrun's ChildFailedError
    missing = missing_launch(outcome.stderr_tail, argv) if launcher_only else None
    if missing is not None:
        # Not a crash: the command named something that does not exist. Say what, where, and the closest name.
        _note(f"torchhelp: {missing}")
        return
    from assistant.engine import default_engine
    from assistant.probes.collect import evidence_from_record
    from assistant.probes.env import collect_environment
    from assistant.probes.source import with_source_scan

    record = outcome.record or {}
    torch_env = record.get("torch_env")
    env = collect_environment(python_of(argv), torch=torch_env if isinstance(torch_env, dict) else None)
    text = diagnosis_text(outcome)
    notes = [] if outcome.record or interrupted(outcome) else ["No Python traceback was recorded (the process died in native code or was killed); diagnosed from its exit status."]
    evidence = with_source_scan(evidence_from_record(record, env=_env_summary(env)), text)
    engine = default_engine(settings)
    diagnosed_at = time.perf_counter()
    diagnosis = engine.diagnose(text, evidence=evidence, notes=notes)
    diagnose_s = time.perf_counter() - diagnosed_at
    if rerun_blocking and diagnosis.category in RERUN_CATEGORIES:
        again = execute(argv, memory_history=False, extra_env={"CUDA_LAUNCH_BLOCKING": "1"}, capture_output=True)
        summary = rerun_summary(again)
        evidence = with_source_scan(evidence_from_record(record, env=_env_summary(env), rerun=summary), text)
        diagnosis = engine.diagnose(text, evidence=evidence, notes=notes + [f"Re-ran once with CUDA_LAUNCH_BLOCKING=1 ({summary['duration_s']} s, exit code {summary['exit_code']})."])
        shutil.rmtree(again.run_dir, ignore_errors=True)
    elif diagnosis.category in RERUN_CATEGORIES and not investigate.enabled:
        diagnosis = _with_note(diagnosis, "Run again with `torchhelp run --rerun-blocking -- ...` to re-execute once with CUDA_LAUNCH_BLOCKING=1 and see the operation that really failed.")
    if investigate.enabled:
        if investigate.report_before is not None:
            _write_report(investigate.report_before, diagnosis)
        from assistant.investigate.protocol import total_deadline

        # The answer after the experiments costs about what the first one did, plus its rendering.
        deadline = total_deadline(started, outcome.duration_s, diagnose_s + 0.5) if started is not None else None
        diagnosis = _investigated(outcome, argv, text, evidence, diagnosis, engine, investigate, notes, deadline)
    if report is not None:
        _write_report(report, diagnosis)
    _render(diagnosis, console)


def _write_report(path: Path, diagnosis) -> None:
    """The Diagnosis JSON, same contract as ask --json: no escapes, no secrets."""
    from assistant.render.outgoing import shown

    path.write_text(json.dumps(shown(diagnosis).to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _investigated(outcome: RunOutcome, argv: list[str], text: str, evidence, diagnosis, engine, options: InvestigateOptions, notes: list[str],
                  deadline: float | None = None):
    """The diagnosis after the experiments (with consent), or with a note saying why nothing was re-run."""
    from assistant.investigate.catalogue import applicable
    from assistant.investigate.consent import ask_consent
    from assistant.investigate.protocol import FailingRun, investigate

    used_cuda = _used_cuda(text, evidence)
    specs = applicable(diagnosis, used_cuda, options.only, text)
    if not specs:
        return _with_note(diagnosis, f"--investigate: no experiment applies to a {diagnosis.category} failure; nothing was re-run.")
    allowed, why = ask_consent(argv, specs, options.assume_yes)
    if not allowed:
        return _with_note(diagnosis, f"--investigate: {why}.")
    failing = FailingRun(argv, text, outcome.duration_s, diagnosis.location or "", used_cuda)

    def diagnose_rerun(rerun_text: str):
        return engine.diagnose(rerun_text, evidence=_rerun_evidence(rerun_text), notes=notes)

    def rediagnose(results):
        from dataclasses import replace

        return engine.diagnose(text, evidence=replace(evidence, experiments=results), notes=notes)

    return investigate(failing, diagnosis, diagnose_rerun, budget_s=options.budget_s, only=options.only,
                       progress=lambda line: _note(f"torchhelp: {line}"), rediagnose=rediagnose, deadline=deadline)


def _rerun_evidence(text: str):
    """Evidence for a re-run's text: what the user's files say at its frames (no live probes)."""
    from assistant.probes.source import with_source_scan
    from assistant.types import Evidence

    return with_source_scan(Evidence(), text)


def _used_cuda(text: str, evidence) -> bool:
    """Whether the failing run used CUDA: its text names it, or the probes saw a CUDA tensor or CUDA memory."""
    return ("cuda" in text.lower() or "nccl" in text.lower() or evidence.memory is not None
            or any(t.device.startswith("cuda") for t in evidence.tensors))


def _with_note(diagnosis, note: str):
    from dataclasses import replace

    return replace(diagnosis, notes=tuple(diagnosis.notes) + (note,))


def _env_summary(env: dict[str, Any]) -> dict[str, Any]:
    keys = ("python", "torch", "cuda", "cudnn", "nccl", "driver", "gpus", "arch_list", "cuda_available", "packages", "env", "notes", "torch_import_error")
    return {k: env[k] for k in keys if k in env}


def _render(diagnosis, console) -> None:
    from rich.console import Console

    from assistant.render.terminal import render_terminal

    render_terminal(diagnosis, console or Console(stderr=True))
