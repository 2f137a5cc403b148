"""Dataset reading shards from slow remote storage; the DataLoader has a timeout set."""
import time

import torch
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


class RemoteShardDataset(Dataset):
    def __init__(self, n=16, latency_s=20.0):
        self.n = n
        self.latency_s = latency_s

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        time.sleep(self.latency_s)  # stands in for a blocking read from a stalled network mount
        return torch.randn(8), idx % 2


if __name__ == "__main__":
    loader = DataLoader(RemoteShardDataset(), batch_size=4, num_workers=2, timeout=3)
    model = torch.nn.Linear(8, 2)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
