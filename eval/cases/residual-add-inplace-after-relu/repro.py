"""Residual block that adds the shortcut in place onto the output of a ReLU."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class ResidualBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(ch)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(ch)
        self.relu = nn.ReLU()

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out += identity
        return out


class ResNetTiny(nn.Module):
    def __init__(self, n_classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.blocks = nn.Sequential(ResidualBlock(16), ResidualBlock(16))
        self.head = nn.Linear(16, n_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(x.mean(dim=(2, 3)))


if __name__ == "__main__":
    model = ResNetTiny()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 3, 16, 16)
    y = torch.randint(0, 10, (4,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
