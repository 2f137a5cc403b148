"""Distributed evaluation: aggregate per-class prediction counts across ranks.

Each rank computes torch.bincount(preds) and all-reduces it. bincount's output
length is max(preds)+1, which depends on the rank's data: rank 0 predicts
classes 0..9, rank 1 never predicts class 8 or 9, so the two ranks all-reduce
tensors of different shapes ([10] vs [8]). Run with
TORCH_DISTRIBUTED_DEBUG=DETAIL, which checks collectives across ranks.
"""
import os

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import datetime
import logging

import torch
import torch.distributed as dist
import torch.nn as nn

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("eval")


def main():
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=30))
    rank, local_rank = dist.get_rank(), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    torch.manual_seed(rank)

    model = nn.Linear(32, 10).to(device).eval()
    n_classes_seen = 10 if rank == 0 else 8     # rank 1's shard never yields classes 8, 9
    with torch.no_grad():
        x = torch.randn(5000, 32, device=device)
        logits = model(x)
        preds = logits[:, :n_classes_seen].argmax(dim=1)
        counts = torch.bincount(preds)           # length = preds.max() + 1
    log.info("rank %d local counts shape %s", rank, tuple(counts.shape))
    dist.all_reduce(counts, op=dist.ReduceOp.SUM)
    if rank == 0:
        log.info("global prediction histogram: %s", counts.tolist())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
