# Regression on sensor data loaded through numpy.
import numpy as np
import torch
import torch.nn as nn

device = torch.device("cuda")

# pretend this came from np.loadtxt("sensors.csv")
raw = np.random.rand(5000, 12)
target = raw @ np.linspace(0.1, 1.2, 12) + 0.05 * np.random.randn(5000)

X = torch.from_numpy(raw).to(device)
Y = torch.from_numpy(target).unsqueeze(1).to(device)

model = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(200):
    pred = model(X)
    loss = nn.functional.mse_loss(pred, Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if epoch % 50 == 0:
        print(epoch, float(loss))
