"""Sequence encoder that reshapes with the configured batch size; the last batch is smaller."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

cfg = {"batch_size": 32, "seq_len": 20, "n_features": 8, "hidden": 32, "epochs": 1}


class SeqEncoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.rnn = nn.GRU(cfg["n_features"], cfg["hidden"], batch_first=True)
        self.head = nn.Linear(cfg["hidden"], 1)

    def forward(self, x_flat):
        # samples arrive flattened as (batch, seq_len * n_features)
        x = x_flat.view(self.cfg["batch_size"], self.cfg["seq_len"], self.cfg["n_features"])
        out, _ = self.rnn(x)
        return self.head(out[:, -1]).squeeze(-1)


if __name__ == "__main__":
    n = 100  # 3 full batches of 32 and a last batch of 4
    X = torch.randn(n, cfg["seq_len"] * cfg["n_features"])
    y = torch.randn(n)
    loader = DataLoader(TensorDataset(X, y), batch_size=cfg["batch_size"], shuffle=False)
    model = SeqEncoder(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(cfg["epochs"]):
        for i, (xb, yb) in enumerate(loader):
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(f"batch {i} loss {loss.item():.4f}")
