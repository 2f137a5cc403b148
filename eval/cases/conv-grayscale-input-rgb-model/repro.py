"""An RGB classifier (3 input channels) fed single-channel MNIST-style images."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

np.random.seed(0)
torch.manual_seed(0)


class DigitsDataset(Dataset):
    """Grayscale 28x28 digits stored as uint8 arrays (H, W)."""

    def __init__(self, n=64):
        self.images = np.random.randint(0, 256, size=(n, 28, 28), dtype=np.uint8)
        self.labels = np.random.randint(0, 10, size=n)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        img = torch.from_numpy(self.images[i]).float().div(255.0).unsqueeze(0)  # (1, 28, 28)
        return img, int(self.labels[i])


class RGBNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, kernel_size=3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(16, num_classes)

    def forward(self, x):
        return self.head(self.body(x).flatten(1))


def train():
    model = RGBNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = DataLoader(DigitsDataset(), batch_size=8, shuffle=True)
    for epoch in range(2):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print("epoch", epoch, "loss", loss.item())


if __name__ == "__main__":
    train()
