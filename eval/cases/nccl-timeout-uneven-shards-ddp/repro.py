"""DDP training where each rank reads its own pre-split shard file.

The shards were split by file size, not by sample count: rank 0 gets 640
samples (10 batches), rank 1 gets 576 (9 batches), and no DistributedSampler
is used. Rank 1 finishes its epoch and exits; rank 0 enters a 10th step whose
gradient all-reduce has no partner and hangs until the NCCL watchdog
(timeout=30 s) aborts the process.
"""
import os

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import datetime
import logging

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")

SHARD_SIZES = {0: 640, 1: 576}


def load_shard(rank):
    g = torch.Generator().manual_seed(100 + rank)
    n = SHARD_SIZES[rank]
    return TensorDataset(torch.randn(n, 128, generator=g), torch.randint(0, 10, (n,), generator=g))


def main():
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=30))
    rank, local_rank = dist.get_rank(), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    torch.manual_seed(0)

    model = DDP(nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10)).to(device),
                device_ids=[local_rank])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(load_shard(rank), batch_size=64, shuffle=True)
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.info("rank %d step %d loss %.4f", rank, step, loss.item())
    log.info("rank %d finished epoch after %d steps", rank, step + 1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
