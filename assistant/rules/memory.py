"""Out-of-memory failures: CUDA (every message generation) and host RAM."""

from __future__ import annotations

import re

from assistant.parse.messages import fmt_bytes, parse_bytes
from assistant.rules.registry import Example, rule
from assistant.rules.base import Context, error_fact, fix, hit, location_fact
from assistant.types import Fact, Facts, RuleHit

_CUDA_OOM = re.compile(
    r"CUDA out of memory|OutOfMemoryError|cuda runtime error \(2\) ?: ?out of memory|CUDA error: out of memory"
    r"|HIP out of memory|MPS backend out of memory|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation",
    re.IGNORECASE,
)
_DOCS = ("cuda-oom", "cuda-oom-fragmentation", "memory-growth-training-loop", "memory-profiling")


def _size_after(pattern: str, text: str) -> int | None:
    m = re.search(pattern, text, re.IGNORECASE)
    return parse_bytes(m.group(1)) if m else None


def _oom_numbers(text: str) -> dict[str, int | None]:
    """Read every number the allocator reports, in the 2.x wording and the 1.x parenthesised one."""
    n: dict[str, int | None] = {}
    n["tried"] = _size_after(r"Tried to allocate ([\d.]+ ?\w+)", text)
    n["capacity"] = _size_after(r"total capacity of ([\d.]+ ?\w+)", text) or _size_after(r"([\d.]+ ?\w+) total capacity", text)
    n["free"] = _size_after(r"of which ([\d.]+ ?\w+) is free", text) or _size_after(r"([\d.]+ ?\w+) free\b", text)
    n["this_process"] = _size_after(r"this process has ([\d.]+ ?\w+) memory in use", text)
    n["allocated"] = _size_after(r"([\d.]+ ?\w+) is allocated by PyTorch", text) or _size_after(r"([\d.]+ ?\w+) already allocated", text)
    n["unallocated"] = _size_after(r"([\d.]+ ?\w+) is reserved by PyTorch but unallocated", text)
    reserved_total = _size_after(r"([\d.]+ ?\w+) reserved in total by PyTorch", text)
    if n["unallocated"] is None and reserved_total is not None and n["allocated"] is not None:
        n["unallocated"] = max(0, reserved_total - n["allocated"])
    n["reserved"] = reserved_total
    gpu = re.search(r"GPU (\d+)", text)
    n["gpu"] = int(gpu.group(1)) if gpu else None
    others = 0
    own = n["this_process"]
    for m in re.finditer(r"Process (\d+) has ([\d.]+ ?\w+) memory in use", text):
        size = parse_bytes(m.group(2)) or 0
        if own is None or abs(size - own) > (1 << 20):
            others += size
    n["others"] = others or None
    return n


@rule(
    'memory.cuda_oom',
    category='cuda_oom',
    docs=_DOCS,
    priority=200,
    outcomes=('memory.cuda_oom',),
    examples=(),
)
def cuda_oom(ctx: Context) -> RuleHit | None:
    """CUDA out of memory, with advice ordered by what the allocator's numbers show."""
    if not ctx.search(_CUDA_OOM.pattern, re.IGNORECASE) or ctx.search(r"DefaultCPUAllocator"):
        return None
    if re.search(r"CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS", ctx.message):
        return None  # shown as a cuBLAS / cuDNN error; those rules explain the OOM behind it
    num = _oom_numbers(ctx.text)
    tried, cap, free, alloc, unalloc, others = (num[k] for k in ("tried", "capacity", "free", "allocated", "unallocated", "others"))
    gpu = f"GPU {num['gpu']}" if num["gpu"] is not None else "the GPU"
    in_backward = any("backward" in (fr.function or "") or ".backward(" in (fr.source or "") for fr in ctx.failure.frames)
    in_eval = any(re.search(r"\b(eval|valid|predict|infer|generate|test)", (fr.function or "") + " " + (fr.file or ""), re.I) for fr in ctx.failure.user_frames)
    found = [error_fact(ctx)]
    parts: list[str] = []
    if tried is not None:
        parts.append(f"PyTorch asked for {fmt_bytes(tried)} more on {gpu}")
        if cap:
            parts[-1] += f" (total capacity {fmt_bytes(cap)}"
            parts[-1] += f", {fmt_bytes(free)} free)" if free is not None else ")"
        found.append(Fact("memory", f"requested {fmt_bytes(tried)}" + (f" with {fmt_bytes(free)} free of {fmt_bytes(cap)}" if free is not None and cap else "")))
    if alloc is not None:
        found.append(Fact("memory", f"allocated by PyTorch (live tensors): {fmt_bytes(alloc)}"))
    if unalloc is not None:
        share = f" = {unalloc / cap:.0%} of capacity" if cap else ""
        found.append(Fact("memory", f"reserved by PyTorch but unallocated (cached, fragmented): {fmt_bytes(unalloc)}{share}"))
    if others:
        found.append(Fact("memory", f"other processes hold {fmt_bytes(others)} on {gpu}"))
    loc = location_fact(ctx)
    if loc:
        found.append(loc)

    fragmented = bool(unalloc and tried and cap and unalloc >= 0.5 * tried and unalloc >= 0.05 * cap)
    huge_request = bool(tried and cap and tried >= 0.25 * cap)
    impossible = bool(tried and cap and tried > cap)
    crowded = bool(others and cap and others >= 0.1 * cap)

    fixes = []
    if impossible:
        cause = (f"A single allocation of {fmt_bytes(tried)} is larger than {gpu}'s entire memory ({fmt_bytes(cap)}): "
                 "no setting can make it fit. One tensor in this step is far bigger than intended, usually from a "
                 "shape bug (an accidental broadcast or outer product, a sequence length or batch dimension in the wrong place) "
                 "or from materialising something that should be streamed.")
        fixes.append(fix("Find the tensor and check its shape", "Print the shapes going into the failing line; a size that multiplies two large dimensions (B×B, L×L) is the usual culprit.", "print({name: t.shape for name, t in locals().items() if torch.is_tensor(t)})", "cuda-oom"))
        fixes.append(fix("Process it in chunks", "Split the batch or sequence and loop, or use an operation that does not materialise the full result (e.g. scaled_dot_product_attention instead of an explicit L×L attention matrix).", "outputs = torch.cat([model(chunk) for chunk in batch.split(8)])", "cuda-oom"))
    elif crowded:
        cause = (f"Other processes already hold {fmt_bytes(others)} of {gpu}'s {fmt_bytes(cap)}, so this process runs out "
                 "early. Another training job, a notebook kernel that still holds tensors, or a stray worker shares the card.")
        fixes.append(fix("Free the GPU or pick another one", "Check `nvidia-smi` for the other processes; stop them, or select a free GPU with CUDA_VISIBLE_DEVICES.", "CUDA_VISIBLE_DEVICES=1 python train.py", "cuda-oom"))
    elif fragmented:
        cause = (f"{fmt_bytes(unalloc)} is reserved by PyTorch's caching allocator but unallocated — more than enough in total "
                 f"for the {fmt_bytes(tried)} request, but split into blocks too small to hold it. This is fragmentation, "
                 "typical of varying batch shapes or sequence lengths and of many tensors freed in between.")
        fixes.append(fix("Enable expandable segments", "Lets the allocator grow segments instead of leaving gaps, which removes most fragmentation. Set it before the process starts (or before the first CUDA allocation).", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py", "cuda-oom-fragmentation"))
        fixes.append(fix("Keep shapes steady", "Pad or bucket sequences to a few fixed lengths so freed blocks can be reused for the next batch.", None, "cuda-oom-fragmentation"))
    else:
        used = alloc if alloc is not None else None
        cause = (f"Live tensors fill {gpu}" + (f": {fmt_bytes(used)} is allocated by PyTorch" if used else "")
                 + (f" out of {fmt_bytes(cap)}" if cap else "")
                 + (f", and the next allocation of {fmt_bytes(tried)} does not fit" if tried else "")
                 + ". The model, its optimizer state and the activations kept for backward at this batch size need more memory than the card has"
                 + (" — this failed during backward, when activations and gradients coexist." if in_backward else ".")
                 + (" Fragmentation is not the problem here (little memory is reserved but unused), so allocator settings will not help." if unalloc is not None and not fragmented else ""))
        if huge_request:
            cause += f" The single request of {fmt_bytes(tried)} is {tried / cap:.0%} of the card: look at the tensor created on the failing line first."
    if in_eval and not impossible:
        fixes.append(fix("Run evaluation without autograd", "Inference inside torch.no_grad() (or torch.inference_mode()) keeps no activations for backward.", "with torch.inference_mode():\n    out = model(x)", "cuda-oom"))
    if not impossible:
        fixes.append(fix("Reduce the batch size (keep the effective batch with gradient accumulation)", "Activation memory grows linearly with batch size; accumulate gradients over several smaller steps to keep the optimisation the same.", "loss = criterion(model(x_small), y_small) / accum_steps\nloss.backward()\nif (step + 1) % accum_steps == 0:\n    optimizer.step(); optimizer.zero_grad(set_to_none=True)", "cuda-oom"))
        fixes.append(fix("Use mixed precision", "bf16/fp16 autocast roughly halves activation memory.", "with torch.autocast('cuda', dtype=torch.bfloat16):\n    loss = criterion(model(x), y)", "cuda-oom"))
        fixes.append(fix("Trade compute for memory with activation checkpointing", "Recompute activations in backward instead of storing them.", "from torch.utils.checkpoint import checkpoint\nh = checkpoint(self.block, h, use_reentrant=False)", "cuda-oom"))
        fixes.append(fix("Don't keep references that hold the graph", "`total_loss += loss` or storing outputs in a list keeps every step's graph alive; store `loss.item()` / `out.detach()` instead, and `del` large temporaries.", "running_loss += loss.item()", "memory-growth-training-loop"))
    if not fragmented and not impossible and unalloc is None:
        fixes.append(fix("If memory is reserved but unused, try expandable segments", "Only if torch.cuda.memory_summary() shows a large gap between reserved and allocated memory.", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "cuda-oom-fragmentation"))
    fixes.append(fix("Measure before changing more", "Print the allocator's view at the failing step and record an allocation history to see which tensors hold memory.", "print(torch.cuda.memory_summary())\ntorch.cuda.memory._record_memory_history()\n# ... run the step ...\ntorch.cuda.memory._dump_snapshot('oom.pickle')  # open at pytorch.org/memory_viz", "memory-profiling"))
    src = " ".join(fr.source or "" for fr in ctx.failure.user_frames[-2:])
    if re.search(r"transpose\(-2, ?-1\)|\.mT\b|softmax|attn|attention|scores", src) and not impossible:
        cause += (" The failing line computes attention scores, whose memory grows quadratically with sequence length (B×heads×T×T): "
                  "doubling T quadruples that tensor.")
        fixes.insert(0, fix("Use fused attention or shorter sequences", "scaled_dot_product_attention never materialises the T×T matrix (flash/memory-efficient kernels); otherwise cap or bucket sequence length.", "out = F.scaled_dot_product_attention(q, k, v, is_causal=True)", "cuda-oom"))
    title = "CUDA out of memory" + (" (fragmentation)" if fragmented else " (single oversized allocation)" if impossible else " (another process holds the GPU)" if crowded else "")
    docs = ("cuda-oom-fragmentation", "cuda-oom", "memory-profiling") if fragmented else _DOCS
    numbers = {k: float(v) for k, v in (("requested_bytes", tried), ("capacity_bytes", cap), ("allocated_bytes", alloc),
                                          ("reserved_unallocated_bytes", unalloc), ("other_processes_bytes", others)) if v is not None}
    ruled_out = impossible or (unalloc is not None and not fragmented)
    values = Facts(numbers=numbers, flags=frozenset({"fragmentation_ruled_out"} if ruled_out else set()))
    return hit("memory.cuda_oom", "cuda_oom", title, cause, fixes, docs, found, 0.95, facts=values)


@rule(
    'memory.cpu_oom',
    category='cpu_oom',
    docs=("cpu-oom", "memory-profiling"),
    priority=201,
    outcomes=('memory.cpu_oom',),
    examples=(),
)
def cpu_oom(ctx: Context) -> RuleHit | None:
    """Host RAM exhausted: the CPU allocator's message, numpy's MemoryError, or the kernel's OOM killer."""
    m = ctx.search(r"DefaultCPUAllocator: (?:not enough memory|can't allocate memory): you tried to allocate (\d+) bytes")
    killer = ctx.search(r"Out of memory: Kill|oom-kill|Killed process|^Killed$|exit(?:code| code|ed with code)[: ]+(?:-9|137)\b", re.M)
    numpy = ctx.search(r"Unable to allocate ([\d.]+ \w+) for an array with shape (\([^)]*\))")
    if ctx.search(r"DataLoader worker .* killed by signal"):
        return None
    if not (m or numpy or killer or ctx.exc_type == "MemoryError"):
        return None
    found = [error_fact(ctx)]
    if m:
        size = int(m.group(1))
        found.append(Fact("memory", f"requested {fmt_bytes(size)} of host memory in one allocation"))
        cause = (f"A single CPU allocation of {fmt_bytes(size)} failed: the machine (or the process's memory limit) cannot provide it. "
                 + ("That is larger than any real machine's RAM, so the requested shape itself is wrong (an overflowing or mistaken size)." if size > (1 << 42)
                    else "Either the tensor is much larger than intended, or the dataset/model already fills RAM."))
    elif numpy:
        cause = f"NumPy could not allocate {numpy.group(1)} for an array of shape {numpy.group(2)}: host RAM is exhausted by the data being loaded."
        found.append(Fact("memory", f"numpy array of {numpy.group(1)}, shape {numpy.group(2)}"))
    elif killer:
        cause = ("The Linux OOM killer ended the process (signal 9 / exit 137): host RAM ran out. No Python error is printed because the "
                 "process is killed from outside; the usual culprits are whole datasets loaded into memory, DataLoader workers each "
                 "copying large Python objects, or a checkpoint loaded fully into RAM.")
        found.append(Fact("signal", killer.group(0)))
    else:
        cause = "Python raised MemoryError: host RAM is exhausted."
    loc = location_fact(ctx)
    if loc:
        found.append(loc)
    fixes = [
        fix("Check the size you asked for", "Compute numel × element size of the tensor on the failing line; a wrong dimension (e.g. using a vocabulary size or a sample count where a feature size belongs) is common.", "print(shape, torch.Size(shape).numel() * torch.finfo(torch.float32).bits // 8 / 2**30, 'GiB')", "cpu-oom"),
        fix("Compute in chunks", "Pairwise/similarity matrices and big intermediate results can be computed block by block (e.g. 1024 rows at a time) instead of all at once.", "for rows in x.split(1024):\n    sims = rows @ y.T   # (1024, M) at a time\n    ...", "cpu-oom"),
        fix("Stream data instead of loading it all", "Read samples lazily in Dataset.__getitem__, use memory-mapped arrays (np.load(..., mmap_mode='r')), and load checkpoints with mmap.", "state = torch.load('ckpt.pt', mmap=True, weights_only=True)", "cpu-oom"),
        fix("Reduce per-worker copies", "Each DataLoader worker may copy Python lists of samples (copy-on-access); store metadata in numpy arrays and lower num_workers.", "DataLoader(ds, num_workers=2, persistent_workers=True)", "cpu-oom"),
    ]
    return hit("memory.cpu_oom", "cpu_oom", "Host (CPU) out of memory", cause, fixes, ("cpu-oom", "memory-profiling"), found, 0.9)
