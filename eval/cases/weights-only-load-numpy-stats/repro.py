"""Checkpoint stores the input normalisation statistics as numpy arrays next to the weights;
loading it with the default torch.load settings."""
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn

np.random.seed(0)
torch.manual_seed(0)


class Forecaster(nn.Module):
    def __init__(self, n_features=6):
        super().__init__()
        self.gru = nn.GRU(n_features, 16, batch_first=True)
        self.out = nn.Linear(16, 1)

    def forward(self, x):
        h, _ = self.gru(x)
        return self.out(h[:, -1])


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        series = np.random.randn(500, 6) * 3 + 10
        model = Forecaster()
        path = os.path.join(tmp, "forecaster.pt")
        torch.save({
            "model": model.state_dict(),
            "feature_mean": series.mean(axis=0),
            "feature_std": series.std(axis=0),
        }, path)

        ckpt = torch.load(path)
        model.load_state_dict(ckpt["model"])
        x = (series[-24:] - ckpt["feature_mean"]) / ckpt["feature_std"]
        print(model(torch.tensor(x, dtype=torch.float32).unsqueeze(0)))
