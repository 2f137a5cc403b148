"""Custom Triton RMSNorm kernel ported from a CUDA C++ version.

The C++ kernel took the row stride in *bytes*; the port keeps passing
x.stride(0) * x.element_size(), but Triton pointer arithmetic is in
*elements*. Every row therefore starts 4x too far into the buffer and the
later rows read (and write) gigabytes past the end of the tensors:
"an illegal memory access was encountered", reported at the next sync.
"""
import logging

import torch
import torch.nn as nn
import triton
import triton.language as tl

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("rmsnorm")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")


@triton.jit
def _rmsnorm_fwd(X, W, Y, stride_row, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride_row + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    rms = tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(Y + row * stride_row + cols, (x / rms) * w, mask=mask)


def rmsnorm(x, weight, eps=1e-6):
    assert x.is_contiguous() and x.dim() == 2
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    stride_bytes = x.stride(0) * x.element_size()   # byte stride, as in the CUDA version
    _rmsnorm_fwd[(n_rows,)](x, weight, y, stride_bytes, n_cols, eps,
                            BLOCK=triton.next_power_of_2(n_cols))
    return y


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        shape = x.shape
        return rmsnorm(x.reshape(-1, shape[-1]), self.weight).view(shape)


def main():
    norm = RMSNorm(8192).to(device)
    # activations of a long-context batch: 4 x 8192 tokens x 8192 hidden (1 GiB fp32)
    hidden = torch.randn(4, 8192, 8192, device=device)
    with torch.no_grad():
        out = norm(hidden)
        ref = hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + 1e-6)
        err = (out - ref).abs().max().item()
    log.info("max abs error vs reference: %.3e", err)


if __name__ == "__main__":
    main()
