# Save a training checkpoint with the run configuration, then resume from it.
import argparse
import os
import tempfile
import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=3e-4)
parser.add_argument("--hidden", type=int, default=256)
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args([])

model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 8)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=args.lr)
for epoch in range(args.epochs):
    loss = model(torch.randn(32, 64, device="cuda")).logsumexp(1).mean()
    opt.zero_grad(); loss.backward(); opt.step()

ckpt = os.path.join(tempfile.gettempdir(), "run_last.ckpt")
torch.save({"epoch": args.epochs, "model": model.state_dict(),
            "optimizer": opt.state_dict(), "args": args}, ckpt)

# --- resume ---
state = torch.load(ckpt, map_location="cuda")
model.load_state_dict(state["model"])
opt.load_state_dict(state["optimizer"])
print("resumed from epoch", state["epoch"], "with", state["args"])
