"""Log shapes of the v2 triage corpus: how launchers, schedulers and ranks lay a scenario into files.

A job is built in two steps. :func:`rank_streams` turns a scenario into timed lines per rank
(startup, progress, the failure on the first rank, what the other ranks print after it); a shape
writer (``write_*``) then lays those lines out the way one launcher does: torchrun with or without
``[rankN]:`` prefixes and its ``Root Cause (first observed failure)`` block, torchrun ``--log-dir``
files per local rank, ``mp.spawn``'s ``ProcessRaisedException``, the DeepSpeed launcher (with
``pdsh`` host prefixes across nodes), PyTorch Lightning banners and progress bars, Slurm array
tasks, Kubernetes pods (``kubectl logs --timestamps``, per-pod clock skew).

Everything here is written from the launchers' documented and observed output formats; nothing
reads the project's rules or engine.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from assistant.eval.triage_v2.families import Ctx, Family, Site

# ------------------------------------------------------------------------------------------------
# Timestamps (all UTC)
# ------------------------------------------------------------------------------------------------


def ts_log(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"


def ts_iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond:06d}000Z"


def ts_glog(t: datetime, level: str = "I") -> str:
    return f"{level}{t.strftime('%m%d %H:%M:%S')}.{t.microsecond:06d}"


def ts_c10(t: datetime, level: str = "E") -> str:
    return f"{level}{t.strftime('%m%d %H:%M:%S')}.{t.microsecond:06d}{t.microsecond % 997:03d}"


def ts_date(t: datetime) -> str:
    return t.strftime("%a %b ") + f"{t.day:2d}" + t.strftime(" %H:%M:%S UTC %Y")


def ts_slurm(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S")


def ts_trun(t: datetime) -> str:
    return t.strftime("%Y-%m-%d_%H:%M:%S")


# ------------------------------------------------------------------------------------------------
# Scenario
# ------------------------------------------------------------------------------------------------


@dataclass
class Scenario:
    job_id: str
    shape: str
    kind: str  # "ok", "family", "hang_pure", "hang_desync", "sched_time_limit", "sched_preempt", "sched_node_failure", "oom_kill"
    family: Family | None
    site: Site | None
    nodes: int
    gpn: int  # GPUs (processes) per node
    first_rank: int | None
    secondary: str  # "sigterm", "watchdog", "remote", "none"
    start: datetime
    run_s: float  # seconds from start to the failure (or the end)
    mods: set[str] = field(default_factory=set)
    op: str = "ALLREDUCE"
    host_prefix: str = "gpu"
    seed: int = 0
    failure_line: str | None = None  # the first rank's exception line, set while building

    @property
    def world(self) -> int:
        return self.nodes * self.gpn


@dataclass
class Env:
    rng: random.Random
    root: str
    sp: str
    py: str
    old_torch: bool
    hosts: list[str]
    user: str
    skew: list[float]  # seconds, per node


ROOTS = ("/home/{u}/llm-ft", "/workspace/{u}/vision-pretrain", "/mnt/code/{u}/speech", "/gpfs/projects/{u}/lm", "/app")
SITES = ("/opt/conda/lib/python{py}/site-packages", "/usr/local/lib/python{py}/dist-packages", "/home/{u}/.venv/lib/python{py}/site-packages")
USERS = ("ana", "kmr", "li", "jdoe", "svc-train", "mpatel", "r2d2")


def make_env(sc: Scenario, rng: random.Random) -> Env:
    u = rng.choice(USERS)
    py = rng.choice(["3.10", "3.11", "3.12"])
    hosts = [f"{sc.host_prefix}-{rng.randint(1, 400):03d}" for _ in range(sc.nodes)]
    skew = [0.0] + [rng.uniform(-40, 40) if "skew" in sc.mods else 0.0 for _ in range(sc.nodes - 1)]
    return Env(rng, rng.choice(ROOTS).format(u=u), rng.choice(SITES).format(py=py, u=u), py, rng.random() < 0.25, hosts, u, skew)


def ctx_for(env: Env, rank: int | None, sc: Scenario, seed: int) -> Ctx:
    return Ctx(random.Random(seed), env.root, env.sp, rank, (rank or 0) % sc.gpn, env.py, env.old_torch,
               {"world": sc.world, "line_shift": 0})


# ------------------------------------------------------------------------------------------------
# Per-rank timed lines
# ------------------------------------------------------------------------------------------------

Event = tuple[datetime, int, int, str]  # (time as written, rank, sequence, line)


class Streams:
    def __init__(self, sc: Scenario, env: Env) -> None:
        self.sc, self.env = sc, env
        self.events: list[Event] = []
        self.n = 0
        self.failure_line: str | None = None

    def skewed(self, t: datetime, rank: int) -> datetime:
        return t + timedelta(seconds=self.env.skew[min(rank // self.sc.gpn, len(self.env.skew) - 1)])

    def add(self, t: datetime, rank: int, line: str) -> None:
        self.n += 1
        self.events.append((t, rank, self.n, line))

    def block(self, t: datetime, rank: int, lines: list[str]) -> None:
        for i, line in enumerate(lines):
            self.add(t + timedelta(microseconds=i), rank, line)


def _progress(sc: Scenario, env: Env, st: Streams, t0: datetime, t1: datetime, rank: int = 0, style: str = "log") -> None:
    rng = env.rng
    n = max(3, min(60, int((t1 - t0).total_seconds() / 600) + rng.randint(2, 8)))
    total = rng.choice([5000, 20000, 100000, 250000])
    loss = rng.uniform(2.5, 9.0)
    for i in range(n):
        t = t0 + (t1 - t0) * (i / n)
        step = int(total * (i + 1) / (n * 3))
        loss *= rng.uniform(0.96, 1.0)
        tw = st.skewed(t, rank)
        if style == "log":
            msg = f"{ts_log(tw)} - INFO - __main__ - step {step}/{total} | loss {loss:.4f} | lr {rng.uniform(1e-5, 6e-4):.2e} | {rng.randint(20000, 400000)} tok/s"
        else:
            msg = f"[{ts_log(tw)}] [INFO] [logging.py:128:log_dist] [Rank 0] step={step}, skipped=0, lr=[{rng.uniform(1e-5, 6e-4):.6f}], mom=[(0.9, 0.95)]"
        st.add(tw, rank, msg)
        if "noise" in sc.mods and i % 3 == 1:
            for line in known_noise(env, rank, tw, i):
                st.add(tw, rank, line)


def known_noise(env: Env, rank: int, t: datetime, i: int) -> list[str]:
    """Lines that show up in healthy runs of this team: warnings, a caught and retried upload error."""
    sp = env.sp
    k = i % 4
    if k == 0:
        return [f"[{ts_c10(t, 'W')} reducer.cpp:1400] Warning: find_unused_parameters=True was specified in DDP constructor, but did not "
                "find any unused parameters in the forward pass. This flag results in an extra traversal of the autograd graph every "
                "iteration,  which can adversely affect performance. If your model indeed never has any unused parameters in the "
                "forward pass, consider turning this flag off. Note that this warning may be a false positive if your model has flow "
                "control causing later iterations to have unused parameters. (function operator())"]
    if k == 1:
        return [f"{ts_log(t)} - WARNING - utils.upload - upload of checkpoint metadata failed, retrying in 30s",
                "Traceback (most recent call last):",
                f'  File "{env.root}/utils/upload.py", line 41, in push',
                "    resp = session.put(url, data=payload, timeout=30)",
                f'  File "{sp}/requests/adapters.py", line 682, in send',
                "    raise ConnectionError(err, request=request)",
                "requests.exceptions.ConnectionError: ('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))"]
    if k == 2:
        return [f"{sp}/torch/utils/checkpoint.py:91: UserWarning: None of the inputs have requires_grad=True. Gradients will be None",
                '  warnings.warn(']
    return [f"{env.hosts[0]}:{env.rng.randint(1000, 99999)}:{env.rng.randint(1000, 99999)} [{rank % 8}] NCCL WARN Could not find real path of /sys/class/net/ib0/device"]


def _watchdog(t: datetime, rank: int, seq: int, op: str, numel: int, timeout_ms: int, fr: bool, last_enq: int | None = None) -> list[str]:
    ran = timeout_ms + (rank * 37) % 900 + 5
    work = f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)={timeout_ms})"
    enq = seq if last_enq is None else last_enq
    lines = [f"[{ts_c10(t)} ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective operation timeout: {work} ran for {ran} milliseconds before timing out.",
             f"[{ts_c10(t)} ProcessGroupNCCL.cpp:2271] [PG ID 0 PG GUID 0(default_pg) Rank {rank}]  failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: {enq}, last completed work: {seq - 1}"]
    if fr:
        lines += [f"[{ts_c10(t)} ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Received a dump signal due to a collective timeout from this local rank and we will try our best to dump the debug info. Last enqueued NCCL work: {enq}, last completed NCCL work: {seq - 1}.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all the ranks or the scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other reasons such as network errors or bugs in the communications library (e.g. NCCL), etc. ",
                  f"[{ts_c10(t)} ProcessGroupNCCL.cpp:1385] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1",
                  f"[{ts_c10(t, 'I')} ProcessGroupNCCL.cpp:1416] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] ProcessGroupNCCL dumping nccl trace to /tmp/nccl_trace_rank_{rank}",
                  f"[{ts_c10(t, 'I')} NCCLUtils.cpp:330] Finished writing NCCLPG debug info to /tmp/nccl_trace_rank_{rank}"]
    else:
        lines.append(f"[{ts_c10(t)} ProcessGroupNCCL.cpp:670] Stack trace of the failed collective not found, potentially because FlightRecorder is disabled. You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.")
    lines += [f"[{ts_c10(t)} ProcessGroupNCCL.cpp:684] [Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
              f"[{ts_c10(t)} ProcessGroupNCCL.cpp:698] [Rank {rank}] To avoid data inconsistency, we are taking the entire process down.",
              "terminate called after throwing an instance of 'c10::DistBackendError'",
              f"  what():  [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread terminated with exception: [Rank {rank}] Watchdog caught collective operation timeout: {work} ran for {ran} milliseconds before timing out.",
              "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:635 (most recent call first):",
              "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f3c2a96c446 in /usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so)",
              "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x282 (0x7f3bd93c0772 in /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)",
              "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x7f3bd93c7bb3 in /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)",
              "", "Fatal Python error: Aborted", ""]
    return lines


def _remote(env: Env, rank: int) -> list[str]:
    sp = env.sp
    peer = f"10.{env.rng.randint(0, 9)}.{env.rng.randint(0, 255)}.{env.rng.randint(1, 254)}"
    return (["Traceback (most recent call last):",
             f'  File "{env.root}/train.py", line 236, in train_step', "    scaler.scale(loss).backward()",
             f'  File "{sp}/torch/autograd/graph.py", line 825, in _engine_run_backward',
             "    return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
             "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, remote process exited or there was a network error, NCCL version 2.21.5",
             "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
             "Last error:",
             f"NET/IB : Got completion from peer {peer}<{env.rng.randint(30000, 60000)}> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.0.0.1 remoteGids::ffff:{peer}"])


def _fail_lines(sc: Scenario, env: Env, rank: int | None) -> list[str]:
    assert sc.family is not None and sc.site is not None
    return sc.family.render(sc.site, ctx_for(env, rank, sc, sc.seed * 131 + (rank or 0)))


def rank_streams(sc: Scenario, env: Env) -> tuple[Streams, datetime]:
    """Timed lines of every rank; returns them and the time the job's processes ended."""
    rng = env.rng
    st = Streams(sc, env)
    t0 = sc.start + timedelta(seconds=rng.uniform(8, 40))
    for r in range(sc.world):
        tw = st.skewed(t0 + timedelta(seconds=r * 0.013), r)
        if r == 0:
            st.add(tw, r, f"{ts_log(tw)} - INFO - __main__ - world_size={sc.world} nodes={sc.nodes} gpus_per_node={sc.gpn} "
                          f"global_batch={rng.choice([256, 512, 1024])} seed={rng.randint(0, 9999)}")
        elif sc.world <= 16 or rng.random() < 0.2:
            st.add(tw, r, f"{ts_log(tw)} - INFO - __main__ - rank {r} ready on {env.hosts[r // sc.gpn]} cuda:{r % sc.gpn}")
    t_fail = sc.start + timedelta(seconds=sc.run_s)
    kind = sc.kind
    if kind == "family" and sc.family is not None and sc.family.all_ranks:
        t_fail = t0 + timedelta(seconds=rng.uniform(5, 120))
        for r in range(sc.world):
            st.block(st.skewed(t_fail + timedelta(seconds=rng.uniform(0, 2)), r), r, _fail_lines(sc, env, r))
        return st, t_fail + timedelta(seconds=3)
    _progress(sc, env, st, t0 + timedelta(seconds=30), t_fail, style="ds" if sc.shape == "deepspeed" else "log")
    end = t_fail + timedelta(seconds=2)
    if kind == "family":
        fr = sc.first_rank if sc.first_rank is not None else 0
        lines = _fail_lines(sc, env, sc.first_rank)
        st.failure_line = lines[-1] if lines[-1] else lines[-2]
        sc.failure_line = st.failure_line
        st.block(st.skewed(t_fail, fr), fr, lines)
        if sc.secondary == "watchdog":
            to = rng.choice([600000, 1800000, 120000])
            t_w = t_fail + timedelta(milliseconds=to + rng.randint(100, 3000))
            seq = rng.randint(2000, 400000)
            for r in range(sc.world):
                if r != fr:
                    st.block(st.skewed(t_w + timedelta(milliseconds=r * 11), r), r,
                             _watchdog(st.skewed(t_w, r), r, seq, sc.op, rng.choice([1024, 4194304, 25559040]), to, fr="fr" in sc.mods))
            end = t_w + timedelta(seconds=3)
        elif sc.secondary == "remote":
            for r in range(sc.world):
                if r != fr and rng.random() < 0.8:
                    st.block(st.skewed(t_fail + timedelta(seconds=rng.uniform(0.2, 4)), r), r, _remote(env, r))
            end = t_fail + timedelta(seconds=6)
    elif kind in ("hang_pure", "hang_desync"):
        to = rng.choice([600000, 1800000])
        seq = rng.randint(2000, 400000)
        numel = rng.choice([1, 1024, 65536, 4194304])
        t_w = t_fail + timedelta(milliseconds=to)
        lag = sc.first_rank if kind == "hang_desync" else None
        for r in range(sc.world):
            tr = t_w + timedelta(milliseconds=rng.randint(0, 900))
            enq = seq - 1 if r == lag else seq
            st.block(st.skewed(tr, r), r, _watchdog(st.skewed(tr, r), r, seq, sc.op, numel, to, fr="fr" in sc.mods, last_enq=enq))
        end = t_w + timedelta(seconds=4)
    elif kind == "oom_kill":
        end = t_fail
    return st, end


# ------------------------------------------------------------------------------------------------
# Launcher texts
# ------------------------------------------------------------------------------------------------


def slurm_preamble(env: Env, sc: Scenario, job: int, t: datetime, array: tuple[int, int] | None = None) -> list[str]:
    out = [ts_date(t), f"SLURM_JOB_ID={job}", f"SLURM_JOB_NODELIST={','.join(env.hosts)}", f"SLURM_JOB_NUM_NODES={sc.nodes}",
           f"SLURM_GPUS_ON_NODE={sc.gpn}"]
    if array:
        out += [f"SLURM_ARRAY_JOB_ID={array[0]}", f"SLURM_ARRAY_TASK_ID={array[1]}"]
    out += [f"+ source {env.root}/.venv/bin/activate" if "venv" in env.sp else "+ conda activate train", ""]
    return out


def torchrun_header(env: Env, sc: Scenario, t: datetime, node: int) -> list[str]:
    pid = 1000 + env.rng.randint(0, 60000)
    return [f"+ torchrun --nnodes={sc.nodes} --nproc_per_node={sc.gpn} --rdzv_backend=c10d --rdzv_endpoint={env.hosts[0]}:29500 train.py --config configs/run.yaml",
            f"{ts_glog(t, 'W')} {pid} torch/distributed/run.py:793] ",
            f"{ts_glog(t, 'W')} {pid} torch/distributed/run.py:793] *****************************************",
            f"{ts_glog(t, 'W')} {pid} torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ",
            f"{ts_glog(t, 'W')} {pid} torch/distributed/run.py:793] *****************************************"]


def torchrun_summary(env: Env, sc: Scenario, t: datetime, rank: int, exitcode: int, node: int, error_tb: str | None) -> list[str]:
    pid = env.rng.randint(2000, 90000)
    lr = rank % sc.gpn
    sig = {-6: "Signal 6 (SIGABRT) received by PID", -9: "Signal 9 (SIGKILL) received by PID", -15: "Signal 15 (SIGTERM) received by PID"}
    tb = f"{sig[exitcode]} {pid}" if exitcode < 0 else (error_tb or "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
    sp = env.sp
    return [f"{ts_glog(t, 'E')} {pid - 12} torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: {exitcode}) local_rank: {lr} (pid: {pid}) of binary: /usr/bin/python{env.py}",
            "Traceback (most recent call last):",
            '  File "/usr/local/bin/torchrun", line 8, in <module>', "    sys.exit(main())",
            f'  File "{sp}/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 355, in wrapper', "    return f(*args, **kwargs)",
            f'  File "{sp}/torch/distributed/run.py", line 919, in main', "    run(args)",
            f'  File "{sp}/torch/distributed/run.py", line 910, in run', "    elastic_launch(",
            f'  File "{sp}/torch/distributed/launcher/api.py", line 138, in __call__', "    return launch_agent(self._config, self._entrypoint, list(args))",
            f'  File "{sp}/torch/distributed/launcher/api.py", line 269, in launch_agent', "    raise ChildFailedError(",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "============================================================",
            "train.py FAILED",
            "------------------------------------------------------------",
            "Failures:",
            "  <NO_OTHER_FAILURES>",
            "------------------------------------------------------------",
            "Root Cause (first observed failure):",
            "[0]:",
            f"  time      : {ts_trun(t)}",
            f"  host      : {env.hosts[node]}",
            f"  rank      : {rank} (local_rank: {lr})",
            f"  exitcode  : {exitcode} (pid: {pid})",
            "  error_file: <N/A>",
            f"  traceback : {tb}",
            "============================================================"]
