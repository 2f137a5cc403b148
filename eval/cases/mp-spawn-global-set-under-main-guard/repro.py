"""Multi-process training launched with torch.multiprocessing.spawn; the config is parsed into
a global inside the __main__ block."""
import argparse

import torch
import torch.multiprocessing as mp
import torch.nn as nn


def train_worker(rank, world_size):
    torch.manual_seed(CONFIG["seed"] + rank)
    model = nn.Linear(CONFIG["in_dim"], 1)
    opt = torch.optim.SGD(model.parameters(), lr=CONFIG["lr"])
    for _ in range(3):
        x = torch.randn(16, CONFIG["in_dim"])
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank}/{world_size} done, loss {loss.item():.4f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--nprocs", type=int, default=2)
    args = parser.parse_args()
    CONFIG = {"lr": args.lr, "in_dim": 8, "seed": 0}
    mp.spawn(train_worker, args=(args.nprocs,), nprocs=args.nprocs, join=True)
