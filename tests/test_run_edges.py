"""`torchhelp run` at its edges (issue 21, defects 3 and 4), on real runs.

Defect 3: a command that names something that does not exist (a misspelt script, a module that
`python -m` cannot find, a program not on PATH) is not a crash to diagnose: say what was not found,
from where, and the closest name there, and exit with the program's own status.

Defect 4: a stop the user asks for (Ctrl-C typed on a real pseudo-terminal, SIGINT or SIGTERM sent
to torchhelp) ends quietly and at once with the program's own status, printing at most one line;
a second stop ends torchhelp at once even while the program is still shutting down, and takes the
program's processes with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import ROOT

PY = sys.executable
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals, ptys and /proc")
STOP_S = 2.0  # the most a requested stop may take, from the signal to torchhelp's exit


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("th_home_edges")
    return {**os.environ, "TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0", "PYTHONPATH": str(ROOT)}


def wrapper(*args: str) -> list[str]:
    return [PY, "-m", "assistant", "run", "--", *args]


def script(path: Path, code: str) -> Path:
    path.write_text(textwrap.dedent(code))
    return path


def ours(stderr: str) -> list[str]:
    """The lines torchhelp itself printed (on a terminal, after the echoed ^C and our own typing marks)."""
    lines = (line.replace("<typed>", "").replace("^C", "").strip() for line in stderr.splitlines())
    return [line for line in lines if line.startswith(("torchhelp", "╭─ torchhelp"))]


# --- Defect 3: what the command names does not exist --------------------------------------------------


def test_a_misspelt_script_is_named_with_the_closest_file(tmp_path: Path, env: dict[str, str]) -> None:
    script(tmp_path / "train.py", "print('training')\n")
    script(tmp_path / "evaluate.py", "print('eval')\n")
    direct = subprocess.run([PY, "trian.py", "--lr", "3"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    res = subprocess.run(wrapper(PY, "trian.py", "--lr", "3"), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == direct.returncode == 2, res.stderr
    assert "can't open file" in res.stderr  # Python's own line is still shown
    lines = ours(res.stderr)
    assert len(lines) == 1, res.stderr
    line = lines[0]
    assert "trian.py was not found" in line and str(tmp_path) in line and "Did you mean train.py?" in line
    assert f"{Path(PY).name} train.py --lr 3" in line  # the corrected command, ready to copy
    for wrong in ("╭─ torchhelp", "native", "traceback", "Fixes", "…"):
        assert wrong not in res.stderr


def test_a_misspelt_script_in_a_folder_is_looked_up_there(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "scripts").mkdir()
    script(tmp_path / "scripts" / "finetune.py", "print('ok')\n")
    res = subprocess.run(wrapper(PY, "scripts/fintune.py"), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    (line,) = ours(res.stderr)
    assert "scripts/fintune.py was not found" in line and "Did you mean scripts/finetune.py?" in line


def test_a_missing_module_is_named_with_the_closest_module(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "pkg").mkdir()
    script(tmp_path / "pkg" / "__init__.py", "")
    script(tmp_path / "pkg" / "model.py", "print('model')\n")
    for typed, expected in (("pkg.mdl", "pkg.model"), ("pgk.model", "pkg.model")):
        direct = subprocess.run([PY, "-m", typed], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        res = subprocess.run(wrapper(PY, "-m", typed), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert res.returncode == direct.returncode == 1, res.stderr
        (line,) = ours(res.stderr)
        assert f"no module named {typed}" in line and str(tmp_path) in line and f"Did you mean {expected}?" in line, line
        assert "╭─ torchhelp" not in res.stderr


def test_a_command_not_on_path_is_named_with_the_closest_command(tmp_path: Path, env: dict[str, str]) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(PY, bin_dir / "python")
    path_env = {**env, "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    shell = subprocess.run(["sh", "-c", "pyhton x.py"], cwd=tmp_path, env=path_env, capture_output=True, timeout=60)
    res = subprocess.run(wrapper("pyhton", "x.py"), cwd=tmp_path, env=path_env, capture_output=True, text=True, timeout=120)
    assert res.returncode == shell.returncode == 127, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert "command not found: pyhton" in line and "did you mean python?" in line
    script(tmp_path / "train.sh", "echo hi\n")
    res = subprocess.run(wrapper("./trian.sh"), cwd=tmp_path, env=path_env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 127
    (line,) = res.stderr.strip().splitlines()
    assert str(tmp_path) in line and "did you mean ./train.sh?" in line


def test_a_script_that_fails_to_open_its_own_file_is_still_diagnosed(tmp_path: Path, env: dict[str, str]) -> None:
    """Only the command's own script counts as 'not found': a FileNotFoundError inside it is a failure to diagnose."""
    script(tmp_path / "train.py", "open('data/trian.csv')\n")
    res = subprocess.run(wrapper(PY, "train.py"), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 1
    assert "was not found, looking from" not in res.stderr and "╭─ torchhelp" in res.stderr
    # A script the program itself fails to start is not the command's own script either.
    script(tmp_path / "launch.py", "import subprocess, sys\nsys.exit(subprocess.run([sys.executable, 'helper.py']).returncode)\n")
    res = subprocess.run(wrapper(PY, "launch.py"), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "can't open file" in res.stderr
    assert "was not found, looking from" not in res.stderr


# --- Defect 4: stops --------------------------------------------------------------------------------


def _on_terminal(argv: list[str], cwd: Path, env: dict[str, str], keys: list[bytes], gap: float = 0.5,
                 deadline_s: float = 30) -> tuple[str, int, float]:
    """Run argv as the foreground job of a fresh pseudo-terminal; once it prints "ready", type each of
    ``keys`` (``gap`` s apart, after "cleaning up" when there are two). Returns what was shown, the wait
    status, and the seconds from the last key to torchhelp's exit."""
    import pty

    from pty_session import drain

    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    shown = bytearray()
    try:
        end = time.monotonic() + deadline_s
        pending = list(keys)
        last = time.monotonic()
        while time.monotonic() < end:
            wanted = b"ready" if len(pending) == len(keys) else b"cleaning up"
            if pending and wanted in shown:
                time.sleep(gap)
                os.write(fd, pending.pop(0))
                last = time.monotonic()
                shown += b"<typed>"
            if not drain(fd, shown, 0.05):
                break
        else:
            os.killpg(pid, signal.SIGKILL)
            pytest.fail(f"still running after {deadline_s} s:\n{shown.decode(errors='replace')[-2000:]}")
        _, status = os.waitpid(pid, 0)
        took = time.monotonic() - last
    finally:
        os.close(fd)
    return shown.decode("utf-8", errors="replace").replace("\r\n", "\n"), status, took


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_dead(pids: list[int], within: float = 2.0) -> list[int]:
    end = time.monotonic() + within
    while time.monotonic() < end and any(_alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


SLEEPER = """
    import time
    print("ready", flush=True)
    time.sleep(60)
    print("slept through", flush=True)
"""


def test_ctrl_c_ends_quietly_at_once_with_the_programs_status(tmp_path: Path, env: dict[str, str]) -> None:
    script(tmp_path / "sleeper.py", SLEEPER)
    direct_out, direct, _ = _on_terminal([PY, "sleeper.py"], tmp_path, env, [b"\x03"])
    out, status, took = _on_terminal([PY, "-m", "assistant", "run", "--", PY, "sleeper.py"], tmp_path, env, [b"\x03"])
    assert os.WIFSIGNALED(direct) and os.WTERMSIG(direct) == signal.SIGINT
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGINT, out[-3000:]
    assert took < STOP_S, f"{took:.2f} s from Ctrl-C to the end"
    after = out[out.index("KeyboardInterrupt"):].splitlines()[1:]  # the program's own traceback ends there
    assert [line for line in after if line.strip()] == ["torchhelp: interrupted; no diagnosis."], out[-3000:]
    for page in ("╭─ torchhelp", "Unrecognised", "Slurm", "preempt"):
        assert page not in out


def test_ctrl_c_keeps_an_exit_code_the_program_chose(tmp_path: Path, env: dict[str, str]) -> None:
    script(tmp_path / "graceful.py", """
        import sys, time
        print("ready", flush=True)
        try:
            time.sleep(60)
        except KeyboardInterrupt:
            print("checkpoint saved", flush=True)
            sys.exit(130)
    """)
    out, status, took = _on_terminal([PY, "-m", "assistant", "run", "--", PY, "graceful.py"], tmp_path, env, [b"\x03"])
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 130, out
    assert took < STOP_S
    assert "checkpoint saved" in out and ours(out) == ["torchhelp: interrupted; no diagnosis."]


SLOW_SHUTDOWN = """
    import os, signal, subprocess, sys, time
    quiet = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(60)"
    kids = [subprocess.Popen([sys.executable, "-c", quiet]),
            subprocess.Popen([sys.executable, "-c", quiet], start_new_session=True)]
    open("pids", "w").write(" ".join(str(p) for p in [os.getpid(), *(k.pid for k in kids)]))
    print("ready", flush=True)
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a long, uninterruptible shutdown
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("cleaning up", flush=True)
        time.sleep(60)
"""


def test_a_second_ctrl_c_ends_torchhelp_at_once_and_kills_the_programs_processes(tmp_path: Path, env: dict[str, str]) -> None:
    script(tmp_path / "slow.py", SLOW_SHUTDOWN)
    out, status, took = _on_terminal([PY, "-m", "assistant", "run", "--", PY, "slow.py"], tmp_path, env, [b"\x03", b"\x03"])
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    left = _wait_dead(pids)
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert took < STOP_S, f"{took:.2f} s from the second Ctrl-C to the end"
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGINT, out[-2000:]
    assert not left, "the program (or a process it started) outlived torchhelp"
    assert len(ours(out)) == 1 and "╭─ torchhelp" not in out, out[-2000:]


def _started(proc: subprocess.Popen[str], marker: Path) -> None:
    for _ in range(600):
        if marker.exists() and marker.read_text():
            return
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the program never started")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_sent_to_torchhelp_is_forwarded_and_ends_quietly(tmp_path: Path, env: dict[str, str], sig: signal.Signals) -> None:
    script(tmp_path / "worker.py", """
        import os, time
        open("pids", "w").write(str(os.getpid()))
        time.sleep(60)
    """)
    proc = subprocess.Popen(wrapper(PY, "worker.py"), cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        _started(proc, tmp_path / "pids")
        child = int((tmp_path / "pids").read_text())
        start = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - start
    finally:
        proc.kill()
    assert proc.returncode == -sig, err
    assert took < STOP_S, f"{took:.2f} s"
    assert not _wait_dead([child]), "the program outlived torchhelp"
    assert len(ours(err)) == 1 and "no diagnosis" in err and "╭─ torchhelp" not in err, err


def test_a_second_sigterm_ends_torchhelp_while_the_program_ignores_the_first(tmp_path: Path, env: dict[str, str]) -> None:
    script(tmp_path / "stubborn.py", """
        import os, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open("pids", "w").write(str(os.getpid()))
        time.sleep(60)
    """)
    proc = subprocess.Popen(wrapper(PY, "stubborn.py"), cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        _started(proc, tmp_path / "pids")
        child = int((tmp_path / "pids").read_text())
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert proc.poll() is None and _alive(child)  # the program chose to ignore it: torchhelp waits
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - start
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGTERM, err
    assert took < STOP_S, f"{took:.2f} s"
    assert not _wait_dead([child]), "the program outlived torchhelp"
    assert len(ours(err)) == 1 and "╭─ torchhelp" not in err, err
