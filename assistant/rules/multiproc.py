"""Multiprocessing: CUDA in forked children, pickling for spawn, bootstrapping, dead children."""

from __future__ import annotations

import re

from assistant.rules.base import Context, error_fact, hit, location_fact, lazy_re, remedy
from assistant.rules.registry import Example, rule
from assistant.types import Fact, Facts, RuleHit

_DOCS = ("spawn-pickling", "cuda-fork-reinit")

# Every wording of "this object cannot be pickled", old and new Python, plus h5py's own.
_UNPICKLABLE = lazy_re(
    r"Can't pickle local object '(?P<local>[^'\"]{1,300})['\"]"  # prose sometimes closes the quote with "
    r"|Can't get local object '(?P<local2>[^']{1,300})'"
    r"|Can't pickle <function (?P<func>[^>]{1,300}?)(?: at 0x[0-9a-f]+)?>"
    r"|Can't pickle <lambda>"
    r"|Can't pickle (?P<attr>\w[\w.]*): attribute lookup"
    r"|cannot pickle '(?P<res>[\w.]+)' object"
    r"|can't pickle (?P<res2>[\w.]+) objects"
    r"|(?P<h5py>h5py objects cannot be pickled)"
)
# Unpicklable things that are open handles (reopen them lazily in the worker) vs. thread machinery.
_HANDLE_TYPES = lazy_re(r"TextIOWrapper|BufferedReader|BufferedWriter|FileIO|socket|Connection|Environment|Cursor|h5py|SSLContext|mmap|ZipFile|TarFile", re.I)
_LOCK_TYPES = lazy_re(r"lock|RLock|Condition|Thread|_local|Event|Semaphore|queue|SimpleQueue", re.I)


_CUDA_CALL = lazy_re(r"(\.cuda)\(|(\.to)\(\s*['\"]cuda|(device)\s*=\s*['\"]cuda|(torch\.cuda\.\w+)")


def _cuda_call_name(m: re.Match[str] | None) -> str | None:
    """``.cuda``, ``.to``, ``device='cuda'`` or ``torch.cuda.<fn>`` for the CUDA call found on the user's line."""
    if not m:
        return None
    if m.group(3):
        return "device='cuda'"
    return m.group(1) or m.group(2) or m.group(4)


def _found(ctx: Context, *extra: Fact) -> list[Fact]:
    loc = location_fact(ctx)
    out = [error_fact(ctx), *extra]
    if ctx.failure.wrapper:
        out.append(Fact("worker", f"raised inside {ctx.failure.wrapper}"))
    return out + ([loc] if loc else [])


def _mp_context(ctx: Context) -> bool:
    """The failure happened while starting or talking to another process (not while saving a checkpoint)."""
    files = " ".join(f.file for f in ctx.failure.frames)
    return (bool(re.search(r"multiprocessing|spawn\.py|popen_|reduction\.py|dataloader\.py|forkserver", files)) or bool(ctx.failure.wrapper)
            or bool(ctx.search(r"spawn|DataLoader|multiprocessing|h5py objects", re.I)))


def _bare_local_object(ctx: Context, m: re.Match[str]) -> bool:
    """A bare "Can't pickle local object" with no traceback and no sign of saving: almost always DataLoader workers under spawn.

    Outside multiprocessing the same message comes from torch.save/pickle.dump of a model, which a report then mentions.
    """
    local = m.group("local") or m.group("local2")
    return bool(local) and not ctx.failure.frames and not ctx.search(r"torch\.save|\bsave\w*\(|pickle\.dumps?\(|deepcopy|checkpoint", re.I)


def _in_loader(ctx: Context) -> bool:
    return "DataLoader worker" in (ctx.failure.wrapper or "") or bool(ctx.search(r"DataLoader worker|worker\.py|_worker_loop")) or any(
        "dataloader.py" in f.file or "worker.py" in f.file for f in ctx.failure.frames)


@rule(
    'multiproc.cuda_fork',
    category='multiprocessing_error',
    docs=("cuda-fork-reinit", "dataloader-worker-crash"),
    reads=("RuntimeError", "text"),
    priority=12,
    outcomes=('mp.cuda_fork', 'mp.cuda_fork_process'),
    examples=(
        Example("captured/cuda/mp-dataloader-cuda-in-getitem-fork", "mp.cuda_fork"),
        Example("corpus/multiprocessing/cuda_fork_dataloader_getitem_gpu.txt", "mp.cuda_fork"),
        Example("corpus/multiprocessing/cuda_fork_process_gpu.txt", "mp.cuda_fork_process"),
        Example("corpus/multiprocessing/cuda_fork_oneline_pycls.txt", "mp.cuda_fork_process"),
        Example("corpus/multiprocessing/cuda_fork_dataloading_4dhumans.txt", "mp.cuda_fork_process"),
    ),
)
def cuda_fork(ctx: Context) -> RuleHit | None:
    """CUDA initialised in the parent, then used in a fork()ed child (DataLoader workers, multiprocessing)."""
    if not ctx.search(r"Cannot re-initialize CUDA in forked subprocess|CUDA initialization error.*fork|cuInit.*fork"):
        return None
    line = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
    cuda_call = _CUDA_CALL.search(line)
    facts = Facts(call=_cuda_call_name(cuda_call), names=("fork",))
    keep_cpu = remedy("cuda-fork-reinit#keep-data-on-cpu")
    if _in_loader(ctx):
        cause = ("The parent process had already initialised CUDA and then fork()ed DataLoader workers (fork is the default start method on Linux); "
                 "a CUDA context cannot be carried into a forked child, so the first CUDA call inside a worker fails. The Dataset touches the GPU: "
                 "moving samples to 'cuda' in __getitem__, holding CUDA tensors created in __init__, or running a GPU model or transform in the worker."
                 + (f" The failing line `{line}` is such a CUDA call." if cuda_call else ""))
        fixes = [keep_cpu,
                 remedy("cuda-fork-reinit#spawn-workers")]
        return hit("mp.cuda_fork", "multiprocessing_error", "CUDA used in a forked DataLoader worker", cause, fixes, ("cuda-fork-reinit", "dataloader-worker-crash"), _found(ctx), 0.95, facts=facts)
    cause = ("A child process created with fork() used CUDA after the parent had already initialised it; CUDA state cannot cross a fork. "
             "Either the children must be started with 'spawn' (or 'forkserver'), or the parent must not touch CUDA (no .cuda(), no "
             "torch.cuda.* calls, no CUDA tensors) before it creates the children. If the children are DataLoader workers, keep the dataset on the CPU.")
    fixes = [
        remedy("cuda-fork-reinit#spawn-start-method"),
        keep_cpu,
    ]
    return hit("mp.cuda_fork_process", "multiprocessing_error", "CUDA used in a forked subprocess", cause, fixes, ("cuda-fork-reinit",), _found(ctx), 0.93, facts=facts)


@rule(
    'multiproc.pickling',
    category='multiprocessing_error',
    docs=_DOCS,
    reads=("RuntimeError", "PickleError", "AttributeError", "NameError", "TypeError", "AssertionError", "text"),
    priority=64,
    also=('cpu_oom',),
    outcomes=('mp.unpicklable', 'mp.unpicklable_handle', 'mp.unpicklable_lock', 'mp.unpicklable_object', 'mp.spawn_global', 'mp.main_attribute', 'mp.main_attribute_guarded', 'mp.bootstrap',
              'mp.daemonic', 'mp.child_died', 'mp.child_killed', 'mp.context_already_set'),
    examples=(
        Example("captured/cpu/dataloader-spawn-lambda-collate", "mp.unpicklable"),
        Example("corpus/multiprocessing/spawn_lambda_collate_script.txt", "mp.unpicklable"),
        Example("corpus/multiprocessing/spawn_local_dataset_class.txt", "mp.unpicklable"),
        Example("corpus/multiprocessing/local_lambda_win_mutualnet.txt", "mp.unpicklable"),
        Example("corpus/multiprocessing/local_lambda_maml.txt", "mp.unpicklable"),
        Example("realworld/dev/deepslide-pickle-local-mydataset", "mp.unpicklable"),
        Example("realworld/dev/smp-pickle-local-preprocess-fn-windows", "mp.unpicklable"),
        Example("realworld/dev/centernet-windows-pickle-local-dataset", "mp.unpicklable"),
        Example("corpus/multiprocessing/local_object_bare_mosi.txt", "mp.unpicklable"),
        Example("corpus/multiprocessing/local_object_bare_advfaces.txt", "mp.unpicklable"),
        Example("corpus/multiprocessing/h5py_pickle_spawn_win_sst.txt", "mp.unpicklable_handle"),
        Example("corpus/multiprocessing/spawn_open_file_in_dataset.txt", "mp.unpicklable_handle"),
        Example("corpus/multiprocessing/spawn_thread_lock_in_dataset.txt", "mp.unpicklable_lock"),
        Example("corpus/multiprocessing/rlock_old_wording_win_process.txt", "mp.unpicklable_lock"),
        Example("corpus/multiprocessing/spawn_module_attribute_in_dataset.txt", "mp.unpicklable_object"),
        Example("corpus/multiprocessing/spawn_generator_attribute_in_dataset.txt", "mp.unpicklable_object"),
        Example("captured/cpu/mp-spawn-global-set-under-main-guard", "mp.spawn_global"),
        Example("corpus/multiprocessing/spawn_main_class_not_importable.txt", "mp.main_attribute"),
        Example("corpus/multiprocessing/main_attribute_builtin_win_htr.txt", "mp.main_attribute"),
        Example("corpus/multiprocessing/spawn_class_under_main_guard.txt", "mp.main_attribute_guarded"),
        Example("corpus/multiprocessing/mp_main_attribute_guarded_cogltx.txt", "mp.main_attribute_guarded"),
        Example("captured/cpu/spawn-dataloader-missing-main-guard", "mp.bootstrap"),
        Example("corpus/multiprocessing/pool_inside_dataloader_worker.txt", "mp.daemonic"),
        Example("corpus/multiprocessing/spawn_child_exit_code.txt", "mp.child_died"),
        Example("corpus/multiprocessing/spawn_child_sigsegv.txt", "mp.child_died"),
        Example("corpus/multiprocessing/spawn_child_sigkill.txt", "mp.child_killed"),
        Example("corpus/multiprocessing/set_start_method_twice.txt", "mp.context_already_set"),
        Example("corpus/multiprocessing/context_already_set_slowfast.txt", "mp.context_already_set"),
        Example("corpus/multiprocessing/context_already_set_espnet.txt", "mp.context_already_set"),
    ),
)
def pickling(ctx: Context) -> RuleHit | None:
    """spawn/forkserver needs picklable arguments; classes defined in interactive __main__ cannot be found."""
    saving = any("serialization.py" in f.file for f in ctx.failure.frames) or any("torch.save" in (f.source or "") for f in ctx.failure.frames)
    if saving:
        return None
    m = _UNPICKLABLE.search(ctx.text)
    if m and (_mp_context(ctx) or _bare_local_object(ctx, m)):
        return _unpicklable(ctx, m)
    name_err = ctx.exc_type == "NameError" and (ctx.failure.wrapper or "").startswith("spawned process")
    if name_err:
        var = re.search(r"name '(\w+)' is not defined", ctx.message)
        v = var.group(1) if var else "a global"
        cause = (f"`{v}` is undefined inside the spawned process. With the spawn start method each child re-imports your script as a module, so "
                 f"globals assigned under `if __name__ == '__main__':` (like `{v}`) or in a notebook cell do not exist there.")
        fixes = [
            remedy("spawn-pickling#pass-global-via-args", variable=var.group(1) if var else None, parameter=var.group(1).lower() if var else None),
            remedy("spawn-pickling#define-at-module-level"),
        ]
        return hit("mp.spawn_global", "multiprocessing_error", f"`{v}` undefined in a spawned process", cause, fixes, _DOCS, _found(ctx), 0.93, facts=Facts(names=(v,)))
    m = ctx.search(r"Can't get attribute '(\w+)' on <module '(__main__|__mp_main__)'(?: from '([^']+)')?")
    if m:
        return _main_attribute(ctx, m.group(1), m.group(3))
    if ctx.search(r"An attempt has been made to start a new process before the\s+current process has finished its bootstrapping phase"):
        cause = ("With spawn, each child imports your script again; module-level code that creates processes (a DataLoader loop with workers, a Pool, "
                 "mp.spawn) then runs again inside the child. The script lacks the `if __name__ == '__main__':` guard around its entry point.")
        fixes = [remedy("spawn-pickling#guard-entry-point")]
        return hit("mp.bootstrap", "multiprocessing_error", "Missing `if __name__ == '__main__'` guard", cause, fixes, _DOCS, _found(ctx), 0.95,
                   facts=Facts(flags=frozenset({"missing_main_guard"}), names=("spawn",)))
    if ctx.search(r"daemonic processes are not allowed to have children"):
        cause = ("A daemon process tried to start processes of its own. DataLoader workers are daemons, so a multiprocessing Pool, a DataLoader with "
                 "num_workers > 0, or a library that parallelises with processes cannot be used inside __getitem__ or a transform.")
        fixes = [
            remedy("spawn-pickling#no-processes-in-dataset"),
            remedy("spawn-pickling#precompute-before-training"),
        ]
        # Innermost user line first: that is the code running inside the worker.
        pool = next((m for f in reversed(ctx.failure.user_frames) if (m := re.search(r"\b(Pool|ProcessPoolExecutor|Process|DataLoader)\(", f.source or ""))), None)
        return hit("mp.daemonic", "multiprocessing_error", "Processes started inside a DataLoader worker", cause, fixes, _DOCS, _found(ctx), 0.9,
                   facts=Facts(call=pool.group(1) if pool else None, flags=frozenset({"daemon_process"})))
    if ctx.search(r"context has already been set") and any("set_start_method" in (f.source or "") or "context.py" in f.file for f in ctx.failure.frames):
        cause = ("multiprocessing's start method can be set only once per program, and something (your code earlier, an imported library, or a second "
                 "call in a function that runs twice) already set it. Calling set_start_method again raises unless force=True.")
        fixes = [
            remedy("spawn-pickling#set-start-method-once"),
            remedy("spawn-pickling#local-context"),
        ]
        return hit("mp.context_already_set", "multiprocessing_error", "Multiprocessing start method set twice", cause, fixes, _DOCS, _found(ctx), 0.9,
                   facts=Facts(call="set_start_method"))
    m = ctx.search(r"process (\d+) terminated with (?:signal (SIG\w+)|exit code (-?\d+))")
    if m and ctx.search(r"ProcessExitedException|torch\.multiprocessing|spawn"):
        return _child_exit(ctx, m)
    return None


def _unpicklable(ctx: Context, m: re.Match[str]) -> RuleHit:
    obj = next((g for g in (m.group("local"), m.group("local2"), m.group("func"), m.group("attr"), m.group("res"), m.group("res2")) if g), None)
    if m.group("h5py"):
        obj = "h5py object"
    obj = obj or "<lambda>"
    start = ("With the spawn/forkserver start method (the default on Windows and macOS, and what multiprocessing_context='spawn' selects) every object "
             "sent to a child process, including the Dataset and the collate/worker_init functions of a DataLoader, is pickled")
    facts = Facts(names=(obj,))
    found = _found(ctx, Fact("object", f"unpicklable: {obj}"))
    # A '<locals>' name is a nested function or class, even when its name contains "queue" or "file".
    local = bool(m.group("local") or m.group("local2"))
    if _HANDLE_TYPES.search(obj) and not local:
        what = "an open HDF5 file or dataset handle" if "h5py" in obj else f"an open handle (`{obj}`)"
        cause = (f"{start}, and {what} cannot be: it refers to an operating-system resource of this process. The Dataset (or something it references) "
                 "opened the file in __init__, in the parent, before the workers were started.")
        fixes = [
            remedy("spawn-pickling#open-lazily"),
            remedy("spawn-pickling#read-and-close"),
            remedy("spawn-pickling#open-in-worker-init"),
        ]
        return hit("mp.unpicklable_handle", "multiprocessing_error", f"Cannot pickle {obj} for a worker process", cause, fixes, _DOCS, found, 0.93, facts=facts)
    if _LOCK_TYPES.search(obj) and not local:
        cause = (f"{start}, and `{obj}` cannot be: locks, threads, queues and generators belong to one process. Something reachable from the Dataset "
                 "or the objects passed to the child keeps one as an attribute (a cache guarded by a lock, a logger/writer thread, a trainer object).")
        fixes = [
            remedy("spawn-pickling#drop-thread-objects"),
            remedy("spawn-pickling#pass-plain-data"),
        ]
        return hit("mp.unpicklable_lock", "multiprocessing_error", f"Cannot pickle {obj} for a worker process", cause, fixes, _DOCS, found, 0.92, facts=facts)
    if m.group("res") or m.group("res2"):
        # An object type (module, generator, a C-extension object) rather than a function without an importable name.
        cause = (f"{start}, and a `{obj}` object cannot be pickled. Something reachable from the Dataset (or the other objects sent to the child) "
                 f"keeps a `{obj}` as an attribute: a module stored on self, a live generator or iterator, or a native object from an extension library.")
        fixes = [
            remedy("spawn-pickling#create-object-where-used", object_type=obj),
            remedy("spawn-pickling#drop-when-pickling"),
        ]
        # A process pool of a dataset map (`num_proc=N`, "Spawning N processes"): the mapped function's captured objects are what is pickled.
        if ctx.search(r"\bnum_proc\b|Spawning \d+ processes|preprocessing_num_workers"):
            fixes.insert(0, remedy("spawn-pickling#single-process-map"))
        return hit("mp.unpicklable_object", "multiprocessing_error", f"Cannot pickle a {obj} object for a worker process", cause, fixes, _DOCS, found, 0.88, facts=facts)
    cause = (f"{start}, and `{obj}` cannot be: lambdas and functions or classes defined inside another function have no importable name, "
             "so the child could not find them.")
    fixes = [
        remedy("spawn-pickling#top-level-definitions"),
        remedy("spawn-pickling#guard-entry-point-spawn"),
    ]
    if local and "." in obj.split(".<locals>", 1)[0]:
        # `Class.method.<locals>.fn`: a closure a method built (often a library's hook on the model), which the user cannot move.
        fixes.append(remedy("spawn-pickling#workers-zero-library-closure"))
    return hit("mp.unpicklable", "multiprocessing_error", f"Cannot pickle {obj} for a child process", cause, fixes, _DOCS, found, 0.93, facts=facts)


def _main_attribute(ctx: Context, name: str, script: str | None) -> RuleHit:
    loader = _in_loader(ctx)
    tail = " The DataLoader worker died because of it, which is why the traceback ends with the worker exiting." if loader else ""
    facts = Facts(names=(name,))
    if script:
        where = script.replace("\\", "/").rsplit("/", 1)[-1]
        cause = (f"A spawned child process re-imported `{where}` (as `__mp_main__`) to find `{name}`, and the module has no such name. The child imports "
                 f"the script without running the `if __name__ == '__main__':` block, so `{name}` is defined inside that block (or created at run time) "
                 "rather than at module level." + tail)
        fixes = [
            remedy("spawn-pickling#define-above-main-guard", attribute=name),
        ]
        return hit("mp.main_attribute_guarded", "multiprocessing_error", f"`{name}` is defined under the __main__ guard", cause, fixes, _DOCS, _found(ctx), 0.93, facts=facts)
    cause = (f"A spawned child process needs `{name}` from the main module, but that module cannot be re-imported in the child: `{name}` was defined in "
             "a notebook cell, an interactive session, a debugger console or `python -c`." + tail)
    fixes = [
        remedy("spawn-pickling#move-to-module", attribute=name),
        remedy("spawn-pickling#no-workers-interactive"),
    ]
    return hit("mp.main_attribute", "multiprocessing_error", f"Child process cannot find `{name}`", cause, fixes, _DOCS, _found(ctx), 0.93, facts=facts)


def _child_exit(ctx: Context, m: re.Match[str]) -> RuleHit:
    sig, code = m.group(2), m.group(3)
    facts = Facts(numbers={"process": float(m.group(1)), **({"exit_code": float(code)} if code else {})}, names=(sig,) if sig else ())
    if sig == "SIGKILL":
        cause = (f"Spawned process {m.group(1)} was killed with SIGKILL and printed no Python error. Nobody sends SIGKILL by accident: it is almost "
                 "always the Linux OOM killer (host RAM exhausted) or a container/job-scheduler memory limit.")
        fixes = [
            remedy("cpu-oom#kernel-log-oom-killer"),
            remedy("cpu-oom#reduce-per-process-memory"),
        ]
        return hit("mp.child_killed", "cpu_oom", f"Child process {m.group(1)} killed (SIGKILL)", cause, fixes, ("cpu-oom", "spawn-pickling"), _found(ctx), 0.75, facts=facts)
    how = f"from {sig}" if sig else f"with exit code {code}"
    cause = (f"Spawned process {m.group(1)} died {how} without a Python traceback reaching the parent: "
             + ("a crash in native code (a C/CUDA extension, a library that segfaults)." if sig else
                "an explicit sys.exit/os._exit in the child, or a crash whose message was printed by the child itself (look above for its output)."))
    fixes = [remedy("spawn-pickling#run-child-alone")]
    return hit("mp.child_died", "multiprocessing_error", f"Child process {m.group(1)} died", cause, fixes, _DOCS, _found(ctx), 0.8, facts=facts)
