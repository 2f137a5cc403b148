"""Checkpoint saved from an nn.DataParallel-wrapped model is loaded into the bare model."""
import os
import tempfile

import torch
import torch.nn as nn

torch.manual_seed(0)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(self.backbone(x).flatten(1))


def train_and_save(path):
    model = nn.DataParallel(Classifier())  # multi-GPU training script
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = nn.functional.cross_entropy(model(torch.randn(4, 3, 16, 16)), torch.tensor([0, 1, 2, 3]))
    loss.backward()
    opt.step()
    torch.save(model.state_dict(), path)


def load_for_inference(path):
    model = Classifier()
    model.load_state_dict(torch.load(path, map_location="cpu"))
    return model.eval()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "classifier_best.pt")
        train_and_save(ckpt)
        model = load_for_inference(ckpt)
        print(model(torch.randn(1, 3, 16, 16)).argmax(1))
