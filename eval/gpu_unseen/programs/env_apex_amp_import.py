# Old NVIDIA example code using apex for mixed precision.
import torch
import torch.nn as nn
from apex import amp

model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
model, optimizer = amp.initialize(model, optimizer, opt_level="O1")

for i in range(10):
    x = torch.randn(64, 512).cuda()
    y = torch.randint(0, 10, (64,)).cuda()
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    with amp.scale_loss(loss, optimizer) as scaled_loss:
        scaled_loss.backward()
    optimizer.step()
print("done")
