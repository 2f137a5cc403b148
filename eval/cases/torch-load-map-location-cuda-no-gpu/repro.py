"""Inference script that loads a checkpoint with map_location='cuda:0' on a machine without a GPU."""
import os
import tempfile

import torch
import torch.nn as nn

torch.manual_seed(0)


class SentimentHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(384, 2)

    def forward(self, x):
        return self.proj(x)


def load_model(path):
    model = SentimentHead()
    state = torch.load(path, map_location="cuda:0")
    model.load_state_dict(state)
    return model.eval()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sentiment_head.pt")
        torch.save(SentimentHead().state_dict(), path)   # as shipped by the training job
        model = load_model(path)
        print(model(torch.randn(1, 384)).softmax(-1))
