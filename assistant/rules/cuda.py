"""CUDA runtime failures: device-side asserts, illegal accesses, cuDNN/cuBLAS statuses, hardware faults.

CUDA reports kernel failures asynchronously, so the Python line in the traceback is often not the
operation that failed. Every rule here says so and says how to localise the real one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from assistant.rules.base import Context, error_fact, hit, location_fact, lazy_re, remedy
from assistant.rules.dispatch import TORCH_OP
from assistant.rules.registry import EARLY, Example, rule
from assistant.types import CudaAssert, Fact, Facts, Fix, RuleHit

_ASYNC_NOTE = ("CUDA kernels run asynchronously, so the error is raised at a later synchronising call: the Python line in the traceback "
               "may not be the operation that failed.")


def _localise_fixes() -> list[Fix]:
    return [
        remedy("async-cuda-errors#launch-blocking-rerun"),
        remedy("async-cuda-errors#run-batch-on-cpu"),
    ]


@dataclass(frozen=True)
class AssertStory:
    """What one kind of kernel assertion means."""

    outcome: str
    short: str
    cause: str
    fixes: tuple[Fix, ...]


def _kernel_label(a: CudaAssert) -> str:
    """The kernel's name, or its source file when the name is only a lambda's ``operator()``."""
    name = a.kernel.strip()
    return name if name and not name.startswith("operator()") else a.source_file.replace("\\", "/").rsplit("/", 1)[-1]


def _assert_story(a: CudaAssert, embedding_seen: bool) -> AssertStory:
    """What a kernel assertion means, from the kernel name and condition (and whether the frames show an embedding)."""
    k = f"{a.source_file} {a.kernel} {a.condition}"
    kernel = _kernel_label(a)
    if re.search(r"nll_loss|ClassNLLCriterion|t >= 0 && t < n_classes|cross_entropy", k, re.I):
        story = (f"The loss kernel `{kernel}` found a target label outside [0, n_classes) (assertion `{a.condition}`). A label equals the number of "
                 "classes (labels numbered 1..C instead of 0..C-1), is negative (e.g. -1 padding without ignore_index), or the output layer has fewer "
                 "classes than the data.")
        fixes = [remedy("device-side-assert#check-label-range"),
                 remedy("device-side-assert#shift-labels-or-ignore-index")]
        # The 2-D (per-pixel) kernels mean the targets are segmentation masks, whose usual out-of-range values are
        # a void/border colour (255) or masks stored as 0-255 images instead of class ids.
        if re.search(r"nll_loss2d|SpatialClassNLLCriterion", k, re.I):
            story += (" This is the per-pixel loss, so the targets are segmentation masks: the usual culprits are a void or border value "
                      "such as 255 left in the mask, or masks stored as 0-255 images (or RGB colours) instead of class ids.")
            fixes.insert(1, remedy("device-side-assert#inspect-mask-values"))
        return AssertStory("cuda.assert_label", "class label out of range in the loss", story, tuple(fixes))
    if re.search(r"input_val >= zero && input_val <= one|input >= 0\. && input <= 1\.|binary_cross_entropy|BCECriterion", k):
        return AssertStory(
            "cuda.assert_bce_range", "BCE input outside [0, 1]",
            f"binary_cross_entropy's kernel found an input outside [0, 1] (assertion `{a.condition}`): it was given raw logits, values that drifted "
            "outside the range, or NaN, instead of probabilities.",
            (remedy("device-side-assert#bce-with-logits"),
             remedy("nan-inf-anomaly#check-probabilities-finite")))
    if re.search(r"multinomial|cumdist|0 <= p4 && p4 <= 1|val >= zero|ge\(val, zero\)|probability tensor contains", k, re.I):
        return AssertStory(
            "cuda.assert_multinomial", "invalid probabilities for sampling",
            f"A sampling kernel (`{kernel}`) got a probability row that is negative, NaN/Inf, or sums to zero (assertion `{a.condition}`).",
            (remedy("nan-inf-anomaly#sample-from-finite-softmax"),))
    gather = re.search(r"vectorized_gather|IndexKernelUtils|indexSelect|srcIndex < srcSelectDimSize|index_select", k, re.I)
    if gather:
        story = (f"`{kernel}` read an index outside the dimension it indexes (assertion `{a.condition}`). This kernel serves embedding lookups, "
                 "index_select and tensor[idx] gathers: an index tensor holds a value at or beyond the size of the indexed dimension, or a negative one "
                 "(for an embedding lookup: an id >= num_embeddings).")
        fixes = [remedy("index-out-of-range#compare-max-index-with-size")]
        # index_select's kernels (indexSelectLargeIndex/SmallIndex) are what an embedding lookup runs, so the
        # embedding story applies to them even when no frame names the embedding.
        if embedding_seen or re.search(r"indexSelect", k):
            why = "The traceback shows an embedding" if embedding_seen else "index_select's kernel is what an embedding lookup runs"
            story += (f" {why}, so most likely a token id is too large — a tokenizer vocabulary larger than the table, tokens added "
                      "without resizing it, or positions beyond the largest position embedding.")
            fixes.append(remedy("index-out-of-range#size-embedding-and-positions"))
        return AssertStory("cuda.assert_gather_index", "index out of range in an embedding/index_select gather", story, tuple(fixes))
    if re.search(r"ScatterGather|scatter|idx_dim", k, re.I):
        return AssertStory(
            "cuda.assert_scatter_gather", "gather/scatter index out of range",
            f"A gather/scatter kernel (`{kernel}`) got an index outside the dimension it indexes (assertion `{a.condition}`): torch.gather, "
            "scatter/scatter_add or an op built on them (one-hot encoding, label smoothing, top-k bookkeeping) received an index >= that "
            "dimension's size, or a negative one — for example a label value larger than the number of classes it is scattered into.",
            (remedy("index-out-of-range#check-gather-scatter-bounds"),))
    if re.search(r"IndexKernel|index out of bounds|-sizes\[i\] <= index", k, re.I):
        return AssertStory(
            "cuda.assert_index", "tensor index out of range",
            f"An indexing kernel (`{kernel}`) got an index outside the tensor (assertion `{a.condition}`): advanced indexing with a tensor of indices "
            "that contains a value >= the dimension size (or < -size).",
            (remedy("index-out-of-range#check-index-tensor-range"),))
    return AssertStory(
        "cuda.assert_other", "kernel assertion",
        f"The kernel `{kernel}` in {a.source_file.replace(chr(92), '/').rsplit('/', 1)[-1]} failed the assertion `{a.condition}`: an input violates "
        "what that kernel requires (most often an index or label out of range).",
        ())


# What the failing line (when CUDA_LAUNCH_BLOCKING was not set, only a hint) points at.
_LOSS_LINE = lazy_re(r"cross_entropy|nll_loss|CrossEntropyLoss|criterion\(|loss_fn\(|\bloss\w*\s*=", re.I)
_EMBED_LINE = lazy_re(r"embed|emb\b|tok_emb|pos_emb|wte|wpe", re.I)


@rule(
    'cuda.device_side_assert',
    category='device_side_assert',
    docs=("device-side-assert", "async-cuda-errors"),
    reads=TORCH_OP,
    priority=24,
    outcomes=('cuda.device_side_assert', 'cuda.assert_label', 'cuda.assert_bce_range', 'cuda.assert_multinomial', 'cuda.assert_gather_index',
              'cuda.assert_scatter_gather', 'cuda.assert_index', 'cuda.assert_other'),
    examples=(
        Example('corpus/cuda/device_side_assert_no_kernel_line.txt', 'cuda.device_side_assert'),
        Example('corpus/cuda/device_side_assert_embedding_add_line.txt', 'cuda.device_side_assert'),
        Example('captured/cuda/cuda-assert-ce-one-based-labels', 'cuda.assert_label'),
        Example('captured/cuda/cuda-assert-nll-pad-label-minus-one', 'cuda.assert_label'),
        Example('realworld/dev/detectors-old-spatialclassnll-assert', 'cuda.assert_label'),
        Example('realworld/dev/unet-nllloss2d-assert-tqdm', 'cuda.assert_label'),
        Example('corpus/cuda/assert_bce_input_range.txt', 'cuda.assert_bce_range'),
        Example('corpus/cuda/assert_bce_input_range_old.txt', 'cuda.assert_bce_range'),
        Example('corpus/cuda/assert_bce_input_range_h200.txt', 'cuda.assert_bce_range'),
        Example('realworld/dev/pytorch-bce-input-not-in-0-1-assert', 'cuda.assert_bce_range'),
        Example('corpus/cuda/assert_multinomial_cumdist.txt', 'cuda.assert_multinomial'),
        Example('corpus/cuda/assert_multinomial_negative.txt', 'cuda.assert_multinomial'),
        Example('corpus/cuda/assert_multinomial_thc.txt', 'cuda.assert_multinomial'),
        Example('corpus/cuda/assert_multinomial_negative_prob_h200.txt', 'cuda.assert_multinomial'),
        Example('captured/cuda/cuda-assert-embedding-token-out-of-vocab', 'cuda.assert_gather_index'),
        Example('captured/cuda/cuda-assert-scatter-edge-index', 'cuda.assert_gather_index'),
        Example('realworld/dev/hf28104-indexselect-assert-embeddings', 'cuda.assert_gather_index'),
        Example('corpus/cuda/assert_embedding_index_select_h200.txt', 'cuda.assert_gather_index'),
        Example('corpus/cuda/assert_scatter_gather_segmentation.txt', 'cuda.assert_scatter_gather'),
        Example('corpus/cuda/assert_scatter_gather_old.txt', 'cuda.assert_scatter_gather'),
        Example('corpus/cuda/assert_scatter_one_hot_h200.txt', 'cuda.assert_scatter_gather'),
        Example('corpus/cuda/assert_index_kernel_out_of_bounds.txt', 'cuda.assert_index'),
        Example('corpus/cuda/assert_index_kernel_windows.txt', 'cuda.assert_index'),
        Example('corpus/cuda/assert_index_kernel_h200.txt', 'cuda.assert_index'),
        Example('realworld/dev/cutorch-819-old-59-indexatdim', 'cuda.assert_other'),
    ),
)
def device_side_assert(ctx: Context) -> RuleHit | None:
    """``device-side assert triggered`` plus the ``.cu`` assertion lines that name the kernel."""
    if not (ctx.search(r"device-side assert(?:ion)? triggered|cuda runtime error \(59\)|CUDA_ERROR_ASSERT|cudaErrorAssert") or ctx.failure.cuda_asserts):
        return None
    if ctx.search(r"CUBLAS_STATUS|CUDNN_STATUS"):
        return None
    docs = ["device-side-assert", "async-cuda-errors"]
    found = [error_fact(ctx)]
    fixes: list[Fix] = []
    src = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
    conjecture = ""
    if ctx.failure.cuda_asserts:
        a = ctx.failure.cuda_asserts[0]
        frames_text = " ".join(f"{fr.function or ''} {fr.source or ''}" for fr in ctx.failure.frames)
        story = _assert_story(a, bool(re.search(r"embedding|Embedding", frames_text)))
        threads = sum(x.count for x in ctx.failure.cuda_asserts if x.kernel == a.kernel)
        found.append(Fact("cuda_assert", f"{a.source_file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{a.line} in `{_kernel_label(a)}`: Assertion `{a.condition}` failed ({threads} thread report(s))"))
        outcome, cause = story.outcome, f"{story.cause} {_ASYNC_NOTE}"
        fixes.extend(story.fixes)
        title = f"CUDA device-side assert: {story.short}"
        if "index" in story.short:
            docs.append("index-out-of-range")
        values = Facts(names=(a.kernel, a.condition), numbers={"thread_reports": float(threads)})
    else:
        outcome = "cuda.device_side_assert"
        cause = ("A CUDA kernel hit an internal assertion, but the assertion line that names the kernel (printed to stderr before the Python "
                 "traceback: `...cu:LINE: kernel: ... Assertion `...` failed.`) is not in the text. The usual causes, most common first: a class "
                 "label outside [0, num_classes) in a classification loss, an embedding or index_select index >= the table size, a gather/scatter "
                 "index out of range, or inputs outside [0, 1] for binary cross-entropy. " + _ASYNC_NOTE)
        # The reported line is only a hint (asynchronous), so what it shows is a conjecture, not the cause.
        if _EMBED_LINE.search(src):
            conjecture = "The reported line works with embeddings: check the token/position ids against the embedding sizes first."
        elif _LOSS_LINE.search(src):
            conjecture = "The reported line computes a loss: check the target labels against the number of classes first."
        fixes.append(remedy("device-side-assert#check-labels-and-indices"))
        title = "CUDA device-side assert triggered"
        values = Facts()
    fixes.extend(_localise_fixes())
    fixes.append(remedy("async-cuda-errors#restart-after-assert"))
    loc = location_fact(ctx)
    if loc:
        found.append(Fact("location", loc.text + " (reported line; may not be the failing op)"))
    return hit(outcome, "device_side_assert", title, cause, fixes, docs, found, 0.95, facts=values, conjecture=conjecture)


@rule(
    'cuda.illegal_memory_access',
    category='illegal_memory_access',
    docs=("illegal-memory-access", "async-cuda-errors"),
    reads=TORCH_OP,
    priority=25,
    outcomes=('cuda.illegal_memory_access', 'cuda.illegal_memory_access_custom', 'cuda.misaligned_address', 'cuda.illegal_memory_access_device',
              'cuda.illegal_memory_access_library', 'cuda.illegal_memory_access_torch_kernel'),
    examples=(
        Example('realworld/dev/regtr-illegal-memory-logger-prefix', 'cuda.illegal_memory_access'),
        Example('corpus/cuda/illegal_access_conv3d_old_release.txt', 'cuda.illegal_memory_access_torch_kernel'),
        Example('realworld/dev/tegnas-illegal-memory-random', 'cuda.illegal_memory_access'),
        Example('realworld/dev/sdtrt-illegal-memory-chinese-hint', 'cuda.illegal_memory_access'),
        Example('captured/cuda/cuda-illegal-access-triton-byte-stride', 'cuda.illegal_memory_access'),
        Example('corpus/cuda/illegal_access_triton_inductor.txt', 'cuda.illegal_memory_access_custom'),
        Example('corpus/cuda/illegal_access_triton_sparse_attention.txt', 'cuda.illegal_memory_access_custom'),
        Example('realworld/dev/deformabledetr-illegal-access-batch-size', 'cuda.illegal_memory_access_custom'),
        Example('realworld/dev/torchvision-deformconv-illegal-access-bs10', 'cuda.illegal_memory_access_custom'),
        Example('realworld/dev/tutorials-cpp-ext-multigpu-illegal-access', 'cuda.illegal_memory_access_custom'),
        Example('corpus/cuda/illegal_access_deform_conv2d_batch_size.txt', 'cuda.illegal_memory_access_custom'),
        Example('captured/cuda/cuda-misaligned-address-flat-grad-ext', 'cuda.misaligned_address'),
        Example('corpus/cuda/illegal_access_only_on_cuda1_pnaconv.txt', 'cuda.illegal_memory_access_device'),
        Example('corpus/cuda/illegal_access_mmdet_roipool.txt', 'cuda.illegal_memory_access_library'),
    ),
)
def illegal_memory_access(ctx: Context) -> RuleHit | None:
    """Illegal address, misaligned address, unspecified launch failure."""
    m = ctx.search(r"an illegal (?:cuda )?memory access was encountered|CUDA illegal memory access|\billegal memory access\b|misaligned address|unspecified launch failure|CUDA_ERROR_ILLEGAL_ADDRESS|cudaErrorIllegalAddress|CUDA_ERROR_MISALIGNED_ADDRESS|an illegal instruction was encountered|illegal address")
    if not m or ctx.search(r"CUBLAS_STATUS|CUDNN_STATUS"):
        return None
    kind = m.group(0)
    if kind == "unspecified launch failure" and not ctx.search(r"illegal (?:cuda )?memory access|illegal address|misaligned address|CUDA_ERROR_ILLEGAL"):
        # cudaErrorLaunchFailure alone names no cause (a kernel fault, a display watchdog timeout, a driver or hardware fault): decline.
        return None
    raw = ctx.failure.text or ctx.text
    custom = re.search(r"triton|cpp_extension|load_inline|_C\.so|\.cu\b|cupy|numba|custom (?:cuda |c\+\+ )?(?:extension|op|kernel|layer)|cuda extension"
                       r"|deform\w{0,20}[ _]?(?:conv\w{0,12}|attn|attention)", " ".join(f.file for f in ctx.failure.frames) + " " + raw, re.I)
    found = [error_fact(ctx)]
    if custom:
        found.append(Fact("custom_kernel", f"the text mentions a custom kernel: {custom.group(0)}"))
    other_gpu = _fails_on_other_gpu(raw)
    library = None if custom else _LIBRARY_OP.search(raw)
    if other_gpu and "misaligned" not in kind.lower():
        found.append(Fact("device", f"the text says it fails on {other_gpu} but not on the first GPU"))
        cause = (f"A GPU kernel accessed memory outside any valid allocation, and it happens with the tensors on {other_gpu} but not on the "
                 "first GPU. That pattern points at a kernel (typically from a compiled extension or library) that is launched on the current "
                 "CUDA device, which stays the first GPU, instead of the device its tensors live on: it is missing a device guard, so it reads "
                 "addresses that are not valid there. " + _ASYNC_NOTE)
        fixes = [
            remedy("illegal-memory-access#set-current-device", device=other_gpu),
            remedy("illegal-memory-access#upgrade-library-device-guard"),
            remedy("illegal-memory-access#expose-one-gpu"),
        ]
        fixes.extend(_localise_fixes())
        return hit("cuda.illegal_memory_access_device", "illegal_memory_access", "CUDA illegal memory access (only on a non-default GPU)", cause, fixes,
                   ("illegal-memory-access", "async-cuda-errors"), found, 0.9, facts=Facts(names=(kind, other_gpu), devices=(other_gpu,)))
    if "misaligned" in kind.lower():
        outcome = "cuda.misaligned_address"
        cause = ("A kernel read or wrote memory at an address not aligned for the access width (e.g. a 128-bit vector load from an offset "
                 "that is not a multiple of 16 bytes). It comes from kernels that vectorise loads on tensors whose storage offset or strides break "
                 "their alignment assumptions — views into a larger flat buffer, slices, or non-contiguous inputs passed to a custom or fused kernel. "
                 + _ASYNC_NOTE)
        fixes = [
            remedy("illegal-memory-access#contiguous-fresh-tensors"),
            remedy("illegal-memory-access#check-view-alignment"),
        ]
    elif custom:
        outcome = "cuda.illegal_memory_access_custom"
        cause = ("A GPU kernel accessed memory outside any valid allocation, and the text involves a hand-written or generated kernel (Triton — "
                 "your own, a library's, or one torch.compile generated — or a C++/CUDA extension): its index arithmetic most likely reads past the "
                 "end of a tensor — a missing bounds mask, a wrong stride assumption (element vs byte strides, or a non-contiguous input), or an "
                 "int32 offset that overflows on large tensors. " + _ASYNC_NOTE)
        fixes = [
            remedy("illegal-memory-access#compute-sanitizer"),
            remedy("illegal-memory-access#bounds-check-kernel"),
            remedy("illegal-memory-access#make-inputs-contiguous"),
            remedy("illegal-memory-access#compare-with-eager"),
            remedy("illegal-memory-access#check-size-dependence"),
        ]
        if re.search(r"c\+\+|cpp|\.cu\b|cuda extension|custom (?:cuda |c\+\+ )?(?:extension|op|kernel)", raw, re.I):
            fixes.insert(1, remedy("illegal-memory-access#launch-on-input-gpu"))
    elif library:
        outcome = "cuda.illegal_memory_access_library"
        named = list(dict.fromkeys(m.group(0) for m in _LIBRARY_OP.finditer(raw)))[:3]
        op = ", ".join(f"`{n}`" for n in named)
        found.append(Fact("library_op", f"the text names third-party ops or libraries: {', '.join(named)}"))
        cause = (f"A GPU kernel accessed memory outside any valid allocation, and the text names a library's own CUDA ops or package ({op}). Third-party "
                 "kernels check their inputs less than PyTorch's, and out-of-bounds bugs in them are fixed in later releases: a bug in that "
                 "library's kernel is the likeliest cause, before an index in your data. " + _ASYNC_NOTE)
        fixes = [
            remedy("illegal-memory-access#upgrade-library-op", ops=op),
            remedy("illegal-memory-access#swap-in-torchvision-op"),
            remedy("illegal-memory-access#compute-sanitizer-names-kernel"),
        ]
    else:
        outcome = "cuda.illegal_memory_access"
        cause = ("A GPU kernel accessed memory outside any valid allocation. In plain PyTorch code this usually comes from out-of-range indices in an "
                 "op that does not check them, a third-party extension kernel (compiled ops from a library) whose index or stride arithmetic is wrong, "
                 "or a library bug; it can also follow an earlier asynchronous error. " + _ASYNC_NOTE)
        fixes = [
            remedy("illegal-memory-access#compute-sanitizer"),
            remedy("illegal-memory-access#check-indices-extension"),
            remedy("illegal-memory-access#rule-out-library-mismatch"),
        ]
        old_release = _OLD_TORCH.search(raw)
        plain_layer = None if _INDEXING_OP.search(raw) else _TORCH_LAYER.search(raw)
        if old_release or plain_layer:
            # Nothing custom in the text: PyTorch's own kernel (or its cuDNN) is a suspect, and old releases had more such bugs.
            outcome = "cuda.illegal_memory_access_torch_kernel"
            cause = ("A GPU kernel accessed memory outside any valid allocation, and the text shows no custom kernel or extension: "
                     + (f"only PyTorch's own layers (`{plain_layer.group(0)}`)" if plain_layer else "only PyTorch's own ops")
                     + (f", on an old PyTorch release ({old_release.group(0).strip()})" if old_release else "")
                     + ". A bug in a PyTorch or cuDNN kernel for this shape is then a leading suspect (fixed in later releases), next to an "
                     "earlier out-of-range index. " + _ASYNC_NOTE)
            fixes.insert(0 if old_release else 1, remedy("illegal-memory-access#upgrade-pytorch-release"))
            suspect = old_release if old_release is not None else plain_layer
            if suspect is not None:
                found.append(Fact("version" if old_release else "layer", f"the text names {suspect.group(0).strip()}"))
    fixes.extend(_localise_fixes())
    fixes.append(remedy("illegal-memory-access#restart-process"))
    title = "CUDA misaligned address" if outcome == "cuda.misaligned_address" else "CUDA illegal memory access"
    loc = location_fact(ctx)
    return hit(outcome, "illegal_memory_access", title, cause, fixes, ("illegal-memory-access", "async-cuda-errors"), found + ([loc] if loc else []), 0.93,
               facts=Facts(names=(kind,) + ((custom.group(0),) if custom else ())))


# An old PyTorch release named in the text: a version number below 1.10, or the THC error path those releases printed.
_OLD_TORCH = lazy_re(r"(?:py)?torch(?:[ _=-]*(?:version)?[ :=]*v?)(?:0\.\d+|1\.[0-9](?!\d))(?:\.\d+)?|\bTHCudaCheck FAIL|aten/src/THC/", re.I)
# PyTorch's own layers that run cuDNN or native kernels with no user indices; indexing ops point elsewhere first.
_TORCH_LAYER = lazy_re(r"\b(?:nn\.)?(?:Conv(?:Transpose)?[123]d|LSTM|GRU|BatchNorm[123]d|(?:Max|Avg)Pool[123]d|cudnn_convolution\w*)\b")
_INDEXING_OP = lazy_re(r"\b(?:Embedding|embedding|index_select|gather|scatter\w*|index_add\w*|take_along_dim|nll_loss|cross_entropy|CrossEntropyLoss)\b")


# A library's own CUDA op named in the text: extension packages and the ops they compile themselves.
_LIBRARY_OP = lazy_re(r"\b(?:mmcv|mmdet|mmdetection|mmseg|mmrotate|detectron2|torch_scatter|torch-scatter|torch_sparse|torch-sparse|torch_cluster"
                      r"|torch_geometric|pytorch_geometric|spconv|xformers|flash_attn|flash-attn|bitsandbytes|pointnet2\w*|[PR]S?RoI(?:Pool|Align)\w*"
                      r"|RoI(?:Pool|Align)\w*|roi_(?:pool|align)\w*|nms_cuda|scatter_(?:add|max|min|mean|sum)_cuda)\b", re.I)
_NONZERO_GPU = lazy_re(r"\bcuda:([1-9]\d?)\b|\b(?:gpu|device)[ _:#=]?(?:id ?)?([1-9])\b", re.I)
_FIRST_GPU_OK = lazy_re(r"(?:cuda:0|[\"']cuda[\"']|\bgpu ?0|\bdevice ?0)[^.\n]{0,60}?\b(?:works?|fine|disappears?|goes away|no (?:error|problem|issue)s?|ok|succeeds?)\b"
                        r"|\b(?:works?|fine|no (?:error|problem))\b[^.\n]{0,30}?(?:cuda:0|\bgpu ?0|\bdevice ?0)", re.I)


def _fails_on_other_gpu(raw: str) -> str | None:
    """``cuda:N`` (N > 0) when the text says it fails there while the first GPU works."""
    m = _NONZERO_GPU.search(raw)
    if not m or not _FIRST_GPU_OK.search(raw):
        return None
    return f"cuda:{m.group(1) or m.group(2)}"


@dataclass(frozen=True)
class StatusStory:
    """What one library status (or group of statuses) means and what to try first."""

    outcome: str
    statuses: tuple[str, ...]
    story: str
    memory_first: bool = False


_CUDNN_STATUSES = (
    StatusStory("cuda.cudnn_no_memory", ("NOT_INITIALIZED", "ALLOC_FAILED"),
                "cuDNN could not create its handle or allocate its workspace. This almost always means the GPU was already out of memory at "
                "that moment, or (for NOT_INITIALIZED) that the cuDNN library does not match the driver/PyTorch build.", True),
    StatusStory("cuda.cudnn_execution_failed", ("EXECUTION_FAILED",),
                "A cuDNN kernel failed while running. Often an earlier asynchronous error (an out-of-range index, a device-side assert) surfaces "
                "here; otherwise a cuDNN/CUDA build that does not support this GPU, or an unusually large or oddly shaped input."),
    StatusStory("cuda.cudnn_bad_param", ("BAD_PARAM",),
                "cuDNN rejected the call's parameters: an unsupported shape/dtype/layout combination, a non-contiguous input, or a mismatch "
                "between the cuDNN library found at run time and the one PyTorch was built with."),
    StatusStory("cuda.cudnn_not_supported", ("NOT_SUPPORTED",),
                "cuDNN has no algorithm for this configuration — often a non-contiguous input, an unusual dtype/layout, or a tensor (batch × "
                "channels × spatial size) too large for cuDNN's 32-bit indexing."),
    StatusStory("cuda.cudnn_mapping_error", ("MAPPING_ERROR",),
                "cuDNN could not access GPU memory. Usually a consequence of an earlier illegal access or memory corruption, of memory pressure, "
                "or of a cuDNN/CUDA build that does not match this GPU.", True),
    StatusStory("cuda.cudnn_arch_mismatch", ("ARCH_MISMATCH",),
                "This cuDNN build does not support the GPU's architecture: the card is older than the cuDNN release supports, or a different cuDNN "
                "library (a system-wide copy on the library path) is loaded instead of the one PyTorch ships."),
    StatusStory("cuda.cudnn_version_mismatch", ("VERSION_MISMATCH", "SUBLIBRARY_VERSION_MISMATCH"),
                "The cuDNN libraries loaded at run time come from different versions: some from PyTorch's wheel, others from a system install or "
                "another package on the library path."),
    # Also the answer for statuses no other row explains: cuDNN failed without saying why.
    StatusStory("cuda.cudnn_internal_error", ("INTERNAL_ERROR",),
                "cuDNN failed internally. Commonly memory pressure (cuDNN's workspace could not be obtained), an earlier asynchronous failure, "
                "or a cuDNN/driver mismatch.", True),
)


# NOT_INITIALIZED at the first cuDNN call, on every run, or next to version/driver words: the build, not memory.
# The text ties a cuDNN failure to the evaluation pass and to a dtype/precision step taken there.
_CUDNN_EVAL_ONLY = lazy_re(r"\b(?:test(?:ing)?|validation|valid(?:ation)? set|evaluat\w*|eval|inference)\b", re.I)
_CUDNN_PRECISION_WORD = lazy_re(r"\.float\(\)|\.half\(\)|autocast|\bamp\b|\bfp16\b|float16|dtype", re.I)
_CUDNN_FIRST_CALL = lazy_re(r"flatten_parameters|\bfirst (?:call|batch|step|iteration|forward|conv\w*|layer)|at (?:start-?up|the start)|right away|immediately", re.I)
_CUDNN_BUILD_WORDS = lazy_re(r"\bevery (?:time|run)|\balways\b|any (?:model|script|input)|even (?:with )?(?:a )?(?:batch(?:[ _]size)? (?:of )?1|tiny|small)"
                             r"|\bdriver\b|cuda ?(?:version|toolkit|1\d\b)|cudnn ?version|(?:torch|pytorch) ?version|\bupgrad|\breinstall|new (?:gpu|card|machine)"
                             r"|RTX ?[345]0\d0|\bA100\b|\bH100\b|cudatoolkit", re.I)
_CUDNN_MEMORY_WORDS = lazy_re(r"out of memory|\bOOM\b|batch.?size|memory|nvidia-smi shows|other process|larger (?:batch|input|image)|smaller (?:batch|input)", re.I)


# The text reports a size threshold: the layer runs up to some batch/input size and fails from the next one on.
_SIZE_THRESHOLD = lazy_re(r"\b(?:works?|fine|ok|runs?|goes (?:pretty )?well)\b[^.\n]{0,40}?\b(?:up to|until|below|under|<=?)\s*\d+"
                          r"|\b(?:fail\w*|break\w*|crash\w*|error\w*)\b[^.\n]{0,30}?\b(?:at|from|above|over|beyond)\s+(?:batch[ _]?size\s*(?:of\s*)?)?\d+\+?"
                          r"|\bsmaller (?:batch|input|volume|image|resolution)[^.\n]{0,40}?\b(?:works?|fine|ok|goes (?:pretty )?well|runs?)\b", re.I)
_TENSOR_SHAPE = lazy_re(r"(?:Tensor|randn|rand|zeros|ones|empty|Size)\(\[?\s*(\d+(?:\s*,\s*\d+){2,})\s*\]?\)")


def _over_int32_elements(text: str) -> str | None:
    """What in the text points to a tensor beyond cuDNN's 32-bit element count: a size threshold, or a quoted shape over 2**31."""
    for m in _TENSOR_SHAPE.finditer(text):
        numel = 1
        for d in m.group(1).split(","):
            numel *= int(d)
        if numel > 2**31:
            return f"a tensor of shape ({m.group(1)}) holds {numel:,} elements, over 2**31"
    t = _SIZE_THRESHOLD.search(text)
    return f"the text reports a size threshold ({t.group(0).strip()})" if t else None


def _cudnn_build_story(ctx: Context) -> bool:
    """CUDNN_STATUS_NOT_INITIALIZED whose text points at the installation rather than at a full GPU."""
    text = ctx.failure.text
    return bool(_CUDNN_FIRST_CALL.search(text) or _CUDNN_BUILD_WORDS.search(text)) and not _CUDNN_MEMORY_WORDS.search(text)


def _status_story(table: tuple[StatusStory, ...], status: str) -> StatusStory:
    """The row for a status; statuses no row names share the last (internal error) row."""
    return next((row for row in table if status in row.statuses), table[-1])


@rule(
    'cuda.cudnn_error',
    category='cudnn_error',
    docs=("cudnn-errors", "async-cuda-errors", "cuda-oom"),
    reads=TORCH_OP,
    priority=22,
    outcomes=('cuda.cudnn_no_memory', 'cuda.cudnn_execution_failed', 'cuda.cudnn_bad_param', 'cuda.cudnn_not_supported', 'cuda.cudnn_mapping_error',
              'cuda.cudnn_arch_mismatch', 'cuda.cudnn_version_mismatch', 'cuda.cudnn_internal_error', 'cuda.cudnn_no_algorithm', 'cuda.cudnn_rnn_eval',
              'cuda.cudnn_init_build', 'cuda.cudnn_plan_warning'),
    examples=(
        Example('realworld/dev/frn-cudnn-not-initialized-memory', 'cuda.cudnn_no_memory'),
        Example('corpus/cuda/cudnn_alloc_failed_lowercase_title.txt', 'cuda.cudnn_no_memory'),
        Example('corpus/cuda/cudnn_not_initialized_lstm_flatten_first_call.txt', 'cuda.cudnn_init_build'),
        Example('realworld/dev/lwrefinenet-cudnn-execution-failed-backward', 'cuda.cudnn_execution_failed'),
        Example('corpus/cuda/cudnn_execution_failed_version_question.txt', 'cuda.cudnn_execution_failed'),
        Example('corpus/cuda/cudnn_bad_param.txt', 'cuda.cudnn_bad_param'),
        Example('corpus/cuda/cudnn_bad_param_inference.txt', 'cuda.cudnn_bad_param'),
        Example('realworld/dev/dpgn-cudnn-not-supported-cudatoolkit', 'cuda.cudnn_not_supported'),
        Example('realworld/dev/pytorch-11065-old-cudnn-not-supported-jupyter-large-batch', 'cuda.cudnn_not_supported'),
        Example('corpus/cuda/cudnn_mapping_error_backward.txt', 'cuda.cudnn_mapping_error'),
        Example('corpus/cuda/cudnn_mapping_error_conv_forward.txt', 'cuda.cudnn_mapping_error'),
        Example('corpus/cuda/cudnn_arch_mismatch_lstm.txt', 'cuda.cudnn_arch_mismatch'),
        Example('corpus/cuda/cudnn_arch_mismatch_old_gpu.txt', 'cuda.cudnn_arch_mismatch'),
        Example('corpus/cuda/cudnn_sublibrary_version_mismatch.txt', 'cuda.cudnn_version_mismatch'),
        Example('corpus/cuda/cudnn_sublibrary_version_mismatch_conv2d_title.txt', 'cuda.cudnn_version_mismatch'),
        Example('captured/cuda/cudnn-error-dataset-preload-fills-gpu', 'cuda.cudnn_internal_error'),
        Example('corpus/cuda/cudnn_internal_error_backward.txt', 'cuda.cudnn_internal_error'),
        Example('corpus/cuda/cudnn_no_valid_algorithm_backward.txt', 'cuda.cudnn_no_algorithm'),
        Example('corpus/cuda/cudnn_no_valid_algorithm_conv3d.txt', 'cuda.cudnn_no_algorithm'),
        Example('corpus/cuda/cudnn_get_no_engine_title.txt', 'cuda.cudnn_no_algorithm'),
        Example('corpus/cuda/cudnn_find_no_engine.txt', 'cuda.cudnn_no_algorithm'),
        Example('corpus/cuda/cudnn_rnn_backward_eval_mode.txt', 'cuda.cudnn_rnn_eval'),
        Example('corpus/cuda/cudnn_rnn_backward_eval_mode_sampling.txt', 'cuda.cudnn_rnn_eval'),
        Example('corpus/cuda/cudnn_v8_plan_failed_warning.txt', 'cuda.cudnn_plan_warning'),
    ),
)
def cudnn_error(ctx: Context) -> RuleHit | None:
    """``cuDNN error: CUDNN_STATUS_*`` and friends, with what usually hides behind each status."""
    m = ctx.search(r"(?i)CUDNN_STATUS_(\w+)")
    other = ctx.search(r"Unable to find a valid cuDNN algorithm to run convolution|no valid convolution algorithms available in CuDNN|cudnn RNN backward can only be called in training mode|GET was unable to find an engine to execute this computation|FIND was unable to find an engine")
    if not (m or other):
        return None
    found = [error_fact(ctx)]
    docs = ("cudnn-errors", "async-cuda-errors", "cuda-oom")
    layer, kind = ctx.layer
    if other and not m and "training mode" in other.group(0):
        cause = "cuDNN's RNN backward only works in training mode; backward was called through an LSTM/GRU/RNN while it was in eval() mode."
        fixes = [remedy("cudnn-errors#rnn-backward-train-mode")]
        return hit("cuda.cudnn_rnn_eval", "cudnn_error", "cuDNN RNN backward in eval mode", cause, fixes, docs[:1], found, 0.93,
                   facts=Facts(names=("cudnn RNN backward",), layer=layer, layer_kind=kind))
    if other and not m:
        outcome, status = "cuda.cudnn_no_algorithm", "NO_ALGORITHM"
        cause = ("cuDNN found no algorithm for this convolution. In practice this is usually out-of-memory in disguise (no algorithm fits the free "
                 "workspace), otherwise an unsupported shape/dtype combination or a cuDNN build that does not support this GPU.")
        memory_first = True
    elif m:
        status = m.group(1).upper()
        row = _status_story(_CUDNN_STATUSES, status)
        outcome, memory_first = row.outcome, row.memory_first
        cause = f"cuDNN returned CUDNN_STATUS_{status}. " + row.story
        if status == "NOT_INITIALIZED" and _cudnn_build_story(ctx):
            outcome, memory_first = "cuda.cudnn_init_build", False
            cause = (f"cuDNN returned CUDNN_STATUS_{status}: it could not even start, on "
                     + ("the first cuDNN call (an RNN's flatten_parameters first runs when the model is moved to the GPU, usually before training has filled its memory)"
                        if _CUDNN_FIRST_CALL.search(ctx.failure.text) else "a call that fails however small the run")
                     + ". That points to a PyTorch/CUDA/cuDNN build that does not work with this GPU or driver (a CUDA build newer than the "
                     "driver supports, no kernels for this GPU, or another cuDNN on the library path) rather than to memory; "
                     "if the GPU was already nearly full, it is out of memory instead.")
    found.append(Fact("status", f"CUDNN_STATUS_{status}" if status != "NO_ALGORITHM" else "no valid cuDNN algorithm"))
    plan = ctx.search(r"cudnnException|cudnnFinalize Descriptor Failed|Plan failed with")
    # Only when the rejected plan is the whole story: next to a real cuDNN error the plan lines are its echo, not the failure.
    if plan and status != "NO_ALGORITHM" and not ctx.search(r"cuDNN error: CUDNN_STATUS|unable to find an engine|Unable to find a valid cuDNN"):
        # The cuDNN v8 API's plan search: one rejected execution plan, printed (often as a warning) before the next plan runs.
        cause = (f"cuDNN rejected one execution plan ({plan.group(0)}, CUDNN_STATUS_{status}) while PyTorch's cuDNN v8 API searched for one; "
                 "PyTorch then tries the next plan, and some releases print every rejection even when the run goes on.")
        fixes = [remedy("cudnn-errors#upgrade-torch-plan-warning"), remedy("cudnn-errors#disable-cudnn-once"), remedy("cudnn-errors#check-loaded-cudnn")]
        return hit("cuda.cudnn_plan_warning", "cudnn_error", f"cuDNN plan rejected: {status}", cause, fixes, docs[:1], found, 0.85,
                   facts=Facts(names=(f"CUDNN_STATUS_{status}",), layer=layer, layer_kind=kind))
    if ctx.failure.cuda_asserts:
        a = ctx.failure.cuda_asserts[0]
        cause += f" The log also shows a kernel assertion in `{_kernel_label(a)}` (`{a.condition}`): that earlier failure is the real cause."
        found.append(Fact("cuda_assert", f"{a.kernel}: {a.condition}"))
    fixes = [
        remedy("cudnn-errors#disable-cudnn-once"),
        remedy("cuda-oom#cudnn-rule-out-oom"),
        remedy("async-cuda-errors#localise-launch-blocking"),
        remedy("cudnn-errors#contiguous-supported-dtype"),
    ]
    versions = remedy("cudnn-errors#check-loaded-cudnn")
    if status == "NOT_INITIALIZED":
        # cuDNN failed to create its handle: inputs play no part; memory or a build that does not fit the GPU/driver does.
        build = remedy("cudnn-errors#install-matching-build")
        if outcome == "cuda.cudnn_init_build":
            fixes = [build, versions, remedy("cuda-oom#cudnn-rule-out-oom"), remedy("cudnn-errors#disable-cudnn-once")]
        else:
            fixes = [remedy("cuda-oom#cudnn-rule-out-oom"), remedy("cudnn-errors#disable-cudnn-once"), build, versions]
        return hit(outcome, "cudnn_error", f"cuDNN error: {status}", cause, fixes, docs, found, 0.9 if outcome == "cuda.cudnn_no_memory" else 0.8,
                   facts=Facts(names=(f"CUDNN_STATUS_{status}",), layer=layer, layer_kind=kind))
    if outcome in ("cuda.cudnn_internal_error", "cuda.cudnn_execution_failed"):
        # Autotuning benchmarks many algorithms, some with large workspaces or known bugs; failures that come and go often stop without it.
        fixes.append(remedy("cudnn-errors#benchmark-off"))
    if outcome in ("cuda.cudnn_arch_mismatch", "cuda.cudnn_version_mismatch", "cuda.cudnn_bad_param"):
        fixes.insert(0, versions)
        if outcome == "cuda.cudnn_bad_param" and _CUDNN_EVAL_ONLY.search(ctx.failure.text) and _CUDNN_PRECISION_WORD.search(ctx.failure.text):
            # Only the evaluation pass fails and the text talks about dtypes there: its precision differs from training's.
            cause += (" The text ties the failure to the evaluation pass and to casting there: an autocast or half-precision region in that "
                      "code (or inputs of another dtype than the weights) hands cuDNN a dtype pair it rejects.")
            fixes.insert(0, remedy("cudnn-errors#eval-no-grad-without-autocast"))
    else:
        if memory_first:
            fixes.insert(0, fixes.pop(1))
        fixes.append(versions)
    if outcome == "cuda.cudnn_not_supported":
        # The heuristic's pick (autotuning off) can be an algorithm without support for this configuration; the search finds another.
        toggle = remedy("cudnn-errors#toggle-benchmark")
        if "cudnn.benchmark" in ctx.failure.text:
            fixes.insert(1, toggle)
        else:
            fixes.append(toggle)
    big = _over_int32_elements(ctx.failure.text) if outcome == "cuda.cudnn_not_supported" else None
    if big:
        # cuDNN indexes with 32-bit integers: past 2**31 elements in an input or output it refuses the call whatever the layout.
        cause += (f" Here {big}: a tensor (the layer's input or its output) past 2**31 elements is beyond cuDNN's 32-bit indexing, "
                  "so the size, not the layout, is the cause.")
        found.append(Fact("size", big))
        fixes.insert(0, remedy("cudnn-errors#split-under-int32-limit"))
    if outcome == "cuda.cudnn_execution_failed":
        # Its story names a build without kernels for this GPU (an old CUDA line on a newer card) as the other common cause.
        fixes.append(remedy("cudnn-errors#install-matching-build"))
    return hit(outcome, "cudnn_error", f"cuDNN error: {status}", cause, fixes, docs, found, 0.9,
               facts=Facts(names=(f"CUDNN_STATUS_{status}",), layer=layer, layer_kind=kind))


_CUBLAS_STATUSES = (
    StatusStory("cuda.cublas_no_memory", ("ALLOC_FAILED", "NOT_INITIALIZED"),
                "cuBLAS could not create its handle or allocate its workspace: almost always the GPU was already out of memory at that moment "
                "(an OOM in disguise), less often a CUDA/driver problem.", True),
    StatusStory("cuda.cublas_execution_failed", ("EXECUTION_FAILED",),
                "A cuBLAS GEMM kernel failed to run. Either an earlier asynchronous error surfaced here (an out-of-range index right before the "
                "matmul), or this cuBLAS/CUDA build cannot run on this GPU (a CUDA toolkit older than the GPU architecture), or the matrix sizes "
                "exceed what the kernel handles."),
    StatusStory("cuda.cublas_invalid_value", ("INVALID_VALUE",),
                "cuBLAS rejected a parameter of the GEMM: a matrix dimension is 0, negative or too large for 32-bit integers, strides or leading "
                "dimensions are inconsistent, or the PyTorch build and the CUDA/cuBLAS libraries it loads do not match."),
    StatusStory("cuda.cublas_not_supported", ("NOT_SUPPORTED",),
                "cuBLAS does not support this GEMM configuration on this GPU or library version: a data type the card lacks (bfloat16 or fp8 on "
                "older GPUs), a tensor-core path its architecture does not have, or batched shapes/strides the routine rejects."),
    StatusStory("cuda.cublas_arch_mismatch", ("ARCH_MISMATCH",),
                "The cuBLAS routine needs a newer GPU architecture than this card has (e.g. GemmEx with tensor cores on an old GPU)."),
    # Also the answer for statuses no other row explains.
    StatusStory("cuda.cublas_internal_error", ("INTERNAL_ERROR",),
                "cuBLAS failed internally. Commonly memory pressure, an earlier asynchronous failure, or a cuBLAS/driver mismatch.", True),
)


@rule(
    'cuda.cublas_error',
    category='cublas_error',
    docs=("cublas-errors", "async-cuda-errors", "device-side-assert"),
    reads=TORCH_OP,
    priority=23,
    outcomes=('cuda.cublas_no_memory', 'cuda.cublas_execution_failed', 'cuda.cublas_invalid_value', 'cuda.cublas_not_supported',
              'cuda.cublas_arch_mismatch', 'cuda.cublas_internal_error'),
    examples=(
        Example('captured/cuda/cublas-alloc-failed-replay-buffer-fills-gpu', 'cuda.cublas_no_memory'),
        Example('realworld/dev/densematching-cublas-alloc-failed-cpp-frames', 'cuda.cublas_no_memory'),
        Example('realworld/dev/rfbesrgan-cublas-alloc-failed-vscode', 'cuda.cublas_no_memory'),
        Example('corpus/cuda/cublas_not_initialized_create_handle.txt', 'cuda.cublas_no_memory'),
        Example('realworld/dev/cdn-cublas-sgemm-toolkit-version', 'cuda.cublas_execution_failed'),
        Example('realworld/dev/sparseconvnet-cublas-sgemm-rtx3080-cuda10', 'cuda.cublas_execution_failed'),
        Example('corpus/cuda/cublas_execution_failed_ltmatmul.txt', 'cuda.cublas_execution_failed'),
        Example('corpus/cuda/cublas_invalid_value_gemmex_fp16.txt', 'cuda.cublas_invalid_value'),
        Example('corpus/cuda/cublas_invalid_value_strided_batched.txt', 'cuda.cublas_invalid_value'),
        Example('corpus/cuda/cublas_not_supported_bf16_old_gpu.txt', 'cuda.cublas_not_supported'),
        Example('corpus/cuda/cublas_not_supported_sgemm_bmm.txt', 'cuda.cublas_not_supported'),
        Example('corpus/cuda/cublas_arch_mismatch_extension.txt', 'cuda.cublas_arch_mismatch'),
        Example('corpus/cuda/cublas_internal_error_backward.txt', 'cuda.cublas_internal_error'),
        Example('corpus/cuda/cublas_internal_error_create_handle_title.txt', 'cuda.cublas_internal_error'),
    ),
)
def cublas_error(ctx: Context) -> RuleHit | None:
    """``CUBLAS_STATUS_*`` (optionally ``when calling cublasSgemm(...)``)."""
    m = ctx.search(r"CUBLAS_STATUS_(\w+)")
    if not m:
        return None
    status = m.group(1)
    row = _status_story(_CUBLAS_STATUSES, status)
    call = ctx.search(r"when calling `?(cublas\w+|cublasLt\w+)|\"(cublas\w+)\(")
    call_name = (call.group(1) or call.group(2)) if call else None
    dtypes = tuple(dict.fromkeys({"CUDA_R_16BF": "bfloat16", "CUDA_R_16F": "float16", "CUDA_R_32F": "float32"}[d]
                                 for d in re.findall(r"CUDA_R_16BF|CUDA_R_16F|CUDA_R_32F", ctx.text)))
    found = [error_fact(ctx), Fact("status", f"CUBLAS_STATUS_{status}" + (f" in {call_name}" if call_name else ""))]
    cause = f"cuBLAS returned CUBLAS_STATUS_{status}" + (f" in `{call_name}`" if call_name else "") + ". " + row.story
    if row.outcome == "cuda.cublas_not_supported" and "bfloat16" in dtypes:
        cause += " The call works on bfloat16 (CUDA_R_16BF) data, which needs an Ampere-or-newer GPU for these kernels."
    if ctx.failure.cuda_asserts:
        a = ctx.failure.cuda_asserts[0]
        cause += f" The log also shows a kernel assertion in `{_kernel_label(a)}` (`{a.condition}`): fix that first; the cuBLAS error is its consequence."
        found.append(Fact("cuda_assert", f"{a.kernel}: {a.condition}"))
    fixes = [
        remedy("cublas-errors#run-step-on-cpu"),
        remedy("async-cuda-errors#localise-launch-blocking"),
        remedy("cublas-errors#check-matmul-sizes"),
    ]
    if row.memory_first:
        fixes.insert(0, remedy("cuda-oom#cublas-treat-as-oom"))
    if row.outcome in ("cuda.cublas_not_supported", "cuda.cublas_arch_mismatch"):
        if set(dtypes) & {"bfloat16", "float16"}:
            fixes.insert(0, remedy("cublas-errors#supported-dtype"))
        else:
            fixes.insert(0, remedy("cublas-errors#check-gpu-vs-build"))
    if row.outcome in ("cuda.cublas_execution_failed", "cuda.cublas_invalid_value"):
        fixes.append(remedy("cublas-errors#build-supports-gpu"))
    return hit(row.outcome, "cublas_error", f"cuBLAS error: {status}", cause, fixes, ("cublas-errors", "async-cuda-errors", "device-side-assert"), found, 0.9,
               facts=Facts(names=tuple(n for n in (f"CUBLAS_STATUS_{status}", call_name) if n), dtypes=dtypes, call=call_name))


# The whole computer (not the process) restarting or powering off under load: "my computer restarts", "the system restarts itself", "电脑就会重启".
_MACHINE_REBOOT = lazy_re(
    r"\b(?:computer|pc|machine|system|server|workstation|desktop)\b[^.\n]{0,25}?\b(?:restarts?|reboots?|restarting|rebooting|shuts? (?:itself )?down|shutting down|powers? off|turns? off)\b"
    r"|\b(?:cold|hard) (?:boots?|reboots?)\b|电脑[^。\n]{0,10}重启|(?:自动|突然)重启",
    re.I,
)


def _machine_reboot(ctx: Context, m: re.Match[str]) -> RuleHit:
    """The machine itself reboots or switches off while training: power, cooling or firmware, not Python."""
    found = [Fact("description", f"your words: \"{m.group(0)}\"")]
    cause = ("The whole computer restarts (or switches off) while training runs, with no Python error. A user program cannot reboot a machine, so "
             "this is the hardware or its firmware giving up under the sustained load of training (inference or testing loads the GPUs far less): "
             "most often a power supply that cannot deliver the GPUs' peak draw (its overload protection cuts power), overheating, a loose power "
             "cable or riser, or a motherboard BIOS/firmware problem.")
    fixes = [
        remedy("gpu-hardware-faults#check-power-supply"),
        remedy("gpu-hardware-faults#watch-temps-boot-logs"),
        remedy("gpu-hardware-faults#reseat-cables-bios"),
        remedy("gpu-hardware-faults#narrow-down-reboot"),
    ]
    return hit("cuda.hardware_machine_reboot", "hardware_error", "The computer restarts during training (hardware/power)", cause, fixes, ("gpu-hardware-faults",), found, 0.7,
               facts=Facts(flags=frozenset({"machine_reboot"})))


def _first_cuda_call(ctx: Context) -> bool:
    """Whether the failing code is the first touch of CUDA: a tensor created on it, a model moved to it, or CUDA's lazy init."""
    if any((fr.function or "") == "_lazy_init" for fr in ctx.failure.frames):
        return True
    src = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
    return bool(re.search(r"\.cuda\(|\.to\(|device\s*=|torch\.cuda\.(?:init|set_device|current_device)\(", src))


@rule(
    'cuda.hardware_error',
    category='hardware_error',
    docs=("gpu-hardware-faults",),
    reads=TORCH_OP,
    priority=EARLY,
    also=('cuda_unavailable',),
    outcomes=('cuda.hardware', 'cuda.hardware_ecc', 'cuda.hardware_launch_timeout', 'cuda.hardware_unknown_error', 'cuda.unknown_error_at_start',
              'cuda.hardware_machine_reboot'),
    examples=(
        Example('realworld/dev/returnn-gpu-unknown-error-pcie-dmesg', 'cuda.hardware'),
        Example('corpus/cuda/gpu_lost_nvidia_smi.txt', 'cuda.hardware'),
        Example('corpus/cuda/gpu_fallen_off_bus_dmesg.txt', 'cuda.hardware'),
        Example('corpus/cuda/xid_79_fallen_off_bus_line.txt', 'cuda.hardware'),
        Example('realworld/dev/aitoolkit-ecc-uncorrectable-runpod', 'cuda.hardware_ecc'),
        Example('realworld/dev/vllm-ecc-uncorrectable-hardware', 'cuda.hardware_ecc'),
        Example('corpus/cuda/launch_timed_out_watchdog.txt', 'cuda.hardware_launch_timeout'),
        Example('corpus/cuda/launch_timed_out_old_thc.txt', 'cuda.hardware_launch_timeout'),
        Example('corpus/cuda/unknown_error_mid_training.txt', 'cuda.hardware_unknown_error'),
        Example('corpus/cuda/unknown_error_first_cuda_tensor.txt', 'cuda.unknown_error_at_start'),
        Example('corpus/cuda/unknown_error_model_cuda.txt', 'cuda.unknown_error_at_start'),
        Example('realworld/dev/mmdet-train-restarts-computer-bios', 'cuda.hardware_machine_reboot'),
        Example('corpus/cuda/machine_restarts_dual_gpu_darknet.txt', 'cuda.hardware_machine_reboot'),
        Example('corpus/cuda/machine_reboots_itself_spacy_gpu.txt', 'cuda.hardware_machine_reboot'),
        Example('corpus/cuda/machine_restarts_chinese_train_py.txt', 'cuda.hardware_machine_reboot'),
    ),
)
def hardware_error(ctx: Context) -> RuleHit | None:
    """ECC errors, GPUs falling off the bus, Xid events, watchdog launch timeouts."""
    raw = ctx.failure.text or ctx.text
    m = re.search(r"uncorrectable ECC error|ECC error encountered|fallen off the bus|GPU is lost|Xid[ :(]+(?:PCI:[\w:.]+\)?[: ]*)?(\d+)|uncorrectable NVLink error"
                  r"|the launch timed out and was terminated|GPU Reset|hardware stack error|CUDA error: unknown error|Unable to determine the device handle"
                  r"|PCIe Bus Error|\bAER: ", raw, re.I)
    if not m:
        reboot = None if ctx.failure.exc_type else _MACHINE_REBOOT.search(raw)
        return _machine_reboot(ctx, reboot) if reboot else None
    xid = int(m.group(1)) if m.group(1) else None
    text = f"Xid {xid}" if xid is not None else m.group(0)
    found = [error_fact(ctx), Fact("hardware", text.strip())]
    numbers = {"xid": float(xid)} if xid is not None else {}
    if "timed out" in text:
        outcome, title = "cuda.hardware_launch_timeout", "GPU watchdog timeout"
        cause = ("The kernel was killed by the display watchdog: this GPU also drives a display (or runs under Windows' WDDM driver), and one kernel ran "
                 "longer than the operating system allows. It is a configuration limit, not a fault in your tensors.")
        fixes = [
            remedy("gpu-hardware-faults#headless-gpu"),
            remedy("gpu-hardware-faults#shorter-kernels"),
        ]
    elif "unknown error" in text.lower() and _first_cuda_call(ctx):
        cause = ("CUDA reported an unknown error at the first CUDA call (creating a tensor on the GPU or moving the model there), i.e. CUDA "
                 "could not be initialised. That is an environment problem rather than your code: a driver that does not match the CUDA "
                 "version of this PyTorch build (one of them upgraded without the other, or without a reboot), a driver left in a bad state "
                 "(after a crash or a suspend/resume), or a Windows/WSL or container setup without working GPU access.")
        fixes = [remedy("cuda-unavailable#test-cuda-alone"),
                 remedy("cuda-unavailable#reset-driver-state"),
                 remedy("cuda-unavailable#matching-torch-build")]
        return hit("cuda.unknown_error_at_start", "cuda_unavailable", "CUDA could not start (unknown error)", cause, fixes, ("cuda-unavailable", "gpu-hardware-faults"), found, 0.8,
                   facts=Facts(names=(text.strip(),)))
    elif "unknown error" in text.lower():
        outcome, title = "cuda.hardware_unknown_error", "CUDA unknown error"
        cause = ("CUDA reported an unknown error in the middle of the work: most often a GPU or driver fault (the kernel log shows Xid messages), "
                 "overheating or an unstable power supply, less often a consequence of an earlier crash in the same process or of memory "
                 "pressure in a shared GPU (e.g. under WSL).")
        fixes = [remedy("gpu-hardware-faults#check-gpu-health"),
                 remedy("async-cuda-errors#rule-out-software-cause")]
    elif re.search(r"ECC", text, re.I) or xid in (48, 63, 64, 92, 94, 95):
        outcome, title = "cuda.hardware_ecc", "GPU memory ECC error"
        cause = ("The GPU's memory reported an uncorrectable ECC error: a bit flip the hardware could not repair, so the data on the card can no "
                 "longer be trusted. No code change fixes this; the same job will likely pass on a healthy GPU. If it repeats on one card, that "
                 "card needs a reset, page retirement or replacement.")
        fixes = [
            remedy("gpu-hardware-faults#retire-gpu"),
            remedy("gpu-hardware-faults#resume-on-healthy-hardware"),
        ]
    else:
        outcome, title = "cuda.hardware", "GPU hardware fault"
        cause = ("The GPU stopped responding to the system (" + text.strip() + "): it fell off the PCIe bus or the driver lost it. No code change "
                 "fixes this; common causes are power delivery (PSU or cabling), overheating, a loose card or riser, or PCIe link errors. The job "
                 "will likely pass on a healthy device; if it repeats on one node only, that node needs attention.")
        fixes = [
            remedy("gpu-hardware-faults#check-kernel-log"),
            remedy("gpu-hardware-faults#resume-on-healthy-hardware"),
        ]
    return hit(outcome, "hardware_error", title, cause, fixes, ("gpu-hardware-faults",), found, 0.88,
               facts=Facts(names=(text.strip(),), numbers=numbers))


# CUDA_VISIBLE_DEVICES takes comma-separated indices or UUIDs; a list literal, a torch device string or a name makes CUDA see no GPU.
_BAD_VISIBLE_DEVICES = lazy_re(r"CUDA_VISIBLE_DEVICES['\"]?\]?\s*=\s*['\"]?(\[[^\]\n]{0,40}\]|\([^)\n]{0,40}\)|\{[^}\n]{0,40}\}|cuda:\d+|gpu:?\d+)", re.I)
_NO_GPU_SYMPTOM = lazy_re(r"CUDNN_STATUS_\w+|CUBLAS_STATUS_\w+|No CUDA GPUs are available|no CUDA-capable device is detected|invalid device ordinal", re.I)


@rule(
    'cuda.visible_devices_invalid',
    category='cuda_unavailable',
    docs=("cuda-unavailable", "cudnn-errors"),
    reads=TORCH_OP,
    priority=15,
    also=('cudnn_error', 'cublas_error'),
    outcomes=('cuda.visible_devices_invalid',),
    examples=(
        Example('corpus/cuda/cudnn_internal_error_visible_devices_brackets.txt', 'cuda.visible_devices_invalid'),
    ),
)
def visible_devices_invalid(ctx: Context) -> RuleHit | None:
    """CUDA_VISIBLE_DEVICES written in a form CUDA cannot parse (brackets, a device string): no GPU is visible."""
    raw = ctx.failure.text or ctx.text
    bad = _BAD_VISIBLE_DEVICES.search(raw)
    symptom = _NO_GPU_SYMPTOM.search(raw) if bad else None
    if not bad or not symptom:
        return None
    value = bad.group(1)
    indices = ",".join(re.findall(r"\d+", value)) or "0"
    sym = symptom.group(0)
    category = "cudnn_error" if sym.upper().startswith("CUDNN") else "cublas_error" if sym.upper().startswith("CUBLAS") else "cuda_unavailable"
    found = [Fact("environment", f"CUDA_VISIBLE_DEVICES is set to {value}"), Fact("error", sym)]
    cause = (f"CUDA_VISIBLE_DEVICES is set to `{value}`, which is not valid syntax: CUDA expects comma-separated GPU indices (or UUIDs) with no "
             "brackets, quotes inside the value or device names, and stops reading at the first character it cannot parse. So no GPU is "
             f"visible to the process, and the first library that needs one fails ({sym}) instead of saying so.")
    fixes = [
        remedy("cuda-unavailable#visible-devices-syntax", indices=indices),
        remedy("cuda-unavailable#check-visible-devices"),
    ]
    return hit("cuda.visible_devices_invalid", category, "Invalid CUDA_VISIBLE_DEVICES: no GPU visible", cause, fixes, ("cuda-unavailable", "cudnn-errors"),
               found, 0.88, facts=Facts(names=(value, sym)))


# cudaErrorSystemNotReady (802), in the wordings of the old THC checks, the runtime's error string and the device-count warning.
_SYSTEM_NOT_READY = lazy_re(r"system not yet initiali[sz]ed|cudaErrorSystemNotReady|CUDA_ERROR_SYSTEM_NOT_READY|\berror[ =:]+802\b|\(802\)", re.I)


@rule(
    'cuda.system_not_ready',
    category='cuda_unavailable',
    docs=("cuda-unavailable",),
    reads=TORCH_OP,
    priority=13,
    outcomes=('cuda.system_not_ready',),
    examples=(
        Example('corpus/cuda/system_not_yet_initialized_802_thc.txt', 'cuda.system_not_ready'),
        Example('corpus/cuda/system_not_yet_initialized_802_getdevicecount.txt', 'cuda.system_not_ready'),
        Example('corpus/cuda/system_not_yet_initialized_802_warning_a100.txt', 'cuda.system_not_ready'),
    ),
)
def system_not_ready(ctx: Context) -> RuleHit | None:
    """CUDA error 802 "system not yet initialized": the GPU fabric of an NVSwitch server is not up."""
    raw = ctx.failure.text or ctx.text
    m = _SYSTEM_NOT_READY.search(raw)
    if not m:
        return None
    found = [Fact("error", m.group(0))]
    cause = ("CUDA error 802, “system not yet initialized” (cudaErrorSystemNotReady): the driver sees the GPUs but the system is not ready to "
             "run work on them. On servers whose GPUs are linked by NVSwitch (DGX/HGX-class machines, e.g. with A100 or H100 SXM cards) that "
             "means the NVIDIA Fabric Manager service is not installed, not running, or of another version than the driver; CUDA refuses to "
             "start until it is. It is not a PyTorch or CUDA-toolkit problem, so reinstalling them does not help.")
    fixes = [
        remedy("cuda-unavailable#check-fabric-manager"),
        remedy("cuda-unavailable#install-fabric-manager"),
        remedy("cuda-unavailable#restart-driver-no-nvswitch"),
    ]
    return hit("cuda.system_not_ready", "cuda_unavailable", "CUDA system not yet initialized (error 802)", cause, fixes, ("cuda-unavailable",), found, 0.85,
               facts=Facts(names=("cudaErrorSystemNotReady",)))
