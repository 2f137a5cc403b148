"""Tensors on different devices, and CUDA that is not there at all."""

from __future__ import annotations

import re

from assistant.parse.messages import tensor_type_parts
from assistant.rules.registry import Example, rule
from assistant.rules.base import with_location as _loc, Context, error_fact, fix, hit
from assistant.types import Fact, RuleHit

_SAME_DEVICE = re.compile(
    r"Expected all tensors to be on the same device, but (?:found at least two devices, (?P<a>[\w:]+) and (?P<b>[\w:]+)"
    r"|got (?P<arg>\w+) is on (?P<c>[\w:]+), different from other tensors on (?P<d>[\w:]+))"
)
_TYPE_PAIR = re.compile(r"Input type \((?P<inp>torch\.[\w.]+|\w+)\) and (?P<what>weight|bias) type \((?P<w>torch\.[\w.]+|\w+)\) should be the same")
_OLD_DEVICE = re.compile(
    r"(?:Expected object of device type (?P<want>\w+) but got )?device type (?P<got>\w+) for argument #(?P<n>\d+) '(?P<arg>\w+)'"
    r"|Expected object of backend (?P<want2>\w+) but got backend (?P<got2>\w+) for argument #(?P<n2>\d+) '(?P<arg2>\w+)'"
)



def _probe_devices(ctx: Context) -> list[Fact]:
    """Facts from live probes: which module parameters and which tensors live where."""
    out: list[Fact] = []
    for mod in ctx.evidence.modules:
        if mod.param_devices:
            out.append(Fact("probe", f"module `{mod.name}` ({mod.type_name}) parameters on {', '.join(mod.param_devices)}"))
    for t in ctx.evidence.tensors:
        if t.frame and ctx.user_frame and t.frame == (ctx.user_frame.function or ""):
            out.append(Fact("probe", f"tensor `{t.name}` {tuple(t.shape)} on {t.device}"))
    return out[:6]


@rule(
    'devices.device_mismatch',
    category='device_mismatch',
    docs=("device-mismatch", "cuda-unavailable"),
    priority=240,
    outcomes=('devices.mismatch', 'devices.meta', 'devices.cuda_numpy'),
    examples=(),
)
def device_mismatch(ctx: Context) -> RuleHit | None:
    """Operands on different devices (cpu vs cuda, or two GPUs), in every message generation."""
    a = b = arg = None
    m = _SAME_DEVICE.search(ctx.text)
    if m:
        a, b, arg = m.group("a") or m.group("c"), m.group("b") or m.group("d"), m.group("arg")
    else:
        t = _TYPE_PAIR.search(ctx.text)
        if t:
            (_, dev_i), (_, dev_w) = tensor_type_parts(t.group("inp")), tensor_type_parts(t.group("w"))
            if dev_i == dev_w:
                return None  # same device, different dtype: the dtype rule explains it
            a, b, arg = dev_i, dev_w, "input"
        else:
            o = _OLD_DEVICE.search(ctx.text)
            if o:
                a = (o.group("got") or o.group("got2") or "").lower()
                b = (o.group("want") or o.group("want2") or ("cuda" if a == "cpu" else "cpu")).lower()
                arg = o.group("arg") or o.group("arg2")
            else:
                o2 = ctx.search(r"Tensor on device (\S+) is not on the expected device (\S+?)!")
                o3 = ctx.search(r"Expected tensor to have (\w+) DeviceType, but got tensor with (\w+) DeviceType")
                o4 = ctx.search(r"indices should be either on (\w+) or on the same device as the indexed tensor \((\w+)\)")
                o5 = ctx.search(r"module must have its parameters and buffers on device (\S+) \(device_ids\[0\]\) but found one of them on device: (\S+)")
                o6 = ctx.search(r"Expected a '(\w+)' device type for generator but found '(\w+)'")
                if o2:
                    a, b = o2.group(1), o2.group(2)
                elif o3:
                    a, b = o3.group(2).lower(), o3.group(1).lower()
                elif o4:
                    a, b, arg = "the index", o4.group(2), "indices"
                elif o5:
                    a, b, arg = o5.group(2), o5.group(1), "module"
                elif o6:
                    a, b, arg = o6.group(2), o6.group(1), "generator"
                else:
                    return _cuda_to_numpy(ctx)
    name, kind = ctx.layer
    found = [error_fact(ctx), Fact("device", f"operands on {a} and {b}" + (f" (argument `{arg}` is on {a})" if arg else ""))]
    found += _probe_devices(ctx)
    two_gpus = bool(a and b and a.startswith("cuda") and b.startswith("cuda") and a != b)
    if "meta" in (a or "", b or ""):
        loading = any("load_state_dict" in (f.function or "") or "load_state_dict" in (f.source or "") for f in ctx.failure.frames)
        cause = ("A tensor on the `meta` device (shape only, no data) meets real tensors. Models built under torch.device('meta') (or with "
                 "init_empty_weights / low_cpu_mem_usage) have no storage" + (": load_state_dict tries to copy the checkpoint into those empty parameters." if loading else ", so they must be materialised before use."))
        fixes = [
            fix("Load with assign=True so the checkpoint tensors replace the meta parameters", "", "model.load_state_dict(state_dict, assign=True)", "device-mismatch"),
            fix("Or materialise the model first, then load", "", "model = model.to_empty(device='cpu')\nmodel.load_state_dict(state_dict)", "device-mismatch"),
        ]
        return hit("devices.meta", "device_mismatch", "Meta-device tensors used as real tensors", cause, fixes, ("device-mismatch",), _loc(ctx, found), 0.93)
    docs = ("device-mismatch", "cuda-unavailable")
    if two_gpus:
        cause = (f"One operation mixes tensors on {a} and {b}. PyTorch never copies between GPUs implicitly. Typical sources: a model "
                 "moved with .cuda() while the current device was different, tensors created with a hard-coded 'cuda:0' in a process "
                 "meant for another GPU, or parts of a model placed on different GPUs without moving activations between them.")
        fixes = [
            fix("Use one device object per process", "Pick the device once (e.g. from LOCAL_RANK), call torch.cuda.set_device, and pass it everywhere instead of literals.", "device = torch.device('cuda', local_rank)\ntorch.cuda.set_device(device)\nmodel.to(device); x = x.to(device)", "device-mismatch"),
            fix("For model parallelism, move activations between stages", "", "h = self.stage1(x.to('cuda:0'))\nout = self.stage2(h.to('cuda:1'))", "device-mismatch"),
        ]
        title = f"Tensors on two different GPUs ({a}, {b})"
    elif arg == "generator":
        cause = f"A random generator on {a} is used where a {b} generator is required (typically torch.set_default_device('cuda') makes DataLoader's sampler create a CUDA generator)."
        fixes = [fix("Give the sampler/DataLoader a CPU generator", "", "DataLoader(ds, shuffle=True, generator=torch.Generator(device='cpu'))", "device-mismatch")]
        title = "Generator on the wrong device"
    else:
        what = f"`{name}`" if name else (f"the {kind} layer" if kind else "the operation")
        cpu_side = a if a and a.startswith("cpu") else b
        gpu_side = b if cpu_side == a else a
        cause = (f"{what[0].upper() + what[1:]} received tensors on {a} and {b}; every operand of one operation must be on the same device."
                 + (f" The `{arg}` argument is the one on {a}." if arg and arg not in ("input", "module") else ""))
        if arg == "module":
            cause = f"DataParallel expects the model on {b} (device_ids[0]) before wrapping, but some parameters or buffers are still on {a}."
        elif kind == "Embedding" and arg == "index":
            cause += (f" The ids passed to {what} are on {a} while its weight is on {b}: token ids that were not moved with the batch, "
                      "or position ids built inside forward with torch.arange(T) without device=.")
        elif kind in ("Linear", "Conv", "Embedding", "RNN/LSTM/GRU", "BatchNorm", "LayerNorm") or arg == "input":
            cause += (f" Most often the model was moved to {gpu_side} but the batch was not (or the reverse): DataLoader batches always start on the CPU.")
        elif kind == "loss" or re.search(r"loss|criterion", " ".join(f.source or "" for f in ctx.failure.user_frames), re.I):
            cause += " At a loss call this usually means the targets/labels were not moved to the device like the predictions were."
        else:
            cause += (" A tensor created inside forward() or the training loop without a device (torch.zeros(...), torch.arange(...)) "
                      "lands on the CPU; so does a plain attribute that is not a registered buffer.")
        src = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
        created = re.search(r"torch\.(arange|zeros|ones|full|empty|randn|rand|randint|tensor|eye|linspace)\((?![^)]*device)", src)
        if created:
            cause += f" On the failing line `{src}`, torch.{created.group(1)}(...) has no device= argument, so it creates a CPU tensor."
            fixes.insert(0, fix(f"Create it on the input's device: torch.{created.group(1)}(..., device=x.device)", "", f"pos = torch.{created.group(1)}(T, device=x.device)" if created.group(1) == "arange" else f"t = torch.{created.group(1)}(..., device=x.device)", "device-mismatch"))
        fixes = [
            fix("Move the model and every batch to one device", "Define `device` once; move the model after building it and each batch (inputs and targets) inside the loop.", "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\nmodel = model.to(device)\nfor x, y in loader:\n    x, y = x.to(device), y.to(device)", "device-mismatch"),
            fix("Create new tensors on the input's device", "Inside forward, derive the device from an input or a parameter.", "mask = torch.ones(x.shape[0], device=x.device)", "device-mismatch"),
            fix("Register constant tensors as buffers", "model.to(device) moves buffers, but not plain tensor attributes.", "self.register_buffer('scale', torch.tensor(0.5))", "device-mismatch"),
        ]
        if arg == "module":
            fixes.insert(0, fix("Move the model before wrapping", "", "model = model.to('cuda:0')\nmodel = nn.DataParallel(model)", "device-mismatch"))
        title = f"Tensors on different devices ({a} and {b})"
    return hit("devices.mismatch", "device_mismatch", title, cause, fixes, docs, _loc(ctx, found), 0.95)


def _cuda_to_numpy(ctx: Context) -> RuleHit | None:
    m = ctx.search(r"can't convert (\S+) device type tensor to numpy")
    if not m:
        return None
    cause = f"A tensor on {m.group(1)} was passed to NumPy (.numpy(), np.array(t), matplotlib, sklearn); NumPy only reads host memory."
    fixes = [fix("Copy to the CPU first (and detach if it requires grad)", "", "arr = t.detach().cpu().numpy()", "detach-numpy")]
    return hit("devices.cuda_numpy", "device_mismatch", "GPU tensor passed to NumPy", cause, fixes, ("detach-numpy", "device-mismatch"), _loc(ctx, [error_fact(ctx)]), 0.92)


@rule(
    'devices.cuda_unavailable',
    category='cuda_unavailable',
    docs=("cuda-unavailable", "cuda-arch-mismatch"),
    priority=130,
    outcomes=('devices.cuda_unavailable',),
    examples=(),
)
def cuda_unavailable(ctx: Context) -> RuleHit | None:
    """CUDA requested but not usable: CPU-only build, no driver, old driver, bad ordinal, CUDA checkpoint on CPU."""
    docs = ("cuda-unavailable", "cuda-arch-mismatch")
    cases: list[tuple[str, str, str, list]] = [
        (r"Torch not compiled with CUDA enabled", "PyTorch build without CUDA",
         "The installed PyTorch is a CPU-only build, so any .cuda() / device='cuda' call fails. This happens when pip picked the CPU wheel (e.g. from the default index on some platforms, or a requirements file that pins a +cpu build) or when the script runs in a different environment than the one with the CUDA build.",
         [fix("Install a CUDA build of PyTorch", "Pick the wheel index for your CUDA driver (see pytorch.org's install selector), then check torch.version.cuda is not None.", "pip install torch --index-url https://download.pytorch.org/whl/cu126\npython -c \"import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())\"", "cuda-unavailable"),
          fix("Or make the code device-agnostic", "Fall back to the CPU when CUDA is missing.", "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')", "cuda-unavailable")]),
        (r"Attempting to deserialize object on a CUDA device but torch\.cuda\.is_available\(\) is False", "CUDA checkpoint loaded without a GPU",
         "The checkpoint was saved from GPU tensors, and torch.load tries to restore them onto a GPU this machine does not have (or cannot use).",
         [fix("Load onto the CPU with map_location", "", "state = torch.load(path, map_location='cpu')\nmodel.load_state_dict(state)", "cuda-unavailable")]),
        (r"Found no NVIDIA driver on your system|no CUDA-capable device is detected|No CUDA GPUs are available|CUDA driver initialization failed", "No usable GPU/driver",
         "The CUDA build of PyTorch is installed, but no GPU is visible: no NVIDIA driver, a container started without GPU access, or CUDA_VISIBLE_DEVICES set to an empty/invalid list.",
         [fix("Check the driver and visibility", "`nvidia-smi` must list the GPU inside the same environment (container: run with --gpus all).", "nvidia-smi\necho $CUDA_VISIBLE_DEVICES\npython -c \"import torch; print(torch.cuda.device_count())\"", "cuda-unavailable")]),
        (r"driver version is insufficient for CUDA runtime version|NVIDIA driver on your system is too old", "NVIDIA driver too old",
         "The PyTorch wheel was built for a newer CUDA runtime than the installed NVIDIA driver supports.",
         [fix("Update the driver or install a wheel for an older CUDA", "Compare `nvidia-smi` (driver's max CUDA version) with torch.version.cuda.", "pip install torch --index-url https://download.pytorch.org/whl/cu118", "cuda-unavailable")]),
        (r"invalid device ordinal", "GPU index does not exist",
         "The code asks for a GPU index that is not visible to this process (e.g. cuda:1 on a single-GPU machine, or CUDA_VISIBLE_DEVICES renumbers the visible GPUs from 0).",
         [fix("Use an index below torch.cuda.device_count()", "With CUDA_VISIBLE_DEVICES=3 the only visible GPU is cuda:0.", "torch.cuda.set_device(local_rank % torch.cuda.device_count())", "cuda-unavailable")]),
        (r"NVML: ?Driver/library version mismatch|Failed to initialize NVML", "NVIDIA driver/library mismatch",
         "The kernel driver and the user-space NVIDIA libraries have different versions, typically after a driver update without a reboot.",
         [fix("Reboot (or reload the nvidia kernel modules)", "", None, "cuda-unavailable")]),
        (r"CUDA-capable device\(s\) is/are busy or unavailable|all CUDA-capable devices are busy", "GPU busy or in exclusive mode",
         "The GPU is in exclusive-process compute mode and another process holds it, or it is otherwise unavailable.",
         [fix("Find the process holding the GPU", "", "nvidia-smi", "cuda-unavailable")]),
        (r"CUDA unknown error - this may be due to an incorrectly set up environment", "CUDA initialisation failed",
         "CUDA could not initialise: often a driver/container mismatch, a GPU in a bad state after a crash, or suspend/resume on laptops.",
         [fix("Check the environment, then reset", "Run nvidia-smi; if it errors, restart the container/machine.", "nvidia-smi", "cuda-unavailable")]),
    ]
    for pattern, title, cause, fixes in cases:
        if ctx.search(pattern):
            return hit("devices.cuda_unavailable", "cuda_unavailable", title, cause, fixes, docs, _loc(ctx, [error_fact(ctx)]), 0.93)
    return None
