"""Distributed training: NCCL errors and timeouts, DDP misuse, process-group setup, torchrun summaries."""

from __future__ import annotations

import re

from assistant.rules.registry import Example, rule
from assistant.rules.base import Context, error_fact, fix, hit
from assistant.types import Fact, RuleHit

_WATCHDOG = re.compile(
    r"WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)(?:, NumelIn=(?P<nin>\d+), NumelOut=(?P<nout>\d+))?, Timeout\(ms\)=(?P<tmo>\d+)\)(?: ran for (?P<ran>\d+) milliseconds)?"
)


def _debug_fixes() -> list:
    return [
        fix("Turn on distributed debugging", "TORCH_DISTRIBUTED_DEBUG=DETAIL checks that every rank calls the same collective with the same shapes and names the mismatch; NCCL_DEBUG=INFO shows NCCL's own view.", "TORCH_DISTRIBUTED_DEBUG=DETAIL NCCL_DEBUG=INFO torchrun --nproc_per_node=2 train.py", "nccl-timeout"),
    ]


@rule(
    'distributed.nccl_timeout',
    category='nccl_error',
    docs=("nccl-timeout", "nccl-errors", "ddp-unused-parameters"),
    priority=220,
    outcomes=('distributed.nccl_timeout', 'distributed.collective_mismatch'),
    examples=(),
)
def nccl_timeout(ctx: Context) -> RuleHit | None:
    """Watchdog collective timeouts and collective mismatches between ranks."""
    mismatch = ctx.search(r"Detected mismatch between collectives on ranks\. Rank (\d+) is running collective: (.+?), but Rank (\d+) is running collective: (.+?)(?:\.|$)", re.M | re.S)
    docs = ("nccl-timeout", "nccl-errors", "ddp-unused-parameters")
    if mismatch:
        r0, c0, r1, c1 = mismatch.groups()
        shapes = re.findall(r"TensorShape=\[([^\]]*)\]", c0 + " " + c1)
        ops = re.findall(r"OpType=(\w+)", c0 + " " + c1)
        found = [error_fact(ctx), Fact("collective", f"rank {r0}: {c0.strip()[:160]}"), Fact("collective", f"rank {r1}: {c1.strip()[:160]}")]
        if len(set(ops)) > 1:
            detail = f"rank {r0} calls {ops[0]} while rank {r1} calls {ops[1]}: the ranks execute collectives in a different order"
        elif len(shapes) >= 2 and shapes[0] != shapes[1]:
            detail = f"the same {ops[0] if ops else 'collective'} is called with shape [{shapes[0]}] on rank {r0} and [{shapes[1]}] on rank {r1}"
        else:
            detail = "the ranks' collectives differ"
        cause = (f"The ranks disagree about the collective they are running: {detail}. Every rank must call the same collectives, in the same order, "
                 "with tensors of the same shape and dtype. Rank-dependent code paths or rank-dependent tensor sizes cause this: the last uneven batch, or "
                 "sizes that depend on each rank's data (torch.bincount without minlength, unique, nonzero, boolean masks).")
        src = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
        if src:
            cause += f" The collective is called at `{src}`."
        fixes = [
            fix("Make every rank run the same collectives with the same shapes", "Pad per-rank tensors to a common size (all_gather the sizes first), and keep rank-conditional code (logging, evaluation) free of collectives.", "sizes = [torch.zeros(1, device=dev) for _ in range(world)]\ndist.all_gather(sizes, torch.tensor([n], device=dev, dtype=torch.float))", "nccl-timeout"),
        ]
        return hit("distributed.collective_mismatch", "nccl_error", "Collective mismatch between ranks", cause, fixes, docs, found, 0.95)

    m = _WATCHDOG.search(ctx.text)
    other = ctx.search(r"Watchdog caught collective operation timeout|collective operation timeout|NCCL timeout|Timed out waiting \d+ms for|operation has timed out|Some NCCL operations have failed or timed out|ProcessGroupNCCL.*timed out")
    if not (m or other):
        return None
    found = [error_fact(ctx)]
    cause = "A collective operation did not complete on every rank within the timeout: at least one rank never reached it (or reached a different one)."
    if m:
        op, tmo, ran = m.group("op"), int(m.group("tmo")), m.group("ran")
        found.append(Fact("collective", f"{op} #{m.group('seq')} waited {int(ran) / 1000 if ran else tmo / 1000:.0f} s (timeout {tmo / 1000:.0f} s)" + (f", {m.group('nin')} elements" if m.group("nin") else "")))
        numels = {int(x) for x in re.findall(r"NumelIn=(\d+)", ctx.text)}
        if len(numels) > 1:
            cause += f" Different ranks report different sizes for the same collective ({', '.join(map(str, sorted(numels)))} elements): their tensors do not match."
        else:
            cause = (f"Rank {ctx.failure.rank if ctx.failure.rank is not None else '?'}'s {op} (collective #{m.group('seq')}) waited {tmo // 1000} s for the other ranks and gave up. "
                     "NCCL collectives block until every rank joins, so the others were elsewhere: one rank crashed or hung, ran a different number of "
                     "iterations (uneven data per rank, early exit), skipped a collective in rank-conditional code (e.g. evaluation only on rank 0 with a "
                     "barrier/all_reduce inside), or is much slower (data loading, checkpoint saving on rank 0).")
    if ctx.failure.notes and any("failed first" in n for n in ctx.failure.notes):
        cause += " " + next(n for n in ctx.failure.notes if "failed first" in n)
    fixes = [
        fix("Find the rank that did not arrive", "Look for the first rank whose log shows a different error or stops early; the timeout on the others is a consequence.", None, "nccl-timeout"),
        fix("Give every rank the same number of steps", "Use DistributedSampler (drop_last=True) so each rank sees the same number of batches; or use the join() context manager for uneven inputs.", "sampler = DistributedSampler(ds, drop_last=True)\nloader = DataLoader(ds, sampler=sampler, batch_size=bs)", "nccl-timeout"),
        fix("Keep collectives out of rank-conditional code", "Every rank must call barrier/all_reduce/all_gather the same number of times.", "if rank == 0:\n    save_checkpoint()   # no collectives in here\ndist.barrier()      # all ranks", "nccl-timeout"),
        *_debug_fixes(),
        fix("Raise the timeout only for known slow phases", "If one rank legitimately works longer (e.g. saving a large checkpoint), raise timeout in init_process_group.", "dist.init_process_group('nccl', timeout=datetime.timedelta(minutes=30))", "nccl-timeout"),
    ]
    return hit("distributed.nccl_timeout", "nccl_error", "NCCL collective timed out", cause, fixes, docs, found, 0.92)


_NCCL_KINDS = {
    "unhandled system error": "a system call or transport failed (network interface, shared memory, InfiniBand); in containers /dev/shm that is too small is a frequent cause",
    "invalid usage": "NCCL was called incorrectly: typically two ranks on the same GPU, mismatched collectives, or an invalid communicator",
    "unhandled cuda error": "a CUDA error happened inside NCCL (often an earlier failure on that GPU, out-of-memory, or a faulty GPU)",
    "internal error": "NCCL hit an internal error (often network/transport problems or version mismatches between ranks)",
    "remote process exited or there was a network error": "a peer rank died or the network between nodes failed",
}


@rule(
    'distributed.nccl_error',
    category='nccl_error',
    docs=("nccl-errors", "process-group-init", "nccl-timeout"),
    priority=222,
    outcomes=('distributed.nccl_error', 'distributed.duplicate_gpu', 'distributed.nccl_cpu_tensor'),
    examples=(),
)
def nccl_error(ctx: Context) -> RuleHit | None:
    """``NCCL error in: ...`` with its reason, duplicate GPUs, and NCCL WARN lines."""
    dup = ctx.search(r"Duplicate GPU detected ?: rank (\d+) and rank (\d+) both on CUDA device (\w+)")
    docs = ("nccl-errors", "process-group-init", "nccl-timeout")
    if dup:
        r0, r1, dev = dup.groups()
        cause = (f"Ranks {r0} and {r1} both use CUDA device {dev}. Each process must select its own GPU before creating NCCL communicators; "
                 "without torch.cuda.set_device(local_rank) every process uses GPU 0.")
        fixes = [fix("Select the GPU from LOCAL_RANK at start-up", "", "local_rank = int(os.environ['LOCAL_RANK'])\ntorch.cuda.set_device(local_rank)\ndist.init_process_group('nccl', device_id=torch.device('cuda', local_rank))", "nccl-errors")]
        return hit("distributed.duplicate_gpu", "nccl_error", "Two ranks on the same GPU", cause, fixes, docs, [error_fact(ctx), Fact("ranks", f"ranks {r0} and {r1} on device {dev}")], 0.95)
    m = ctx.search(r"NCCL error in: ([^\n]+?), ([a-z][a-z ]+?)(?:, NCCL version ([\d.]+\w*))?(?:\n|$|\s*ncclSystemError|\s*ncclInvalidUsage|\s*ncclUnhandledCudaError|\s*ncclInternalError|\s*ncclRemoteError)")
    generic = ctx.search(r"ncclSystemError|ncclInvalidUsage|ncclUnhandledCudaError|ncclInternalError|ncclRemoteError|NCCL WARN|DistBackendError|NCCL communicator was aborted|ProcessGroupNCCL|Tensors must be CUDA and dense|NCCL Error \d")
    if not (m or generic):
        return None
    found = [error_fact(ctx)]
    if m:
        reason = m.group(2).strip()
        found.append(Fact("nccl", f"NCCL reason: {reason}" + (f" (NCCL {m.group(3)})" if m.group(3) else "")))
        story = _NCCL_KINDS.get(reason, f"NCCL failed ({reason})")
        cause = f"NCCL failed with '{reason}': {story}."
    elif ctx.search(r"Tensors must be CUDA and dense"):
        cause = "The NCCL backend only works on CUDA tensors, but a CPU (or sparse) tensor was passed to a collective."
        fixes = [fix("Move the tensor to this rank's GPU (or use the gloo backend for CPU tensors)", "", "t = t.to(torch.device('cuda', local_rank))\ndist.all_reduce(t)", "nccl-errors")]
        return hit("distributed.nccl_cpu_tensor", "nccl_error", "CPU tensor passed to an NCCL collective", cause, fixes, docs, found, 0.93)
    else:
        cause = "NCCL (the GPU communication library) reported a failure. "
    last = ctx.search(r"Last error:\s*\n?\s*([^\n]+)")
    if last:
        found.append(Fact("nccl", f"last NCCL error: {last.group(1).strip()[:200]}"))
        cause += f" NCCL's last error says: {last.group(1).strip()[:200]}."
    for line in ctx.failure.nccl_lines[:3]:
        if "WARN" in line:
            found.append(Fact("nccl", line[:200]))
    if ctx.failure.notes:
        cause += " " + " ".join(n for n in ctx.failure.notes if "failed first" in n)
    fixes = [
        fix("Get NCCL's own explanation", "NCCL_DEBUG=INFO (or WARN) prints the transport it picked and the exact failing call.", "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET torchrun --nproc_per_node=2 train.py", "nccl-errors"),
        fix("One GPU per rank", "Call torch.cuda.set_device(local_rank) before init_process_group and before any CUDA work.", "torch.cuda.set_device(int(os.environ['LOCAL_RANK']))", "nccl-errors"),
        fix("In containers, give NCCL enough shared memory", "Docker's default /dev/shm (64 MB) is too small.", "docker run --shm-size=16g --ipc=host ...", "nccl-errors"),
        fix("Isolate the transport", "If a network path is broken, disabling it tells you which: NCCL_P2P_DISABLE=1 (GPU peer-to-peer), NCCL_IB_DISABLE=1 (InfiniBand), NCCL_SOCKET_IFNAME=eth0 (pick the interface).", "NCCL_P2P_DISABLE=1 torchrun ...", "nccl-errors"),
    ]
    return hit("distributed.nccl_error", "nccl_error", "NCCL error" + (f": {m.group(2).strip()}" if m else ""), cause, fixes, docs, found, 0.88)


@rule(
    'distributed.ddp_error',
    category='ddp_error',
    docs=("ddp-unused-parameters", "process-group-init"),
    priority=221,
    outcomes=('distributed.ddp_unused', 'distributed.ddp_ready_twice', 'distributed.ddp_model_mismatch', 'distributed.ddp_no_params', 'distributed.ddp_device'),
    examples=(),
)
def ddp_error(ctx: Context) -> RuleHit | None:
    """DistributedDataParallel misuse: unused parameters, mark-ready-twice, models that differ by rank."""
    docs = ("ddp-unused-parameters", "process-group-init")
    if ctx.search(r"Expected to have finished reduction in the prior iteration before starting a new one"):
        idx = ctx.search(r"Parameter indices which did not receive grad for rank (\d+): ([\d ]+)")
        names = ctx.search(r"Parameters which did not receive grad for rank (\d+): ([^\n]+)")
        found = [error_fact(ctx)]
        cause = ("DDP waits for a gradient from every parameter before it starts the next iteration, but some parameters received no gradient in the "
                 "previous backward: they were not used to compute the loss (a branch not taken, a frozen or auxiliary head, a layer defined but unused, "
                 "or outputs that do not reach the loss).")
        if names:
            cause += f" On rank {names.group(1)} these parameters got no gradient: {names.group(2).strip()[:300]}."
            found.append(Fact("parameters", f"no grad on rank {names.group(1)}: {names.group(2).strip()[:300]}"))
        elif idx:
            cause += f" On rank {idx.group(1)} the parameters with indices {idx.group(2).strip()} did not receive grad (run with TORCH_DISTRIBUTED_DEBUG=DETAIL to get their names)."
            found.append(Fact("parameters", f"parameter indices without grad on rank {idx.group(1)}: {idx.group(2).strip()}"))
        fixes = [
            fix("Let DDP detect unused parameters", "Costs an extra graph traversal per step, but is correct for models with conditional branches.", "model = DDP(model, device_ids=[local_rank], find_unused_parameters=True)", "ddp-unused-parameters"),
            fix("Or make every parameter take part in the loss / remove unused ones", "Delete layers you do not use; freeze with requires_grad_(False) before wrapping in DDP.", "for p in model.aux_head.parameters():\n    p.requires_grad_(False)   # before DDP(...)", "ddp-unused-parameters"),
            fix("Name the parameters", "", "TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun ...", "ddp-unused-parameters"),
        ]
        return hit("distributed.ddp_unused", "ddp_error", "DDP: parameters without gradients", cause, fixes, docs, found, 0.95)
    if ctx.search(r"Expected to mark a variable ready only once"):
        cause = ("A parameter's gradient hook fired twice in one backward under DDP. This happens with reentrant activation checkpointing, a module used twice "
                 "in one forward (weight sharing across calls) or multiple forward passes before one backward.")
        fixes = [
            fix("Use non-reentrant checkpointing", "", "checkpoint(block, x, use_reentrant=False)", "ddp-unused-parameters"),
            fix("Or declare the graph static", "If the set of used parameters does not change between iterations.", "model = DDP(model, device_ids=[local_rank], static_graph=True)", "ddp-unused-parameters"),
        ]
        return hit("distributed.ddp_ready_twice", "ddp_error", "DDP: variable marked ready twice", cause, fixes, docs, [error_fact(ctx)], 0.93)
    m = ctx.search(r"DDP expects same model across all ranks, but Rank (\d+) has (\d+) params, while rank (\d+) has inconsistent (\d+) params")
    m2 = ctx.search(r"appears not to match (?:strides|sizes) of the same param in process 0|params\[\d+\] in this process with sizes \[([\d, ]*)\] appears not to match sizes of the same param in process 0")
    if m or m2:
        if m:
            cause = f"Rank {m.group(1)} built a model with {m.group(2)} parameters but rank {m.group(3)} has {m.group(4)}: the model differs between ranks."
        else:
            cause = "A parameter has different sizes on different ranks: the model is constructed differently per rank."
        cause += (" Models must be identical on all ranks before wrapping in DDP; rank-dependent configuration (e.g. a vocabulary or number of classes computed "
                  "from each rank's own data shard), randomness in architecture choices, or loading different checkpoints cause this.")
        fixes = [fix("Build the model identically on every rank", "Derive architecture from config only (not from rank or local data); load the same checkpoint on all ranks.", None, "ddp-unused-parameters")]
        return hit("distributed.ddp_model_mismatch", "ddp_error", "DDP: model differs across ranks", cause, fixes, docs, [error_fact(ctx)], 0.93)
    if ctx.search(r"DistributedDataParallel is not needed when a module doesn't have any parameter that requires a gradient"):
        cause = "The module wrapped in DDP has no parameter with requires_grad=True (fully frozen, or parameters not registered)."
        fixes = [fix("Wrap only trainable modules; register layers as submodules", "Use nn.ModuleList instead of Python lists.", None, "ddp-unused-parameters")]
        return hit("distributed.ddp_no_params", "ddp_error", "DDP around a module without trainable parameters", cause, fixes, docs, [error_fact(ctx)], 0.9)
    m = ctx.search(r"DistributedDataParallel device_ids and output_device arguments only work with single-device/multiple-device GPU modules or CPU modules, but got device_ids \[([^\]]*)\], output_device (\S+), and module parameters \{([^}]*)\}")
    if m:
        cause = f"DDP was given device_ids [{m.group(1)}] but the module's parameters are on {m.group(3)}: the model was not moved to its GPU before wrapping."
        fixes = [fix("Move the model to the rank's GPU, then wrap", "", "model = model.to(local_rank)\nmodel = DDP(model, device_ids=[local_rank])", "process-group-init")]
        return hit("distributed.ddp_device", "ddp_error", "DDP model not on its device", cause, fixes, docs[::-1], [error_fact(ctx)], 0.92)
    return None


@rule(
    'distributed.process_group',
    category='ddp_error',
    docs=("process-group-init", "nccl-errors"),
    priority=223,
    also=('cpu_oom',),
    outcomes=('distributed.pg_uninitialized', 'distributed.pg_env', 'distributed.port_in_use', 'distributed.nccl_no_gpu', 'distributed.rendezvous', 'distributed.child_failed', 'distributed.child_killed'),
    examples=(),
)
def process_group(ctx: Context) -> RuleHit | None:
    """init_process_group problems and torchrun's ChildFailedError summaries."""
    docs = ("process-group-init", "nccl-errors")
    if ctx.search(r"Default process group has not been initialized"):
        cause = "A torch.distributed call (or DDP/DistributedSampler) ran before dist.init_process_group(), or in a process launched without it (plain `python` instead of torchrun)."
        fixes = [fix("Initialise the process group first (launch with torchrun)", "", "dist.init_process_group(backend='nccl')\n# launch: torchrun --nproc_per_node=NUM_GPUS train.py", "process-group-init")]
        return hit("distributed.pg_uninitialized", "ddp_error", "Process group not initialised", cause, fixes, docs, [error_fact(ctx)], 0.93)
    m = ctx.search(r"environment variable (\w+) expected, but not set")
    if m:
        cause = f"init_process_group uses the env:// method, which reads {m.group(1)} (with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); it is unset because the script was not started by a launcher."
        fixes = [fix("Launch with torchrun, which sets these variables", "", "torchrun --nproc_per_node=2 train.py", "process-group-init")]
        return hit("distributed.pg_env", "ddp_error", f"{m.group(1)} not set for init_process_group", cause, fixes, docs, [error_fact(ctx)], 0.93)
    if ctx.search(r"Address already in use|EADDRINUSE|server socket has failed to (?:listen|bind)"):
        port = ctx.search(r"port[: ]+(\d{2,5})|:(\d{4,5})\b")
        cause = "The rendezvous port (MASTER_PORT" + (f", {port.group(1) or port.group(2)}" if port else "") + ") is already taken, usually by another job or a previous run that has not exited."
        fixes = [fix("Pick a free port", "", "torchrun --master_port=29511 ...   # or --rdzv-endpoint=localhost:0 with --standalone", "process-group-init")]
        return hit("distributed.port_in_use", "ddp_error", "Rendezvous port already in use", cause, fixes, docs, [error_fact(ctx)], 0.9)
    if ctx.search(r"ProcessGroupNCCL is only supported with GPUs, no GPUs found"):
        cause = "The NCCL backend needs GPUs, but this process sees none."
        fixes = [fix("Use the gloo backend on CPU, or make GPUs visible", "", "dist.init_process_group('gloo' if not torch.cuda.is_available() else 'nccl')", "process-group-init")]
        return hit("distributed.nccl_no_gpu", "ddp_error", "NCCL backend without GPUs", cause, fixes, docs, [error_fact(ctx)], 0.9)
    if ctx.search(r"DistStoreError|Timed out after \d+ seconds waiting for clients|RendezvousTimeoutError|wait timeout after \d+ms, keys:"):
        cause = "Rendezvous timed out: not all ranks connected to the store (MASTER_ADDR:MASTER_PORT). Some ranks failed to start, point at another address, or a firewall blocks the port."
        fixes = [fix("Check every rank uses the same MASTER_ADDR/MASTER_PORT and can reach it", "", "nc -zv $MASTER_ADDR $MASTER_PORT", "process-group-init")]
        return hit("distributed.rendezvous", "ddp_error", "Rendezvous timed out", cause, fixes, docs, [error_fact(ctx)], 0.88)
    if ctx.exc_type == "ChildFailedError" or ctx.search(r"torch\.distributed\.elastic\.multiprocessing\.errors\.ChildFailedError"):
        rank = ctx.search(r"rank\s*:\s*(\d+) \(local_rank: (\d+)\)")
        code = ctx.search(r"exitcode\s*:\s*(-?\d+)")
        sig = ctx.search(r"Signal (\d+) \((SIG\w+)\)")
        found = [error_fact(ctx)]
        if rank:
            found.append(Fact("rank", f"first failure: rank {rank.group(1)} (local_rank {rank.group(2)})" + (f", exit code {code.group(1)}" if code else "")))
        exit_code = int(code.group(1)) if code else None
        if exit_code in (-9, 137) or (sig and sig.group(2) == "SIGKILL"):
            cause = ("torchrun reports that a worker was killed with SIGKILL (exit code -9). Without a Python traceback this is almost always the Linux OOM killer: "
                     "host RAM ran out (large datasets in every rank, many DataLoader workers, checkpoint loading on every rank at once).")
            fixes = [fix("Check host memory and the kernel log", "`dmesg | grep -i kill` confirms the OOM killer; reduce per-rank memory (fewer workers, mmap loading).", "dmesg -T | grep -i -E 'killed process|out of memory'", "cpu-oom")]
            return hit("distributed.child_killed", "cpu_oom", "Worker killed (host out of memory)", cause, fixes, ("cpu-oom", "process-group-init"), found, 0.75)
        cause = ("torchrun only summarises that a worker process failed" + (f" (rank {rank.group(1)}, exit code {exit_code})" if rank and exit_code is not None else "")
                 + ". The real error is that rank's own traceback, printed earlier in the log (lines prefixed with [rank N]:) or in its error file; the summary alone does not say what went wrong.")
        fixes = [fix("Read the failing rank's own traceback", "Search the log for the first 'Traceback' from that rank, or decorate main() with @record to have torchrun print it in the summary.", "from torch.distributed.elastic.multiprocessing.errors import record\n\n@record\ndef main(): ...", "process-group-init")]
        return hit("distributed.child_failed", "ddp_error", "torchrun worker failed", cause, fixes, docs, found, 0.6)
    return None
