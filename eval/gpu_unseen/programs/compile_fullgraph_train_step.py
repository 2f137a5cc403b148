# Compile the entire training step (forward + backward + optimizer) for speed.
import torch
import torch.nn as nn

device = "cuda"
model = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512), nn.LayerNorm(512), nn.Linear(512, 100)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()


@torch.compile(fullgraph=True)
def train_step(x, y):
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss


for i in range(5):
    x = torch.randn(256, 512, device=device)
    y = torch.randint(0, 100, (256,), device=device)
    loss = train_step(x, y)
    print(f"iter {i}: loss {loss.item():.4f}")
