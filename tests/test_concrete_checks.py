"""Checks everywhere (issue 22): what counts as a concrete check, and that the knowledge and the engine give one."""

from __future__ import annotations

import pytest

from assistant.eval.checks import is_concrete_check


@pytest.mark.parametrize("check", [
    "Run one step with half the batch and print torch.cuda.max_memory_allocated().",
    "Add `print(x.shape)` right before the failing line.",
    "Re-run with CUDA_LAUNCH_BLOCKING=1 and read the new traceback.",
    "Run nvidia-smi while the job starts.",
    "Run with num_workers=0: the dataset's exception then shows in the main process.",
    "Load with strict=False and print the missing keys.",
    "Compare `C % num_groups` with zero.",
    "Launch with --nproc-per-node equal to the GPU count.",
    "Run `which nvcc` in the job's shell.",
    "Print model.fc.in_features.",
    "pip show torch torchvision",
])
def test_concrete_checks(check: str) -> None:
    assert is_concrete_check(check)


@pytest.mark.parametrize("check", [
    "", "   ", None,
    "Check your data.",
    "Look at the shapes, e.g. the batch dimension.",
    "Did it start after a driver update?",
    "the value(s) in the message",
    "the `Killed` message",
    "Compare the sizes in the message with the model config.",
])
def test_prose_is_not_concrete(check: str | None) -> None:
    assert not is_concrete_check(check)


def test_check_metrics_count_every_hypothesis_and_each_lead() -> None:
    from assistant.eval.score import Item, ItemResult, Prediction, VariantReport

    def result(checks: tuple[str, ...] | None) -> ItemResult:
        item = Item("x", "text", "shape_mismatch", ())
        return ItemResult(item, Prediction("shape_mismatch", "", (), (), 1.0, checks=checks), True, 1.0, (), (), True)

    report = VariantReport("full", [result(("print(x.shape)", "check your data")), result(()), result(("nvidia-smi",))])
    m = report.metrics()
    assert m["check_share"] == round(2 / 3, 4) and m["hypotheses_counted"] == 3
    assert m["lead_check_share"] == round(2 / 3, 4)  # an answer without any hypothesis has no check to give
    assert "check_share" not in VariantReport("rules", [result(None)]).metrics()  # variants that rank no causes are not counted


# -- the shipped knowledge: every cause entry, and every category's first check ----------------------


def test_every_cause_entry_in_the_shipped_knowledge_has_a_concrete_check() -> None:
    from assistant.kb.documents import load_builtin, readable
    from assistant.kb.remedies import PLACEHOLDER, parse_remedies

    vague = []
    for doc in load_builtin():
        for cause in parse_remedies(doc).causes:
            assert "{{" not in PLACEHOLDER.sub("", cause.check), f"{cause.ref}: malformed placeholder in its check"
            if not is_concrete_check(readable(cause.check)):  # as shown when no value was read: the defaults
                vague.append(f"{cause.ref}: {cause.check}")
    assert not vague, "causes whose check names nothing to run, add or print:\n" + "\n".join(vague)


def test_every_category_has_a_concrete_first_check() -> None:
    from assistant.kb.documents import readable
    from assistant.kb.remedies import first_checks
    from assistant.types import CATEGORIES

    checks = first_checks()
    assert set(CATEGORIES) <= set(checks), f"no first check for {sorted(set(CATEGORIES) - set(checks))}"
    assert all(is_concrete_check(readable(checks[c])) for c in CATEGORIES)


def test_first_checks_are_not_retrieved() -> None:
    """The per-category section names every family at once: it is data for the engine, not a passage."""
    from assistant.kb.documents import chunk_document, load_builtin

    doc = next(d for d in load_builtin() if d.id == "first-checks")
    assert all("first check" not in c.section.lower() for c in chunk_document(doc))


# -- checks filled with the user's own names ---------------------------------------------------------


def test_checks_are_filled_from_facts_and_the_failing_line() -> None:
    from assistant.kb.remedies import fact_values, filled_check
    from assistant.types import Facts, Failure, Frame

    failure = Failure(text="", exc_type="RuntimeError", message="boom", frames=(Frame("train.py", 3, "step", "out = self.head(self.body(feats))"),))
    values = fact_values(Facts(layer="head", dtypes=("float64", "float32")), failure)
    assert values["variable"] == "feats" and values["layer"] == "head" and values["dtype"] == "float64"
    assert filled_check("print(`{{variable|x}}.dtype`, `model.{{layer|fc}}`)", values) == "print(`feats.dtype`, `model.head`)"
    # A value that is not plainly a name is never put into code to run: the default stays.
    assert filled_check("print({{variable|x}}.shape)", {"variable": "os.system('rm -rf ~')"}) == "print(x.shape)"


def test_the_probes_name_the_tensor_on_the_failing_line() -> None:
    """Under `torchhelp run`, the name on the failing line that the probes saw as a tensor is the check's variable;
    modules and constants never are."""
    from assistant.kb.remedies import fact_values
    from assistant.types import Failure, Frame, TensorSummary

    line = "agg = torch.zeros(n, msg.shape[1], device=edges.device)"
    failure = Failure(text="", exc_type="RuntimeError", message="boom", frames=(Frame("gnn.py", 9, "forward", line),))
    assert fact_values(None, failure)["variable"] == "n"  # without probes: the first plain name the call takes
    seen = (TensorSummary("msg", "forward", (8, 4), "float32", "cpu"), TensorSummary("edges", "forward", (2, 8), "int64", "cpu"))
    assert fact_values(None, failure, seen)["variable"] == "msg"
    module_call = Failure(text="", exc_type="RuntimeError", message="boom", frames=(Frame("t.py", 3, "main", "dist.all_reduce(counts, op=SUM)"),))
    assert fact_values(None, module_call)["variable"] == "counts"


@pytest.mark.parametrize("line, name", [
    ("weight = batch['mask'].sum() + 1e-4", "batch"),  # the indexed container, not the name assigned
    ("label = sample[key]", "sample"),
    ("out = self.head(feats)", "feats"),  # a call's argument still comes first
    ("total = count + 1", "total"),  # nothing indexed or called: the assigned name
])
def test_the_check_names_what_the_failing_line_reads(line: str, name: str) -> None:
    from assistant.kb.remedies import fact_values
    from assistant.types import Failure, Frame

    failure = Failure(text="", exc_type="KeyError", message="'mask'", frames=(Frame("loss.py", 49, "forward", line),))
    assert fact_values(None, failure)["variable"] == name


def _capture(slug: str) -> dict:
    import json

    from conftest import ROOT

    found = [p for p in (ROOT / "eval" / "captured").rglob(f"{slug}.json")]
    assert found, slug
    return json.loads(found[0].read_text())


@pytest.mark.parametrize("slug, name", [
    ("gather-dim-out-of-range", "q_values"),  # the index tensor on the failing line
    ("half-model-cdist-on-cpu", "emb_q"),  # the float16 operand
    ("inference-mode-frozen-backbone-features", "feats"),
    ("embedding-unk-token-out-of-vocab", "ids"),
    ("one-hot-labels-one-based", "labels"),
])
def test_captured_failures_get_checks_in_the_users_names(slug: str, name: str) -> None:
    """Real captured failures: every hypothesis carries a concrete check, and the leading one names the variable
    that the failing line in the user's own traceback works on."""
    from assistant import diagnose

    capture = _capture(slug)
    text = capture["stderr"]
    assert name in text  # the name is read from the failure, not from anything of ours
    d = diagnose(text)
    assert d.hypotheses and all(is_concrete_check(h.check) for h in d.hypotheses)
    assert name in d.hypotheses[0].check and "{{" not in d.hypotheses[0].check
