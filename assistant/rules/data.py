"""DataLoader failures: collate errors, workers killed or crashed, shared memory, timeouts."""

from __future__ import annotations


from assistant.rules.registry import Example, rule
from assistant.rules.base import Context, error_fact, fix, hit
from assistant.types import Fact, RuleHit

_DOCS = ("dataloader-worker-crash", "collate-size-mismatch", "dataloader-shared-memory")


def _in_collate(ctx: Context) -> bool:
    return any("collate" in (f.file + (f.function or "")) for f in ctx.failure.frames) or "DataLoader worker" in (ctx.failure.wrapper or "")


@rule(
    'data.collate',
    category='dataloader_error',
    docs=_DOCS[1::-1],
    priority=260,
    outcomes=('data.collate_sizes', 'data.collate_type', 'data.collate_none', 'data.collate_lists'),
    examples=(),
)
def collate(ctx: Context) -> RuleHit | None:
    """default_collate could not batch the samples."""
    found = [error_fact(ctx)]
    if ctx.failure.wrapper:
        found.append(Fact("worker", f"raised inside {ctx.failure.wrapper}"))
    m = ctx.search(r"stack expects each tensor to be equal size, but got \[([\d, ]*)\] at entry (\d+) and \[([\d, ]*)\] at entry (\d+)")
    if m and _in_collate(ctx):
        a, b = m.group(1), m.group(3)
        found.append(Fact("shape", f"sample {m.group(2)} has shape [{a}], sample {m.group(4)} has [{b}]"))
        dims_a, dims_b = a.split(","), b.split(",")
        image_like = len(dims_a) == 3 and dims_a[0].strip() == dims_b[0].strip()
        cause = (f"The DataLoader's default collate function stacks the samples of a batch into one tensor, but sample {m.group(2)} has shape [{a}] "
                 f"and sample {m.group(4)} has [{b}]. "
                 + ("These look like images of different sizes: the transform pipeline has no Resize/CenterCrop to a fixed size."
                    if image_like else "Variable-length samples (sequences, token lists, point sets) need padding in a custom collate_fn."))
        fixes = [
            fix("Resize/crop to a fixed size in the transform", "For images.", "transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor()])", "collate-size-mismatch"),
            fix("Pad variable-length samples in a collate_fn", "For sequences; also return the lengths (or a mask).", "def collate(batch):\n    seqs, labels = zip(*batch)\n    lengths = torch.tensor([len(s) for s in seqs])\n    return pad_sequence(seqs, batch_first=True), torch.tensor(labels), lengths\n\nDataLoader(ds, batch_size=32, collate_fn=collate)", "collate-size-mismatch"),
        ]
        if not image_like:
            fixes.reverse()
        return hit("data.collate_sizes", "dataloader_error", "DataLoader cannot stack samples of different shapes", cause, fixes, _DOCS[1::-1], found, 0.95)
    m = ctx.search(r"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found (?:<class '([^']+)'>|(\S+))")
    if m:
        found_type = m.group(1) or m.group(2)
        if "NoneType" in found_type:
            cause = "A sample (or a field of a sample) is None: Dataset.__getitem__ returned None for some index — a failed image read, a missing label, or a code path without a return."
            code = "def collate_skip_none(batch):\n    batch = [b for b in batch if b is not None]\n    return torch.utils.data.default_collate(batch)"
        elif "PIL" in found_type or "Image" in found_type:
            cause = f"Samples are {found_type} objects: the transform pipeline is missing ToTensor()/PILToTensor(), so images reach the DataLoader unconverted."
            code = "transforms.Compose([transforms.Resize((224, 224)), transforms.ToTensor()])"
        else:
            cause = f"A sample contains a {found_type}, which default_collate cannot batch. Convert it to a tensor/number in __getitem__, or write a collate_fn that handles it."
            code = "DataLoader(ds, batch_size=16, collate_fn=lambda batch: batch)  # or a proper custom collate"
        found.append(Fact("type", f"unbatchable sample type: {found_type}"))
        fixes = [fix("Return tensors (or numbers/dicts of tensors) from __getitem__, or pass a collate_fn that handles it", "", code + ("\nDataLoader(ds, batch_size=16, collate_fn=collate_skip_none)" if "NoneType" in found_type else ""), "collate-size-mismatch")]
        return hit("data.collate_type", "dataloader_error", f"DataLoader cannot batch {found_type}", cause, fixes, _DOCS[1::-1], found, 0.93)
    in_collate_code = any("collate" in (f.file + (f.function or "")) for f in ctx.failure.frames[-3:])
    if in_collate_code and ctx.exc_type in ("TypeError", "AttributeError") and ctx.search(r"NoneType"):
        cause = ("default_collate met a None while batching: Dataset.__getitem__ returned None (or a None field) for some sample — a failed read, "
                 "a filtered/short item, or a code path without a return.")
        fixes = [fix("Skip or repair None samples in a collate_fn", "Better still, fix __getitem__ so it never returns None.", "def collate_skip_none(batch):\n    batch = [b for b in batch if b is not None]\n    return torch.utils.data.default_collate(batch)\n\nDataLoader(ds, batch_size=4, collate_fn=collate_skip_none)", "collate-size-mismatch")]
        return hit("data.collate_none", "dataloader_error", "DataLoader got a None sample", cause, fixes, _DOCS[1::-1], found, 0.9)
    if ctx.search(r"each element in list of batch should be of equal size"):
        cause = "Samples are Python lists of different lengths; default_collate zips them element by element and requires equal lengths."
        fixes = [fix("Convert to tensors and pad in a collate_fn", "", "DataLoader(ds, collate_fn=my_pad_collate)", "collate-size-mismatch")]
        return hit("data.collate_lists", "dataloader_error", "DataLoader samples are lists of different lengths", cause, fixes, _DOCS[1::-1], found, 0.92)
    return None


@rule(
    'data.worker_died',
    category='dataloader_error',
    docs=("dataloader-worker-crash",),
    priority=261,
    outcomes=('data.worker_crash', 'data.shm', 'data.too_many_files', 'data.timeout', 'data.worker_oom'),
    examples=(),
)
def worker_died(ctx: Context) -> RuleHit | None:
    """Workers killed by signals, bus errors from /dev/shm, timeouts."""
    m = ctx.search(r"DataLoader worker \(pids?\)? ?\(?([\d, ]+)\)? (?:is killed by signal: ([\w ]+)|exited unexpectedly(?: with exit code (-?\d+))?)")
    shm = ctx.search(r"Unexpected bus error encountered in worker\. This might be caused by insufficient shared memory|insufficient shared memory \(shm\)|unable to write to file </torch_|No space left on device.*shm|/dev/shm")
    files = ctx.search(r"Too many open files|received 0 items of ancdata")
    timeout = ctx.search(r"DataLoader timed out after (\d+) seconds")
    if not (m or shm or files or timeout):
        return None
    found = [error_fact(ctx)]
    if shm or (m and m.group(2) and "Bus" in m.group(2)):
        cause = ("A DataLoader worker crashed with a bus error while writing a batch into shared memory: /dev/shm is too small. Docker's default is 64 MB, "
                 "far less than a few batches of images need.")
        fixes = [
            fix("Give the container more shared memory", "", "docker run --shm-size=16g ...   # or --ipc=host; Kubernetes: mount an emptyDir with medium: Memory at /dev/shm", "dataloader-shared-memory"),
            fix("Or reduce what sits in shared memory", "Fewer workers, smaller prefetch_factor, smaller batches.", "DataLoader(ds, num_workers=2, prefetch_factor=2)", "dataloader-shared-memory"),
        ]
        return hit("data.shm", "dataloader_error", "DataLoader worker: insufficient shared memory", cause, fixes, ("dataloader-shared-memory", "dataloader-worker-crash"), found, 0.93)
    if files:
        cause = "Worker processes pass batches through file descriptors and ran out of them (the per-process open-file limit)."
        fixes = [
            fix("Use the file_system sharing strategy", "", "torch.multiprocessing.set_sharing_strategy('file_system')", "dataloader-shared-memory"),
            fix("Or raise the open-file limit", "", "ulimit -n 65536", "dataloader-shared-memory"),
        ]
        return hit("data.too_many_files", "dataloader_error", "DataLoader: too many open files", cause, fixes, ("dataloader-shared-memory",), found, 0.9)
    if timeout:
        cause = f"No batch arrived from the workers within {timeout.group(1)} s: a worker is stuck (blocking I/O, a deadlock from threads + fork, or a very slow __getitem__)."
        fixes = [
            fix("Debug with num_workers=0", "The same code runs in the main process, so a hang or exception is visible directly.", "DataLoader(ds, num_workers=0)", "dataloader-worker-crash"),
            fix("Time __getitem__ and raise the timeout only if loading is legitimately slow", f"timeout={timeout.group(1)} is the per-batch limit; a slow sample (network storage, heavy decoding) needs a larger timeout or faster loading.", "DataLoader(ds, num_workers=4, timeout=120)", "dataloader-worker-crash"),
        ]
        return hit("data.timeout", "dataloader_error", "DataLoader timed out", cause, fixes, ("dataloader-worker-crash",), found, 0.88)
    pids, sig, code = m.group(1).strip(), (m.group(2) or "").strip(), m.group(3)  # type: ignore[union-attr]
    found.append(Fact("worker", f"worker pid(s) {pids}: " + (f"killed by signal {sig}" if sig else f"exited unexpectedly{f' with code {code}' if code else ''}")))
    if sig.startswith("Killed") or code in ("-9", "137"):
        cause = ("A DataLoader worker was killed by SIGKILL — the Linux OOM killer: host RAM ran out. Each worker holds its own copy of whatever the Dataset "
                 "references (Python lists of samples grow per worker through copy-on-access), plus prefetched batches.")
        fixes = [
            fix("Use fewer workers / smaller prefetch", "", "DataLoader(ds, num_workers=2, prefetch_factor=2, persistent_workers=True)", "dataloader-worker-crash"),
            fix("Keep dataset metadata in numpy arrays, load samples lazily", "Avoid large Python lists/dicts in the Dataset; read files in __getitem__.", "self.paths = np.array(paths)  # not a list of str", "cpu-oom"),
        ]
        return hit("data.worker_oom", "dataloader_error", "DataLoader worker killed (out of host memory)", cause, fixes, ("dataloader-worker-crash", "cpu-oom"), found, 0.9)
    cause = ("A DataLoader worker died" + (f" from signal {sig}" if sig else "") + ". Segmentation faults in workers usually come from native libraries "
             "(OpenCV, image decoders, a CUDA call in a forked worker) rather than from Python code; the worker's own error is lost.")
    fixes = [
        fix("Reproduce with num_workers=0", "The failing sample then raises in the main process with a full traceback.", "DataLoader(ds, num_workers=0)", "dataloader-worker-crash"),
        fix("Limit native threads in workers", "OpenCV and OpenMP threads do not mix well with fork.", "def worker_init(_):\n    cv2.setNumThreads(0)\n    torch.set_num_threads(1)\nDataLoader(ds, num_workers=4, worker_init_fn=worker_init)", "dataloader-worker-crash"),
    ]
    return hit("data.worker_crash", "dataloader_error", "DataLoader worker crashed", cause, fixes, ("dataloader-worker-crash",), found, 0.85)


@rule(
    'data.dataset_misc',
    category='dataloader_error',
    docs=("dataloader-worker-crash", "files-and-permissions"),
    priority=262,
    outcomes=('data.empty', 'data.iterable_options'),
    examples=(),
)
def dataset_misc(ctx: Context) -> RuleHit | None:
    """Empty datasets and other DataLoader configuration errors."""
    if ctx.search(r"num_samples should be a positive integer value, but got num_samples=0"):
        cause = "The Dataset is empty (len(dataset) == 0), so RandomSampler has nothing to draw: the data path, file pattern or filter matched no files."
        fixes = [fix("Check what the Dataset found", "", "print(len(dataset)); print(dataset.root)", "dataloader-worker-crash")]
        return hit("data.empty", "dataloader_error", "Empty dataset", cause, fixes, ("dataloader-worker-crash", "files-and-permissions"), [error_fact(ctx)], 0.92)
    if ctx.search(r"DataLoader with IterableDataset: expected unspecified (?:sampler|shuffle|batch_sampler) option"):
        cause = "An IterableDataset defines its own order, so DataLoader's shuffle/sampler options cannot be used with it."
        fixes = [fix("Drop shuffle/sampler; shuffle inside the iterable (e.g. a buffer)", "", "DataLoader(iterable_ds, batch_size=32)", "dataloader-worker-crash")]
        return hit("data.iterable_options", "dataloader_error", "Sampler options with an IterableDataset", cause, fixes, ("dataloader-worker-crash",), [error_fact(ctx)], 0.9)
    return None


# Categories that, raised inside a DataLoader worker, are really "your Dataset code failed".
_WORKER_GENERIC = {"python_error", "index_error", "environment_error", "unknown", "shape_mismatch", "dtype_mismatch", "serialization_error"}


@rule(
    "data.worker_exception",
    category="dataloader_error",
    docs=("dataloader-worker-crash",),
    wraps=True,
    outcomes=("data.worker_exception",),
    examples=(),
)
def worker_exception(ctx: Context, inner: RuleHit | None) -> RuleHit | None:
    """An ordinary error raised inside a DataLoader worker is a Dataset bug: say so and how to debug it.

    Specific families (CUDA in a worker, pickling, shared memory) keep their own answer; only the
    generic ones are re-framed, with the inner answer's cause and fixes kept after the worker advice.
    """
    wrapper = ctx.failure.wrapper or ""
    if not wrapper.startswith("DataLoader worker"):
        return None
    if (inner.category if inner else "unknown") not in _WORKER_GENERIC:
        return None
    first = ctx.failure.message.splitlines()[0] if ctx.failure.message else ""
    original = f"{ctx.failure.exc_type or 'An error'}: {first}".strip()
    cause = (f"The error was raised inside {wrapper}, while loading a sample (your Dataset's __getitem__, a transform or the collate_fn), "
             f"and re-raised in the main process. The original error is `{original[:300]}`." + (f" {inner.full_cause}" if inner else ""))
    fixes = [fix("Reproduce it without workers", "With num_workers=0 the same code runs in the main process: the traceback points straight at the line, and a debugger works.",
                 "loader = DataLoader(dataset, batch_size=..., num_workers=0)\nsample = dataset[i]  # call __getitem__ directly for the failing index", "dataloader-worker-crash")]
    if inner:
        fixes.extend(inner.fixes)
    docs = ("dataloader-worker-crash",) + tuple(d for d in (inner.doc_ids if inner else ()) if d != "dataloader-worker-crash")
    title = "Error inside a DataLoader worker" + (f": {inner.title}" if inner else "")
    return hit("data.worker_exception", "dataloader_error", title, cause, fixes, docs, inner.evidence if inner else (error_fact(ctx),),
               min(0.9, inner.confidence if inner else 0.8), "dataloader worker", facts=inner.facts if inner else None)
