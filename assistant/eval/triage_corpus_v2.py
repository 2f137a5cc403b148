"""A second, independent triage corpus (issue 20, item 1): :func:`generate`.

The first generator (:mod:`assistant.eval.triage_corpus`) labels its texts with our own rules and
reuses the dev texts, so it flatters us. This one starts from a **scenario** ("16 ranks under
torchrun, rank 5 runs out of CUDA memory in ``model.py:forward`` first, the others time out in
NCCL") and writes both the logs and the truth from it:

- ``status``: failed unless the scenario (or, for retried jobs, its last attempt) finished;
- ``category``: the family's category, chosen by the scenario's author (``triage_v2/families.py``);
- ``group``: ``<family>@<file>:<function>`` of the user frame, or the verdict / collective for
  failures without a user frame (``sched:time_limit``, ``nccl_hang:ALLREDUCE``, ...);
- ``first_failing_rank``: the scenario's first rank; null for one-process jobs, for failures every
  rank hits at once, for pure hangs and for scheduler verdicts;
- ``gpu_hours``: GPUs of the scenario × (last − first timestamp written in the job's files).

Nothing here calls the project's rules, engine or knowledge base. Log shapes and text sources are
described in ``eval/triage/v2/README.md``. Seeds: 100 = dev, 101 = frozen test (never tuned on).
The output is a pure function of ``seed`` and ``n_jobs``.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from assistant.eval.triage_v2.families import FAMILIES, MID_TRAINING, Family
from assistant.eval.triage_v2.shapes import (
    Env,
    Scenario,
    Streams,
    make_env,
    rank_streams,
    slurm_preamble,
    torchrun_header,
    torchrun_summary,
    ts_date,
    ts_glog,
    ts_iso,
    ts_log,
    ts_slurm,
)

DEV_SEED = 100
TEST_SEED = 101  # frozen: never tuned on
SHAPES: tuple[tuple[str, float], ...] = (
    ("torchrun_file", 24), ("torchrun_logdir", 8), ("mp_spawn", 10), ("deepspeed", 12),
    ("lightning", 12), ("slurm_array", 18), ("k8s", 16),
)
KINDS: tuple[tuple[str, float], ...] = (
    ("family", 78), ("hang_pure", 4), ("hang_desync", 4), ("sched_time_limit", 5),
    ("sched_preempt", 2), ("sched_node_failure", 3), ("oom_kill", 4),
)
KIND_TRUTH = {  # kind -> (category, group, has a first rank)
    "sched_time_limit": ("environment_error", "sched:time_limit", False),
    "sched_preempt": ("environment_error", "sched:preemption", False),
    "sched_node_failure": ("hardware_error", "sched:node_failure", False),
    "oom_kill": ("cpu_oom", "host_oom_kill", True),
    "hang_pure": ("nccl_error", "nccl_hang:{op}", False),
    "hang_desync": ("nccl_error", "nccl_desync:{op}", True),
}
MULTI = {"torchrun_file", "torchrun_logdir", "mp_spawn", "deepspeed", "k8s"}
SINGLE_FILE = {"torchrun_file", "slurm_array", "lightning"}
SCHED_SHAPES = ("torchrun_file", "slurm_array", "lightning")


def _pick(rng: random.Random, table: tuple[tuple[str, float], ...]) -> str:
    return rng.choices([k for k, _ in table], weights=[w for _, w in table])[0]


# ------------------------------------------------------------------------------------------------
# Planning
# ------------------------------------------------------------------------------------------------


def _world(rng: random.Random, shape: str) -> tuple[int, int]:
    if shape == "torchrun_file":
        return (1, rng.choice([2, 4, 8])) if rng.random() < 0.7 else (rng.choice([2, 4]), 8)
    if shape == "torchrun_logdir":
        return 1, rng.choice([2, 4, 8])
    if shape == "mp_spawn":
        return 1, rng.choice([2, 3, 4, 8])
    if shape == "deepspeed":
        return (1, rng.choice([4, 8])) if rng.random() < 0.6 else (rng.choice([2, 4]), 8)
    if shape == "k8s":
        nodes = rng.choice([2, 2, 4, 8])
        return nodes, rng.choice([g for g in (1, 2, 4, 8) if nodes * g <= 64])
    if shape == "lightning":
        return (1, 1) if rng.random() < 0.55 else (1, rng.choice([2, 4, 8]))
    return 1, 1


def _plan(rng: random.Random, i: int, seed: int) -> Scenario:
    ok = rng.random() < 0.22
    kind = "ok" if ok else _pick(rng, KINDS)
    family: Family | None = None
    if kind == "family" or ok:
        family = rng.choices(FAMILIES, weights=[f.weight for f in FAMILIES])[0]
    if kind.startswith("sched"):
        shape = rng.choice(SCHED_SHAPES)
    elif kind == "oom_kill":
        shape = rng.choice(("torchrun_file", "slurm_array", "k8s"))
    elif kind.startswith("hang"):
        shape = rng.choice(("torchrun_file", "torchrun_file", "torchrun_logdir", "k8s", "deepspeed"))
    elif family is not None and family.id == "ds_batch_config":
        shape = "deepspeed"
    elif family is not None and not family.gpu:
        shape = "slurm_array"
    else:
        shape = _pick(rng, SHAPES)
    nodes, gpn = _world(rng, shape)
    if kind.startswith("hang") and nodes * gpn < 2:
        nodes, gpn = 1, 4
    world = nodes * gpn
    mods: set[str] = set()
    first: int | None = None
    secondary = "none"
    if kind == "family" and family is not None and not family.all_ranks and world > 1:
        first = rng.randrange(world)
        secondary = rng.choice(("sigterm", "watchdog", "remote")) if shape in ("torchrun_file", "k8s", "torchrun_logdir") else \
            rng.choice(("sigterm", "remote")) if shape == "deepspeed" else "sigterm"
    elif kind == "family" and family is not None and family.all_ranks and shape == "mp_spawn":
        first = rng.randrange(world)  # mp.spawn quotes one child's error only: the logs show no other rank failing
    elif kind in ("hang_desync",):
        first = rng.randrange(world)
    elif kind == "oom_kill" and world > 1:
        first = rng.randrange(world)
    if kind.startswith("hang") or secondary == "watchdog":
        if rng.random() < 0.5:
            mods.add("fr")
    if nodes > 1 and rng.random() < 0.6:
        mods.add("skew")
    if shape == "torchrun_file" and world > 1 and rng.random() < 0.3:
        mods.add("reorder")
    if shape == "torchrun_file" and world > 1 and rng.random() < 0.25:
        mods.add("noprefix")
    if shape in SINGLE_FILE and kind == "family" and rng.random() < 0.12:
        mods.add("retried")
    elif shape in SINGLE_FILE and kind == "family" and rng.random() < 0.07:
        mods.add("truncated")
    if not ok and kind == "family" and rng.random() < 0.07:
        mods.add("noise")
    if ok:
        mods.add("scary")
        if shape in SINGLE_FILE and rng.random() < 0.25:
            mods.add("retried")
    site = rng.choice(family.sites) if family is not None else None
    start = datetime(2025, 1, 1) + timedelta(seconds=rng.randint(0, 300 * 86400))
    run_s = 10 ** rng.uniform(2.3, 5.0)  # about 3 min to 28 h
    return Scenario(job_id="", shape=shape, kind=kind, family=family, site=site, nodes=nodes, gpn=gpn, first_rank=first,
                    secondary=secondary, start=start.replace(microsecond=rng.randint(0, 999999)), run_s=run_s, mods=mods,
                    op=rng.choice(("ALLREDUCE", "ALLREDUCE", "_ALLGATHER_BASE", "BROADCAST")),
                    host_prefix=rng.choice(("gpu", "node", "dgx", "a100-n", "h100")), seed=seed * 100003 + i)


def _truth(sc: Scenario) -> tuple[str, str | None, str | None, int | None]:
    """(status, category, group, first rank) from the scenario alone."""
    if sc.kind == "ok":
        return "succeeded", None, None, None
    if sc.kind == "family":
        assert sc.family is not None and sc.site is not None
        return "failed", sc.family.category, f"{sc.family.id}@{sc.site.label}", sc.first_rank
    cat, group, ranked = KIND_TRUTH[sc.kind]
    return "failed", cat, group.format(op=sc.op), sc.first_rank if ranked else None


# ------------------------------------------------------------------------------------------------
# Rendering events
# ------------------------------------------------------------------------------------------------


def _render(st: Streams, ranks: range | None = None, prefix: str | None = "rank", order: str = "time",
            stamp: Env | None = None, sc: Scenario | None = None) -> list[str]:
    ev = [e for e in st.events if ranks is None or e[1] in ranks]
    ev.sort(key=(lambda e: (e[1], e[0], e[2])) if order == "rank" else (lambda e: (e[0], e[2])))
    out = []
    for t, r, _, line in ev:
        if prefix == "rank":
            line = f"[rank{r}]:{line}"
        elif prefix == "task":
            line = f"{r}: {line}"
        if stamp is not None:
            line = f"{ts_iso(t)} {line}"
        out.append(line)
    return out


def _strip_entry(lines: list[str]) -> list[str]:
    """A traceback without its first ``<module>``/``main`` frames (for re-rooting it under a launcher)."""
    if not lines or lines[0] != "Traceback (most recent call last):":
        return lines
    body = lines[1:]
    while len(body) >= 2 and re.search(r", in (<module>|main)$", body[0]) and body[1].startswith("    "):
        body = body[2:]
    return body


def _scary_ok(env: Env, t: datetime) -> list[str]:
    sp = env.sp
    rng = env.rng
    pick = rng.randrange(4)
    if pick == 0:
        return [f"{ts_log(t)} - ERROR - wandb - network error (ConnectionError), entering retry loop",
                "Traceback (most recent call last):",
                f'  File "{sp}/urllib3/connectionpool.py", line 789, in urlopen', "    response = self._make_request(",
                "urllib3.exceptions.ProtocolError: ('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))",
                f"{ts_log(t)} - INFO - wandb - Network error resolved after 0:00:{rng.randint(10, 59)}, resuming normal operation."]
    if pick == 1:
        return ["Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f2b1c8e5d30>", "Traceback (most recent call last):",
                f'  File "{sp}/torch/utils/data/dataloader.py", line 1478, in __del__', "    self._shutdown_workers()",
                f'  File "/usr/lib/python{env.py}/multiprocessing/process.py", line 160, in is_alive', "    assert self._parent_pid == os.getpid(), 'can only test a child process'",
                "AssertionError: can only test a child process"]
    if pick == 2:
        return [f"{ts_log(t)} - WARNING - amp - Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to {2 ** rng.randint(8, 15)}.0",
                f"{ts_log(t)} - WARNING - __main__ - non-finite loss (nan) at step {rng.randint(100, 9000)}, batch skipped (3 skips so far, limit 50)"]
    return [f"{sp}/torch/nn/modules/transformer.py:385: UserWarning: enable_nested_tensor is True, but self.use_nested_tensor is False because encoder_layer.self_attn.batch_first was not True(use batch_first for better inference performance)",
            '  warnings.warn(', f"[W{t.strftime('%m%d %H:%M:%S')}.{t.microsecond:06d}000 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call destroy_process_group to ensure that any pending NCCL operations have finished in this process. In rare cases this process can exit before this point and block the progress of another member of the process group. This constraint has always been present,  but this warning has only recently been added since PyTorch 2.4 (function operator())"]


def _ok_tail(sc: Scenario, env: Env, st: Streams, end: datetime) -> None:
    st.block(end - timedelta(seconds=30), 0, _scary_ok(env, end - timedelta(seconds=30)))
    st.add(end, 0, f"{ts_log(end)} - INFO - __main__ - training complete: saved final checkpoint to {env.root}/checkpoints/final.pt")


def _build(sc: Scenario, env: Env) -> tuple[Streams, datetime]:
    if sc.kind == "ok":
        st = Streams(sc, env)
        sc2 = Scenario(**{**sc.__dict__, "kind": "sched_time_limit"})  # progress only, no failure
        st, end = rank_streams(sc2, env)
        end = sc.start + timedelta(seconds=sc.run_s)
        _ok_tail(sc, env, st, end)
        return st, end + timedelta(seconds=2)
    return rank_streams(sc, env)


# ------------------------------------------------------------------------------------------------
# Shape writers: scenario -> lines of one file, or files
# ------------------------------------------------------------------------------------------------


def _first_observed(sc: Scenario, env: Env, st: Streams, end: datetime) -> tuple[int, int, datetime]:
    """(rank, exitcode, time) torchrun's agent would name as the first observed failure."""
    rng = env.rng
    if sc.kind == "family" and sc.family is not None and sc.family.all_ranks:
        return rng.randrange(sc.world), 1, end
    if sc.kind == "family":
        fr = sc.first_rank or 0
        if sc.secondary == "watchdog":  # the failing rank is stuck in teardown; a watchdog abort is seen first
            return rng.choice([r for r in range(sc.world) if r != fr] or [fr]), -6, end
        return fr, 1, sc.start + timedelta(seconds=sc.run_s + 1)
    if sc.kind == "oom_kill":
        return (sc.first_rank or 0), -9, end
    return rng.randrange(sc.world), -6, end


def _verdict(sc: Scenario, env: Env, job: int, end: datetime) -> list[str]:
    host = env.hosts[0]
    if sc.kind == "sched_time_limit":
        return [f"slurmstepd: error: *** JOB {job} ON {host} CANCELLED AT {ts_slurm(end)} DUE TO TIME LIMIT ***"]
    if sc.kind == "sched_preempt":
        return [f"slurmstepd: error: *** JOB {job} ON {host} CANCELLED AT {ts_slurm(end)} DUE TO PREEMPTION ***"]
    if sc.kind == "sched_node_failure":
        return [f"srun: error: Node failure on {env.hosts[-1]}",
                f"slurmstepd: error: *** JOB {job} ON {host} CANCELLED AT {ts_slurm(end)} DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***"]
    if sc.kind == "oom_kill":
        return [f"slurmstepd: error: Detected 1 oom_kill event in StepId={job}.0. Some of the step tasks have been OOM Killed.",
                f"srun: error: {host}: task 0: Out Of Memory"]
    return []


def _sigterm_agent(env: Env, end: datetime) -> list[str]:
    pid = env.rng.randint(1000, 60000)
    sp = env.sp
    return [f"{ts_glog(end, 'W')} {pid} torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death signal, shutting down workers",
            "Traceback (most recent call last):", '  File "/usr/local/bin/torchrun", line 8, in <module>', "    sys.exit(main())",
            f'  File "{sp}/torch/distributed/elastic/multiprocessing/api.py", line 84, in _terminate_process_handler',
            "    raise SignalException(f\"Process {os.getpid()} got signal: {sigval}\", sigval=sigval)",
            f"torch.distributed.elastic.multiprocessing.api.SignalException: Process {pid} got signal: 15"]


def w_torchrun_file(sc: Scenario, env: Env, job: int) -> list[str]:
    st, end = _build(sc, env)
    out = slurm_preamble(env, sc, job, sc.start)
    for n in range(sc.nodes):
        out += torchrun_header(env, sc, sc.start + timedelta(seconds=2), n)
    prefix = None if "noprefix" in sc.mods else "rank"
    out += _render(st, prefix=prefix, order="rank" if "reorder" in sc.mods else "time")
    if sc.kind == "ok":
        return out + [ts_date(end)]
    if sc.kind.startswith("sched"):
        return out + _verdict(sc, env, job, end) + (_sigterm_agent(env, end) if env.rng.random() < 0.5 else [])
    rank, code, t = _first_observed(sc, env, st, end)
    out += torchrun_summary(env, sc, t, rank, code, rank // sc.gpn, None)
    if sc.kind == "oom_kill":
        out += _verdict(sc, env, job, end)
    out.append(f"srun: error: {env.hosts[rank // sc.gpn]}: task {rank // sc.gpn}: Exited with exit code 1")
    return out


def w_slurm_array(sc: Scenario, env: Env, job: int, task: int) -> list[str]:
    st, end = _build(sc, env)
    out = slurm_preamble(env, sc, job, sc.start, array=(job - task, task)) + [f"+ python train.py --lr {env.rng.choice(['1e-4', '3e-4', '6e-4'])} --trial {task}"]
    out += _render(st, prefix=None)
    if sc.kind == "ok":
        return out + [ts_date(end)]
    if sc.kind == "oom_kill":
        return out + [f"/var/spool/slurmd/job{job}/slurm_script: line 27: {env.rng.randint(1000, 99999)} Killed                  python train.py --trial {task}"] + _verdict(sc, env, job, end)[:1]
    return out + _verdict(sc, env, job, end)


def w_lightning(sc: Scenario, env: Env, job: int) -> list[str]:
    st, end = _build(sc, env)
    sp = env.sp
    world = sc.world
    banner = ["GPU available: True (cuda), used: True", "TPU available: False, using: 0 TPU cores", "HPU available: False, using: 0 HPUs"]
    out = slurm_preamble(env, sc, job, sc.start) + ["+ srun --label python train_lightning.py fit --config cfg.yaml" if world > 1 else "+ python train_lightning.py fit --config cfg.yaml"]
    head = [f"{ts_log(sc.start + timedelta(seconds=5))} - INFO - __main__ - world_size={world}"] + banner
    if world > 1:
        for r in range(world):
            head.append(f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/{world}")
        head += ["----------------------------------------------------------------------------------------------------", "distributed_backend=nccl",
                 f"All distributed processes registered. Starting with {world} processes", "----------------------------------------------------------------------------------------------------", ""]
    head += [f"LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [{','.join(str(i) for i in range(sc.gpn))}]", "",
             "  | Name    | Type             | Params | Mode ", "-----------------------------------------------------",
             "0 | model   | GPT              | 124 M  | train", "1 | loss_fn | CrossEntropyLoss | 0      | train",
             "-----------------------------------------------------", "124 M     Trainable params", "0         Non-trainable params",
             "124 M     Total params", "497.759   Total estimated model params size (MB)"]
    out += [f"0: {h}" for h in head] if world > 1 else head
    rng = env.rng
    bar = "\r".join(f"Epoch 0:  {p:>3d}%|{'█' * (p // 10):<10}| {p * 40}/4000 [{p // 2:02d}:{p % 60:02d}<12:00,  {rng.uniform(2, 9):.2f}it/s, v_num=3, train_loss={rng.uniform(1, 5):.3f}]"
                    for p in range(0, 100, 7))
    out.append(("0: " if world > 1 else "") + bar)
    # re-root the failing traceback under Lightning's trainer
    lit = [f'  File "{env.root}/train_lightning.py", line 88, in <module>', "    cli = LightningCLI(LitGPT, DataModule)",
           f'  File "{sp}/lightning/pytorch/trainer/trainer.py", line 538, in fit', "    call._call_and_handle_interrupt(",
           f'  File "{sp}/lightning/pytorch/trainer/call.py", line 47, in _call_and_handle_interrupt', "    return trainer_fn(*args, **kwargs)",
           f'  File "{sp}/lightning/pytorch/loops/fit_loop.py", line 205, in run', "    self.advance()",
           f'  File "{sp}/lightning/pytorch/core/module.py", line 1306, in training_step', "    return self.model.training_step(batch, batch_idx)"]
    body = []
    for t, r, n, line in st.events:
        body.append((t, r, n, line))
    st.events = body
    lines = _render(st, prefix="task" if world > 1 else None)
    fixed: list[str] = []
    for line in lines:
        core = line.split(": ", 1)[1] if world > 1 and ": " in line else line
        pre = line[: len(line) - len(core)]
        fixed.append(line)
        if core == "Traceback (most recent call last):" and sc.kind == "family":
            fixed += [pre + x for x in lit]
    out += fixed
    if sc.kind == "ok":
        return out + [f"`Trainer.fit` stopped: `max_epochs={rng.randint(1, 30)}` reached.", ts_date(end)]
    if sc.kind.startswith("sched"):
        return out + _verdict(sc, env, job, end)
    if world > 1 and sc.kind == "family":
        fr = sc.first_rank if sc.first_rank is not None else 0
        out.append(f"srun: error: {env.hosts[0]}: task {fr}: Exited with exit code 1")
        others = ",".join(str(r) for r in range(world) if r != fr)
        out.append(f"srun: error: {env.hosts[0]}: tasks {others}: Terminated")
    return out


def w_mp_spawn(sc: Scenario, env: Env, job: int) -> list[str]:
    st, end = _build(sc, env)
    sp = env.sp
    out = [ts_date(sc.start), f"+ python train_spawn.py --world-size {sc.world}"]
    fail = [e for e in st.events]
    if sc.kind == "family" and sc.family is not None:
        fr = sc.first_rank if sc.first_rank is not None else env.rng.randrange(sc.world)
        # children's exceptions travel to the parent; only startup/progress lines are printed directly
        start_fail = min((e[0] for e in fail if e[3] == "Traceback (most recent call last):"), default=end)
        st.events = [e for e in fail if e[0] < start_fail - timedelta(microseconds=1) or not e[3]]
        out += _render(st, prefix=None)
        child = [e[3] for e in fail if e[1] == fr and e[0] >= start_fail - timedelta(microseconds=1)]
        for r in range(sc.world):
            if r != fr:
                out.append(f"{ts_glog(end, 'W')} {env.rng.randint(1000, 60000)} torch/multiprocessing/spawn.py:160] Terminating process {env.rng.randint(1000, 60000)} via signal SIGTERM")
        out += ["Traceback (most recent call last):", f'  File "{env.root}/train_spawn.py", line 131, in <module>',
                "    mp.spawn(main_worker, args=(world_size, cfg), nprocs=world_size, join=True)",
                f'  File "{sp}/torch/multiprocessing/spawn.py", line 328, in spawn', '    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")',
                f'  File "{sp}/torch/multiprocessing/spawn.py", line 284, in start_processes', "    while not context.join():",
                f'  File "{sp}/torch/multiprocessing/spawn.py", line 203, in join', "    raise ProcessRaisedException(msg, error_index, failed_process.pid)",
                "torch.multiprocessing.spawn.ProcessRaisedException: ", "", f"-- Process {fr} terminated with the following error:",
                "Traceback (most recent call last):", f'  File "{sp}/torch/multiprocessing/spawn.py", line 90, in _wrap', "    fn(i, *args)",
                f'  File "{env.root}/train_spawn.py", line 97, in main_worker', "    train(model, train_loader, optimizer, cfg)"]
        out += [x for x in _strip_entry(child) if x is not None]
        return out
    out += _render(st, prefix=None)
    if sc.kind == "ok":
        return out + [ts_date(end)]
    sig = "SIGABRT" if sc.kind.startswith("hang") else "SIGKILL"
    rank = sc.first_rank if sc.first_rank is not None else env.rng.randrange(sc.world)
    return out + ["Traceback (most recent call last):", f'  File "{env.root}/train_spawn.py", line 131, in <module>',
                  "    mp.spawn(main_worker, args=(world_size, cfg), nprocs=world_size, join=True)",
                  f'  File "{sp}/torch/multiprocessing/spawn.py", line 196, in join', "    raise ProcessExitedException(",
                  f"torch.multiprocessing.spawn.ProcessExitedException: process {rank} terminated with signal {sig}"]


def w_deepspeed(sc: Scenario, env: Env, job: int) -> list[str]:
    st, end = _build(sc, env)
    rng = env.rng
    t = sc.start + timedelta(seconds=1)
    ds = f"[{ts_log(t)}]"
    hosts = env.hosts
    info = {h: list(range(sc.gpn)) for h in hosts}
    out = [f"{ds} [INFO] [real_accelerator.py:219:get_accelerator] Setting ds_accelerator to cuda (auto detect)"]
    if sc.nodes > 1:
        out += [f"{ds} [INFO] [multinode_runner.py:80:get_cmd] Running on the following workers: {','.join(hosts)}",
                f"{ds} [INFO] [runner.py:568:main] cmd = pdsh -S -f 1024 -w {','.join(hosts)} export PYTHONPATH={env.root}; cd {env.root}; /usr/bin/python -u -m deepspeed.launcher.launch --world_info=eyJ... --node_rank=%n --master_addr={hosts[0]} --master_port=29500 train.py --deepspeed --deepspeed_config ds_config.json"]
    else:
        out += [f"{ds} [INFO] [runner.py:568:main] cmd = /usr/bin/python -u -m deepspeed.launcher.launch --world_info=eyJsb2NhbGhvc3QiOiBbMCwgMSwgMiwgM119 --master_addr=127.0.0.1 --master_port=29500 --enable_each_rank_log=None train.py --deepspeed --deepspeed_config ds_config.json"]
    per_node: list[list[str]] = []
    for n, h in enumerate(hosts):
        lines = [f"{ds} [INFO] [launch.py:146:main] WORLD INFO DICT: {info}",
                 f"{ds} [INFO] [launch.py:152:main] nnodes={sc.nodes}, num_local_procs={sc.gpn}, node_rank={n}",
                 f"{ds} [INFO] [launch.py:164:main] dist_world_size={sc.world}",
                 f"{ds} [INFO] [launch.py:256:main] process {rng.randint(1000, 60000)} spawned with command: ['/usr/bin/python', '-u', 'train.py', '--local_rank=0', '--deepspeed', '--deepspeed_config', 'ds_config.json']"]
        lines += _render(st, ranks=range(n * sc.gpn, (n + 1) * sc.gpn), prefix=None)
        if sc.kind == "family":
            fr = sc.first_rank if sc.first_rank is not None else (rng.randrange(sc.world) if n == 0 else -1)
            if fr // sc.gpn == n or (sc.family is not None and sc.family.all_ranks):
                lr = fr % sc.gpn if fr >= 0 else 0
                tk = f"[{ts_log(end)}]"
                lines += [f"{tk} [INFO] [launch.py:319:sigkill_handler] Killing subprocess {rng.randint(1000, 60000)}" for _ in range(sc.gpn)]
                lines.append(f"{tk} [ERROR] [launch.py:325:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', '--local_rank={lr}', '--deepspeed', '--deepspeed_config', 'ds_config.json'] exits with return code = 1")
        elif sc.kind.startswith("hang") and n == 0:
            lines.append(f"[{ts_log(end)}] [ERROR] [launch.py:325:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', '--local_rank={rng.randrange(sc.gpn)}', '--deepspeed', '--deepspeed_config', 'ds_config.json'] exits with return code = -6")
        elif sc.kind == "ok":
            lines.append(f"[{ts_log(end)}] [INFO] [launch.py:351:main] Process {rng.randint(1000, 60000)} exits successfully.")
        per_node.append([f"{h}: {x}" for x in lines] if sc.nodes > 1 else lines)
    for lines in per_node:
        out += lines
    if sc.nodes > 1 and sc.kind != "ok":
        out.append(f"pdsh@{hosts[0]}: {hosts[(sc.first_rank or 0) // sc.gpn]}: ssh exited with exit code 1")
    return out


def w_logdir(sc: Scenario, env: Env, job: int) -> dict[str, list[str]]:
    st, end = _build(sc, env)
    run = f"{env.rng.randint(100000, 999999)}_{env.rng.choice('abcdefghijk')}{env.rng.randint(10, 99)}"
    files: dict[str, list[str]] = {}
    launcher = [ts_date(sc.start)] + torchrun_header(env, sc, sc.start + timedelta(seconds=1), 0)
    launcher.append(f"{ts_glog(sc.start + timedelta(seconds=2))} 881 torch/distributed/elastic/multiprocessing/redirects.py:27] log directory set to: /scratch/{env.user}/torchelastic/{run}")
    for r in range(sc.world):
        files[f"torchelastic/{run}/attempt_0/{r}/stderr.log"] = _render(st, ranks=range(r, r + 1), prefix=None)
        files[f"torchelastic/{run}/attempt_0/{r}/stdout.log"] = []
    if sc.kind != "ok":
        rank, code, t = _first_observed(sc, env, st, end)
        launcher += torchrun_summary(env, sc, t, rank, code, 0, None)
    else:
        launcher.append(f"{ts_glog(end)} 881 torch/distributed/elastic/agent/server/api.py:879] [default] worker group successfully finished. Waiting 300 seconds for other agents to finish.")
    files["launcher.log"] = launcher
    return files


def w_k8s(sc: Scenario, env: Env, job: int, name: str) -> dict[str, list[str]]:
    st, end = _build(sc, env)
    files: dict[str, list[str]] = {}
    stamped = env.rng.random() < 0.6
    first_node = (sc.first_rank or 0) // sc.gpn
    for n in range(sc.nodes):
        pod = f"{name}-master-0" if n == 0 else f"{name}-worker-{n - 1}"
        t_h = st.skewed(sc.start + timedelta(seconds=3), n * sc.gpn)
        head = torchrun_header(env, sc, t_h, n)[1:]
        lines = [f"{ts_iso(t_h)} {x}" if stamped else x for x in head]
        lines += _render(st, ranks=range(n * sc.gpn, (n + 1) * sc.gpn), prefix="rank", stamp=env if stamped else None)
        if sc.kind == "oom_kill" and n == first_node:
            files[f"{pod}.log"] = lines  # the container is killed: its log just stops
            continue
        if sc.kind != "ok":
            if sc.kind == "family" and sc.family is not None and not sc.family.all_ranks:
                if n == first_node and sc.secondary != "watchdog":
                    rank, code, t = sc.first_rank or 0, 1, sc.start + timedelta(seconds=sc.run_s + 1)
                else:
                    rank, code, t = n * sc.gpn + env.rng.randrange(sc.gpn), -6 if sc.secondary == "watchdog" else -15, end
                    if sc.secondary == "remote" and n != first_node:
                        code = 1
            else:
                rank, code, t = _first_observed(sc, env, st, end)
                rank = n * sc.gpn + rank % sc.gpn
            t = st.skewed(t, n * sc.gpn)
            summ = torchrun_summary(env, sc, t, rank, code, n, None)
            lines += [f"{ts_iso(t)} {x}" if stamped else x for x in summ]
        files[f"{pod}.log"] = lines
    if sc.kind == "oom_kill":
        pod = f"{name}-master-0" if first_node == 0 else f"{name}-worker-{first_node - 1}"
        files["describe.txt"] = [f"Name:         {pod}", "Containers:", "  pytorch:", "    State:          Terminated",
                                 "      Reason:       OOMKilled", "      Exit Code:    137",
                                 f"      Started:      {ts_date(sc.start)}", f"      Finished:     {ts_date(end)}",
                                 f"    Limits:\n      memory:          {env.rng.choice([64, 128, 256])}Gi\n      nvidia.com/gpu:  {sc.gpn}"]
    return files


# ------------------------------------------------------------------------------------------------
# Jobs
# ------------------------------------------------------------------------------------------------

_STAMP = re.compile(
    r"(?P<iso>\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d)"
    r"|(?:^|[\[ :])[IWEF](?P<md>\d{4}) (?P<hms>\d\d:\d\d:\d\d)\.\d+"
    r"|(?P<date>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \w{3} [ \d]\d \d\d:\d\d:\d\d UTC \d{4})", re.M)


def stamps(text: str, year: int) -> list[datetime]:
    """Every timestamp the generator writes, read back from a job's text (all UTC)."""
    out = []
    for m in _STAMP.finditer(text):
        if m["iso"]:
            out.append(datetime.strptime(m["iso"].replace("T", " ").replace("_", " "), "%Y-%m-%d %H:%M:%S"))
        elif m["md"]:
            out.append(datetime.strptime(f"{year}{m['md']} {m['hms']}", "%Y%m%d %H:%M:%S"))
        else:
            out.append(datetime.strptime(m["date"].replace(" UTC", ""), "%a %b %d %H:%M:%S %Y"))
    return out


def _lines_of(sc: Scenario, env: Env, job: int, i: int) -> list[str]:
    if sc.shape == "torchrun_file":
        return w_torchrun_file(sc, env, job)
    if sc.shape == "slurm_array":
        return w_slurm_array(sc, env, job, i % 40)
    return w_lightning(sc, env, job)


def _job(rng: random.Random, sc: Scenario, i: int) -> tuple[str, dict[str, str], str, dict[str, Any]]:
    """(job id, {relative path under logs/: text}, trap, manifest notes)."""
    env = make_env(sc, rng)
    job = 3000000 + i * 37 + rng.randint(0, 30)
    notes: dict[str, Any] = {}
    trap = sc.shape
    if sc.shape in SINGLE_FILE:
        attempts: list[list[str]] = []
        if "retried" in sc.mods:
            t = sc.start
            for a in range(rng.randint(1, 2)):
                prev_fam = rng.choice([f for f in FAMILIES if f.id in MID_TRAINING])
                prev = Scenario(**{**sc.__dict__, "kind": "family", "family": prev_fam, "site": prev_fam.sites[0], "start": t,
                                   "run_s": rng.uniform(300, 8000), "mods": set(), "seed": sc.seed * 7 + a})
                prev_env = make_env(prev, rng)
                prev_env.hosts = env.hosts
                attempts.append(_lines_of(prev, prev_env, job, i) + ["", f"slurmstepd: info: job {job} requeued (SLURM_RESTART_COUNT={a + 1})", ""])
                t = t + timedelta(seconds=prev.run_s + rng.uniform(60, 900))
                notes.setdefault("earlier_attempts", []).append(f"{prev_fam.id}@{prev_fam.sites[0].label}")
            sc.start = t
            trap = "retried_final_ok" if sc.kind == "ok" else "retried"
        body = _lines_of(sc, env, job, i)
        if "truncated" in sc.mods:
            hits = [k for k, line in enumerate(body) if sc.failure_line and line.endswith(sc.failure_line)]
            if hits:
                cut = hits[-1]
                rest = body[cut + 1][: len(body[cut + 1]) // 2] if cut + 1 < len(body) else ""
                body = body[: cut + 1] + ([rest] if rest else [])
                trap = "truncated"
            else:
                sc.mods.discard("truncated")
        text = "\n".join(line for a in attempts for line in a) + ("\n" if attempts else "") + "\n".join(body) + "\n"
        if sc.shape == "slurm_array":
            jid = f"slurm-{job - i % 40}_{i % 40}"
            files = {f"{jid}.out": text}
        elif sc.shape == "torchrun_file" and rng.random() < 0.5:
            jid = f"slurm-{job}"
            files = {f"{jid}.out": text}
        else:
            jid = f"job-{job}"
            files = {f"{jid}/{'train.log' if sc.shape == 'torchrun_file' else 'lightning.out'}": text}
    elif sc.shape == "mp_spawn":
        jid = f"spawn-{job}"
        files = {f"{jid}/output.log": "\n".join(w_mp_spawn(sc, env, job)) + "\n"}
    elif sc.shape == "deepspeed":
        jid = f"ds-{job}"
        files = {f"{jid}/deepspeed.log": "\n".join(w_deepspeed(sc, env, job)) + "\n"}
    elif sc.shape == "torchrun_logdir":
        jid = f"elastic-{job}"
        files = {f"{jid}/{k}": "\n".join(v) + ("\n" if v else "") for k, v in w_logdir(sc, env, job).items()}
    else:
        name = f"{rng.choice(['llama-ft', 'vit-pt', 'asr-ctc', 'sdxl-lora', 'gpt-neo'])}-{''.join(rng.choices('abcdefghjkmnpqrstvwxyz23456789', k=5))}"
        jid = f"pytorchjob-{name}"
        files = {f"{jid}/{k}": "\n".join(v) + "\n" for k, v in w_k8s(sc, env, job, name).items()}
    if sc.kind != "ok" and trap == sc.shape:
        if "noise" in sc.mods:
            trap = "new_failure_amid_noise"
        elif sc.kind != "family":
            trap = sc.kind + ("_fr" if "fr" in sc.mods else "")
        elif "reorder" in sc.mods:
            trap = "rank_reorder"
        elif "skew" in sc.mods:
            trap = "clock_skew"
        elif sc.secondary == "watchdog":
            trap = f"{sc.shape}_watchdog" + ("_fr" if "fr" in sc.mods else "")
    elif sc.kind == "ok" and trap == sc.shape:
        trap = "ok_scary_noise"
    return jid, files, trap, notes


def generate(out_dir: Path | str, n_jobs: int = 640, seed: int = DEV_SEED) -> Path:
    """Write ``out_dir/logs/``, ``out_dir/truth.jsonl`` and ``out_dir/manifest.jsonl``; return the logs folder."""
    out = Path(out_dir)
    logs = out / "logs"
    if logs.exists():
        shutil.rmtree(logs)
    logs.mkdir(parents=True)
    rng = random.Random(f"triage-v2:{seed}")
    truth: list[dict[str, Any]] = []
    manifest: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i in range(n_jobs):
        sc = _plan(rng, i, seed)
        jid, files, trap, notes = _job(rng, sc, i)
        if jid in seen:
            continue
        seen.add(jid)
        status, category, group, first = _truth(sc)
        text = "\n".join(files.values())
        st = stamps(text, sc.start.year)
        gpus = sc.world if sc.shape != "slurm_array" else 1
        hours = round(gpus * (max(st) - min(st)).total_seconds() / 3600, 4) if len(st) > 1 else None
        for rel, body in files.items():
            p = logs / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(body.encode("utf-8"))
        truth.append({"job_id": jid, "status": status, "category": category, "group": group, "first_failing_rank": first,
                      "gpu_hours": hours, "trap": trap})
        manifest.append({"job_id": jid, "shape": sc.shape, "kind": sc.kind, "family": sc.family.id if sc.family else None,
                         "site": sc.site.label if sc.site else None, "nodes": sc.nodes, "gpus_per_node": sc.gpn, "world": sc.world,
                         "secondary": sc.secondary, "mods": sorted(sc.mods), "files": sorted(files), **notes})
    truth.sort(key=lambda r: r["job_id"])
    manifest.sort(key=lambda r: r["job_id"])
    (out / "truth.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in truth), encoding="utf-8")
    (out / "manifest.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in manifest), encoding="utf-8")
    return logs
