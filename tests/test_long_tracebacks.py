"""Tracebacks longer than the reader's window (1 MiB) or the parser's line budget (issue 23).

Both logs are produced by real PyTorch programs run here on the CPU:

* a model built as a 4,000-deep recursive chain whose last layer has the wrong input size, the
  failure logged with ``logging.exception`` (which prints every frame): about 2 MiB of frames,
  the final ``RuntimeError`` line at the very end;
* a 12,000-layer model saved under ``DataParallel`` and loaded into the bare model: one
  ``load_state_dict`` message of 2.4 MB whose "Missing" and "Unexpected" key lists are single lines;
* the first with its middle frames repeated to 4.4 MB (past what a stream keeps of its middle).

Each is diagnosed through ``torchhelp ask FILE``, ``torchhelp ask`` on standard input and the Python
``diagnose()``, and must give the category and cause that the same program gives at a small size,
with a note saying what was not read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from assistant import diagnose

DEEP = '''
import logging, sys
import torch, torch.nn as nn
sys.setrecursionlimit(50000)
logging.basicConfig(level=logging.INFO)
class Chain(nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.proj = nn.Linear(8, 8) if depth else nn.Linear(16, 4)
        self.rest = Chain(depth - 1) if depth else None
    def forward(self, x):
        x = self.proj(x)
        return self.rest(x) if self.rest is not None else x
for step in range(3):
    print(f"step {step} building", file=sys.stderr)
model = Chain(int(sys.argv[1]))
try:
    model(torch.randn(4, 8))
except Exception:
    logging.getLogger("train").exception("training step failed")
    sys.exit(1)
'''

WIDE = '''
import sys
import torch.nn as nn
model = nn.Module()
model.blocks = nn.ModuleDict({f"encoder_block_{i:05d}_projection": nn.Linear(2, 2) for i in range(int(sys.argv[1]))})
state = {"module." + k: v for k, v in model.state_dict().items()}
model.load_state_dict(state)
'''


def _stderr_of(program: str, arg: int, out: Path) -> Path:
    proc = subprocess.run([sys.executable, "-c", program, str(arg)], capture_output=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]
    out.write_bytes(proc.stderr)
    return out


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The two real failures, large and small (the small ones fit every bound: the reference answer)."""
    d = tmp_path_factory.mktemp("long_tracebacks")
    logs = {
        "deep": _stderr_of(DEEP, 4000, d / "deep.log"),
        "deep_small": _stderr_of(DEEP, 20, d / "deep_small.log"),
        "wide": _stderr_of(WIDE, 12000, d / "wide.log"),
        "wide_small": _stderr_of(WIDE, 40, d / "wide_small.log"),
    }
    # Deeper than the interpreter's C stack allows here (it crashes past about 6,000 levels): the real
    # traceback with its middle frames repeated, 4.4 MB, more than a stream keeps of its middle (4 MiB).
    lines = logs["deep"].read_text(encoding="utf-8").split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("Traceback")) + 3
    (d / "deeper.log").write_text("\n".join(lines[:at] + lines[at : at + 12] * 4000 + lines[at:]), encoding="utf-8")
    logs["deeper"], logs["deeper_small"] = d / "deeper.log", logs["deep_small"]
    return logs


def _ask(args: list[str], home: Path, **kw) -> dict:  # type: ignore[no-untyped-def]
    env = {**os.environ, "TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0", "TORCHHELP_LLM": "none"}
    proc = subprocess.run([sys.executable, "-m", "assistant", "ask", "--json", *args], capture_output=True, env=env, timeout=300, **kw)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return json.loads(proc.stdout)


def _answers(log: Path, home: Path) -> list[tuple[str, str, list[str]]]:
    """(category, title, notes) from the file door, the stdin door and the Python API."""
    by_file = _ask([str(log)], home)
    with log.open("rb") as fh:
        by_stdin = _ask(["-"], home, stdin=fh)
    api = diagnose(log.read_text(encoding="utf-8"), dense=False, llm="none")
    return [(d["category"], d["title"], d["notes"]) for d in (by_file, by_stdin)] + [(api.category, api.title, list(api.notes))]


@pytest.mark.parametrize("name", ["deep", "wide", "deeper"])
def test_a_traceback_over_the_window_gets_the_small_ones_answer(name: str, logs: dict[str, Path], tmp_path: Path) -> None:
    big, small = logs[name], logs[f"{name}_small"]
    assert big.stat().st_size > 1_600_000  # well over the 1 MiB window
    want = diagnose(small.read_text(encoding="utf-8"), dense=False, llm="none")
    assert want.category != "unknown"
    for category, title, notes in _answers(big, tmp_path / "home"):
        assert (category, title) == (want.category, want.title)
        said = " ".join(notes)
        assert "not read" in said, notes  # the note says what part was left out


def test_the_deep_chain_keeps_its_first_and_last_frames(logs: dict[str, Path]) -> None:
    """The window keeps the program's own frame (the head) and the final error line (the tail)."""
    from assistant.parse.reader import DEFAULT_WINDOW, read_path

    inp = read_path(logs["deep"])
    assert len(inp.text.encode()) <= DEFAULT_WINDOW
    assert 'File "<string>", line 18, in <module>' in inp.text
    assert inp.text.rstrip().endswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x8 and 16x4)")
