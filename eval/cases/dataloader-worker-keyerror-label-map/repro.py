"""Dataset maps string labels to ids inside __getitem__; loading runs in 2 worker processes."""
import random

import torch
from torch.utils.data import DataLoader, Dataset

random.seed(0)
torch.manual_seed(0)

LABEL_MAP = {"cat": 0, "dog": 1, "bird": 2}


class AnimalSounds(Dataset):
    def __init__(self, n=40):
        names = ["cat", "dog", "bird"]
        self.items = [(torch.randn(16), names[i % 3]) for i in range(n)]
        # one annotator used a label that is not in LABEL_MAP
        self.items[5] = (torch.randn(16), "Dog")

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        features, label = self.items[idx]
        return features, LABEL_MAP[label]


if __name__ == "__main__":
    loader = DataLoader(AnimalSounds(), batch_size=8, shuffle=False, num_workers=2)
    model = torch.nn.Linear(16, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
