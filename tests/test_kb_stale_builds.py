"""A knowledge build killed part-way leaves its temporary `.index-*` folder behind (issue 23).

Real `torchhelp kb build` processes on the full knowledge: one is SIGKILLed while its temporary
folder exists, and the next build or `ask` must remove that folder; a build that is alive (stopped
with SIGSTOP while it holds its folder, so the timing is certain) must keep it, and finish once
continued, while an `ask` and a second build run beside it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CAPTURES

TRACEBACK = next(c["stderr"] for c in CAPTURES if c["slug"] == "lenet-view-cross-entropy-batch-mismatch")


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "TORCHHELP_HOME": str(home), "TORCHHELP_LLM": "none"}


def _temp_folders(home: Path) -> list[Path]:
    return sorted(home.glob(".index-*"))


def _start_build(home: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "assistant", "kb", "build"], env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _caught_building(home: Path, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> Path:
    """Wait until the build has created its temporary folder; stop the build there (SIGSTOP)."""
    before = set(_temp_folders(home))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        found = [f for f in _temp_folders(home) if f not in before]
        if found:
            proc.send_signal(signal.SIGSTOP)
            return found[0]
        time.sleep(0.002)
    raise AssertionError(f"the build never showed a temporary folder (exit {proc.poll()})")


def _ask(home: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "assistant", "ask", "--json", "-"], input=TRACEBACK.encode(), env=_env(home),
                          capture_output=True, timeout=300)


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    """A home whose index is built once, by a build that finished."""
    h = tmp_path / "home"
    h.mkdir()
    done = subprocess.run([sys.executable, "-m", "assistant", "kb", "build"], env=_env(h), capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return h


def _killed_build(home: Path) -> Path:
    proc = _start_build(home)
    left = _caught_building(home, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert left.is_dir()
    return left


@pytest.mark.parametrize("door", ["kb build", "ask"])
def test_a_killed_builds_folder_is_removed_by_the_next_run(home: Path, door: str) -> None:
    left = _killed_build(home)
    if door == "kb build":
        done = subprocess.run([sys.executable, "-m", "assistant", "kb", "build"], env=_env(home), capture_output=True, timeout=600)
    else:
        done = _ask(home)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert not left.exists()
    assert _temp_folders(home) == []


def test_a_live_builds_folder_is_kept_while_others_run(home: Path) -> None:
    left = _killed_build(home)
    live = _start_build(home)
    try:
        mine = _caught_building(home, live)  # stopped while it holds the lock and writes its folder
        asked = _ask(home)  # loads the finished index without waiting for the build
        assert asked.returncode == 0, asked.stderr.decode()[-2000:]
        assert mine.is_dir()  # not the ask's to remove: its builder is alive
        second = _start_build(home)  # waits for the lock
        time.sleep(1.0)
        assert second.poll() is None and mine.is_dir()
    finally:
        live.send_signal(signal.SIGCONT)
    assert live.wait(timeout=300) == 0, live.stderr.read().decode()[-2000:] if live.stderr else ""
    assert second.wait(timeout=300) == 0, second.stderr.read().decode()[-2000:] if second.stderr else ""
    assert not left.exists()  # removed by the second build, once it had the lock
    assert _temp_folders(home) == []
    assert (home / "index" / "manifest.json").is_file()
