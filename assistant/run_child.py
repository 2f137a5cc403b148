"""What a command run under torchhelp's crash hook needs and leaves: its environment, and the probe records it wrote.

Shared by `torchhelp run` (assistant.runner) and the investigation's re-runs (assistant.investigate.rerun),
so neither imports the other.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

BOOT_DIR = Path(__file__).resolve().parent / "_boot"
PKG_PARENT = Path(__file__).resolve().parent.parent
# Launcher summaries and stops: a worker's own error, when there is one, is the real failure.
SECONDARY_TYPES = ("ChildFailedError", "SignalException", "KeyboardInterrupt")


def child_env(run_dir: Path, memory_history: bool, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The command's environment: ours, plus the crash hook on PYTHONPATH and its run folder (and ``extra``)."""
    env = dict(os.environ)
    env["TORCHHELP_RUN_DIR"] = str(run_dir)
    env["TORCHHELP_PKG_PARENT"] = str(PKG_PARENT)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BOOT_DIR), env.get("PYTHONPATH", "")) if p)
    if memory_history:
        env["TORCHHELP_MEMORY_HISTORY"] = "1"
    env.update(extra or {})
    return env


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    """Every probe record the crash hook wrote in ``run_dir``, oldest first (unreadable ones skipped)."""
    out = []
    for p in sorted(run_dir.glob("evidence-*.json")):
        try:
            out.append(json.loads(p.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return sorted(out, key=lambda r: r.get("time", 0))


def choose_record(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first real failure: launcher summaries (ChildFailedError) lose to a worker's own error."""
    primary = [r for r in records if r.get("exc_type") not in SECONDARY_TYPES]
    return (primary or records)[0] if records else None
