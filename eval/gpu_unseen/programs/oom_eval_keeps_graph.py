# Validation loop that collects logits for metric computation.
import torch
import torch.nn as nn

dev = torch.device("cuda")

model = nn.Sequential(
    nn.Linear(4096, 16384), nn.ReLU(),
    nn.Linear(16384, 16384), nn.ReLU(),
    nn.Linear(16384, 16384), nn.ReLU(),
    nn.Linear(16384, 16384), nn.ReLU(),
    nn.Linear(16384, 100),
).to(dev)


def validate(model, n_batches=200, bs=8192):
    model.eval()
    all_logits, all_labels = [], []
    for i in range(n_batches):
        x = torch.randn(bs, 4096, device=dev)
        y = torch.randint(0, 100, (bs,), device=dev)
        logits = model(x)
        all_logits.append(logits)
        all_labels.append(y)
        if i % 10 == 0:
            print(f"batch {i}: {torch.cuda.memory_allocated() / 2**30:.1f} GiB allocated")
    logits = torch.cat(all_logits)
    labels = torch.cat(all_labels)
    return (logits.argmax(1) == labels).float().mean().item()


print("val acc", validate(model))
