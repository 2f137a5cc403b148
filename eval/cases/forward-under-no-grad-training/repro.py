"""A shared 'run_model' helper wraps the forward in torch.no_grad() for speed, and the
training loop uses it too."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))

    def forward(self, x):
        return self.body(x)


def run_model(model, x):
    with torch.no_grad():
        return model(x)


def evaluate(model, loader):
    correct = 0
    for x, y in loader:
        correct += (run_model(model, x).argmax(1) == y).sum().item()
    return correct / len(loader.dataset)


def train_one_epoch(model, loader, opt):
    model.train()
    for x, y in loader:
        logits = run_model(model, x)
        loss = nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    data = TensorDataset(torch.randn(64, 10), torch.randint(0, 3, (64,)))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    print("acc before", evaluate(model, loader))
    train_one_epoch(model, loader, opt)
    print("acc after", evaluate(model, loader))
