"""Gather every probe at the moment of an uncaught exception, as a JSON-able dict, and turn that
dict back into an :class:`~assistant.types.Evidence` in the diagnosing process."""

from __future__ import annotations

import os
import re
import sys
import time
import traceback
import types
from typing import Any

from assistant.probes.budget import Budget
from assistant.probes.redact import redact_argv, redact_text, redact_value
from assistant.types import Evidence, ModuleSummary, TensorSummary

DEFAULT_BUDGET_S = 3.0
_CUDA_BROKEN = re.compile(r"device-side assert|illegal memory access|misaligned address|unspecified launch failure|CUDA error", re.I)
_MEMORY_WORDS = re.compile(r"out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_NOT_INITIALIZED|CUDNN_STATUS_ALLOC_FAILED", re.I)


def collect_evidence(exc: BaseException, tb: types.TracebackType | None, budget_s: float = DEFAULT_BUDGET_S, memory_history: bool = False) -> dict[str, Any]:
    """Probe the dying process. Never raises; what could not be collected is listed in ``notes``."""
    from assistant.probes.memory import cuda_memory
    from assistant.probes.tensors import collect_frame_state

    budget = Budget(budget_s)
    started = time.perf_counter()
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    record: dict[str, Any] = {
        "version": 1, "pid": os.getpid(), "rank": _env_int("RANK"), "local_rank": _env_int("LOCAL_RANK"),
        "argv": redact_argv(sys.argv), "time": time.time(), "exc_type": type(exc).__name__,
        "traceback": redact_text(text), "notes": [],
    }
    out_of_memory = bool(_MEMORY_WORDS.search(text))
    # After an asynchronous CUDA error the context is unusable: reading GPU values would fail or hang.
    cuda_broken = bool(_CUDA_BROKEN.search(text)) and not out_of_memory
    if out_of_memory or memory_history:
        # Memory first, with its own budget: at an OOM it is the decisive evidence.
        try:
            mem = cuda_memory(Budget(budget_s), history=memory_history)
            if mem is not None:
                record["memory"] = mem
                record["notes"].extend(mem.pop("notes", []))
        except Exception as exc3:  # noqa: BLE001
            record["notes"].append(f"memory probe failed: {type(exc3).__name__}: {exc3}")
    try:
        # Value statistics allocate (isnan makes a mask): impossible at an OOM, unsafe after a CUDA fault.
        state = collect_frame_state(tb, budget, stats=not (cuda_broken or out_of_memory))
        record.update({k: state[k] for k in ("tensors", "modules", "objects")})
        record["notes"].extend(state["notes"])
        if cuda_broken:
            record["notes"].append("value statistics of tensors skipped: the CUDA context is broken by this error")
    except Exception as exc2:  # noqa: BLE001 - the probe must never mask the user's error
        record["notes"].append(f"tensor probe failed: {type(exc2).__name__}: {exc2}")
    from assistant.probes.torch_env import torch_env_in_process

    torch_env = torch_env_in_process()
    if torch_env is not None:
        record["torch_env"] = torch_env  # spares the diagnosing process a second interpreter that imports torch
    record["probe_seconds"] = round(time.perf_counter() - started, 3)
    # Tensor and object names, reprs and notes quote the program too: every string is redacted.
    return redact_value(record)


def _env_int(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def evidence_from_record(record: dict[str, Any], env: dict[str, Any] | None = None, rerun: dict[str, Any] | None = None) -> Evidence:
    """Rebuild the typed Evidence from a probe record (possibly written by another process)."""
    tensors = tuple(
        TensorSummary(
            name=t["name"], frame=t.get("frame", ""), shape=tuple(t.get("shape", ())), dtype=t.get("dtype", "?"), device=t.get("device", "?"),
            requires_grad=bool(t.get("requires_grad")), is_leaf=bool(t.get("is_leaf", True)), grad_fn=t.get("grad_fn"),
            contiguous=bool(t.get("contiguous", True)), nan_count=t.get("nan_count"), inf_count=t.get("inf_count"),
            min_value=t.get("min_value"), max_value=t.get("max_value"), library=bool(t.get("library")),
        )
        for t in record.get("tensors", [])
    )
    modules = tuple(
        ModuleSummary(name=m["name"], frame=m.get("frame", ""), type_name=m.get("type_name", "?"), param_devices=tuple(m.get("param_devices", ())),
                      param_dtypes=tuple(m.get("param_dtypes", ())), training=m.get("training"), layers=tuple(m.get("layers", ())))
        for m in record.get("modules", [])
    )
    return Evidence(env=env or {}, tensors=tensors, modules=modules, memory=record.get("memory"), objects=tuple(record.get("objects", ())),
                    rerun=rerun, notes=tuple(record.get("notes", ())))
