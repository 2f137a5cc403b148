"""Fine-tuning a model pretrained on 1000 classes for a 10-class task."""
import os
import tempfile

import torch
import torch.nn as nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 256, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = nn.Linear(256, num_classes)

    def forward(self, x):
        return self.head(self.features(x))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        pretrained_path = os.path.join(tmp, "imagenet_pretrained.pth")
        torch.save(Net(num_classes=1000).state_dict(), pretrained_path)  # stands in for the download

        model = Net(num_classes=10)
        state = torch.load(pretrained_path, map_location="cpu")
        model.load_state_dict(state)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        loss = nn.functional.cross_entropy(model(torch.randn(2, 3, 32, 32)), torch.tensor([1, 7]))
        loss.backward()
        opt.step()
