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
