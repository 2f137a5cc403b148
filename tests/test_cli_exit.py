"""`torchhelp ask` ends without freeing its heap one object at a time: nothing it printed may be lost."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT


def _ask(*args: str, tmp_path) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    out = tmp_path / "out.txt"
    with out.open("w") as fh:  # a file, not a terminal: stdout is block-buffered, so an unflushed end would cut it
        proc = subprocess.run([sys.executable, "-m", "assistant", "ask", *args], stdout=fh, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.read_text(), proc.stderr)


def test_a_fast_exit_keeps_the_whole_answer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    proc = _ask("--json", str(ROOT / "examples" / "linear_shape_mismatch.log"), tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)  # complete JSON: the buffer was flushed before the process ended
    assert answer["category"] == "shape_mismatch" and answer["fixes"]


def test_markdown_and_terminal_answers_are_complete(tmp_path) -> None:  # type: ignore[no-untyped-def]
    md = _ask("--format", "markdown", str(ROOT / "examples" / "linear_shape_mismatch.log"), tmp_path=tmp_path)
    # The last section is printed whole: its heading and its final item, which ends with a link.
    assert md.returncode == 0 and "### Similar resolved reports" in md.stdout and md.stdout.rstrip().endswith(tuple("0123456789/abcdefghijklmnopqrstuvwxyz"))
    term = _ask(str(ROOT / "examples" / "linear_shape_mismatch.log"), tmp_path=tmp_path)
    assert term.returncode == 0 and "Sources" in term.stdout and "https://" in term.stdout.rstrip().splitlines()[-1]


def test_a_failed_ask_still_reports_its_error_and_status(tmp_path) -> None:  # type: ignore[no-untyped-def]
    proc = _ask(str(tmp_path / "missing.log"), tmp_path=tmp_path)
    assert proc.returncode != 0
    assert proc.stderr.strip().startswith("torchhelp: error:") and len(proc.stderr.strip().splitlines()) == 1
