# Dataset does GPU augmentation inside __getitem__; loader uses worker processes.
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

DEVICE = torch.device("cuda")


class GPUAugmentDataset(Dataset):
    def __init__(self, n=1024):
        self.images = torch.randn(n, 3, 64, 64)
        self.labels = torch.randint(0, 10, (n,))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        img = self.images[i].to(DEVICE)
        if torch.rand(1).item() < 0.5:
            img = torch.flip(img, dims=[2])
        img = img + 0.05 * torch.randn_like(img)
        return img, self.labels[i].to(DEVICE)


model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10)).to(DEVICE)
opt = torch.optim.Adam(model.parameters())
loader = DataLoader(GPUAugmentDataset(), batch_size=64, shuffle=True, num_workers=4)

for epoch in range(2):
    for imgs, labels in loader:
        loss = nn.functional.cross_entropy(model(imgs), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("epoch", epoch, "loss", loss.item())
