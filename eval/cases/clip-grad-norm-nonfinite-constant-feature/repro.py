"""Tabular model with gradient clipping that raises on non-finite norms. One feature column
is constant, and the hand-written standardisation divides it by a zero std."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

np.random.seed(0)
torch.manual_seed(0)

config = {"lr": 1e-3, "max_grad_norm": 1.0, "epochs": 2, "batch_size": 32}


def load_table(n=256):
    age = np.random.randint(18, 80, size=n)
    income = np.random.lognormal(10, 1, size=n)
    country = np.full(n, 3)          # every row in this export is the same country
    clicks = np.random.poisson(4, size=n)
    x = np.stack([age, income, country, clicks], axis=1).astype(np.float32)
    y = (0.02 * age + 0.5 * np.log(income) + 0.1 * clicks).astype(np.float32)
    return x, y


def standardize(x):
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    return (x - mean) / std


if __name__ == "__main__":
    x, y = load_table()
    x = standardize(x)
    loader = DataLoader(TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
                        batch_size=config["batch_size"], shuffle=True)
    model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=config["lr"])
    for epoch in range(config["epochs"]):
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb).squeeze(1), yb)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config["max_grad_norm"],
                                           error_if_nonfinite=True)
            opt.step()
        print(epoch, loss.item())
