"""DDP training of a classifier that also has an auxiliary (deep-supervision) head.

The auxiliary head is only used when forward(..., return_aux=True) is called,
which the training loop never does, so its parameters never get gradients and
DDP's reducer is still waiting for them when the next iteration starts.
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
from torch.utils.data.distributed import DistributedSampler

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")


class DeepSupervisedNet(nn.Module):
    def __init__(self, d_in=128, d_h=256, n_classes=10):
        super().__init__()
        self.stage1 = nn.Sequential(nn.Linear(d_in, d_h), nn.ReLU())
        self.stage2 = nn.Sequential(nn.Linear(d_h, d_h), nn.ReLU())
        self.head = nn.Linear(d_h, n_classes)
        self.aux_head = nn.Linear(d_h, n_classes)   # deep supervision on stage1

    def forward(self, x, return_aux=False):
        h1 = self.stage1(x)
        out = self.head(self.stage2(h1))
        if return_aux:
            return out, self.aux_head(h1)
        return out


def main():
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=30))
    rank, local_rank = dist.get_rank(), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    torch.manual_seed(0)

    g = torch.Generator().manual_seed(0)
    ds = TensorDataset(torch.randn(2048, 128, generator=g), torch.randint(0, 10, (2048,), generator=g))
    loader = DataLoader(ds, batch_size=64, sampler=DistributedSampler(ds, shuffle=True, seed=0))

    model = DDP(DeepSupervisedNet().to(device), device_ids=[local_rank])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.info("rank %d step %d loss %.4f", rank, step, loss.item())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
