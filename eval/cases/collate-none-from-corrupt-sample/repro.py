"""Dataset returns None for samples it fails to decode, hoping the DataLoader skips them."""
import io

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

np.random.seed(0)
torch.manual_seed(0)


def make_blobs(n=12):
    blobs = []
    for i in range(n):
        buf = io.BytesIO()
        np.save(buf, np.random.rand(8, 8).astype(np.float32))
        data = buf.getvalue()
        if i == 8:
            data = data[:40]  # a truncated file in the shard
        blobs.append(data)
    return blobs


class SpectrogramDataset(Dataset):
    def __init__(self, blobs):
        self.blobs = blobs

    def __len__(self):
        return len(self.blobs)

    def __getitem__(self, idx):
        try:
            spec = np.load(io.BytesIO(self.blobs[idx]))
        except Exception:
            print(f"warning: could not decode sample {idx}, skipping")
            return None
        return torch.from_numpy(spec).unsqueeze(0), idx % 3


if __name__ == "__main__":
    loader = DataLoader(SpectrogramDataset(make_blobs()), batch_size=4, shuffle=False)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 3))
    for specs, labels in loader:
        loss = torch.nn.functional.cross_entropy(model(specs), labels)
        loss.backward()
