"""No frozen-test thread feeds the engine or its tests: not as a rule example, a corpus text, a document or a test text."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ROOT

from assistant.eval.examples import example_text
from assistant.eval.hygiene import final_line, identifying, scan, thread_key
from assistant.rules.registry import all_rules


def _rule_example_texts() -> list[tuple[str, str]]:
    return [(f"rule example {ex.source}", example_text(ex.source)) for spec in all_rules() for ex in spec.examples]


def test_no_frozen_test_thread_appears_anywhere() -> None:
    overlaps = scan(ROOT, _rule_example_texts())
    assert not overlaps, "frozen-test threads found:\n" + "\n".join(f"{o.path}: {o.case_id} ({o.how}: {o.detail})" for o in overlaps)


def test_scan_finds_a_planted_link_and_final_line(tmp_path: Path) -> None:
    folder = tmp_path / "eval" / "realworld"
    folder.mkdir(parents=True)
    text = "Traceback (most recent call last):\n  File \"x.py\", line 3\nRuntimeError: mat1 and mat2 shapes cannot be multiplied (64x2304 and 1024x10)\n"
    folder.joinpath("test.jsonl").write_text(json.dumps({"id": "t1", "error_text": text, "source": "https://github.com/Owner/Repo/issues/17"}) + "\n")
    corpus = tmp_path / "eval" / "corpus" / "shapes"
    corpus.mkdir(parents=True)
    corpus.joinpath("copied.txt").write_text("# source: https://github.com/owner/repo/issues/17#issuecomment-99\nsomething\n")
    corpus.joinpath("pasted.txt").write_text("RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x2304 and 1024x10)\n")
    corpus.joinpath("generic.txt").write_text("RuntimeError: mat1 and mat2 shapes cannot be multiplied\n")
    found = {(o.path, o.how) for o in scan(tmp_path)}
    assert found == {("eval/corpus/shapes/copied.txt", "link"), ("eval/corpus/shapes/pasted.txt", "final line")}


def test_thread_keys_ignore_anchors_pages_and_slugs() -> None:
    assert thread_key("https://github.com/A/B/issues/5#issuecomment-1") == thread_key("https://github.com/a/b/pull/5/files")
    assert thread_key("https://discuss.pytorch.org/t/some-title/12345/7") == thread_key("https://discuss.pytorch.org/t/other/12345")
    assert thread_key("https://stackoverflow.com/questions/99/title") == thread_key("https://stackoverflow.com/q/99")


def test_identifying_lines_carry_run_values_not_constant_messages() -> None:
    assert identifying("RuntimeError: DataLoader worker (pid 19597) is killed by signal: Killed.")
    assert identifying('Unexpected key(s) in state_dict: "backbone.layer1.0.weight"')
    assert not identifying("ValueError: Attempting to unscale FP16 gradients.")
    assert not identifying("Process finished with exit code 139 (interrupted by signal 11: SIGSEGV)")
    assert final_line("Traceback...\nValueError: bad\nsome trailing note") == "ValueError: bad"
