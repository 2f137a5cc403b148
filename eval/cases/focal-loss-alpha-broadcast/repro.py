"""Custom focal loss with per-class alpha weights multiplied against the per-sample loss."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

NUM_CLASSES = 5
BATCH = 16


class FocalLoss(nn.Module):
    def __init__(self, alpha, gamma=2.0):
        super().__init__()
        self.register_buffer("alpha", torch.as_tensor(alpha, dtype=torch.float32))
        self.gamma = gamma

    def forward(self, logits, target):
        ce = F.cross_entropy(logits, target, reduction="none")  # (N,)
        pt = torch.exp(-ce)
        loss = self.alpha * (1 - pt) ** self.gamma * ce
        return loss.mean()


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, NUM_CLASSES))

    def forward(self, x):
        return self.net(x)


if __name__ == "__main__":
    model = MLP()
    class_counts = torch.tensor([500.0, 120.0, 60.0, 30.0, 10.0])
    criterion = FocalLoss(alpha=(1.0 / class_counts) / (1.0 / class_counts).sum())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(3):
        x = torch.randn(BATCH, 20)
        y = torch.randint(0, NUM_CLASSES, (BATCH,))
        loss = criterion(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(step, loss.item())
