"""Build ``eval/atlas/gpu_probes.jsonl``: real PyTorch failures that only happen on a CUDA GPU, for the error atlas.

    python scripts/build_atlas_gpu_probes.py                      # run every snippet (needs a CUDA GPU), write the set
    python scripts/build_atlas_gpu_probes.py --only ID ...        # run some snippets and print their stderr (writes nothing)
    python scripts/build_atlas_gpu_probes.py --check-knowledge    # no GPU: which knowledge files quote each expected message

The GPU counterpart of ``scripts/build_atlas_probes.py`` (80 CPU failures). Each probe is a small snippet that uses a
real PyTorch CUDA API wrongly, the way a user would: kernel device-side assertions of many ops, CUDA-only dispatch
gaps, cuBLAS/cuSPARSE-backed checks, events, CUDA graph capture, the caching allocator's configuration, NCCL on one
GPU, NVRTC (jiterator), cross-device checks that only a CUDA tensor reaches. The snippets were chosen for breadth (at
most two per op) and for messages that the knowledge documents do not list: each candidate's expected message was
checked against every file under ``knowledge/`` by plain, case-insensitive string search (``--check-knowledge``), and
the ones a document already quotes were left out (a device-side assert's generic line "CUDA error: device-side assert
triggered" is quoted, of course; what was checked is the kernel's own assertion text). The rules were not consulted.

``category`` is the taxonomy id (``assistant.types.CATEGORIES``) a PyTorch expert gives by what the user must fix.
Every label below was written from the snippet and its (expected) message only, before torchhelp was run on any of
them, and is not to be changed after seeing torchhelp's answers. A snippet that does not fail with the expected
message is dropped and reported, never relabelled. Conventions: those of ``scripts/build_atlas_probes.py`` (a
size/shape configuration is shape_mismatch; a bad argument value, mode or combination is python_error; a CUDA-only
dtype dispatch gap is dtype_mismatch), and, from the knowledge documents' own categories for these families: a
kernel device-side assertion is device_side_assert whatever value tripped it; misuse of CUDA graph capture is
compile_error (``knowledge/cuda/cuda-graph-capture-errors.md``), as is a failed NVRTC kernel compile; asking for a
GPU the machine does not have is cuda_unavailable (``cuda-device-ordering.md``); a bad ``PYTORCH_CUDA_ALLOC_CONF`` is
environment_error; misuse of the NCCL backend is nccl_error (``nccl-errors.md``, ``gloo-errors.md``); exporting a
tensor that requires grad is no_grad_fn (``detach-numpy.md``).

Running: on a machine with one CUDA GPU, with only the standard library and torch (no torchhelp dependencies).
Each snippet runs as ``<id>.py`` in ``$TMPDIR/torchhelp-atlas-gpu-probes`` (stable paths in the tracebacks) with the
current interpreter, in parallel, with a timeout; snippets marked ``blocking`` (the kernel assertions) run with
``CUDA_LAUNCH_BLOCKING=1`` so that the traceback points at the op. ``error_text`` is what a user would paste: the
first two kernel assertion lines printed before the traceback (a failing kernel prints one per thread), if any, then
the stderr's last traceback, verbatim; at most 40 lines together. Each row also records the GPU, driver, torch and
CUDA versions it was produced with (``env``); ``--report`` writes every probe's status, the dropped ones with their
stderr tail.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "eval" / "atlas" / "gpu_probes.jsonl"
REPORT = ROOT / "eval" / "atlas" / "gpu_probes-run.json"
RUN_DIR = Path(tempfile.gettempdir()) / "torchhelp-atlas-gpu-probes"
MAX_LINES = 40
MAX_ASSERT_LINES = 2
MAX_PER_OP = 2
TIMEOUT_S = 90

P: list[dict] = []


def probe(id: str, op: str, category: str, expect: str, why: str, snippet: str, blocking: bool = False) -> None:
    P.append({"id": id, "op": op, "category": category, "expect": expect, "why": why,
              "snippet": snippet.strip("\n") + "\n", "blocking": blocking})


# ------------------------------------------------------------------------------- kernel device-side assertions
probe("index_copy_row_oob", "Tensor.index_copy_", "device_side_assert", "index_copy_(): index out of bounds",
      "index_copy_ into 5 rows with row id 5: CUDA checks the ids inside the kernel; ids must be in [0, 5).", """
import torch
dst = torch.zeros(5, 3, device="cuda")
rows = torch.tensor([0, 2, 5], device="cuda")
dst.index_copy_(0, rows, torch.ones(3, 3, device="cuda"))
torch.cuda.synchronize()
""", blocking=True)
probe("take_flat_oob", "torch.take", "device_side_assert", "cuda_take_put_kernel() index out of bounds",
      "torch.take uses flat indices into the 12-element tensor; 12 is one past the end.", """
import torch
x = torch.arange(12.0, device="cuda").view(3, 4)
flat = torch.tensor([0, 5, 12], device="cuda")
picked = torch.take(x, flat)
torch.cuda.synchronize()
""", blocking=True)
probe("index_add_slot_oob", "Tensor.index_add_", "device_side_assert", "dstIndex < dstAddDimSize",
      "index_add_ accumulates into 4 slots; slot id 4 is out of range (the ids must be < acc.size(0)).", """
import torch
acc = torch.zeros(4, 8, device="cuda")
slot = torch.tensor([0, 1, 4], device="cuda")
acc.index_add_(0, slot, torch.ones(3, 8, device="cuda"))
torch.cuda.synchronize()
""", blocking=True)
probe("index_fill_col_oob", "Tensor.index_fill_", "device_side_assert", "idx >= -self_dim_size && idx < self_dim_size",
      "index_fill_ on dim 1 of size 6 with column id 6; valid ids are -6..5.", """
import torch
x = torch.randn(4, 6, device="cuda")
x.index_fill_(1, torch.tensor([1, 6], device="cuda"), 0.0)
torch.cuda.synchronize()
""", blocking=True)
probe("multi_margin_target_oob", "nn.MultiMarginLoss", "device_side_assert", "target index is out of bounds",
      "MultiMarginLoss over 5 classes got target 5; class ids must be 0..4.", """
import torch
logits = torch.randn(4, 5, device="cuda")
target = torch.tensor([0, 4, 5, 1], device="cuda")
loss = torch.nn.MultiMarginLoss()(logits, target)
torch.cuda.synchronize()
""", blocking=True)
probe("max_unpool_bad_index", "nn.MaxUnpool2d", "device_side_assert", "< outputImageSize",
      "MaxUnpool2d got an index (50) outside the 4x4 output; pass the indices MaxPool2d(return_indices=True) returned.", """
import torch
unpool = torch.nn.MaxUnpool2d(2)
x = torch.randn(1, 1, 2, 2, device="cuda")
idx = torch.tensor([[[[0, 1], [50, 3]]]], device="cuda")
y = unpool(x, idx)
torch.cuda.synchronize()
""", blocking=True)
probe("embedding_bag_id_oob", "F.embedding_bag", "device_side_assert", "Invalid input index in EmbeddingBag",
      "embedding_bag over a 10-row table got id 10; ids must be < num_embeddings (grow the table or fix the vocabulary).", """
import torch
import torch.nn.functional as F
table = torch.randn(10, 4, device="cuda")
ids = torch.tensor([1, 2, 10, 3], device="cuda")
offsets = torch.tensor([0, 2], device="cuda")
out = F.embedding_bag(ids, table, offsets, mode="sum")
torch.cuda.synchronize()
""", blocking=True)
probe("repeat_interleave_output_size", "torch.repeat_interleave", "device_side_assert", "result_size == cumsum_ptr[size - 1]",
      "output_size=5 but the repeats sum to 7; output_size must equal repeats.sum() (or leave it out).", """
import torch
x = torch.arange(4, device="cuda")
reps = torch.tensor([1, 2, 3, 1], device="cuda")
y = torch.repeat_interleave(x, reps, output_size=5)
torch.cuda.synchronize()
""", blocking=True)
probe("poisson_negative_rate", "torch.poisson", "device_side_assert", "invalid Poisson rate",
      "A Poisson rate is negative (-0.1); rates must be >= 0 (clamp the predicted rates, e.g. softplus/exp).", """
import torch
rates = torch.tensor([2.0, 0.5, -0.1, 3.0], device="cuda")
counts = torch.poisson(rates)
torch.cuda.synchronize()
""", blocking=True)
probe("bernoulli_p_above_one", "torch.bernoulli", "device_side_assert", "0 <= p1 && p1 <= 1",
      "bernoulli probabilities must lie in [0, 1]; 1.5 is not a probability (apply sigmoid or clamp).", """
import torch
p = torch.tensor([1.5, 0.2, 0.3, 0.4], device="cuda")
mask = torch.bernoulli(p)
torch.cuda.synchronize()
""", blocking=True)
probe("multinomial_negative_weight", "torch.multinomial", "device_side_assert", "val < zero",
      "Sampling with replacement from weights with a negative entry; multinomial weights must be >= 0.", """
import torch
w = torch.tensor([[0.5, -0.1, 0.6]], device="cuda")
draws = torch.multinomial(w, 4, replacement=True)
torch.cuda.synchronize()
""", blocking=True)
probe("sparse_csr_col_oob", "torch.sparse_csr_tensor", "device_side_assert", "cond && message",
      "A CSR column index (3) is outside the 3 columns; the invariant check runs as a CUDA kernel on GPU indices.", """
import torch
crow = torch.tensor([0, 2, 3], device="cuda")
col = torch.tensor([0, 3, 1], device="cuda")
vals = torch.ones(3, device="cuda")
m = torch.sparse_csr_tensor(crow, col, vals, size=(2, 3), check_invariants=True)
torch.cuda.synchronize()
""", blocking=True)

# ------------------------------------------------------------------------------- CUDA-only dtype / shape checks
probe("matmul_int64_cuda", "Tensor.__matmul__", "dtype_mismatch", "not implemented for 'Long'",
      "Integer matmul works on CPU but cuBLAS has no int64 GEMM; cast to float (or use torch._int_mm for int8).", """
import torch
a = torch.randint(0, 5, (4, 3), device="cuda")
b = torch.randint(0, 5, (3, 2), device="cuda")
c = a @ b
""")
probe("max_pool2d_int64_cuda", "F.max_pool2d", "dtype_mismatch", "not implemented for 'Long'",
      "max_pool2d on an int64 image: the CUDA kernel covers floating types only; convert the image to float first.", """
import torch
img = torch.randint(0, 256, (1, 3, 8, 8), device="cuda")
pooled = torch.nn.functional.max_pool2d(img, 2)
""")
probe("sparse_mm_int64_cuda", "torch.sparse.mm", "dtype_mismatch", "not implemented for 'Long'",
      "Sparse @ dense with int64 values on CUDA: the CUDA sparse matmul covers floating/complex types only; use float values.", """
import torch
i = torch.tensor([[0, 1, 2], [2, 0, 1]], device="cuda")
adj = torch.sparse_coo_tensor(i, torch.tensor([1, 2, 3], device="cuda"), (3, 3))
feats = torch.randint(0, 4, (3, 2), device="cuda")
out = torch.sparse.mm(adj, feats)
""")
probe("ctc_loss_half_cuda", "F.ctc_loss", "dtype_mismatch", "ctc_loss_cuda",
      "CTC loss on CUDA is implemented for float32/float64 only; compute the loss on log_probs.float().", """
import torch
import torch.nn.functional as F
T, N, C, S = 20, 2, 6, 5
log_probs = torch.randn(T, N, C, device="cuda").log_softmax(2).half()
targets = torch.randint(1, C, (N, S), device="cuda")
in_lens = torch.full((N,), T, device="cuda")
tgt_lens = torch.full((N,), S, device="cuda")
loss = F.ctc_loss(log_probs, targets, in_lens, tgt_lens)
""")
probe("int_mm_too_few_rows", "torch._int_mm", "shape_mismatch", "needs to be greater than 16",
      "torch._int_mm (cuBLASLt int8 GEMM) needs more than 16 rows in the first matrix; pad the batch to 17+ rows.", """
import torch
a = torch.randint(-8, 8, (8, 64), dtype=torch.int8, device="cuda")
b = torch.randint(-8, 8, (64, 32), dtype=torch.int8, device="cuda")
c = torch._int_mm(a, b)
""")
probe("semi_structured_shape", "to_sparse_semi_structured", "shape_mismatch", "Both dimensions must be larger or equal than and a multiple of",
      "2:4 semi-structured sparsity needs both weight dims to be multiples of the kernel's tile (100 rows is not); pad the weight.", """
import torch
from torch.sparse import to_sparse_semi_structured
w = torch.randn(100, 64, dtype=torch.float16, device="cuda")
sw = to_sparse_semi_structured(w)
""")

# ------------------------------------------------------------------------------------- cross-device checks
probe("searchsorted_values_on_cpu", "torch.searchsorted", "device_mismatch", "should have same device type",
      "Bin edges are on the GPU, the values on the CPU; move both to one device.", """
import torch
edges = torch.linspace(0, 1, 11, device="cuda")
values = torch.rand(100)
bins = torch.searchsorted(edges, values)
""")
probe("sparse_mm_dense_on_cpu", "torch.sparse.mm", "device_mismatch", "to be CUDA, but got CPU",
      "The sparse adjacency was moved to the GPU, the dense features were not; move feats to CUDA.", """
import torch
idx = torch.tensor([[0, 1, 2], [2, 0, 1]])
adj = torch.sparse_coo_tensor(idx, torch.ones(3), (3, 3)).cuda()
feats = torch.randn(3, 16)
out = torch.sparse.mm(adj, feats)
""")
probe("stft_window_on_cpu", "torch.stft", "device_mismatch", "stft input and window must be on the same device",
      "The signal is on the GPU but hann_window was built on the CPU; create the window with device=wave.device.", """
import torch
wave = torch.randn(16000, device="cuda")
spec = torch.stft(wave, n_fft=400, hop_length=160, window=torch.hann_window(400), return_complex=True)
""")

# ----------------------------------------------------------------------------------------- events / streams
probe("event_elapsed_no_timing", "torch.cuda.Event.elapsed_time", "python_error", "enable_timing=True",
      "Events used for timing must be created with torch.cuda.Event(enable_timing=True).", """
import torch
start, end = torch.cuda.Event(), torch.cuda.Event()
a = torch.randn(1024, 1024, device="cuda")
start.record()
b = a @ a
end.record()
torch.cuda.synchronize()
print(f"matmul took {start.elapsed_time(end):.3f} ms")
""")
probe("event_elapsed_not_recorded", "torch.cuda.Event.elapsed_time", "python_error", "must be recorded before calculating elapsed time",
      "The end event was never recorded (end.record() missing) before elapsed_time.", """
import torch
start = torch.cuda.Event(enable_timing=True)
end = torch.cuda.Event(enable_timing=True)
a = torch.randn(1024, 1024, device="cuda")
start.record()
b = a @ a
torch.cuda.synchronize()
print(start.elapsed_time(end))
""")
probe("sync_debug_mode_item", "torch.cuda.set_sync_debug_mode", "python_error", "synchronizing CUDA operation",
      "With set_sync_debug_mode('error') every synchronizing call (.item() here) raises; remove the sync or relax the mode.", """
import torch
torch.cuda.set_sync_debug_mode("error")
x = torch.randn(1000, device="cuda")
n_pos = (x > 0).sum().item()
""")
probe("synchronize_cpu_device", "torch.cuda.synchronize", "python_error", "Expected a cuda device, but got: cpu",
      "Device-agnostic code called torch.cuda.synchronize with the CPU device; only call it for CUDA devices.", """
import torch
device = torch.device("cpu")
x = torch.randn(8, device=device)
torch.cuda.synchronize(device)
""")

# ---------------------------------------------------------------------------------------------- CUDA graphs
probe("cuda_graph_capture_twice", "torch.cuda.graph", "compile_error", "already owns a captured graph",
      "A CUDAGraph object holds one capture; create a new torch.cuda.CUDAGraph() for the second capture.", """
import torch
x = torch.randn(8, device="cuda")
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = x * 2
with torch.cuda.graph(g):
    z = x + 1
""")
probe("cuda_graph_end_other_stream", "torch.cuda.CUDAGraph.capture_end", "compile_error", "Capture must end on the same stream it began on",
      "capture_begin ran on a side stream, capture_end on the default stream; end the capture inside the same stream context.", """
import torch
x = torch.randn(8, device="cuda")
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    g.capture_begin()
    y = x * 2
g.capture_end()
""")
probe("make_graphed_callables_hooks", "torch.cuda.make_graphed_callables", "compile_error", "Modules must not have hooks registered",
      "make_graphed_callables refuses modules that already have hooks; register the hook after graphing (or remove it).", """
import torch
model = torch.nn.Linear(8, 8).cuda()
model.register_forward_hook(lambda mod, inp, out: None)
graphed = torch.cuda.make_graphed_callables(model, (torch.randn(4, 8, device="cuda"),))
""")

# ------------------------------------------------------------------------------ devices, allocator, memory
probe("data_parallel_missing_gpu", "nn.DataParallel", "cuda_unavailable", "Invalid device id",
      "DataParallel was told to use GPUs 0 and 1 on a machine with one visible GPU; list only the GPUs that exist.", """
import torch
model = torch.nn.Linear(16, 4).cuda()
model = torch.nn.DataParallel(model, device_ids=[0, 1])
""")
probe("memory_fraction_in_gb", "torch.cuda.set_per_process_memory_fraction", "python_error", "Allowed range: 0~1",
      "set_per_process_memory_fraction takes a fraction of the card's memory in [0, 1], not gigabytes.", """
import torch
torch.cuda.set_per_process_memory_fraction(40.0)  # cap this process at 40 GB
x = torch.zeros(8, device="cuda")
""")
probe("alloc_conf_unknown_backend", "PYTORCH_CUDA_ALLOC_CONF", "environment_error", "Unknown allocator backend",
      "PYTORCH_CUDA_ALLOC_CONF backend must be 'native' or 'cudaMallocAsync' ('cudaMalloc' is not an option).", """
import os
os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMalloc"
import torch
x = torch.zeros(1024, device="cuda")
""")
probe("alloc_conf_register_threads", "PYTORCH_CUDA_ALLOC_CONF", "environment_error", "has to be power of 2",
      "pinned_num_register_threads in PYTORCH_CUDA_ALLOC_CONF must be a power of two (6 is not).", """
import os
os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "pinned_num_register_threads:6"
import torch
x = torch.zeros(1024, device="cuda")
buf = torch.empty(1 << 20, pin_memory=True)
""")
probe("cuda_array_interface_requires_grad", "Tensor.__cuda_array_interface__", "no_grad_fn",
      "Can't get __cuda_array_interface__ on Variable that requires grad",
      "Handing a tensor that requires grad to CuPy; export tensor.detach() instead.", """
import cupy
import torch
feats = torch.randn(4, 8, device="cuda", requires_grad=True)
arr = cupy.asarray(feats)
""")

# --------------------------------------------------------------------------------------------- NVRTC / NCCL
probe("jiterator_undefined_name", "torch.cuda.jiterator._create_jit_fn", "compile_error", 'identifier "alpha" is undefined',
      "The jiterator kernel source uses 'alpha', which is neither a parameter nor defined; NVRTC fails to compile it.", """
import torch
from torch.cuda.jiterator import _create_jit_fn
code = "template <typename T> T scaled_add(T x, T y) { return x * alpha + y; }"
scaled_add = _create_jit_fn(code)
out = scaled_add(torch.randn(4, device="cuda"), torch.randn(4, device="cuda"))
""")
probe("nccl_all_reduce_cpu_tensor", "dist.all_reduce", "nccl_error", "No backend type associated with device type cpu",
      "The NCCL process group only serves CUDA tensors; all_reduce a CUDA tensor (or init with 'cpu:gloo,cuda:nccl').", """
import tempfile
import torch
import torch.distributed as dist
dist.init_process_group("nccl", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
torch.cuda.set_device(0)
try:
    grads = torch.ones(4)
    dist.all_reduce(grads)
finally:
    dist.destroy_process_group()
""")
probe("nccl_all_reduce_band", "dist.all_reduce", "nccl_error", "Cannot use ReduceOp.BAND with NCCL",
      "NCCL has no bitwise reductions; reduce with MIN (for AND of 0/1 flags) or MAX, or use gloo.", """
import tempfile
import torch
import torch.distributed as dist
dist.init_process_group("nccl", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
torch.cuda.set_device(0)
try:
    flags = torch.tensor([1, 0, 1], dtype=torch.int32, device="cuda")
    dist.all_reduce(flags, op=dist.ReduceOp.BAND)
finally:
    dist.destroy_process_group()
""")


# ----------------------------------------------------------------------------------------------------- runner
ASSERT_LINE = re.compile(r"Assertion|CUDA_KERNEL_ASSERT")
# torch.distributed prefixes each line of a rank's traceback with "[rankN]: "
TRACEBACK_START = re.compile(r"(\[rank\d+\]:\s*)?Traceback \(most recent call last\):")


def error_text(stderr: str) -> str:
    """The first kernel assertion lines printed before the last traceback, then that traceback; at most MAX_LINES."""
    lines = stderr.rstrip("\n").splitlines()
    starts = [i for i, line in enumerate(lines) if TRACEBACK_START.match(line)]
    if not starts:
        return ""
    asserts: list[str] = []
    for line in lines[:starts[-1]]:
        if ASSERT_LINE.search(line) and line not in asserts:
            asserts.append(line)
            if len(asserts) == MAX_ASSERT_LINES:
                break
    tb = lines[starts[-1]:]
    return "\n".join(asserts + tb[-(MAX_LINES - len(asserts)):]) + "\n"


def environment() -> dict:
    env: dict = {}
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        first = (r.stdout.strip().splitlines() or [""])[0]
        name, _, driver = first.rpartition(",")
        env["gpu"], env["driver"] = name.strip(), driver.strip()
    except (OSError, subprocess.SubprocessError) as e:
        env["gpu"] = env["driver"] = f"unknown ({e.__class__.__name__})"
    code = "import json, sys, torch; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, " \
           "'python': sys.version.split()[0]}))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    env.update(json.loads(r.stdout) if r.returncode == 0 else {"torch": "unknown"})
    return env


def run_one(p: dict, timeout: int) -> dict:
    path = RUN_DIR / f"{p['id']}.py"
    path.write_text(p["snippet"])
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    env.pop("CUDA_LAUNCH_BLOCKING", None)
    if p["blocking"]:
        env["CUDA_LAUNCH_BLOCKING"] = "1"
    try:
        r = subprocess.run([sys.executable, path.name], cwd=RUN_DIR, capture_output=True, text=True,
                           timeout=timeout, env=env)
        rc, stderr = r.returncode, r.stderr
    except subprocess.TimeoutExpired as e:
        rc, stderr = None, (e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr) or ""
    text = error_text(stderr)
    problem = None
    if rc is None:
        problem = f"timed out after {timeout} s"
    elif rc == 0:
        problem = "did not fail"
    elif not text:
        problem = f"failed (rc={rc}) without a Python traceback"
    elif p["expect"] not in text:
        problem = f"failed without the expected message {p['expect']!r}"
    return {"id": p["id"], "rc": rc, "error_text": text, "stderr_tail": "\n".join(stderr.splitlines()[-60:]),
            "problem": problem}


def knowledge_hits(expect: str) -> list[str]:
    needle = expect.lower()
    hits = []
    for f in sorted((ROOT / "knowledge").rglob("*")):
        if f.is_file() and f.suffix in {".md", ".jsonl", ".json", ".yaml", ".yml", ".txt"}:
            if needle in f.read_text(encoding="utf-8", errors="replace").lower():
                hits.append(str(f.relative_to(ROOT)))
    return hits


def check_definitions() -> list[str]:
    errors = []
    ids = Counter(p["id"] for p in P)
    errors += [f"duplicate id {i}" for i, n in ids.items() if n > 1]
    ops = Counter(p["op"] for p in P)
    errors += [f"op {o} used {n} times (max {MAX_PER_OP})" for o, n in ops.items() if n > MAX_PER_OP]
    try:  # the GPU machine has torch but not torchhelp's dependencies; the categories are checked where it can be
        from assistant.types import CATEGORIES
    except ImportError:
        return errors
    errors += [f"{p['id']}: unknown category {p['category']}" for p in P if p["category"] not in CATEGORIES]
    return errors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", help="run only these ids and print their stderr (writes nothing)")
    ap.add_argument("--check-knowledge", action="store_true", help="list knowledge files quoting each expect; no GPU")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--report", type=Path, default=REPORT)
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--timeout", type=int, default=TIMEOUT_S)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    errors = check_definitions()
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 2
    if args.check_knowledge:
        quoted = 0
        for p in P:
            hits = knowledge_hits(p["expect"])
            quoted += bool(hits)
            print(f"{p['id']:36s} {p['category']:18s} {'QUOTED by ' + ', '.join(hits) if hits else 'not quoted'}")
        print(f"{len(P)} probes defined, {quoted} expected message(s) quoted by a knowledge file; "
              + ", ".join(f"{c} {n}" for c, n in Counter(p["category"] for p in P).most_common()))
        return 0
    chosen = [p for p in P if not args.only or p["id"] in args.only]
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    env = environment()
    print(f"environment: {json.dumps(env)}")
    with ThreadPoolExecutor(args.jobs) as ex:
        results = list(ex.map(lambda p: run_one(p, args.timeout), chosen))
    by_id = {r["id"]: r for r in results}
    for r in results:
        status = "DROPPED: " + r["problem"] if r["problem"] else "ok"
        last = r["error_text"].rstrip().splitlines()[-1] if r["error_text"] else ""
        print(f"{r['id']:36s} {status:10s} {last[:110]}")
        if args.only:
            print(r["error_text"] or r["stderr_tail"])
    if args.only:
        return 0
    kept = [p for p in P if not by_id[p["id"]]["problem"]]
    dropped = [p for p in P if by_id[p["id"]]["problem"]]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as fh:
        for p in kept:
            row = {"id": p["id"], "op": p["op"], "snippet": p["snippet"], "error_text": by_id[p["id"]]["error_text"],
                   "category": p["category"], "expect": p["expect"], "why": p["why"], "env": env}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    report = {"env": env, "defined": len(P), "kept": len(kept), "dropped": len(dropped),
              "timeout_s": args.timeout, "jobs": args.jobs,
              "probes": [{"id": p["id"], "op": p["op"], "category": p["category"], "expect": p["expect"],
                          "blocking": p["blocking"], "rc": by_id[p["id"]]["rc"],
                          "status": by_id[p["id"]]["problem"] or "ok",
                          **({"stderr_tail": by_id[p["id"]]["stderr_tail"]} if by_id[p["id"]]["problem"] else {})}
                         for p in P]}
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    cats = Counter(p["category"] for p in kept)
    print(f"wrote {len(kept)} probes to {args.out} ({len(dropped)} dropped: {', '.join(p['id'] for p in dropped) or '-'}): "
          + ", ".join(f"{c} {n}" for c, n in cats.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
