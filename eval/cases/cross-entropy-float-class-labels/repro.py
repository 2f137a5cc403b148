"""Labels read from a float array are passed to CrossEntropyLoss as class indices."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

np.random.seed(0)
torch.manual_seed(0)


class CsvLikeDataset(Dataset):
    """Last column of the table is the class id, so the whole table is float32."""

    def __init__(self, n=128, d=16, n_classes=4):
        table = np.random.randn(n, d + 1).astype(np.float32)
        table[:, -1] = np.random.randint(0, n_classes, size=n)
        self.table = table

    def __len__(self):
        return len(self.table)

    def __getitem__(self, i):
        row = torch.from_numpy(self.table[i])
        return row[:-1], row[-1]


if __name__ == "__main__":
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(CsvLikeDataset(), batch_size=16, shuffle=True)
    for epoch in range(2):
        for features, label in loader:
            logits = model(features)
            loss = criterion(logits, label)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(epoch, loss.item())
