"""Hand-written multi-head self-attention; merging the heads uses .view() on a transposed tensor."""
import math

import torch
import torch.nn as nn

torch.manual_seed(0)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model=64, n_heads=4):
        super().__init__()
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        k = k.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        v = v.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.d_head)
        y = att.softmax(dim=-1) @ v               # (B, H, T, d_head)
        y = y.transpose(1, 2).view(B, T, C)       # merge heads
        return self.out(y)


class TinyTransformerBlock(nn.Module):
    def __init__(self, d_model=64):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadSelfAttention(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


if __name__ == "__main__":
    block = TinyTransformerBlock()
    opt = torch.optim.Adam(block.parameters(), lr=3e-4)
    x = torch.randn(2, 10, 64)
    loss = block(x).pow(2).mean()
    loss.backward()
    opt.step()
