"""Custom weight initialisation that modifies parameters in place outside torch.no_grad()."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Generator(nn.Module):
    def __init__(self, z_dim=16, out_dim=64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(z_dim, 128), nn.LeakyReLU(0.2),
            nn.Linear(128, out_dim), nn.Tanh(),
        )
        self.reset_parameters()

    def reset_parameters(self):
        # DCGAN-style init: N(0, 0.02) weights, zero bias
        for m in self.modules():
            if isinstance(m, nn.Linear):
                m.weight.normal_(0.0, 0.02)
                m.bias.zero_()

    def forward(self, z):
        return self.net(z)


if __name__ == "__main__":
    g = Generator()
    z = torch.randn(4, 16)
    print(g(z).shape)
