"""Saving the best checkpoint into a sub-directory that was never created."""
import os
import tempfile

import torch
import torch.nn as nn

torch.manual_seed(0)

config = {"save_dir": "checkpoints/exp_lr3e-4", "epochs": 2}


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as workdir:
        save_dir = os.path.join(workdir, config["save_dir"])
        model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 1))
        opt = torch.optim.Adam(model.parameters(), lr=3e-4)
        best = float("inf")
        for epoch in range(config["epochs"]):
            x, y = torch.randn(32, 6), torch.randn(32, 1)
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if loss.item() < best:
                best = loss.item()
                torch.save(model.state_dict(), os.path.join(save_dir, "best.pt"))
