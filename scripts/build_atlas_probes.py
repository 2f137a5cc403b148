"""Build ``eval/atlas/probes.jsonl``: 80 real PyTorch failures (CPU) for measuring what the error atlas adds.

    python scripts/build_atlas_probes.py                 # run every snippet, write eval/atlas/probes.jsonl
    python scripts/build_atlas_probes.py --only ID ...   # run some snippets and print their tracebacks

Each probe is a small snippet that calls a real PyTorch API wrongly, the way a user would. The snippets were
chosen for breadth (at most two per op) and for messages that the knowledge documents do not list: candidate
messages were checked against every document's ``signatures`` and body text by plain string search, and the ones
a document already names were left out. The rules were not consulted when choosing (how many of these a rule
reads is measured by ``scripts/score_atlas_probes.py``, not selected for).

``category`` is the taxonomy id (``assistant.types.CATEGORIES``) a PyTorch expert gives by what the user must
fix. Every label below was written from the snippet and its message only, before torchhelp was run on any of
them, and is not to be changed after seeing torchhelp's answers. Conventions (the project's own, from
``eval/atlas/review.md`` and the documents' categories): a size/shape configuration of a layer or op is
shape_mismatch; a bad argument value, mode or argument combination is python_error; sparse/strided layout checks
are dtype_mismatch; a dimension or value used as an index out of range is index_error; DataLoader/Dataset
construction misuse is dataloader_error; NaN/inf in the data is nan_inf.

Each snippet runs as ``<id>.py`` in ``$TMPDIR/torchhelp-atlas-probes`` (so the traceback's paths are stable)
with the current interpreter; ``error_text`` is the last traceback of its stderr, verbatim, at most its last 40
lines. A snippet that does not fail, or fails without the expected message, is reported and nothing is written.
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
OUT = ROOT / "eval" / "atlas" / "probes.jsonl"
RUN_DIR = Path(tempfile.gettempdir()) / "torchhelp-atlas-probes"
MAX_LINES = 40
N_PROBES = 80
MAX_PER_OP = 2

P: list[dict] = []


def probe(id: str, op: str, category: str, expect: str, why: str, snippet: str) -> None:
    P.append({"id": id, "op": op, "category": category, "expect": expect, "why": why,
              "snippet": snippet.strip("\n") + "\n"})


# --------------------------------------------------------------------------------------------- nn.functional
probe("pad_circular_too_large", "F.pad", "shape_mismatch", "wrapping around more than once",
      "Circular padding of 4 on a length-3 dimension: the pad must not exceed the input size; pad less or use another mode.", """
import torch, torch.nn.functional as F
x = torch.randn(1, 1, 3)
y = F.pad(x, (4, 4), mode="circular")
""")
probe("pad_replicate_1d", "F.pad", "shape_mismatch", "not supported for 1D input tensor",
      "Replicate (non-constant) padding needs a (C, W) or (N, C, W) input; the 1D tensor needs a batch/channel dim.", """
import torch, torch.nn.functional as F
x = torch.randn(8)
y = F.pad(x, (2, 2), mode="replicate")
""")
probe("unfold_kernel_too_big", "F.unfold", "shape_mismatch", "sliding blocks",
      "A 5x5 kernel on a 3x3 image gives no sliding block; the kernel must fit the (padded) input.", """
import torch, torch.nn.functional as F
x = torch.randn(1, 2, 3, 3)
patches = F.unfold(x, kernel_size=5)
""")
probe("fold_blocks_mismatch", "F.fold", "shape_mismatch", "calculated number of sliding blocks",
      "fold with output 4x4 and kernel 2 expects 9 blocks in dim 2, the input has 10; block count and output_size disagree.", """
import torch, torch.nn.functional as F
cols = torch.randn(1, 3 * 2 * 2, 10)
img = F.fold(cols, output_size=(4, 4), kernel_size=2)
""")
probe("grid_sample_grid_last_dim", "F.grid_sample", "shape_mismatch", "size 2 in last dimension",
      "A 2D grid_sample grid must be (N, H, W, 2) of (x, y); the grid was built with 3 coordinates.", """
import torch, torch.nn.functional as F
img = torch.randn(1, 3, 8, 8)
grid = torch.rand(1, 8, 8, 3) * 2 - 1
out = F.grid_sample(img, grid, align_corners=False)
""")
probe("grid_sample_bad_mode", "F.grid_sample", "python_error", "expected mode to be",
      "grid_sample's mode is 'bilinear' (not 'linear'), 'nearest' or 'bicubic'.", """
import torch, torch.nn.functional as F
img = torch.randn(1, 3, 8, 8)
grid = torch.rand(1, 8, 8, 2) * 2 - 1
out = F.grid_sample(img, grid, mode="linear", align_corners=False)
""")
probe("affine_grid_theta_shape", "F.affine_grid", "shape_mismatch", "Nx2x3",
      "A 2D affine_grid needs theta of shape (N, 2, 3); a 3x3 homogeneous matrix was passed (drop its last row).", """
import torch, torch.nn.functional as F
theta = torch.eye(3).unsqueeze(0)
grid = F.affine_grid(theta, size=(1, 3, 8, 8), align_corners=False)
""")
probe("pixel_shuffle_channels", "F.pixel_shuffle", "shape_mismatch", "divisible by the square of upscale_factor",
      "PixelShuffle(2) needs channels divisible by 4; the conv before it must output C*r^2 channels.", """
import torch, torch.nn as nn
ps = nn.PixelShuffle(2)
y = ps(torch.randn(1, 6, 8, 8))
""")
probe("channel_shuffle_groups", "nn.ChannelShuffle", "shape_mismatch", "divisible by groups",
      "ChannelShuffle(4) on 6 channels: channels must be divisible by the group count.", """
import torch, torch.nn as nn
y = nn.ChannelShuffle(4)(torch.randn(1, 6, 4, 4))
""")
probe("embedding_bag_psw_max", "F.embedding_bag", "python_error", "per_sample_weights is only supported for mode='sum'",
      "per_sample_weights only works with mode='sum'; use sum or drop the weights.", """
import torch, torch.nn.functional as F
w = torch.randn(10, 4)
idx = torch.tensor([1, 2, 4, 5])
offsets = torch.tensor([0, 2])
psw = torch.rand(4)
out = F.embedding_bag(idx, w, offsets, mode="max", per_sample_weights=psw)
""")
probe("glu_odd", "F.glu", "shape_mismatch", "Halving dimension must be even",
      "GLU splits the dim in two halves; dim 1 has odd size 5 (the layer before must output an even width).", """
import torch, torch.nn.functional as F
y = F.glu(torch.randn(4, 5), dim=1)
""")
probe("multilabel_margin_target", "F.multilabel_margin_loss", "shape_mismatch", "inconsistent target size",
      "multilabel_margin_loss needs a target of the input's shape (class ids padded with -1); target is (4, 3) for input (4, 5).", """
import torch, torch.nn.functional as F
loss = F.multilabel_margin_loss(torch.randn(4, 5), torch.randint(0, 5, (4, 3)))
""")
probe("multimargin_p", "nn.MultiMarginLoss", "python_error", "only p == 1 and p == 2 supported",
      "MultiMarginLoss supports only p=1 or p=2.", """
import torch, torch.nn as nn
loss = nn.MultiMarginLoss(p=3)(torch.randn(4, 5), torch.tensor([1, 0, 4, 2]))
""")

# ------------------------------------------------------------------------------------------------ nn modules
probe("maxunpool_indices", "nn.MaxUnpool2d", "index_error", "Found an invalid max index",
      "MaxUnpool2d got an index (50) outside the 4x4 output; pass the indices MaxPool2d(return_indices=True) returned.", """
import torch, torch.nn as nn
unpool = nn.MaxUnpool2d(2)
x = torch.randn(1, 1, 2, 2)
idx = torch.tensor([[[[0, 1], [50, 3]]]])
y = unpool(x, idx)
""")
probe("adaptive_logsoftmax_cutoffs", "nn.AdaptiveLogSoftmaxWithLoss", "python_error", "cutoffs should be a sequence",
      "AdaptiveLogSoftmaxWithLoss needs increasing cutoffs; [500, 100] is not sorted.", """
import torch, torch.nn as nn
m = nn.AdaptiveLogSoftmaxWithLoss(64, 1000, cutoffs=[500, 100])
""")
probe("adaptive_logsoftmax_target", "nn.AdaptiveLogSoftmaxWithLoss", "index_error", "Target values should be in",
      "A target (120) is not a class id of the 100-class AdaptiveLogSoftmaxWithLoss.", """
import torch, torch.nn as nn
m = nn.AdaptiveLogSoftmaxWithLoss(16, 100, cutoffs=[10, 50])
out = m(torch.randn(4, 16), torch.tensor([1, 5, 120, 7]))
""")
probe("register_buffer_dot", "nn.Module.register_buffer", "python_error", "buffer name can",
      "Buffer names cannot contain '.'; use a name like 'stats_mean' or a submodule.", """
import torch, torch.nn as nn
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("stats.mean", torch.zeros(3))
m = M()
""")
probe("module_to_int", "nn.Module.to", "dtype_mismatch", "only accepts floating point or complex dtypes",
      "A module's parameters cannot be cast to int64; cast inputs, or quantize properly.", """
import torch, torch.nn as nn
model = nn.Linear(4, 2).to(torch.int64)
""")
probe("prune_amount", "prune.l1_unstructured", "python_error", "should either be a float in the range",
      "Pruning amount must be a fraction in [0, 1] or a count; 1.5 is neither.", """
import torch, torch.nn as nn
import torch.nn.utils.prune as prune
layer = nn.Linear(4, 4)
prune.l1_unstructured(layer, name="weight", amount=1.5)
""")
probe("spectral_norm_twice", "nn.utils.spectral_norm", "python_error", "Cannot register two spectral_norm hooks",
      "spectral_norm was applied twice to the same layer.", """
import torch, torch.nn as nn
from torch.nn.utils import spectral_norm
layer = spectral_norm(spectral_norm(nn.Linear(4, 4)))
""")
probe("parametrize_shape", "parametrize.register_parametrization", "shape_mismatch", "may not change the shape",
      "The parametrization returns a (3, 2) tensor for a (3, 4) weight; it must keep the shape (or pass unsafe=True).", """
import torch, torch.nn as nn
import torch.nn.utils.parametrize as P
class Trunc(nn.Module):
    def forward(self, w):
        return w[:, :2]
layer = nn.Linear(4, 3)
P.register_parametrization(layer, "weight", Trunc())
""")
probe("fuse_conv_bn_train", "fuse_conv_bn_eval", "python_error", "Fusion only for eval",
      "fuse_conv_bn_eval needs both modules in eval mode (call .eval() first).", """
import torch, torch.nn as nn
from torch.nn.utils import fuse_conv_bn_eval
conv, bn = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)
fused = fuse_conv_bn_eval(conv, bn)
""")

# ------------------------------------------------------------------------------------------- indexing-like ops
probe("scatter_reduce_bad", "Tensor.scatter_reduce", "python_error", "reduce argument must be either",
      "scatter_reduce has no 'avg'; use reduce='mean'.", """
import torch
src = torch.randn(5)
index = torch.tensor([0, 1, 0, 1, 2])
out = torch.zeros(3).scatter_reduce(0, index, src, reduce="avg")
""")
probe("index_add_slice_shape", "Tensor.index_add_", "shape_mismatch", "source tensor shape must match self tensor shape",
      "index_add_ along dim 0 of a (5, 3) tensor needs a source of (len(index), 3); source is (3, 4).", """
import torch
acc = torch.zeros(5, 3)
index = torch.tensor([0, 2, 4])
src = torch.ones(3, 4)
acc.index_add_(0, index, src)
""")
probe("index_add_dtype", "Tensor.index_add_", "dtype_mismatch", "must have the same scalar type",
      "index_add_ into float32 with a float64 source; cast the source.", """
import torch
acc = torch.zeros(5, 3)
index = torch.tensor([0, 2, 4])
src = torch.ones(3, 3, dtype=torch.float64)
acc.index_add_(0, index, src)
""")
probe("bucketize_2d_boundaries", "torch.bucketize", "shape_mismatch", "boundaries tensor must be 1 dimension",
      "bucketize needs 1D boundaries; for per-row boundaries use searchsorted.", """
import torch
x = torch.rand(10)
boundaries = torch.tensor([[0.1, 0.5], [0.2, 0.7]])
bins = torch.bucketize(x, boundaries)
""")
probe("searchsorted_side_right", "torch.searchsorted", "python_error", "side and right can't be set to opposites",
      "searchsorted got right=True and side='left' at once; pass only one.", """
import torch
seq = torch.tensor([1, 3, 5, 7])
pos = torch.searchsorted(seq, torch.tensor([2, 6]), right=True, side="left")
""")
probe("searchsorted_batch_dims", "torch.searchsorted", "shape_mismatch", "first N-1 dimensions of boundaries tensor",
      "Batched searchsorted needs the leading dims of sequence (3) and values (4) to match.", """
import torch
seq = torch.sort(torch.rand(3, 10)).values
vals = torch.rand(4, 5)
pos = torch.searchsorted(seq, vals)
""")
probe("narrow_range", "Tensor.narrow", "index_error", "exceeds dimension size",
      "narrow(0, 2, 3) on a dim of size 4 reaches past its end.", """
import torch
y = torch.randn(4, 3).narrow(0, 2, 3)
""")
probe("bincount_negative", "torch.bincount", "index_error", "non-negative integral inputs",
      "bincount treats values as bin indices; the labels contain -1 (an ignore marker) - drop it first.", """
import torch
y = torch.bincount(torch.tensor([0, 2, -1, 3]))
""")
probe("tensor_split_float", "torch.tensor_split", "dtype_mismatch", "to have dtype of long",
      "tensor_split's index tensor must be int64; float split points were given.", """
import torch
parts = torch.tensor_split(torch.randn(10), torch.tensor([2.0, 5.0]))
""")

# ---------------------------------------------------------------------------------------- reductions and math
probe("histc_min_max", "torch.histc", "python_error", "max must be larger than min",
      "histc's min and max were swapped.", """
import torch
x = torch.randn(100)
h = torch.histc(x, bins=10, min=3, max=1)
""")
probe("histc_nan", "torch.histc", "nan_inf", "is not finite",
      "The data has a NaN, so histc's automatic range (min=max=0) is not finite; clean the NaNs or give a range.", """
import torch
x = torch.tensor([1.0, float("nan"), 3.0])
h = torch.histc(x, bins=4)
""")
probe("histogram_bins_dtype", "torch.histogram", "dtype_mismatch", "should have the same dtype",
      "histogram's bin edges are int64 while the input is float32; give float bin edges.", """
import torch
x = torch.randn(100)
h = torch.histogram(x, bins=torch.tensor([0, 1, 2]))
""")
probe("histogramdd_bins_len", "torch.histogramdd", "shape_mismatch", "The size of bins must be equal to the innermost dimension",
      "histogramdd on 2-column data got bins for 3 dimensions.", """
import torch
h = torch.histogramdd(torch.rand(100, 2), bins=[4, 4, 4])
""")
probe("einsum_subscript", "torch.einsum", "python_error", "invalid subscript given at index",
      "einsum subscripts must be letters; '1' is not allowed.", """
import torch
a = torch.randn(2, 3)
b = torch.randn(3, 4)
c = torch.einsum("i1,1k->ik", a, b)
""")
probe("einsum_dim_mismatch", "torch.einsum", "shape_mismatch", "does not broadcast with previously seen size",
      "einsum's contracted index j is 3 in the first operand and 5 in the second.", """
import torch
a = torch.randn(2, 3)
b = torch.randn(5, 4)
c = torch.einsum("ij,jk->ik", a, b)
""")
probe("tensordot_dims", "torch.tensordot", "shape_mismatch", "contracted dimensions need to match",
      "tensordot contracts dim 1 (size 3) with dim 0 (size 4).", """
import torch
a = torch.randn(2, 3)
b = torch.randn(4, 5)
c = torch.tensordot(a, b, dims=([1], [0]))
""")
probe("kron_sparse", "torch.kron", "dtype_mismatch", "Cannot access storage of SparseTensorImpl",
      "torch.kron has no sparse-COO kernel; call .to_dense() (a layout problem).", """
import torch
k = torch.kron(torch.eye(2).to_sparse(), torch.randn(2, 2))
""")
probe("arange_inf", "torch.arange", "nan_inf", "unsupported range",
      "The end of arange was computed by a division by zero and is inf.", """
import torch
n = torch.tensor(10.0) / torch.tensor(0.0)
idx = torch.arange(0, n.item())
""")

# ---------------------------------------------------------------------------------------------- spectral / fft
probe("stft_return_complex", "torch.stft", "python_error", "stft requires the return_complex parameter",
      "Real-input stft must be called with return_complex (True).", """
import torch
wave = torch.randn(16000)
spec = torch.stft(wave, n_fft=400, hop_length=160)
""")
probe("stft_nfft_too_big", "torch.stft", "shape_mismatch", "expected 0 < n_fft < 100",
      "The 100-sample signal is shorter than n_fft=400 (center=False); pad the signal or use a smaller n_fft.", """
import torch
wave = torch.randn(100)
spec = torch.stft(wave, n_fft=400, hop_length=160, center=False, return_complex=True)
""")
probe("istft_real_input", "torch.istft", "dtype_mismatch", "istft requires a complex-valued input tensor",
      "istft needs the complex spectrogram (stft(..., return_complex=True)); a real tensor was passed.", """
import torch
spec = torch.randn(201, 50)
wave = torch.istft(spec, n_fft=400)
""")
probe("istft_window_nola", "torch.istft", "python_error", "window overlap add min",
      "A Hann window with hop_length == n_fft violates the non-zero overlap-add (NOLA) condition; use a smaller hop.", """
import torch
spec = torch.stft(torch.randn(4000), n_fft=400, hop_length=400, window=torch.hann_window(400), return_complex=True)
wave = torch.istft(spec, n_fft=400, hop_length=400, window=torch.hann_window(400))
""")
probe("rfft_complex", "torch.fft.rfft", "dtype_mismatch", "rfft expects a real input tensor",
      "rfft takes real input; use fft for complex signals.", """
import torch
x = torch.randn(64, dtype=torch.complex64)
X = torch.fft.rfft(x)
""")
probe("fft_norm", "torch.fft.fft", "python_error", "Invalid normalization mode",
      "fft's norm is 'forward', 'backward' or 'ortho'.", """
import torch
X = torch.fft.fft(torch.randn(64), norm="orthonormal")
""")

# ---------------------------------------------------------------------------------------------------- linalg
probe("linalg_inv_nonsquare", "torch.linalg.inv", "shape_mismatch", "must be batches of square matrices",
      "Only square matrices have an inverse; use linalg.pinv for a 2x3 matrix.", """
import torch
A = torch.randn(2, 3)
Ainv = torch.linalg.inv(A)
""")
probe("linalg_eigh_int", "torch.linalg.eigh", "dtype_mismatch", "not implemented for 'Long'",
      "eigh needs a floating-point matrix; the integer matrix must be cast to float.", """
import torch
A = torch.tensor([[2, 1], [1, 2]])
w, v = torch.linalg.eigh(A)
""")
probe("linalg_lstsq_driver", "torch.linalg.lstsq", "python_error", "parameter `driver` should be one of",
      "lstsq's driver is one of gels, gelsy, gelsd, gelss on CPU.", """
import torch
A = torch.randn(5, 3)
B = torch.randn(5, 2)
X = torch.linalg.lstsq(A, B, driver="qr").solution
""")
probe("svd_driver_cpu", "torch.linalg.svd", "python_error", "only supported on CUDA inputs",
      "svd's driver= keyword only applies to CUDA (cuSOLVER); drop it for CPU tensors.", """
import torch
U, S, Vh = torch.linalg.svd(torch.randn(4, 3), driver="gesvd")
""")
probe("lu_unpack_pivots", "torch.lu_unpack", "dtype_mismatch", "LU_pivots is expected to be a contiguous tensor of torch.int32",
      "lu_unpack needs the int32 pivots lu_factor returned; they were cast to float.", """
import torch
LU, piv = torch.linalg.lu_factor(torch.randn(3, 3))
P, L, U = torch.lu_unpack(LU, piv.float())
""")

# ----------------------------------------------------------------------------------------------- distributions
probe("dist_categorical_nan", "distributions.Categorical", "nan_inf", "found invalid values",
      "The logits contain NaN (upstream numerical problem); Categorical's validation rejects them.", """
import torch
from torch.distributions import Categorical
logits = torch.tensor([[0.1, float('nan'), 0.3]])
d = Categorical(logits=logits)
""")
probe("dist_bernoulli_support", "distributions.Bernoulli", "python_error", "to be within the support",
      "Bernoulli.log_prob got 0.5, which is not a 0/1 outcome; use ContinuousBernoulli or binary targets.", """
import torch
from torch.distributions import Bernoulli
d = Bernoulli(probs=torch.tensor([0.3, 0.7]))
lp = d.log_prob(torch.tensor([0.5, 1.0]))
""")
probe("dist_kl_not_impl", "distributions.kl_divergence", "python_error", "No KL(p || q) is implemented",
      "There is no KL divergence between a Normal and a Categorical; compare distributions of the same kind.", """
import torch
from torch.distributions import Normal, Categorical, kl_divergence
p = Normal(torch.tensor(0.), torch.tensor(1.))
q = Categorical(probs=torch.tensor([0.5, 0.5]))
kl = kl_divergence(p, q)
""")
probe("dist_independent_reinterpret", "distributions.Independent", "shape_mismatch", "Expected reinterpreted_batch_ndims <=",
      "Independent can reinterpret at most the base's 1 batch dim as event dims; 2 were asked for.", """
import torch
from torch.distributions import Normal, Independent
d = Independent(Normal(torch.zeros(3), torch.ones(3)), reinterpreted_batch_ndims=2)
""")

# ------------------------------------------------------------------------------------- optim and lr_scheduler
probe("adam_fused_foreach", "optim.Adam", "python_error", "cannot be `True` together",
      "Adam's fused and foreach implementations are alternatives; set only one.", """
import torch
model = torch.nn.Linear(4, 2)
opt = torch.optim.Adam(model.parameters(), fused=True, foreach=True)
""")
probe("sparse_adam_dense", "optim.SparseAdam", "dtype_mismatch", "SparseAdam does not support dense gradients",
      "SparseAdam needs sparse gradients (nn.Embedding(sparse=True)); with dense grads use Adam (a layout problem).", """
import torch, torch.nn as nn
emb = nn.Embedding(10, 4)
opt = torch.optim.SparseAdam(emb.parameters())
emb(torch.tensor([1, 2])).sum().backward()
opt.step()
""")
probe("sequentiallr_milestones", "lr_scheduler.SequentialLR", "python_error", "one more than the number of milestone points",
      "SequentialLR with 2 schedulers takes 1 milestone, not 2.", """
import torch
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
s1 = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=5)
s2 = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=95)
sched = torch.optim.lr_scheduler.SequentialLR(opt, schedulers=[s1, s2], milestones=[5, 10])
""")
probe("steplr_not_optimizer", "lr_scheduler.StepLR", "python_error", "is not an Optimizer",
      "The scheduler was given the model instead of the optimizer.", """
import torch
model = torch.nn.Linear(4, 2)
sched = torch.optim.lr_scheduler.StepLR(model, step_size=10)
""")

# ------------------------------------------------------------------------------------------- torch.utils.data
probe("batch_sampler_size0", "data.BatchSampler", "dataloader_error", "batch_size should be a positive integer value",
      "BatchSampler's batch_size must be >= 1.", """
import torch
from torch.utils.data import BatchSampler, SequentialSampler
bs = BatchSampler(SequentialSampler(range(10)), batch_size=0, drop_last=False)
""")
probe("tensordataset_size", "data.TensorDataset", "dataloader_error", "Size mismatch between tensors",
      "TensorDataset got 100 inputs and 99 labels; the tensors must have the same first dimension.", """
import torch
from torch.utils.data import TensorDataset
ds = TensorDataset(torch.randn(100, 3), torch.randint(0, 2, (99,)))
""")
probe("dataloader_mp_context", "data.DataLoader", "dataloader_error", "multiprocessing_context can only be used with multi-process loading",
      "multiprocessing_context needs num_workers > 0.", """
import torch
from torch.utils.data import DataLoader
dl = DataLoader(list(range(10)), batch_size=2, num_workers=0, multiprocessing_context="spawn")
""")
probe("chain_dataset_mapstyle", "data.ChainDataset", "dataloader_error", "ChainDataset only supports IterableDataset",
      "ChainDataset chains iterable datasets; use ConcatDataset for map-style ones.", """
import torch
from torch.utils.data import ChainDataset, TensorDataset
ds = ChainDataset([TensorDataset(torch.randn(4, 2)), TensorDataset(torch.randn(3, 2))])
for x in ds:
    pass
""")

# ------------------------------------------------------------------------------------------------ serialization
probe("load_mmap_legacy", "torch.load", "serialization_error", "mmap can only be used with files saved with",
      "mmap=True needs the zipfile checkpoint format; the file was saved in the legacy format.", """
import torch
torch.save({"w": torch.randn(3)}, "legacy.pt", _use_new_zipfile_serialization=False)
state = torch.load("legacy.pt", mmap=True)
""")
probe("load_map_location_bad", "torch.load", "serialization_error", "don't know how to restore data location",
      "map_location='gpu' is not a device; use 'cpu', 'cuda' or 'cuda:0'.", """
import torch
torch.save({"w": torch.randn(3)}, "ok.pt")
state = torch.load("ok.pt", map_location="gpu")
""")

# --------------------------------------------------------------------------------------------- meta / devices
probe("meta_item", "Tensor.item", "device_mismatch", "cannot be called on meta tensors",
      "A meta tensor has no data; materialize it on a real device before reading values.", """
import torch
x = torch.randn(3, device="meta")
v = x.sum().item()
""")
probe("meta_forward_cpu", "nn.Linear (meta)", "device_mismatch", "Tensor on device meta is not on the expected device cpu",
      "The model was built on the meta device and never materialized; its weights are meta while the input is on CPU.", """
import torch, torch.nn as nn
with torch.device("meta"):
    model = nn.Linear(4, 2)
y = model(torch.randn(3, 4))
""")
probe("meta_to", "nn.Module.to (meta)", "device_mismatch", "Cannot copy out of meta tensor",
      "Moving a meta-device module with .to() cannot copy data; use to_empty() and then load weights.", """
import torch, torch.nn as nn
with torch.device("meta"):
    model = nn.Linear(4, 2)
model.to("cpu")
""")
probe("device_string", "Tensor.to", "python_error", "device type at start of device string",
      "'gpu' is not a device type; use 'cuda'.", """
import torch
x = torch.randn(3).to("gpu")
""")

# ---------------------------------------------------------------------------------------- complex and sparse
probe("complex_from_int", "torch.complex", "dtype_mismatch", "Expected both inputs to be Half, Float or Double",
      "torch.complex needs floating-point real/imag parts; cast the int64 tensors.", """
import torch
z = torch.complex(torch.tensor([1, 2]), torch.tensor([3, 4]))
""")
probe("sparse_mm_shape", "torch.sparse.mm", "shape_mismatch", "Expected dim 0 size 3, got 4",
      "sparse.mm of a 3x3 sparse matrix with a 4x2 dense one: inner sizes differ.", """
import torch
s = torch.eye(3).to_sparse()
d = torch.randn(4, 2)
y = torch.sparse.mm(s, d)
""")
probe("sparse_coo_bounds", "torch.sparse_coo_tensor", "index_error", "size is inconsistent with indices",
      "A COO index (5) is outside the declared size (3, 3).", """
import torch
i = torch.tensor([[0, 1, 5], [2, 0, 1]])
v = torch.tensor([1., 2., 3.])
s = torch.sparse_coo_tensor(i, v, size=(3, 3), check_invariants=True)
""")
probe("sparse_csr_crow", "torch.sparse_csr_tensor", "index_error", "is not satisfied",
      "crow_indices end at 3 but there are 4 values; the compressed row pointer must end at nnz.", """
import torch
s = torch.sparse_csr_tensor(torch.tensor([0, 2, 3]), torch.tensor([0, 1, 2, 0]), torch.tensor([1., 2., 3., 4.]),
                            size=(2, 3), check_invariants=True)
""")
probe("coalesce_dense", "Tensor.coalesce", "dtype_mismatch", "expected sparse coordinate tensor layout but got Strided",
      "coalesce is for sparse COO tensors; the adjacency matrix is dense (a layout problem).", """
import torch
adj = torch.zeros(4, 4)
adj[0, 1] = 1.0
adj = adj.coalesce()
""")

# ---------------------------------------------------------------------------------------- functorch / autograd / fx
probe("vmap_item", "torch.vmap", "python_error", "calling .item() on a Tensor",
      "vmap cannot batch a .item() call; keep the computation in tensors.", """
import torch
f = torch.vmap(lambda a: a * a.sum().item())
y = f(torch.randn(3, 4))
""")
probe("vmap_size_mismatch", "torch.vmap", "shape_mismatch", "same size in the mapped dimension",
      "vmap maps dim 0 of both inputs, of sizes 3 and 5.", """
import torch
f = torch.vmap(lambda a, b: a + b)
y = f(torch.randn(3, 4), torch.randn(5, 4))
""")
probe("jacobian_non_tensor", "autograd.functional.jacobian", "python_error", "must be either a Tensor or a tuple of Tensors",
      "The function given to jacobian returns a Python float (.item()); it must return a tensor.", """
import torch
from torch.autograd.functional import jacobian
J = jacobian(lambda x: (x ** 2).sum().item(), torch.randn(3))
""")
probe("resize_requires_grad", "Tensor.resize_", "inplace_autograd", "cannot resize variables that require grad",
      "resize_ on a leaf that requires grad; resize under no_grad or build a new tensor.", """
import torch
w = torch.randn(4, requires_grad=True)
w.resize_(8)
""")
probe("fx_trace_control_flow", "torch.fx.symbolic_trace", "compile_error", "cannot be used as inputs to control flow",
      "symbolic_trace cannot follow data-dependent if; use torch.where, concrete_args or torch.compile/export.", """
import torch, torch.nn as nn
class M(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x
gm = torch.fx.symbolic_trace(M())
""")

# ------------------------------------------------------------------------------------------------------- misc
probe("quantize_per_tensor_dtype", "torch.quantize_per_tensor", "dtype_mismatch", "is not supported in new_qtensor",
      "quantize_per_tensor needs a quantized dtype (quint8/qint8/qint32); float16 was given.", """
import torch
q = torch.quantize_per_tensor(torch.randn(4), scale=0.1, zero_point=0, dtype=torch.float16)
""")


# ----------------------------------------------------------------------------------------------------- runner
def last_traceback(stderr: str) -> str:
    """The stderr's last traceback (from its last ``Traceback (most recent call last):``), at most MAX_LINES lines."""
    lines = stderr.rstrip("\n").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    if not starts:
        return ""
    tb = lines[starts[-1]:]
    return "\n".join(tb[-MAX_LINES:]) + "\n"


def run_one(p: dict) -> dict:
    path = RUN_DIR / f"{p['id']}.py"
    path.write_text(p["snippet"])
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, path.name], cwd=RUN_DIR, capture_output=True, text=True, timeout=300, env=env)
    tb = last_traceback(r.stderr)
    problem = None
    if r.returncode == 0:
        problem = "did not fail"
    elif not tb:
        problem = f"failed (rc={r.returncode}) without a Python traceback"
    elif not re.search(re.escape(p["expect"]), tb):
        problem = f"failed without the expected message {p['expect']!r}"
    return {"id": p["id"], "rc": r.returncode, "error_text": tb, "stderr": r.stderr, "problem": problem}


def check_definitions() -> list[str]:
    from assistant.types import CATEGORIES
    errors = []
    ids = Counter(p["id"] for p in P)
    errors += [f"duplicate id {i}" for i, n in ids.items() if n > 1]
    ops = Counter(p["op"] for p in P)
    errors += [f"op {o} used {n} times (max {MAX_PER_OP})" for o, n in ops.items() if n > MAX_PER_OP]
    errors += [f"{p['id']}: unknown category {p['category']}" for p in P if p["category"] not in CATEGORIES]
    return errors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", help="run only these ids and print their tracebacks (writes nothing)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    errors = check_definitions()
    if not args.only and len(P) != N_PROBES:
        errors.append(f"{len(P)} probes defined, expected {N_PROBES}")
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 2
    chosen = [p for p in P if not args.only or p["id"] in args.only]
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(args.jobs) as ex:
        results = list(ex.map(run_one, chosen))
    bad = [r for r in results if r["problem"]]
    for r in results:
        status = "UNEXPECTED: " + r["problem"] if r["problem"] else "ok"
        last = r["error_text"].rstrip().splitlines()[-1] if r["error_text"] else ""
        print(f"{r['id']:30s} {status:10s} {last[:110]}")
        if args.only:
            print(r["error_text"] or r["stderr"])
    if bad:
        print(f"{len(bad)} snippet(s) did not fail as expected: {', '.join(r['id'] for r in bad)}; nothing written.",
              file=sys.stderr)
        return 1
    if args.only:
        return 0
    by_id = {r["id"]: r for r in results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as fh:
        for p in P:
            row = {"id": p["id"], "snippet": p["snippet"], "error_text": by_id[p["id"]]["error_text"],
                   "category": p["category"], "why": p["why"]}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    cats = Counter(p["category"] for p in P)
    print(f"wrote {len(P)} probes to {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}: "
          + ", ".join(f"{c} {n}" for c, n in cats.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
