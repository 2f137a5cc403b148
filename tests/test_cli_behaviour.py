"""CLI behaviour (issue 11, items 7, 8, 12, 13): interactive input, help and --version, where eval
reads and writes, and `env` naming torchhelp's own version.

Every command runs as a real subprocess (the interactive one on a real pseudo-terminal), lexical
retrieval only, with its own TORCHHELP_HOME.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT
from pty_session import drain, torchhelp_on_a_terminal

import assistant

CAPTURE = ROOT / "eval" / "captured" / "cpu" / "linear-after-conv-flatten.json"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0", "PYTHONPATH": str(ROOT), "COLUMNS": "100", **extra}


def run_cli(args: list[str], home: Path, cwd: Path | None = None, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "assistant", *args], capture_output=True, text=True, timeout=timeout, env=_env(home), cwd=cwd)


# --- item 7: one Ctrl-D ends interactive input -------------------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_interactive_ask_finishes_on_one_ctrl_d(tmp_path: Path) -> None:
    traceback_text = json.loads(CAPTURE.read_text(encoding="utf-8"))["stderr"]
    out = bytearray()
    with torchhelp_on_a_terminal(["ask"], _env(tmp_path)) as (pid, fd):
        deadline = time.monotonic() + 60
        while b"Ctrl-D" not in out and time.monotonic() < deadline:
            assert drain(fd, out, 0.5), out.decode(errors="replace")
        assert b"Ctrl-D" in out, "no paste prompt"
        for line in traceback_text.splitlines():  # as a paste arrives: line by line, echoed back
            os.write(fd, line.encode() + b"\n")
            drain(fd, out, 0.01)
        os.write(fd, b"\x04")  # ONE Ctrl-D at the start of a line
        deadline = time.monotonic() + 120
        alive = True
        while alive and time.monotonic() < deadline:
            alive = drain(fd, out, 0.5)
        _, status = os.waitpid(pid, os.WNOHANG) if alive else os.waitpid(pid, 0)
        text = _ANSI.sub("", out.decode(errors="replace"))
        assert not alive, "torchhelp ask still waits for input after one Ctrl-D:\n" + text[-2000:]
        assert os.waitstatus_to_exitcode(status) == 0, text[-2000:]
        after = text.split("Ctrl-D", 1)[1]
        assert "shape_mismatch" in after and "Fixes" in after, after[-2000:]


def test_read_stream_stops_at_first_terminal_eof() -> None:
    """The reader's contract on a terminal: an empty read ends input even after a full read."""
    from assistant.parse.reader import read_stream

    class Terminal:
        def __init__(self) -> None:
            self.reads = [b"RuntimeError: boom\n", b""]  # then a second Ctrl-D would be needed

        def isatty(self) -> bool:
            return True

        def read(self, n: int) -> bytes:  # a buffered read would swallow the first EOF
            raise AssertionError("read() on a terminal needs two Ctrl-D")

        def read1(self, n: int) -> bytes:
            if not self.reads:
                raise AssertionError("read past the first EOF")
            return self.reads.pop(0)

    assert read_stream(Terminal()).text == "RuntimeError: boom\n"  # type: ignore[arg-type]


# --- item 8: help, --version, no <bool>, every option documented -------------------------------


@pytest.mark.parametrize("args", [[], ["kb"], ["eval"]])
def test_group_alone_prints_help_not_an_error(args: list[str], tmp_path: Path) -> None:
    res = run_cli(args, tmp_path)
    assert res.returncode in (0, 2), res.stderr
    assert "internal error" not in res.stderr + res.stdout
    assert "Usage:" in res.stdout + res.stderr and "Commands" in res.stdout + res.stderr


def test_usage_errors_are_click_errors_not_internal(tmp_path: Path) -> None:
    res = run_cli(["ask", "--no-such-option"], tmp_path)
    assert res.returncode == 2, res.stderr
    assert "internal error" not in res.stderr and "--no-such-option" in res.stderr


def test_version(tmp_path: Path) -> None:
    res = run_cli(["--version"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"torchhelp {assistant.__version__}"


@pytest.mark.parametrize("args", [["--help"], ["ask", "--help"], ["triage", "--help"], ["kb", "search", "--help"], ["eval", "score", "--help"]])
def test_help_shows_no_bool_metavar(args: list[str], tmp_path: Path) -> None:
    res = run_cli(args, tmp_path)
    assert res.returncode == 0, res.stderr
    assert "<bool>" not in res.stdout, res.stdout


def test_every_option_has_help_text() -> None:
    import typer.main

    from assistant.cli import _register_optional_commands, app

    _register_optional_commands()
    missing: list[str] = []

    def walk(command, path: str) -> None:  # type: ignore[no-untyped-def]
        for p in command.params:
            if getattr(p, "param_type_name", "") == "option" and not getattr(p, "help", None):
                missing.append(f"{path} {'/'.join(p.opts)}")
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "torchhelp")
    assert not missing, missing


# --- item 12: eval reads captures from a checkout and writes results where asked ----------------


def _fake_checkout(root: Path, n: int = 3) -> Path:
    """A minimal checkout: pyproject, the package folder, a few real captures and the thresholds."""
    (root / "assistant").mkdir(parents=True)
    (root / "eval" / "cases").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    shutil.copy(ROOT / "eval" / "thresholds.toml", root / "eval" / "thresholds.toml")
    dest = root / "eval" / "captured" / "cpu"
    dest.mkdir(parents=True)
    for p in sorted((ROOT / "eval" / "captured" / "cpu").glob("*.json"))[:n]:
        shutil.copy(p, dest / p.name)
    return root


def _installed_copy(tmp_path: Path) -> Path:
    """The package alone, as `pip install .` leaves it in site-packages (no eval/ beside it)."""
    site = tmp_path / "site-packages"
    shutil.copytree(ROOT / "assistant", site / "assistant", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "knowledge", site / "assistant" / "_knowledge")  # what setup.py's build hook ships
    return site


def _run_installed(args: list[str], site: Path, home: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**_env(home), "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-m", "assistant", *args], capture_output=True, text=True, timeout=240, env=env, cwd=cwd)


def test_eval_score_outside_a_checkout_says_where_to_point_captures(tmp_path: Path) -> None:
    site = _installed_copy(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = _run_installed(["eval", "score", "--variants", "regex"], site, tmp_path / "home", elsewhere)
    assert res.returncode != 0
    assert "--captures" in res.stderr and "internal error" not in res.stderr, res.stderr
    assert "site-packages" not in res.stderr, res.stderr  # not a path inside the package
    assert not (site / "eval").exists()


def test_eval_score_writes_results_to_the_cache_by_default(tmp_path: Path) -> None:
    site = _installed_copy(tmp_path)
    checkout = _fake_checkout(tmp_path / "checkout")
    home = tmp_path / "home"
    # Inside a checkout: its captures are found; results go under TORCHHELP_HOME, not the checkout.
    res = _run_installed(["eval", "score", "--variants", "regex"], site, home, checkout)
    assert res.returncode == 0, res.stderr
    assert (home / "eval" / "results" / "captured.json").is_file()
    assert not (checkout / "eval" / "results").exists() and not (site / "eval").exists()
    doc = json.loads((home / "eval" / "results" / "captured.json").read_text())
    assert doc["variants"]["regex"]["overall"]["n"] == 3
    # --captures from anywhere, results in a folder the user names.
    out = tmp_path / "mine"
    res = _run_installed(["eval", "score", "--variants", "regex", "--captures", str(checkout / "eval" / "captured"), "--results-dir", str(out)],
                         site, home, tmp_path)
    assert res.returncode == 0, res.stderr
    assert (out / "captured.json").is_file() and (out / "REPORT.md").is_file()
    assert not (site / "eval").exists()
    # --write-results: into the checkout's eval/results, as asked.
    res = _run_installed(["eval", "score", "--variants", "regex", "--write-results"], site, home, checkout / "eval")
    assert res.returncode == 0, res.stderr
    assert (checkout / "eval" / "results" / "captured.json").is_file()


def test_eval_reproduce_outside_a_checkout_is_a_clear_error(tmp_path: Path) -> None:
    site = _installed_copy(tmp_path)
    res = _run_installed(["eval", "reproduce", "--device", "cpu"], site, tmp_path / "home", tmp_path)
    assert res.returncode != 0
    assert "checkout" in res.stderr and "internal error" not in res.stderr, res.stderr
    assert not (site / "eval").exists()


def test_eval_reproduce_target_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Captures go to TORCHHELP_HOME by default, to --out, or to the checkout with --write-results."""
    import assistant.eval.reproduce as reproduce_mod
    from assistant.cli import main

    checkout = _fake_checkout(tmp_path / "checkout", n=0)
    shutil.copytree(ROOT / "eval" / "cases" / "linear-after-conv-flatten", checkout / "eval" / "cases" / "linear-after-conv-flatten")
    targets: list[Path] = []
    monkeypatch.setattr(reproduce_mod, "reproduce", lambda cases, target, **kw: targets.append(Path(target)) or [])
    monkeypatch.setenv("TORCHHELP_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(checkout)
    assert main(["eval", "reproduce", "--device", "cpu"]) == 0
    assert main(["eval", "reproduce", "--device", "cpu", "--out", str(tmp_path / "out")]) == 0
    assert main(["eval", "reproduce", "--device", "cpu", "--write-results"]) == 0
    assert targets == [tmp_path / "home" / "eval" / "captured", tmp_path / "out", checkout / "eval" / "captured"]


# --- item 13: env names torchhelp's version --------------------------------------------------


def test_env_shows_torchhelp_version(tmp_path: Path) -> None:
    res = run_cli(["env"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert f"torchhelp     {assistant.__version__}" in res.stdout.splitlines()[0]
    res = run_cli(["env", "--json"], tmp_path)
    assert json.loads(res.stdout)["torchhelp"] == assistant.__version__
