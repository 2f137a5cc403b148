"""Issue 21, defects a new user hit in the first minutes: items 1, 2, 6 and 10.

Every error text here comes from a real run: a small script run right here with this interpreter (its
stderr captured), or a committed capture under eval/captured. The CLI is run as a user runs it
(``python -m assistant``, lexical retrieval, no LLM configured).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import CAPTURED, ROOT

# A script that fails in each way a missing file is reported, one traceback per case, split by a marker.
MISSING_FILES_SCRIPT = r'''
import os, sys, traceback
import numpy as np
import torch

cases = [
    lambda: open("x"),
    lambda: open("it's here.txt"),
    lambda: os.stat("my data/train set.pt"),
    lambda: open("C:\\Users\\me\\data\\x.pt"),
    lambda: os.rename("a.pt", "b.pt"),
    lambda: np.load("data/x.npy"),
    lambda: torch.load("ckpt/missing.pt"),
]
for case in cases:
    try:
        case()
    except OSError:
        sys.stderr.write(traceback.format_exc() + "=====\n")
'''
MISSING = ["x", "it's here.txt", "my data/train set.pt", "C:\\Users\\me\\data\\x.pt", "a.pt", "data/x.npy", "ckpt/missing.pt"]


def _capture(slug: str) -> str:
    return json.loads((CAPTURED / "cpu" / f"{slug}.json").read_text(encoding="utf-8"))["stderr"]


def _cli(args: list[str], home: Path, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``torchhelp ARGS`` as a user runs it: no LLM configured, lexical retrieval, 80 columns."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHHELP_", "OPENAI_"))}
    env.update({"TORCHHELP_HOME": str(home), "PYTHONPATH": str(ROOT), "TORCHHELP_DENSE": "0", "COLUMNS": "80"})
    return subprocess.run([sys.executable, "-m", "assistant", *args], capture_output=True, text=True, timeout=120, env=env,
                          input=stdin, cwd=cwd)


@pytest.fixture(scope="module")
def missing_file_errors(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The real tracebacks of MISSING_FILES_SCRIPT, one per case."""
    work = tmp_path_factory.mktemp("missing")
    script = work / "repro.py"
    script.write_text(MISSING_FILES_SCRIPT, encoding="utf-8")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=work)
    blocks = [b for b in run.stderr.split("=====\n") if b.strip()]
    assert len(blocks) == len(MISSING), run.stderr
    return blocks


def _rule_answer(text: str):  # type: ignore[no-untyped-def]
    from assistant import rules
    from assistant.parse import parse_failure

    return rules.match(parse_failure(text), strict=True).hit


# -- item 1: the missing path is the one inside the quotes ------------------------------------------------


def test_missing_file_path_is_read_from_the_quotes(missing_file_errors: list[str], tmp_path: Path) -> None:
    for text, path in zip(missing_file_errors, MISSING, strict=True):
        hit = _rule_answer(text)
        assert hit is not None and hit.rule_id == "env.files_and_disk", text
        assert hit.title == f"File not found: {path}"
        assert [f.text for f in hit.evidence if f.kind == "path"] == [path]
        assert "[Errno" not in hit.cause
        # The suggested command works in a shell: with the file in place, `ls -l` finds it.
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("")
        check = subprocess.run(["bash", "-c", hit.fixes[0].code], capture_output=True, text=True, cwd=tmp_path, timeout=30)
        assert check.returncode == 0 and path.rsplit("/", 1)[-1] in check.stdout, (hit.fixes[0].code, check.stderr)


def test_missing_file_answer_on_a_capture(tmp_path: Path) -> None:
    res = _cli(["ask", "-"], tmp_path, stdin=_capture("dataset-relative-path-not-found"))
    assert res.returncode == 0, res.stderr
    out = " ".join(res.stdout.split())
    assert "File not found: data/cifar10_npz/train_x.npy" in out
    assert "ls -l data/cifar10_npz/train_x.npy; pwd" in out
    assert "`[Errno" not in out and "'[Errno" not in out


def test_os_error_path_reads_pythons_repr(missing_file_errors: list[str]) -> None:
    from assistant.parse.messages import NOT_FOUND_CODES, os_error_path

    for text, path in zip(missing_file_errors, MISSING, strict=True):
        found = os_error_path(text, NOT_FOUND_CODES)
        assert found is not None and (found.code, found.what, found.path) == ("Errno 2", "No such file or directory", path)
    assert os_error_path(missing_file_errors[0], frozenset({"Errno 13"})) is None


# -- item 2: one sentence splitter ------------------------------------------------------------------------


@pytest.mark.parametrize("text, sentences", [
    ("Use a smaller batch (e.g. 16). Then retry.", ["Use a smaller batch (e.g. 16).", "Then retry."]),
    ("Pass the path, i.e. `ckpt/last.pt`. Then load it.", ["Pass the path, i.e. `ckpt/last.pt`.", "Then load it."]),
    ("Needs torch 2.1. Install it with pip.", ["Needs torch 2.1.", "Install it with pip."]),
    ("It was saved to model.pt. Load model.pt with torch.load.", ["It was saved to model.pt.", "Load model.pt with torch.load."]),
    ("Caches, logs, etc. are big. Checkpoints grow.", ["Caches, logs, etc. are big.", "Checkpoints grow."]),
    ("Compare float32 vs. bfloat16 results. Then decide.", ["Compare float32 vs. bfloat16 results.", "Then decide."]),
    ("A cause (see the docs.) Next one!", ["A cause (see the docs.)", "Next one!"]),
    ("One sentence only.", ["One sentence only."]),
    ("  ", []),
])
def test_split_sentences(text: str, sentences: list[str]) -> None:
    from assistant.sentences import split_sentences

    assert split_sentences(text) == sentences


def _rule_causes() -> list[str]:
    """The causes the rules write for every committed capture."""
    causes = []
    for path in sorted(CAPTURED.rglob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        hit = _rule_answer(data["stderr"]) if data.get("matched_expectation") else None
        if hit is not None:
            causes.append(hit.full_cause)
    return causes


def test_first_sentence_of_real_causes_is_whole() -> None:
    """No first sentence stops at an abbreviation or inside brackets or a code span (it did at "(e.g." before)."""
    from assistant.sentences import split_first

    causes = _rule_causes()
    assert sum("e.g." in c for c in causes) >= 3  # the abbreviation the module.-prefix answer uses, among others
    for cause in causes:
        first, rest = split_first(cause)
        assert not re.search(r"\b(?:e\.g|i\.e|vs|cf)\.$", first), first
        if cause.count("(") == cause.count(")"):
            assert first.count("(") == first.count(")"), first
        assert first.count("`") % 2 == 0, first
        assert " ".join(f"{first} {rest}".split()) == " ".join(cause.split())


def test_module_prefix_answer_keeps_its_first_sentence(tmp_path: Path) -> None:
    """The terminal, --brief and the JSON summary all show the whole first sentence; nothing of it lands under Why."""
    text = _capture("load-dataparallel-checkpoint-module-prefix")
    sentence = ("Every checkpoint key carries the prefix `module.` that Classifier's own keys do not have "
                "(e.g. `module.backbone.0.weight` vs `backbone.0.weight`): the weights were saved from a model wrapped in")
    data = json.loads(_cli(["ask", "--json", "-"], tmp_path, stdin=text).stdout)
    assert data["cause"].startswith(sentence)
    assert data["summary"].startswith(f"{data['title']}. {sentence}") and not data["summary"].endswith("(e.g.")
    for args in (["ask", "-"], ["ask", "--brief", "-"]):
        res = _cli(args, tmp_path, stdin=text)
        assert res.returncode == 0, res.stderr
        assert sentence in " ".join(res.stdout.split()), res.stdout
        assert "(e.g.\n" not in res.stdout and "Why" not in res.stdout


def test_every_view_uses_the_one_splitter(settings) -> None:  # type: ignore[no-untyped-def]
    from assistant import diagnose
    from assistant.compose.deterministic import summary_of
    from assistant.render import hypotheses, terminal
    from assistant.sentences import first_sentence, split_first

    assert hypotheses.first_sentence is first_sentence and terminal.split_first is split_first
    d = diagnose(_capture("weight-init-inplace-on-leaf"), settings=settings)
    assert "(e.g." in d.cause
    assert d.summary == summary_of(d.title, d.cause) == f"{d.title}. {first_sentence(d.cause)}"
    assert first_sentence(d.cause).count("(") == first_sentence(d.cause).count(")")


# -- item 6: --brief shows the fix's code and keeps the backend note ----------------------------------------


def _brief(d, width: int) -> list[str]:  # type: ignore[no-untyped-def]
    from rich.console import Console

    from assistant.render.terminal import render_brief

    console = Console(width=width, record=True, force_terminal=False, color_system=None)
    render_brief(d, console)
    return [line.rstrip() for line in console.export_text().splitlines()]


@pytest.mark.parametrize("width", [60, 80, 120])
def test_brief_shows_short_fix_code_whole(settings, width: int) -> None:  # type: ignore[no-untyped-def]
    from assistant import diagnose
    from assistant.render.terminal import BRIEF_LINES

    d = diagnose(_capture("collate-variable-length-token-ids"), settings=settings)
    code = d.fixes[0].code or ""
    assert code.startswith("def collate(batch):") and 1 < len(code.strip().split("\n")) <= 8
    lines = _brief(d, width)
    assert len(lines) <= BRIEF_LINES, "\n".join(lines)
    shown = [line.strip() for line in lines]
    for code_line in code.strip().split("\n"):
        assert code_line.strip() in shown
    assert not any("more line" in line for line in lines)


@pytest.mark.parametrize("width", [60, 80, 120])
def test_brief_cuts_long_fix_code_honestly(settings, width: int) -> None:  # type: ignore[no-untyped-def]
    from assistant import diagnose
    from assistant.kb.remedies import find_fix
    from assistant.render.terminal import BRIEF_LINES

    long = find_fix("custom-function-api-misuse#one-grad-per-input")
    assert long is not None and long.code and len(long.code.strip().split("\n")) > 8
    d = diagnose(_capture("collate-variable-length-token-ids"), settings=settings)
    d = replace(d, fixes=(replace(d.fixes[0], code=long.code), *d.fixes[1:]))
    lines = _brief(d, width)
    assert len(lines) <= BRIEF_LINES, "\n".join(lines)
    code = long.code.strip().split("\n")
    marker = next(line for line in lines if "run without --brief" in line)
    more = int(re.search(r"… \((\d+) more lines?: run without --brief\)", marker).group(1))  # type: ignore[union-attr]
    shown = code[: len(code) - more]
    assert shown and all(f"   {c}".rstrip() in lines for c in shown)
    assert code[len(code) - more].rstrip() not in [line.strip() for line in lines]


def test_brief_keeps_the_note_that_the_llm_was_not_used(tmp_path: Path) -> None:
    from assistant.render.terminal import BRIEF_LINES

    res = _cli(["ask", "--brief", "--llm", "openai", "-"], tmp_path, stdin=_capture("collate-variable-length-token-ids"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) <= BRIEF_LINES, res.stdout
    flat = " ".join(res.stdout.split())
    assert "note: LLM backend 'openai' not used" in flat and "Showing the deterministic diagnosis." in flat
    assert "lengths = torch.tensor([len(s) for s in seqs])" in flat


# -- item 10: -h everywhere ---------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["ask"], ["triage"], ["kb"], ["kb", "add"], ["eval"], ["eval", "score"], ["serve"], ["run"]])
def test_dash_h_is_help(command: list[str], tmp_path: Path) -> None:
    short = _cli([*command, "-h"], tmp_path)
    assert short.returncode == 0, short.stderr
    assert "Usage: torchhelp" in short.stdout and "-h" in short.stdout
    assert short.stdout == _cli([*command, "--help"], tmp_path).stdout


def test_run_passes_dash_h_to_the_program(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text("import sys\nprint('argv:', sys.argv[1:])\n", encoding="utf-8")
    res = _cli(["run", "--", sys.executable, str(script), "-h"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "argv: ['-h']" in res.stdout and "Usage: torchhelp" not in res.stdout
