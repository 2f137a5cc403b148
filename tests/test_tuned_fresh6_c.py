"""Families tuned on the dev_fresh6 reports (tuner f6c), read from real texts.

Every text is real: an error printed by torch 2.13 here, a corpus file, or a report of the dev_fresh6 split.
"""

from __future__ import annotations

import re
from pathlib import Path

from assistant import rules
from assistant.kb.remedies import remedies_of
from assistant.parse import parse_failure
from assistant.types import RuleHit
from tuned_support import dev_reader

ROOT = Path(__file__).resolve().parents[1]

# torch 2.13 on this machine: `torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)]).size()`
NESTED_SIZES = "RuntimeError: Internal error: NestedTensorImpl doesn't support sizes. Please file an issue."


def _hit_text(text: str) -> RuleHit | None:
    return rules.match(parse_failure(text)).hit


_dev_fresh6 = dev_reader("dev_fresh6")


def test_compile_over_fsdp_with_flat_parameters_asks_for_use_orig_params() -> None:
    found = _hit_text(_dev_fresh6("f6c-fsdp-compile-use-orig-params"))
    assert found is not None
    assert found.rule == "compile.fsdp_flat_params"
    assert found.category == "compile_error"
    assert "use_orig_params=True" in (found.fixes[0].code or "")


def test_a_plain_assertion_is_not_read_as_fsdp() -> None:
    found = _hit_text("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    assert x > 0\nAssertionError: x must be positive\n")
    assert found is None or found.rule != "compile.fsdp_flat_params"


def test_a_pasted_raise_statement_is_not_the_error_line() -> None:
    failure = parse_failure(_dev_fresh6("f6c-onnx-dynamo-batch-01-specialization"))
    assert not failure.message.strip().startswith("raise ")


def test_a_printed_error_line_is_still_read_without_a_traceback() -> None:
    failure = parse_failure(NESTED_SIZES)
    assert "NestedTensorImpl doesn't support sizes" in failure.message


def test_nested_sizes_error_is_a_signature_of_the_nested_tensor_document() -> None:
    text = (ROOT / "knowledge" / "kernels" / "nested-tensor-attention.md").read_text(encoding="utf-8")
    signatures = re.findall(r'^  - "(.+)"$', text.split("---", 2)[1], re.M)
    assert any(s in NESTED_SIZES for s in signatures)
    rem = remedies_of("nested-tensor-attention")
    assert rem is not None
    cause = next(c for c in rem.causes if c.id == "strided-no-sizes")
    assert cause.fix_refs[0] == "nested-tensor-attention#jagged-layout"
    assert rem.fix("jagged-layout") is not None


def test_onnx_example_of_size_one_offers_a_larger_example() -> None:
    rem = remedies_of("onnx-dynamic-axes")
    assert rem is not None
    cause = next(c for c in rem.causes if c.id == "example-size-one")
    assert cause.fix_refs[0] == "onnx-dynamic-axes#example-size-two"
    assert rem.fix("example-size-two") is not None


def test_sdpa_without_a_kernel_for_float32_inputs_reads_as_a_dtype_question() -> None:
    found = _hit_text(_dev_fresh6("f6c-sdpa-flash-fp32-no-kernel"))
    assert found is not None
    assert found.rule == "dtypes.attention_dtype"
    assert found.category == "dtype_mismatch"
    assert "autocast" in (found.fixes[0].code or "") + found.fixes[0].title.lower()


def test_sdpa_without_a_kernel_for_3d_inputs_stays_a_shape_question() -> None:
    text = (ROOT / "eval" / "corpus" / "shapes" / "sdpa_fused_kernels_3d_inputs_captured.txt").read_text(encoding="utf-8")
    found = _hit_text(text)
    assert found is not None
    assert found.rule == "shapes.attention_rank"
