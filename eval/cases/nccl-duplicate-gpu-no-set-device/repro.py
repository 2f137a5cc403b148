"""DDP script launched with torchrun --nproc_per_node=2 that never selects a GPU per rank.

device = torch.device("cuda") means the *current* device, which is cuda:0 in
every process, so both ranks put their model (and their NCCL communicator)
on GPU 0.
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

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")


def main():
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=30))
    rank = dist.get_rank()
    device = torch.device("cuda")            # forgot LOCAL_RANK / set_device
    torch.manual_seed(0)

    model = DDP(nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(10):
        x = torch.randn(64, 256, device=device)
        y = torch.randint(0, 10, (64,), device=device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.info("rank %d step %d loss %.4f", rank, step, loss.item())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
