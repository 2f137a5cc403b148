"""Linear probe on a frozen backbone: features are extracted under torch.inference_mode()
and then fed to a trainable head."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )

    def forward(self, x):
        return self.net(x)


@torch.inference_mode()
def extract_features(backbone, images):
    backbone.eval()
    return backbone(images)


if __name__ == "__main__":
    backbone = Backbone()
    for p in backbone.parameters():
        p.requires_grad_(False)
    probe = nn.Linear(32, 4)
    opt = torch.optim.SGD(probe.parameters(), lr=0.1)
    for step in range(3):
        images = torch.randn(8, 3, 32, 32)
        labels = torch.randint(0, 4, (8,))
        feats = extract_features(backbone, images)
        loss = nn.functional.cross_entropy(probe(feats), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(step, loss.item())
