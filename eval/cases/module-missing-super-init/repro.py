"""Custom nn.Module whose __init__ forgets to call super().__init__()."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Autoencoder(nn.Module):
    def __init__(self, d_in=784, d_latent=32):
        self.encoder = nn.Sequential(nn.Linear(d_in, 256), nn.ReLU(), nn.Linear(256, d_latent))
        self.decoder = nn.Sequential(nn.Linear(d_latent, 256), nn.ReLU(), nn.Linear(256, d_in))

    def forward(self, x):
        return self.decoder(self.encoder(x))


if __name__ == "__main__":
    model = Autoencoder()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.rand(16, 784)
    loss = nn.functional.mse_loss(model(x), x)
    loss.backward()
    opt.step()
