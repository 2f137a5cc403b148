"""MNIST-style CNN with the whole (augmented) dataset preloaded onto the GPU.

To avoid host->device copies the training images are cached on the GPU, with
as many augmented copies as fit: after estimating normalisation statistics on
a small preview, the cache is sized from torch.cuda.mem_get_info() leaving
only 8 MiB free. The first convolution must
then initialise cuDNN, which cannot get device memory, and cuDNN reports an
internal error instead of PyTorch's "CUDA out of memory".
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")
HEADROOM = 8 * 2**20


def decode_into(images, labels):
    """Stand-in for decoding + augmenting raw samples directly on the GPU."""
    images.random_(0, 256)
    labels.random_(0, 10)


class GpuImageCache:
    """uint8 28x28 images + uint8 labels, all resident on the GPU."""

    def __init__(self, n, mean=0.0, std=1.0):
        self.n, self.mean, self.std = n, mean, std
        self.images = torch.empty(n, 1, 28, 28, dtype=torch.uint8, device=device)
        self.labels = torch.empty(n, dtype=torch.uint8, device=device)
        chunk = 1 << 24
        for s in range(0, n, chunk):
            decode_into(self.images[s:s + chunk], self.labels[s:s + chunk])

    @classmethod
    def fill_free_memory(cls, headroom=HEADROOM, **kw):
        free, _ = torch.cuda.mem_get_info()
        return cls((free - headroom) // (28 * 28 + 1), **kw)

    def batch(self, idx):
        x = self.images[idx].float().div_(255.0).sub_(self.mean).div_(self.std)
        return x, self.labels[idx].long()


def estimate_stats(n=256, seed=0):
    """Normalisation statistics from a small preview of the decoded data."""
    preview = GpuImageCache(n)
    g = torch.Generator(device=device).manual_seed(seed)
    idx = torch.randint(0, n, (n,), device=device, generator=g)
    x, y = preview.batch(idx)
    mean, std = x.mean().item(), x.std().item()
    log.info("preview: mean %.4f std %.4f, classes %s", mean, std,
             torch.bincount(y, minlength=10).tolist())
    return mean, std


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def main():
    model = Net().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    mean, std = estimate_stats()
    cache = GpuImageCache.fill_free_memory(mean=mean, std=std)
    log.info("cached %d images on the GPU, free now %.1f MiB", cache.n,
             torch.cuda.mem_get_info()[0] / 2**20)
    g = torch.Generator(device=device).manual_seed(0)
    for step in range(200):
        idx = torch.randint(0, cache.n, (16,), device=device, generator=g)
        x, y = cache.batch(idx)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 20 == 0:
            log.info("step %d loss %.4f", step, loss.item())


if __name__ == "__main__":
    main()
