"""GPT-style model with learned positional embeddings.

forward() builds the position ids with torch.arange(T) and no device argument,
so they are created on the CPU and fed to the position embedding whose weight
is on the GPU.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("gpt")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")


class MiniGPT(nn.Module):
    def __init__(self, vocab=4096, d=256, n_layers=2, max_len=512):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d)
        self.pos_emb = nn.Embedding(max_len, d)
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, n_layers)
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        B, T = idx.shape
        pos = torch.arange(T)                       # created on the default device (cpu)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        mask = nn.Transformer.generate_square_subsequent_mask(T, device=idx.device)
        x = self.blocks(x, mask=mask, is_causal=True)
        return self.lm_head(self.ln_f(x))


def main():
    model = MiniGPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    g = torch.Generator(device=device).manual_seed(0)
    for step in range(10):
        tokens = torch.randint(0, 4096, (16, 129), device=device, generator=g)
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 4096), tokens[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.info("step %d loss %.4f", step, loss.item())


if __name__ == "__main__":
    main()
