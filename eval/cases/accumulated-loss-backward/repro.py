"""Training loop that keeps a running loss tensor for logging and calls backward on it."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

X = torch.randn(80, 6)
Y = (X.sum(1, keepdim=True) > 0).float()
loader = DataLoader(TensorDataset(X, Y), batch_size=16, shuffle=True)

model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.BCEWithLogitsLoss()

for epoch in range(2):
    total_loss = 0
    for xb, yb in loader:
        opt.zero_grad()
        loss = criterion(model(xb), yb)
        total_loss += loss
        total_loss.backward()
        opt.step()
    print(f"epoch {epoch}: mean loss {total_loss / len(loader):.4f}")
