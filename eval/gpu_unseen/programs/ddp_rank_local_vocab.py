# torchrun --nproc_per_node=2 ddp_rank_local_vocab.py
# Each rank reads its shard of the corpus and builds the vocabulary from it.
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

CORPUS = [
    "the cat sat on the mat", "a dog barked at the mailman",
    "stocks fell sharply on monday", "the team won the championship game",
    "rain is expected tomorrow afternoon", "new phone released with better camera",
    "scientists discover water on distant planet", "local bakery wins award",
]


def build_vocab(lines):
    words = sorted({w for l in lines for w in l.split()})
    return {w: i + 1 for i, w in enumerate(words)}   # 0 = pad


def main():
    dist.init_process_group(backend="nccl", timeout=timedelta(seconds=20))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)

    shard = CORPUS[rank::world]
    vocab = build_vocab(shard)
    model = nn.Sequential(nn.EmbeddingBag(len(vocab) + 1, 32), nn.Linear(32, 4)).cuda()
    model = DistributedDataParallel(model, device_ids=[local_rank])

    opt = torch.optim.Adam(model.parameters())
    ids = torch.tensor([[vocab[w] for w in l.split()[:4]] for l in shard], device="cuda")
    labels = torch.randint(0, 4, (len(shard),), device="cuda")
    for epoch in range(3):
        loss = nn.functional.cross_entropy(model(ids), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank} done, loss {loss.item():.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
