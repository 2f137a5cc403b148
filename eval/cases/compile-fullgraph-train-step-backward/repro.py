"""Whole training step (forward, backward, optimizer step) wrapped in torch.compile(fullgraph=True)."""
import torch
import torch.nn as nn

torch.manual_seed(0)

model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)


@torch.compile(fullgraph=True)
def train_step(x, y):
    pred = model(x)
    loss = nn.functional.mse_loss(pred, y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


if __name__ == "__main__":
    for step in range(3):
        x, y = torch.randn(32, 16), torch.randn(32, 1)
        print(step, train_step(x, y).item())
