"""Multi-task model with one output column per task.

Task ids in the config are 1-based (1..5) while the stacked head output has 5
columns (0..4). Plain integer indexing is bounds-checked on the host even for
CUDA tensors, so this is an IndexError, not a device-side assert.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("multitask")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")

TASKS = {"toxicity": 1, "sentiment": 2, "formality": 3, "humor": 4, "sarcasm": 5}


class MultiTaskRegressor(nn.Module):
    def __init__(self, d_in=768, n_tasks=len(TASKS)):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(d_in, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU())
        self.heads = nn.ModuleList([nn.Linear(256, 1) for _ in range(n_tasks)])

    def forward(self, x):
        h = self.trunk(x)
        return torch.cat([head(h) for head in self.heads], dim=1)   # B x n_tasks


def main():
    model = MultiTaskRegressor().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(3):
        x = torch.randn(64, 768, device=device)
        targets = {name: torch.rand(64, device=device) for name in TASKS}
        out = model(x)
        loss = sum(F.mse_loss(out[:, task_id], targets[name]) for name, task_id in TASKS.items())
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.info("step %d loss %.4f", step, loss.item())


if __name__ == "__main__":
    main()
