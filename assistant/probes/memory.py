"""CUDA memory at the moment of failure: allocator counters, fragmentation, the largest live tensors,
and (with --memory-history) the allocation sites that hold the most memory, summarised."""

from __future__ import annotations

import gc
import sys
from collections import defaultdict
from typing import Any

from assistant.probes.budget import Budget, ProbeTimeout, limit


def cuda_memory(budget: Budget, largest: int = 6, history: bool = False) -> dict[str, Any] | None:
    """Per-device allocator figures; None when CUDA is not in use. Never raises."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    out: dict[str, Any] = {"devices": [], "notes": []}
    try:
        with limit(budget.left()):
            for i in range(torch.cuda.device_count()):
                try:
                    free, total = torch.cuda.mem_get_info(i)
                except Exception:  # noqa: BLE001 - a broken context still has allocator counters
                    free, total = None, torch.cuda.get_device_properties(i).total_memory
                alloc = torch.cuda.memory_allocated(i)
                reserved = torch.cuda.memory_reserved(i)
                out["devices"].append({
                    "index": i, "name": torch.cuda.get_device_name(i), "total": int(total), "free": int(free) if free is not None else None,
                    "allocated": int(alloc), "reserved": int(reserved), "peak_allocated": int(torch.cuda.max_memory_allocated(i)),
                    "reserved_unallocated": int(reserved - alloc),
                    "fragmentation_share_of_total": round((reserved - alloc) / total, 4) if total else None,
                })
            if history:
                try:
                    out["allocation_sites"] = _history_sites(torch)
                except Exception as exc:  # noqa: BLE001 - keep the counters even if the snapshot fails
                    out["notes"].append(f"allocation history unavailable: {type(exc).__name__}: {exc}")
            out["largest_tensors"] = _largest_cuda_tensors(torch, largest, budget)
    except ProbeTimeout as exc:
        out["notes"].append(f"memory probe timed out: {exc}")
    except Exception as exc:  # noqa: BLE001
        out["notes"].append(f"memory probe failed: {type(exc).__name__}: {exc}")
    return out


def _largest_cuda_tensors(torch: Any, n: int, budget: Budget) -> list[dict[str, Any]]:
    """Scan live objects for CUDA tensors (bounded by the budget); group views of one storage."""
    by_storage: dict[int, dict[str, Any]] = {}
    for obj in gc.get_objects():
        if budget.expired():
            break
        try:
            if isinstance(obj, torch.Tensor) and obj.is_cuda:
                key = obj.untyped_storage().data_ptr()
                size = obj.untyped_storage().nbytes()
                if key not in by_storage or by_storage[key]["bytes"] < size:
                    by_storage[key] = {"shape": list(obj.shape), "dtype": str(obj.dtype).replace("torch.", ""), "bytes": int(size),
                                       "requires_grad": bool(obj.requires_grad), "device": str(obj.device)}
        except Exception:  # noqa: BLE001 - odd proxies in gc
            continue
    return sorted(by_storage.values(), key=lambda t: -t["bytes"])[:n]


def _history_sites(torch: Any, top: int = 8) -> list[dict[str, Any]]:
    """Top allocation sites (innermost user frame of each live block's stack) by bytes."""
    snap = torch.cuda.memory._snapshot()
    sites: dict[str, dict[str, Any]] = defaultdict(lambda: {"bytes": 0, "blocks": 0})
    for seg in snap.get("segments", []):
        for block in seg.get("blocks", []):
            if block.get("state") != "active_allocated":
                continue
            frames = block.get("frames") or []
            site = next((f"{fr['filename'].rsplit('/', 1)[-1]}:{fr['line']} in {fr['name']}" for fr in frames
                         if "site-packages" not in fr.get("filename", "") and "/torch/" not in fr.get("filename", "") and fr.get("filename", "").endswith(".py")), "(no Python frame)")
            sites[site]["bytes"] += int(block.get("size", 0))
            sites[site]["blocks"] += 1
    return [{"site": k, **v} for k, v in sorted(sites.items(), key=lambda kv: -kv[1]["bytes"])[:top]]
