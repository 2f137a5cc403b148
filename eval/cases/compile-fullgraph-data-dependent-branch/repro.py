"""torch.compile(fullgraph=True) on a model with data-dependent control flow.

The gating block skips its expert when the mean router score is negative. With
fullgraph=True Dynamo cannot graph-break on `if tensor:` and raises.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("compile")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")


class GatedBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.router = nn.Linear(d, 1)
        self.expert = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        score = self.router(x).mean()
        if score > 0:                     # data-dependent Python branch
            x = x + self.expert(x)
        return x


class Model(nn.Module):
    def __init__(self, d=256, n=4):
        super().__init__()
        self.blocks = nn.ModuleList([GatedBlock(d) for _ in range(n)])
        self.out = nn.Linear(d, 10)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.out(x)


def main():
    model = Model().to(device)
    cmodel = torch.compile(model, fullgraph=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(5):
        x = torch.randn(64, 256, device=device)
        y = torch.randint(0, 10, (64,), device=device)
        loss = F.cross_entropy(cmodel(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.info("step %d loss %.4f", step, loss.item())


if __name__ == "__main__":
    main()
