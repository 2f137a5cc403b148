import torch
import torch.nn as nn

device = "cuda"
torch.manual_seed(1)

model = nn.Sequential(nn.Linear(100, 200), nn.ReLU(), nn.Linear(200, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x_val = torch.randn(1000, 100, device=device)
y_val = torch.randint(0, 10, (1000,), device=device)


def evaluate():
    model.eval()
    torch.set_grad_enabled(False)   # speed up evaluation
    acc = (model(x_val).argmax(1) == y_val).float().mean().item()
    model.train()
    return acc


def train_epoch(n_steps=20):
    for _ in range(n_steps):
        x = torch.randn(64, 100, device=device)
        y = torch.randint(0, 10, (64,), device=device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


print("initial acc", evaluate())
for epoch in range(3):
    print("epoch", epoch, "loss", train_epoch(), "acc", evaluate())
