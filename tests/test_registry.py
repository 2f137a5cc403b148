"""The rule registry: every declared example produces its outcome, every outcome is reached, no rule raises.

Examples are real error texts (captures of real runs, the real-world dev split, the verbatim corpus
under eval/corpus); see assistant/eval/examples.py.
"""

from __future__ import annotations

import ast
import inspect
import json
from collections import defaultdict
from pathlib import Path

import pytest

from assistant import rules
from assistant.eval.examples import example_text
from assistant.parse import parse_failure
from assistant.rules.registry import Example, RuleDefinitionError, all_rules, rule
from assistant.types import CATEGORIES
from conftest import CAPTURES, ROOT

SPECS = all_rules()
EXAMPLES = [(spec, ex) for spec in SPECS for ex in spec.examples]
KNOWLEDGE_IDS = {
    line.split(":", 1)[1].strip()
    for p in (ROOT / "knowledge").rglob("*.md")
    for line in p.read_text(encoding="utf-8").splitlines()[:8]
    if line.startswith("id:")
}


def _outcome(text: str) -> str | None:
    found = rules.match(parse_failure(text), strict=True).hit
    return found.rule if found else None


@pytest.mark.parametrize(("spec", "example"), EXAMPLES, ids=[f"{s.id}:{e.source}" for s, e in EXAMPLES])
def test_example_produces_its_outcome(spec, example: Example) -> None:
    """Through the whole ordered rule set, not the rule alone: an earlier rule must not steal it."""
    assert _outcome(example_text(example.source)) == example.outcome


def test_every_outcome_is_reached_by_an_example() -> None:
    unreached = {f"{s.id}: {o}" for s in SPECS for o in s.outcomes if o not in {e.outcome for e in s.examples}}
    assert not unreached, f"outcomes no example produces: {sorted(unreached)}"


def test_every_rule_declares_real_documents_and_categories() -> None:
    for spec in SPECS:
        assert spec.categories <= set(CATEGORIES), spec.id
        assert spec.docs and set(spec.docs) <= KNOWLEDGE_IDS, f"{spec.id} cites unknown documents {set(spec.docs) - KNOWLEDGE_IDS}"


def test_outcome_literals_in_rule_modules_are_declared() -> None:
    """Every outcome id written in a module (first argument of hit(...)) is declared by one of its rules."""
    declared: dict[str, set[str]] = defaultdict(set)
    for spec in SPECS:
        declared[spec.func.__module__].update(spec.outcomes)
    for module, outcomes in declared.items():
        tree = ast.parse(inspect.getsource(__import__(module, fromlist=["x"])))
        literals = {
            node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hit"
            and node.args and isinstance(node.args[0], ast.Constant)
        }
        assert literals <= outcomes, f"{module}: undeclared outcomes {sorted(literals - outcomes)}"


def _all_real_texts() -> list[str]:
    texts = [c["stderr"] for c in CAPTURES]
    for name in ("dev.jsonl", "dev_fresh.jsonl", "test.jsonl", "test_fresh.jsonl"):
        path = ROOT / "eval" / "realworld" / name
        if path.exists():
            texts += [json.loads(line)["error_text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts += [example_text(f"corpus/{p.relative_to(ROOT / 'eval' / 'corpus')}") for p in sorted((ROOT / "eval" / "corpus").rglob("*.txt"))]
    return texts


def test_no_rule_raises_on_any_real_text() -> None:
    """strict=True lets a rule's exception propagate: any bug in any branch fails here."""
    for text in _all_real_texts():
        rules.match(parse_failure(text), strict=True)


def test_a_raising_rule_is_skipped_logged_and_noted(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from assistant.rules import registry

    @rule("test.broken", category="unknown", docs=("debugging-workflow",), priority=1)
    def broken(ctx):  # type: ignore[no-untyped-def]
        raise ZeroDivisionError("boom")

    try:
        text = example_text(SPECS[0].examples[0].source) if SPECS[0].examples else CAPTURES[0]["stderr"]
        found = rules.match(parse_failure(text))
        assert found.hit is not None and found.hit.rule_id != "test.broken"
        assert any("test.broken" in n for n in found.notes)
        assert any("test.broken" in r.getMessage() for r in caplog.records)
        with pytest.raises(ZeroDivisionError):
            rules.match(parse_failure(text), strict=True)
    finally:
        registry._REGISTRY.pop("test.broken", None)


def test_undeclared_outcome_is_a_definition_error() -> None:
    from assistant.rules import registry
    from assistant.rules.base import hit

    @rule("test.sloppy", category="unknown", docs=("debugging-workflow",), priority=1)
    def sloppy(ctx):  # type: ignore[no-untyped-def]
        return hit("test.other", "unknown", "t", "c", [])

    try:
        with pytest.raises(RuleDefinitionError):
            rules.match(parse_failure("RuntimeError: anything"), strict=True)
    finally:
        registry._REGISTRY.pop("test.sloppy", None)


def test_examples_never_come_from_the_test_split() -> None:
    for spec, ex in EXAMPLES:
        assert not ex.source.startswith("realworld/test"), f"{spec.id} uses a frozen test report as an example"


def test_corpus_files_name_their_origin() -> None:
    for path in sorted((ROOT / "eval" / "corpus").rglob("*.txt")):
        first = path.read_text(encoding="utf-8").splitlines()[:1]
        assert first and first[0].startswith("#") and len(first[0]) > 10, f"{path} does not say where its text comes from"


def test_rule_modules_are_discovered_without_a_central_list() -> None:
    modules = {p.stem for p in (ROOT / "assistant" / "rules").glob("*.py")} - {"__init__", "base", "registry", "evidence", "autograd_source"}  # evidence refiners, not rules
    assert modules <= {s.module for s in SPECS}, "a rule module declares no rule or is not discovered"


def test_examples_exist() -> None:
    for spec, ex in EXAMPLES:
        assert example_text(ex.source).strip(), f"{spec.id}: empty example {ex.source}"


def test_corpus_paths_are_relative(tmp_path: Path) -> None:
    from assistant.errors import EvalError

    with pytest.raises(EvalError):
        example_text("realworld/test/anything")
    with pytest.raises(EvalError):
        example_text("nowhere/x")
