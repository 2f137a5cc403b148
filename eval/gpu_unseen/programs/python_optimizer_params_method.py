import torch
import torch.nn as nn


class Autoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 16))
        self.dec = nn.Sequential(nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 784), nn.Sigmoid())

    def forward(self, x):
        return self.dec(self.enc(x))


ae = Autoencoder().to("cuda")
optimizer = torch.optim.Adam(ae.parameters, lr=1e-3)
for epoch in range(5):
    x = torch.rand(256, 784, device="cuda")
    recon = ae(x)
    loss = nn.functional.binary_cross_entropy(recon, x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(epoch, loss.item())
