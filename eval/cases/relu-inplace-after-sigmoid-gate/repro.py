"""Gated MLP: an in-place ReLU is applied to the output of a sigmoid gate."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class GatedUnit(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.value = nn.Linear(d, d)
        self.gate = nn.Linear(d, d)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        g = torch.sigmoid(self.gate(x))
        v = self.value(x)
        h = v * g
        return self.act(g) + h


if __name__ == "__main__":
    model = nn.Sequential(GatedUnit(8), nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(3):
        x = torch.randn(5, 8)
        target = torch.randn(5, 1)
        loss = nn.functional.mse_loss(model(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
