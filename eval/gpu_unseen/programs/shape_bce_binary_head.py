# binary fraud classifier on tabular features
import torch
from torch import nn

DEVICE = "cuda"

clf = nn.Sequential(nn.Linear(30, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 1)).to(DEVICE)
loss_fn = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([5.0], device=DEVICE))
opt = torch.optim.Adam(clf.parameters(), 1e-3)

X = torch.randn(10_000, 30)
y = (torch.rand(10_000) < 0.1).float()

for epoch in range(3):
    perm = torch.randperm(len(X))
    for i in range(0, len(X), 256):
        idx = perm[i:i + 256]
        xb, yb = X[idx].to(DEVICE), y[idx].to(DEVICE)
        logits = clf(xb)
        loss = loss_fn(logits, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch}: {loss.item():.4f}")
