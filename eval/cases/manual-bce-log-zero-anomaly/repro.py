"""Hand-written binary cross-entropy on sigmoid probabilities; anomaly detection is on to
find where the NaN loss comes from."""
import torch
import torch.nn as nn

torch.manual_seed(0)
torch.autograd.set_detect_anomaly(True)


class CTRModel(nn.Module):
    def __init__(self, n_features=16):
        super().__init__()
        self.linear = nn.Linear(n_features, 1)
        with torch.no_grad():
            self.linear.weight.mul_(40.0)  # badly scaled init from an old config

    def forward(self, x):
        return torch.sigmoid(self.linear(x)).squeeze(1)


def bce(p, y):
    return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()


if __name__ == "__main__":
    model = CTRModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 16) * 3
    y = (torch.rand(64) > 0.5).float()
    for step in range(5):
        p = model(x)
        loss = bce(p, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(step, loss.item())
