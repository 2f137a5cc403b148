# torchrun --nproc_per_node=2 nccl_rank0_only_allreduce.py
# Validation is only run on rank 0, but the metric is "synchronised" with all_reduce.
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def validate(model):
    model.eval()
    with torch.no_grad():
        x = torch.randn(256, 32, device="cuda")
        y = torch.randint(0, 5, (256,), device="cuda")
        correct = (model(x).argmax(1) == y).sum().float()
    dist.all_reduce(correct)
    model.train()
    return correct.item() / (256 * dist.get_world_size())


def main():
    dist.init_process_group("nccl", timeout=timedelta(seconds=20))
    rank = dist.get_rank()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 5)).cuda(), device_ids=[local_rank])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    for step in range(50):
        x = torch.randn(64, 32, device="cuda")
        y = torch.randint(0, 5, (64,), device="cuda")
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    if rank == 0:
        acc = validate(model.module)
        print(f"val acc: {acc:.3f}")
    print(f"rank {rank} exiting")


if __name__ == "__main__":
    main()
