# Metric learning with a hand-rolled pairwise euclidean distance.
# The user turned on anomaly detection to find out where NaNs come from.
import torch
import torch.nn as nn

torch.autograd.set_detect_anomaly(True)
device = "cuda"

embedder = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 64)).to(device)
opt = torch.optim.Adam(embedder.parameters(), lr=1e-3)


def pairwise_dist(e):
    diff = e.unsqueeze(1) - e.unsqueeze(0)
    return (diff ** 2).sum(-1).sqrt()


for step in range(5):
    x = torch.randn(32, 128, device=device)
    labels = torch.randint(0, 4, (32,), device=device)
    emb = embedder(x)
    d = pairwise_dist(emb)
    same = (labels[:, None] == labels[None, :]).float()
    margin = 1.0
    loss = (same * d.pow(2) + (1 - same) * torch.relu(margin - d).pow(2)).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, loss.item())
