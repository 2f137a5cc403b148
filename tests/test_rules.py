"""Rules: every rule fires on real error text, and its answer is specific to the values in that text.

Error texts come from real runs: the committed captures (eval/captured), real reports pasted by
users on GitHub (eval/realworld, verbatim), and snippets run right here with the installed torch.
"""

from __future__ import annotations

import json
import traceback

import pytest
import torch

from assistant import rules
from assistant.parse import parse_failure
from conftest import CAPTURES, ROOT

# Only the dev split: the frozen test split is never used to build or check rules.
REALWORLD = [json.loads(line) for line in (ROOT / "eval" / "realworld" / "dev.jsonl").read_text().splitlines() if line.strip()]


def _raise_text(fn) -> str:  # type: ignore[no-untyped-def]
    """Run a failing snippet and return its real traceback text."""
    try:
        fn()
    except BaseException:  # noqa: BLE001 - we want the text of whatever torch raises
        return traceback.format_exc()
    raise AssertionError("snippet did not fail")


def _first_rule(text: str):  # type: ignore[no-untyped-def]
    """(registered rule id, answer) of the rule set for a text, (None, None) when nothing answers."""
    found = rules.match(parse_failure(text), strict=True).hit
    return (found.rule_id, found) if found else (None, None)


def _empty_loader() -> None:
    list(torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(0, 2)), shuffle=True))


def _script_unsupported() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.tensor([len({1: x}[1].shape)]) + x  # dict of tensors with int keys: fine; use an unsupported builtin below

    def g(x: torch.Tensor):  # type: ignore[no-untyped-def]
        return [i for i in map(lambda v: v, x)]

    torch.jit.script(g)


def _half_overflow() -> None:
    scores = torch.zeros(2, 2, dtype=torch.half)
    scores.masked_fill(torch.ones(2, 2, dtype=torch.bool), -1e9)


LOCAL_SNIPPETS = {
    "amp.autocast_misc": _half_overflow,
    "data.dataset_misc": _empty_loader,
    "compile.torchscript": _script_unsupported,
    "shapes.generic_shape": lambda: torch.randn(2, 3).permute(0, 1, 2),
}


@pytest.mark.parametrize("name", sorted(LOCAL_SNIPPETS))
def test_local_snippet_rules(name: str) -> None:
    rule, hit = _first_rule(_raise_text(LOCAL_SNIPPETS[name]))
    assert rule == name
    assert hit.fixes and hit.cause


def _capture(slug: str) -> dict:
    return next(c for c in CAPTURES if c["slug"] == slug)


def test_linear_mismatch_names_layer_numbers_and_fixes() -> None:
    text = _raise_text(lambda: torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8192, 10))(torch.randn(4, 8, 30, 30)))
    _, hit = _first_rule(text)
    answer = hit.cause + " ".join(f.title + (f.code or "") for f in hit.fixes)
    assert hit.category == "shape_mismatch"
    assert "in_features=8192" in answer and "7200" in answer
    assert "nn.Linear(7200, 10)" in answer and "LazyLinear" in answer
    assert "8×30×30" in hit.cause or "32×15×15" in hit.cause  # 7200 explained as a flattened C×H×W map


def test_conv_grayscale_gives_both_fixes() -> None:
    _, hit = _first_rule(_capture("conv-grayscale-input-rgb-model")["stderr"])
    titles = " ".join(f.title for f in hit.fixes)
    assert "3 channels" in titles and "in_channels=1" in titles
    assert "grayscale" in hit.cause.lower()


@pytest.mark.parametrize("report_id", [r["id"] for r in REALWORLD if r["category"] == "cuda_oom"])
def test_cuda_oom_numbers_and_fragmentation_advice(report_id: str) -> None:
    report = next(r for r in REALWORLD if r["id"] == report_id)
    _, hit = _first_rule(report["error_text"])
    assert hit.category == "cuda_oom"
    fragmented = "(fragmentation)" in hit.title
    if fragmented:
        assert hit.fixes[0].code and "expandable_segments" in hit.fixes[0].code
    else:
        # expandable_segments is never the first advice when fragmentation is not significant
        assert "expandable_segments" not in (hit.fixes[0].code or "")
    if "Tried to allocate" in report["error_text"]:
        assert any(f.kind == "memory" and "requested" in f.text for f in hit.evidence)


def test_oom_fragmentation_decision_uses_the_numbers() -> None:
    base = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.50 GiB is free. "
            "Including non-PyTorch memory, this process has 77.68 GiB memory in use. Of the allocated memory {alloc} GiB is allocated by PyTorch, "
            "and {unalloc} GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
    _, frag = _first_rule(base.format(alloc="52.10", unalloc="25.40"))
    _, full = _first_rule(base.format(alloc="77.10", unalloc="0.40"))
    assert "fragmentation" in frag.title and "expandable_segments" in (frag.fixes[0].code or "")
    assert "fragmentation" not in full.title
    assert "batch size" in full.fixes[0].title.lower() or "inference" in full.fixes[0].title.lower()
    assert "will not help" in full.cause
    assert "fragmentation_ruled_out" in full.facts.flags and "fragmentation_ruled_out" not in frag.facts.flags


def test_old_oom_wording_maps_to_the_same_rule() -> None:
    old = next(r for r in REALWORLD if "cuda runtime error (2)" in r["error_text"].lower() or "already allocated" in r["error_text"])
    rule, hit = _first_rule(old["error_text"])
    assert hit.category == "cuda_oom" and rule == "memory.cuda_oom"


@pytest.mark.parametrize(
    "needle,category",
    [("size mismatch, m1:", "shape_mismatch"), ("Expected object of scalar type", "dtype_mismatch"), ("cuda runtime error (59)", "device_side_assert")],
)
def test_old_and_new_wordings_share_a_rule(needle: str, category: str) -> None:
    olds = [r for r in REALWORLD if needle in r["error_text"]]
    assert olds, f"no real report with {needle!r}"
    for report in olds:
        _, hit = _first_rule(report["error_text"])
        assert hit is not None and hit.category == category, report["id"]


def test_device_side_assert_reads_the_kernel() -> None:
    report = next(r for r in REALWORLD if "t >= 0 && t < n_classes" in r["error_text"])
    _, hit = _first_rule(report["error_text"])
    assert hit.category == "device_side_assert"
    assert "label" in hit.cause and "n_classes" in hit.cause
    assert "asynchronous" in hit.cause.lower()
    assert any("CUDA_LAUNCH_BLOCKING=1" in (f.code or "") for f in hit.fixes)


def test_embedding_assert_points_at_vocabulary() -> None:
    report = next(r for r in REALWORLD if "srcIndex < srcSelectDimSize" in r["error_text"])
    _, hit = _first_rule(report["error_text"])
    assert hit.category == "device_side_assert" and "num_embeddings" in hit.cause


@pytest.mark.parametrize("slug,category", [
    ("missing-apex-amp-import", "environment_error"),
    ("dataset-relative-path-not-found", "environment_error"),
    ("config-key-renamed-keyerror", "python_error"),
    ("module-missing-super-init", "python_error"),
])
def test_non_pytorch_failures(slug: str, category: str) -> None:
    _, hit = _first_rule(_capture(slug)["stderr"])
    assert hit.category == category and hit.fixes


def test_keyerror_names_the_key_and_the_config() -> None:
    _, hit = _first_rule(_capture("config-key-renamed-keyerror")["stderr"])
    assert "'learning_rate'" in hit.cause and "config" in hit.cause.lower()


def test_every_cited_document_exists() -> None:
    from assistant.kb.documents import load_builtin

    ids = {d.id for d in load_builtin()}
    texts = [c["stderr"] for c in CAPTURES] + [r["error_text"] for r in REALWORLD]
    for text in texts:
        hit = rules.match(parse_failure(text)).hit
        if hit:
            assert set(hit.doc_ids) <= ids, (hit.rule, set(hit.doc_ids) - ids)
