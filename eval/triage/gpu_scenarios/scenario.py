"""Multi-rank failure scenarios for capturing real launcher logs (run under torchrun or mp.spawn).

Usage: torchrun --nproc_per_node=N scenario.py <name>   or   python scenario.py <name> --spawn N
Each scenario makes one rank (or every rank) fail the way training jobs do on clusters, so the
captured logs show real launcher summaries, watchdog dumps and cascades.
"""

import ctypes
import datetime
import logging
import os
import sys
import time

import torch
import torch.distributed as dist

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")


def setup(rank=None, world=None):
    if rank is not None:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("nccl", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=25))
    else:
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=25))
    r = dist.get_rank()
    torch.cuda.set_device(r % torch.cuda.device_count())
    return r, dist.get_world_size()


def train_steps(model, rank, steps=3):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        x = torch.randn(64, 128, device="cuda")
        loss = model(x).pow(2).mean()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        opt.zero_grad()
        log.info("rank %d epoch 0 step %d loss %.4f", rank, step, loss.item())


def run(name, rank=None, world=None):
    rank, world = setup(rank, world)
    bad = world - 1  # the rank that fails first
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).cuda()
    train_steps(model, rank)
    if name == "one_rank_value_error":
        if rank == bad:
            raise ValueError(f"label column 'target' missing from shard {rank}")
    elif name == "one_rank_oom":
        if rank == bad:
            torch.empty(int(400e9), dtype=torch.uint8, device="cuda")
    elif name == "one_rank_device_assert":
        if rank == bad:
            emb = torch.nn.Embedding(10, 4).cuda()
            emb(torch.tensor([3, 12], device="cuda"))
            torch.cuda.synchronize()
    elif name == "one_rank_shape":
        if rank == bad:
            model(torch.randn(64, 100, device="cuda"))
    elif name == "one_rank_sigkill":
        if rank == bad:
            os.kill(os.getpid(), 9)
    elif name == "one_rank_segfault":
        if rank == bad:
            ctypes.string_at(0)
    elif name == "hang_mismatched_collectives":
        if rank != bad:
            t = torch.ones(1, device="cuda")
            dist.all_reduce(t)  # the last rank never joins: every waiting rank times out
            torch.cuda.synchronize()
        else:
            time.sleep(60)
    elif name == "all_ranks_import_error":
        import flash_attn_missing_module  # noqa: F401
    elif name == "all_ranks_config_key":
        cfg = {"lr": 0.1}
        print(cfg["warmup_steps"])
    elif name == "caught_retry_then_success":
        for attempt in range(2):
            try:
                if attempt == 0:
                    raise ConnectionError("metadata server refused connection")
                break
            except ConnectionError:
                log.exception("fetching run metadata failed, retrying (attempt %d)", attempt + 1)
        train_steps(model, rank, steps=3)
        log.info("training complete")
    dist.barrier()
    t = torch.ones(1, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    log.info("rank %d finished", rank)
    dist.destroy_process_group()


def spawn_entry(rank, name, world):
    run(name, rank, world)


if __name__ == "__main__":
    name = sys.argv[1]
    if "--spawn" in sys.argv:
        import torch.multiprocessing as mp

        world = int(sys.argv[sys.argv.index("--spawn") + 1])
        mp.spawn(spawn_entry, args=(name, world), nprocs=world)
    else:
        run(name)
