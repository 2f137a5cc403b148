"""Model with a data-dependent early exit, compiled with fullgraph=True."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class EarlyExitNet(nn.Module):
    def __init__(self, d=32, n_classes=4, threshold=0.9):
        super().__init__()
        self.block1 = nn.Sequential(nn.Linear(d, d), nn.ReLU())
        self.exit1 = nn.Linear(d, n_classes)
        self.block2 = nn.Sequential(nn.Linear(d, d), nn.ReLU())
        self.exit2 = nn.Linear(d, n_classes)
        self.threshold = threshold

    def forward(self, x):
        h = self.block1(x)
        early = self.exit1(h)
        if early.softmax(-1).max() > self.threshold:
            return early
        return self.exit2(self.block2(h))


if __name__ == "__main__":
    model = EarlyExitNet().eval()
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        for _ in range(3):
            print(compiled(torch.randn(8, 32)).argmax(-1))
