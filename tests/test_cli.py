"""The `torchhelp` command line, run as a real subprocess: formats, stdin, and every bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CAPTURES, ROOT

EXAMPLE = ROOT / "examples" / "linear_shape_mismatch.log"


def run_cli(args: list[str], home: Path, stdin: bytes | None = None, timeout: int = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "TORCHHELP_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "assistant", *args], input=stdin, capture_output=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def home(th_home: Path, retriever) -> Path:  # type: ignore[no-untyped-def]
    return th_home  # the session index is already built


def test_ask_json_matches_api(home: Path, settings) -> None:  # type: ignore[no-untyped-def]
    from assistant import diagnose

    res = run_cli(["ask", "--json", str(EXAMPLE)], home)
    assert res.returncode == 0, res.stderr.decode()
    data = json.loads(res.stdout)
    api = diagnose(EXAMPLE.read_text(), settings=settings).to_dict()
    assert data == api
    assert data["category"] == "shape_mismatch"


def test_ask_markdown(home: Path) -> None:
    res = run_cli(["ask", "--format", "markdown", str(EXAMPLE)], home)
    out = res.stdout.decode()
    assert res.returncode == 0
    assert out.startswith("## ") and "### Cause" in out and "### Fixes" in out and "### Sources" in out
    assert "```python" in out


def test_ask_terminal_render(home: Path) -> None:
    res = run_cli(["ask", str(EXAMPLE)], home)
    out = res.stdout.decode()
    assert res.returncode == 0
    for part in ("Cause", "Evidence", "Fixes", "Sources", "shape_mismatch"):
        assert part in out


def test_ask_stdin_dash_and_pipe(home: Path) -> None:
    text = CAPTURES[0]["stderr"].encode()
    for args in (["ask", "--json", "-"], ["ask", "--json"]):
        res = run_cli(args, home, stdin=text)
        assert res.returncode == 0, res.stderr.decode()
        assert json.loads(res.stdout)["category"] == CAPTURES[0]["category"]


def _one_line_error(res: subprocess.CompletedProcess) -> str:
    err = res.stderr.decode().strip()
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    return err


def test_missing_file(home: Path, tmp_path: Path) -> None:
    res = run_cli(["ask", str(tmp_path / "nope.log")], home)
    assert res.returncode == 2
    assert "no such file" in _one_line_error(res)


def test_empty_input(home: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("   \n\n")
    for res in (run_cli(["ask", str(empty)], home), run_cli(["ask", "-"], home, stdin=b"")):
        assert res.returncode == 2
        assert "empty" in _one_line_error(res)


def test_directory_instead_of_file(home: Path, tmp_path: Path) -> None:
    res = run_cli(["ask", str(tmp_path)], home)
    assert res.returncode == 2 and "directory" in _one_line_error(res)


def test_binary_input_is_refused_clearly(home: Path, tmp_path: Path) -> None:
    blob = tmp_path / "model.bin"
    blob.write_bytes(bytes(range(256)) * 400)
    res = run_cli(["ask", str(blob)], home)
    assert res.returncode == 2 and "binary" in _one_line_error(res)


def test_non_utf8_input_is_decoded_with_replacement(home: Path, tmp_path: Path) -> None:
    log = tmp_path / "latin1.log"
    log.write_bytes(CAPTURES[0]["stderr"].encode() + "\nCaf\xe9 \xff\xfe done\n".encode("latin-1"))
    res = run_cli(["ask", "--json", str(log)], home)
    assert res.returncode == 0
    data = json.loads(res.stdout)
    assert data["category"] == CAPTURES[0]["category"]
    assert any("UTF-8" in n for n in data["notes"])


def test_huge_log_analyses_only_the_tail(home: Path, tmp_path: Path) -> None:
    log = tmp_path / "huge.log"
    noise = ("INFO step 123 loss=0.4567 lr=3e-4 throughput=1234.5 samples/s\n" * 20000).encode()
    with log.open("wb") as fh:
        for _ in range(85):  # ~100 MB of training chatter
            fh.write(noise)
        fh.write(CAPTURES[0]["stderr"].encode())
        fh.write(b"wandb: Synced run\n" * 100)
    assert log.stat().st_size > 95 * 2**20
    start = time.perf_counter()
    res = run_cli(["ask", "--json", str(log)], home)
    elapsed = time.perf_counter() - start
    assert res.returncode == 0, res.stderr.decode()
    data = json.loads(res.stdout)
    assert data["category"] == CAPTURES[0]["category"]
    assert any("analysed" in n for n in data["notes"]), data["notes"]
    assert elapsed < 120  # generous: a correctness guard against reading the whole file, not a benchmark


def test_huge_stdin_keeps_a_bounded_tail(home: Path) -> None:
    noise = b"x" * 1000 + b"\n"
    data = noise * 6000 + CAPTURES[0]["stderr"].encode()
    res = run_cli(["ask", "--json", "-"], home, stdin=data)
    assert res.returncode == 0
    assert json.loads(res.stdout)["category"] == CAPTURES[0]["category"]


def test_unknown_format_is_a_clean_error(home: Path) -> None:
    res = run_cli(["ask", "--format", "html", str(EXAMPLE)], home)
    assert res.returncode == 2 and "unknown format" in _one_line_error(res)


def test_kb_search_and_build(home: Path) -> None:
    res = run_cli(["kb", "search", "expandable_segments fragmentation reserved but unallocated"], home)
    assert res.returncode == 0
    assert "cuda-oom-fragmentation" in res.stdout.decode().splitlines()[0]
    res = run_cli(["kb", "search", "--json", "--mode", "lexical", "-k", "2", "weights_only Unsupported global"], home)
    found = json.loads(res.stdout)
    hits = found["passages"]  # and the error atlas's matching checks under "atlas"
    assert len(hits) == 2 and hits[0]["doc_id"] == "torch-load-weights-only"
    assert isinstance(found["atlas"], list)


def test_kb_add_and_search_user_docs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    doc = tmp_path / "runbook.md"
    doc.write_text("# Cluster runbook\n\n## Quota exceeded on /scratch\n\nWhen jobs die with zorblax quota errors, clean /scratch/$USER.\n")
    res = run_cli(["kb", "add", str(doc)], home, timeout=600)
    assert res.returncode == 0, res.stderr.decode()
    assert "added 1 document" in res.stdout.decode()
    res = run_cli(["kb", "search", "--mode", "lexical", "zorblax quota"], home)
    assert "user:runbook" in res.stdout.decode()
