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
from assistant.rules.dispatch import ANY, FAMILY_NAMES, families, family, family_of_type
from assistant.rules.registry import Example, RuleDefinitionError, all_rules, ambiguous_priorities, family_rules, rule
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

    text = example_text(SPECS[0].examples[0].source) if SPECS[0].examples else CAPTURES[0]["stderr"]

    @rule("test.broken", category="unknown", docs=("debugging-workflow",), reads=(family(parse_failure(text)),), priority=0)
    def broken(ctx):  # type: ignore[no-untyped-def]
        raise ZeroDivisionError("boom")

    try:
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

    @rule("test.sloppy", category="unknown", docs=("debugging-workflow",), reads=("RuntimeError",), priority=0)
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
    modules = {p.stem for p in (ROOT / "assistant" / "rules").glob("*.py")} - {"__init__", "base", "registry", "evidence", "autograd_source", "dispatch"}  # evidence refiners, dispatch, not rules
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


# --- dispatch by exception family ------------------------------------------------------------------

_ALWAYS = ("debugging-workflow",)


def _register(rule_id: str, reads: tuple[str, ...], priority: int, module: str | None = None):  # type: ignore[no-untyped-def]
    """A test rule that answers every failure it is shown (its module name may be set, as if declared elsewhere)."""
    from assistant.rules.base import hit

    def answer(ctx):  # type: ignore[no-untyped-def]
        return hit(rule_id, "unknown", "t", "c", [])

    if module:
        answer.__module__ = module
    rule(rule_id, category="unknown", docs=_ALWAYS, reads=reads, priority=priority)(answer)
    return answer


def _unregister(*ids: str) -> None:
    from assistant.rules import registry

    for rule_id in ids:
        registry._REGISTRY.pop(rule_id, None)


def test_every_rule_declares_the_families_it_reads() -> None:
    for spec in SPECS:
        assert spec.reads, spec.id
        assert set(spec.reads) <= {*FAMILY_NAMES, ANY}, f"{spec.id} reads unknown families {set(spec.reads) - {*FAMILY_NAMES, ANY}}"
        assert ANY not in spec.reads or spec.reads == (ANY,), spec.id
    with pytest.raises(TypeError):
        rule("test.undeclared", category="unknown", docs=_ALWAYS)  # type: ignore[call-arg]
    with pytest.raises(RuleDefinitionError):
        rule("test.unknown_family", category="unknown", docs=_ALWAYS, reads=("CudaError",))
    with pytest.raises(RuleDefinitionError):
        rule("test.any_and_more", category="unknown", docs=_ALWAYS, reads=(ANY, "KeyError"))


def test_family_map() -> None:
    assert family_of_type(None) == family_of_type("") == "text"
    assert {family_of_type(t) for t in ("RuntimeError", "torch.OutOfMemoryError", "torch.cuda.OutOfMemoryError", "torch.AcceleratorError",
                                         "torch.distributed.DistBackendError", "c10::DistBackendError", "ncclUnhandledCudaError",
                                         "torch.distributed.elastic.multiprocessing.errors.ChildFailedError", "RecursionError")} == {"RuntimeError"}
    assert {family_of_type(t) for t in ("torch._dynamo.exc.BackendCompilerFailed", "torch._dynamo.exc.Unsupported", "TorchRuntimeError",
                                         "torch._inductor.exc.InductorError", "torch.onnx.errors.UnsupportedOperatorError",
                                         "triton.runtime.errors.PTXASError", "torch.fx.experimental.symbolic_shapes.ConstraintViolationError")} == {"CompileError"}
    assert family_of_type("ModuleNotFoundError") == "ImportError"
    assert family_of_type("FileNotFoundError") == family_of_type("PermissionError") == "OSError"
    assert family_of_type("_pickle.UnpicklingError") == family_of_type("EOFError") == "PickleError"
    assert family_of_type("numpy.core._exceptions._ArrayMemoryError") == "MemoryError"
    assert family_of_type("UserWarning") == "Warning"
    assert family_of_type("mylib.SomethingWrong") == "other"


def test_every_exception_type_of_the_real_texts_has_a_family() -> None:
    """The map covers what the examples and captures hold; only words the parser took for a type fall to 'other'."""
    texts = [example_text(ex.source) for _, ex in EXAMPLES] + [c["stderr"] for c in CAPTURES]
    unmapped = set()
    for text in texts:
        failure = parse_failure(text)
        for t in {failure.exc_type, *(r.exc_type for r in failure.chain)} - {None}:
            if family_of_type(t) == "other" and t.rsplit(".", 1)[-1].endswith(("Error", "Exception", "Warning")) and t != "Error":
                unmapped.add(t)
    assert not unmapped, f"exception types with no family: {sorted(unmapped)}"


def test_a_wrapped_error_is_read_as_the_original_then_as_its_wrapper() -> None:
    text = """Traceback (most recent call last):
  File "main.py", line 9, in <module>
    mp.spawn(worker, nprocs=2)
  File "/usr/lib/python3/site-packages/torch/multiprocessing/spawn.py", line 160, in join
    raise ProcessRaisedException(msg, error_index, failed_process.pid)
torch.multiprocessing.spawn.ProcessRaisedException:

-- Process 0 terminated with the following error:
Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/torch/multiprocessing/spawn.py", line 69, in _wrap
    fn(i, *args)
  File "/home/u/main.py", line 5, in worker
    print(CONFIG)
NameError: name 'CONFIG' is not defined
"""
    failure = parse_failure(text)
    assert family(failure) == "NameError"
    assert families(failure) == ("NameError", "RuntimeError")
    # A type that says nothing about the message is also read as a bare message.
    assert families(parse_failure("mylib.errors.WrapperError: CUDA out of memory. Tried to allocate 2.00 GiB")) == ("other", "text")


def test_dispatch_uses_the_family() -> None:
    """A rule is shown only failures of the families it reads: a KeyError is never answered by a rule that does not read KeyError."""
    _register("test.runtime_reader", ("RuntimeError",), 0)
    _register("test.key_reader", ("KeyError",), 0)
    try:
        key_error = parse_failure("Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n    x = d['lr']\nKeyError: 'lr'")
        runtime = parse_failure("RuntimeError: something torch said")
        assert rules.match(key_error, strict=True).hit.rule_id == "test.key_reader"
        assert rules.match(runtime, strict=True).hit.rule_id == "test.runtime_reader"
        assert all("KeyError" in s.reads or s.reads == (ANY,) for s in rules.candidates(key_error))
    finally:
        _unregister("test.runtime_reader", "test.key_reader")
    # On every real text, the answering rule reads one of the text's families (or any).
    by_id = {s.id: s for s in SPECS}
    for _, ex in EXAMPLES:
        failure = parse_failure(example_text(ex.source))
        found = rules.match(failure, strict=True).hit
        if found is not None and not by_id[found.rule_id].wraps:
            reads = by_id[found.rule_id].reads
            assert reads == (ANY,) or set(reads) & set(families(failure)), (ex.source, found.rule_id, families(failure))


def test_priorities_are_compared_only_within_a_family() -> None:
    """Rules of different families may share a number; within a family, rules of different modules may not."""
    _register("test.key_first", ("KeyError",), 5, module="assistant.rules.test_one")
    _register("test.import_first", ("ImportError",), 5, module="assistant.rules.test_two")
    try:
        assert ambiguous_priorities() == []
        assert rules.match(parse_failure("KeyError: 'lr'"), strict=True).hit.rule_id == "test.key_first"
        assert rules.match(parse_failure("ModuleNotFoundError: No module named 'nope_xyz'"), strict=True).hit.rule_id == "test.import_first"
        _register("test.key_second", ("KeyError",), 5, module="assistant.rules.test_two")
        clash = ambiguous_priorities()
        assert [(fam, {a.id, b.id}) for fam, a, b in clash] == [("KeyError", {"test.key_first", "test.key_second"})]
    finally:
        _unregister("test.key_first", "test.import_first", "test.key_second")
    # A family's order is by its own numbers only.
    for fam in (*FAMILY_NAMES, ANY):
        specs = family_rules(fam)
        assert [s.priority for s in specs] == sorted(s.priority for s in specs), fam


def test_no_rule_module_needs_a_globally_unique_priority() -> None:
    """The registry's numbers are local: the same number is used by rules that share no family, and no family has a cross-module tie."""
    assert ambiguous_priorities() == [], [(f, a.id, b.id) for f, a, b in ambiguous_priorities()]
    answering = [s for s in SPECS if not s.wraps]
    shared = [(a.id, b.id) for i, a in enumerate(answering) for b in answering[i + 1:]
              if a.priority == b.priority and a.module != b.module and not set(a.reads) & set(b.reads)]
    assert shared, "expected rules of different families to reuse priority numbers"
    assert max(s.priority for s in answering) < 100, "priorities are local bands (EARLY/NORMAL/FALLBACK), not a global sequence"
