"""Deduplicating an embedding index by computing the full N x N cosine-similarity matrix in
one go. The job runs under a memory limit (here: RLIMIT_AS, like a cluster job's cgroup)."""
import resource

import torch
import torch.nn.functional as F

torch.manual_seed(0)


def limit_memory(extra_gib=2):
    # allow what is already mapped (the interpreter + torch) plus `extra_gib`
    with open("/proc/self/status") as f:
        vm_kib = next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
    limit = vm_kib * 1024 + extra_gib * 1024 ** 3
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def find_duplicates(emb, threshold=0.95):
    emb = F.normalize(emb, dim=1)
    sim = emb @ emb.T                    # (N, N)
    sim.fill_diagonal_(0)
    return (sim > threshold).nonzero()


if __name__ == "__main__":
    limit_memory()
    n_items, dim = 50_000, 64
    embeddings = torch.randn(n_items, dim)
    pairs = find_duplicates(embeddings)
    print(len(pairs), "near-duplicate pairs")
