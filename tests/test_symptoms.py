"""Described symptoms (assistant/rules/symptoms.py): prose without an error message.

The rule functions are called directly (not through the whole rule set) so these tests check what
the symptom rules read from the words; tests/test_registry.py checks the real examples end to end.
"""

from __future__ import annotations

import json

import pytest

from assistant import rules
from assistant.parse import parse_failure
from assistant.rules import symptoms
from assistant.rules.base import Context
from conftest import CAPTURES, ROOT


def _ctx(text: str) -> Context:
    return Context(parse_failure(text))


def _answer(text: str):  # type: ignore[no-untyped-def]
    """The first symptom rule that answers, in registry order (None when none does)."""
    ctx = _ctx(text)
    for func in (symptoms.nan_loss, symptoms.memory, symptoms.hang):
        found = func(ctx)
        if found is not None:
            return found
    return None


@pytest.mark.parametrize(
    ("text", "outcome", "numbers"),
    [
        ("my loss becomes nan after ~200 steps", "symptoms.nan_after_steps", {"steps": 200.0}),
        ("Loss goes to NaN at the epoch of 28, it was converging before", "symptoms.nan_after_steps", {"epochs": 28.0}),
        ("Getting nan loss values after 20k+ steps of training", "symptoms.nan_after_steps", {"steps": 20000.0}),
        ("training loss is nan from the first iteration with fp16", "symptoms.nan_from_start", {}),
        ("the output turns into NaN right after the 1st batch", "symptoms.nan_from_start", {}),
        ("weights become nan during training, no idea why", "symptoms.nan_unknown_onset", {}),
    ],
)
def test_nan_onset_decides_the_outcome(text: str, outcome: str, numbers: dict) -> None:
    found = symptoms.nan_loss(_ctx(text))
    assert found is not None and found.rule == outcome and found.category == "nan_inf"
    assert dict(found.facts.numbers) == numbers
    assert 0.6 <= found.confidence <= 0.75


@pytest.mark.parametrize(
    ("log", "outcome", "numbers"),
    [
        ("step: 0 total_loss: 9.91\nstep: 100 total_loss: nan obj_cls: nan", "symptoms.nan_after_steps", {"steps": 100.0}),
        ("Epoch 0, Iter 0: Loss:1.0637\nEpoch 1, Iter 0: Loss:nan", "symptoms.nan_after_steps", {"epochs": 1.0}),
        ("Steps:   2%|  | 92679/5900000 [19:15:43<1185:20:02,  1.36it/s, loss=nan, lr=4.99e-5]", "symptoms.nan_after_steps", {"steps": 92679.0}),
        ("iter 0 | loss nan | lr 0.001", "symptoms.nan_from_start", {}),
    ],
)
def test_bare_log_lines_give_the_onset(log: str, outcome: str, numbers: dict) -> None:
    found = symptoms.nan_loss(_ctx(log))
    assert found is not None and found.rule == outcome and dict(found.facts.numbers) == numbers


def test_nan_from_start_with_fp16_is_typed_and_suggests_scaling() -> None:
    found = symptoms.nan_loss(_ctx("training loss is nan from the first iteration with fp16"))
    assert found is not None
    assert {"from_first_step", "fp16"} <= found.facts.flags and found.facts.dtypes == ("float16",)
    text = " ".join(f"{f.title} {f.detail} {f.code or ''}" for f in found.fixes)
    assert "isfinite" in text and "set_detect_anomaly" in text and "bfloat16" in text


def test_nan_after_steps_points_at_divergence_and_asks_for_the_step() -> None:
    found = symptoms.nan_loss(_ctx("Loss becomes nan after training for ~2000 iterations, even after I reduced the learning rate"))
    assert found is not None and found.rule == "symptoms.nan_after_steps"
    assert "learning_rate_already_lowered" in found.facts.flags
    text = " ".join(f"{f.title} {f.detail} {f.code or ''}" for f in found.fixes)
    assert "clip_grad_norm_" in text and "warmup" in text.lower() and "isfinite" in text


def test_nan_with_unknown_onset_asks_when_it_starts() -> None:
    found = symptoms.nan_loss(_ctx("NaN happens during the first training epoch"))
    assert found is not None and found.rule == "symptoms.nan_unknown_onset"
    assert any("when the NaN first appears" in f.title for f in found.fixes)


@pytest.mark.parametrize(
    ("text", "outcome", "category"),
    [
        ("GPU memory keeps increasing every epoch", "symptoms.gpu_memory_growth", "cuda_oom"),
        ("RAM usage grows until the process is killed", "symptoms.ram_growth", "cpu_oom"),
        ("the memory usage (RAM, not GPU memory) kept increasing during training", "symptoms.ram_growth", "cpu_oom"),
        ("The training process was killed by the system, nothing printed", "symptoms.process_killed", "cpu_oom"),
    ],
)
def test_memory_descriptions(text: str, outcome: str, category: str) -> None:
    found = symptoms.memory(_ctx(text))
    assert found is not None and (found.rule, found.category) == (outcome, category)


def test_gpu_growth_fixes_measure_and_detach() -> None:
    found = symptoms.memory(_ctx("CUDA memory gradually increases with each iteration during testing"))
    assert found is not None and found.rule == "symptoms.gpu_memory_growth"
    text = " ".join(f"{f.title} {f.detail} {f.code or ''}" for f in found.fixes)
    assert "memory_allocated" in text and ".item()" in text and "no_grad" in found.cause


def test_ram_growth_with_workers_is_flagged() -> None:
    found = symptoms.memory(_ctx("CPU memory grows with training when num_workers of the DataLoader is greater than 0"))
    assert found is not None and found.rule == "symptoms.ram_growth"
    assert "dataloader_workers" in found.facts.flags and "workers" in found.cause


@pytest.mark.parametrize(
    ("text", "outcome", "category"),
    [
        ("training hangs / freezes at the first epoch with num_workers>0", "symptoms.dataloader_hang", "dataloader_error"),
        ("DataLoader stuck forever when num_workers=4, works with num_workers=0", "symptoms.dataloader_hang", "dataloader_error"),
        ("DDP hangs at the start, stuck in init_process_group", "symptoms.distributed_init_hang", "ddp_error"),
        ("multi-GPU training hangs after 3 epochs, GPUs at 100% utilization and no output", "symptoms.distributed_hang", "nccl_error"),
    ],
)
def test_hang_descriptions(text: str, outcome: str, category: str) -> None:
    found = symptoms.hang(_ctx(text))
    assert found is not None and (found.rule, found.category) == (outcome, category)


def test_hangs_ask_for_stacks_or_debug_logs() -> None:
    loader = symptoms.hang(_ctx("DataLoader stuck forever when num_workers=4"))
    dist = symptoms.hang(_ctx("DDP training hangs after 200 steps"))
    assert loader is not None and dist is not None
    assert loader.facts.numbers.get("num_workers") == 4.0
    assert any("num_workers=0" in (f.code or "") for f in loader.fixes) and any("timeout=" in (f.code or "") for f in loader.fixes)
    assert dist.facts.numbers.get("steps") == 200.0
    assert any("NCCL_DEBUG=INFO" in (f.code or "") and "TORCH_DISTRIBUTED_DEBUG=DETAIL" in (f.code or "") for f in dist.fixes)


def test_store_barrier_counts_are_read() -> None:
    line = ("INFO:root:Waiting in store based barrier to initialize process group for rank: 3, key: store_based_barrier_key:1 "
            "(world_size=8, worker_count=7, timeout=0:30:00)")
    found = symptoms.hang(_ctx(line))
    assert found is not None and found.rule == "symptoms.init_barrier_count" and found.category == "ddp_error"
    assert dict(found.facts.numbers) == {"world_size": 8.0, "worker_count": 7.0, "rank": 3.0}
    assert "only 7 of the 8" in found.cause
    extra = symptoms.hang(_ctx(line.replace("worker_count=7", "worker_count=16")))
    assert extra is not None and "more processes (16)" in extra.cause


def test_an_interrupted_dataloader_wait_is_a_hang() -> None:
    text = (
        "training stops after a few batches, I pressed Ctrl+C:\n"
        "^CTraceback (most recent call last):\n"
        '  File "train.py", line 36, in train\n'
        "    for step, batch in enumerate(loader):\n"
        '  File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 1316, in _next_data\n'
        "    idx, data = self._get_data()\n"
        '  File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 1163, in _try_get_data\n'
        "    data = self._data_queue.get(timeout=timeout)\n"
        "KeyboardInterrupt\n"
    )
    found = symptoms.hang(_ctx(text))
    assert found is not None and found.rule == "symptoms.dataloader_hang"
    assert any(f.kind == "stack" for f in found.evidence)
    # A real error raised in the same frames is not a hang.
    assert symptoms.hang(_ctx(text.replace("KeyboardInterrupt", "RuntimeError: something broke"))) is None


@pytest.mark.parametrize(
    "text",
    [
        "GPU utilization is low and training is slow",
        "loss does not decrease, accuracy stuck at 10%",
        "training hangs",  # nothing says whether workers or several ranks are involved
        "How do I use a learning rate scheduler?",
        "CPU usage goes up to 100% and training is slow",  # utilisation, not memory
        "If I increase batch size to 64 I run out of memory",  # a bigger batch, not growth over steps
        "Out of memory with gradient accumulation on 2 GPUs",
    ],
)
def test_not_a_recognised_symptom(text: str) -> None:
    assert _answer(text) is None


@pytest.mark.parametrize(
    ("text", "outcome"),
    [
        ("my training hung forever on 4 GPUs so I killed the process", "symptoms.distributed_hang"),
        ("training got stuck with num_workers=8 and I had to kill it", "symptoms.dataloader_hang"),
    ],
)
def test_a_kill_by_the_user_is_not_the_oom_killer(text: str, outcome: str) -> None:
    found = _answer(text)
    assert found is not None and found.rule == outcome


def test_the_first_named_symptom_wins() -> None:
    text = "FP16 causes NAN after optimizer.step. FP32 fixes it but then we get out of memory and the RAM keeps increasing."
    found = _answer(text)
    assert found is not None and found.rule.startswith("symptoms.nan")


def test_a_traceback_is_never_read_as_a_description() -> None:
    text = (
        "the loss becomes nan after 100 steps\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 10, in <module>\n'
        "    loss.backward()\n"
        "SomeLibraryError: something else went wrong\n"
    )
    assert _answer(text) is None


def test_no_real_error_text_is_answered_as_a_symptom() -> None:
    """Captured runs and the dev split are real error messages: the symptom rules must leave them to the message rules."""
    texts = [c["stderr"] for c in CAPTURES]
    dev = ROOT / "eval" / "realworld" / "dev.jsonl"
    texts += [json.loads(line)["error_text"] for line in dev.read_text(encoding="utf-8").splitlines() if line.strip()]
    for text in texts:
        found = rules.match(parse_failure(text)).hit
        assert found is None or not found.rule.startswith("symptoms."), found.rule
