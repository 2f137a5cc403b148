# Multi-label image tagging with autocast; the model ends in a Sigmoid layer.
import torch
import torch.nn as nn

dev = torch.device("cuda")

net = nn.Sequential(
    nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Linear(64, 20), nn.Sigmoid(),
).to(dev)
criterion = nn.BCELoss()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler()

for it in range(5):
    imgs = torch.randn(32, 3, 64, 64, device=dev)
    tags = (torch.rand(32, 20, device=dev) > 0.8).float()
    with torch.autocast(device_type="cuda", dtype=torch.float16):
        probs = net(imgs)
        loss = criterion(probs, tags)
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    print(f"iter {it}: {loss.item():.4f}")
