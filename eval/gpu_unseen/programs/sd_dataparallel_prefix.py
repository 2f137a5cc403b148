# train.py saved a checkpoint from a DataParallel model; infer.py loads it into the bare model.
import os
import tempfile
import torch
import torch.nn as nn


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


ckpt_path = os.path.join(tempfile.mkdtemp(), "regressor.pt")

# ---- training side ----
net = nn.DataParallel(Regressor()).cuda()
opt = torch.optim.Adam(net.parameters())
for _ in range(20):
    x = torch.randn(256, 20, device="cuda")
    loss = (net(x).squeeze(1) - x.sum(1)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
torch.save(net.state_dict(), ckpt_path)

# ---- inference side ----
model = Regressor().cuda()
model.load_state_dict(torch.load(ckpt_path, map_location="cuda"))
model.eval()
with torch.no_grad():
    print(model(torch.randn(4, 20, device="cuda")))
