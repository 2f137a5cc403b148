"""Top-level training script (no `if __name__ == "__main__":` guard) using DataLoader workers
with the 'spawn' start method, the default on macOS and Windows."""
import torch
import torch.multiprocessing as mp
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
mp.set_start_method("spawn", force=True)

dataset = TensorDataset(torch.randn(64, 10), torch.randint(0, 2, (64,)))
loader = DataLoader(dataset, batch_size=16, shuffle=True, num_workers=1)
model = nn.Linear(10, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)

for epoch in range(2):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("epoch", epoch, loss.item())
