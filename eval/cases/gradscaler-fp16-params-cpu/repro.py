"""Mixed-precision attempt on CPU: the model itself is cast to fp16 and trained with GradScaler."""
import torch
import torch.nn as nn

torch.manual_seed(0)

device = "cpu"
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device).half()
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
scaler = torch.amp.GradScaler(device)

for step in range(3):
    x = torch.randn(16, 32, device=device).half()
    y = torch.randint(0, 4, (16,), device=device)
    with torch.autocast(device_type=device, dtype=torch.float16):
        loss = nn.functional.cross_entropy(model(x).float(), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    print(step, loss.item())
