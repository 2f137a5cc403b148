"""Near-duplicate detection over a corpus of embeddings.

Computes the full N x N cosine-similarity matrix on the GPU in one shot.
N is derived from the GPU size only so that this repro behaves the same on
any card: the similarity matrix needs about twice the card's total memory.
"""
import math
import logging

import torch
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("dedup")

torch.manual_seed(0)
device = torch.device("cuda")

total = torch.cuda.get_device_properties(0).total_memory
# N*N fp32 similarities ~= 2x the GPU's memory
num_docs = int(math.sqrt(2 * total / 4))
dim = 256


class Encoder(torch.nn.Module):
    def __init__(self, vocab=4096, dim=dim):
        super().__init__()
        self.emb = torch.nn.EmbeddingBag(vocab, dim, mode="mean")
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, tokens):
        return self.proj(self.emb(tokens))


@torch.no_grad()
def embed_corpus(model, num_docs, doc_len=16, chunk=65536):
    out = []
    for start in range(0, num_docs, chunk):
        n = min(chunk, num_docs - start)
        tokens = torch.randint(0, 4096, (n, doc_len), device=device)
        out.append(F.normalize(model(tokens), dim=-1))
    return torch.cat(out)


def main():
    model = Encoder().to(device).eval()
    emb = embed_corpus(model, num_docs)
    log.info("embedded %d docs -> %s (%.2f GiB)", num_docs, tuple(emb.shape),
             emb.numel() * emb.element_size() / 2**30)
    with torch.no_grad():
        sim = emb @ emb.T                     # N x N similarity matrix
        sim.fill_diagonal_(-1.0)
        dup_score, dup_idx = sim.max(dim=1)
    n_dups = int((dup_score > 0.95).sum())
    log.info("found %d near-duplicates", n_dups)


if __name__ == "__main__":
    main()
