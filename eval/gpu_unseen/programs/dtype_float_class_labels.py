import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset, DataLoader

# labels were stored in a float32 column of the feature matrix
data = np.random.randn(2048, 21).astype(np.float32)
data[:, -1] = np.random.randint(0, 5, size=2048)
features = torch.tensor(data[:, :-1])
labels = torch.tensor(data[:, -1])

loader = DataLoader(TensorDataset(features, labels), batch_size=64, shuffle=True)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5)).cuda()
criterion = nn.CrossEntropyLoss()
optim = torch.optim.SGD(model.parameters(), lr=0.1)

for epoch in range(2):
    total = 0.0
    for xb, yb in loader:
        xb, yb = xb.cuda(), yb.cuda()
        loss = criterion(model(xb), yb)
        optim.zero_grad()
        loss.backward()
        optim.step()
        total += loss.item()
    print("epoch", epoch, total / len(loader))
