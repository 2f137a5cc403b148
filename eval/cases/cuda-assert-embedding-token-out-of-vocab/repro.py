"""Fine-tuning a small transformer after adding special tokens to the tokenizer.

The tokenizer's vocabulary grew from 30000 to 30004 (added <ctx>, </ctx>,
<sep2>, <mask2>) but the model's nn.Embedding was built for the old size and
never resized. Token ids >= 30000 index past the embedding table: on CUDA
that is a device-side assert in the index kernel, reported at the next sync.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("finetune")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")

BASE_VOCAB = 30000
SPECIAL_TOKENS = ["<ctx>", "</ctx>", "<sep2>", "<mask2>"]


class ToyTokenizer:
    def __init__(self):
        self.vocab_size = BASE_VOCAB
        self.special = {}

    def add_special_tokens(self, toks):
        for t in toks:
            self.special[t] = self.vocab_size
            self.vocab_size += 1

    def encode_batch(self, n, length, g):
        ids = torch.randint(5, BASE_VOCAB, (n, length), generator=g)
        ids[:, 0] = self.special["<ctx>"]
        ids[:, length // 2] = self.special["</ctx>"]
        return ids


class Classifier(nn.Module):
    def __init__(self, vocab_size, d=256, n_labels=4):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d)
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(d, n_labels)

    def forward(self, ids):
        return self.head(self.encoder(self.embed(ids)).mean(dim=1))


def main():
    tok = ToyTokenizer()
    model = Classifier(vocab_size=tok.vocab_size).to(device)   # built before new tokens were added
    tok.add_special_tokens(SPECIAL_TOKENS)
    log.info("tokenizer vocab %d, embedding rows %d", tok.vocab_size, model.embed.num_embeddings)

    opt = torch.optim.AdamW(model.parameters(), lr=5e-5)
    g = torch.Generator().manual_seed(0)
    for step in range(20):
        ids = tok.encode_batch(32, 128, g).to(device)
        labels = torch.randint(0, 4, (32,), generator=g).to(device)
        loss = F.cross_entropy(model(ids), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.info("step %d loss %.4f", step, loss.item())


if __name__ == "__main__":
    main()
