# Mixed precision training: model cast to fp16 "to save memory", plus GradScaler.
import torch
import torch.nn as nn

device = "cuda"
model = nn.Sequential(
    nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024), nn.LayerNorm(1024), nn.Linear(1024, 50)
).to(device).half()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = torch.amp.GradScaler("cuda")

for step in range(10):
    x = torch.randn(64, 1024, device=device, dtype=torch.float16)
    y = torch.randint(0, 50, (64,), device=device)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    print(step, loss.item())
