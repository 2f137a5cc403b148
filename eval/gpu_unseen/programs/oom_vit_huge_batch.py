# Train a small ViT on synthetic 224x224 images. Batch size copied from a
# multi-node config (global batch) and used per GPU.
import torch
import torch.nn as nn

device = "cuda"
BATCH_SIZE = 8192          # <- global batch from the paper, not per-GPU
IMG, PATCH, DIM, DEPTH = 224, 16, 768, 12


class ViT(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.patch = nn.Conv2d(3, DIM, PATCH, PATCH)
        n = (IMG // PATCH) ** 2
        self.cls = nn.Parameter(torch.zeros(1, 1, DIM))
        self.pos = nn.Parameter(torch.randn(1, n + 1, DIM) * 0.02)
        layer = nn.TransformerEncoderLayer(DIM, 12, 4 * DIM, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, DEPTH)
        self.head = nn.Linear(DIM, num_classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.size(0), -1, -1), x], 1) + self.pos
        x = self.blocks(x)
        return self.head(x[:, 0])


model = ViT().to(device)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
crit = nn.CrossEntropyLoss()

for step in range(3):
    images = torch.randn(BATCH_SIZE, 3, IMG, IMG, device=device)
    labels = torch.randint(0, 1000, (BATCH_SIZE,), device=device)
    loss = crit(model(images), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.3f}")
