"""Terminal rendering at fixed widths (issue 11, items 5, 6, 11): real captures, golden-style checks.

Each capture is diagnosed (lexical retrieval, no LLM) and rendered into a recording Console of 60, 80
and 120 columns; the assertions read the plain captured text.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CAPTURED, ROOT

SLUGS = ("linear-after-conv-flatten", "hardcoded-cuda-device-cpu-build", "numpy-float64-input-linear")
WIDTHS = (60, 80, 120)


@pytest.fixture(scope="module")
def diagnoses(th_home: Path) -> dict:  # type: ignore[type-arg]
    from assistant import diagnose
    from assistant.settings import load_settings

    settings = load_settings(env={"TORCHHELP_HOME": str(th_home)}, llm="none", dense=False)
    out = {}
    for slug in SLUGS:
        capture = json.loads((CAPTURED / "cpu" / f"{slug}.json").read_text(encoding="utf-8"))
        out[slug] = diagnose(capture["stderr"], settings=settings)
    return out


def render(d, width: int, brief: bool = False) -> list[str]:  # type: ignore[no-untyped-def]
    from rich.console import Console

    from assistant.render.terminal import render_brief, render_terminal

    console = Console(width=width, record=True, force_terminal=False, color_system=None)
    (render_brief if brief else render_terminal)(d, console)
    return [line.rstrip() for line in console.export_text().splitlines()]


def flat(lines: list[str]) -> str:
    """The output as one whitespace-collapsed string (wrapping and table padding removed)."""
    return " ".join(" ".join(lines).split())


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("slug", SLUGS)
def test_fix_code_never_truncated(diagnoses: dict, slug: str, width: int) -> None:  # type: ignore[type-arg]
    from assistant.render.terminal import CODE_INDENT

    d = diagnoses[slug]
    lines = render(d, width)
    code_lines = {" " * CODE_INDENT + c.rstrip() for f in d.fixes if f.code for c in f.code.rstrip("\n").split("\n")}
    # Only code may pass the width (it overflows rather than being cut); prose and tables wrap.
    for line in lines:
        assert len(line) <= width or line in code_lines, f"{len(line)} > {width}: {line!r}"
    # Every fix's code appears whole, its lines consecutive and intact.
    text = "\n".join(lines)
    for f in d.fixes:
        if f.code:
            block = "\n".join(" " * CODE_INDENT + c.rstrip() for c in f.code.rstrip("\n").split("\n"))
            assert block in text, f"code of {f.title!r} cut or wrapped at {width}:\n{text}"


def test_long_code_overflows_at_80(diagnoses: dict) -> None:  # type: ignore[type-arg]
    """The real long lines (flatten size, CUDA check) come out whole at 80 columns."""
    text = "\n".join(render(diagnoses["linear-after-conv-flatten"], 80) + render(diagnoses["hardcoded-cuda-device-cpu-build"], 80))
    assert "self.features(torch.zeros(1, *input_shape)).flatten(1).shape[1]" in text
    assert 'print(torch.__version__, torch.version.cuda, torch.cuda.is_available())"' in text


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("slug", SLUGS)
def test_wrapped_detail_keeps_indent(diagnoses: dict, slug: str, width: int) -> None:  # type: ignore[type-arg]
    from assistant.render.terminal import FIX_INDENT

    lines = render(diagnoses[slug], width)
    for f in diagnoses[slug].fixes:
        words = f.detail.split()
        if not words:
            continue
        start = next(i for i, line in enumerate(lines) if line.strip().startswith(" ".join(words[:3])))
        end = start
        while " ".join(words) not in flat(lines[start:end + 1]):
            end += 1
            assert end < len(lines), f"detail of {f.title!r} not found whole"
        for line in lines[start:end + 1]:
            assert line.startswith(" " * FIX_INDENT) and line[FIX_INDENT] != " ", f"lost indent: {line!r}"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("slug", SLUGS)
def test_raw_error_once_and_order(diagnoses: dict, slug: str, width: int) -> None:  # type: ignore[type-arg]
    from assistant.sentences import split_first

    d = diagnoses[slug]
    text = flat(render(d, width))
    error = " ".join(d.error.split())
    assert error and text.count(error) == 1, text
    first, _ = split_first(d.cause)
    marks = [text.index(d.title), text.index(" ".join(first.split())), text.index(" ".join(d.fixes[0].title.split())),
             text.index("Evidence"), text.index(error), text.index("Sources")]
    assert marks == sorted(marks), marks


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("slug", SLUGS)
def test_brief_within_its_line_budget(diagnoses: dict, slug: str, width: int) -> None:  # type: ignore[type-arg]
    from assistant.render.terminal import BRIEF_LINES

    d = diagnoses[slug]
    lines = render(d, width, brief=True)
    assert 0 < len(lines) <= BRIEF_LINES, "\n".join(lines)
    text = flat(lines)
    assert d.title in text and d.category in text
    for f in d.fixes[:2]:
        assert " ".join(f.title.split()) in text
        if f.code:
            assert f.code.strip("\n").split("\n")[0].strip() in text
    for f in d.fixes[2:]:
        assert f.title not in text
    for src in {src for f in d.fixes[:2] for src in f.sources}:  # the documents behind what is shown
        assert src in text
    assert d.error not in text  # the brief view leaves the raw error out


def test_split_cause_keeps_abbreviations_and_calls() -> None:
    from assistant.sentences import split_first as split_cause

    first, rest = split_cause("Any .cuda() / device='cuda' call fails, e.g. the model. Either pip picked a CPU wheel.")
    assert first == "Any .cuda() / device='cuda' call fails, e.g. the model."
    assert rest == "Either pip picked a CPU wheel."
    assert split_cause("One sentence only.") == ("One sentence only.", "")


def run_cli(args: list[str], home: Path, timeout: int = 240) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    env = {**os.environ, "TORCHHELP_HOME": str(home), "PYTHONPATH": str(ROOT), "TORCHHELP_DENSE": "0", "COLUMNS": "80"}
    return subprocess.run([sys.executable, "-m", "assistant", *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def capture_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    capture = json.loads((CAPTURED / "cpu" / f"{SLUGS[0]}.json").read_text(encoding="utf-8"))
    path = tmp_path_factory.mktemp("render") / "crash.log"
    path.write_text(capture["stderr"], encoding="utf-8")
    return path


@pytest.mark.parametrize("args", [["--json", "--format", "markdown"], ["--json", "--format", "terminal"],
                                  ["--brief", "--format", "json"], ["--brief", "--json"], ["--format", "html"]])
def test_ask_refuses_conflicting_formats(args: list[str], capture_file: Path, tmp_path: Path) -> None:
    res = run_cli(["ask", *args, str(capture_file)], tmp_path)
    assert res.returncode == 2, res.stderr
    assert res.stdout == ""
    err = res.stderr.strip()
    assert "\n" not in err and err.startswith("torchhelp: error:"), err


def test_ask_json_alias_and_brief(capture_file: Path, tmp_path: Path) -> None:
    res = run_cli(["ask", "--json", "--format", "json", str(capture_file)], tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["category"] == "shape_mismatch"
    res = run_cli(["ask", "--brief", str(capture_file)], tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.rstrip("\n").split("\n")
    assert len(lines) <= 15 and "Linear layer expects" in lines[0], res.stdout
    assert re.search(r"^1\. ", res.stdout, re.M) and "sources: " in res.stdout
