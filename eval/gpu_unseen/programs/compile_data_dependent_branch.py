import torch
import torch.nn as nn
import torch.nn.functional as F


class AdaptiveNorm(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm1d(c)
        self.ln = nn.LayerNorm(c)

    def forward(self, x):
        # use batchnorm for well-behaved batches, layernorm when activations explode
        if x.abs().max() > 50:
            return self.ln(x)
        return self.bn(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(128, 256)
        self.norm = AdaptiveNorm(256)
        self.l2 = nn.Linear(256, 10)

    def forward(self, x):
        return self.l2(F.gelu(self.norm(self.l1(x))))


net = torch.compile(Net().cuda(), fullgraph=True)
opt = torch.optim.AdamW(net.parameters())
for i in range(3):
    xb = torch.randn(512, 128, device="cuda")
    yb = torch.randint(0, 10, (512,), device="cuda")
    loss = F.cross_entropy(net(xb), yb)
    opt.zero_grad(); loss.backward(); opt.step()
    print(i, loss.item())
