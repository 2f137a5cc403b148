"""Batch inference with a ResNet-style model converted to fp16 to save memory.

The model is .half()'d, but the preprocessing pipeline still produces fp32
tensors, so the first conv sees a float32 input and float16 weights.
"""
import logging

import torch
import torch.nn as nn

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("infer")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


class BasicBlock(nn.Module):
    def __init__(self, c_in, c_out, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.down = None
        if stride != 1 or c_in != c_out:
            self.down = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + idt)


class SmallResNet(nn.Module):
    def __init__(self, n_classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(BasicBlock(64, 64), BasicBlock(64, 128, 2), BasicBlock(128, 256, 2))
        self.fc = nn.Linear(256, n_classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def preprocess(batch_uint8):
    x = batch_uint8.float() / 255.0
    return (x - MEAN) / STD


def main():
    model = SmallResNet().to(device).half().eval()
    images = torch.randint(0, 256, (64, 3, 224, 224), dtype=torch.uint8)
    with torch.inference_mode():
        x = preprocess(images).to(device)
        probs = model(x).softmax(dim=-1)
        top5 = probs.topk(5, dim=-1)
    log.info("top-5 of first image: %s", top5.indices[0].tolist())


if __name__ == "__main__":
    main()
