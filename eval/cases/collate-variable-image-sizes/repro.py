"""Image folder dataset without a resize transform; photos have different sizes."""
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

np.random.seed(0)
torch.manual_seed(0)


class PhotoDataset(Dataset):
    def __init__(self):
        # (height, width) of each photo as stored on disk
        self.sizes = [(64, 64), (64, 64), (48, 64), (64, 64), (64, 80), (64, 64), (64, 64), (32, 32)]

    def __len__(self):
        return len(self.sizes)

    def load(self, idx):
        h, w = self.sizes[idx]
        return np.random.randint(0, 256, size=(h, w, 3), dtype=np.uint8)

    def __getitem__(self, idx):
        img = self.load(idx)
        tensor = torch.from_numpy(img).permute(2, 0, 1).float() / 255.0  # ToTensor()
        return tensor, idx % 2


if __name__ == "__main__":
    loader = DataLoader(PhotoDataset(), batch_size=4, shuffle=False)
    for images, labels in loader:
        print(images.shape, labels)
