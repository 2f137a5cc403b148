"""Training script reading hyper-parameters from a YAML config whose keys were renamed."""
import yaml

import torch
import torch.nn as nn

torch.manual_seed(0)

CONFIG_YAML = """
model:
  hidden_dim: 128
  num_layers: 2
optim:
  lr: 0.001
  weight_decay: 0.01
train:
  epochs: 2
  batch_size: 32
"""


def build_optimizer(model, cfg):
    return torch.optim.AdamW(
        model.parameters(),
        lr=cfg["optim"]["learning_rate"],
        weight_decay=cfg["optim"]["weight_decay"],
    )


if __name__ == "__main__":
    cfg = yaml.safe_load(CONFIG_YAML)
    layers = [nn.Linear(16, cfg["model"]["hidden_dim"]), nn.ReLU()]
    layers.append(nn.Linear(cfg["model"]["hidden_dim"], 1))
    model = nn.Sequential(*layers)
    optimizer = build_optimizer(model, cfg)
    for epoch in range(cfg["train"]["epochs"]):
        x, y = torch.randn(cfg["train"]["batch_size"], 16), torch.randn(cfg["train"]["batch_size"], 1)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
