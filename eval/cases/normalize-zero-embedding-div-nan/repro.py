"""Cosine-similarity retrieval head that L2-normalises embeddings by hand and guards the
all-zero padding embedding with torch.where."""
import torch
import torch.nn as nn

torch.manual_seed(0)
torch.autograd.set_detect_anomaly(True)

PAD = 0


class ItemEncoder(nn.Module):
    def __init__(self, n_items=50, dim=16):
        super().__init__()
        self.emb = nn.Embedding(n_items, dim, padding_idx=PAD)

    def forward(self, ids):
        e = self.emb(ids)
        norm = e.norm(dim=-1, keepdim=True)
        # padding rows have norm 0: keep them at zero instead of dividing by zero
        return torch.where(norm > 0, e / norm, torch.zeros_like(e))


if __name__ == "__main__":
    enc = ItemEncoder()
    opt = torch.optim.Adam(enc.parameters(), lr=1e-2)
    queries = torch.tensor([3, 7, 11, 19])
    # candidate lists are right-padded with PAD
    candidates = torch.tensor([[4, 8, PAD], [9, 2, 5], [12, PAD, PAD], [20, 21, 22]])
    positives = torch.tensor([0, 1, 0, 2])
    for step in range(3):
        q = enc(queries)                      # (4, 16)
        c = enc(candidates)                   # (4, 3, 16)
        scores = torch.einsum("bd,bkd->bk", q, c) / 0.07
        scores = scores.masked_fill(candidates == PAD, -1e4)  # never pick padding
        loss = nn.functional.cross_entropy(scores, positives)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(step, loss.item())
