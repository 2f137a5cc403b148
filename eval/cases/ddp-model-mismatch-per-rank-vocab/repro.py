"""DDP text classifier where each rank builds its vocabulary from its own shard.

The vocabulary (and so nn.Embedding's number of rows) depends on which
sentences the rank reads, so the ranks construct models with different
parameter shapes and DDP's constructor refuses them.
"""
import os

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import datetime
import logging
import random

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")


def make_corpus(n_sentences=2000, seed=0):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(6000)]
    weights = [1.0 / (i + 1) for i in range(len(words))]   # Zipf-like
    return [" ".join(rng.choices(words, weights, k=12)) for _ in range(n_sentences)]


def build_vocab(sentences):
    vocab = {"<pad>": 0, "<unk>": 1}
    for s in sentences:
        for w in s.split():
            vocab.setdefault(w, len(vocab))
    return vocab


class TextClassifier(nn.Module):
    def __init__(self, vocab_size, d=64, n_classes=4):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab_size, d, mode="mean")
        self.fc = nn.Linear(d, n_classes)

    def forward(self, ids):
        return self.fc(self.emb(ids))


def main():
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    torch.manual_seed(0)

    shard = make_corpus()[rank::world]
    vocab = build_vocab(shard)                     # per-rank vocabulary
    log.info("rank %d vocab size %d", rank, len(vocab))
    model = DDP(TextClassifier(len(vocab)).to(device), device_ids=[local_rank])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    ids = torch.tensor([[vocab.get(w, 1) for w in s.split()] for s in shard[:64]], device=device)
    labels = torch.randint(0, 4, (ids.shape[0],), device=device)
    loss = nn.functional.cross_entropy(model(ids), labels)
    loss.backward()
    opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
