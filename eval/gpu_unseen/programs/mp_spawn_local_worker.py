# One process per GPU for embedding extraction, started with torch.multiprocessing.spawn.
import torch
import torch.multiprocessing as tmp
import torch.nn as nn


def main():
    n_gpus = torch.cuda.device_count()
    encoder = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 64))

    def worker(rank, enc):
        dev = torch.device(f"cuda:{rank}")
        enc = enc.to(dev)
        x = torch.randn(10000, 128, device=dev)
        with torch.no_grad():
            emb = enc(x)
        torch.save(emb.cpu(), f"/tmp/emb_rank{rank}.pt")
        print(f"rank {rank}: wrote {tuple(emb.shape)}")

    tmp.spawn(worker, args=(encoder,), nprocs=max(n_gpus, 1), join=True)


if __name__ == "__main__":
    main()
