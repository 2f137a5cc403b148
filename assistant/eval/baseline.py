"""The yardstick: a few dozen lines of keyword regexes mapping an error text to a category.

Any engine worth its complexity must beat this on reports it has never seen; `eval score` runs it
as the ``regex`` variant beside the full engine. Patterns are tried in order; first match wins.
"""

from __future__ import annotations

import re

_TABLE: tuple[tuple[str, str], ...] = (
    (r"out of memory|CUDA OOM|OutOfMemoryError", "cuda_oom"),
    (r"DefaultCPUAllocator|MemoryError|Killed process|oom-kill", "cpu_oom"),
    (r"device-side assert|Assertion .* failed", "device_side_assert"),
    (r"illegal memory access", "illegal_memory_access"),
    (r"CUDNN_STATUS|cuDNN error", "cudnn_error"),
    (r"CUBLAS_STATUS|cuBLAS", "cublas_error"),
    (r"NCCL|Watchdog caught collective", "nccl_error"),
    (r"DistributedDataParallel|find_unused_parameters|process group", "ddp_error"),
    (r"Expected all tensors to be on the same device|different from other tensors on", "device_mismatch"),
    (r"Torch not compiled with CUDA|no CUDA GPUs|is_available\(\) is False|NVIDIA driver", "cuda_unavailable"),
    (r"modified by an inplace operation", "inplace_autograd"),
    (r"backward through the graph a second time", "backward_twice"),
    (r"does not require grad and does not have a grad_fn", "no_grad_fn"),
    (r"\bnan\b|\binf\b|non-finite", "nan_inf"),
    (r"GradScaler|unscale|autocast", "amp_error"),
    (r"state_dict|Missing key|Unexpected key", "state_dict_loading"),
    (r"torch\.load|unpickl|weights_only|PytorchStreamReader", "serialization_error"),
    (r"DataLoader worker|collate", "dataloader_error"),
    (r"pickle|spawn|forked subprocess", "multiprocessing_error"),
    (r"torch\._dynamo|inductor|TorchScript|torch\.jit|onnx", "compile_error"),
    (r"size mismatch|shapes cannot be multiplied|must match the size|Expected .*dimension|shape", "shape_mismatch"),
    (r"scalar type|dtype|expected .* but found .*(?:Float|Long|Half|Double)", "dtype_mismatch"),
    (r"index out of range|out of bounds|IndexError", "index_error"),
    (r"ModuleNotFoundError|ImportError|undefined symbol|No such file", "environment_error"),
    (r"Xid|ECC error|fallen off the bus", "hardware_error"),
    (r"TypeError|AttributeError|KeyError|NameError|ValueError", "python_error"),
)
_COMPILED = tuple((re.compile(p, re.I), c) for p, c in _TABLE)


def regex_category(text: str) -> str:
    """The first matching keyword family's category, else ``unknown``."""
    return next((c for p, c in _COMPILED if p.search(text)), "unknown")
