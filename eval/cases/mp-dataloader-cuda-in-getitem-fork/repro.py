"""Dataset that does its augmentation on the GPU inside __getitem__,
used with DataLoader(num_workers=2) and the default (fork) start method.

The parent process has already initialised CUDA (model.to('cuda')), and the
forked workers cannot use CUDA.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")


class GpuAugmentedImages(Dataset):
    def __init__(self, n=512):
        g = torch.Generator().manual_seed(0)
        self.images = torch.rand(n, 3, 64, 64, generator=g)
        self.labels = torch.randint(0, 10, (n,), generator=g)
        self.mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
        self.std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        img = self.images[i].to(device)                 # "augment on the GPU, it's faster"
        if torch.rand(1).item() < 0.5:
            img = img.flip(-1)
        img = (img - self.mean.to(device)) / self.std.to(device)
        return img, self.labels[i]


def main():
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(16, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(GpuAugmentedImages(), batch_size=32, shuffle=True, num_workers=2)
    for step, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.info("step %d loss %.4f", step, loss.item())


if __name__ == "__main__":
    main()
