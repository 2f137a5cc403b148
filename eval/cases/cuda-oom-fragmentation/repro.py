"""GPU-resident feature cache for variable-length clips, with eviction.

1. A warm-up pass on the longest clips creates one big activation buffer that
   is freed again: the caching allocator keeps that memory reserved as one
   large segment.
2. Per-clip features of varying length are cached on the GPU; they are carved
   out of that reserved segment one after another.
3. The cache evicts every other entry (LRU-ish), leaving many holes of
   192-384 MiB between live entries.
4. A long batch then needs one contiguous buffer that is smaller than the total
   free (reserved-but-unallocated) memory but larger than any single hole, and
   the segment cannot be returned to the driver because live entries pin it.

All sizes are derived from the GPU's free memory so the repro behaves the same
on any card.
"""
import os

# run with the default allocator configuration
os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
os.environ.pop("PYTORCH_ALLOC_CONF", None)

import logging
import random

import torch

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("cache")

random.seed(0)
torch.manual_seed(0)
device = torch.device("cuda")
MiB = 2**20
FEAT_DIM = 1024  # fp32 features per frame -> 4 KiB per frame


def warmup(free_bytes):
    # activations of the longest clips in the dataset
    n = int(0.85 * free_bytes) // 4
    act = torch.empty(n, dtype=torch.float32, device=device)
    act.zero_()
    torch.cuda.synchronize()
    del act  # memory stays reserved by the caching allocator
    return n * 4


class FeatureCache:
    def __init__(self):
        self.entries = {}

    def put(self, clip_id, n_frames):
        self.entries[clip_id] = torch.empty(n_frames, FEAT_DIM, device=device)

    def evict_every_other(self):
        for k in sorted(self.entries)[::2]:
            del self.entries[k]

    def nbytes(self):
        return sum(t.numel() * t.element_size() for t in self.entries.values())


def main():
    free, total = torch.cuda.mem_get_info()
    seg = warmup(free)
    log.info("warm-up peak %.1f GiB, reserved %.1f GiB", seg / 2**30, torch.cuda.memory_reserved() / 2**30)

    cache = FeatureCache()
    budget = seg - 1024 * MiB
    used, clip_id = 0, 0
    while True:
        n_frames = random.choice([192, 256, 320, 384]) * MiB // (FEAT_DIM * 4)
        if used + n_frames * FEAT_DIM * 4 > budget:
            break
        cache.put(clip_id, n_frames)
        used += n_frames * FEAT_DIM * 4
        clip_id += 1
    log.info("cached %d clips, %.1f GiB", len(cache.entries), cache.nbytes() / 2**30)

    cache.evict_every_other()
    log.info("after eviction: %d clips, allocated %.1f GiB, reserved %.1f GiB",
             len(cache.entries), torch.cuda.memory_allocated() / 2**30,
             torch.cuda.memory_reserved() / 2**30)

    # one long batch needs a single contiguous buffer
    long_frames = int(0.30 * free) // (FEAT_DIM * 4)
    batch = torch.empty(long_frames, FEAT_DIM, device=device)
    batch.normal_()
    log.info("long batch ok: %s", tuple(batch.shape))


if __name__ == "__main__":
    main()
