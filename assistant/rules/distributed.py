"""Distributed training: NCCL errors and timeouts, DDP misuse, process-group setup, torchrun summaries."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from assistant.rules.base import Context, error_fact, hit, lazy_re, remedy
from assistant.rules.registry import Example, rule
from assistant.types import Fact, Facts, Fix, RuleHit

_WATCHDOG = lazy_re(
    r"WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)(?:, NumelIn=(?P<nin>\d+), NumelOut=(?P<nout>\d+))?, Timeout\(ms\)=(?P<tmo>\d+)\)(?: ran for (?P<ran>\d+) milliseconds)?"
)


def _debug_fixes() -> list[Fix]:
    return [
        remedy("nccl-timeout#distributed-debug"),
    ]


def _ranks_in(text: str) -> tuple[int, ...]:
    """Ranks that report the failure (``[Rank 3]`` / ``[rank3]:`` prefixes), in order of appearance."""
    return tuple(dict.fromkeys(int(r) for r in re.findall(r"\[[Rr]ank ?(\d+)\]", text)))


@rule(
    'distributed.nccl_timeout',
    category='nccl_error',
    docs=("nccl-timeout", "nccl-errors", "ddp-unused-parameters"),
    reads=("RuntimeError", "text"),
    priority=26,
    outcomes=('distributed.nccl_timeout', 'distributed.nccl_timeout_first_collective', 'distributed.collective_mismatch'),
    examples=(
        Example('captured/multi_gpu/nccl-timeout-uneven-shards-ddp', 'distributed.nccl_timeout'),
        Example('realworld/dev/basicsr-nccl-watchdog-rankprefix', 'distributed.nccl_timeout'),
        Example('realworld/dev/llamafactory-nccl-watchdog-allreduce-pidprefix', 'distributed.nccl_timeout'),
        Example('realworld/dev/ofa-old-nccl-watchdog-no-numel', 'distributed.nccl_timeout'),
        Example('realworld/dev/pytorch-118369-watchdog-progressbar', 'distributed.nccl_timeout'),
        Example('realworld/dev/sglang-nccl-watchdog-allgather-takedown', 'distributed.nccl_timeout'),
        Example('corpus/distributed/nccl_timeout_alltoall_epoch_transition.txt', 'distributed.nccl_timeout'),
        Example('corpus/distributed/nccl_timeout_first_collective.txt', 'distributed.nccl_timeout_first_collective'),
        Example('captured/multi_gpu/nccl-allreduce-bincount-shape-mismatch', 'distributed.collective_mismatch'),
        Example('corpus/distributed/collective_mismatch_shape_allgather.txt', 'distributed.collective_mismatch'),
        Example('corpus/distributed/collective_mismatch_shape_allreduce.txt', 'distributed.collective_mismatch'),
        Example('corpus/distributed/collective_mismatch_op_type.txt', 'distributed.collective_mismatch'),
        Example('corpus/distributed/collective_mismatch_bincount_gloo_2_13.txt', 'distributed.collective_mismatch'),
        Example('corpus/distributed/gloo_timeout_rank_busy_2_13.txt', 'distributed.nccl_timeout'),
    ),
)
def nccl_timeout(ctx: Context) -> RuleHit | None:
    """Watchdog collective timeouts and collective mismatches between ranks."""
    docs = ("nccl-timeout", "nccl-errors", "ddp-unused-parameters")
    mismatch = ctx.search(r"Detected mismatch between collectives on ranks\. Rank (\d+) is running collective: (.+?), but Rank (\d+) is running collective: (.+?)(?:\.Collectives differ|\.\s*$|$)", re.M | re.S)
    if mismatch:
        return _collective_mismatch(ctx, mismatch, docs)

    m = _WATCHDOG.search(ctx.text)
    other = ctx.search(r"Watchdog caught collective operation timeout|collective operation timeout|NCCL timeout|Timed out waiting \d+ms for|operation has timed out|Some NCCL operations have failed or timed out|ProcessGroupNCCL.*timed out")
    if not (m or other):
        return None
    found = [error_fact(ctx)]
    ranks = _ranks_in(ctx.failure.text or ctx.text)
    numbers: dict[str, float] = {}
    op = m.group("op") if m else None
    seq = int(m.group("seq")) if m else None
    if m:
        tmo, ran = int(m.group("tmo")), m.group("ran")
        numbers.update({"seq_num": float(m.group("seq")), "timeout_ms": float(tmo)})
        if ran:
            numbers["ran_ms"] = float(ran)
        if m.group("nin"):
            numbers.update({"numel_in": float(m.group("nin")), "numel_out": float(m.group("nout"))})
        found.append(Fact("collective", f"{op} #{seq} waited {int(ran) / 1000 if ran else tmo / 1000:.0f} s (timeout {tmo / 1000:.0f} s)" + (f", {m.group('nin')} elements" if m.group("nin") else "")))
    if ranks:
        found.append(Fact("ranks", "ranks reporting the timeout: " + ", ".join(map(str, ranks[:16]))))
    rank = ctx.failure.rank if ctx.failure.rank is not None else (ranks[0] if ranks else None)
    who = f"Rank {rank}'s" if rank is not None else "A rank's"
    what = f"{op} (collective #{seq})" if m else "collective"
    if seq is not None and seq <= 1:
        outcome = "distributed.nccl_timeout_first_collective"
        cause = (f"{who} very first {what} never completed. When even the first collective hangs, the ranks never managed to talk to each "
                 "other: NCCL cannot connect them (a wrong or unreachable network interface, a firewall, InfiniBand or peer-to-peer transport that "
                 "does not work in this machine or container), or one rank never reached that first collective because it crashed or stalled "
                 "during start-up.")
        fixes = [
            remedy("nccl-errors#nccl-debug-connection"),
            remedy("nccl-errors#isolate-transport-paths"),
            remedy("nccl-timeout#check-first-collective-reached"),
            *_debug_fixes(),
        ]
    else:
        outcome = "distributed.nccl_timeout"
        cause = (f"{who} {what} waited for the other ranks until the timeout and gave up. Collectives block until every rank joins, so at "
                 "least one rank was somewhere else: it crashed or hung (look for its own error earlier in the log), ran a different number of "
                 "iterations (uneven data per rank, an early exit), skipped a collective in rank-conditional code (evaluation or logging on rank 0 "
                 "that contains a barrier/all_reduce), or was far slower (data loading, checkpoint saving on one rank).")
        fixes = [
            remedy("nccl-timeout#find-missing-rank"),
            remedy("nccl-timeout#same-steps-per-rank"),
            remedy("nccl-timeout#collectives-outside-rank-branches"),
            *_debug_fixes(),
            remedy("nccl-timeout#raise-timeout-slow-phases"),
        ]
    first = next((n for n in ctx.failure.notes if "failed first" in n), None)
    if first:
        cause += " " + first
    traced = _flight_sentence(ctx.evidence.experiment_values("flight_recorder"))
    if traced is not None:
        sentence, apart = traced
        found.append(Fact("experiment", sentence))
        cause += " " + sentence
        if apart:
            # Ranks in different collectives at the same count: one ran more steps (or an extra collective) than the other.
            even = remedy("nccl-timeout#same-steps-per-rank")
            fixes = [even, *(f for f in fixes if f.title != even.title)]
    # The gloo backend times out with its own wording; name the backend the text shows.
    title = "Collective timed out (gloo)" if not m and ctx.search(r"gloo") else "NCCL collective timed out"
    return hit(outcome, "nccl_error", title, cause, fixes, docs, found, 0.92,
               facts=Facts(numbers=numbers, names=tuple(n for n in (op,) if n) + tuple(f"rank {r}" for r in ranks[:16])))


def _flight_sentence(values: Mapping[str, Any] | None) -> tuple[str, bool] | None:
    """What the flight-recorder re-run showed, in the ranks' own collectives, and whether the ranks were apart."""
    if not values or not values.get("waiting"):
        return None
    waiting: dict[str, str] = values["waiting"]
    completed: dict[str, int] = values.get("completed") or {}
    where = "; ".join(f"rank {r} in {w} after {completed.get(r, 0)} completed" for r, w in sorted(waiting.items(), key=lambda rw: int(rw[0])))
    missing = values.get("missing_ranks") or []
    apart = len(set(waiting.values())) > 1
    sentence = f"Re-run with the flight recorder, the ranks were waiting as follows: {where}."
    if apart:
        sentence += " They were in different collectives, so they had not run the same sequence of collectives."
    if missing:
        sentence += f" Rank {', '.join(map(str, missing))} left no trace: it had stopped calling collectives."
    return sentence, apart


def _collective_mismatch(ctx: Context, mismatch: re.Match[str], docs: tuple[str, ...]) -> RuleHit:
    """Two ranks ran different collectives (TORCH_DISTRIBUTED_DEBUG=DETAIL fingerprints)."""
    r0, c0, r1, c1 = mismatch.groups()
    shapes = [re.findall(r"TensorShape=\[([^\]]*)\]", c) for c in (c0, c1)]
    ops = [re.findall(r"OpType=(\w+)", c) for c in (c0, c1)]
    op0, op1 = (ops[0][0] if ops[0] else None), (ops[1][0] if ops[1] else None)
    s0, s1 = (shapes[0][0] if shapes[0] else None), (shapes[1][0] if shapes[1] else None)
    found = [error_fact(ctx), Fact("collective", f"rank {r0}: {op0 or '?'}" + (f" shape [{s0}]" if s0 is not None else "")),
             Fact("collective", f"rank {r1}: {op1 or '?'}" + (f" shape [{s1}]" if s1 is not None else ""))]
    if op0 and op1 and op0 != op1:
        detail = f"rank {r0} calls {op0} while rank {r1} calls {op1}: the ranks execute collectives in a different order"
        advice = "Rank-dependent code paths (a branch taken on one rank only, a different number of logged metrics or steps) reorder the collectives."
    elif s0 is not None and s1 is not None and s0 != s1:
        detail = f"the same {op0 or 'collective'} is called with shape [{s0}] on rank {r0} and [{s1}] on rank {r1}"
        advice = ("Tensor sizes that depend on each rank's own data cause this: a last uneven batch, per-rank counts or histograms whose length "
                  "depends on the values seen, variable-length sequences, or a per-rank subset of parameters.")
    else:
        detail = "the ranks' collectives differ"
        advice = "Rank-dependent code paths or rank-dependent tensor sizes cause this."
    cause = (f"The ranks disagree about the collective they are running: {detail}. Every rank must call the same collectives, in the same order, "
             f"with tensors of the same shape and dtype. {advice}")
    src = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
    if src:
        cause += f" The collective is called at `{src}`."
    fixes = [
        remedy("nccl-timeout#same-collectives-same-shapes"),
        *_debug_fixes(),
    ]
    dims = tuple(tuple(int(x) for x in s.split(",") if x.strip().isdigit()) for s in (s0, s1) if s is not None)
    return hit("distributed.collective_mismatch", "nccl_error", "Collective mismatch between ranks", cause, fixes, docs, found, 0.95,
               facts=Facts(shapes=dims, names=tuple(o for o in (op0, op1) if o) + (f"rank {r0}", f"rank {r1}")))


# NCCL's reason string and result code -> outcome and what it usually means.
_NCCL_KINDS: dict[str, tuple[str, str]] = {
    "unhandled system error": ("distributed.nccl_system_error", "a system call or transport failed (network interface, shared memory, InfiniBand); in containers a /dev/shm that is too small is a frequent cause"),
    "invalid usage": ("distributed.nccl_invalid_usage", "NCCL was called incorrectly: typically two ranks on the same GPU, more ranks than GPUs, mismatched collectives, or an invalid communicator"),
    "unhandled cuda error": ("distributed.nccl_cuda_error", "a CUDA call inside NCCL failed: often an earlier failure on that GPU, out-of-memory, a driver/CUDA mismatch, or GPUs that cannot use peer-to-peer access in this machine or container"),
    "internal error": ("distributed.nccl_internal_error", "NCCL hit an internal error; in practice often a network/transport problem (some NCCL versions report every network failure this way) or version mismatches between ranks"),
    "remote process exited or there was a network error": ("distributed.nccl_remote_error", "a peer rank died (look for its own error) or the network between nodes failed"),
}
_NCCL_CODES = {"ncclSystemError": "unhandled system error", "ncclInvalidUsage": "invalid usage", "ncclUnhandledCudaError": "unhandled cuda error",
               "ncclInternalError": "internal error", "ncclRemoteError": "remote process exited or there was a network error",
               "1": "unhandled cuda error", "2": "unhandled system error", "3": "internal error", "5": "invalid usage", "6": "remote process exited or there was a network error"}


@rule(
    'distributed.nccl_error',
    category='nccl_error',
    docs=("nccl-errors", "process-group-init", "nccl-timeout"),
    reads=("RuntimeError", "text"),
    priority=28,
    outcomes=('distributed.nccl_system_error', 'distributed.nccl_invalid_usage', 'distributed.nccl_cuda_error', 'distributed.nccl_internal_error',
              'distributed.nccl_remote_error', 'distributed.nccl_aborted', 'distributed.peer_closed', 'distributed.nccl_unique_id',
              'distributed.duplicate_gpu', 'distributed.nccl_cpu_tensor'),
    examples=(
        Example('realworld/dev/imgproc-old-nccl-unhandled-system-518', 'distributed.nccl_system_error'),
        Example('corpus/distributed/nccl_invalid_usage_async_ops.txt', 'distributed.nccl_invalid_usage'),
        Example('corpus/distributed/nccl_error_5_invalid_usage.txt', 'distributed.nccl_invalid_usage'),
        Example('realworld/dev/bevheight-old-unhandled-cuda-docker', 'distributed.nccl_cuda_error'),
        Example('realworld/dev/nccl1410-unhandled-cuda-invalid-argument-rank', 'distributed.nccl_cuda_error'),
        Example('corpus/distributed/nccl_internal_error_last_error.txt', 'distributed.nccl_internal_error'),
        Example('corpus/distributed/nccl_internal_error_old.txt', 'distributed.nccl_internal_error'),
        Example('realworld/dev/nccl-comminit-internal-error-topo-xml', 'distributed.nccl_internal_error'),
        Example('corpus/distributed/nccl_short_internal_error_infiniband.txt', 'distributed.nccl_internal_error'),
        Example('corpus/distributed/nccl_comminit_internal_error_kuberay.txt', 'distributed.nccl_internal_error'),
        Example('corpus/distributed/nccl_remote_error_connection_reset.txt', 'distributed.nccl_remote_error'),
        Example('corpus/distributed/nccl_remote_error_plain.txt', 'distributed.nccl_remote_error'),
        Example('corpus/distributed/nccl_communicator_aborted_title.txt', 'distributed.nccl_aborted'),
        Example('corpus/distributed/gloo_peer_closed_uneven_steps_2_13.txt', 'distributed.peer_closed'),
        Example('corpus/distributed/nccl_unique_id_wait_timeout.txt', 'distributed.nccl_unique_id'),
        Example('corpus/distributed/nccl_unique_id_socket_timeout.txt', 'distributed.nccl_unique_id'),
        Example('corpus/distributed/nccl_unique_id_key_timeout_title.txt', 'distributed.nccl_unique_id'),
        Example('captured/multi_gpu/nccl-duplicate-gpu-no-set-device', 'distributed.duplicate_gpu'),
        Example('realworld/dev/verl-duplicate-gpu-ray-version', 'distributed.duplicate_gpu'),
        Example('corpus/distributed/nccl_cpu_tensor_all_reduce.txt', 'distributed.nccl_cpu_tensor'),
    ),
)
def nccl_error(ctx: Context) -> RuleHit | None:
    """``NCCL error in: ...`` with its reason, duplicate GPUs, CPU tensors and aborted communicators."""
    docs = ("nccl-errors", "process-group-init", "nccl-timeout")
    raw = ctx.failure.text or ctx.text
    if re.search(r"Address already in use|EADDRINUSE", raw):
        return None  # the rendezvous port was taken first: the NCCL error that follows is its consequence (process_group answers)
    dup = ctx.search(r"Duplicate GPU detected ?: rank (\d+) and rank (\d+) both on CUDA device (\w+)")
    if dup or (ctx.search(r"invalid usage") and re.search(r"Duplicate GPU detected", raw)):
        return _duplicate_gpu(ctx, dup, raw, docs)
    uid = ctx.search(r"\[(\d+)\] is setting up NCCL communicator and retr(?:ie|ei)ving ncclUniqueId from \[(\d+)\][^\n]*got (?:error|exception): ([^\n]+)")
    if uid:
        return _unique_id(ctx, uid, docs)
    if ctx.search(r"Tensors must be CUDA and dense"):
        cause = "The NCCL backend only works on CUDA tensors, but a CPU (or sparse) tensor was passed to a collective."
        fixes = [remedy("nccl-errors#collective-tensor-on-gpu")]
        return hit("distributed.nccl_cpu_tensor", "nccl_error", "CPU tensor passed to an NCCL collective", cause, fixes, docs, [error_fact(ctx)], 0.93,
                   facts=Facts(devices=("cpu",)))
    m = ctx.search(r"NCCL error in: ([^\n,]{1,500}), ([a-z][a-z ]{0,80}[a-z])(?: - [^,\n]*| \(run with [^)\n]*\))*(?:, NCCL version ([\w.]+))?(?=[\s,.\"]|$)")
    code = ctx.search(r"\b(ncclSystemError|ncclInvalidUsage|ncclUnhandledCudaError|ncclInternalError|ncclRemoteError)\b|NCCL Error (\d)\b")
    reason = m.group(2).strip() if m and m.group(2).strip() in _NCCL_KINDS else None
    if reason is None and code:
        reason = _NCCL_CODES.get(code.group(1) or code.group(2))
    if reason is None:
        # Short form printed by other launchers and by NCCL's own checks: "ncclCommInitRank failed with error: NCCL error: internal error".
        short = ctx.search(r"NCCL error:\s*([a-z][a-z ]*[a-z])")
        if short and short.group(1).strip() in _NCCL_KINDS:
            reason = short.group(1).strip()
    if reason is None:
        if ctx.search(r"NCCL communicator was aborted"):
            return _aborted(ctx, docs)
        if ctx.search(r"(?<![^\n])(?>[^\n]*?gloo)[^\n]*(?:Connection closed by peer|Connection reset by peer)|Connection closed by peer[^\n]*remote worker"):
            return _peer_closed(ctx, docs)
        return None
    outcome, story = _NCCL_KINDS[reason]
    found = [error_fact(ctx), Fact("nccl", f"NCCL reason: {reason}" + (f" (NCCL {m.group(3)})" if m and m.group(3) else ""))]
    cause = f"NCCL failed with '{reason}': {story}."
    last = ctx.search(r"Last error:\s*\n?\s*(?:\[rank\d+\]: )?(?:\([^)]*\) ERROR [^\]]*\] )?([^\n]+)")
    if last:
        found.append(Fact("nccl", f"last NCCL error: {last.group(1).strip()[:200]}"))
        cause += f" NCCL's last error says: {last.group(1).strip()[:200]}."
    for line in ctx.failure.nccl_lines[:3]:
        if "WARN" in line:
            found.append(Fact("nccl", line[:200]))
    first = " ".join(n for n in ctx.failure.notes if "failed first" in n)
    if first:
        cause += " " + first
    fixes = [
        remedy("nccl-errors#nccl-debug-info"),
        remedy("nccl-errors#one-gpu-per-rank"),
        remedy("nccl-errors#container-shm-size"),
        remedy("nccl-errors#isolate-transport"),
    ]
    if outcome in ("distributed.nccl_cuda_error", "distributed.nccl_internal_error", "distributed.nccl_system_error"):
        fixes.append(remedy("nccl-errors#single-gpu-comparison"))
        fixes.append(remedy("nccl-errors#check-versions"))
    if outcome == "distributed.nccl_system_error":
        # A system error with nothing else to go on: settings preset by the machine image (nccl.conf, NCCL_* variables) are a common source.
        fixes.append(remedy("nccl-errors#unset-preset-nccl-settings"))
    init = ctx.search(r"ncclCommInit\w*|commInit")
    if init and outcome in ("distributed.nccl_internal_error", "distributed.nccl_system_error"):
        found.append(Fact("nccl", f"failed while creating the communicator ({init.group(0)})"))
        cause += (" It failed while the communicator was being created, when NCCL detects the machine's topology (GPUs, PCIe/NVLink, "
                  "network cards): a topology file it cannot parse (NCCL_TOPO_FILE, or one a cloud network plugin installs) or a container "
                  "that hides /sys from it makes this step fail.")
        fixes.insert(1, remedy("nccl-errors#check-topology-detection"))
    if outcome == "distributed.nccl_remote_error":
        fixes.insert(0, remedy("nccl-errors#find-first-dead-rank"))
    # The job pins NCCL to a named interface (an `NCCL_SOCKET_IFNAME=<name>` setting in the text) and the connection between
    # ranks failed: whether that interface carries the address the nodes reach each other on comes first.
    pinned = re.search(r"\bNCCL_SOCKET_IFNAME\s*=\s*[\"']?([A-Za-z][\w.:-]*)", raw)
    if pinned and outcome in ("distributed.nccl_remote_error", "distributed.nccl_system_error", "distributed.nccl_internal_error"):
        found.append(Fact("environment", f"NCCL_SOCKET_IFNAME={pinned.group(1)}"))
        cause += (f" The job pins NCCL to the interface `{pinned.group(1)}`: when that interface is not the one holding the address the "
                  "nodes reach each other on (or is named differently on another node), the connection between ranks fails this way.")
        fixes.insert(0, remedy("nccl-network-config#verify-pinned-interface"))
    elif outcome == "distributed.nccl_invalid_usage":
        fixes.insert(0, fixes.pop(1))
    ver = m.group(3) if m and m.group(3) else None
    return hit(outcome, "nccl_error", f"NCCL error: {reason}", cause, fixes, docs, found, 0.88,
               facts=Facts(names=tuple(n for n in (reason, ver and f"NCCL {ver}") if n)))


def _duplicate_gpu(ctx: Context, dup: re.Match[str] | None, raw: str, docs: tuple[str, ...]) -> RuleHit:
    m = dup or re.search(r"Duplicate GPU detected ?: rank (\d+) and rank (\d+) both on CUDA device (\w+)", raw)
    r0, r1, dev = m.groups() if m else ("?", "?", "?")
    cause = (f"Ranks {r0} and {r1} both use CUDA device {dev}. Each process must select its own GPU before creating NCCL communicators; "
             "without torch.cuda.set_device(local_rank) (or with more ranks than visible GPUs) several processes end up on the same device.")
    fixes = [remedy("nccl-errors#select-gpu-from-local-rank")]
    return hit("distributed.duplicate_gpu", "nccl_error", "Two ranks on the same GPU", cause, fixes, docs,
               [error_fact(ctx), Fact("ranks", f"ranks {r0} and {r1} on device {dev}")], 0.95,
               facts=Facts(names=(f"rank {r0}", f"rank {r1}"), devices=(f"cuda:{dev}",) if dev.isdigit() else ()))


def _unique_id(ctx: Context, m: re.Match[str], docs: tuple[str, ...]) -> RuleHit:
    """A rank waited for another rank to publish the NCCL id of a new communicator."""
    waiting, owner, why = m.group(1), m.group(2), m.group(3).strip()
    cause = (f"Rank {waiting} was creating an NCCL communicator and waited for rank {owner} to publish its ID in the rendezvous store, but it "
             f"never came ({why[:120]}). Communicators are created lazily at the first collective on each group, so rank {owner} did not reach "
             "that collective in time: it crashed or hung before it (look at its own log), took a code path without that collective "
             "(rank-conditional code, a different number of steps), was much slower (loading data or a model), or the ranks cannot reach "
             "each other's network address.")
    fixes = [
        remedy("nccl-timeout#read-owner-rank-log", rank=owner),
        remedy("nccl-timeout#every-rank-same-collectives"),
        remedy("process-group-init#eager-communicator-init"),
        *_debug_fixes(),
    ]
    return hit("distributed.nccl_unique_id", "nccl_error", f"Rank {waiting} waited for rank {owner} to set up NCCL", cause, fixes, docs,
               [error_fact(ctx), Fact("ranks", f"rank {waiting} waited for rank {owner}: {why[:160]}")], 0.88,
               facts=Facts(names=(f"rank {waiting}", f"rank {owner}")))


def _aborted(ctx: Context, docs: tuple[str, ...]) -> RuleHit:
    cause = ("The NCCL communicator was aborted: PyTorch tears communicators down after a collective failed or timed out on some rank, so every "
             "later collective reports this. It is a consequence, not the cause — the original failure (a watchdog timeout, an NCCL error or a "
             "crash on one rank) is printed earlier in the log, possibly by another rank.")
    fixes = [
        remedy("nccl-timeout#find-first-failure"),
        *_debug_fixes(),
    ]
    return hit("distributed.nccl_aborted", "nccl_error", "NCCL communicator aborted after an earlier failure", cause, fixes, docs, [error_fact(ctx)], 0.8)


def _peer_closed(ctx: Context, docs: tuple[str, ...]) -> RuleHit:
    """Gloo lost the connection to another rank in the middle of a collective."""
    cause = ("The collective failed because another rank closed its connection: that rank exited or crashed while this one was still "
             "communicating. Either it hit its own error (look for its traceback earlier in the log), or it finished normally because it ran "
             "fewer steps or collectives than this rank (uneven data per rank, an early exit or a rank-conditional loop), leaving this rank's "
             "collective with no partner.")
    fixes = [
        remedy("nccl-timeout#why-peer-stopped"),
        remedy("nccl-timeout#same-steps-and-collectives"),
        *_debug_fixes(),
    ]
    return hit("distributed.peer_closed", "nccl_error", "A peer rank closed the connection during a collective", cause, fixes, docs, [error_fact(ctx)], 0.8)


@rule(
    'distributed.ddp_error',
    category='ddp_error',
    docs=("ddp-unused-parameters", "process-group-init"),
    reads=("RuntimeError", "ValueError", "AssertionError", "text"),
    priority=27,
    outcomes=('distributed.ddp_unused', 'distributed.ddp_ready_twice', 'distributed.ddp_model_mismatch', 'distributed.ddp_no_params', 'distributed.ddp_device',
              'distributed.ddp_multi_device_module'),
    examples=(
        Example('captured/multi_gpu/ddp-unused-parameters-aux-head', 'distributed.ddp_unused'),
        Example('realworld/dev/medsegdiff-ddp-unused-params-old', 'distributed.ddp_unused'),
        Example('realworld/dev/mmdet3d-parta2-ddp-unused', 'distributed.ddp_unused'),
        Example('corpus/distributed/ddp_unused_aux_head_gloo_2_13.txt', 'distributed.ddp_unused'),
        Example('realworld/dev/alpacalora4bit-ddp-mark-ready-progressbar', 'distributed.ddp_ready_twice'),
        Example('realworld/dev/ibot-ddp-mark-ready-checkpoint-interleaved', 'distributed.ddp_ready_twice'),
        Example('captured/multi_gpu/ddp-model-mismatch-per-rank-vocab', 'distributed.ddp_model_mismatch'),
        Example('corpus/distributed/ddp_model_mismatch_zero_params.txt', 'distributed.ddp_model_mismatch'),
        Example('corpus/distributed/ddp_model_mismatch_params_count.txt', 'distributed.ddp_model_mismatch'),
        Example('corpus/distributed/ddp_model_mismatch_depth_gloo_2_13.txt', 'distributed.ddp_model_mismatch'),
        Example('corpus/distributed/ddp_no_trainable_params.txt', 'distributed.ddp_no_params'),
        Example('corpus/distributed/ddp_no_trainable_params_assertion.txt', 'distributed.ddp_no_params'),
        Example('corpus/distributed/ddp_no_params_gloo_2_13.txt', 'distributed.ddp_no_params'),
        Example('corpus/distributed/ddp_device_ids_cpu_module.txt', 'distributed.ddp_device'),
        Example('corpus/distributed/ddp_device_ids_cpu_module_rank7.txt', 'distributed.ddp_device'),
        Example('corpus/distributed/ddp_device_ids_multi_gpu_module.txt', 'distributed.ddp_multi_device_module'),
        Example('corpus/distributed/ddp_device_ids_multi_gpu_module_three.txt', 'distributed.ddp_multi_device_module'),
    ),
)
def ddp_error(ctx: Context) -> RuleHit | None:
    """DistributedDataParallel misuse: unused parameters, mark-ready-twice, models that differ by rank, wrong devices."""
    docs = ("ddp-unused-parameters", "process-group-init")
    if ctx.search(r"Expected to have finished reduction in the prior iteration before starting a new one"):
        return _ddp_unused(ctx, docs)
    if ctx.search(r"Expected to mark a variable ready only once"):
        cause = ("A parameter's gradient hook fired twice in one backward under DDP. This happens with reentrant activation checkpointing, a module used twice "
                 "in one forward (weight sharing across calls), parameters used outside forward, or multiple forward passes before one backward.")
        fixes = [
            remedy("ddp-unused-parameters#non-reentrant-checkpoint"),
            remedy("ddp-unused-parameters#static-graph"),
        ]
        return hit("distributed.ddp_ready_twice", "ddp_error", "DDP: variable marked ready twice", cause, fixes, docs, [error_fact(ctx)], 0.93)
    m = ctx.search(r"DDP expects same model across all ranks, but Rank (\d+) has (\d+) params, while rank (\d+) has inconsistent (\d+) params")
    m2 = ctx.search(r"appears not to match (?:strides|sizes) of the same param in process 0|params\[\d+\] in this process with sizes \[([\d, ]*)\] appears not to match sizes of the same param in process 0")
    if m or m2:
        return _ddp_model_mismatch(ctx, m, docs)
    if ctx.search(r"DistributedDataParallel is not needed when a module doesn't have any parameter that requires a gradient"):
        cause = ("The module wrapped in DDP has no parameter with requires_grad=True: it is fully frozen (a feature extractor, a teacher, a loss network, "
                 "or a model whose trainable adapters were not enabled), or its layers are not registered as submodules.")
        fixes = [remedy("ddp-unused-parameters#wrap-only-trainable")]
        return hit("distributed.ddp_no_params", "ddp_error", "DDP around a module without trainable parameters", cause, fixes, docs, [error_fact(ctx)], 0.9)
    m = ctx.search(r"DistributedDataParallel device_ids and output_device arguments only work with single-device/multiple-device GPU modules or CPU modules, but got device_ids \[([^\]]*)\],\s*output_device (\S+),\s*and\s+module\s+parameters\s+\{([^}]*)\}")
    if m:
        devices = tuple(dict.fromkeys(f"cuda:{i}" if t == "cuda" else t for t, i in re.findall(r"device\(type='(\w+)'(?:, index=(\d+))?\)", m.group(3))))
        found = [error_fact(ctx), Fact("devices", f"device_ids [{m.group(1)}], module parameters on {', '.join(devices)}")]
        if len(devices) > 1:
            cause = (f"The module's parameters are spread over several devices ({', '.join(devices)}) — the model is split across GPUs (model "
                     f"parallelism, or a loader's automatic device map) — but DDP was also given device_ids [{m.group(1)}]. A multi-device module "
                     "cannot take device_ids; and each DDP rank should normally hold a whole copy of the model on its own GPU.")
            fixes = [remedy("process-group-init#whole-model-per-rank"),
                     remedy("process-group-init#split-model-no-device-ids")]
            return hit("distributed.ddp_multi_device_module", "ddp_error", "DDP given device_ids for a model split across GPUs", cause, fixes, docs[::-1], found, 0.9,
                       facts=Facts(devices=devices))
        cause = f"DDP was given device_ids [{m.group(1)}] but the module's parameters are on {', '.join(devices) or m.group(3)}: the model was not moved to its GPU before wrapping."
        fixes = [remedy("process-group-init#move-model-then-wrap")]
        return hit("distributed.ddp_device", "ddp_error", "DDP model not on its device", cause, fixes, docs[::-1], found, 0.92, facts=Facts(devices=devices))
    # Older releases: "... only work with single-device CUDA modules, but got device_ids [1], output_device None, and module parameters {...}",
    # often quoted without the parameters' devices.
    m = ctx.search(r"DistributedDataParallel device_ids and output_device arguments only work with single-device (?:CUDA|GPU) modules, but got device_ids \[?([\w, ]*)\]?")
    if m:
        found = [error_fact(ctx), Fact("devices", f"device_ids [{m.group(1).strip()}]")]
        cause = (f"DDP was given device_ids [{m.group(1).strip()}], which works only for a module whose parameters are all on that one GPU: the model "
                 "was still on the CPU when it was wrapped (the move to the GPU was skipped or came after the wrapping), or it is split across GPUs.")
        fixes = [remedy("process-group-init#move-model-then-wrap"),
                 remedy("process-group-init#whole-model-per-rank")]
        return hit("distributed.ddp_device", "ddp_error", "DDP model not on its device", cause, fixes, docs[::-1], found, 0.85)
    return None


def _ddp_unused(ctx: Context, docs: tuple[str, ...]) -> RuleHit:
    idx = ctx.search(r"Parameter indices which did not receive grad for rank (\d+): ([\d ]+)")
    names = ctx.search(r"Parameters which did not receive grad for rank (\d+): ([^\n]+)")
    found = [error_fact(ctx)]
    cause = ("DDP waits for a gradient from every parameter before it starts the next iteration, but some parameters received no gradient in the "
             "previous backward: they were not used to compute the loss (a branch not taken, a frozen or auxiliary head, a layer defined but unused, "
             "or outputs that do not reach the loss).")
    listed: tuple[str, ...] = ()
    if names:
        listed = tuple(n.strip() for n in names.group(2).split(",") if n.strip())[:20]
        cause += f" On rank {names.group(1)} these parameters got no gradient: {names.group(2).strip()[:300]}."
        found.append(Fact("parameters", f"no grad on rank {names.group(1)}: {names.group(2).strip()[:300]}"))
    elif idx:
        cause += f" On rank {idx.group(1)} the parameters with indices {idx.group(2).strip()} did not receive grad (run with TORCH_DISTRIBUTED_DEBUG=DETAIL to get their names)."
        found.append(Fact("parameters", f"parameter indices without grad on rank {idx.group(1)}: {idx.group(2).strip()}"))
    fixes = [
        remedy("ddp-unused-parameters#find-unused-parameters"),
        remedy("ddp-unused-parameters#use-or-freeze-parameters"),
        remedy("ddp-unused-parameters#name-unused-parameters"),
    ]
    # Every listed parameter lies in one numbered block of a stack ("...layers.7.", "...blocks.3."): a whole block was skipped
    # in this step, which is what LayerDrop / stochastic depth do (the names without a truncation "..." entry).
    blocks = {m.group(0) for n in listed if n != "..." for m in [re.search(r"\b(?:layers?|blocks?|h)\.\d+\.", n)] if m}
    stacked = [n for n in listed if n != "..."]
    if len(stacked) >= 3 and len(blocks) == 1 and all(re.search(r"\b(?:layers?|blocks?|h)\.\d+\.", n) for n in stacked):
        block = next(iter(blocks)).rstrip(".")
        cause += (f" All of them belong to one block of a stack ({block}): the whole block was skipped in this step, which is what "
                  "LayerDrop / stochastic depth do during training, so a different block can be missing at each step.")
        fixes.insert(0, remedy("ddp-unused-parameters#disable-layer-drop"))
    # The user runs the DDP script on one GPU: the wrapper only adds its unused-parameter rule there.
    if re.search(r"\b(?:a single|single|one|only one|1)[ -](?:gpu|card|graphics card)\b", ctx.failure.text or ctx.text, re.I):
        cause += " With a single GPU the distributed wrapper brings nothing, but still enforces this rule."
        fixes.insert(0, remedy("ddp-unused-parameters#train-without-ddp"))
    rank = names or idx
    return hit("distributed.ddp_unused", "ddp_error", "DDP: parameters without gradients", cause, fixes, docs, found, 0.95,
               facts=Facts(names=listed + ((f"rank {rank.group(1)}",) if rank else ())))


def _ddp_model_mismatch(ctx: Context, m: re.Match[str] | None, docs: tuple[str, ...]) -> RuleHit:
    numbers: dict[str, float] = {}
    if m:
        numbers = {"params_rank_a": float(m.group(2)), "params_rank_b": float(m.group(4))}
        cause = f"Rank {m.group(1)} built a model with {m.group(2)} parameters but rank {m.group(3)} has {m.group(4)}: the model differs between ranks."
        if "0" in (m.group(2), m.group(4)):
            cause += (" One rank has no trainable parameters at all: on that rank the model was built or loaded differently (e.g. adapters or "
                      "trainable parts were not created or enabled there, or the rank took another code path).")
    else:
        cause = "A parameter has different sizes on different ranks: the model is constructed differently per rank."
    cause += (" Models must be identical on all ranks before wrapping in DDP; rank-dependent configuration (e.g. a vocabulary or number of classes computed "
              "from each rank's own data shard), randomness in architecture choices, or loading different checkpoints cause this.")
    fixes = [remedy("ddp-unused-parameters#identical-model-every-rank")]
    return hit("distributed.ddp_model_mismatch", "ddp_error", "DDP: model differs across ranks", cause, fixes, docs, [error_fact(ctx)], 0.93,
               facts=Facts(numbers=numbers))


@rule(
    'distributed.process_group',
    category='ddp_error',
    docs=("process-group-init", "nccl-errors"),
    reads=("RuntimeError", "ValueError", "text"),
    priority=29,
    also=('cpu_oom', 'nccl_error'),
    outcomes=('distributed.pg_uninitialized', 'distributed.pg_env', 'distributed.port_in_use', 'distributed.nccl_no_gpu', 'distributed.nccl_not_built',
              'distributed.rendezvous', 'distributed.child_failed', 'distributed.child_killed', 'distributed.store_without_libuv'),
    examples=(
        Example('realworld/dev/yolof-default-pg-single-gpu', 'distributed.pg_uninitialized'),
        Example('corpus/distributed/pg_uninitialized_all_reduce_2_13.txt', 'distributed.pg_uninitialized'),
        Example('corpus/distributed/pg_env_rank_not_set_2_13.txt', 'distributed.pg_env'),
        Example('corpus/distributed/pg_env_world_size_not_set.txt', 'distributed.pg_env'),
        Example('corpus/distributed/pg_env_rank_not_set_windows.txt', 'distributed.pg_env'),
        Example('corpus/distributed/port_in_use_29500.txt', 'distributed.port_in_use'),
        Example('corpus/distributed/port_in_use_disterror.txt', 'distributed.port_in_use'),
        Example('corpus/distributed/port_in_use_tcpstore_2_13.txt', 'distributed.port_in_use'),
        Example('corpus/distributed/nccl_no_gpu_found.txt', 'distributed.nccl_no_gpu'),
        Example('corpus/distributed/nccl_no_gpu_found_wsl.txt', 'distributed.nccl_no_gpu'),
        Example('corpus/distributed/nccl_not_built_cpu_wheel_2_13.txt', 'distributed.nccl_not_built'),
        Example('corpus/distributed/rendezvous_store_timeout_clients.txt', 'distributed.rendezvous'),
        Example('corpus/distributed/rendezvous_store_wait_timeout.txt', 'distributed.rendezvous'),
        Example('corpus/distributed/rendezvous_store_timeout_2_13.txt', 'distributed.rendezvous'),
        Example('corpus/distributed/rendezvous_client_socket_timeout_title.txt', 'distributed.rendezvous'),
        Example('realworld/dev/minigpt4-torchrun-childfailed-summary', 'distributed.child_failed'),
        Example('corpus/distributed/torchrun_sigkill_rank7.txt', 'distributed.child_killed'),
        Example('corpus/distributed/torchrun_sigkill_loading_checkpoint.txt', 'distributed.child_killed'),
        Example('corpus/distributed/torchrun_sigkill_2_13.txt', 'distributed.child_killed'),
        Example('corpus/distributed/store_without_libuv_windows_accelerate.txt', 'distributed.store_without_libuv'),
    ),
)
def process_group(ctx: Context) -> RuleHit | None:
    """init_process_group problems and torchrun's ChildFailedError summaries."""
    docs = ("process-group-init", "nccl-errors")
    if ctx.search(r"Default process group has not been initialized"):
        cause = "A torch.distributed call (or DDP/DistributedSampler/SyncBatchNorm) ran before dist.init_process_group(), or in a process launched without it (plain `python` instead of torchrun)."
        fixes = [remedy("process-group-init#init-process-group-first")]
        return hit("distributed.pg_uninitialized", "ddp_error", "Process group not initialised", cause, fixes, docs, [error_fact(ctx)], 0.93)
    m = ctx.search(r"environment variable (\w+) expected, but not set")
    if m:
        cause = (f"init_process_group uses the env:// method, which reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT from the environment; "
                 f"{m.group(1)} is unset because the script was not started by a launcher (torchrun) that sets them.")
        fixes = [remedy("process-group-init#launch-with-torchrun")]
        return hit("distributed.pg_env", "ddp_error", f"{m.group(1)} not set for init_process_group", cause, fixes, docs, [error_fact(ctx)], 0.93,
                   facts=Facts(names=(m.group(1),)))
    if ctx.search(r"Address already in use|EADDRINUSE|server socket has failed to (?:listen|bind)"):
        port = ctx.search(r"port[: ]+(\d{2,5})|:(\d{4,5})\b")
        number = (port.group(1) or port.group(2)) if port else None
        cause = "The rendezvous port (MASTER_PORT" + (f", {number}" if number else "") + ") is already taken, usually by another job or a previous run that has not exited."
        if ctx.search(r"NCCL error|ncclSystemError|unhandled system error"):
            cause += " The NCCL error reported with it follows from the failed rendezvous; it is not a network or transport problem of its own."
        fixes = [remedy("process-group-init#free-master-port")]
        # The user set another port (MASTER_PORT, --master_port) and the error still names this one: the port is assigned elsewhere.
        tried = {p for p in re.findall(r"(?:MASTER_PORT|master_port|main_process_port|\bports?\b)\D{0,40}?\b(\d{4,5})\b", ctx.text) if p != number}
        if number and tried:
            cause = (f"The error names port {number} although a different port ({', '.join(sorted(tried))}) was set: the port the processes use is assigned "
                     "after your setting, by the script or a library it launches through (an assignment to MASTER_PORT, an init_method URL, a default), "
                     "and that port is taken.")
            fixes = [remedy("process-group-init#find-port-set-in-code"), *fixes]
        return hit("distributed.port_in_use", "ddp_error", "Rendezvous port already in use", cause, fixes, docs, [error_fact(ctx)], 0.9,
                   facts=Facts(numbers={"port": float(number)} if number else {}))
    if ctx.search(r"ProcessGroupNCCL is only supported with GPUs, no GPUs found"):
        cause = ("The NCCL backend needs GPUs, but this process sees none: CUDA is not available to it (a CPU-only PyTorch build, a driver/CUDA "
                 "mismatch, CUDA_VISIBLE_DEVICES set to nothing, or a container/WSL setup without GPU access).")
        fixes = [remedy("process-group-init#gpus-visible-or-gloo")]
        return hit("distributed.nccl_no_gpu", "ddp_error", "NCCL backend without GPUs", cause, fixes, docs, [error_fact(ctx)], 0.9)
    if ctx.search(r"Distributed package doesn't have NCCL built in"):
        cause = ("This PyTorch build has no NCCL: it is a CPU-only wheel, or a platform build (Windows, macOS) that ships without it, so the "
                 "'nccl' backend cannot be created.")
        fixes = [remedy("process-group-init#gloo-or-cuda-build")]
        return hit("distributed.nccl_not_built", "nccl_error", "PyTorch build without NCCL", cause, fixes, docs, [error_fact(ctx)], 0.9)
    if ctx.search(r"use_libuv was requested but PyTorch was buil[dt] without libuv support"):
        cause = ("The launcher's rendezvous store (TCPStore) asked for its libuv backend, the default since torch 2.4, and this build "
                 "(Windows builds, some source builds) has none; the store is created by the launcher before the script's own settings apply.")
        fixes = [remedy("process-group-init#libuv-off-for-launcher"), remedy("process-group-init#single-process-launch")]
        if ctx.search(r"(?i)\baccelerate\b|single[- ]gpu|\bone gpu|\b1 gpu"):
            fixes.reverse()  # one GPU (or accelerate's multi-process config on one): no distributed launch is needed at all
        return hit("distributed.store_without_libuv", "ddp_error", "Rendezvous store needs libuv, which this build lacks", cause, fixes, docs,
                   [error_fact(ctx)], 0.9)
    if ctx.search(r"DistStoreError|Timed out after \d+ seconds waiting for (?:clients|workers)|RendezvousTimeoutError|wait timeout after \d+ms"
                  r"|client socket has timed out after \d+ms while trying to connect|client socket has failed to connect"):
        joined = ctx.search(r"(?<!\d)(\d+)/(\d+) (?:clients|workers) joined")
        cause = ("Rendezvous timed out: not all ranks connected to the store (MASTER_ADDR:MASTER_PORT)"
                 + (f" — only {joined.group(1)} of {joined.group(2)} processes joined" if joined else "")
                 + ". Some ranks failed to start or crashed early, wait on a different address/port, or cannot reach it (firewall, wrong interface).")
        fixes = [remedy("process-group-init#check-rendezvous-address")]
        return hit("distributed.rendezvous", "ddp_error", "Rendezvous timed out", cause, fixes, docs, [error_fact(ctx)], 0.88,
                   facts=Facts(numbers={"joined": float(joined.group(1)), "expected": float(joined.group(2))} if joined else {}))
    if ctx.exc_type == "ChildFailedError" or ctx.search(r"ChildFailedError|elastic\.multiprocessing\.api:failed \(exitcode"):
        return _child_failed(ctx, docs)
    return None


_CRASH_SIGNALS = frozenset({"SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT"})


def _child_failed(ctx: Context, docs: tuple[str, ...]) -> RuleHit | None:
    """torchrun's summary: a SIGKILL (host OOM) or any other worker failure (a crash signal is left to the signal rules)."""
    raw = ctx.failure.text or ctx.text
    # The summary's "Root Cause" entry names the first failure; other entries are ranks stopped after it.
    root = raw[raw.find("Root Cause"):] if "Root Cause" in raw else raw
    rank = re.search(r"rank\s*:\s*(\d+) \(local_rank: (\d+)\)|local_rank: (\d+) \(pid", root) or re.search(r"rank\s*:\s*(\d+) \(local_rank: (\d+)\)|local_rank: (\d+) \(pid", raw)
    code = re.search(r"exitcode\s*:\s*(-?\d+)", root) or re.search(r"exitcode\s*:\s*(-?\d+)", raw)
    sig = re.search(r"Signal (\d+) \((SIG\w+)\)", root) or re.search(r"Signal (\d+) \((SIG\w+)\)", raw)
    if sig and sig.group(2) in _CRASH_SIGNALS:
        return None  # a worker that crashed (segfault, abort, bus error): the signal is the story, not torchrun's summary
    found = [error_fact(ctx)]
    rank_no = (rank.group(1) or rank.group(3)) if rank else None
    exit_code = int(code.group(1)) if code else None
    if rank_no is not None:
        found.append(Fact("rank", f"first failure: rank {rank_no}" + (f", exit code {exit_code}" if exit_code is not None else "")))
    numbers = {k: float(v) for k, v in (("rank", rank_no), ("exit_code", exit_code)) if v is not None}
    if exit_code in (-9, 137) or (sig and sig.group(2) == "SIGKILL"):
        cause = ("torchrun reports that a worker was killed with SIGKILL (exit code -9) and printed no Python traceback. That is almost always the Linux "
                 "OOM killer: host RAM (or the container's memory limit) ran out — every rank loading the full dataset or checkpoint into RAM at "
                 "once, many DataLoader workers per rank, or memory that grows each step.")
        fixes = [remedy("cpu-oom#check-host-memory-dmesg")]
        return hit("distributed.child_killed", "cpu_oom", "Worker killed (host out of memory)", cause, fixes, ("cpu-oom", "process-group-init"), found, 0.75,
                   facts=Facts(numbers=numbers, flags=frozenset({"host_memory"})))
    cause = ("torchrun only summarises that a worker process failed" + (f" (rank {rank_no}, exit code {exit_code})" if rank_no is not None and exit_code is not None else "")
             + ". The real error is that rank's own traceback, printed earlier in the log (lines prefixed with [rank N]:) or in its error file; the summary alone does not say what went wrong.")
    fixes = [remedy("process-group-init#read-failing-rank-traceback")]
    return hit("distributed.child_failed", "ddp_error", "torchrun worker failed", cause, fixes, docs, found, 0.6, facts=Facts(numbers=numbers))


# A description of checkpoint keys that carry the `module.` prefix DataParallel / DDP add ("unexpected key(s) "module.xxx"",
# "every layer name has module. prepended", "saved state_dict has prefix module.").
_MODULE_PREFIX = lazy_re(r"[\"'`]module\.[\w.]*[\"'`]?|\bmodule\.\s*(?:prefix|prepended)|prefix(?:ed)?\s+(?:with\s+|of\s+)?[\"'`]?module\b"
                         r"|[\"'`]module[\"'`]\s+prefix|\bmodule\.\w+\.\w+", re.IGNORECASE)
_LOADING_WORDS = lazy_re(r"state_dict|load_state_dict|checkpoint|pretrained|weights?\b|\bkeys?\b|\bkey\(s\)|\.pth\b|\bloaded\b|\bloading\b|\bload\b", re.IGNORECASE)


@rule(
    'distributed.wrapper_prefix_described',
    category='state_dict_loading',
    docs=("state-dict-keys",),
    reads=("text",),
    priority=84,
    outcomes=('distributed.wrapper_prefix_described',),
    examples=(
        Example('corpus/distributed/state_dict_module_prefix_prose_posenet.txt', 'distributed.wrapper_prefix_described'),
        Example('corpus/distributed/state_dict_module_prefix_prose_reload.txt', 'distributed.wrapper_prefix_described'),
    ),
)
def wrapper_prefix_described(ctx: Context) -> RuleHit | None:
    """A report in words of checkpoint keys with a `module.` prefix: weights saved from a DataParallel/DDP-wrapped model."""
    if ctx.failure.exc_type or ctx.failure.frames:
        return None  # a pasted load_state_dict error is read by the state_dict rule, key by key
    text = ctx.text
    prefix = _MODULE_PREFIX.search(text)
    if not prefix or not _LOADING_WORDS.search(text):
        return None
    wrapped = re.search(r"\b(?:DataParallel|DistributedDataParallel|DDP|multi[- ]?gpus?|multiple gpus|several gpus)\b", text, re.IGNORECASE)
    cause = ("The checkpoint's keys carry the `module.` prefix that nn.DataParallel and DistributedDataParallel add: the weights were saved "
             "from the wrapped model (`model.state_dict()` of the wrapper), and they are loaded into the plain model, whose keys have no prefix "
             "(or the reverse: the loading code wraps the model only on some machines, for example only when several GPUs are present).")
    found = [Fact("text", f"the report mentions the prefix: “{prefix.group(0).strip()}”")]
    if wrapped:
        found.append(Fact("context", f"the report mentions “{wrapped.group(0)}”"))
    fixes = [remedy("state-dict-keys#strip-prefix-before-loading", prefix="module."), remedy("state-dict-keys#save-unwrapped-module")]
    return hit("distributed.wrapper_prefix_described", "state_dict_loading", "Checkpoint keys carry the DataParallel/DDP `module.` prefix", cause, fixes,
               ("state-dict-keys",), found, 0.8, facts=Facts(names=("module.",)))
