"""Environment probe: Python, torch, CUDA/cuDNN/NCCL, driver, GPUs, relevant variables, packages.

It never raises and never hangs: torch is imported in a child interpreter under a time budget, so
a broken install (missing libraries, an ABI mismatch, a hanging driver) becomes a note in the
report instead of a crash — unlike a report that needs ``import torch`` to succeed. Secrets in
environment variables are redacted before anything is returned.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from importlib import metadata
from typing import Any

from assistant.probes.redact import redact_env, redact_value
from assistant.render.outgoing import shown_line

RELEVANT_ENV_PREFIXES = ("PYTORCH_", "TORCH_", "CUDA_", "NCCL_", "CUBLAS_", "CUDNN_", "OMP_", "MKL_", "TORCHINDUCTOR_", "TRITON_", "HF_", "LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_", "LD_LIBRARY_PATH")
RELATED_PACKAGES = ("torch", "torchvision", "torchaudio", "triton", "numpy", "transformers", "accelerate", "lightning", "pytorch-lightning", "deepspeed", "xformers", "flash-attn", "bitsandbytes", "apex", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu13")

# Runs inside a child interpreter; prints one JSON object. Kept as source text so the child needs
# nothing from this package (the user's environment may not have it installed).
_TORCH_PROBE = r"""
import json, sys
out = {}
try:
    import torch
    out["torch"] = torch.__version__
    out["cuda_build"] = torch.version.cuda
    out["hip_build"] = getattr(torch.version, "hip", None)
    out["debug_build"] = bool(getattr(torch.version, "debug", False))
    try:
        out["cudnn"] = torch.backends.cudnn.version()
    except Exception as e:
        out["cudnn_error"] = repr(e)
    try:
        out["arch_list"] = torch.cuda.get_arch_list()
    except Exception as e:
        out["arch_list_error"] = repr(e)
    try:
        out["cuda_available"] = torch.cuda.is_available()
        if out["cuda_available"]:
            gpus = []
            for i in range(torch.cuda.device_count()):
                p = torch.cuda.get_device_properties(i)
                gpus.append({"index": i, "name": p.name, "memory_bytes": int(p.total_memory), "capability": f"sm_{p.major}{p.minor}", "multiprocessors": p.multi_processor_count})
            out["gpus"] = gpus
            try:
                out["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
            except Exception as e:
                out["nccl_error"] = repr(e)
    except Exception as e:
        out["cuda_error"] = repr(e)
except BaseException as e:
    out["torch_import_error"] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


def _packages() -> dict[str, str]:
    found: dict[str, str] = {}
    for name in RELATED_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        except Exception:  # noqa: BLE001 - a broken dist-info must not break the probe
            continue
    return found


def _driver(timeout: float) -> dict[str, Any]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return {"nvidia_smi": None}
    try:
        res = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total,memory.used", "--format=csv,noheader"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"nvidia_smi_error": f"{type(exc).__name__}: {exc}"}
    if res.returncode != 0:
        return {"nvidia_smi_error": (res.stderr or res.stdout).strip()[:300]}
    rows = [r.split(", ") for r in res.stdout.strip().splitlines() if r.strip()]
    return {"driver": rows[0][1] if rows and len(rows[0]) > 1 else None, "nvidia_smi": [", ".join(r) for r in rows]}


def torch_facts(python: str | None = None, timeout: float = 30.0) -> dict[str, Any]:
    """Import torch in a child interpreter and report what it says (or why it could not)."""
    try:
        res = subprocess.run([python or sys.executable, "-c", _TORCH_PROBE], capture_output=True, text=True, timeout=timeout, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except subprocess.TimeoutExpired:
        return {"torch_probe_error": f"importing torch took longer than {timeout:.0f} s"}
    except OSError as exc:
        return {"torch_probe_error": f"could not start {python or sys.executable}: {exc}"}
    line = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
    try:
        return json.loads(line)
    except ValueError:
        return {"torch_probe_error": (res.stderr.strip().splitlines() or ["no output"])[-1][:300]}


def collect_environment(python: str | None = None, timeout: float = 30.0, torch: dict[str, Any] | None = None) -> dict[str, Any]:
    """The environment report. Never raises; missing facts are explained in ``notes``.

    ``torch``: the torch facts the failing program read about itself (see
    :mod:`assistant.probes.torch_env`); without them a child interpreter imports torch to read them.
    """
    notes: list[str] = []
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "executable": python or sys.executable,
        "platform": platform.platform(),
        "packages": _packages(),
    }
    facts = dict(torch) if torch and torch.get("torch") else torch_facts(python, timeout)
    report.update(facts)
    if "torch_import_error" in facts:
        notes.append(f"torch could not be imported: {facts['torch_import_error']}")
    if "torch_probe_error" in facts:
        notes.append(f"torch probe failed: {facts['torch_probe_error']}")
    report.update(_driver(min(timeout, 10.0)))
    env = {k: v for k, v in os.environ.items() if k.startswith(RELEVANT_ENV_PREFIXES)}
    report["env"] = redact_env(env)
    gpus = report.get("gpus") or []
    arch = report.get("arch_list") or []
    mismatched = [g for g in gpus if arch and g.get("capability") not in arch and not any(a.startswith("compute_") for a in arch)]
    if mismatched:
        notes.append(f"GPU architecture {mismatched[0]['capability']} ({mismatched[0]['name']}) is not among the wheel's architectures {arch}")
    report["cuda"] = report.get("cuda_build")
    report["notes"] = notes
    # Paths, probe errors and variable values can quote credentials (a token in a path, a URL with a password).
    return redact_value(report)


def format_environment(report: dict[str, Any]) -> str:
    """Plain-text rendering for `torchhelp env` (secrets masked, control characters removed)."""
    report = redact_value(report)
    lines = [
        f"Python        {report.get('python')} ({report.get('executable')})",
        f"Platform      {report.get('platform')}",
        f"torch         {report.get('torch') or 'NOT IMPORTABLE'}",
        f"CUDA (build)  {report.get('cuda_build')}",
        f"cuDNN         {report.get('cudnn')}",
        f"NCCL          {report.get('nccl')}",
        f"CUDA usable   {report.get('cuda_available')}",
        f"Driver        {report.get('driver')}",
        f"Arch list     {' '.join(report.get('arch_list') or []) or None}",
    ]
    for g in report.get("gpus") or []:
        lines.append(f"GPU {g['index']}         {g['name']} ({g['memory_bytes'] / 2**30:.1f} GiB, {g['capability']})")
    if report.get("packages"):
        lines.append("Packages      " + ", ".join(f"{k}=={v}" for k, v in sorted(report["packages"].items())))
    for k, v in sorted((report.get("env") or {}).items()):
        lines.append(f"env           {k}={v}")
    for n in report.get("notes") or []:
        lines.append(f"note          {n}")
    # Values come from the environment and child processes: shown as text, never as terminal escapes.
    return "\n".join(shown_line(line) for line in lines)


if __name__ == "__main__":  # pragma: no cover - used by `python -m assistant.probes.env`
    print(json.dumps(collect_environment(), indent=2))
