"""The crash hook installed in processes run under `torchhelp run`.

On an uncaught exception it probes the dying process (tensors, modules, CUDA memory), writes the
record to ``$TORCHHELP_RUN_DIR/evidence-<pid>-<n>.json``, then lets Python print the traceback as
usual — the program's own output is never changed.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

_installed = False
_count = 0


def _write(run_dir: str, record: dict[str, Any]) -> None:
    global _count
    _count += 1
    path = os.path.join(run_dir, f"evidence-{os.getpid()}-{_count}.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh, default=str)
    os.replace(tmp, path)


def install_child_hook(run_dir: str) -> None:
    """Wrap sys.excepthook and threading.excepthook (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    history = os.environ.get("TORCHHELP_MEMORY_HISTORY") == "1"
    budget = float(os.environ.get("TORCHHELP_PROBE_BUDGET", "3"))
    if history:
        _start_memory_history()
    _apply_experiment_switches()
    previous = sys.excepthook

    def hook(exc_type, exc, tb):  # type: ignore[no-untyped-def]
        if not issubclass(exc_type, (KeyboardInterrupt, SystemExit)):
            try:
                from assistant.probes.collect import collect_evidence

                record = collect_evidence(exc, tb, budget_s=budget, memory_history=history)
                record["thread"] = "main"
                _write(run_dir, record)
            except Exception as err:  # noqa: BLE001 - the user's traceback must still print
                sys.stderr.write(f"torchhelp: probe failed ({type(err).__name__}: {err})\n")
        previous(exc_type, exc, tb)

    sys.excepthook = hook
    previous_thread = threading.excepthook

    def thread_hook(args):  # type: ignore[no-untyped-def]
        if args.exc_type is not None and not issubclass(args.exc_type, SystemExit):
            try:
                from assistant.probes.collect import collect_evidence

                record = collect_evidence(args.exc_value, args.exc_traceback, budget_s=budget)
                record["thread"] = getattr(args.thread, "name", "thread")
                _write(run_dir, record)
            except Exception:  # noqa: BLE001
                pass
        previous_thread(args)

    threading.excepthook = thread_hook


def _apply_experiment_switches() -> None:
    """Turn on the switches an investigation's re-run asked for (none in a plain `torchhelp run`)."""
    from assistant.investigate.switches import apply_switches, requested

    names = requested()
    if names:
        apply_switches(names)


def _start_memory_history() -> None:
    """Record CUDA allocation stacks from the start (opt-in: importing torch here costs start-up time)."""
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.memory._record_memory_history(max_entries=200_000)
    except Exception as err:  # noqa: BLE001
        sys.stderr.write(f"torchhelp: memory history not enabled ({type(err).__name__}: {err})\n")


