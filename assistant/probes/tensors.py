"""Tensor, module, optimizer and DataLoader summaries from the frames of a failing traceback.

Summaries describe values without revealing them: shape, dtype, device, autograd state,
contiguity, NaN/Inf counts; min/max only for integer tensors (labels and indices), where the range
is the diagnosis ("labels go up to 10 with 10 classes"). Every probe runs under a time budget and
records what it could not collect instead of raising.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from assistant.probes.budget import Budget, ProbeTimeout, limit

MAX_STATS_NUMEL = 50_000_000  # above this, NaN/Inf counts are skipped (cost)
MAX_FRAMES = 6
MAX_LOCALS_PER_FRAME = 40
MAX_LAYERS = 60
_LIB_MARKERS = ("site-packages", "dist-packages", "/lib/python3")


def _is_user_file(path: str) -> bool:
    return not any(m in path for m in _LIB_MARKERS) and not path.startswith("<frozen")


def tensor_summary(name: str, frame: str, t: Any, stats: bool = True) -> dict[str, Any]:
    """Describe one tensor; value statistics only when cheap and safe."""
    torch = sys.modules["torch"]
    out: dict[str, Any] = {
        "name": name, "frame": frame, "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
        "device": str(t.device), "requires_grad": bool(t.requires_grad), "is_leaf": bool(t.is_leaf),
        "grad_fn": type(t.grad_fn).__name__ if t.grad_fn is not None else None,
    }
    try:
        out["contiguous"] = bool(t.is_contiguous())
    except Exception:  # noqa: BLE001 - sparse/nested tensors have no contiguity
        out["contiguous"] = None
    if not stats or t.numel() == 0 or t.numel() > MAX_STATS_NUMEL or t.is_sparse or t.device.type == "meta":
        return out
    try:
        with torch.no_grad():
            d = t.detach()
            if d.is_floating_point() or d.is_complex():
                out["nan_count"] = int(torch.isnan(d).sum().item())
                out["inf_count"] = int(torch.isinf(d).sum().item())
            elif d.dtype != torch.bool:
                out["min_value"] = int(d.min().item())
                out["max_value"] = int(d.max().item())
    except Exception as exc:  # noqa: BLE001 - e.g. a CUDA context broken by the failure itself
        out["stats_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
    return out


def module_summary(name: str, frame: str, m: Any) -> dict[str, Any]:
    """Parameter devices/dtypes, training mode, and the sizes of Linear/Conv/Embedding layers."""
    devices, dtypes, layers = set(), set(), []
    for p in m.parameters():
        devices.add(str(p.device))
        dtypes.add(str(p.dtype).replace("torch.", ""))
    for sub_name, sub in m.named_modules():
        kind = type(sub).__name__
        info: dict[str, Any] = {"name": sub_name or name, "type": kind}
        for attr in ("in_features", "out_features", "in_channels", "out_channels", "num_embeddings", "embedding_dim", "kernel_size", "num_features", "normalized_shape", "input_size", "hidden_size", "padding_idx"):
            if hasattr(sub, attr):
                v = getattr(sub, attr)
                info[attr] = list(v) if isinstance(v, tuple) else v
        if getattr(sub, "inplace", False) is True:  # nn.ReLU(inplace=True) and friends overwrite their input
            info["inplace"] = True
        if len(info) > 2:
            layers.append(info)
        if len(layers) >= MAX_LAYERS:
            break
    return {"name": name, "frame": frame, "type_name": type(m).__name__, "param_devices": sorted(devices), "param_dtypes": sorted(dtypes),
            "training": bool(getattr(m, "training", False)), "layers": layers}


def object_summary(name: str, frame: str, obj: Any) -> dict[str, Any] | None:
    """Optimizers, GradScalers and DataLoaders: the settings that explain failures."""
    torch = sys.modules["torch"]
    if isinstance(obj, torch.optim.Optimizer):
        return {"kind": "optimizer", "name": name, "frame": frame, "type": type(obj).__name__, "param_groups": len(obj.param_groups),
                "lr": [g.get("lr") for g in obj.param_groups], "params": sum(len(g["params"]) for g in obj.param_groups)}
    if isinstance(obj, torch.utils.data.DataLoader):
        ctx = obj.multiprocessing_context
        return {"kind": "dataloader", "name": name, "frame": frame, "num_workers": obj.num_workers, "batch_size": obj.batch_size,
                "pin_memory": obj.pin_memory, "drop_last": obj.drop_last, "timeout": obj.timeout,
                "start_method": (ctx.get_start_method() if ctx is not None and hasattr(ctx, "get_start_method") else None) or _default_start_method(),
                "dataset": type(obj.dataset).__name__, "dataset_len": _safe_len(obj.dataset)}
    amp = getattr(torch, "amp", None)
    scaler_types = tuple(t for t in (getattr(amp, "GradScaler", None), getattr(getattr(torch.cuda, "amp", None), "GradScaler", None)) if t)
    if scaler_types and isinstance(obj, scaler_types):
        return {"kind": "grad_scaler", "name": name, "frame": frame, "enabled": bool(obj.is_enabled()), "scale": float(obj.get_scale()) if obj.is_enabled() else None}
    return None


def _default_start_method() -> str | None:
    import multiprocessing

    try:
        return multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_context().get_start_method()
    except Exception:  # noqa: BLE001
        return None


def _safe_len(obj: Any) -> int | None:
    try:
        return len(obj)
    except Exception:  # noqa: BLE001
        return None


def _frames(tb: types.TracebackType | None) -> list[types.FrameType]:
    """Frames to inspect: user frames innermost first, plus the innermost library frame."""
    all_frames = []
    while tb is not None:
        all_frames.append(tb.tb_frame)
        tb = tb.tb_next
    user = [f for f in reversed(all_frames) if _is_user_file(f.f_code.co_filename)]
    chosen = user[:MAX_FRAMES]
    if all_frames and all_frames[-1] not in chosen:
        chosen.append(all_frames[-1])
    return chosen


def collect_frame_state(tb: types.TracebackType | None, budget: Budget, stats: bool = True) -> dict[str, Any]:
    """Summaries of tensors, modules and objects in the failing frames, within the budget."""
    out: dict[str, Any] = {"tensors": [], "modules": [], "objects": [], "notes": []}
    torch = sys.modules.get("torch")
    if torch is None:
        out["notes"].append("torch was not imported by the program; no tensor state to probe")
        return out
    seen: set[int] = set()
    for frame in _frames(tb):
        label = frame.f_code.co_name
        # Locals of torch's own frames (t_outputs, grad_tensors) are torch's names: kept for the rules, never shown as the user's.
        library = not _is_user_file(frame.f_code.co_filename)
        first_tensor = len(out["tensors"])
        if budget.expired():
            out["notes"].append("tensor probe stopped: time budget spent")
            break
        try:
            with limit(budget.left()):
                items = list(frame.f_locals.items())[:MAX_LOCALS_PER_FRAME]
                for name, value in items:
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                    try:
                        if isinstance(value, torch.Tensor):
                            out["tensors"].append(tensor_summary(name, label, value, stats))
                        elif isinstance(value, torch.nn.Module):
                            out["modules"].append(module_summary(name, label, value))
                        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value[:4]):
                            for k, v in enumerate(value[:4]):
                                out["tensors"].append(tensor_summary(f"{name}[{k}]", label, v, stats))
                        elif isinstance(value, dict) and value and all(isinstance(v, torch.Tensor) for v in list(value.values())[:4]):
                            for k, v in list(value.items())[:6]:
                                out["tensors"].append(tensor_summary(f"{name}[{k!r}]", label, v, stats))
                        else:
                            summary = object_summary(name, label, value)
                            if summary:
                                out["objects"].append(summary)
                    except ProbeTimeout:
                        raise
                    except Exception as exc:  # noqa: BLE001 - one odd object must not end the probe
                        out["notes"].append(f"could not inspect `{name}` in {label}: {type(exc).__name__}")
        except ProbeTimeout as exc:
            out["notes"].append(f"tensor probe timed out in frame {label}: {exc}")
            break
        finally:
            if library:
                for t in out["tensors"][first_tensor:]:
                    t["library"] = True
    return out
