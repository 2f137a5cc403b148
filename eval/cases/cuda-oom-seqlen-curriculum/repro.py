"""Tiny transformer LM trained with a sequence-length curriculum.

The curriculum doubles the context length every few steps. The attention is
written by hand (softmax(q k^T) v), so every layer materialises a
batch x heads x T x T score matrix and keeps it for backward: memory grows
quadratically with T until the GPU runs out.
"""
import logging
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")

VOCAB, D_MODEL, N_HEADS, N_LAYERS = 8192, 512, 8, 4
BATCH = 8


class SelfAttention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(D // self.h)      # B x H x T x T
        causal = torch.ones(T, T, device=x.device, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
        attn = scores.softmax(dim=-1)
        y = (attn @ v).transpose(1, 2).reshape(B, T, D)
        return self.out(y)


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = SelfAttention(d, h)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D_MODEL)
        self.blocks = nn.ModuleList([Block(D_MODEL, N_HEADS) for _ in range(N_LAYERS)])
        self.ln = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB, bias=False)

    def forward(self, idx):
        x = self.tok(idx)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def seq_len_for_step(step, start=512, double_every=2):
    return start * 2 ** (step // double_every)


def main():
    model = TinyLM().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for step in range(40):
        T = seq_len_for_step(step)
        tokens = torch.randint(0, VOCAB, (BATCH, T + 1), device=device)
        x, y = tokens[:, :-1], tokens[:, 1:]
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        log.info("step %d seq_len %d loss %.3f peak_mem %.1f GiB", step, T, loss.item(),
                 torch.cuda.max_memory_allocated() / 2**30)


if __name__ == "__main__":
    main()
