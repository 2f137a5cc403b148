"""Train one epoch, then evaluate on a large validation set.

evaluate() forgets torch.no_grad(), accumulates the loss tensor itself
(total_loss += loss) and keeps every batch's logits (with their autograd
history) in a list "for the confusion matrix later". Each batch therefore
keeps all of its forward activations alive and memory grows batch after
batch until the GPU runs out. The validation set is sized from the GPU's
memory so the repro behaves the same on any card.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")

IN_FEATURES, HIDDEN, DEPTH, N_CLASSES = 256, 8192, 8, 100
BATCH = 4096


class MLPClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        layers = [nn.Linear(IN_FEATURES, HIDDEN), nn.ReLU()]
        for _ in range(DEPTH - 1):
            layers += [nn.Linear(HIDDEN, HIDDEN), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(HIDDEN, N_CLASSES)

    def forward(self, x):
        return self.head(self.body(x))


def make_split(n):
    x = torch.randn(n, IN_FEATURES)
    y = torch.randint(0, N_CLASSES, (n,))
    return TensorDataset(x, y)


def train_one_epoch(model, loader, opt):
    model.train()
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return loss.item()


def evaluate(model, loader):
    model.eval()
    total_loss = 0.0
    all_logits = []
    for i, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        total_loss += loss          # keeps the graph of every batch alive
        all_logits.append(logits)   # ... and so does this
        if i % 10 == 0:
            log.info("eval batch %d  allocated %.1f GiB", i, torch.cuda.memory_allocated() / 2**30)
    preds = torch.cat(all_logits).argmax(dim=1)
    return total_loss.item() / len(loader), preds


def main():
    total_mem = torch.cuda.get_device_properties(0).total_memory
    # each eval batch keeps ~DEPTH activations of BATCH x HIDDEN fp32 alive
    per_batch = DEPTH * BATCH * HIDDEN * 4
    n_val_batches = int(1.5 * total_mem / per_batch) + 8
    train_ds = make_split(16 * BATCH)
    val_ds = make_split(n_val_batches * BATCH)
    train_loader = DataLoader(train_ds, batch_size=BATCH, shuffle=True, pin_memory=True)
    val_loader = DataLoader(val_ds, batch_size=BATCH, pin_memory=True)

    model = MLPClassifier().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    train_loss = train_one_epoch(model, train_loader, opt)
    log.info("epoch 0 train loss %.4f", train_loss)
    val_loss, preds = evaluate(model, val_loader)
    log.info("epoch 0 val loss %.4f", val_loss)


if __name__ == "__main__":
    main()
