# Parallel inference over data shards with a multiprocessing pool.
import multiprocessing as mp
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)).cuda().eval()


def score_shard(shard_id):
    g = torch.Generator().manual_seed(shard_id)
    x = torch.randn(1000, 256, generator=g).cuda()
    with torch.no_grad():
        return model(x).argmax(1).bincount(minlength=10).cpu().tolist()


if __name__ == "__main__":
    # warm-up on the main process
    with torch.no_grad():
        model(torch.randn(4, 256, device="cuda"))
    with mp.Pool(processes=4) as pool:
        results = pool.map(score_shard, range(8))
    totals = [sum(col) for col in zip(*results)]
    print("class histogram:", totals)
