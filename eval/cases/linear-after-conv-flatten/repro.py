"""Small CNN trained on 32x32 RGB images; the classifier size was copied from an MNIST (28x28) example."""
import random

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

random.seed(0)
np.random.seed(0)
torch.manual_seed(0)

CONFIG = {"num_classes": 10, "batch_size": 8, "lr": 1e-3, "steps": 3}


class RandomCifar(Dataset):
    def __init__(self, n=64):
        self.x = torch.randn(n, 3, 32, 32)
        self.y = torch.randint(0, 10, (n,))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class SmallCNN(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        # 28 -> 14 -> 7 on MNIST
        self.classifier = nn.Linear(32 * 7 * 7, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


def main():
    model = SmallCNN(CONFIG["num_classes"])
    opt = torch.optim.Adam(model.parameters(), lr=CONFIG["lr"])
    loader = DataLoader(RandomCifar(), batch_size=CONFIG["batch_size"], shuffle=True)
    criterion = nn.CrossEntropyLoss()
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.4f}")
        if step + 1 == CONFIG["steps"]:
            break


if __name__ == "__main__":
    main()
