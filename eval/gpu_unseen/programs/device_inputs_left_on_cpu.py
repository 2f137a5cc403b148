import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class SpectrogramDS(Dataset):
    def __init__(self, n=512):
        self.x = torch.randn(n, 1, 64, 100)
        self.y = torch.randint(0, 8, (n,))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class AudioNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Linear(32, 8)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


device = torch.device("cuda:0")
model = AudioNet().to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loader = DataLoader(SpectrogramDS(), batch_size=32, shuffle=True)

model.train()
for step, (spec, label) in enumerate(loader):
    label = label.to(device)
    logits = model(spec)
    loss = nn.functional.cross_entropy(logits, label)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 4 == 0:
        print(f"step {step} loss={loss.item():.3f}")
