# launched with: torchrun --nproc_per_node=2 ddp_model_on_cpu.py
import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model():
    return nn.Sequential(
        nn.Conv1d(8, 32, 5, padding=2), nn.GELU(),
        nn.Conv1d(32, 32, 5, padding=2), nn.GELU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 2),
    )


if __name__ == "__main__":
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=20))
    lr = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(lr)

    net = make_model()
    ddp_net = DDP(net, device_ids=[lr], output_device=lr)
    ddp_net = ddp_net.cuda()
    opt = torch.optim.AdamW(ddp_net.parameters(), lr=1e-3)

    for it in range(10):
        sig = torch.randn(16, 8, 256, device=f"cuda:{lr}")
        tgt = torch.randint(0, 2, (16,), device=f"cuda:{lr}")
        loss = nn.functional.cross_entropy(ddp_net(sig), tgt)
        opt.zero_grad(); loss.backward(); opt.step()
    if dist.get_rank() == 0:
        print("final loss", loss.item())
    dist.destroy_process_group()
