"""House-price regression trained fully in fp16 (model.half()) on raw targets.

Targets are prices in thousands (150..900). At initialisation the predictions
are ~0, so the squared errors (~2e4..8e5) exceed fp16's max (65504) and the
MSE loss is inf on the very first step; the training loop's sanity check
raises.
"""
import logging

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("regression")

np.random.seed(0)
torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")


def make_data(n=4096, d=16):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d)).astype(np.float32)
    w = rng.uniform(10, 60, size=d).astype(np.float32)
    price_k = 450 + X @ w + rng.normal(0, 20, size=n).astype(np.float32)
    return torch.from_numpy(X), torch.from_numpy(np.clip(price_k, 150, 900))


def main():
    X, y = make_data()
    loader = DataLoader(TensorDataset(X, y), batch_size=256, shuffle=True)
    model = nn.Sequential(nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 1)).to(device).half()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-4)
    for epoch in range(3):
        for step, (xb, yb) in enumerate(loader):
            xb, yb = xb.to(device).half(), yb.to(device).half()
            pred = model(xb).squeeze(1)
            loss = F.mse_loss(pred, yb)
            if not torch.isfinite(loss):
                raise FloatingPointError(
                    f"non-finite loss {loss.item()} at epoch {epoch} step {step} "
                    f"(loss dtype {loss.dtype}, |target| max {yb.abs().max().item():.1f}, "
                    f"|pred| max {pred.abs().max().item():.3f})")
            opt.zero_grad()
            loss.backward()
            opt.step()
        log.info("epoch %d loss %.3f", epoch, loss.item())


if __name__ == "__main__":
    main()
