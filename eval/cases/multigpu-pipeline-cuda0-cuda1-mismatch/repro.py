"""Naive model parallelism: encoder on cuda:0, decoder on cuda:1.

forward() moves the input to cuda:0 but forgets to move the encoder output to
cuda:1 before the decoder.
"""
import os

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("mp")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)


class TwoGPUAutoencoder(nn.Module):
    def __init__(self, d_in=1024, d_lat=128):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(d_in, 512), nn.ReLU(), nn.Linear(512, d_lat)).to("cuda:0")
        self.decoder = nn.Sequential(nn.Linear(d_lat, 512), nn.ReLU(), nn.Linear(512, d_in)).to("cuda:1")

    def forward(self, x):
        z = self.encoder(x.to("cuda:0"))
        return self.decoder(z)


def main():
    assert torch.cuda.device_count() >= 2, "this script needs 2 GPUs"
    model = TwoGPUAutoencoder()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = torch.randn(4096, 1024)
    for step in range(0, 4096, 256):
        x = data[step:step + 256]
        recon = model(x)
        loss = F.mse_loss(recon, x.to("cuda:1"))
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.info("step %d loss %.4f", step // 256, loss.item())


if __name__ == "__main__":
    main()
