"""Image classifier on a 10-class dataset whose labels come from a CSV.

The CSV numbers the classes 1..10 (1-based); the model has 10 outputs, so
label 10 is out of range for CrossEntropyLoss. On CUDA this is a device-side
assert inside the nll_loss kernel, reported at the next synchronisation.
"""
import logging

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
np.random.seed(0)
device = torch.device("cuda")
NUM_CLASSES = 10


class CsvImageDataset(Dataset):
    """Stands in for rows of `train.csv`: (image, class_id) with class_id in 1..10."""

    def __init__(self, n=2048):
        rng = np.random.default_rng(0)
        self.images = rng.standard_normal((n, 3, 32, 32), dtype=np.float32)
        self.labels = rng.integers(1, NUM_CLASSES + 1, size=n)  # 1-based class ids

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return torch.from_numpy(self.images[i]), int(self.labels[i])


class SmallCNN(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(64 * 8 * 8, num_classes)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def main():
    loader = DataLoader(CsvImageDataset(), batch_size=128, shuffle=True)
    model = SmallCNN().to(device)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    running = 0.0
    for step, (images, labels) in enumerate(loader):
        images, labels = images.to(device), labels.to(device)
        loss = criterion(model(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        running += loss.item()
        if step % 5 == 0:
            log.info("step %d loss %.4f", step, running / (step + 1))


if __name__ == "__main__":
    main()
