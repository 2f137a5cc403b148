"""Tiny U-Net: concatenating the skip connection fails when the input size is odd."""
import torch
import torch.nn as nn

torch.manual_seed(0)


def double_conv(cin, cout):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU(inplace=True),
    )


class TinyUNet(nn.Module):
    def __init__(self, in_ch=1, n_classes=2):
        super().__init__()
        self.enc1 = double_conv(in_ch, 16)
        self.pool = nn.MaxPool2d(2)
        self.enc2 = double_conv(16, 32)
        self.up = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.dec1 = double_conv(32, 16)
        self.out = nn.Conv2d(16, n_classes, 1)

    def forward(self, x):
        s1 = self.enc1(x)
        x = self.enc2(self.pool(s1))
        x = self.up(x)
        x = torch.cat([x, s1], dim=1)
        return self.out(self.dec1(x))


if __name__ == "__main__":
    model = TinyUNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    # scans are 75x75 after the dataset's center crop
    images = torch.randn(2, 1, 75, 75)
    masks = torch.randint(0, 2, (2, 75, 75))
    for step in range(2):
        logits = model(images)
        loss = nn.functional.cross_entropy(logits, masks)
        opt.zero_grad()
        loss.backward()
        opt.step()
