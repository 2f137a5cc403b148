"""Weights saved from a torch.compile'd model are loaded into an uncompiled model for export."""
import os
import tempfile

import torch
import torch.nn as nn

torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mlp.pt")
        model = torch.compile(MLP())          # training script compiled the model
        torch.save(model.state_dict(), path)

        export_model = MLP()
        export_model.load_state_dict(torch.load(path))
        export_model.eval()
        print(export_model(torch.randn(1, 16)))
