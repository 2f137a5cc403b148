# Labels in the annotation file are 1..10 (1-indexed), the model has 10 outputs.
import torch
import torch.nn as nn

device = "cuda"
NUM_CLASSES = 10

annotations = torch.randint(1, NUM_CLASSES + 1, (4096,))      # as read from labels.txt
images = torch.randn(4096, 3, 32, 32)

model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
    nn.Flatten(), nn.Linear(16 * 16, NUM_CLASSES),
).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()

for i in range(0, 4096, 256):
    x = images[i:i + 256].to(device)
    y = annotations[i:i + 256].to(device)
    loss = criterion(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"batch {i // 256}: {loss.item():.3f}")
