# Script copied from the lab cluster where jobs ran on GPUs 6 and 7.
import os
os.environ["CUDA_VISIBLE_DEVICES"] = "6,7"

import torch
import torch.nn as nn

device = torch.device("cuda")
print("torch", torch.__version__)

model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(100):
    x = torch.randn(128, 784, device=device)
    y = torch.randint(0, 10, (128,), device=device)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", loss.item())
