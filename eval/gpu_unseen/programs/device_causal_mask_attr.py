# tiny GPT-style block with a precomputed causal mask
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model=256, n_head=4, block_size=128):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        # additive mask: -inf above the diagonal
        self.attn_bias = torch.triu(torch.full((block_size, block_size), float("-inf")), diagonal=1)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, -1).transpose(1, 2)
        k = k.view(B, T, self.n_head, -1).transpose(1, 2)
        v = v.view(B, T, self.n_head, -1).transpose(1, 2)
        att = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))
        att = att + self.attn_bias[:T, :T]
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class TinyGPT(nn.Module):
    def __init__(self, vocab=1000, d=256, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([CausalSelfAttention(d) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx)
        for blk in self.blocks:
            x = x + blk(x)
        return self.head(self.ln(x))


model = TinyGPT().cuda()
idx = torch.randint(0, 1000, (8, 128), device="cuda")
logits = model(idx)
loss = F.cross_entropy(logits[:, :-1].reshape(-1, 1000), idx[:, 1:].reshape(-1))
loss.backward()
print(loss.item())
