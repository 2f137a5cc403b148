"""Resuming training: the training script saved a dict with epoch/optimizer/model, and the
resume code passes the whole dict to load_state_dict."""
import os
import tempfile

import torch
import torch.nn as nn

torch.manual_seed(0)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(12, 24)
        self.decoder = nn.Linear(24, 12)

    def forward(self, x):
        return self.decoder(torch.relu(self.encoder(x)))


def save_checkpoint(path, model, opt, epoch, loss):
    torch.save({
        "epoch": epoch,
        "model_state_dict": model.state_dict(),
        "optimizer_state_dict": opt.state_dict(),
        "loss": loss,
    }, path)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "last.ckpt")
        model = Model()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        x = torch.randn(8, 12)
        loss = nn.functional.mse_loss(model(x), x)
        loss.backward()
        opt.step()
        save_checkpoint(path, model, opt, epoch=3, loss=loss.item())

        # --- resume ---
        model = Model()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        checkpoint = torch.load(path)
        model.load_state_dict(checkpoint)
        opt.load_state_dict(checkpoint["optimizer_state_dict"])
        start_epoch = checkpoint["epoch"] + 1
