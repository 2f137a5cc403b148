"""DataLoader failures: collate errors, workers killed or crashed, shared memory, timeouts."""

from __future__ import annotations

import re

from assistant.rules.base import Context, error_fact, hit, lazy_re, remedy
from assistant.rules.registry import Example, rule
from assistant.types import Fact, Facts, Fix, RuleHit

_DOCS = ("dataloader-worker-crash", "collate-size-mismatch", "dataloader-shared-memory")
_STACK = lazy_re(r"stack expects each tensor to be equal size, but got \[([\d, ]*)\] at entry (\d+) and \[([\d, ]*)\] at entry (\d+)")
_UNBATCHABLE = lazy_re(r"(?:default_collate: )?batch must contain tensors, (?:numpy arrays, )?numbers, dicts or lists; found (?:<class '([^']+)'>|(\S+))")
_WORKER_SIGNAL = lazy_re(r"DataLoader worker \(pid(?:\(s\)|s)?\)? ?\(?([\d, ]+)\)? (?:is killed by signal: ([\w ]+)|exited unexpectedly(?: with exit code (-?\d+))?)")
_SHM = lazy_re(r"Unexpected bus error encountered in worker|insufficient shared memory \(shm\)|unable to write to file </torch_|No space left on device.*shm|/dev/shm")
_FILES = lazy_re(r"Too many open files|received 0 items of ancdata|unable to open shared memory object")
_TIMEOUT = lazy_re(r"DataLoader timed out after (\d+) seconds")
# Messages another family explains better, even though a dead worker is reported too.
_OTHER_FAMILY = lazy_re(r"Can't get attribute '\w+' on <module|Can't pickle|cannot pickle|objects cannot be pickled|Cannot re-initialize CUDA in forked subprocess")


def _in_collate(ctx: Context) -> bool:
    return any("collate" in (f.file + (f.function or "")) for f in ctx.failure.frames) or "DataLoader worker" in (ctx.failure.wrapper or "")


# A bare stack message whose report speaks of batching samples (batch_size, collate_fn, __getitem__, a *Dataset class): the DataLoader's collate.
_BATCHING_WORDS = lazy_re(r"\bbatch[ _]?size\b|collate|__getitem__|DataLoader|(?<!\w)\w*Dataset\b", re.I)


def _batching_report(ctx: Context) -> bool:
    return not ctx.failure.frames and bool(_BATCHING_WORDS.search(ctx.failure.text))


def _bare_image_stack(ctx: Context, m: re.Match[str]) -> bool:
    """A pasted stack message alone (no traceback) whose two entries are images of one channel count (1, 3 or 4) that
    differ only in height/width: batching a dataset's images is what stacks such tensors."""
    if ctx.failure.frames:
        return False
    a, b = _shape(m.group(1)), _shape(m.group(3))
    return len(a) == len(b) == 3 and a[0] == b[0] and a[0] in (1, 3, 4) and min(*a[1:], *b[1:]) >= 8 and a[1:] != b[1:]


def _sharing_context(ctx: Context) -> bool:
    """Tensors were being passed between processes (DataLoader workers, multiprocessing queues)."""
    files = " ".join(f.file for f in ctx.failure.frames)
    return bool(re.search(r"multiprocessing|dataloader|reductions\.py|resource_sharer", files)) or bool(
        ctx.search(r"DataLoader|worker|shared memory|ancdata|torch_\d+", re.I))


def _shape(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.replace(" ", "").split(",") if v)


def _worker_found(ctx: Context) -> list[Fact]:
    found = [error_fact(ctx)]
    if ctx.failure.wrapper:
        found.append(Fact("worker", f"raised inside {ctx.failure.wrapper}"))
    return found


@rule(
    'data.collate',
    category='dataloader_error',
    docs=_DOCS[1::-1],
    reads=("RuntimeError", "TypeError", "text"),
    priority=36,
    outcomes=('data.collate_sizes', 'data.collate_image_sizes', 'data.collate_channels', 'data.collate_resize_storage', 'data.collate_type', 'data.collate_pil', 'data.collate_none',
              'data.collate_lists'),
    examples=(
        Example("captured/cpu/collate-variable-length-token-ids", "data.collate_sizes"),
        Example("corpus/data/collate_gt_mask_channels_musc.txt", "data.collate_channels"),
        Example("corpus/data/collate_mask_1ch_vs_3ch_captured.txt", "data.collate_channels"),
        Example("corpus/data/collate_rgb_vs_rgba_captured.txt", "data.collate_channels"),
        Example("corpus/data/collate_gray_vs_rgb_srgan.txt", "data.collate_channels"),
        Example("realworld/dev/trmisr-collate-stack-unequal", "data.collate_image_sizes"),
        Example("captured/cpu/collate-variable-image-sizes", "data.collate_image_sizes"),
        Example("realworld/dev/kohya-getitem-stack-latents", "data.collate_image_sizes"),
        Example("realworld/dev/pytorchunet-stack-unequal-image-sizes", "data.collate_image_sizes"),
        Example("corpus/data/collate_stack_prose_batchsize_cest.txt", "data.collate_image_sizes"),
        Example("realworld/dev/captchabreak-stack-label-length-4-vs-5", "data.collate_sizes"),
        Example("realworld/dev/ssdpytorch-stack-variable-num-boxes", "data.collate_sizes"),
        Example("corpus/data/collate_stack_prose_batchsize_dsca.txt", "data.collate_sizes"),
        Example("corpus/data/collate_resize_storage_tuplan.txt", "data.collate_resize_storage"),
        Example("corpus/data/collate_custom_object.txt", "data.collate_type"),
        Example("corpus/data/collate_dataset_object_handseg.txt", "data.collate_type"),
        Example("corpus/data/collate_pil_diffsynth.txt", "data.collate_pil"),
        Example("corpus/data/collate_pil_old_wording_semseg.txt", "data.collate_pil"),
        Example("captured/cpu/collate-none-from-corrupt-sample", "data.collate_none"),
        Example("captured/cpu/collate-none-mid-batch-short-clip", "data.collate_none"),
        Example("corpus/data/collate_none_yolox.txt", "data.collate_none"),
        Example("corpus/data/collate_lists_unequal_length.txt", "data.collate_lists"),
    ),
)
def collate(ctx: Context) -> RuleHit | None:
    """default_collate could not batch the samples."""
    found = _worker_found(ctx)
    m = _STACK.search(ctx.text)
    if m and (_in_collate(ctx) or _batching_report(ctx) or _bare_image_stack(ctx, m)):
        return _collate_sizes(ctx, m, found)
    if ctx.search(r"Trying to resize storage that is not resizable") and _in_collate(ctx):
        cause = ("default_collate preallocates one block of shared memory for the whole batch, sized from the first sample, and then stacks every "
                 "sample into it; a later sample of a different size does not fit. Older PyTorch releases report mismatched sample shapes this way "
                 "(newer ones say `stack expects each tensor to be equal size`): the samples of this batch do not all have the same shape.")
        fixes = [
            remedy("collate-size-mismatch#find-differing-shapes"),
            remedy("collate-size-mismatch#same-size-or-pad"),
        ]
        return hit("data.collate_resize_storage", "dataloader_error", "DataLoader cannot stack samples of different sizes", cause, fixes, _DOCS[1::-1], found, 0.88,
                   facts=Facts(call="default_collate"))
    m = _UNBATCHABLE.search(ctx.text)
    if m:
        return _collate_type(ctx, m.group(1) or m.group(2), found)
    in_collate_code = any("collate" in (f.file + (f.function or "")) for f in ctx.failure.frames[-3:])
    if in_collate_code and ctx.exc_type in ("TypeError", "AttributeError") and ctx.search(r"NoneType"):
        return _collate_none(found, "NoneType")
    if ctx.search(r"each element in list of batch should be of equal size"):
        cause = ("Samples contain Python lists of different lengths. default_collate zips lists element by element, so every sample's list must have "
                 "the same length; variable-length data needs to become tensors and be padded in a collate_fn.")
        fixes = [remedy("collate-size-mismatch#tensors-and-pad-collate")]
        return hit("data.collate_lists", "dataloader_error", "DataLoader samples are lists of different lengths", cause, fixes, _DOCS[1::-1], found, 0.92,
                   facts=Facts(call="default_collate"))
    return None


def _collate_sizes(ctx: Context, m: re.Match[str], found: list[Fact]) -> RuleHit:
    a, b = m.group(1), m.group(3)
    sa, sb = _shape(a), _shape(b)
    found.append(Fact("shape", f"sample {m.group(2)} has shape [{a}], sample {m.group(4)} has [{b}]"))
    facts = Facts(shapes=(sa, sb), numbers={"entry_a": float(m.group(2)), "entry_b": float(m.group(4))}, call="torch.stack")
    # Same rank, same leading (channel) size and only the trailing spatial sizes differ: images (or latents) of different sizes.
    image_like = len(sa) == len(sb) == 3 and sa[0] == sb[0]
    resize = remedy("collate-size-mismatch#resize-crop-fixed")
    pad = remedy("collate-size-mismatch#pad-collate-fn")
    head = (f"The DataLoader's default collate function stacks the samples of a batch into one tensor, but sample {m.group(2)} has shape [{a}] "
            f"and sample {m.group(4)} has [{b}].")
    channel = _channel_only(sa, sb)
    if channel is not None:
        return _collate_channels(ctx, sa, sb, channel, head, found, facts)
    if image_like:
        cause = head + (f" Both have {sa[0]} channels and differ only in height/width: the images (or feature maps) come in different sizes and the "
                        "transform pipeline does not bring them to one fixed size.")
        fixes = [resize, remedy("collate-size-mismatch#bucket-or-batch-one")]
        return hit("data.collate_image_sizes", "dataloader_error", "DataLoader cannot stack images of different sizes", cause, fixes, _DOCS[1::-1], found, 0.95, facts=facts)
    cause = head + " Samples of variable length (sequences, token lists, point sets, boxes per image) cannot be stacked as they are; they need padding in a custom collate_fn."
    # The padding fix must work on these very shapes: pad_sequence pads the first dimension, so when only the last one
    # differs (samples of [1, L] from a tokenizer, [C, T] signals) the last dimension is padded instead.
    if len(sa) == len(sb) >= 2 and sa[:-1] == sb[:-1] and sa[-1] != sb[-1]:
        pad = remedy("collate-size-mismatch#pad-last-dim-collate")
    return hit("data.collate_sizes", "dataloader_error", "DataLoader cannot stack samples of different shapes", cause, [pad, resize], _DOCS[1::-1], found, 0.95, facts=facts)


# Channel counts of image modes: grayscale (1), grayscale+alpha (2), RGB (3), RGBA (4).
_MODE_CHANNELS = frozenset({1, 2, 3, 4})


def _channel_only(sa: tuple[int, ...], sb: tuple[int, ...]) -> int | None:
    """The axis (0 = channels-first, -1 = channels-last) when two image-like samples differ only in their channel count, else None."""
    if len(sa) != len(sb) or len(sa) not in (3, 4):
        return None
    diff = [i for i, (x, y) in enumerate(zip(sa, sb, strict=True)) if x != y]
    if len(diff) != 1 or {sa[diff[0]], sb[diff[0]]} - _MODE_CHANNELS:
        return None
    axis = diff[0]
    # Channels sit first in a CHW tensor (after an optional leading axis), last in an HWC array; the other two axes are a picture's
    # height and width (a few pixels at least), which keeps short [items, steps, features] samples out.
    if axis == len(sa) - 3 and min(sa[-2:]) >= 8:
        return 0
    if axis == len(sa) - 1 and min(sa[-3:-1]) >= 8:
        return -1
    return None


def _collate_channels(ctx: Context, sa: tuple[int, ...], sb: tuple[int, ...], axis: int, head: str, found: list[Fact], facts: Facts) -> RuleHit:
    """Samples that differ only in the number of channels: images (or masks) of different colour modes in one dataset."""
    ca, cb = (sa[axis], sb[axis]) if axis == -1 else (sa[len(sa) - 3], sb[len(sb) - 3])
    names = {1: "grayscale (1 channel)", 2: "grayscale with alpha (2 channels)", 3: "RGB (3 channels)", 4: "RGBA (4 channels)"}
    cause = head + (f" They differ only in the channel dimension ({ca} vs {cb}): the samples mix colour modes, {names[min(ca, cb)]} and "
                    f"{names[max(ca, cb)]}. Files of one dataset are often stored in different modes (some images or masks saved as grayscale, "
                    "others as RGB or with an alpha channel), and a field converted on one path may be left as read on another, so every "
                    "field of the sample (images and masks/targets alike) needs one fixed mode.")
    fixes = [
        remedy("collate-size-mismatch#convert-one-mode"),
        remedy("collate-size-mismatch#fix-channel-count"),
        remedy("collate-size-mismatch#find-differing-modes"),
    ]
    return hit("data.collate_channels", "dataloader_error", "DataLoader cannot stack samples with different channel counts", cause, fixes, _DOCS[1::-1],
               found, 0.95, facts=facts)


def _collate_none(found: list[Fact], found_type: str) -> RuleHit:
    cause = ("A sample (or a field of a sample) is None: Dataset.__getitem__ returned None for some index, e.g. a failed file read that was caught "
             "and ignored, a missing label, or a code path without a return statement. default_collate cannot batch None.")
    fixes = [
        remedy("collate-size-mismatch#getitem-never-none"),
        remedy("collate-size-mismatch#skip-none-collate"),
    ]
    return hit("data.collate_none", "dataloader_error", "DataLoader got a None sample", cause, fixes, _DOCS[1::-1], found, 0.92,
               facts=Facts(names=(found_type,), call="default_collate"))


def _collate_type(ctx: Context, found_type: str, found: list[Fact]) -> RuleHit:
    found.append(Fact("type", f"unbatchable sample type: {found_type}"))
    if "NoneType" in found_type:
        return _collate_none(found, found_type)
    facts = Facts(names=(found_type,), call="default_collate")
    if "PIL" in found_type or found_type.endswith("Image"):
        cause = (f"Samples are {found_type} objects: the transform given to the Dataset has no ToTensor()/PILToTensor() (or no transform is applied "
                 "on this path), so images reach the DataLoader unconverted.")
        fixes = [remedy("collate-size-mismatch#end-with-totensor")]
        return hit("data.collate_pil", "dataloader_error", "DataLoader got PIL images instead of tensors", cause, fixes, _DOCS[1::-1], found, 0.93, facts=facts)
    cause = (f"A sample contains a `{found_type}` object, which default_collate does not know how to batch (it handles tensors, numpy arrays, numbers, "
             "strings, and dicts/lists/tuples of those). Return plain tensors from __getitem__, or pass a collate_fn that handles this type.")
    fixes = [remedy("collate-size-mismatch#collate-custom-type")]
    return hit("data.collate_type", "dataloader_error", f"DataLoader cannot batch {found_type}", cause, fixes, _DOCS[1::-1], found, 0.9, facts=facts)


@rule(
    'data.worker_died',
    category='dataloader_error',
    docs=("dataloader-worker-crash", "dataloader-worker-oom", "dataloader-shared-memory"),
    reads=("RuntimeError", "OSError", "text"),
    priority=37,
    also=('cpu_oom',),
    outcomes=('data.worker_crash', 'data.worker_segfault', 'data.shm', 'data.too_many_files', 'data.timeout', 'data.worker_oom', 'data.win_pagefile',
              'data.pin_memory_thread'),
    examples=(
        Example("corpus/data/worker_terminated_mmseg.txt", "data.worker_crash"),
        Example("realworld/dev/loeber-tutorial-worker-exited-windows", "data.worker_crash"),
        Example("realworld/dev/basnet-test-worker-exited-num-workers", "data.worker_crash"),
        Example("corpus/data/worker_exited_pids_scgan.txt", "data.worker_crash"),
        Example("corpus/data/worker_exited_pids_chinesenre.txt", "data.worker_crash"),
        Example("corpus/data/worker_segfault_native_getitem.txt", "data.worker_segfault"),
        Example("corpus/data/worker_segfault_pysot.txt", "data.worker_segfault"),
        Example("corpus/data/worker_segfault_ctracker.txt", "data.worker_segfault"),
        Example("realworld/dev/codalab-shm-bus-error", "data.shm"),
        Example("realworld/dev/reppoints-shm-bus-error-ipc-host", "data.shm"),
        Example("corpus/data/worker_sigbus_during_getitem.txt", "data.shm"),
        Example("corpus/data/shm_write_no_space_nnunet.txt", "data.shm"),
        Example("corpus/data/shm_write_no_space_eslam.txt", "data.shm"),
        Example("corpus/data/ancdata_fd_limit_smoke.txt", "data.too_many_files"),
        Example("corpus/data/ancdata_fd_limit_m6anet.txt", "data.too_many_files"),
        Example("corpus/data/shared_memory_object_fd_maskrcnn.txt", "data.too_many_files"),
        Example("corpus/data/shared_memory_object_nowcasting.txt", "data.too_many_files"),
        Example("captured/cpu/dataloader-timeout-slow-getitem", "data.timeout"),
        Example("realworld/dev/pytorch-8976-worker-killed-chained", "data.worker_oom"),
        Example("corpus/data/worker_sigkill_during_getitem.txt", "data.worker_oom"),
        Example("corpus/data/worker_killed_dcpdn.txt", "data.worker_oom"),
        Example("corpus/data/worker_killed_rlvigen.txt", "data.worker_oom"),
        Example("corpus/data/win_pagefile_dataloader_kair.txt", "data.win_pagefile"),
        Example("corpus/data/win_pagefile_spawn_weclip.txt", "data.win_pagefile"),
        Example("corpus/data/win_pagefile_cudnn_dll_diffsvc.txt", "data.win_pagefile"),
        Example("corpus/data/pin_memory_thread_mmagic.txt", "data.pin_memory_thread"),
        Example("corpus/data/pin_memory_thread_thawslump.txt", "data.pin_memory_thread"),
        Example("corpus/data/pin_memory_thread_yolofastest.txt", "data.pin_memory_thread"),
    ),
)
def worker_died(ctx: Context) -> RuleHit | None:
    """Workers killed by signals, bus errors from /dev/shm, file-descriptor limits, timeouts."""
    pagefile = ctx.search(r"WinError 1455|paging file is too small")
    if pagefile:
        return _win_pagefile(ctx)
    m = _WORKER_SIGNAL.search(ctx.text)
    shm = _SHM.search(ctx.text)
    files = _FILES.search(ctx.text)
    timeout = _TIMEOUT.search(ctx.text)
    if files and not _sharing_context(ctx):
        files = None  # a plain "Too many open files" outside multiprocessing is not a DataLoader problem
    if _OTHER_FAMILY.search(ctx.text):
        return None
    if not (m or shm or files or timeout):
        # The pin-memory thread's death is reported alone when no worker signal or resource message explains it.
        return _pin_memory_thread(ctx) if ctx.search(r"Pin memory thread exited unexpectedly") else None
    found = _worker_found(ctx)
    sig = (m.group(2) or "").strip() if m else ""
    if shm or sig.startswith("Bus"):
        return _shm(ctx, found, sig)
    if files:
        return _too_many_files(ctx, found, files.group(0))
    if timeout:
        return _timeout(ctx, found, int(timeout.group(1)))
    assert m is not None
    pids, code = m.group(1).strip(), m.group(3)
    found.append(Fact("worker", f"worker pid(s) {pids}: " + (f"killed by signal {sig}" if sig else f"exited unexpectedly{f' with code {code}' if code else ''}")))
    facts = Facts(numbers={"exit_code": float(code)} if code else {}, names=(sig,) if sig else ())
    if sig.startswith("Killed") or code in ("-9", "137"):
        return _worker_oom(ctx, found, facts)
    if sig.startswith("Segmentation") or ctx.search(r"Unexpected segmentation fault encountered in worker"):
        return _worker_segfault(ctx, found, facts)
    return _worker_crash(ctx, found, facts, sig, code)


def _shm(ctx: Context, found: list[Fact], sig: str) -> RuleHit:
    cause = ("A DataLoader worker could not place a batch in shared memory: workers hand batches to the main process through /dev/shm, and it is full "
             + ("(the worker died with a bus error while writing there). " if sig.startswith("Bus") or ctx.search(r"bus error") else "(writing the batch file failed). ")
             + "Containers get a small /dev/shm by default (Docker: 64 MB), far less than a few prefetched batches of images need.")
    fixes = [
        remedy("dataloader-shared-memory#container-shm-size"),
        remedy("dataloader-shared-memory#less-in-shm"),
        remedy("dataloader-shared-memory#file-system-strategy-shm"),
    ]
    return hit("data.shm", "dataloader_error", "DataLoader worker: insufficient shared memory", cause, fixes, ("dataloader-shared-memory", "dataloader-worker-crash"),
               found, 0.93, facts=Facts(names=(sig,) if sig else ()))


def _too_many_files(ctx: Context, found: list[Fact], what: str) -> RuleHit:
    cause = ("Worker processes pass every batch to the main process as shared-memory handles sent over file descriptors, and this process ran out "
             f"of them (`{what}`): the per-process open-file limit (ulimit -n) is too low for the number of workers and tensors in flight, or "
             "batches are kept alive (e.g. appended to a list) so their descriptors are never released.")
    fixes = [
        remedy("dataloader-shared-memory#file-system-strategy"),
        remedy("dataloader-shared-memory#raise-ulimit"),
        remedy("dataloader-shared-memory#clone-kept-batches"),
    ]
    return hit("data.too_many_files", "dataloader_error", "DataLoader: out of file descriptors for shared memory", cause, fixes, ("dataloader-shared-memory",), found, 0.9,
               facts=Facts(names=(what,)))


def _timeout(ctx: Context, found: list[Fact], seconds: int) -> RuleHit:
    cause = (f"No batch arrived from the workers within {seconds} s (the DataLoader's timeout): a worker is stuck or very slow — blocking I/O on "
             "network storage, a deadlock after fork (threads or locks held in the parent), or an expensive __getitem__.")
    fixes = [
        remedy("dataloader-worker-crash#debug-num-workers-0"),
        remedy("dataloader-worker-crash#timeout-if-slow", timeout=seconds),
    ]
    return hit("data.timeout", "dataloader_error", "DataLoader timed out", cause, fixes, ("dataloader-worker-crash",), found, 0.88, facts=Facts(numbers={"timeout_s": float(seconds)}))


def _worker_oom(ctx: Context, found: list[Fact], facts: Facts) -> RuleHit:
    cause = ("A DataLoader worker was killed with SIGKILL and left no Python error. A SIGKILL nobody sent by hand almost always comes from the Linux OOM "
             "killer (or a container/cgroup or job-scheduler memory limit): host RAM ran out. Every worker holds its own copy of what the Dataset "
             "references — large Python lists or dicts are copied page by page as reference counts are touched (copy-on-read) — plus its prefetched batches.")
    fixes: list[Fix] = [
        remedy("dataloader-worker-oom#confirm-oom-killer"),
        remedy("dataloader-worker-oom#fewer-workers-prefetch"),
        remedy("dataloader-worker-oom#numpy-metadata"),
        remedy("dataloader-worker-oom#load-lazily"),
    ]
    return hit("data.worker_oom", "dataloader_error", "DataLoader worker killed (out of host memory)", cause, fixes, ("dataloader-worker-oom", "dataloader-worker-crash", "cpu-oom"),
               found, 0.9, facts=facts)


def _pin_memory_thread(ctx: Context) -> RuleHit:
    unpack = bool(re.search(r"not enough values to unpack \(expected 2, got 0\)", ctx.failure.text))
    cause = ("The DataLoader's pin-memory thread (it copies each batch into page-locked memory when pin_memory=True) stopped, and the main loop found "
             "it dead. " + ("Its own traceback above fails with `not enough values to unpack (expected 2, got 0)` in `_pin_memory_loop`, a known defect "
                           "of some older PyTorch releases when workers are kept alive between epochs." if unpack else
                           "Common reasons: the process ran out of file descriptors or shared memory while receiving batches from the workers, or a "
                           "defect of some older releases when workers are kept alive between epochs (persistent_workers)."))
    fixes = [
        remedy("dataloader-shared-memory#disable-pin-memory"),
        remedy("dataloader-shared-memory#file-system-strategy-fds"),
    ]
    return hit("data.pin_memory_thread", "dataloader_error", "DataLoader pin-memory thread died", cause, fixes, ("dataloader-shared-memory", "dataloader-worker-crash"),
               [error_fact(ctx)], 0.8, facts=Facts(names=("pin_memory",), flags=frozenset({"unpack_bug"}) if unpack else frozenset()))


def _win_pagefile(ctx: Context) -> RuleHit:
    dll = re.search(r'Error loading "([^"]+)"', ctx.text)
    name = dll.group(1).replace("\\", "/").rsplit("/", 1)[-1] if dll else None
    spawned = any("spawn.py" in f.file or "dataloader.py" in f.file for f in ctx.failure.frames) or bool(ctx.search(r"DataLoader|worker", re.I))
    cause = ("Windows ran out of virtual memory (RAM plus page file) while a process was starting" + (f" and loading `{name}`" if name else "") + ". "
             "On Windows every DataLoader worker is a new process that imports torch again and reserves memory for its large CUDA libraries, so "
             + ("the spawned process in this traceback and its siblings" if spawned else "several workers (or several training processes)")
             + " together exceed the commit limit long before the GPU or the data are the problem.")
    fixes = [
        remedy("dataloader-worker-oom#fewer-workers-windows"),
        remedy("dataloader-worker-oom#windows-page-file"),
        remedy("spawn-pickling#guard-entry-windows-memory"),
    ]
    return hit("data.win_pagefile", "cpu_oom", "Windows page file exhausted while starting worker processes", cause, fixes, ("dataloader-worker-oom", "cpu-oom"),
               [error_fact(ctx)], 0.88, facts=Facts(names=(name,) if name else (), flags=frozenset({"windows"})))


def _worker_segfault(ctx: Context, found: list[Fact], facts: Facts) -> RuleHit:
    cause = ("A DataLoader worker crashed with a segmentation fault, in native code rather than in Python: an image/video decoder or other C extension "
             "(OpenCV, PIL plug-ins, h5py, audio libraries), a library that is not safe to use after fork (threads started in the parent), or a CUDA call "
             "made inside the worker. The worker's own stack is lost because the process died.")
    fixes = [
        remedy("dataloader-worker-crash#faulthandler-num-workers-0"),
        remedy("dataloader-worker-crash#limit-native-threads"),
        remedy("dataloader-worker-crash#check-crashing-sample"),
    ]
    return hit("data.worker_segfault", "dataloader_error", "DataLoader worker crashed (segmentation fault)", cause, fixes, ("dataloader-worker-crash",), found, 0.85, facts=facts)


def _worker_crash(ctx: Context, found: list[Fact], facts: Facts, sig: str, code: str | None) -> RuleHit:
    how = f"was stopped by signal {sig}" if sig else (f"exited with code {code}" if code else "exited")
    cause = (f"A DataLoader worker {how} without passing an error back to the main process. "
             + ("SIGTERM comes from outside the worker: a job scheduler or container stopping the run (time or memory limit), or the main process "
                "shutting its workers down after another failure." if sig.startswith("Terminated")
                else "Look above this traceback for the worker's own output: a worker that fails while starting up (importing the script, unpickling the "
                "Dataset) prints its error there before exiting. If nothing was printed, the worker was most likely killed for using too much host "
                "memory or crashed in native code; the kernel log (dmesg) tells which."))
    windows = bool(ctx.search(r"[A-Z]:[\\/]\w|WinError|Windows|Anaconda3\\"))
    if windows:
        # On Windows workers are spawned: each re-imports the script and unpickles the Dataset, so start-up failures are common.
        cause += (" The paths show Windows, where workers are started with spawn: each one re-imports the script (it needs an "
                  "`if __name__ == '__main__':` guard) and receives a pickled copy of the Dataset, and each costs a full torch import in memory.")
    fixes = [
        remedy("dataloader-worker-crash#reproduce-num-workers-0"),
        remedy("dataloader-worker-crash#check-scheduler-logs"),
    ]
    if windows:
        fixes[1] = remedy("spawn-pickling#guard-entry-few-workers")
    return hit("data.worker_crash", "dataloader_error", "DataLoader worker died", cause, fixes, ("dataloader-worker-crash",), found, 0.8, facts=facts)


@rule(
    'data.dataset_misc',
    category='dataloader_error',
    docs=("dataloader-options", "files-and-permissions"),
    reads=("ValueError", "text"),
    priority=38,
    outcomes=('data.empty', 'data.iterable_options', 'data.sampler_conflict', 'data.worker_options'),
    examples=(
        Example("corpus/data/empty_dataset_shuffle.txt", "data.empty"),
        Example("corpus/data/iterable_dataset_shuffle.txt", "data.iterable_options"),
        Example("corpus/data/sampler_with_shuffle.txt", "data.sampler_conflict"),
        Example("corpus/data/prefetch_factor_without_workers.txt", "data.worker_options"),
        Example("corpus/data/persistent_workers_without_workers.txt", "data.worker_options"),
    ),
)
def dataset_misc(ctx: Context) -> RuleHit | None:
    """Empty datasets and other DataLoader configuration errors."""
    if ctx.search(r"num_samples should be a positive integer value, but got num_samples=0"):
        cause = ("The Dataset is empty (len(dataset) == 0), so the shuffling sampler has nothing to draw from: the data path, file pattern, split name "
                 "or filter matched no samples.")
        fixes = [remedy("dataloader-options#check-dataset-length")]
        return hit("data.empty", "dataloader_error", "Empty dataset", cause, fixes, ("dataloader-options", "files-and-permissions"), [error_fact(ctx)], 0.92,
                   facts=Facts(numbers={"num_samples": 0.0}))
    m = ctx.search(r"DataLoader with IterableDataset: expected unspecified (sampler|shuffle|batch_sampler) option")
    if m:
        cause = (f"An IterableDataset decides its own order, so the DataLoader's `{m.group(1)}` option cannot be used with it. Shuffle inside the iterable "
                 "(for example with a shuffle buffer) instead.")
        fixes = [remedy("dataloader-options#iterable-no-sampler", argument=m.group(1))]
        return hit("data.iterable_options", "dataloader_error", "Sampler options with an IterableDataset", cause, fixes, ("dataloader-options",), [error_fact(ctx)], 0.9,
                   facts=Facts(argument=m.group(1)))
    m = ctx.search(r"(sampler|batch_sampler) option is mutually exclusive with ([\w, ]+)")
    if m:
        cause = (f"The DataLoader was given `{m.group(1)}` together with `{m.group(2).strip()}`. A sampler decides the order (and a batch sampler the batches), "
                 "so shuffle=True, batch_size, sampler or drop_last passed next to it conflict with it.")
        fixes = [remedy("dataloader-options#keep-sampler-only", argument=m.group(1))]
        return hit("data.sampler_conflict", "dataloader_error", f"DataLoader: {m.group(1)} conflicts with other options", cause, fixes, ("dataloader-options",), [error_fact(ctx)], 0.9,
                   facts=Facts(argument=m.group(1), names=tuple(a.strip() for a in m.group(2).split(",") if a.strip())))
    m = ctx.search(r"(prefetch_factor|persistent_workers) option (?:could only be specified in multiprocessing|needs num_workers > 0)")
    if m:
        cause = (f"`{m.group(1)}` only applies to worker processes, but the DataLoader runs with num_workers=0 (loading in the main process). Either "
                 "start workers or leave the option at its default.")
        fixes = [remedy("dataloader-options#workers-for-prefetch-factor" if m.group(1) == "prefetch_factor" else "dataloader-options#workers-for-persistent-workers")]
        return hit("data.worker_options", "dataloader_error", f"DataLoader: {m.group(1)} without workers", cause, fixes, ("dataloader-options",), [error_fact(ctx)], 0.9,
                   facts=Facts(argument=m.group(1), numbers={"num_workers": 0.0}))
    return None


# The DataLoader's own code needs an int from len(dataset) (range, isinstance checks in the samplers).
_WRONG_TYPE = lazy_re(r"'(\w+)' object cannot be interpreted as an integer|object of type '(\w+)' has no len\(\)")


@rule(
    'data.dataset_method_type',
    category='dataloader_error',
    docs=("dataset-index-errors", "dataloader-options"),
    reads=("TypeError", "text"),
    priority=86,
    outcomes=('data.len_wrong_type',),
    examples=(
        Example("corpus/data/dataset_len_float_sampler_captured.txt", "data.len_wrong_type"),
        Example("corpus/data/dataset_len_float_random_sampler_captured.txt", "data.len_wrong_type"),
    ),
)
def dataset_method_type(ctx: Context) -> RuleHit | None:
    """A TypeError raised in torch.utils.data's own frames on len(dataset): the Dataset's __len__ returned the wrong type."""
    m = _WRONG_TYPE.search(ctx.message or "")
    frames = ctx.failure.frames
    if not m or not frames:
        return None
    last = frames[-1]
    if "torch/utils/data/" not in last.file.replace("\\", "/") or "len(" not in (last.source or ""):
        return None
    got = m.group(1) or m.group(2)
    dataset_class = None
    if m.group(2) and m.group(2) not in ("NoneType", "float", "int"):
        dataset_class = m.group(2)  # `object of type 'MyDataset' has no len()`: the class defines no __len__
    cause = (f"The DataLoader's sampler called len() on the Dataset and got a `{got}` where Python needs an int "
             f"(`{(last.source or '').strip()}` in {last.file.replace(chr(92), '/').rsplit('/', 1)[-1]}). The error is raised in PyTorch's "
             "code, but the value comes from the Dataset: its `__len__` " + ("is not defined." if dataset_class else
             "returns a float (a `/` division), None or another non-integer value."))
    fixes = [remedy("dataset-index-errors#len-returns-int"), remedy("dataset-index-errors#num-workers-zero")]
    return hit("data.len_wrong_type", "dataloader_error", "Dataset __len__ does not return an int", cause, fixes,
               ("dataset-index-errors", "dataloader-options"), [error_fact(ctx)], 0.88, facts=Facts(names=(got,)))


# A GPU described as idle / barely used ...
_GPU_IDLE = lazy_re(r"GPU[- ]?Util(?:i[sz]ation|ity)?\b[^.\n]{0,60}?(?:\b0\b|\b0 ?%|zero|very low|\blow\b)|(?:\blow|zero|0 ?%) GPU[- ]?util|GPU (?:is |was )?(?:idle|waiting|starv)", re.I)
# ... while the words blame loading the data.
_LOADING = lazy_re(r"data ?loader|data loading|load(?:s|ing)? (?:the |train(?:ing)? )?data|__getitem__|_sample\b|collat|waiting for (?:the )?data|\bI/?O\b", re.I)


@rule(
    'data.input_bottleneck',
    category='dataloader_error',
    docs=("dataloader-input-bottleneck", "dataloader-options"),
    reads=("text",),
    priority=39,
    outcomes=('data.input_bottleneck',),
    examples=(
        Example("realworld/dev/ge2e-gpu-util-zero-compressed-feats", "data.input_bottleneck"),
        Example("corpus/data/input_bottleneck_gpu_zero_transfuser.txt", "data.input_bottleneck"),
        Example("corpus/data/input_bottleneck_gpu_util_low_retinanet.txt", "data.input_bottleneck"),
        Example("corpus/data/input_bottleneck_waiting_for_data_barc.txt", "data.input_bottleneck"),
    ),
)
def input_bottleneck(ctx: Context) -> RuleHit | None:
    """A description (no error) of an idle GPU that the user ties to data loading: the input pipeline is the bottleneck."""
    failure = ctx.failure
    if failure.exc_type or failure.frames or failure.cuda_asserts:
        return None  # an error message is explained by the message rules
    text = failure.text or ctx.text
    idle, loading = _GPU_IDLE.search(text), _LOADING.search(text)
    if not (idle and loading):
        return None
    cause = ("No error: the GPU waits for data. Each step's batch takes longer to produce on the CPU (reading and decoding files, decompressing, "
             "augmenting, collating) than the GPU needs to process it, so the GPU sits idle between batches and its utilisation reads near 0%.")
    fixes = [
        remedy("dataloader-input-bottleneck#time-loading-vs-step"),
        remedy("dataloader-input-bottleneck#parallel-loading"),
        remedy("dataloader-input-bottleneck#cheap-samples"),
    ]
    found = [Fact("symptom", f"{idle.group(0).strip()} … {loading.group(0).strip()}")]
    return hit("data.input_bottleneck", "dataloader_error", "GPU idle: data loading is the bottleneck", cause, fixes, ("dataloader-input-bottleneck", "dataloader-options"),
               found, 0.7, facts=Facts(names=(idle.group(0).strip(), loading.group(0).strip())))


# Categories that, raised inside a DataLoader worker, are really "your Dataset code failed".
_WORKER_GENERIC = {"python_error", "index_error", "environment_error", "unknown", "shape_mismatch", "dtype_mismatch", "serialization_error"}


@rule(
    "data.worker_exception",
    category="dataloader_error",
    docs=("dataloader-worker-crash",),
    reads=("any",),  # it re-frames the answer to any failure raised inside a DataLoader worker
    wraps=True,
    outcomes=("data.worker_exception",),
    examples=(
        Example("captured/cpu/dataloader-worker-keyerror-label-map", "data.worker_exception"),
        Example("realworld/dev/fashionai-old-worker-attributeerror-py27", "data.worker_exception"),
        Example("realworld/dev/ssd-old-worker-attributeerror-format", "data.worker_exception"),
        Example("realworld/dev/selfcritical-old-worker-keyerror-escaped", "data.worker_exception"),
        Example("corpus/data/worker_indexerror_len_mismatch.txt", "data.worker_exception"),
        Example("corpus/data/worker_filenotfound_relative_path.txt", "data.worker_exception"),
    ),
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
    fixes = [remedy("dataloader-worker-crash#reproduce-without-workers")]
    if re.search(r"'NoneType' object (?:has no attribute|is not subscriptable)", first):
        # Inside __getitem__ a None usually comes from a reader that signals failure by returning None.
        fixes.append(remedy("dataloader-worker-crash#check-none-value"))
    if inner:
        fixes.extend(inner.fixes)
    docs = ("dataloader-worker-crash",) + tuple(d for d in (inner.doc_ids if inner else ()) if d != "dataloader-worker-crash")
    title = "Error inside a DataLoader worker" + (f": {inner.title}" if inner else "")
    return hit("data.worker_exception", "dataloader_error", title, cause, fixes, docs, inner.evidence if inner else (error_fact(ctx),),
               min(0.9, inner.confidence if inner else 0.8), "dataloader worker", facts=inner.facts if inner else Facts(names=(ctx.failure.exc_type or "",)))
