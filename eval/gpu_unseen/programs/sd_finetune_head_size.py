# Fine-tune a "pretrained" backbone (1000-way head) on a 12-class task.
import io
import torch
import torch.nn as nn


class ConvNet(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


# pretend this buffer is "imagenet_pretrained.pth"
buf = io.BytesIO()
torch.save(ConvNet(1000).state_dict(), buf)
buf.seek(0)

model = ConvNet(num_classes=12)
state = torch.load(buf, map_location="cpu")
model.load_state_dict(state)
model = model.cuda()

opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 3, 96, 96, device="cuda")
y = torch.randint(0, 12, (16,), device="cuda")
loss = nn.functional.cross_entropy(model(x), y)
loss.backward()
opt.step()
print("finetune step ok", loss.item())
