"""`kb search` and `eval score` fit the terminal (issue 11, item 9): run on a real pseudo-terminal
of 60, 80 and 120 columns, no line is wider than the terminal and every key value is still there
(wrapped onto more lines when needed, never cut)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from rich.cells import cell_len

from conftest import ROOT

WIDTHS = (60, 80, 120)
_CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
QUERY = "expandable_segments fragmentation reserved but unallocated"


def run_on_pty(args: list[str], env: dict[str, str], columns: int, timeout: float = 300) -> str:
    """Run the CLI with stdout and stderr on a pseudo-terminal ``columns`` wide; what it showed, escapes removed."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    clean_env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([sys.executable, "-m", "assistant", *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                            env={**clean_env, "TERM": "xterm-256color"}, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                data = os.read(master, 65536)
            except OSError as exc:  # EIO: the child closed the terminal
                if exc.errno != errno.EIO:
                    raise
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        proc.wait(timeout=30)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")
    return _CSI.sub("", b"".join(chunks).decode("utf-8", errors="replace")).replace("\r\n", "\n")


def _assert_fits(out: str, columns: int) -> None:
    too_wide = [line for line in out.splitlines() if cell_len(line) > columns]
    assert not too_wide, too_wide


def _squeezed(text: str) -> str:
    return "".join(text.split())


@pytest.fixture(scope="module")
def lexical_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("tables") / "home"
    return {**os.environ, "TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0", "TORCHHELP_LLM": "none", "PYTHONPATH": str(ROOT)}


@pytest.mark.parametrize("columns", WIDTHS)
def test_kb_search_fits_the_terminal(columns: int, lexical_env: dict[str, str]) -> None:
    args = ["kb", "search", "--mode", "lexical", "-k", "5", QUERY]
    passages = json.loads(subprocess.run([sys.executable, "-m", "assistant", *args, "--json"], capture_output=True, env=lexical_env, timeout=300, check=True).stdout)["passages"]
    out = run_on_pty(args, lexical_env, columns)
    _assert_fits(out, columns)
    assert passages[0]["id"] in out.splitlines()[0]  # the best passage comes first
    flat = _squeezed(out)
    for p in passages:  # score, id and path together: wrapped onto more lines perhaps, never cut
        assert _squeezed(f"{p['score']:.3f} {p['id']} ({p['path']})") in flat, p["id"]


@pytest.mark.parametrize("columns", WIDTHS)
def test_eval_score_fits_the_terminal(columns: int, lexical_env: dict[str, str], tmp_path: Path) -> None:
    captures = tmp_path / "captures" / "cpu"
    captures.mkdir(parents=True)
    for slug in ("cpu-oom-full-similarity-matrix", "accumulated-loss-backward", "argmax-in-loss-path"):
        shutil.copyfile(ROOT / "eval" / "captured" / "cpu" / f"{slug}.json", captures / f"{slug}.json")
    results = tmp_path / "a-results-folder-with-a-long-name-so-that-its-path-is-wider-than-sixty-columns"
    variants = ["full", "rules", "lexical", "regex"]  # "retrieval" would build the dense index: minutes
    out = run_on_pty(["eval", "score", "--variants", ",".join(variants), "--captures", str(captures.parent), "--results-dir", str(results)], lexical_env, columns)
    _assert_fits(out, columns)
    doc = json.loads((results / "captured.json").read_text())
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.split() and line.split()[0] in variants}
    assert set(rows) == set(variants), out
    narrow = columns < 80  # the lead-check and p95 columns are left out: nine values cannot fit 60 columns
    shares = ("category_accuracy", "remedy_hit", "must_mention_recall", "citation_validity", "wrong_guess_rate", "check_share",
              *(() if narrow else ("lead_check_share",)))
    latencies = ("latency_ms_p50", *(() if narrow else ("latency_ms_p95",)))
    for v in variants:
        o = doc["variants"][v]["overall"]
        expected = ["–" if o.get(k) is None else f"{o[k]:.3f}" for k in shares]
        expected += [f"{o[k]:.1f}" for k in latencies]
        assert rows[v] == expected, (v, rows[v])
    assert _squeezed(str(results / "captured.json")) in _squeezed(out)  # the long path folds, whole
