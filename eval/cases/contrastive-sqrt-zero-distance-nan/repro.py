"""Siamese network with a contrastive loss on Euclidean distance computed as
sqrt(sum((a - b)^2)); some pairs are the same image."""
import torch
import torch.nn as nn

torch.manual_seed(0)
torch.autograd.set_detect_anomaly(True)


class Siamese(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 16))

    def forward(self, a, b):
        return self.encoder(a), self.encoder(b)


def contrastive_loss(za, zb, same, margin=1.0):
    dist = torch.sqrt(((za - zb) ** 2).sum(dim=1))
    pos = same * dist.pow(2)
    neg = (1 - same) * torch.clamp(margin - dist, min=0).pow(2)
    return (pos + neg).mean()


if __name__ == "__main__":
    model = Siamese()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    images = torch.randn(16, 32)
    idx_a = torch.arange(16)
    idx_b = torch.tensor([0, 1, 2, 3, 9, 11, 4, 5, 6, 7, 8, 10, 12, 13, 14, 15])  # first 4 pairs: same image
    same = (images[idx_a] == images[idx_b]).all(dim=1).float()
    for step in range(3):
        za, zb = model(images[idx_a], images[idx_b])
        loss = contrastive_loss(za, zb, same)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(step, loss.item())
