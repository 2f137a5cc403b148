"""Switches an experiment turns on inside the re-run program (read by the crash hook at start-up).

``TORCHHELP_SWITCHES`` names them, comma-separated. Each changes one thing in the user's process
without touching the user's files:

- ``anomaly``: autograd anomaly detection (the forward traceback of the op whose backward failed,
  and a stop at the first NaN produced in backward);
- ``nonfinite``: a forward hook on every module that stops the run at the first module whose output
  holds NaN or Inf while its inputs did not (or at the first module fed non-finite inputs), naming it
  and the forward call it happened in;
- ``guard_index``: index and label arguments of the ops that assert on the GPU (embedding,
  cross-entropy/NLL, one_hot, gather/scatter, index_select, indexing and index assignment with integer
  tensors, multinomial) are checked on the host first; the first offending value is reported with its
  position and the valid range;
- ``dataloader_main``: every DataLoader loads in the main process (``num_workers=0``), so a worker's
  error is raised where it happens;
- ``cudnn_off``: cuDNN disabled;
- ``expandable_segments``: the caching allocator told to use expandable segments through its own API,
  so the setting holds even for a program that clears ``PYTORCH_CUDA_ALLOC_CONF`` before it starts CUDA;
- ``flight_dump``: at an uncaught exception, each rank writes its process group's flight-recorder buffer
  to the run folder (NCCL dumps by itself when its watchdog fires; a rank that fails by raising, as Gloo's
  timeouts do, would otherwise leave nothing).

An error raised by a switch is a RuntimeError whose message starts with :data:`MARK` and names the
switch, so the runner can tell it from the program's own failure (a plain built-in type: the program's
own ``except`` clauses see what they would see for any runtime error). Nothing here runs unless a
switch is named.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

MARK = "torchhelp experiment"
ENV = "TORCHHELP_SWITCHES"
KNOWN = ("anomaly", "nonfinite", "guard_index", "dataloader_main", "cudnn_off", "expandable_segments", "flight_dump")


def requested() -> list[str]:
    """The switches named in the environment (unknown names are ignored)."""
    return [s for s in (p.strip() for p in os.environ.get(ENV, "").split(",")) if s in KNOWN]


def apply_switches(names: list[str]) -> None:
    """Turn the named switches on; each failure to do so is one line on stderr, never the program's end."""
    if not names:
        return
    import torch  # the program is about to import it anyway; the switches need it now

    for name in names:
        try:
            _APPLY[name](torch)
        except Exception as err:  # noqa: BLE001 - an experiment must not break the program in a new way
            sys.stderr.write(f"torchhelp: experiment switch {name} not applied ({type(err).__name__}: {err})\n")


VALUES_FILE = "switch-values-{pid}.json"  # in the run folder: what a switch found, as values (the runner reads no prose)


def _stop(switch: str, text: str, **values: Any) -> RuntimeError:
    """The error a switch raises when it found what it looks for; its values go to the run folder first."""
    run_dir = os.environ.get("TORCHHELP_RUN_DIR")
    if run_dir and values:
        import json

        try:
            path = os.path.join(run_dir, VALUES_FILE.format(pid=os.getpid()))
            with open(path + ".tmp", "w", encoding="utf-8") as fh:
                json.dump({"switch": switch, **values}, fh, default=str)
            os.replace(path + ".tmp", path)
        except OSError:
            pass  # the message still says it
    return RuntimeError(f"{MARK} [{switch}]: {text}")


# --- anomaly -------------------------------------------------------------------------------------


def _anomaly(torch: Any) -> None:
    torch.autograd.set_detect_anomaly(True, check_nan=True)


# --- nonfinite -----------------------------------------------------------------------------------


def _nonfinite(torch: Any) -> None:
    import weakref

    names: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    calls: dict[str, Any] = {"root": None, "count": 0}  # the outermost module (a weak reference) and its forward calls

    def tensors(value: Any):
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            for v in value:
                yield from tensors(v)
        elif isinstance(value, dict):
            for v in value.values():
                yield from tensors(v)

    def bad(value: Any) -> bool:
        for t in tensors(value):
            if (t.is_floating_point() or t.is_complex()) and t.numel() and not bool(torch.isfinite(t.detach()).all()):
                return True
        return False

    def name_of(module: Any) -> str:
        return names.get(module) or type(module).__name__

    def pre_hook(module: Any, args: Any) -> None:
        if module not in names:
            # The outermost module is entered first: its walk names every submodule by its attribute path.
            root = type(module).__name__
            for sub_name, sub in module.named_modules():
                names.setdefault(sub, f"{root}.{sub_name}" if sub_name else root)
            if calls["root"] is None:
                calls["root"] = weakref.ref(module)
        root_ref = calls["root"]
        if root_ref is not None and root_ref() is module:
            calls["count"] += 1
        if bad(args) and not any(True for _ in module.children()):
            raise _stop("nonfinite", f"the input of {name_of(module)} ({type(module).__name__}) already holds NaN or Inf "
                                     f"at forward call {calls['count']} of the outermost module: the values come from the data or from before the model",
                        module=name_of(module), type=type(module).__name__, where="input", call=calls["count"])

    def hook(module: Any, args: Any, output: Any) -> None:
        if bad(output) and not bad(args):
            raise _stop("nonfinite", f"the first NaN or Inf comes out of {name_of(module)} ({type(module).__name__}) "
                                     f"at forward call {calls['count']} of the outermost module, from finite inputs",
                        module=name_of(module), type=type(module).__name__, where="output", call=calls["count"])

    torch.nn.modules.module.register_module_forward_pre_hook(pre_hook)
    torch.nn.modules.module.register_module_forward_hook(hook)


# --- guard_index ---------------------------------------------------------------------------------


def _first_outside(torch: Any, index: Any, low: int, high: int, skip: int | None = None) -> tuple[int, int] | None:
    """(position, value) of the first entry of ``index`` outside [low, high), ignoring ``skip``; None when all fit."""
    flat = index.detach().reshape(-1)
    if flat.numel() == 0 or flat.is_floating_point():
        return None
    outside = (flat < low) | (flat >= high)
    if skip is not None:
        outside &= flat != skip
    if not bool(outside.any()):
        return None
    position = int(outside.nonzero()[0].item())
    return position, int(flat[position].item())


def _guard(torch: Any, switch_op: str, index: Any, low: int, high: int, what: str, skip: int | None = None) -> None:
    if not isinstance(index, torch.Tensor):
        return
    found = _first_outside(torch, index, low, high, skip)
    if found is not None:
        position, value = found
        shape = list(index.shape)
        raise _stop("guard_index", f"{switch_op}: {what} holds {value} at flat position {position} (shape {shape}); "
                                   f"valid values are {low} to {high - 1}" + (f" (or {skip}, ignored)" if skip is not None else ""),
                    op=switch_op, value=value, position=position, shape=shape, low=low, high=high, ignored=skip)


def _wrap(owner: Any, name: str, check) -> None:
    """Replace ``owner.name`` by a version that runs ``check`` on the arguments first.

    Only a switch's own stop escapes the check: any other error in it (an argument form it did not
    expect) skips the check, so the op then behaves exactly as it would have.
    """
    original = getattr(owner, name, None)
    if original is None or getattr(original, "_torchhelp_guard", False):
        return

    @functools.wraps(original)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            check(*args, **kwargs)
        except RuntimeError as err:
            if str(err).startswith(MARK):
                raise
        except Exception:  # noqa: BLE001, S110 - the check's own trouble must not change the program's behaviour
            pass
        return original(*args, **kwargs)

    guarded._torchhelp_guard = True  # type: ignore[attr-defined]
    setattr(owner, name, guarded)


def _indexing_check(torch: Any, op: str):
    """A check for ``tensor[index]`` and ``tensor[index] = value`` with integer tensors among the indices."""

    def check(self: Any, key: Any, *rest: Any) -> None:
        parts = key if isinstance(key, tuple) else (key,)
        if not any(isinstance(p, torch.Tensor) for p in parts) or any(p is Ellipsis for p in parts):
            return  # nothing to check, or a layout this reader does not place on dimensions
        dim = 0
        for part in parts:
            if part is None:
                continue
            if isinstance(part, torch.Tensor) and part.dtype == torch.bool:
                dim += part.dim()
                continue
            if isinstance(part, torch.Tensor) and not part.is_floating_point():
                size = int(self.shape[dim])
                _guard(torch, op, part, -size, size, f"the index for dimension {dim} (size {size})")
            dim += 1

    return check


def _guard_index(torch: Any) -> None:
    F = torch.nn.functional

    def classes(logits: Any) -> int | None:
        if not isinstance(logits, torch.Tensor) or logits.dim() == 0:
            return None
        return int(logits.shape[1] if logits.dim() > 1 else logits.shape[0])

    def loss_check(op: str):
        def check(input: Any, target: Any, *args: Any, ignore_index: int = -100, **kwargs: Any) -> None:
            n = classes(input)
            if n is not None and isinstance(target, torch.Tensor) and not target.is_floating_point():
                _guard(torch, op, target, 0, n, "the target (class labels)", skip=ignore_index)
        return check

    def embedding_check(input: Any, weight: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(weight, torch.Tensor) and weight.dim() >= 1:
            _guard(torch, "embedding", input, 0, int(weight.shape[0]), "the token/ids input")

    def one_hot_check(tensor: Any, num_classes: int = -1) -> None:
        if num_classes is not None and num_classes > 0:
            _guard(torch, "one_hot", tensor, 0, num_classes, "the class indices")
        elif isinstance(tensor, torch.Tensor) and tensor.numel():
            _guard(torch, "one_hot", tensor, 0, 1 << 62, "the class indices")

    def dim_index_check(op: str):
        def check(input: Any, dim: int, index: Any, *args: Any, **kwargs: Any) -> None:
            if isinstance(input, torch.Tensor) and input.dim():
                size = int(input.shape[dim])
                _guard(torch, op, index, 0, size, f"the index along dim {dim}")
        return check

    def multinomial_check(input: Any, *args: Any, **kwargs: Any) -> None:
        if not isinstance(input, torch.Tensor) or not input.is_floating_point():
            return
        probs = input.detach()
        if not bool(torch.isfinite(probs).all()):
            raise _stop("guard_index", "multinomial: the probabilities hold NaN or Inf")
        if bool((probs < 0).any()):
            raise _stop("guard_index", f"multinomial: the probabilities hold a negative value ({float(probs.min()):.4g})")
        rows = probs.reshape(-1, probs.shape[-1]).sum(-1) if probs.dim() else probs.reshape(1)
        if bool((rows <= 0).any()):
            raise _stop("guard_index", "multinomial: a row of probabilities sums to zero")

    _wrap(F, "cross_entropy", loss_check("cross_entropy"))
    _wrap(F, "nll_loss", loss_check("nll_loss"))
    _wrap(F, "embedding", embedding_check)
    _wrap(F, "one_hot", one_hot_check)
    for op in ("gather", "scatter", "scatter_add", "index_select"):
        _wrap(torch, op, dim_index_check(op))
        _wrap(torch.Tensor, op, dim_index_check(op))
    _wrap(torch, "multinomial", multinomial_check)
    _wrap(torch.Tensor, "multinomial", multinomial_check)
    _wrap(torch.Tensor, "__getitem__", _indexing_check(torch, "indexing"))
    _wrap(torch.Tensor, "__setitem__", _indexing_check(torch, "index assignment"))


# --- dataloader_main ------------------------------------------------------------------------------


def _dataloader_main(torch: Any) -> None:
    import torch.utils.data as data

    loader = data.DataLoader
    original = loader.__init__
    if getattr(original, "_torchhelp_guard", False):
        return

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        # num_workers is the 6th positional parameter (dataset, batch_size, shuffle, sampler, batch_sampler, num_workers).
        if len(args) > 5:
            args = (*args[:5], 0, *args[6:])
        kwargs["num_workers"] = 0 if len(args) <= 5 else kwargs.get("num_workers", 0)
        if len(args) > 5:
            kwargs.pop("num_workers", None)
        # Options that only make sense with workers are refused with num_workers=0.
        for option in ("prefetch_factor", "multiprocessing_context"):
            kwargs.pop(option, None)
        kwargs["persistent_workers"] = False
        kwargs["timeout"] = 0
        original(self, *args, **kwargs)

    init._torchhelp_guard = True  # type: ignore[attr-defined]
    loader.__init__ = init  # type: ignore[method-assign]


def _cudnn_off(torch: Any) -> None:
    torch.backends.cudnn.enabled = False


def _expandable_segments(torch: Any) -> None:
    torch.cuda.memory._set_allocator_settings("expandable_segments:True")


# --- flight_dump -----------------------------------------------------------------------------------

def _flight_dump(torch: Any) -> None:
    run_dir = os.environ.get("TORCHHELP_RUN_DIR")
    if not run_dir:
        return
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        _write_flight_dump(torch, run_dir)
        previous(exc_type, exc, tb)

    sys.excepthook = hook


def _write_flight_dump(torch: Any, run_dir: str) -> None:
    """This rank's flight-recorder buffer as NCCL would dump it, unless a dump of this rank is already there."""
    try:
        dist = torch.distributed
        if not (dist.is_available() and dist.is_initialized()):
            return
        from assistant.investigate.flight import DUMP_PREFIX  # the name NCCL's own dump on timeout uses

        path = os.path.join(run_dir, f"{DUMP_PREFIX}{dist.get_rank()}")
        if os.path.exists(path):
            return
        c10d = torch._C._distributed_c10d
        dump = getattr(c10d, "_dump_nccl_trace", None) if dist.get_backend() == "nccl" else None
        data = (dump or c10d._dump_fr_trace)(True, False, False)  # collectives, no stack traces, not only active ones
        with open(path + ".tmp", "wb") as fh:
            fh.write(data)
        os.replace(path + ".tmp", path)
    except Exception as err:  # noqa: BLE001 - the program's own error must still be shown
        sys.stderr.write(f"torchhelp: no flight-recorder dump ({type(err).__name__}: {err})\n")


_APPLY = {"anomaly": _anomaly, "nonfinite": _nonfinite, "guard_index": _guard_index, "dataloader_main": _dataloader_main, "cudnn_off": _cudnn_off,
          "expandable_segments": _expandable_segments, "flight_dump": _flight_dump}
