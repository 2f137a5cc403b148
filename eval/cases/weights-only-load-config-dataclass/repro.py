"""Training config dataclass pickled into the checkpoint; the evaluation script loads it with
the default torch.load."""
import dataclasses
import os
import tempfile

import torch
import torch.nn as nn

torch.manual_seed(0)


@dataclasses.dataclass
class TrainConfig:
    hidden: int = 64
    dropout: float = 0.1
    lr: float = 3e-4


def build_model(cfg):
    return nn.Sequential(nn.Linear(10, cfg.hidden), nn.Dropout(cfg.dropout), nn.ReLU(), nn.Linear(cfg.hidden, 2))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        cfg = TrainConfig()
        model = build_model(cfg)
        path = os.path.join(tmp, "run42.pt")
        torch.save({"config": cfg, "state_dict": model.state_dict()}, path)

        # evaluate.py
        ckpt = torch.load(path, map_location="cpu")
        model = build_model(ckpt["config"])
        model.load_state_dict(ckpt["state_dict"])
