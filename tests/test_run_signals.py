"""`torchhelp run` between the shell and the program: signals and exit statuses (issue 12, defects 1 and 6).

Everything here is real: a pseudo-terminal whose line discipline turns ^C into SIGINT for the
foreground process group, real signals sent to the wrapper, children that really die of SIGKILL,
SIGSEGV and SIGABRT, and real faults inside torchhelp (a full disk, a planted broken engine).
Each status is compared with what the same program gives when run without torchhelp.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import ROOT

PY = sys.executable
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals, ptys and /proc")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("th_home_signals")
    return {**os.environ, "TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0", "PYTHONPATH": str(ROOT)}


def wrapper(*args: str) -> list[str]:
    return [PY, "-m", "assistant", "run", *args]


def script(path: Path, code: str) -> Path:
    path.write_text(textwrap.dedent(code))
    return path


def run_on_terminal(argv: list[str], cwd: Path, env: dict[str, str], keys: bytes | None = None, after: bytes = b"ready",
                    deadline_s: float = 90) -> tuple[str, int]:
    """Run argv as the foreground job of a fresh 101x33 pseudo-terminal, type
    ``keys`` once ``after`` has been printed, and return everything shown and the wait status."""
    import fcntl
    import termios

    pid, master = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal, its group the foreground one
        try:
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
    shown, typed, end = b"", keys is None, time.monotonic() + deadline_s
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every holder of the terminal has exited
                    break
                if not chunk:
                    break
                shown += chunk
            if not typed and after in shown:
                time.sleep(0.3)  # let the program reach its sleep
                os.write(master, keys)  # type: ignore[arg-type]
                typed = True
        else:
            os.killpg(pid, signal.SIGKILL)
            pytest.fail(f"still running after {deadline_s} s; shown so far:\n{shown.decode(errors='replace')[-2000:]}")
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(master)
    return shown.decode("utf-8", errors="replace").replace("\r\n", "\n"), status


def signalled(status: int) -> str | None:
    return signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status) else None


SLEEPER = """
    import os, sys, time
    print("stderr-tty", sys.stderr.isatty(), os.get_terminal_size(2).columns if sys.stderr.isatty() else "-", flush=True)
    print("ready", flush=True)
    time.sleep(60)
    print("slept through", flush=True)
"""


# --- Defect 1: Ctrl-C, SIGTERM, SIGHUP --------------------------------------------------------------


def test_ctrl_c_on_the_terminal_interrupts_the_program_as_without_us(tmp_path: Path, env: dict[str, str]) -> None:
    script(tmp_path / "sleeper.py", SLEEPER)
    direct_out, direct = run_on_terminal([PY, "sleeper.py"], tmp_path, env, keys=b"\x03")
    out, status = run_on_terminal(wrapper("--", PY, "sleeper.py"), tmp_path, env, keys=b"\x03")
    assert signalled(direct) == "SIGINT" and "KeyboardInterrupt" in direct_out
    # The same death, the program's own KeyboardInterrupt traceback, then one line of ours (issue 21.4: no diagnosis).
    assert signalled(status) == "SIGINT", out[-3000:]
    assert "slept through" not in out
    assert 'sleeper.py", line 5, in <module>' in out and "KeyboardInterrupt" in out
    assert out.index("KeyboardInterrupt") < out.index("torchhelp")
    assert "without a Python traceback" not in out and "╭─ torchhelp" not in out
    assert "torchhelp: interrupted; no diagnosis." in out
    # The program's stderr is still a terminal, of the user's terminal's width.
    assert "stderr-tty True 101" in out and "stderr-tty True 101" in direct_out


def test_ctrl_c_handled_by_the_program_keeps_its_exit_code(tmp_path: Path, env: dict[str, str]) -> None:
    script(tmp_path / "graceful.py", """
        import time
        print("ready", flush=True)
        try:
            time.sleep(60)
        except KeyboardInterrupt:
            print("saved a checkpoint", flush=True)
    """)
    out, status = run_on_terminal(wrapper("--", PY, "graceful.py"), tmp_path, env, keys=b"\x03")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, out
    assert "saved a checkpoint" in out and "torchhelp" not in out


def test_sigint_sent_to_the_wrapper_alone_reaches_the_program(tmp_path: Path, env: dict[str, str]) -> None:
    """No terminal (a batch job): a SIGINT to torchhelp is passed on, once."""
    script(tmp_path / "sleeper.py", SLEEPER)
    proc = subprocess.Popen(wrapper("--", PY, "sleeper.py"), cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        while "ready" not in proc.stdout.readline():
            pass
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGINT, err[-3000:]
    assert "slept through" not in out
    # Passed on once, then ended quietly (issue 21.4): one line, no diagnosis of a requested stop.
    assert err.count("KeyboardInterrupt\n") == 1 and "╭─ torchhelp" not in err
    assert err.rstrip().endswith("torchhelp: interrupted; no diagnosis.")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_termination_signals_are_forwarded_and_leave_no_orphan(tmp_path: Path, env: dict[str, str], sig: signal.Signals) -> None:
    script(tmp_path / "worker.py", """
        import os, time
        open("child.pid", "w").write(str(os.getpid()))
        time.sleep(60)
    """)
    pid_file = tmp_path / "child.pid"
    proc = subprocess.Popen(wrapper("--", PY, "worker.py"), cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    child = 0
    try:
        for _ in range(600):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.05)
        child = int(pid_file.read_text())
        start = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - start
        assert proc.returncode == -sig, err
        assert not _alive(child), "the program outlived torchhelp"
        assert f"{sig.name} was passed on" in err and "╭─ torchhelp" not in err  # asked to stop: no diagnosis
        assert took < 30  # generous: no diagnosis delays a requested stop
    finally:
        proc.kill()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_program_that_handles_sigterm_decides_the_status(tmp_path: Path, env: dict[str, str]) -> None:
    script(tmp_path / "handler.py", """
        import signal, sys, time
        def stop(signum, frame):
            print("flushed and stopping", flush=True)
            sys.exit(0)
        signal.signal(signal.SIGTERM, stop)
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen(wrapper("--", PY, "handler.py"), cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        while "ready" not in proc.stdout.readline():
            pass
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0 and "flushed and stopping" in out


# --- Defect 6: the exit status is the program's ------------------------------------------------------

DEATHS = {
    "SIGKILL": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "SIGSEGV": "import ctypes\nctypes.string_at(0)\n",
    "SIGABRT": "import os\nos.abort()\n",
}


@pytest.mark.parametrize("name", sorted(DEATHS))
def test_signal_deaths_keep_their_signal(tmp_path: Path, env: dict[str, str], name: str) -> None:
    script(tmp_path / "die.py", DEATHS[name])
    direct = subprocess.run([PY, "die.py"], cwd=tmp_path, env=env, capture_output=True, timeout=60)
    res = subprocess.run(wrapper("--", PY, "die.py"), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert direct.returncode == res.returncode == -signal.Signals[name], res.stderr[-2000:]
    assert "╭─ torchhelp" in res.stderr  # diagnosed first, then the same death
    assert not list(tmp_path.glob("core*"))  # our re-raise does not dump a core over the program's


def test_exit_code_survives_a_full_disk_while_writing_the_report(tmp_path: Path, env: dict[str, str]) -> None:
    """A real fault inside torchhelp after the run: /dev/full accepts the open, fails the write (ENOSPC)."""
    script(tmp_path / "exit3.py", "import sys\nsys.exit(3)\n")
    for option in ("--report", "--evidence-out"):
        res = subprocess.run(wrapper(option, "/dev/full", "--", PY, "exit3.py"), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 3, res.stderr[-2000:]
        notes = [line for line in res.stderr.splitlines() if line.startswith("torchhelp: could not diagnose")]
        assert len(notes) == 1 and "OSError" in notes[0] and "internal error" not in res.stderr


PLANTED = """
    # Planted in the torchhelp process only (the program runs with TORCHHELP_RUN_DIR set).
    import os, time
    if not os.environ.get("TORCHHELP_RUN_DIR"):
        import assistant.engine as _engine
        def _broken(*args, **kwargs):
            if os.environ.get("PLANT") == "hang":
                open(os.environ["PLANT_MARK"], "w").close()
                time.sleep(60)
            raise RuntimeError("planted fault: the engine cannot start")
        _engine.default_engine = _broken
"""


def _planted_env(tmp_path: Path, env: dict[str, str], how: str) -> dict[str, str]:
    plant = tmp_path / "plant"
    plant.mkdir()
    script(plant / "sitecustomize.py", PLANTED)
    return {**env, "PYTHONPATH": f"{plant}{os.pathsep}{env['PYTHONPATH']}", "PLANT": how, "PLANT_MARK": str(tmp_path / "diagnosing")}


def test_exit_code_survives_a_broken_engine(tmp_path: Path, env: dict[str, str]) -> None:
    script(tmp_path / "exit3.py", "import sys\nsys.exit(3)\n")
    res = subprocess.run(wrapper("--", PY, "exit3.py"), cwd=tmp_path, env=_planted_env(tmp_path, env, "raise"), capture_output=True, text=True, timeout=300)
    assert res.returncode == 3, res.stderr
    assert res.stderr.strip().splitlines() == [
        "torchhelp: could not diagnose this failure (RuntimeError: planted fault: the engine cannot start); the exit status is the command's own."]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_stopping_the_diagnosis_keeps_the_programs_exit_code(tmp_path: Path, env: dict[str, str], sig: signal.Signals) -> None:
    script(tmp_path / "exit3.py", "import sys\nsys.exit(3)\n")
    planted = _planted_env(tmp_path, env, "hang")
    proc = subprocess.Popen(wrapper("--", PY, "exit3.py"), cwd=tmp_path, env=planted, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for _ in range(1200):
            if (tmp_path / "diagnosing").exists():
                break
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 3, err
    assert err.strip() == "torchhelp: diagnosis interrupted."


@pytest.mark.parametrize("option", ["--report", "--evidence-out"])
@pytest.mark.parametrize("case", ["missing-dir", "parent-is-file", "is-a-directory"])
def test_unwritable_output_paths_are_refused_before_the_program_starts(tmp_path: Path, env: dict[str, str], option: str, case: str) -> None:
    (tmp_path / "afile").write_text("")
    (tmp_path / "adir").mkdir()
    target = {"missing-dir": tmp_path / "no" / "such" / "d.json", "parent-is-file": tmp_path / "afile" / "d.json", "is-a-directory": tmp_path / "adir"}[case]
    script(tmp_path / "long_job.py", "open('started', 'w').close()\n")
    res = subprocess.run(wrapper(option, str(target), "--", PY, "long_job.py"), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert not (tmp_path / "started").exists()  # refused before the program ran
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"torchhelp: error: {option} {target}: "), res.stderr


def test_a_command_that_cannot_start_exits_like_the_shell(tmp_path: Path, env: dict[str, str]) -> None:
    script(tmp_path / "not_executable.sh", "echo hi\n")
    for argv in (["no-such-command-xyz"], ["./not_executable.sh"]):
        shell = subprocess.run(["sh", "-c", argv[0]], cwd=tmp_path, capture_output=True, timeout=60)
        res = subprocess.run(wrapper("--", *argv), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert res.returncode == shell.returncode, (argv, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1
