import torch
import torch.nn as nn


class GatedUnit(nn.Module):
    """GLU-style layer with a learnable gate temperature."""

    def __init__(self, dim):
        super().__init__()
        self.value = nn.Linear(dim, dim)
        self.gate = nn.Linear(dim, dim)
        self.temp = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        g = torch.sigmoid(self.gate(x))
        g.mul_(self.temp)              # scale the gate without allocating a new tensor
        return self.value(x) * g


model = nn.Sequential(GatedUnit(512), nn.LayerNorm(512), GatedUnit(512), nn.Linear(512, 1)).to("cuda")
optimizer = torch.optim.Adam(model.parameters())

for step in range(10):
    x = torch.randn(64, 512, device="cuda")
    y = torch.randn(64, 1, device="cuda")
    loss = ((model(x) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("done")
