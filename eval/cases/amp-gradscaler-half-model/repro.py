"""Mixed-precision training, done by converting the model to fp16 with .half().

GradScaler unscales gradients in fp32 and refuses fp16 gradients: the master
weights must stay fp32 and autocast should do the casting.
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


class MLP(nn.Module):
    def __init__(self, d_in=512, d_h=2048, n_out=100):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, d_h), nn.GELU(), nn.Linear(d_h, d_h), nn.GELU(),
                                 nn.Linear(d_h, n_out))

    def forward(self, x):
        return self.net(x)


def main():
    model = MLP().to(device).half()          # "mixed precision"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda")
    for step in range(10):
        x = torch.randn(256, 512, device=device, dtype=torch.half)
        y = torch.randint(0, 100, (256,), device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        log.info("step %d loss %.4f scale %.0f", step, loss.item(), scaler.get_scale())


if __name__ == "__main__":
    main()
