"""Read the NCCL flight recorder's per-rank dumps that a re-run leaves when the watchdog fires.

PyTorch's process group keeps a ring buffer of its recent collectives (op, sequence number, sizes,
state) and, with dumping on timeout enabled, writes it per rank as a pickle of plain dicts and lists.
A pickle can name code to run, so these are loaded by an unpickler that refuses every class: only
the built-in containers and scalars of the dump come through. What matters to the user is which
collective each rank was in when it hung, and which ranks had stopped calling collectives.
"""

from __future__ import annotations

import io
import pickle
import re
from pathlib import Path
from typing import Any

DUMP_PREFIX = "nccl_trace_rank_"
MAX_DUMP_BYTES = 64 << 20


class _PlainUnpickler(pickle.Unpickler):
    """Loads dicts, lists, strings and numbers; any class or function reference is refused."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: D102 - pickle's hook
        raise pickle.UnpicklingError(f"a flight-recorder dump may not name {module}.{name}")


def load_dump(path: Path) -> dict[str, Any] | None:
    """One rank's dump as plain data, or None when it is missing, too large, not a dict, or names code."""
    try:
        if path.stat().st_size > MAX_DUMP_BYTES:
            return None
        data = _PlainUnpickler(io.BytesIO(path.read_bytes())).load()
    except Exception:  # noqa: BLE001 - a torn or hostile file is no evidence, never a crash
        return None
    return data if isinstance(data, dict) else None


def _op(entry: dict[str, Any]) -> str:
    """``all_reduce`` from the recorder's ``nccl:all_reduce``."""
    name = str(entry.get("profiling_name") or "?")
    return name.split(":", 1)[-1]


def _seq(entry: dict[str, Any]) -> int:
    value = entry.get("collective_seq_id")
    return int(value) if isinstance(value, int) else -1


def _expected_ranks(dumps: dict[int, dict[str, Any]]) -> list[int]:
    """The ranks of the default group, as its configuration lists them (the dumping ranks when it does not)."""
    for dump in dumps.values():
        config = dump.get("pg_config") or {}
        for group in (config.values() if isinstance(config, dict) else ()):
            ranks = group.get("ranks") if isinstance(group, dict) else None
            found = [int(r) for r in re.findall(r"\d+", str(ranks))] if ranks is not None else []
            if found:
                return sorted(set(found))
    return sorted(dumps)


def rank_state(dump: dict[str, Any]) -> dict[str, Any]:
    """One rank's collectives: how many completed, and the first one it was still waiting in (if any)."""
    entries = sorted((e for e in dump.get("entries") or () if isinstance(e, dict) and not e.get("is_p2p")), key=_seq)
    completed = [_seq(e) for e in entries if e.get("state") == "completed"]
    pending = [e for e in entries if e.get("state") in ("scheduled", "started")]
    if entries and not completed and all(e.get("state") == "scheduled" for e in entries):
        # A backend that tracks no completion (Gloo runs each collective in order and leaves every entry
        # "scheduled"): the rank was in its last collective, and the ones before it had finished.
        pending = entries[-1:]
        completed = [_seq(e) for e in entries[:-1]]
    state: dict[str, Any] = {"last_completed": max(completed) if completed else 0, "recorded": len(entries)}
    if pending:
        first = pending[0]
        state["waiting"] = {"op": _op(first), "seq": _seq(first), "state": str(first.get("state")),
                            "sizes": first.get("input_sizes"), "dtypes": first.get("input_dtypes")}
    return state


def read_flight_dumps(folder: Path) -> dict[str, Any] | None:
    """Every rank's state from the dumps in ``folder``, and the ranks that left no dump; None without dumps."""
    dumps: dict[int, dict[str, Any]] = {}
    for path in sorted(folder.glob(f"{DUMP_PREFIX}*")):
        rank = re.search(r"(\d+)$", path.name)
        data = load_dump(path)
        if rank and data is not None:
            dumps[int(rank.group(1))] = data
    if not dumps:
        return None
    ranks = {r: rank_state(d) for r, d in sorted(dumps.items())}
    missing = [r for r in _expected_ranks(dumps) if r not in ranks]
    return {"ranks": {str(r): s for r, s in ranks.items()}, "missing_ranks": missing}
