"""Checkpoint directory creation fails because a file already exists where the run directory
should be (an earlier version of the script wrote its log to `<output_dir>/runs`)."""
import os
import tempfile

import torch
import torch.nn as nn

torch.manual_seed(0)


def save_checkpoint(model, output_dir, run_name, epoch):
    ckpt_dir = os.path.join(output_dir, "runs", run_name)
    os.makedirs(ckpt_dir, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(ckpt_dir, f"epoch_{epoch}.pt"))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as output_dir:
        with open(os.path.join(output_dir, "runs"), "w") as log:   # left over from an old run
            log.write("epoch 0 loss 2.31\n")

        model = nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            save_checkpoint(model, output_dir, "resnet_lr0.1", epoch)
