"""AMP + gradient accumulation + gradient clipping.

Gradients are clipped after every micro-batch, which calls scaler.unscale_()
again before the optimizer step/update of the accumulation cycle.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")
ACCUM_STEPS = 4
MAX_NORM = 1.0


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128),
                                  nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc(self.body(x).flatten(1))


def clip_gradients(model, optimizer, scaler):
    scaler.unscale_(optimizer)
    return torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)


def main():
    model = ConvNet().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    opt.zero_grad()
    for i in range(32):
        x = torch.randn(32, 3, 32, 32, device=device)
        y = torch.randint(0, 10, (32,), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y) / ACCUM_STEPS
        scaler.scale(loss).backward()
        grad_norm = clip_gradients(model, opt, scaler)
        if (i + 1) % ACCUM_STEPS == 0:
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            log.info("update %d loss %.4f grad_norm %.3f", (i + 1) // ACCUM_STEPS,
                     loss.item() * ACCUM_STEPS, grad_norm.item())


if __name__ == "__main__":
    main()
