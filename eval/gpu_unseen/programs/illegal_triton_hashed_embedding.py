# Custom Triton gather kernel for a hashed-feature embedding table.
# The PyTorch reference path applies `% NUM_BUCKETS`; the fast path was supposed to be equivalent.
import torch
import triton
import triton.language as tl

NUM_BUCKETS, DIM = 1_000_003, 64


@triton.jit
def embedding_gather_kernel(ids_ptr, table_ptr, out_ptr, n_ids, D: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK + tl.arange(0, BLOCK)
    row_mask = rows < n_ids
    ids = tl.load(ids_ptr + rows, mask=row_mask, other=0)
    cols = tl.arange(0, D)
    vals = tl.load(table_ptr + ids[:, None] * D + cols[None, :], mask=row_mask[:, None])
    tl.store(out_ptr + rows[:, None] * D + cols[None, :], vals, mask=row_mask[:, None])


def hashed_embedding(raw_ids, table):
    out = torch.empty(raw_ids.numel(), DIM, device=table.device, dtype=table.dtype)
    grid = (triton.cdiv(raw_ids.numel(), 128),)
    embedding_gather_kernel[grid](raw_ids, table, out, raw_ids.numel(), D=DIM, BLOCK=128)
    return out


def reference(raw_ids, table):
    return table[raw_ids % NUM_BUCKETS]


table = torch.randn(NUM_BUCKETS, DIM, device="cuda")
# raw 40-bit feature hashes, e.g. hash(user_id + item_id)
raw_ids = torch.randint(0, 2**40, (65536,), device="cuda", dtype=torch.int64)

fast = hashed_embedding(raw_ids, table)
torch.cuda.synchronize()
print("max diff vs reference:", (fast - reference(raw_ids, table)).abs().max().item())
