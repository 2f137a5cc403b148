# Whole dataset preloaded to the GPU "for speed", loader still configured with pin_memory.
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset, DataLoader

device = "cuda"
X = torch.randn(20000, 40, device=device)
y = (X[:, :5].sum(1) > 0).long()

ds = TensorDataset(X, y)
loader = DataLoader(ds, batch_size=256, shuffle=True, pin_memory=True)

net = nn.Sequential(nn.Linear(40, 128), nn.ReLU(), nn.Linear(128, 2)).to(device)
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)

for ep in range(3):
    running = 0.0
    for xb, yb in loader:
        xb = xb.to(device, non_blocking=True)
        yb = yb.to(device, non_blocking=True)
        loss = nn.functional.cross_entropy(net(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        running += loss.item()
    print(f"epoch {ep} mean loss {running / len(loader):.4f}")
