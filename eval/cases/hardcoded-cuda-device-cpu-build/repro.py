"""Training script written for a GPU box, run on a CPU-only install of PyTorch."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

args = {"device": "cuda", "epochs": 1, "batch_size": 16, "lr": 1e-3}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, x):
        return self.net(x)


if __name__ == "__main__":
    device = torch.device(args["device"])
    model = Net().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args["lr"])
    loader = DataLoader(TensorDataset(torch.randn(64, 20), torch.randint(0, 2, (64,))),
                        batch_size=args["batch_size"], shuffle=True)
    for epoch in range(args["epochs"]):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
