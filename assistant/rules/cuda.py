"""CUDA runtime failures: device-side asserts, illegal accesses, cuDNN/cuBLAS statuses, hardware faults.

CUDA reports kernel failures asynchronously, so the Python line in the traceback is often not the
operation that failed. Every rule here says so and says how to localise the real one.
"""

from __future__ import annotations

import re

from assistant.rules.registry import Example, rule
from assistant.rules.base import Context, error_fact, fix, hit, location_fact
from assistant.types import CudaAssert, Fact, Fix, RuleHit

_ASYNC_NOTE = ("CUDA kernels run asynchronously, so the error is raised at a later synchronising call: the Python line in the traceback "
               "may not be the operation that failed.")


def _localise_fixes() -> list[Fix]:
    return [
        fix("Re-run with synchronous launches to find the real operation", "The traceback then points at the kernel that failed (slower; debugging only). `torchhelp run --rerun-blocking` does this for you.", "CUDA_LAUNCH_BLOCKING=1 python train.py", "async-cuda-errors"),
        fix("Or run the same batch on the CPU", "CPU kernels check indices eagerly and raise a readable IndexError/RuntimeError with the offending value.", "model.cpu()(x.cpu())", "async-cuda-errors"),
    ]


def _assert_story(a: CudaAssert) -> tuple[str, str, list[Fix]]:
    """What a kernel assertion means, from the kernel name and condition."""
    k = f"{a.source_file} {a.kernel} {a.condition}"
    if re.search(r"nll_loss|ClassNLLCriterion|Loss\.cu|t >= 0 && t < n_classes|cross_entropy", k, re.I) and "input_val" not in k:
        return ("label out of range in the loss",
                f"The loss kernel `{a.kernel}` found a target label outside [0, n_classes) (assertion `{a.condition}`). A label equals the number of "
                "classes (labels numbered 1..C instead of 0..C-1), is negative (e.g. -1 padding without ignore_index), or the output layer has fewer "
                "classes than the data.",
                [fix("Check the label range against the model's output size", "Labels must satisfy 0 <= y < num_classes; the final layer's out_features must be num_classes.", "print(y.min().item(), y.max().item(), logits.shape[-1])\nassert 0 <= y.min() and y.max() < logits.shape[-1]", "device-side-assert"),
                 fix("Shift 1-based labels, or mark padding with ignore_index", "", "loss = F.cross_entropy(logits, y - 1)\n# or: nn.CrossEntropyLoss(ignore_index=-100) with padding set to -100", "device-side-assert")])
    if re.search(r"input_val >= zero && input_val <= one|binary_cross_entropy", k):
        return ("BCE input outside [0, 1]",
                f"binary_cross_entropy's kernel found an input outside [0, 1] (assertion `{a.condition}`): it was given raw logits (or NaN) instead of probabilities.",
                [fix("Use BCEWithLogitsLoss on raw logits", "It applies the sigmoid internally and is numerically stable.", "loss = F.binary_cross_entropy_with_logits(logits, target)", "device-side-assert")])
    if re.search(r"vectorized_gather|IndexKernelUtils", k):
        return ("index out of range in an embedding/index_select gather",
                f"The gather kernel `{a.kernel}` read an index outside the indexed dimension (assertion `{a.condition}`). This kernel serves nn.Embedding "
                "lookups and index_select: most often a token id >= num_embeddings (a tokenizer vocabulary larger than the embedding table, added special "
                "tokens, ids from another tokenizer, or positions beyond max_position_embeddings), otherwise an index tensor with an off-by-one.",
                [fix("Compare the largest id with the embedding size", "", "print(ids.min().item(), ids.max().item(), model.embed.num_embeddings)", "device-side-assert"),
                 fix("Size the embedding from the vocabulary (and positions from the max length)", "With Hugging Face models after adding tokens: model.resize_token_embeddings(len(tokenizer)).", "emb = nn.Embedding(len(vocab), dim)", "index-out-of-range")])
    if re.search(r"indexSelect|Indexing\.cu|Embedding|srcIndex < srcSelectDimSize|index_select", k, re.I):
        return ("index out of range in index_select/embedding",
                f"`{a.kernel}` read an index outside the table (assertion `{a.condition}`). For nn.Embedding this means a token id >= num_embeddings: "
                "the tokenizer's vocabulary is larger than the embedding table, special/padding tokens were added without resizing, or ids are negative.",
                [fix("Compare the largest id with the embedding size", "", "print(ids.max().item(), model.embed.num_embeddings)", "device-side-assert"),
                 fix("Resize the embedding to the vocabulary", "With Hugging Face models after adding tokens: model.resize_token_embeddings(len(tokenizer)).", "emb = nn.Embedding(len(vocab), dim)", "index-out-of-range")])
    if re.search(r"ScatterGather|scatter|gather|idx_dim", k, re.I):
        return ("gather/scatter index out of range",
                f"`{a.kernel}` got an index outside the dimension it indexes (assertion `{a.condition}`).",
                [fix("Check index bounds before gather/scatter", "", "assert idx.min() >= 0 and idx.max() < src.size(dim)", "index-out-of-range")])
    if re.search(r"IndexKernel|index out of bounds|-sizes\[i\] <= index", k, re.I):
        return ("tensor index out of range",
                f"An indexing kernel (`{a.kernel}`) got an index outside the tensor (assertion `{a.condition}`): advanced indexing with a tensor of indices that contains a value >= the dimension size (or < -size).",
                [fix("Check the index tensor's range", "", "assert idx.min() >= -t.size(0) and idx.max() < t.size(0)", "index-out-of-range")])
    if re.search(r"multinomial|cumdist|0 <= p4 && p4 <= 1|p >= 0", k, re.I):
        return ("invalid probabilities for sampling",
                f"A sampling kernel (`{a.kernel}`) got probabilities that are negative, NaN or Inf (assertion `{a.condition}`).",
                [fix("Sample from softmax of finite logits", "", "probs = torch.softmax(logits.float(), -1)\nassert torch.isfinite(probs).all()", "nan-inf-anomaly")])
    return ("kernel assertion",
            f"The kernel `{a.kernel}` in {a.source_file} failed the assertion `{a.condition}`: an input violates what that kernel requires (most often an index or label out of range).",
            [])


@rule(
    'cuda.device_side_assert',
    category='device_side_assert',
    docs=("cudnn-errors", "async-cuda-errors", "cuda-oom"),
    priority=212,
    outcomes=('cuda.device_side_assert',),
    examples=(),
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
    if ctx.failure.cuda_asserts:
        a = ctx.failure.cuda_asserts[0]
        short, story, specific = _assert_story(a)
        threads = sum(x.count for x in ctx.failure.cuda_asserts if x.kernel == a.kernel)
        found.append(Fact("cuda_assert", f"{a.source_file.rsplit('/', 1)[-1]}:{a.line} in `{a.kernel}`: Assertion `{a.condition}` failed ({threads} thread report(s))"))
        cause = f"{story} {_ASYNC_NOTE}"
        fixes.extend(specific)
        title = f"CUDA device-side assert: {short}"
        if "index" in short:
            docs.append("index-out-of-range")
    else:
        cause = ("A CUDA kernel hit an internal assertion. Without the kernel's assertion line (printed to stderr before the Python traceback; look for "
                 "`Assertion ... failed`), the usual causes in order are: a class label outside [0, num_classes) in cross_entropy/nll_loss, an "
                 "embedding/index_select index >= the table size, a gather/scatter index out of range, or BCE inputs outside [0, 1]. " + _ASYNC_NOTE)
        fixes.append(fix("Check labels and indices first", "These are behind most device-side asserts.", "assert 0 <= y.min() and y.max() < num_classes\nassert ids.max() < embedding.num_embeddings", "device-side-assert"))
        title = "CUDA device-side assert triggered"
    fixes.extend(_localise_fixes())
    fixes.append(fix("Restart the process after fixing", "After a device-side assert the CUDA context is unusable; every later CUDA call fails too.", None, "async-cuda-errors"))
    loc = location_fact(ctx)
    if loc:
        found.append(Fact("location", loc.text + " (reported line; may not be the failing op)"))
    return hit("cuda.device_side_assert", "device_side_assert", title, cause, fixes, docs, found, 0.95)


@rule(
    'cuda.illegal_memory_access',
    category='illegal_memory_access',
    docs=("illegal-memory-access", "async-cuda-errors"),
    priority=213,
    outcomes=('cuda.illegal_memory_access',),
    examples=(),
)
def illegal_memory_access(ctx: Context) -> RuleHit | None:
    """Illegal address, misaligned address, unspecified launch failure."""
    m = ctx.search(r"an illegal memory access was encountered|misaligned address|unspecified launch failure|CUDA_ERROR_ILLEGAL_ADDRESS|cudaErrorIllegalAddress|CUDA_ERROR_MISALIGNED_ADDRESS|an illegal instruction was encountered|illegal address")
    if not m or ctx.search(r"CUBLAS_STATUS|CUDNN_STATUS"):
        return None
    kind = m.group(0)
    files = " ".join(f.file for f in ctx.failure.frames) + " " + ctx.text
    custom = re.search(r"triton|cpp_extension|load_inline|_C\.so|\.cu\b|custom|cupy|numba", files, re.I)
    found = [error_fact(ctx)]
    if "misaligned" in kind:
        cause = ("A kernel read or wrote memory at an address not aligned for the access width (e.g. a float4/128-bit vector load from an offset "
                 "that is not a multiple of 16 bytes). It comes from custom kernels that vectorise loads on sliced or non-contiguous tensors, "
                 "or storage offsets that break alignment assumptions.")
        fixes = [
            fix("Pass contiguous, aligned tensors to custom kernels", "Slices (x[:, 1:]) keep a storage offset; .contiguous() copies into a fresh aligned buffer.", "x = x.contiguous()", "illegal-memory-access"),
            fix("Check alignment before vectorised loads", "Fall back to scalar loads when data_ptr() % 16 != 0.", "assert x.data_ptr() % 16 == 0", "illegal-memory-access"),
        ]
    else:
        cause = ("A GPU kernel accessed memory outside any valid allocation. "
                 + ("The traceback involves a custom kernel (Triton/C++/CUDA extension): its index arithmetic most likely reads past the end of a tensor — a missing bounds mask, a wrong stride assumption for a non-contiguous input, or an int32 offset overflow on large tensors. "
                    if custom else
                    "In plain PyTorch code this usually comes from out-of-range indices in an op that does not check them, a custom or third-party extension kernel "
                    "(Triton/CUDA) whose index or stride arithmetic is wrong — the error often surfaces at a later, innocent line — or a library bug; it can also follow an earlier asynchronous error. ")
                 + _ASYNC_NOTE)
        fixes = [
            fix("Find the faulting kernel with compute-sanitizer", "It reports the kernel, thread and address of the bad access.", "compute-sanitizer --tool memcheck python repro.py", "illegal-memory-access"),
            fix("Bounds-check custom kernels", "In Triton, mask every load/store with the valid range; in CUDA C++, guard with `if (i < n)` and use int64 offsets for big tensors.", "x = tl.load(ptr + offs, mask=offs < n_elements)", "illegal-memory-access"),
            fix("Make inputs contiguous", "Kernels that assume a contiguous layout read the wrong addresses on transposed or sliced tensors.", "x = x.contiguous()", "illegal-memory-access"),
        ]
    fixes.extend(_localise_fixes())
    fixes.append(fix("Restart the process", "The CUDA context is corrupted after this error; nothing on this GPU works until the process exits.", None, "illegal-memory-access"))
    title = "CUDA misaligned address" if "misaligned" in kind else "CUDA illegal memory access"
    return hit("cuda.illegal_memory_access", "illegal_memory_access", title, cause, fixes, ("illegal-memory-access", "async-cuda-errors"), found + ([location_fact(ctx)] if location_fact(ctx) else []), 0.93)


_CUDNN_STORIES = {
    "NOT_INITIALIZED": "cuDNN could not create its handle. This almost always means the GPU was already out of memory at that moment (cuDNN needs workspace), or the cuDNN library does not match the driver/PyTorch build.",
    "EXECUTION_FAILED": "A cuDNN kernel failed while running. Often an earlier asynchronous error (an out-of-range index, a device-side assert) surfaces here, or the input is unusually large/shaped; sometimes it is a cuDNN bug for that configuration.",
    "BAD_PARAM": "cuDNN rejected the call's parameters: an unsupported shape/dtype/layout combination, or a non-contiguous input.",
    "NOT_SUPPORTED": "cuDNN has no algorithm for this configuration — often a non-contiguous input, an unusual dtype/layout, or a tensor too large for 32-bit indexing.",
    "MAPPING_ERROR": "cuDNN could not access GPU memory; usually a consequence of an earlier illegal access or memory corruption, sometimes of OOM.",
    "INTERNAL_ERROR": "cuDNN hit an internal error; commonly memory pressure or an earlier asynchronous failure.",
    "ALLOC_FAILED": "cuDNN could not allocate its workspace: the GPU is out of memory.",
    "ARCH_MISMATCH": "This cuDNN build does not support the GPU's architecture.",
    "LICENSE_ERROR": "cuDNN license check failed.",
}


@rule(
    'cuda.cudnn_error',
    category='cudnn_error',
    docs=("cudnn-errors", "async-cuda-errors", "cuda-oom"),
    priority=210,
    outcomes=('cuda.cudnn', 'cuda.cudnn_rnn_eval'),
    examples=(),
)
def cudnn_error(ctx: Context) -> RuleHit | None:
    """``cuDNN error: CUDNN_STATUS_*`` and friends, with what usually hides behind each status."""
    m = ctx.search(r"CUDNN_STATUS_(\w+)")
    other = ctx.search(r"Unable to find a valid cuDNN algorithm to run convolution|cudnn RNN backward can only be called in training mode|GET was unable to find an engine to execute this computation|FIND was unable to find an engine")
    if not (m or other):
        return None
    found = [error_fact(ctx)]
    docs = ("cudnn-errors", "async-cuda-errors", "cuda-oom")
    if other and not m:
        text = other.group(0)
        if "training mode" in text:
            cause = "cuDNN's RNN backward only works in training mode; backward was called on an LSTM/GRU while the model is in eval() mode."
            fixes = [fix("Call model.train() before the backward pass (or disable cuDNN for that RNN)", "", "model.train()\n# or: with torch.backends.cudnn.flags(enabled=False): loss.backward()", "cudnn-errors")]
            return hit("cuda.cudnn_rnn_eval", "cudnn_error", "cuDNN RNN backward in eval mode", cause, fixes, docs[:1], found, 0.93)
        cause = ("cuDNN found no algorithm for this convolution. In practice this is usually out-of-memory in disguise (no algorithm fits the free workspace), "
                 "or an unsupported shape/dtype combination.")
        status = "NO_ALGORITHM"
    else:
        status = m.group(1)  # type: ignore[union-attr]
        cause = f"cuDNN returned CUDNN_STATUS_{status}. " + _CUDNN_STORIES.get(status, "cuDNN rejected or failed the call.")
    found.append(Fact("status", f"CUDNN_STATUS_{status}" if status != "NO_ALGORITHM" else "no valid cuDNN algorithm"))
    if ctx.failure.cuda_asserts:
        a = ctx.failure.cuda_asserts[0]
        cause += f" The log also shows a kernel assertion in `{a.kernel}` (`{a.condition}`): that earlier failure is the real cause."
        found.append(Fact("cuda_assert", f"{a.kernel}: {a.condition}"))
    fixes = [
        fix("Get the real error by disabling cuDNN once", "With cuDNN off, PyTorch's native kernels run and usually raise a precise error (or reveal OOM).", "torch.backends.cudnn.enabled = False", "cudnn-errors"),
        fix("Rule out out-of-memory", "Lower the batch size; print torch.cuda.memory_summary() just before the failing call.", None, "cuda-oom"),
        fix("Localise with synchronous launches", "", "CUDA_LAUNCH_BLOCKING=1 python train.py", "async-cuda-errors"),
        fix("Make inputs contiguous and of a supported dtype", "", "x = x.contiguous()", "cudnn-errors"),
    ]
    if status in ("NOT_INITIALIZED", "ALLOC_FAILED", "NO_ALGORITHM", "INTERNAL_ERROR"):
        fixes.insert(0, fixes.pop(1))
    return hit("cuda.cudnn", "cudnn_error", f"cuDNN error: {status}", cause, fixes, docs, found, 0.9)


_CUBLAS_STORIES = {
    "ALLOC_FAILED": "cuBLAS could not allocate memory (for its handle or workspace): the GPU is out of memory — this is an OOM in disguise.",
    "NOT_INITIALIZED": "cuBLAS could not initialise: usually out of GPU memory at handle creation, or a CUDA/driver problem.",
    "EXECUTION_FAILED": "A cuBLAS GEMM kernel failed. The classic hidden cause is an earlier asynchronous error — typically an nn.Embedding index out of range right before the matmul — or a dtype/shape combination this GPU/library cannot run.",
    "INVALID_VALUE": "cuBLAS rejected a parameter: a matrix dimension is 0, negative or too large for 32-bit integers, or strides/leading dimensions are inconsistent (often a batch or sequence dimension that is far larger than intended).",
    "NOT_SUPPORTED": "The GEMM's dtype combination is not supported on this GPU/cuBLAS (e.g. bf16/fp8 on an older GPU).",
    "INTERNAL_ERROR": "cuBLAS hit an internal error; commonly memory pressure, an earlier asynchronous failure, or a cuBLAS/driver mismatch.",
    "ARCH_MISMATCH": "This cuBLAS does not support the GPU architecture.",
    "MAPPING_ERROR": "cuBLAS could not access GPU memory (memory corruption from an earlier error).",
}


@rule(
    'cuda.cublas_error',
    category='cublas_error',
    docs=("cublas-errors", "async-cuda-errors", "device-side-assert"),
    priority=211,
    outcomes=('cuda.cublas',),
    examples=(),
)
def cublas_error(ctx: Context) -> RuleHit | None:
    """``CUBLAS_STATUS_*`` (optionally ``when calling cublasSgemm(...)``)."""
    m = ctx.search(r"CUBLAS_STATUS_(\w+)")
    if not m:
        return None
    status = m.group(1)
    call = ctx.search(r"when calling `?(cublas\w+|cublasLt\w+)")
    found = [error_fact(ctx), Fact("status", f"CUBLAS_STATUS_{status}" + (f" in {call.group(1)}" if call else ""))]
    cause = f"cuBLAS returned CUBLAS_STATUS_{status}" + (f" in `{call.group(1)}`" if call else "") + ". " + _CUBLAS_STORIES.get(status, "cuBLAS failed.")
    if ctx.failure.cuda_asserts:
        a = ctx.failure.cuda_asserts[0]
        cause += f" The log also shows a kernel assertion in `{a.kernel}` (`{a.condition}`): fix that first; the cuBLAS error is its consequence."
        found.append(Fact("cuda_assert", f"{a.kernel}: {a.condition}"))
    fixes = [
        fix("Run the failing step on the CPU to get a precise error", "An out-of-range embedding index or a shape bug raises a clear exception on the CPU.", "out = model.cpu()(x.cpu())", "cublas-errors"),
        fix("Localise with synchronous launches", "", "CUDA_LAUNCH_BLOCKING=1 python train.py", "async-cuda-errors"),
        fix("Check embedding indices and matmul sizes", "ids.max() < num_embeddings; no dimension should be 0 or in the billions.", "print(ids.max().item(), emb.num_embeddings, a.shape, b.shape)", "cublas-errors"),
    ]
    if status in ("ALLOC_FAILED", "NOT_INITIALIZED"):
        fixes.insert(0, fix("Treat it as out of memory", "Reduce batch size or free memory; the allocation for cuBLAS's workspace failed.", "print(torch.cuda.memory_summary())", "cuda-oom"))
    if status == "NOT_SUPPORTED":
        fixes.insert(0, fix("Use a dtype this GPU supports", "e.g. float16 instead of bfloat16 on pre-Ampere GPUs.", "torch.cuda.is_bf16_supported()", "cublas-errors"))
    return hit("cuda.cublas", "cublas_error", f"cuBLAS error: {status}", cause, fixes, ("cublas-errors", "async-cuda-errors", "device-side-assert"), found, 0.9)


@rule(
    'cuda.hardware_error',
    category='hardware_error',
    docs=("gpu-hardware-faults",),
    priority=100,
    outcomes=('cuda.hardware',),
    examples=(),
)
def hardware_error(ctx: Context) -> RuleHit | None:
    """ECC errors, GPUs falling off the bus, Xid events, watchdog launch timeouts."""
    m = ctx.search(r"uncorrectable ECC error|ECC error encountered|fallen off the bus|GPU is lost|Xid[ :(]+(\d+)|uncorrectable NVLink error|the launch timed out and was terminated|GPU Reset|hardware stack error|CUDA error: unknown error|Unable to determine the device handle|PCIe Bus Error|\bAER: ", re.I)
    if not m:
        return None
    text = m.group(0)
    found = [error_fact(ctx), Fact("hardware", text)]
    if "timed out" in text:
        cause = ("The kernel was killed by the display watchdog: the GPU also drives a display and a kernel ran longer than the OS allows. "
                 "This is a configuration limit, not a fault in your tensors.")
        fixes = [fix("Use a GPU without a display or smaller kernels", "Lower batch size so each kernel finishes sooner, or run headless.", None, "gpu-hardware-faults")]
    elif "unknown error" in text.lower():
        cause = ("CUDA reported an unknown error: most often a GPU or driver fault (check `dmesg` for Xid messages), less often a consequence of an earlier crash in the same process.")
        fixes = [fix("Check the node's GPU health", "Look for Xid events and ECC counters; rerun on another node to see if it follows the hardware.", "dmesg | grep -i xid\nnvidia-smi -q -d ECC", "gpu-hardware-faults")]
    else:
        cause = ("The GPU reported a hardware-level fault (" + text + "). No code change fixes this: the GPU, its memory or its interconnect failed, "
                 "and the same job will likely pass on a healthy device. If it repeats on one node only, that node needs attention.")
        fixes = [
            fix("Take the node out of rotation and report it", "Check `nvidia-smi -q -d ECC` and `dmesg` Xid codes (48: double-bit ECC, 79: fallen off the bus, 94/95: contained/uncontained ECC).", "nvidia-smi -q -d ECC,PAGE_RETIREMENT\ndmesg | grep -i xid", "gpu-hardware-faults"),
            fix("Resume from the last checkpoint on healthy hardware", "Save checkpoints regularly so a hardware fault costs minutes, not the whole run.", None, "gpu-hardware-faults"),
        ]
    return hit("cuda.hardware", "hardware_error", "GPU hardware fault" if "timed out" not in text else "GPU watchdog timeout", cause, fixes, ("gpu-hardware-faults",), found, 0.88)
