"""Out-of-memory failures: CUDA (every message generation, bare log lines and prose) and host RAM."""

from __future__ import annotations

import re
from dataclasses import dataclass

from assistant.parse.messages import fmt_bytes, parse_bytes
from assistant.rules.base import Context, error_fact, hit, location_fact, lazy_re, remedy
from assistant.rules.dispatch import TORCH_OP
from assistant.rules.registry import Example, rule
from assistant.types import Fact, Facts, Fix, RuleHit

_GiB = 1 << 30

_CUDA_OOM = lazy_re(
    r"CUDA out of memory|OutOfMemoryError|cuda runtime err(?:or)? ?\(2\) ?: ?out of memory|CUDA error: out of memory"
    r"|HIP out of memory|MPS backend out of memory|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation"
    r"|THCudaCheck FAIL[^\n]*error=2 : out of memory"
    # Bare log lines and prose: "cuda runtime error: out of memory", "my GPU runs out of memory".
    r"|\b(?:cuda|gpu)\b[^\n.]{0,30}\bout of me(?:mo|meo|mro)ry"
    # "GPU OOM", "CUDA OOM error" written by the user.
    r"|\b(?:cuda|gpu)\b[^\n.]{0,15}\bOOM\b",
    re.IGNORECASE,
)
_DOCS = ("cuda-oom", "cuda-oom-fragmentation", "memory-growth-training-loop", "memory-profiling")

# Prose that says memory rises step after step (a leak of references), not one big step.
_GROWTH = lazy_re(
    r"keeps? (?:increasing|growing|going up|rising)|(?:increas|grow)\w* (?:every|each|with each|per|after each) (?:iteration|step|epoch|batch)"
    r"|more memory with each|gradually (?:increas|fill|grow)\w*|memory leak|after (?:a few|several|some|\d+k?) (?:iterations|steps|training steps)"
    r"|after \d+k? iteration",
    re.IGNORECASE,
)
# Prose that says the failure happens even with the smallest batch.
_BATCH_ONE = lazy_re(r"batch[ _-]?size\W{0,3}(?:(?:is |was |were )?set (?:to|as)|=|of|to|is|:|改为|设为|设置为|为)?\s*1(?![\d.])|batchsize\s*=?\s*1(?![\d.])|\bbs\s*=\s*1(?![\d.])", re.IGNORECASE)
# The user reports that a smaller batch did not help ("reduced the batch size, still OOM"): the batch fix goes last, if at all.
_TRIED_BATCH = lazy_re(r"\b(?:reduc|lower|decreas|shrink|halv)\w* (?:the |my )?(?:batch[ _-]?size|bs|samples_per_gpu|micro[ _-]?batch)\b[^\n.]{0,60}"
                       r"\b(?:still|same (?:error|problem|issue)|doesn't help|does not help|didn't help|did not help|no luck|no difference|nothing changed)"
                       r"|\bsmaller batch(?:[ _-]?sizes?)?\b[^\n.]{0,40}\b(?:still|doesn't help|does not help|didn't help|did not help|no luck)"
                       r"|\bno matter (?:how small|what) (?:the |my )?batch", re.IGNORECASE)
# The user reports that fewer DataLoader workers did not help.
_TRIED_WORKERS = lazy_re(r"\b(?:reduc|lower|decreas|set)\w* (?:the |my )?num_workers\b[^\n.]{0,60}\b(?:still|same (?:error|problem|issue)|doesn't help|does not help|didn't help|did not help|no luck)"
                         r"|\b(?:even|still) with num_workers\s*=\s*[0-2]\b", re.IGNORECASE)
# The user chose a GPU with CUDA_VISIBLE_DEVICES (the value when they give one).
_VISIBLE_DEVICES = lazy_re(r"\bCUDA_VISIBLE_DEVICES\b(?:\s*=\s*[\"']?([\d,]+))?")
# A description that says "OOM" (or "爆显存", GPU memory blown) without CUDA's own wording.
_PROSE_OOM = lazy_re(r"(?<![A-Za-z])OOM(?![A-Za-z])|out of me(?:mo|meo|mro)ry|爆显存|显存不足|CUDA memory (?:exception|error)"
                     r"|exceed\w* (?:the )?(?:GPU|CUDA) (?:RAM|memory)")
# Evaluation named next to the OOM in a description ("Validation out of memory", "out of memory during testing", "验证时出现out of memory").
_EVAL_OOM = lazy_re(r"(?:validat\w{0,12}|evaluat\w{0,12}|testing|inference|验证|测试)[^.\n]{0,40}(?:out of memory|\bOOM\b)|(?:out of memory|\bOOM\b)[^.\n]{0,30}\b(?:validat\w*|evaluat\w*|testing|inference)"
                   # "a large evaluation set whose predictions exceed GPU RAM": the evaluation outputs themselves fill the GPU.
                   r"|(?:validat\w{0,12}|evaluat\w{0,12}|predict\w{0,8})[^.\n]{0,100}exceed\w* (?:the )?(?:GPU|CUDA) (?:RAM|memory)", re.I)
# A running total built from the loss tensor itself ("total_loss += loss", "+= ... without .item()"): keeps every step's graph alive.
_LOSS_ACCUM = lazy_re(r"\b\w{0,40}loss\w{0,40}\s*\+=\s*\w{0,40}loss\w*\b(?![.\[])|\+=[^\n]{0,30}\bwithout \.?item\(\)", re.I)
# backward(retain_graph=True) (or retain_graph = True as an argument) written in the user's code or words.
_RETAIN_GRAPH = lazy_re(r"\bretain_graph\s*=\s*True\b")
_LEAK_TALK = lazy_re(r"\.item\(\)|\.data\[0\]|out of memory|\bmemory\b|显存|内存", re.I)
# A failing line that computes attention scores (q @ k^T) or names attention.
_ATTENTION_LINE = lazy_re(r"(?<![^\n])(?>[^\n]*?(?:@|matmul|bmm|einsum))[^\n]*(?:transpose\(\s*-2\s*,\s*-1\s*\)|transpose\(\s*-1\s*,\s*-2\s*\)|\.mT\b)|\battn\w*\s*=|attention", re.IGNORECASE)
# A failing line that moves or loads data onto the GPU (before any training step).
_TRANSFER_LINE = lazy_re(r"\.cuda\(|\.to\(|torch\.load\(|load_state_dict\(|\b(?:cuda\.)?FloatTensor\(")


def _size_after(pattern: str, text: str) -> int | None:
    m = re.search(pattern, text, re.IGNORECASE)
    return parse_bytes(m.group(1)) if m else None


def _first(*values: int | None) -> int | None:
    """The first value that was read (0 is a reading, unlike None)."""
    return next((v for v in values if v is not None), None)


@dataclass(frozen=True)
class OomNumbers:
    """What the allocator's message says, in bytes (None when the wording does not give it)."""

    tried: int | None
    capacity: int | None
    free: int | None
    this_process: int | None
    allocated: int | None
    unallocated: int | None  # reserved by PyTorch but not handed to a tensor (cached blocks)
    others: int | None  # other processes on the same GPU (listed or inferred)
    gpu: int | None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.tried, self.capacity, self.allocated))


def _oom_numbers(text: str) -> OomNumbers:
    """Read every number the allocator reports, in the 2.x wording and the 1.x parenthesised ones."""
    tried = _size_after(r"Tried to allocate ([\d.]+ ?\w+)", text)
    cap = _first(_size_after(r"total capacity of ([\d.]+ ?\w+)", text), _size_after(r"total capacty of ([\d.]+ ?\w+)", text),
                 _size_after(r"([\d.]+ ?\w+) total capacity", text))
    free = _first(_size_after(r"of which ([\d.]+ ?\w+) is free", text), _size_after(r"([\d.]+ ?\w+) free\b", text))
    if free is None and re.search(r"of which 0 bytes is free|; 0 bytes free", text):
        free = 0
    this_process = _size_after(r"this process has ([\d.]+ ?\w+) memory in use", text)
    allocated = _first(_size_after(r"([\d.]+ ?\w+) is allocated by PyTorch", text), _size_after(r"([\d.]+ ?\w+) already allocated", text))
    unallocated = _size_after(r"([\d.]+ ?\w+) is reserved by PyTorch but unallocated", text)
    reserved_total = _size_after(r"([\d.]+ ?\w+) reserved in total by PyTorch", text)
    if unallocated is None and reserved_total is not None and allocated is not None:
        unallocated = max(0, reserved_total - allocated)
    if unallocated is None:
        # Early 1.x: "...; N free; M cached)" where "cached" is the allocator's unused cache.
        unallocated = _size_after(r"([\d.]+ ?\w+) cached\)", text)
    gpu = re.search(r"GPU (\d+)", text)
    reserved = allocated + unallocated if allocated is not None and unallocated is not None else reserved_total
    listed = [parse_bytes(m.group(1)) or 0 for m in re.finditer(r"Process \d+ has ([\d.]+ ?\w+) memory in use", text)]
    if this_process is None and reserved is not None:
        # In containers PyTorch cannot recognise its own pid and lists itself as "Process N":
        # the entry about as large as what PyTorch reserved (plus its CUDA context) is this process.
        own = next((s for s in listed if reserved <= s <= reserved + 2 * _GiB), None)
        if own is not None:
            listed.remove(own)
    elif this_process is not None:
        listed = [s for s in listed if abs(s - this_process) > (1 << 20)]
    others: int | None = sum(listed) or None
    if others is None and cap and free is not None:
        # No per-process list: whatever is neither free nor this process's must belong to someone else.
        used_here = this_process if this_process is not None else reserved
        if used_here is not None:
            outside = cap - free - used_here
            # The CUDA context and a desktop take some memory; only a large remainder is another process.
            others = outside if outside >= max(0.25 * cap, 1.5 * _GiB) else None
    return OomNumbers(tried, cap, free, this_process, allocated, unallocated, others, int(gpu.group(1)) if gpu else None)


def _common_fixes(in_eval: bool, batch_one: bool) -> list[Fix]:
    """Remedies for a working set that does not fit, in the order that usually pays off."""
    fixes = []
    if in_eval:
        fixes.append(remedy("cuda-oom#inference-mode-eval"))
    if not batch_one:
        fixes.append(remedy("cuda-oom#smaller-batch-accumulate"))
    fixes += [
        remedy("cuda-oom#mixed-precision"),
        remedy("cuda-oom#activation-checkpointing"),
        remedy("memory-growth-training-loop#drop-graph-references"),
    ]
    return fixes


def _measure_fix() -> Fix:
    return remedy("memory-profiling#measure-first")


@rule(
    'memory.cuda_oom',
    category='cuda_oom',
    docs=_DOCS,
    reads=TORCH_OP,
    priority=20,
    outcomes=('memory.cuda_oom', 'memory.cuda_oom_impossible', 'memory.cuda_oom_other_processes', 'memory.cuda_oom_fragmented',
              'memory.cuda_oom_bare', 'memory.cuda_oom_batch_one', 'memory.cuda_oom_growth', 'memory.cuda_oom_eval', 'memory.mps_oom',
              'memory.cuda_oom_visible_devices', 'memory.cuda_oom_resume'),
    examples=(
        Example('captured/cuda/cuda-oom-eval-without-no-grad', 'memory.cuda_oom'),
        Example('captured/cuda/cuda-oom-big-vocab-backward', 'memory.cuda_oom'),
        Example('realworld/dev/taggui-oom-expandable-segments', 'memory.cuda_oom'),
        Example('realworld/dev/d2-1563-oom-reserved-in-total-logger', 'memory.cuda_oom_fragmented'),
        Example('corpus/memory/oom_container_own_process_listed.txt', 'memory.cuda_oom'),
        Example('corpus/memory/oom_batch1_with_numbers.txt', 'memory.cuda_oom'),
        Example('captured/cuda/cuda-oom-similarity-matrix', 'memory.cuda_oom_impossible'),
        Example('corpus/memory/oom_impossible_request_other_process.txt', 'memory.cuda_oom_impossible'),
        Example('corpus/memory/oom_impossible_grid_sample.txt', 'memory.cuda_oom_impossible'),
        Example('corpus/memory/oom_other_process_old_wording.txt', 'memory.cuda_oom_other_processes'),
        Example('corpus/memory/oom_other_process_holds_gpu_h200.txt', 'memory.cuda_oom_other_processes'),
        Example('corpus/memory/oom_visible_devices_gpu0_busy_llamafactory.txt', 'memory.cuda_oom_visible_devices'),
        Example('captured/cuda/cuda-oom-fragmentation', 'memory.cuda_oom_fragmented'),
        Example('corpus/memory/oom_validation_batch_reduced_still_mmseg.txt', 'memory.cuda_oom_fragmented'),
        Example('corpus/memory/oom_after_n_images_eval_hairseg.txt', 'memory.cuda_oom'),
        Example('captured/cuda/cuda-oom-seqlen-curriculum', 'memory.cuda_oom_fragmented'),
        Example('corpus/memory/oom_fragmented_cached_wording.txt', 'memory.cuda_oom_fragmented'),
        Example('realworld/dev/detnet-old-oom-0.3', 'memory.cuda_oom_bare'),
        Example('realworld/dev/ncrfpp-old-oom-backward', 'memory.cuda_oom_bare'),
        Example('corpus/memory/oom_thc_size1_tensor.txt', 'memory.cuda_oom_bare'),
        Example('corpus/memory/oom_cuda_error_out_of_memory_bare.txt', 'memory.cuda_oom_bare'),
        Example('corpus/memory/oom_batch1_prose_tdn.txt', 'memory.cuda_oom_batch_one'),
        Example('corpus/memory/resume_first_gpu_memory_examples_ddp.txt', 'memory.cuda_oom_resume'),
        Example('corpus/memory/resume_gpu0_additional_processes_imagenet.txt', 'memory.cuda_oom_resume'),
        Example('corpus/memory/oom_batch1_prose_pika.txt', 'memory.cuda_oom_batch_one'),
        Example('corpus/memory/oom_batch1_prose_after_first_epoch.txt', 'memory.cuda_oom_batch_one'),
        Example('corpus/memory/oom_batch1_prose_vram_chinese.txt', 'memory.cuda_oom_batch_one'),
        Example('corpus/memory/oom_growth_prose_training_loop.txt', 'memory.cuda_oom_growth'),
        Example('corpus/memory/oom_growth_prose_loss_accumulation.txt', 'memory.cuda_oom_growth'),
        Example('corpus/memory/oom_growth_prose_each_iteration.txt', 'memory.cuda_oom_growth'),
        Example('corpus/memory/oom_growth_prose_testing.txt', 'memory.cuda_oom_growth'),
        Example('realworld/dev/yolo3-bubbliiiing-total-loss-graph-oom', 'memory.cuda_oom_growth'),
        Example('corpus/memory/oom_growth_prose_loss_plus_equals_decouplenet.txt', 'memory.cuda_oom_growth'),
        Example('corpus/memory/oom_growth_prose_losstensor_mean_chexnet.txt', 'memory.cuda_oom_growth'),
        Example('realworld/dev/dgl-validation-oom-disable-grad', 'memory.cuda_oom_eval'),
        Example('corpus/memory/oom_eval_prose_semseg_no_grad.txt', 'memory.cuda_oom_eval'),
        Example('corpus/memory/oom_eval_prose_mmdet_chinese.txt', 'memory.cuda_oom_eval'),
        Example('realworld/dev/yolov3-oom-batch1-img-size', 'memory.cuda_oom_batch_one'),
        Example('realworld/dev/deeplung-oom-test-uncropped-volume', 'memory.cuda_oom_batch_one'),
        Example('corpus/memory/mps_oom_backward.txt', 'memory.mps_oom'),
        Example('corpus/memory/mps_oom_sampling.txt', 'memory.mps_oom'),
        Example('corpus/memory/mps_oom_m2_laptop.txt', 'memory.mps_oom'),
    ),
)
def cuda_oom(ctx: Context) -> RuleHit | None:
    """CUDA out of memory, with advice ordered by what the allocator's numbers (or the user's words) show."""
    raw = ctx.failure.text or ctx.text
    # "OOM even with batch size 1": the batch-size remark is what makes a bare "OOM" a GPU memory question.
    described = not ctx.failure.exc_type and not ctx.failure.frames
    prose = bool(_PROSE_OOM.search(raw) and (_BATCH_ONE.search(raw) or _EVAL_OOM.search(raw)) and not _HOST_WORDS.search(raw))
    # A description that shows the loss tensor being accumulated and talks about memory/.item(): the classic leak that ends in OOM.
    accum = bool(described and _LOSS_ACCUM.search(raw) and _LEAK_TALK.search(raw) and not _HOST_WORDS.search(raw))
    # A description of running out of memory next to repeated backward(retain_graph=True): graphs kept alive by the retained passes.
    retained = bool(described and _PROSE_OOM.search(raw) and _RETAIN_GRAPH.search(raw) and not _HOST_WORDS.search(raw))
    # A description of extra memory on the first GPU when training resumes from a checkpoint (the multi-GPU torch.load story).
    resumed = bool(described and _FIRST_GPU.search(raw) and _RESUME.search(raw) and re.search(r"\bmemory\b|\bVRAM\b|显存", raw, re.I)
                   and not _HOST_WORDS.search(raw))
    if not (ctx.search(_CUDA_OOM.pattern, re.IGNORECASE) or prose or accum or retained or resumed) or ctx.search(r"DefaultCPUAllocator|enforce fail at CPUAllocator\.cpp"):
        return None
    if resumed and not ctx.search(_CUDA_OOM.pattern, re.IGNORECASE):
        return _resume_on_first_gpu(ctx)
    if re.search(r"CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS", ctx.message):
        return None  # shown as a cuBLAS / cuDNN error; those rules explain the OOM behind it
    if ctx.search(r"an illegal (?:cuda )?memory access was encountered") and not ctx.search(r"Tried to allocate|OutOfMemoryError"):
        return None  # the failure is the illegal access; an OOM mentioned beside it is context
    mps = ctx.search(r"MPS backend out of memory \(MPS allocated: ([\d.]+ ?\w+), other allocations: ([\d.]+ ?\w+), max allowed: ([\d.]+ ?\w+)\)")
    if mps:
        return _mps_oom(ctx, mps)
    num = _oom_numbers(ctx.text)
    batch_one = bool(_BATCH_ONE.search(raw))
    # Only the function name and the file's own name: a directory called "test" says nothing about the code.
    in_eval = any(re.search(r"\b(eval|valid|predict|infer|generate|test)", (fr.function or "") + " " + fr.file.replace("\\", "/").rsplit("/", 1)[-1], re.I)
                  for fr in ctx.failure.user_frames) or bool(described and _EVAL_OOM.search(raw))
    if not num.any:
        return _oom_without_numbers(ctx, raw, batch_one, in_eval)
    return _oom_with_numbers(ctx, num, batch_one, in_eval, raw)


def _oom_with_numbers(ctx: Context, num: OomNumbers, batch_one: bool, in_eval: bool, raw: str = "") -> RuleHit:
    """The allocator printed its numbers: decide between impossible, crowded, fragmented and full."""
    tried_batch = bool(_TRIED_BATCH.search(raw)) and not batch_one
    visible = _VISIBLE_DEVICES.search(raw)
    tried, cap, free, alloc, unalloc, others = num.tried, num.capacity, num.free, num.allocated, num.unallocated, num.others
    gpu = f"GPU {num.gpu}" if num.gpu is not None else "the GPU"
    in_backward = any("backward" in (fr.function or "") or ".backward(" in (fr.source or "") for fr in ctx.failure.frames)
    found = [error_fact(ctx)]
    if tried is not None:
        found.append(Fact("memory", f"requested {fmt_bytes(tried)}" + (f" with {fmt_bytes(free)} free of {fmt_bytes(cap)}" if free is not None and cap else "")))
    if alloc is not None:
        found.append(Fact("memory", f"allocated by PyTorch (live tensors): {fmt_bytes(alloc)}"))
    if unalloc is not None:
        share = f" = {unalloc / cap:.0%} of capacity" if cap else ""
        found.append(Fact("memory", f"reserved by PyTorch but unallocated (cached, fragmented): {fmt_bytes(unalloc)}{share}"))
    if others:
        found.append(Fact("memory", f"held outside this process on {gpu}: {fmt_bytes(others)}"))
    loc = location_fact(ctx)
    if loc:
        found.append(loc)

    impossible = bool(tried and cap and tried > cap)
    crowded = bool(others and cap and others >= 0.1 * cap and not impossible)
    # Fragmentation: much of the card sits in PyTorch's cache, and cache plus free memory would cover the request.
    # A re-run with expandable segments that failed the same way settles it, whatever the numbers suggest.
    retried = ctx.evidence.ruled_out_by_experiment("oom.fragmentation")
    fragmented = bool(unalloc and tried and cap and unalloc >= 0.5 * tried and unalloc >= 0.05 * cap and unalloc + (free or 0) >= tried
                      and not impossible and not crowded and retried is None)
    huge_request = bool(tried and cap and tried >= 0.25 * cap)
    src = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
    attention = bool(_ATTENTION_LINE.search(src))

    fixes: list[Fix] = []
    if impossible:
        outcome = "memory.cuda_oom_impossible"
        cause = (f"A single allocation of {fmt_bytes(tried)} is larger than {gpu}'s entire memory ({fmt_bytes(cap)}): "
                 "no setting can make it fit. One tensor in this step is far bigger than intended, usually from a "
                 "shape bug (an accidental broadcast or outer product, a sequence length or batch dimension in the wrong place) "
                 "or from materialising at once something that should be processed in pieces.")
        fixes.append(remedy("cuda-oom#find-oversized-tensor"))
        fixes.append(remedy("cuda-oom#process-in-chunks"))
    elif crowded and visible:
        # The user picked a GPU with CUDA_VISIBLE_DEVICES, yet the card the job sees is busy: first make sure the choice applied.
        outcome = "memory.cuda_oom_visible_devices"
        chosen = f"CUDA_VISIBLE_DEVICES={visible.group(1)}" if visible.group(1) else "CUDA_VISIBLE_DEVICES"
        cause = (f"You set {chosen}, yet {gpu} as this process sees it is mostly taken: about {fmt_bytes(others)} of its {fmt_bytes(cap)} "
                 "is used by something other than this process's tensors"
                 + (f" (this process's PyTorch holds only {fmt_bytes((alloc or 0) + (unalloc or 0))})" if alloc is not None else "")
                 + ". Inside a process the first visible GPU is always numbered 0, so the number alone proves nothing; but a busy card means "
                 "the variable most likely did not reach this process (set in another shell or command, after CUDA was initialised, or "
                 "overridden by a launcher or the script), and the job landed on a GPU another job already uses.")
        fixes.append(remedy("cuda-oom#check-visible-devices"))
        fixes.append(remedy("cuda-oom#inline-visible-devices", visible_devices=visible.group(1)))
        fixes.append(remedy("cuda-oom#nvidia-smi-physical-gpu"))
    elif crowded:
        outcome = "memory.cuda_oom_other_processes"
        cause = (f"About {fmt_bytes(others)} of {gpu}'s {fmt_bytes(cap)} is used by something other than this process's PyTorch tensors"
                 + (f" (this process's PyTorch holds only {fmt_bytes((alloc or 0) + (unalloc or 0))})" if alloc is not None else "")
                 + ", so this process runs out early. Most likely another process shares the card: a second training job, a notebook "
                 "kernel that still holds tensors, or other ranks and workers that created a CUDA context on the same GPU.")
        fixes.append(remedy("cuda-oom#free-or-pick-gpu"))
    elif fragmented:
        outcome = "memory.cuda_oom_fragmented"
        enough = ("more than enough in total for" if unalloc >= tried else  # type: ignore[operator]
                  f"together with the {fmt_bytes(free)} still free, enough in total for")
        cause = (f"{fmt_bytes(unalloc)} is reserved by PyTorch's caching allocator but unallocated — {enough} "
                 f"the {fmt_bytes(tried)} request, but split into blocks too small to hold it. This is fragmentation, "
                 "typical of varying batch shapes or sequence lengths and of many tensors freed in between.")
        fixes.append(remedy("cuda-oom-fragmentation#expandable-segments"))
        fixes.append(remedy("cuda-oom-fragmentation#steady-shapes"))
        if huge_request:
            # One request this large may itself be the problem: it rarely comes from a normal-sized input.
            cause += (f" The single request is {tried / cap:.0%} of the card: if expandable segments do not help, check which input or "  # type: ignore[operator]
                      "tensor on the failing line needs that much (an unusually large image, volume or sequence).")
    else:
        outcome = "memory.cuda_oom"
        cause = (f"Live tensors fill {gpu}" + (f": {fmt_bytes(alloc)} is allocated by PyTorch" if alloc else "")
                 + (f" out of {fmt_bytes(cap)}" if cap else "")
                 + (f", and the next allocation of {fmt_bytes(tried)} does not fit" if tried else "")
                 + ". The model, its optimizer state and the activations kept for backward at this input size need more memory than the card has"
                 + (" — this failed during backward, when activations and gradients coexist." if in_backward else ".")
                 + (" Fragmentation is not the problem: the same allocation failed again with expandable segments." if retried is not None else
                    " Fragmentation is not the problem here (little memory is reserved but unused), so allocator settings will not help." if unalloc is not None else ""))
        if huge_request:
            cause += f" The single request of {fmt_bytes(tried)} is {tried / cap:.0%} of the card: look at the tensor created on the failing line first."  # type: ignore[operator]
            fixes.append(remedy("cuda-oom#tile-large-inputs"))
    if batch_one and not impossible:
        cause += (" You report that it fails even with batch size 1, so the memory that does not shrink with the batch dominates: "
                  "the weights, gradients and optimizer state, or a single very large input.")
    elif tried_batch and not impossible:
        cause += (" You report that a smaller batch did not help, so what does not shrink with the batch matters more: the size of a single "
                  "input, memory kept from earlier steps, or the weights and optimizer state.")
    generation = None if (impossible or crowded or in_backward) else _GENERATION.search(raw)
    if generation:
        # Inference of a pretrained model (generation settings or calls named): its weights are the fixed cost, not a batch.
        found.append(Fact("context", f"inference of a pretrained model: “{generation.group(0)}”"))
        cause += (" The text shows inference of a pretrained model (generation), where the weights themselves take most of the card: "
                  "if they alone come close to its capacity, shorter outputs or inputs cannot help.")
        fixes.append(remedy("cuda-oom#load-weights-smaller"))
    if outcome == "memory.cuda_oom_visible_devices":
        pass  # the job is on the wrong (busy) card: shrinking it is not the remedy
    elif not impossible:
        fixes += _common_fixes(in_eval, batch_one or tried_batch)
    if unalloc is None and not fragmented and not impossible and outcome != "memory.cuda_oom_visible_devices":
        fixes.append(remedy("cuda-oom-fragmentation#expandable-segments-if-reserved"))
    fixes.append(_measure_fix())
    if outcome == "memory.cuda_oom" and not impossible:
        cause += _diffusion_attention(raw, fixes, found)
    if attention and not impossible:
        cause += (" The failing line computes attention scores, whose memory grows quadratically with sequence length (batch×heads×T×T): "
                  "doubling T quadruples that tensor.")
        fixes.insert(0, remedy("cuda-oom#fused-attention"))
    titles = {"memory.cuda_oom_fragmented": " (fragmentation)", "memory.cuda_oom_impossible": " (single oversized allocation)",
              "memory.cuda_oom_other_processes": " (another process holds the GPU)",
              "memory.cuda_oom_visible_devices": " (the GPU in use is busy: check CUDA_VISIBLE_DEVICES)"}
    docs = ("cuda-oom-fragmentation", "cuda-oom", "memory-profiling") if fragmented else _DOCS
    numbers = {k: float(v) for k, v in (("requested_bytes", tried), ("capacity_bytes", cap), ("free_bytes", free), ("allocated_bytes", alloc),
                                          ("reserved_unallocated_bytes", unalloc), ("other_processes_bytes", others)) if v is not None}
    flags = set()
    if impossible or (unalloc is not None and not fragmented) or retried is not None:
        flags.add("fragmentation_ruled_out")
    if impossible:
        flags.add("request_exceeds_card")  # certain from the numbers alone: no allocator setting can help
    if batch_one:
        flags.add("batch_size_one")
    if tried_batch:
        flags.add("batch_reduction_tried")
    values = Facts(numbers=numbers, devices=(f"cuda:{num.gpu}",) if num.gpu is not None else (), flags=frozenset(flags))
    return hit(outcome, "cuda_oom", "CUDA out of memory" + titles.get(outcome, ""), cause, fixes, docs, found, 0.95, facts=values)


def _mps_oom(ctx: Context, m: re.Match[str]) -> RuleHit:
    """Apple-silicon GPU (MPS): unified memory shared with the system, capped by PyTorch's watermark."""
    mps_alloc, other, cap = (parse_bytes(m.group(i)) or 0 for i in (1, 2, 3))
    tried = _size_after(r"Tried to allocate ([\d.]+ ?\w+)", ctx.text)
    found = [error_fact(ctx), Fact("memory", f"MPS tensors {m.group(1)}, other allocations {m.group(2)}, limit {m.group(3)}")]
    loc = location_fact(ctx)
    if loc:
        found.append(loc)
    share = ("Most of it is held by other allocations (MPS buffers outside PyTorch's tensors, such as cached graphs or other libraries on the "
             "same GPU), not by live tensors." if other > mps_alloc else "Most of it is held by this process's live tensors.")
    # Quote the message's own figures (MPS prints decimal units): re-formatting them would not match what the user sees.
    asked = re.search(r"Tried to allocate ([\d.]+ ?\w+)", ctx.text)
    cause = (f"The Apple-silicon GPU (MPS) ran out of its allowed memory: {m.group(1)} in tensors plus {m.group(2)} of other allocations, "
             f"against the {m.group(3)} that PyTorch lets MPS use" + (f", so a further {asked.group(1)} does not fit" if asked else "") + f". {share} "
             "MPS shares the machine's unified memory with the system and every other program, and PyTorch caps it at a fraction of RAM.")
    fixes = [
        remedy("cuda-oom#mps-reduce-step"),
        remedy("cuda-oom#mps-half-precision"),
        remedy("memory-profiling#mps-empty-cache"),
        remedy("cuda-oom#mps-watermark-ratio"),
    ]
    numbers = {k: float(v) for k, v in (("mps_allocated_bytes", mps_alloc), ("other_allocations_bytes", other), ("capacity_bytes", cap), ("requested_bytes", tried)) if v is not None}
    return hit("memory.mps_oom", "cuda_oom", "MPS (Apple GPU) out of memory", cause, fixes, ("cuda-oom", "memory-profiling"), found, 0.9,
               facts=Facts(numbers=numbers, devices=("mps",)))


# The first GPU named in a description ("the main GPU", "GPU 0", "cuda:0").
_FIRST_GPU = lazy_re(r"\b(?:main|first|primary|master|0th)\s+(?:GPU|card|device)\b|\bGPU\s?(?:#|:)?0\b|\bcuda:0\b", re.I)
# Resuming from a checkpoint, in the user's words.
_RESUME = lazy_re(r"\bresum(?:e|es|ed|ing)\b|\brestor(?:e|es|ed|ing)\b[^.\n]{0,40}\bcheckpoint|\b(?:load|loading|loaded) (?:the |a |my )?(?:checkpoint|ckpt)\b", re.I)


def _resume_on_first_gpu(ctx: Context) -> RuleHit:
    """Extra memory on the first GPU after resuming: every process's torch.load restores the checkpoint onto the GPU it was saved from."""
    raw = ctx.failure.text or ctx.text
    first, resume = _FIRST_GPU.search(raw), _RESUME.search(raw)
    found = [Fact("symptom", f"memory on “{first.group(0)}” when “{resume.group(0)}”")] if first and resume else []
    cause = ("When training resumes from a checkpoint, torch.load without map_location restores every saved tensor (weights and optimizer "
             "state) onto the GPU it was saved from, usually the first one. In a multi-GPU job every process loads its own copy there, so that "
             "GPU holds far more memory than the others and runs out first.")
    fixes = [remedy("cuda-oom#checkpoint-to-cpu-first"), remedy("cuda-oom#free-card-set-device"), _measure_fix()]
    return hit("memory.cuda_oom_resume", "cuda_oom", "Extra memory on the first GPU after resuming from a checkpoint", cause, fixes, _DOCS, found, 0.8,
               facts=Facts(call="torch.load"))


# Generation with a pretrained model named in the text: its settings or calls (inference, where the weights dominate memory).
_GENERATION = lazy_re(r"(?<![A-Za-z0-9_])max[_-]new[_-]tokens(?![A-Za-z0-9_])|\.generate\(|\bgeneration_utils\b|/generation/utils\.py")
# A torch.load call (torch imported under any short name) that does not say where to put the tensors.
_LOAD_CALL = lazy_re(r"\b(?:torch|th|T)\.load\((?![^\n]*map_location)[^\n]*")


def _checkpoint_load(ctx: Context) -> str | None:
    """The user's torch.load line without map_location, when the traceback fails inside torch.load's unpickling."""
    if not any(fr.file.replace("\\", "/").endswith("torch/serialization.py") for fr in ctx.failure.frames):
        return None
    for fr in reversed(ctx.failure.user_frames):
        m = _LOAD_CALL.search(fr.source or "")
        if m:
            return m.group(0).strip()
    return None


# A diffusion model (Stable Diffusion and its fine-tuning recipes) named in the text: attention over thousands of latent tokens.
_DIFFUSION = lazy_re(r"\b(?:dream ?booth|textual[ _-]inversion|stable[ _-]?diffusion|diffusers|sdxl)\b", re.I)


def _diffusion_attention(raw: str, fixes: list[Fix], found: list[Fact]) -> str:
    """A text naming a diffusion model or its training recipe: memory-efficient attention (and a smaller optimizer state) is
    the remedy its own low-memory settings use, offered second (after the first check). Returns the sentence for the cause."""
    named = _DIFFUSION.search(raw)
    if not named:
        return ""
    found.append(Fact("context", f"a diffusion model: “{named.group(0)}”"))
    fixes.insert(1, remedy("cuda-oom#memory-efficient-attention-training"))
    return (" The text names a diffusion model, whose attention over thousands of latent tokens dominates activation memory unless a "
            "memory-efficient attention kernel computes it.")


def _oom_without_numbers(ctx: Context, raw: str, batch_one: bool, in_eval: bool) -> RuleHit:
    """A bare OOM line (old releases, CUDA's own error) or the user's description of one."""
    found = [error_fact(ctx)]
    loc = location_fact(ctx)
    if loc:
        found.append(loc)
    src = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
    growth = _GROWTH.search(raw) or (_LOSS_ACCUM.search(raw) if not ctx.failure.exc_type else None)
    # Only the user's own code or words: PyTorch's frames pass retain_graph along on every backward.
    library = {(fr.source or "").strip() for fr in ctx.failure.frames if not fr.is_user}
    retained = next((m for m in _RETAIN_GRAPH.finditer(raw) if not any(m.group(0) in line for line in library if line)), None)
    if retained:
        found.append(Fact("code", f"backward with a retained graph: “{retained.group(0)}”"))
        cause = ("The code keeps the autograd graph with `retain_graph=True`. Each retained backward leaves every saved activation of the "
                 "graph alive, so backward called several times (once per loss, layer or output in a loop), or a graph kept from one step to "
                 "the next, adds memory until CUDA runs out. Backward through the sum of the losses once, or take the per-part gradients "
                 "with torch.autograd.grad, so the graph is freed after the last use.")
        fixes = [
            remedy("memory-growth-training-loop#one-backward-or-autograd-grad"),
            remedy("memory-growth-training-loop#confirm-growth"),
            remedy("memory-growth-training-loop#keep-numbers-not-graphs"),
            _measure_fix(),
        ]
        return hit("memory.cuda_oom_growth", "cuda_oom", "Out of memory with backward(retain_graph=True)", cause, fixes,
                   ("memory-growth-training-loop", "cuda-oom", "memory-profiling"), found, 0.8,
                   facts=Facts(names=("retain_graph",), flags=frozenset({"memory_growth"})))
    if growth:
        found.append(Fact("symptom", f"memory rises over time: “{growth.group(0)}”"))
        cause = ("GPU memory that rises step after step until it runs out means something from every iteration stays alive. "
                 "Usually a tensor that still carries its autograd graph is kept across iterations — a running total built from the loss tensor "
                 "instead of its Python number, predictions or outputs appended to a list without detaching, recurrent hidden states carried "
                 "into the next batch with their history — or a GPU-side cache or list that only grows. Each kept graph pins all of that step's "
                 "activations. (The caching allocator also makes nvidia-smi look high, but that figure levels off; a true leak does not.)")
        fixes = [
            remedy("memory-growth-training-loop#confirm-growth"),
            remedy("memory-growth-training-loop#keep-numbers-not-graphs"),
            remedy("memory-growth-training-loop#eval-without-autograd"),
            _measure_fix(),
        ]
        if growth.group(0).lower().startswith("after"):
            # Only the timing is known ("after a few iterations"), not a rise: one batch larger than the rest (more objects, longer
            # samples) reaches the card's limit at some step just as well, and a smaller batch leaves room for it.
            cause += (" When the failure comes at a different step from run to run, the peak of an unusually large batch is as likely "
                      "as a leak; the measurement tells them apart.")
            fixes.insert(2, remedy("cuda-oom#smaller-batch-accumulate"))
        return hit("memory.cuda_oom_growth", "cuda_oom", "GPU memory grows every iteration until out of memory", cause, fixes,
                   ("memory-growth-training-loop", "cuda-oom", "memory-profiling"), found, 0.8,
                   facts=Facts(flags=frozenset({"memory_growth"})))
    if batch_one:
        found.append(Fact("symptom", "out of memory even with batch size 1"))
        cause = ("Out of memory even at batch size 1 means the part that does not scale with the batch is too large for the card: "
                 "the weights plus their gradients and optimizer state (Adam keeps two extra values per parameter, so fp32 training needs "
                 "about four times the model size), or one input so large (resolution, volume, sequence length) that a single sample's "
                 "activations do not fit. If it only fails after a while (e.g. at the first evaluation), a pass without torch.no_grad() or "
                 "references kept across steps are the likelier cause.")
        fixes = [
            remedy("cuda-oom#estimate-model-memory"),
            remedy("cuda-oom#shrink-per-sample-cost"),
            *_common_fixes(in_eval, True)[:-1],
            remedy("cuda-oom#check-card-is-free"),
            _measure_fix(),
        ]
        return hit("memory.cuda_oom_batch_one", "cuda_oom", "CUDA out of memory even at batch size 1", cause, fixes, _DOCS, found, 0.8,
                   facts=Facts(flags=frozenset({"batch_size_one"})))
    if in_eval and not ctx.failure.exc_type and (eval_oom := _EVAL_OOM.search(raw)):
        found.append(Fact("symptom", f"out of memory in evaluation: “{eval_oom.group(0)}”"))
        cause = ("The GPU runs out of memory in the validation/test phase, although training steps fit. Evaluation run with autograd enabled "
                 "keeps every activation for a backward pass that never comes, so a forward pass costs as much as in training and graphs can "
                 "pile up across batches when outputs or losses are collected as tensors; a larger evaluation batch or full-size (uncropped) "
                 "evaluation inputs add to it.")
        fixes = [
            remedy("cuda-oom#no-grad-validation-loop"),
            remedy("memory-growth-training-loop#collect-cpu-copies"),
            remedy("cuda-oom#smaller-eval-batch"),
            _measure_fix(),
        ]
        # The text says the collected predictions/logits are what fills the GPU (a Trainer's evaluate/predict keeps them there).
        if re.search(r"\b(?:predictions?|logits|outputs)\b[^.\n]{0,80}\b(?:GPU|concatenat\w*|accumulat\w*)", raw, re.I):
            cause += (" Here the text says the predictions themselves are what fills the GPU: outputs gathered over the whole evaluation set "
                      "stay on the device until the end, so the memory needed grows with the size of that set.")
            fixes.insert(0, remedy("memory-growth-training-loop#collect-cpu-copies"))
            del fixes[2]
            if re.search(r"\bTrainer\b|\.(?:evaluate|predict)\(\)", raw):
                fixes.insert(1, remedy("memory-growth-training-loop#trainer-eval-accumulation"))
        return hit("memory.cuda_oom_eval", "cuda_oom", "CUDA out of memory during validation/testing", cause, fixes, _DOCS, found, 0.75,
                   facts=Facts(flags=frozenset({"in_eval"})))
    load = _checkpoint_load(ctx)
    if load:
        found.append(Fact("code", f"fails while loading a checkpoint: `{load}`"))
        cause = ("CUDA ran out of memory while a checkpoint was being loaded. torch.load without map_location restores every saved tensor "
                 "(weights and optimizer state) onto the GPU it was saved from, on top of the model already there; in a multi-GPU job every "
                 "process puts its copy on that same GPU.")
        fixes = [remedy("cuda-oom#checkpoint-to-cpu-first"), remedy("cuda-oom#see-who-holds-gpu"), _measure_fix()]
        return hit("memory.cuda_oom_bare", "cuda_oom", "CUDA out of memory while loading a checkpoint", cause, fixes, _DOCS, found, 0.85,
                   facts=Facts(call="torch.load"))
    cause = ("CUDA ran out of memory, but this message carries no allocator numbers (an old release, or CUDA's own error rather than "
             "PyTorch's allocator), so it cannot tell a too-large working set from memory held by another process or from fragmentation.")
    if _TRANSFER_LINE.search(src):
        cause += (" The failing line moves or loads data onto the GPU, before any training step: the card is most likely already occupied "
                  "(another process, an earlier run still alive), or what is being loaded is larger than the card.")
    elif any("backward" in (fr.function or "") or ".backward(" in (fr.source or "") for fr in ctx.failure.frames):
        cause += " It failed in backward, where saved activations and gradients coexist: the step's working set is the likely culprit."
    fixes = [
        remedy("cuda-oom#see-who-holds-gpu"),
        *_common_fixes(in_eval, bool(_TRIED_BATCH.search(raw))),
        remedy("memory-profiling#allocator-numbers"),
    ]
    cause += _diffusion_attention(raw, fixes, found)
    # The text is about variable-length data (audio clips, utterances, their durations): the longest samples set a step's peak.
    varlen = _VARIABLE_LENGTH.search(raw)
    if varlen:
        found.append(Fact("symptom", f"variable-length inputs: “{varlen.group(0)}”"))
        cause += (" The data is variable-length: a step's memory follows the longest sample in its batch, so a few long samples can run "
                  "out of memory while typical batches fit.")
        fixes.insert(1, remedy("cuda-oom#drop-overlong-inputs"))
    return hit("memory.cuda_oom_bare", "cuda_oom", "CUDA out of memory", cause, fixes, _DOCS, found, 0.85)


# Variable-length inputs named in the user's words: speech/audio data, or the length/duration of the samples.
_VARIABLE_LENGTH = lazy_re(r"\b(?:audio|speech|utterances?|recordings?|wav(?:eforms?)?|audio clips?)\b"
                           r"|\b(?:longest|long|longer) (?:samples?|sequences?|inputs?|documents?|clips?)\b"
                           r"|\b(?:under|over|longer than|shorter than) \d+ ?(?:s|sec|seconds)\b", re.I)


_CPU_ALLOC = lazy_re(r"DefaultCPUAllocator: (?:not enough memory|can't allocate memory): you tried to allocate (\d+) bytes"
                        r"|Torch: not enough memory: you tried to allocate (\d+)GB")
# The CPU allocator's failure without its size: the enforce line alone ("[enforce fail at CPUAllocator.cpp:56] posix_memalign(...) == 0.
# 12 vs 0", 12 being ENOMEM), or only its file quoted in a description.
_CPU_ALLOC_BARE = lazy_re(r"enforce fail at (?:CPUAllocator|alloc_cpu)\.cpp|DefaultCPUAllocator: (?:not enough memory|can't allocate memory)"
                             r"|posix_memalign\(&data, gAlignment, nbytes\) == 0\. 12 vs 0")
# Bash's job-control report of a child killed by SIGKILL: "slurm_script: line 12:  4567 Killed   python train.py".
_OOM_KILLER = lazy_re(r"Out of memory: Kill|oom-kill|oom_reaper|Killed process|^[ \t]*Killed\s*$|\]Killed\s*$|exit(?:code| code|ed with code)[: ]+(?:-9|137)\b"
                      r"|: line \d+:\s+\d+\s+Killed(?![A-Za-z])", re.M)
_HOST_GROWTH = lazy_re(r"(?:\bRAM\b|CPU memory|system memory|host memory|memory usage)[^.\n]{0,60}(?:keeps? increasing|kept increasing|gradually increases|increase until|slowly increase|keeps? growing|keeps? piling up|piles? up|piling up"
                          r"|keeps? inc\w*ing\b)"
                          r"|(?:\bRAM\b|memory) leak", re.IGNORECASE)
# The failure is placed in the evaluation phase ("in eval phase", "during validation", "when it comes to evaluation").
_HOST_EVAL = lazy_re(r"\b(?:during|in|at) (?:the )?(?:validation|evaluation|eval|inference|testing)\b"
                     r"|\b(?:validation|evaluation|eval|test|testing|inference) (?:phase|process|stage|time|loop)\b"
                     r"|\bwhen (?:it comes to )?(?:validating|evaluating|evaluation|testing|validation)\b", re.IGNORECASE)
# Growth described in GPU terms is the CUDA rule's (or the symptom rule's) to answer, not host RAM.
_GPU_WORDS = lazy_re(r"\b(?:GPU|VRAM|CUDA memory|cuda memory|nvidia-smi)\b")
# The growth is tied to a loop in the user's own code ("in a for loop", "with every loop").
_IN_LOOP = lazy_re(r"\b(?:in|inside) (?:a |the |my )?(?:for |while )?loop\b|\b(?:every|each) loop\b", re.I)
# Host-memory words (one definition: an earlier one above the OOM readers was silently replaced by this at import).
_HOST_WORDS = lazy_re(r"\b(?:(?<!GPU )RAM|CPU memory|system memory|host memory|RSS)\b")  # "GPU RAM" is the GPU's memory
# The user's words name the data loading workers (or a loader whose streaming pipeline runs one copy per worker).
_LOADER_WORKERS = lazy_re(r"\bnum_workers\b|\b(?:data ?loader|loading|loader) workers?\b|\bworkers?\b|\bDataLoader\b|\bWebDataset\b|\bprefetch_factor\b", re.IGNORECASE)


@rule(
    'memory.cpu_oom',
    category='cpu_oom',
    docs=("cpu-oom", "memory-profiling"),
    reads=(*TORCH_OP, "MemoryError"),
    priority=21,
    outcomes=('memory.cpu_oom', 'memory.cpu_oom_absurd_size', 'memory.cpu_oom_numpy', 'memory.cpu_oom_killed', 'memory.cpu_oom_memoryerror',
              'memory.cpu_oom_growth', 'memory.cpu_oom_allocator'),
    examples=(
        Example('captured/cpu/cpu-oom-full-similarity-matrix', 'memory.cpu_oom'),
        Example('realworld/dev/fooocus-cpu-alloc-windows-not-enough', 'memory.cpu_oom'),
        Example('realworld/dev/mxfold2-cpu-alloc-132gb-long-sequence', 'memory.cpu_oom'),
        Example('realworld/dev/vrt-cpu-alloc-116gb', 'memory.cpu_oom'),
        Example('corpus/memory/cpu_alloc_old_th_buy_new_ram.txt', 'memory.cpu_oom'),
        Example('corpus/memory/cpu_alloc_mask2former_eval.txt', 'memory.cpu_oom'),
        Example('corpus/memory/cpu_alloc_absurd_size_torch_empty.txt', 'memory.cpu_oom_absurd_size'),
        Example('corpus/memory/cpu_alloc_fragment_eval_phase_stargan.txt', 'memory.cpu_oom_allocator'),
        Example('corpus/memory/cpu_alloc_posix_memalign_old_photos.txt', 'memory.cpu_oom_allocator'),
        Example('corpus/memory/cpu_alloc_after_iterations_memseg.txt', 'memory.cpu_oom'),
        Example('corpus/memory/cpu_alloc_absurd_torch_empty_2_13.txt', 'memory.cpu_oom_absurd_size'),
        Example('corpus/memory/numpy_array_memory_error_crop.txt', 'memory.cpu_oom_numpy'),
        Example('corpus/memory/numpy_array_memory_error_dataset.txt', 'memory.cpu_oom_numpy'),
        Example('corpus/memory/numpy_array_memory_error_old_wording.txt', 'memory.cpu_oom_numpy'),
        Example('corpus/memory/numpy_array_memory_error_2_13.txt', 'memory.cpu_oom_numpy'),
        Example('corpus/memory/killed_progress_bar.txt', 'memory.cpu_oom_killed'),
        Example('corpus/memory/killed_after_start_training.txt', 'memory.cpu_oom_killed'),
        Example('corpus/memory/oom_killer_dmesg.txt', 'memory.cpu_oom_killed'),
        Example('corpus/scheduler/bash_killed_argo_script.txt', 'memory.cpu_oom_killed'),
        Example('corpus/scheduler/bash_killed_job_script.txt', 'memory.cpu_oom_killed'),
        Example('corpus/scheduler/bash_killed_slurm_script_tmp.txt', 'memory.cpu_oom_killed'),
        Example('corpus/scheduler/bash_killed_cbsched_vram_question.txt', 'memory.cpu_oom_killed'),
        Example('corpus/scheduler/bash_killed_entrypoint_exit_137.txt', 'memory.cpu_oom_killed'),
        Example('corpus/memory/memoryerror_torch_load.txt', 'memory.cpu_oom_memoryerror'),
        Example('corpus/memory/memoryerror_bytearray_3_11.txt', 'memory.cpu_oom_memoryerror'),
        Example('corpus/memory/host_ram_growth_prose_killed.txt', 'memory.cpu_oom_growth'),
        Example('corpus/memory/host_ram_growth_prose_crash.txt', 'memory.cpu_oom_growth'),
        Example('corpus/memory/host_ram_growth_prose_system_memory.txt', 'memory.cpu_oom_growth'),
        Example('realworld/dev/gradcam-ram-grows-cam-created-each-loop', 'memory.cpu_oom_growth'),
        Example('corpus/memory/host_ram_growth_prose_piling_up_title.txt', 'memory.cpu_oom_growth'),
    ),
)
def cpu_oom(ctx: Context) -> RuleHit | None:
    """Host RAM exhausted: the CPU allocator, numpy, Python's MemoryError, the kernel's OOM killer, or RAM that keeps growing."""
    if ctx.search(r"DataLoader worker .* killed by signal"):
        return None  # the data rules explain worker deaths
    raw = ctx.failure.text or ctx.text
    m = ctx.search(_CPU_ALLOC.pattern)
    numpy = ctx.search(r"Unable to allocate (?:([\d.]+ \w+) for an )?array with shape (\([^)]*\))(?: and data type (\w+))?")
    torchrun = re.search(r"ChildFailedError|elastic\.multiprocessing", raw)
    killer = None if torchrun else (_OOM_KILLER.search(raw))
    growth = _HOST_GROWTH.search(raw)
    if growth and _GPU_WORDS.search(raw) and not _HOST_WORDS.search(raw):
        growth = None
    memoryerror = ctx.exc_type in ("MemoryError", "_ArrayMemoryError")
    bare = None if (m or numpy) else _CPU_ALLOC_BARE.search(raw)
    if not (m or bare or numpy or killer or memoryerror or growth):
        return None
    found = [error_fact(ctx)]
    numbers: dict[str, float] = {}
    shape: tuple[int, ...] = ()
    common = _host_fixes()
    if m:
        # The pre-1.2 wording rounds the size down to whole GB ("0GB" means less than one).
        size = int(m.group(1)) if m.group(1) else int(m.group(2)) * _GiB
        shown = fmt_bytes(size) if m.group(1) or size else "less than 1 GB"
        numbers["requested_bytes"] = float(size)
        found.append(Fact("memory", f"requested {shown} of host memory in one allocation"))
        if size > (1 << 42):
            outcome = "memory.cpu_oom_absurd_size"
            cause = (f"A single CPU allocation of {fmt_bytes(size)} was requested — more than any machine's RAM, so no amount of memory fixes it: "
                     "the requested shape itself is wrong (a dimension that overflowed, was multiplied in by mistake, or came from the wrong variable).")
            fixes = [common[0], common[1]]
        else:
            outcome = "memory.cpu_oom"
            cause = (f"A single CPU allocation of {shown} failed: the machine (or the process's memory limit) cannot provide it at this point. "
                     "Either that tensor is much larger than intended, or the data and model already held in RAM leave no room for it.")
            fixes = list(common)
            if "not enough memory" in m.group(0) or re.search(r"alloc_cpu\.cpp:\d+\] data\.|[A-Z]:\\|\.\.\\c10", raw):
                # The Windows allocator's wording: its limit is RAM plus the page file.
                fixes.insert(1, remedy("cpu-oom#windows-page-file"))
    elif bare:
        outcome = "memory.cpu_oom_allocator"
        found.append(Fact("memory", f"PyTorch's CPU allocator failed: “{bare.group(0)}”"))
        cause = ("PyTorch's CPU allocator could not get memory from the system (the enforce failure in CPUAllocator/alloc_cpu is its "
                 "out-of-memory error; code 12 is ENOMEM). The quoted text does not give the size, so the question is what the failing step "
                 "allocates: a tensor larger than intended, or RAM already filled by data, the model or results kept from earlier steps. "
                 "Large RAM does not rule it out: one oversized tensor, or the process's memory limit, can exceed what is free.")
        fixes = list(common)
    elif numpy:
        outcome = "memory.cpu_oom_numpy"
        what = f"{numpy.group(1)} for an array" if numpy.group(1) else "an array"
        cause = (f"NumPy could not allocate {what} of shape {numpy.group(2)}" + (f" ({numpy.group(3)})" if numpy.group(3) else "")
                 + ": host RAM cannot hold it. Check whether that shape is intended — an unexpectedly large dimension or a float64 default "
                 "is common — and whether the data has to be in memory all at once.")
        found.append(Fact("memory", f"numpy array of shape {numpy.group(2)}" + (f", {numpy.group(1)}" if numpy.group(1) else "")))
        if numpy.group(1) and parse_bytes(numpy.group(1).replace(". ", " ")):
            numbers["requested_bytes"] = float(parse_bytes(numpy.group(1).replace(". ", " ")) or 0)
        shape = tuple(int(d) for d in re.findall(r"\d+", numpy.group(2)))
        fixes = [remedy("cpu-oom#smaller-dtype-mmap"), *common]
    elif killer:
        outcome = "memory.cpu_oom_killed"
        cause = ("The process was killed from outside (SIGKILL, shown as `Killed` or exit code 137/-9), which is what the Linux OOM killer does "
                 "when host RAM (or the container's memory limit) runs out. No Python traceback is printed because the process never gets to "
                 "raise one. Typical culprits: a whole dataset or a large checkpoint loaded into RAM, DataLoader workers that each copy large "
                 "Python objects, or memory that grows every step.")
        found.append(Fact("signal", killer.group(0).strip()[:200]))
        fixes = [
            remedy("cpu-oom#confirm-oom-killer"),
            *common,
        ]
    elif memoryerror:
        outcome = "memory.cpu_oom_memoryerror"
        cause = ("Python raised MemoryError: an allocation on the host failed while building Python/NumPy objects"
                 + (" (here while unpickling a file with torch.load: the whole file is read into RAM first)" if ctx.search(r"unpickler|torch\.load|pickle") or "torch.load" in raw else "")
                 + ". Either the object is larger than the free RAM, or the data being read is not what it should be (a corrupt or wrong file "
                 "can claim a huge size).")
        fixes = [remedy("cpu-oom#mmap-checkpoint"), *common]
    else:
        outcome = "memory.cpu_oom_growth"
        found.append(Fact("symptom", f"host memory grows over time: “{growth.group(0)}”"))  # type: ignore[union-attr]
        cause = ("Host RAM that keeps rising during training until the process is killed means something accumulates every step: tensors or "
                 "arrays appended to Python lists (metrics, predictions, losses kept as tensors with their graph), caches in the Dataset, or "
                 "DataLoader workers whose copy-on-access pages grow as they touch Python objects (lists of dicts or strings).")
        fixes = [
            remedy("cpu-oom#measure-rss"),
            remedy("memory-growth-training-loop#store-numbers-not-tensors"),
            remedy("cpu-oom#fewer-worker-copies-buffers"),
        ]
        workers = _LOADER_WORKERS.search(raw)
        if workers:
            # Each worker process holds its own copies and buffers: the host total scales with how many there are.
            found.append(Fact("context", f"the text mentions the data loading workers: “{workers.group(0)}”"))
            cause += (f" The text mentions {workers.group(0)}: every worker process keeps its own copies and prefetch/shuffle buffers, so the total "
                      "grows with the number of workers; try fewer first.")
            # Workers named outright lead; a DataLoader merely mentioned ranks the remedy behind the accumulation one.
            fixes.insert(2 if workers.group(0).lower().replace(" ", "") == "dataloader" else 0, remedy("host-memory-leak#fewer-loader-workers"))
        if _IN_LOOP.search(raw):
            # Objects built per iteration (a model wrapper, an explainer/CAM, anything registering hooks) each add hooks and references.
            fixes.insert(1, remedy("memory-growth-training-loop#create-objects-once"))
    loc = location_fact(ctx)
    # Remedies the user says they already tried go last: they did not help here.
    tried = [t for t, said in (("Compute in chunks or smaller batches", _TRIED_BATCH.search(raw)), ("Reduce per-worker copies", _TRIED_WORKERS.search(raw))) if said]
    fixes = [f for f in fixes if f.title not in tried] + [f for f in fixes if f.title in tried]
    evaluation = _HOST_EVAL.search(raw) if outcome in ("memory.cpu_oom", "memory.cpu_oom_allocator") else None
    if evaluation:
        # Training fits, evaluation does not: what differs is the evaluation step's own size.
        found.append(Fact("symptom", f"fails in evaluation: “{evaluation.group(0)}”"))
        cause += (" It fails in evaluation, so look first at what an evaluation step holds: its batch size (often a separate setting), "
                  "whole uncropped inputs, and outputs gathered across the whole split.")
        fixes.insert(0, remedy("cpu-oom#shrink-eval-step"))
    if loc:
        found.append(loc)
    titles = {"memory.cpu_oom_absurd_size": "Host allocation larger than any machine's RAM",
              "memory.cpu_oom_allocator": "CPU allocator out of memory (host RAM)", "memory.cpu_oom_numpy": "NumPy could not allocate an array (host out of memory)",
              "memory.cpu_oom_killed": "Process killed (host out of memory)", "memory.cpu_oom_memoryerror": "MemoryError (host out of memory)",
              "memory.cpu_oom_growth": "Host memory grows until the process dies"}
    return hit(outcome, "cpu_oom", titles.get(outcome, "Host (CPU) out of memory"), cause, fixes, ("cpu-oom", "memory-profiling"), found, 0.9,
               facts=Facts(numbers=numbers, shapes=(shape,) if shape else (), dtypes=(numpy.group(3),) if numpy and numpy.group(3) else (),
                           flags=frozenset({"host_memory"})))


def _host_fixes() -> list[Fix]:
    """Generic host-memory remedies (the failing line decides which one matters)."""
    return [
        remedy("cpu-oom#check-requested-size"),
        remedy("cpu-oom#compute-in-chunks"),
        remedy("cpu-oom#stream-data"),
        remedy("cpu-oom#fewer-worker-copies"),
        remedy("cpu-oom#more-ram"),
    ]
