"""torch.save of the whole model object, which keeps a lambda as its activation."""
import os
import tempfile

import torch
import torch.nn as nn

torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self, sizes=(8, 32, 32, 1), slope=0.1):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.act = lambda x: torch.where(x > 0, x, slope * x)

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = self.act(layer(x))
        return self.layers[-1](x)


if __name__ == "__main__":
    model = MLP()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    for _ in range(5):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with tempfile.TemporaryDirectory() as tmp:
        torch.save(model, os.path.join(tmp, "mlp_full.pt"))
