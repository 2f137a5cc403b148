# torchrun --nproc_per_node=2 ddp_unused_aux_head.py
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self, use_aux=False):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
        self.head = nn.Linear(128, 10)
        self.aux_head = nn.Linear(128, 10)   # deep-supervision head, disabled for this run
        self.use_aux = use_aux

    def forward(self, x):
        feats = self.backbone(x)
        out = self.head(feats)
        if self.use_aux:
            return out, self.aux_head(feats)
        return out


def main():
    dist.init_process_group("nccl", timeout=timedelta(seconds=20))
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    model = DDP(Net().cuda(), device_ids=[local_rank])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(5):
        x = torch.randn(32, 64, device="cuda")
        y = torch.randint(0, 10, (32,), device="cuda")
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if dist.get_rank() == 0:
            print("step", step, loss.item())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
