import torch
import torch.nn as nn
import torch.nn.functional as F


class SmallCNN(nn.Module):
    """Classifier written for 32x32 CIFAR images, now fed 64x64 crops."""

    def __init__(self, n_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(64 * 8 * 8, 256)
        self.fc2 = nn.Linear(256, n_classes)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


device = torch.device("cuda")
net = SmallCNN().to(device)
optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

for it in range(5):
    imgs = torch.randn(128, 3, 64, 64, device=device)
    targets = torch.randint(0, 10, (128,), device=device)
    out = net(imgs)
    loss = F.cross_entropy(out, targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(it, loss.item())
