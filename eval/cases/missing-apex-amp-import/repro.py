"""Old training script that imports NVIDIA apex for mixed precision and fused optimizers."""
import argparse

import torch
import torch.nn as nn
from apex import amp
from apex.optimizers import FusedAdam

torch.manual_seed(0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--opt-level", default="O1")
    args = parser.parse_args()
    model = nn.Linear(10, 2)
    optimizer = FusedAdam(model.parameters(), lr=1e-3)
    model, optimizer = amp.initialize(model, optimizer, opt_level=args.opt_level)
    x, y = torch.randn(8, 10), torch.randint(0, 2, (8,))
    loss = nn.functional.cross_entropy(model(x), y)
    with amp.scale_loss(loss, optimizer) as scaled:
        scaled.backward()
    optimizer.step()


if __name__ == "__main__":
    main()
