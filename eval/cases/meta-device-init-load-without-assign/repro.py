"""Large classifier head built on the meta device to skip random init, then filled from a
checkpoint with a plain load_state_dict()."""
import os
import tempfile

import torch
import torch.nn as nn

torch.manual_seed(0)


class ProjectionHead(nn.Module):
    def __init__(self, d_in=768, d_hidden=1024, n_classes=100):
        super().__init__()
        self.norm = nn.LayerNorm(d_in)
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, n_classes)

    def forward(self, feats):
        return self.fc2(torch.relu(self.fc1(self.norm(feats))))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "head.pt")
        torch.save(ProjectionHead().state_dict(), path)

        with torch.device("meta"):
            model = ProjectionHead()     # no memory allocated, no init cost
        state = torch.load(path, map_location="cpu", mmap=True)
        model.load_state_dict(state)
        model.eval()
        feats = torch.randn(4, 768)      # features from the (CPU) backbone
        with torch.no_grad():
            print(model(feats).argmax(-1))
