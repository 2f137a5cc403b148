"""MLP whose layers are kept in a plain Python list instead of nn.ModuleList."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class DeepMLP(nn.Module):
    def __init__(self, sizes=(16, 64, 64, 64, 1)):
        super().__init__()
        self.layers = [nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])]

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)


if __name__ == "__main__":
    model = DeepMLP()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(3):
        x, y = torch.randn(32, 16), torch.randn(32, 1)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
