# Save the whole model object (not just the state_dict) for the serving team.
import os
import tempfile
import torch
import torch.nn as nn


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
        self.postprocess = lambda s: torch.sigmoid(s) * 100.0   # score in [0, 100]

    def forward(self, x):
        return self.postprocess(self.net(x))


scorer = Scorer().cuda()
print(scorer(torch.randn(3, 16, device="cuda")).squeeze(1).tolist())
out_path = os.path.join(tempfile.gettempdir(), "scorer_full.pt")
torch.save(scorer, out_path)
print("saved to", out_path)
