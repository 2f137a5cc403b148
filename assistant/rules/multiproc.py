"""Multiprocessing: CUDA in forked children, pickling for spawn, bootstrapping, dead children."""

from __future__ import annotations

import re

from assistant.rules.registry import Example, rule
from assistant.rules.base import Context, error_fact, fix, hit, location_fact
from assistant.types import Fact, RuleHit

_DOCS = ("spawn-pickling", "cuda-fork-reinit")


def _found(ctx: Context, *extra: Fact) -> list[Fact]:
    loc = location_fact(ctx)
    out = [error_fact(ctx), *extra]
    if ctx.failure.wrapper:
        out.append(Fact("worker", f"raised inside {ctx.failure.wrapper}"))
    return out + ([loc] if loc else [])


def _mp_context(ctx: Context) -> bool:
    files = " ".join(f.file for f in ctx.failure.frames)
    return bool(re.search(r"multiprocessing|spawn\.py|popen_|reduction\.py|dataloader\.py|forkserver", files)) or bool(ctx.failure.wrapper) or bool(ctx.search(r"spawn|DataLoader|multiprocessing", re.I))


@rule(
    'multiproc.cuda_fork',
    category='multiprocessing_error',
    docs=("cuda-fork-reinit", "dataloader-worker-crash"),
    priority=110,
    outcomes=('mp.cuda_fork',),
    examples=(),
)
def cuda_fork(ctx: Context) -> RuleHit | None:
    """CUDA initialised in the parent, then used in a fork()ed child (DataLoader workers, multiprocessing)."""
    if not ctx.search(r"Cannot re-initialize CUDA in forked subprocess|CUDA initialization error.*fork|cuInit.*fork"):
        return None
    in_loader = "DataLoader worker" in (ctx.failure.wrapper or "") or bool(ctx.search(r"DataLoader worker|worker\.py|_worker_loop"))
    cause = ("The parent process initialised CUDA and then fork()ed a child that also uses CUDA; a CUDA context cannot be carried across fork. "
             + ("Here the children are DataLoader workers (fork is the default start method on Linux), and the Dataset touches the GPU — moving "
                "samples to 'cuda' in __getitem__, creating CUDA tensors in __init__, or running a GPU model/transform in the worker."
                if in_loader else "Start children with 'spawn', or don't touch CUDA in the parent before forking."))
    fixes = [
        fix("Keep datasets on the CPU; move batches to the GPU in the training loop", "Use pin_memory=True for fast host-to-device copies.", "loader = DataLoader(ds, num_workers=4, pin_memory=True)\nfor x, y in loader:\n    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)", "cuda-fork-reinit"),
        fix("Or start workers with spawn", "Everything the workers need must then be picklable.", "DataLoader(ds, num_workers=4, multiprocessing_context='spawn')\n# or: torch.multiprocessing.set_start_method('spawn', force=True)", "cuda-fork-reinit"),
    ]
    return hit("mp.cuda_fork", "multiprocessing_error", "CUDA used in a forked subprocess", cause, fixes, ("cuda-fork-reinit", "dataloader-worker-crash"), _found(ctx), 0.95)


@rule(
    'multiproc.pickling',
    category='multiprocessing_error',
    docs=_DOCS,
    priority=320,
    also=('cpu_oom',),
    outcomes=('mp.unpicklable', 'mp.spawn_global', 'mp.main_attribute', 'mp.bootstrap', 'mp.daemonic', 'mp.child_died', 'mp.shared_memory', 'mp.child_killed'),
    examples=(),
)
def pickling(ctx: Context) -> RuleHit | None:
    """spawn/forkserver needs picklable arguments; classes defined in interactive __main__ cannot be found."""
    saving = any("serialization.py" in f.file for f in ctx.failure.frames) or any("torch.save" in (f.source or "") for f in ctx.failure.frames)
    if saving:
        return None
    m = ctx.search(r"Can't pickle (?:local object '([^']+)'|<function ([^>]+?)(?: at 0x[0-9a-f]+)?>|<lambda>|(\w[\w.]*): attribute lookup)|Can't get local object '([^']+)'|cannot pickle '(\w+)' object")
    if m and _mp_context(ctx):
        obj = next((g for g in m.groups() if g), "<lambda>")
        lam = "lambda" in obj
        cause = (f"With the spawn/forkserver start method (default on macOS and Windows, and what multiprocessing_context='spawn' selects) every object sent to a child "
                 f"is pickled, and `{obj}` cannot be: " + ("lambdas and functions defined inside other functions have no importable name." if lam or "<locals>" in obj else "it holds an unpicklable resource (an open file, a lock, a generator, a CUDA handle)."))
        fixes = [
            fix("Define functions at module top level", "Replace lambdas/local functions (collate_fn, worker_init_fn, transforms) with named top-level functions or functools.partial.", "def collate(batch):\n    ...\nDataLoader(ds, num_workers=2, collate_fn=collate)", "spawn-pickling"),
            fix("Open resources lazily inside the worker", "Create file handles / database connections in __getitem__ or worker_init_fn, not in __init__.", None, "spawn-pickling"),
        ]
        return hit("mp.unpicklable", "multiprocessing_error", f"Cannot pickle {obj} for a child process", cause, fixes, _DOCS, _found(ctx, Fact("object", f"unpicklable: {obj}")), 0.93)
    name_err = ctx.exc_type == "NameError" and (ctx.failure.wrapper or "").startswith("spawned process")
    if name_err:
        var = re.search(r"name '(\w+)' is not defined", ctx.message)
        v = var.group(1) if var else "a global"
        cause = (f"`{v}` is undefined inside the spawned worker. With the spawn start method each child re-imports your script as a module, so "
                 f"globals assigned under `if __name__ == '__main__':` (like `{v}`) or in a notebook cell do not exist there.")
        fixes = [
            fix(f"Pass `{v}` to the worker explicitly via args=", "", f"mp.spawn(train_worker, args=(nprocs, {v}), nprocs=nprocs)\n\ndef train_worker(rank, nprocs, {v.lower()}): ...", "spawn-pickling"),
            fix("Or define it at module level (outside the __main__ guard)", "Constants and config loading that every process needs belong at import level.", None, "spawn-pickling"),
        ]
        return hit("mp.spawn_global", "multiprocessing_error", f"`{v}` undefined in a spawned process", cause, fixes, _DOCS, _found(ctx), 0.93)
    m = ctx.search(r"Can't get attribute '(\w+)' on <module '(__main__|__mp_main__)'")
    if m:
        cause = (f"A spawned child re-imports the main module to find `{m.group(1)}`, but it is not importable there: it was defined in a notebook/REPL cell "
                 "or inside `if __name__ == '__main__':`.")
        fixes = [fix("Move the class/function into a .py module and import it", "", "# my_data.py\nclass MyDataset(Dataset): ...\n# notebook:\nfrom my_data import MyDataset", "spawn-pickling")]
        return hit("mp.main_attribute", "multiprocessing_error", f"Child process cannot find `{m.group(1)}`", cause, fixes, _DOCS, _found(ctx), 0.93)
    if ctx.search(r"An attempt has been made to start a new process before the\s+current process has finished its bootstrapping phase"):
        cause = ("With spawn, each child imports your script again; code at module level that creates workers (a DataLoader loop, mp.spawn) runs again in the child. "
                 "The script lacks the `if __name__ == '__main__':` guard.")
        fixes = [fix("Guard the entry point", "", "def main():\n    ...\n\nif __name__ == '__main__':\n    main()", "spawn-pickling")]
        return hit("mp.bootstrap", "multiprocessing_error", "Missing `if __name__ == '__main__'` guard", cause, fixes, _DOCS, _found(ctx), 0.95)
    if ctx.search(r"daemonic processes are not allowed to have children"):
        cause = "A DataLoader worker (a daemon process) tried to start its own processes — e.g. a DataLoader with workers inside a Dataset, or a multiprocessing Pool in __getitem__."
        fixes = [fix("Use num_workers=0 for the inner loader / avoid pools in workers", "", None, "spawn-pickling")]
        return hit("mp.daemonic", "multiprocessing_error", "Nested processes inside a DataLoader worker", cause, fixes, _DOCS, _found(ctx), 0.9)
    m = ctx.search(r"process (\d+) terminated with (?:signal (SIG\w+)|exit code (-?\d+))")
    if m and ctx.search(r"ProcessExitedException|torch\.multiprocessing|spawn"):
        sig = m.group(2)
        if sig == "SIGKILL":
            cause = f"Spawned process {m.group(1)} was killed with SIGKILL and printed no Python error: most likely the Linux OOM killer (host RAM exhausted)."
            fixes = [fix("Check dmesg for the OOM killer and reduce per-process memory", "", "dmesg -T | grep -i 'killed process'", "cpu-oom")]
            return hit("mp.child_killed", "cpu_oom", f"Child process {m.group(1)} killed (SIGKILL)", cause, fixes, ("cpu-oom", "spawn-pickling"), _found(ctx), 0.75)
        cause = (f"Spawned process {m.group(1)} died " + (f"from {sig}" if sig else f"with exit code {m.group(3)}") + " without a Python traceback: a crash in native code "
                 "(segfault in an extension, NCCL/CUDA abort) or an explicit sys.exit in the child.")
        fixes = [fix("Run that rank's code in a single process to see its error", "", None, "spawn-pickling")]
        return hit("mp.child_died", "multiprocessing_error", f"Child process {m.group(1)} died", cause, fixes, _DOCS, _found(ctx), 0.8)
    if ctx.search(r"unable to open shared memory object|Too many open files.*shared|received 0 items of ancdata"):
        cause = "Sharing tensors between processes exhausted file descriptors / shared-memory handles."
        fixes = [fix("Switch to the file_system sharing strategy, or raise ulimit -n", "", "torch.multiprocessing.set_sharing_strategy('file_system')", "dataloader-shared-memory")]
        return hit("mp.shared_memory", "multiprocessing_error", "Shared memory handles exhausted", cause, fixes, ("dataloader-shared-memory", "spawn-pickling"), _found(ctx), 0.88)
    return None
