"""The parser on tracebacks captured from real PyTorch runs (eval/captured), and on the same text
dressed the way real logs dress it: rank prefixes, timestamps, colours, noise, cut-off headers."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from assistant.parse import parse_failure
from assistant.parse.normalize import clean_lines, strip_ansi
from conftest import CAPTURES, capture_ids

PY_CAPTURES = [c for c in CAPTURES if c["failure"]["exc_type"]]


def test_enough_real_captures() -> None:
    assert len(PY_CAPTURES) >= 40, "the parser must be exercised on at least 40 real captured tracebacks"


def _final_line_regex(capture: dict) -> re.Pattern[str]:
    return re.compile(capture["expect_exception"], re.M)


@pytest.mark.parametrize("capture", PY_CAPTURES, ids=capture_ids(PY_CAPTURES))
def test_parses_real_capture(capture: dict) -> None:
    failure = parse_failure(capture["stderr"])
    assert failure.exc_type, "an exception type must be found"
    assert failure.message.strip()
    # The expected error is in what the parser extracted, not only somewhere in the raw text
    # (patterns that deliberately span two tracebacks are checked against the raw text).
    spans_tracebacks = "(.|\\n)" in capture["expect_exception"]
    assert _final_line_regex(capture).search(capture["stderr"] if spans_tracebacks else failure.search_text), failure.search_text[:500]
    assert failure.message.splitlines()[0].strip() in strip_ansi(capture["stderr"])
    if any(f.file.endswith("repro.py") for f in failure.frames):
        assert any(f.file.endswith("repro.py") for f in failure.user_frames), "the user's own frame must be recognised"
    assert not any("site-packages" in f.file for f in failure.user_frames)


def _dress(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())


@pytest.mark.parametrize("capture", PY_CAPTURES[::4], ids=capture_ids(PY_CAPTURES[::4]))
@pytest.mark.parametrize(
    "dress",
    [
        lambda t: _dress(t, "[rank3]: "),
        lambda t: _dress(t, "[default1]:"),
        lambda t: _dress(t, "2024-05-01 10:00:00,123 - ERROR - "),
        lambda t: _dress(t, "2024-05-01T10:00:00.123Z "),
        lambda t: "\n".join(f"\x1b[31m{line}\x1b[0m" for line in t.splitlines()),
        lambda t: t.replace("\n", "\r\n"),
        lambda t: "Epoch 1: 100%|██████████| 10/10 [00:01<00:00]\nloading data...\nUserWarning: something harmless\n" + t + "\nwandb: Waiting for W&B process to finish...\n",
    ],
    ids=["rank", "torchrun-default", "logging-timestamp", "iso-timestamp", "ansi", "crlf", "noise"],
)
def test_same_failure_through_log_decoration(capture: dict, dress) -> None:  # type: ignore[no-untyped-def]
    plain = parse_failure(capture["stderr"])
    dressed = parse_failure(dress(capture["stderr"]))
    assert dressed.exc_type == plain.exc_type
    assert dressed.message.splitlines()[0].strip() == plain.message.splitlines()[0].strip()
    assert [f.line for f in dressed.frames] == [f.line for f in plain.frames]


def test_rank_prefix_is_kept_as_a_fact() -> None:
    capture = PY_CAPTURES[0]
    failure = parse_failure(_dress(capture["stderr"], "[rank5]: "))
    assert failure.rank == 5


def test_bare_last_line_without_traceback() -> None:
    capture = next(c for c in PY_CAPTURES if c["slug"] == "linear-after-conv-flatten")
    last = [ln for ln in capture["stderr"].splitlines() if ln.strip()][-1]
    failure = parse_failure(last)
    assert failure.exc_type == "RuntimeError"
    assert "mat1 and mat2 shapes cannot be multiplied" in failure.message
    assert failure.frames == ()


def test_headerless_excerpt_still_yields_frames() -> None:
    capture = next(c for c in PY_CAPTURES if c["slug"] == "linear-after-conv-flatten")
    body = capture["stderr"].split("Traceback (most recent call last):", 1)[1]
    failure = parse_failure(body)
    assert failure.exc_type == "RuntimeError" and failure.frames
    assert any("missing" in n for n in failure.notes)


def test_exception_chain_cause_link() -> None:
    capture = next(c for c in CAPTURES if c["slug"] == "spawn-dataloader-missing-main-guard")
    failure = parse_failure(capture["stderr"])
    # The parent's "worker exited unexpectedly" is only a consequence; the child's own error wins.
    assert "bootstrapping phase" in failure.message
    assert failure.notes


def test_dataloader_worker_error_is_unwrapped() -> None:
    capture = next(c for c in CAPTURES if c["slug"] == "dataloader-worker-keyerror-label-map")
    failure = parse_failure(capture["stderr"])
    assert failure.wrapper and failure.wrapper.startswith("DataLoader worker process")
    assert failure.exc_type == "KeyError"
    assert any(r.link == "embedded" for r in failure.chain)


def test_spawned_process_error_is_unwrapped() -> None:
    capture = next(c for c in CAPTURES if c["slug"] == "mp-spawn-global-set-under-main-guard")
    failure = parse_failure(capture["stderr"])
    assert failure.wrapper == "spawned process 0"
    assert failure.exc_type == "NameError"


def test_multiline_state_dict_message_kept_whole() -> None:
    capture = next(c for c in CAPTURES if c["slug"] == "load-dataparallel-checkpoint-module-prefix")
    failure = parse_failure(capture["stderr"])
    assert "Missing key(s)" in failure.message and "Unexpected key(s)" in failure.message


def test_interleaved_ranks_pick_the_rank_that_failed_first() -> None:
    own = next(c for c in PY_CAPTURES if c["slug"] == "linear-after-conv-flatten")["stderr"]
    timeout = (
        "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    dist.all_reduce(t)\n"
        "torch.distributed.DistBackendError: [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600123 milliseconds before timing out."
    )
    lines_a = [f"[rank1]: {ln}" for ln in own.splitlines()]
    lines_b = [f"[rank0]: {ln}" for ln in timeout.splitlines()]
    mixed = "\n".join(x for pair in zip(lines_a, lines_b + [""] * len(lines_a), strict=False) for x in pair if x)
    failure = parse_failure(mixed)
    assert failure.rank == 1
    assert "mat1 and mat2" in failure.message
    assert any("rank(s) 0" in n for n in failure.notes)


def test_cuda_assert_lines_are_collected_and_deduplicated() -> None:
    line = "/pytorch/aten/src/ATen/native/cuda/Loss.cu:245: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [{t},0,0] Assertion `t >= 0 && t < n_classes` failed."
    text = "\n".join(line.format(t=i) for i in range(32)) + "\nRuntimeError: CUDA error: device-side assert triggered\n"
    failure = parse_failure(text)
    assert len(failure.cuda_asserts) == 1
    a = failure.cuda_asserts[0]
    assert (a.kernel, a.condition, a.count) == ("nll_loss_forward_reduce_cuda_kernel_2d", "t >= 0 && t < n_classes", 32)


def test_ansi_and_progress_bar_carriage_returns_are_cleaned() -> None:
    lines = clean_lines("step 1/10\rstep 10/10\r\n\x1b[1;31mRuntimeError\x1b[0m: boom")
    assert [ln.text for ln in lines] == ["step 10/10", "RuntimeError: boom"]


IPYTHON_SNIPPET = textwrap.dedent(
    """
    import torch
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8192, 10)
        def forward(self, x):
            return self.fc(x.flatten(1))
    Net()(torch.randn(4, 8, 30, 30))
    """
)


@pytest.mark.parametrize("colors", ["NoColor", "Linux"])
def test_real_ipython_traceback(colors: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("IPython")
    script = tmp_path / "cell.ipy"
    script.write_text(IPYTHON_SNIPPET)
    res = subprocess.run([sys.executable, "-m", "IPython", f"--colors={colors}", "--no-banner", "--quick", str(script)],
                         capture_output=True, text=True, timeout=240)
    text = res.stdout + res.stderr
    assert "mat1 and mat2" in text, text[-2000:]
    failure = parse_failure(text)
    assert failure.exc_type == "RuntimeError"
    assert "mat1 and mat2 shapes cannot be multiplied (4x7200 and 8192x10)" in failure.message
    assert any("cell" in f.file or f.file.endswith(".ipy") for f in failure.frames)


def test_never_raises_on_garbage() -> None:
    for junk in ["", "\x00\x01\x02", "Traceback (most recent call last):", "File \"x\", line", "-" * 10000, "\n" * 500, "é" * 100]:
        parse_failure(junk)
