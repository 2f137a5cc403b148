# Attention pooling with a hand-written softmax (to "save memory").
import torch
import torch.nn as nn

dev = "cuda"


def my_softmax(scores, dim=-1):
    scores = scores - scores.max(dim=dim, keepdim=True).values
    out = torch.exp(scores)
    out /= out.sum(dim=dim, keepdim=True)   # in-place normalisation
    return out


class AttnPool(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.score = nn.Linear(d, 1)

    def forward(self, h):                      # h: (B, T, d)
        w = my_softmax(self.score(h).squeeze(-1), dim=1)
        return (w.unsqueeze(-1) * h).sum(1)


encoder = nn.GRU(32, 128, batch_first=True).to(dev)
pool = AttnPool(128).to(dev)
head = nn.Linear(128, 3).to(dev)
params = list(encoder.parameters()) + list(pool.parameters()) + list(head.parameters())
opt = torch.optim.Adam(params, lr=1e-3)

seq = torch.randn(16, 50, 32, device=dev)
lab = torch.randint(0, 3, (16,), device=dev)
h, _ = encoder(seq)
loss = nn.functional.cross_entropy(head(pool(h)), lab)
opt.zero_grad()
loss.backward()
opt.step()
print("loss", loss.item())
