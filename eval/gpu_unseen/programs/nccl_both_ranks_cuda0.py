# torchrun --nproc_per_node=2 nccl_both_ranks_cuda0.py
from datetime import timedelta
import torch
import torch.distributed as dist
import torch.nn as nn

dist.init_process_group("nccl", timeout=timedelta(seconds=20))
rank = dist.get_rank()
device = torch.device("cuda:0")          # copied from the single-GPU script

model = nn.Linear(512, 512).to(device)
model = nn.parallel.DistributedDataParallel(model, device_ids=[0])
opt = torch.optim.SGD(model.parameters(), lr=0.01)

for step in range(20):
    x = torch.randn(128, 512, device=device)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"[rank {rank}] finished, loss={loss.item():.4f}")
dist.destroy_process_group()
