"""Dataset path configured relative to the project root, script started from another directory."""
import os

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

cfg = {"data_dir": "data/cifar10_npz", "batch_size": 64}


class NpzImageDataset(Dataset):
    def __init__(self, data_dir, split="train"):
        self.x = np.load(os.path.join(data_dir, f"{split}_x.npy"), mmap_mode="r")
        self.y = np.load(os.path.join(data_dir, f"{split}_y.npy"))

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return torch.from_numpy(np.array(self.x[i], dtype=np.float32)), int(self.y[i])


if __name__ == "__main__":
    train_set = NpzImageDataset(cfg["data_dir"], "train")
    loader = DataLoader(train_set, batch_size=cfg["batch_size"], shuffle=True)
    for x, y in loader:
        print(x.shape)
        break
