"""Tabular regression: features built with numpy (float64) go straight into a float32 model."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

np.random.seed(0)
torch.manual_seed(0)


def load_features(n=256, d=10):
    # stands in for pd.read_csv(...).to_numpy() followed by standardisation
    raw = np.random.rand(n, d) * 100.0
    x = (raw - raw.mean(axis=0)) / raw.std(axis=0)
    y = x @ np.linspace(-1, 1, d) + 0.1 * np.random.randn(n)
    return x, y


class Regressor(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


if __name__ == "__main__":
    x, y = load_features()
    ds = TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    loader = DataLoader(ds, batch_size=32, shuffle=True)
    model = Regressor(x.shape[1])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(epoch, loss.item())
