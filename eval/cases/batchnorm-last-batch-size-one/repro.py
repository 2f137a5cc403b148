"""Tabular MLP with BatchNorm1d; the dataset size leaves a final batch of one sample."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

np.random.seed(0)
torch.manual_seed(0)


class TabularDataset(Dataset):
    def __init__(self, n=33, n_features=12):
        self.x = np.random.randn(n, n_features).astype(np.float32)
        self.y = (self.x[:, 0] > 0).astype(np.int64)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return torch.from_numpy(self.x[i]), torch.tensor(self.y[i])


class TabularNet(nn.Module):
    def __init__(self, n_features=12, hidden=64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_features, hidden),
            nn.BatchNorm1d(hidden),
            nn.ReLU(),
            nn.Linear(hidden, 2),
        )

    def forward(self, x):
        return self.net(x)


if __name__ == "__main__":
    loader = DataLoader(TabularDataset(), batch_size=32, shuffle=True)
    model = TabularNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    for epoch in range(2):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print("epoch", epoch, loss.item())
