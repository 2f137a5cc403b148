"""The torch facts of the environment report, read inside the dying program itself.

The program has already imported torch (and, on a GPU, set up CUDA), so reading versions and device
properties there costs milliseconds, where a fresh interpreter that imports torch and starts CUDA again
costs seconds after every failure. Nothing here imports torch or starts CUDA: a program that did not
use them leaves the facts to the separate probe (:func:`assistant.probes.env.torch_facts`).
"""

from __future__ import annotations

import sys
from typing import Any


def torch_env_in_process() -> dict[str, Any] | None:
    """The facts :func:`assistant.probes.env.torch_facts` reports, or None when they cannot all be read here
    (torch not imported, or a usable GPU whose CUDA was never started by the program). Never raises."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "cuda"):
        return None
    try:
        out: dict[str, Any] = {
            "torch": str(torch.__version__), "cuda_build": torch.version.cuda, "hip_build": getattr(torch.version, "hip", None),
            "debug_build": bool(getattr(torch.version, "debug", False)),
        }
        out["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        if not torch.cuda.is_initialized():
            # Reading device properties would start CUDA in a dying process: leave it to the separate probe,
            # unless there is no GPU to read.
            if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
                return {**out, "arch_list": [], "cuda_available": False}
            return None
        out["arch_list"] = torch.cuda.get_arch_list()
        out["cuda_available"] = True
        gpus = []
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            gpus.append({"index": i, "name": p.name, "memory_bytes": int(p.total_memory), "capability": f"sm_{p.major}{p.minor}",
                         "multiprocessors": p.multi_processor_count})
        out["gpus"] = gpus
        try:
            out["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception as exc:  # noqa: BLE001 - a build without NCCL
            out["nccl_error"] = repr(exc)
        return out
    except Exception:  # noqa: BLE001 - a broken context or an odd build: the separate probe will say what is wrong
        return None
