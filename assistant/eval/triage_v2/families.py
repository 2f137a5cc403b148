"""Root-cause families of the v2 triage corpus: what the first failing process prints.

Each :class:`Family` says, from the scenario alone, what the job's truth is: its category (the
author's reading of the root cause), whether every rank hits it at once (then no rank failed
first), and the user-code locations (:class:`Site`) it is raised at. A group of the truth is
``family@site``: the same family at another site is another root cause.

The message wordings follow what PyTorch, Python, PIL, NCCL and DeepSpeed print (checked against
the PyTorch error atlas, ``assistant/atlas/data/atlas.jsonl.gz``, and the real captures of
``eval/captured/``); the numbers in them vary per job.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Site:
    """Where in the user's code the failure is raised: file, function, line, source line."""

    file: str
    function: str
    line: int
    code: str

    @property
    def label(self) -> str:
        return f"{self.file}:{self.function}"


@dataclass
class Ctx:
    """What a rendering may vary: the random stream, the checkout and site-packages paths, the rank."""

    rng: random.Random
    root: str  # the user's checkout, e.g. /home/ana/llm-ft
    sp: str  # site-packages
    rank: int | None = None
    local_rank: int = 0
    py: str = "3.10"
    old_torch: bool = False
    extra: dict = field(default_factory=dict)


Render = Callable[[Site, Ctx], list[str]]


@dataclass(frozen=True)
class Family:
    id: str
    category: str
    weight: float
    sites: tuple[Site, ...]
    render: Render
    all_ranks: bool = False  # every rank raises it at the same time: no first failing rank
    gpu: bool = True  # a failure that needs a GPU job


# ------------------------------------------------------------------------------------------------
# Traceback pieces
# ------------------------------------------------------------------------------------------------


def _f(path: str, line: int, func: str, code: str | None = None) -> list[str]:
    out = [f'  File "{path}", line {line}, in {func}']
    if code:
        out.append(f"    {code}")
    return out


def _entry(site: Site, ctx: Ctx, call: str = "train") -> list[str]:
    """The frames from the script's entry down to (not including) the site."""
    main = "train.py" if site.file != "train.py" else "train.py"
    out = ["Traceback (most recent call last):"]
    out += _f(f"{ctx.root}/{main}", 412, "<module>", "main(cfg)")
    out += _f(f"{ctx.root}/{main}", 371, "main", f"{call}(model, train_loader, optimizer, cfg)")
    if site.file != main:
        out += _f(f"{ctx.root}/{main}", 288, call, "loss = train_step(model, batch, optimizer, scaler)")
    return out


def _module_call(ctx: Ctx) -> list[str]:
    sp = ctx.sp
    if ctx.old_torch:
        return _f(f"{sp}/torch/nn/modules/module.py", 1501, "_call_impl", "return forward_call(*args, **kwargs)")
    return (_f(f"{sp}/torch/nn/modules/module.py", 1736, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)")
            + _f(f"{sp}/torch/nn/modules/module.py", 1747, "_call_impl", "return forward_call(*args, **kwargs)"))


def _at(site: Site, ctx: Ctx) -> list[str]:
    return _f(f"{ctx.root}/{site.file}", site.line + ctx.extra.get("line_shift", 0), site.function, site.code)


def _gib(rng: random.Random, lo: float, hi: float) -> str:
    return f"{rng.uniform(lo, hi):.2f} GiB"


def _oom_message(ctx: Ctx) -> str:
    r = ctx.rng
    dev = ctx.local_rank
    total = r.choice([79.10, 79.19, 39.39, 44.35, 93.02, 139.8])
    tried = r.choice(["20.00 MiB", "256.00 MiB", "1.50 GiB", _gib(r, 2, 24), "980.00 MiB"])
    free = f"{r.uniform(0.01, 1.2):.2f} GiB" if r.random() < 0.7 else f"{r.randint(3, 900)}.{r.randint(10, 99)} MiB"
    used = round(total - r.uniform(0.3, 2.0), 2)
    alloc = round(used * r.uniform(0.7, 0.95), 2)
    if ctx.old_torch:
        return (f"RuntimeError: CUDA out of memory. Tried to allocate {tried} (GPU {dev}; {total:.2f} GiB total capacity; "
                f"{alloc:.2f} GiB already allocated; {free} free; {used:.2f} GiB reserved in total by PyTorch) If reserved memory "
                "is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory "
                "Management and PYTORCH_CUDA_ALLOC_CONF")
    return (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried}. GPU {dev} has a total capacity of {total:.2f} GiB "
            f"of which {free} is free. Including non-PyTorch memory, this process has {used:.2f} GiB memory in use. Of the allocated "
            f"memory {alloc:.2f} GiB is allocated by PyTorch, and {used - alloc:.2f} GiB is reserved by PyTorch but unallocated. If reserved "
            "but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
            "See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


# ------------------------------------------------------------------------------------------------
# Renderers: the stderr of the process that raises (a full traceback, or the lines it prints)
# ------------------------------------------------------------------------------------------------


def r_oom_forward(site: Site, ctx: Ctx) -> list[str]:
    return (_entry(site, ctx) + _f(f"{ctx.root}/train.py", 231, "train_step", "logits = model(batch['input_ids'])")
            + _module_call(ctx) + _at(site, ctx) + [_oom_message(ctx)])


def r_oom_backward(site: Site, ctx: Ctx) -> list[str]:
    sp = ctx.sp
    return (_entry(site, ctx) + _at(site, ctx)
            + _f(f"{sp}/torch/_tensor.py", 581, "backward", "torch.autograd.backward(")
            + _f(f"{sp}/torch/autograd/__init__.py", 347, "backward", "_engine_run_backward(")
            + _f(f"{sp}/torch/autograd/graph.py", 825, "_engine_run_backward",
                 "return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass")
            + [_oom_message(ctx)])


def r_oom_optimizer(site: Site, ctx: Ctx) -> list[str]:
    sp = ctx.sp
    return (_entry(site, ctx) + _at(site, ctx)
            + _f(f"{sp}/torch/optim/optimizer.py", 487, "wrapper", "out = func(*args, **kwargs)")
            + _f(f"{sp}/torch/optim/optimizer.py", 91, "_use_grad", "ret = func(self, *args, **kwargs)")
            + _f(f"{sp}/torch/optim/adamw.py", 209, "step", "has_complex = self._init_group(")
            + _f(f"{sp}/torch/optim/adamw.py", 152, "_init_group",
                 'state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)')
            + [_oom_message(ctx)])


def r_oom_eval(site: Site, ctx: Ctx) -> list[str]:
    out = ["Traceback (most recent call last):"]
    out += _f(f"{ctx.root}/train.py", 412, "<module>", "main(cfg)")
    out += _f(f"{ctx.root}/train.py", 380, "main", "metrics = evaluate(model, val_loader, cfg)")
    return out + _at(site, ctx) + _module_call(ctx) + _f(f"{ctx.root}/model.py", 198, "forward", "logits = self.lm_head(x)") + _module_call(ctx) + _f(
        f"{ctx.sp}/torch/nn/modules/linear.py", 125, "forward", "return F.linear(input, self.weight, self.bias)") + [_oom_message(ctx)]


def _model_frames(site: Site, ctx: Ctx) -> list[str]:
    return _entry(site, ctx) + _f(f"{ctx.root}/train.py", 231, "train_step", "logits = model(batch['input_ids'])") + _module_call(ctx)


def r_shape_linear(site: Site, ctx: Ctx) -> list[str]:
    r = ctx.rng
    b = r.choice([16, 32, 64, 128])
    d_in, d_w = r.choice([(2048, 1024), (4096, 2048), (512, 768), (9216, 4608), (25088, 512)])
    return (_model_frames(site, ctx) + _at(site, ctx) + _module_call(ctx)
            + _f(f"{ctx.sp}/torch/nn/modules/linear.py", 125, "forward", "return F.linear(input, self.weight, self.bias)")
            + [f"RuntimeError: mat1 and mat2 shapes cannot be multiplied ({b}x{d_in} and {d_w}x{r.choice([10, 100, 1000, 256])})"])


def r_shape_view(site: Site, ctx: Ctx) -> list[str]:
    return _model_frames(site, ctx) + _at(site, ctx) + [
        "RuntimeError: view size is not compatible with input tensor's size and stride (at least one dimension spans across "
        "two contiguous subspaces). Use .reshape(...) instead."]


def r_shape_broadcast(site: Site, ctx: Ctx) -> list[str]:
    r = ctx.rng
    a = r.choice([512, 1024, 2048, 4096])
    b = r.choice([x for x in (256, 512, 1024, 2048) if x != a])
    return _model_frames(site, ctx) + _at(site, ctx) + [
        f"RuntimeError: The size of tensor a ({a}) must match the size of tensor b ({b}) at non-singleton dimension {r.choice([1, 2])}"]


def r_shape_loss(site: Site, ctx: Ctx) -> list[str]:
    r = ctx.rng
    b = r.choice([32, 64, 128, 256])
    sp = ctx.sp
    return (_entry(site, ctx) + _at(site, ctx) + _module_call(ctx)
            + _f(f"{sp}/torch/nn/modules/loss.py", 1293, "forward", "return F.cross_entropy(")
            + _f(f"{sp}/torch/nn/functional.py", 3479, "cross_entropy", "return torch._C._nn.cross_entropy_loss(")
            + [f"ValueError: Expected input batch_size ({b * r.choice([2, 4, 16])}) to match target batch_size ({b})."])


def r_dtype_half(site: Site, ctx: Ctx) -> list[str]:
    msg = ("RuntimeError: expected scalar type Float but found Half" if ctx.old_torch
           else "RuntimeError: expected mat1 and mat2 to have the same dtype, but got: float != c10::Half")
    return (_model_frames(site, ctx) + _at(site, ctx) + _module_call(ctx)
            + _f(f"{ctx.sp}/torch/nn/modules/linear.py", 125, "forward", "return F.linear(input, self.weight, self.bias)") + [msg])


def r_dtype_target(site: Site, ctx: Ctx) -> list[str]:
    sp = ctx.sp
    return (_entry(site, ctx) + _at(site, ctx) + _module_call(ctx)
            + _f(f"{sp}/torch/nn/modules/loss.py", 1293, "forward", "return F.cross_entropy(")
            + _f(f"{sp}/torch/nn/functional.py", 3479, "cross_entropy", "return torch._C._nn.cross_entropy_loss(")
            + ["RuntimeError: \"nll_loss_forward_reduce_cuda_kernel_2d_index\" not implemented for 'Float'"])


def r_device(site: Site, ctx: Ctx) -> list[str]:
    d = ctx.local_rank
    tail = ctx.rng.choice(["", " (when checking argument for argument index in method wrapper_CUDA__index_select)",
                           " (when checking argument for argument mat1 in method wrapper_CUDA_addmm)"])
    return _model_frames(site, ctx) + _at(site, ctx) + [
        f"RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:{d} and cpu!{tail}"]


def _cuda_error(kind: str) -> list[str]:
    return [f"RuntimeError: CUDA error: {kind}",
            "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.", ""]


def r_assert_nll(site: Site, ctx: Ctx) -> list[str]:
    r = ctx.rng
    lines = [f"/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [{t},0,0] "
             "Assertion `t >= 0 && t < n_classes` failed." for t in sorted(r.sample(range(32), r.randint(1, 4)))]
    return lines + (_entry(site, ctx) + _at(site, ctx) + _module_call(ctx)
                    + _f(f"{ctx.sp}/torch/nn/modules/loss.py", 1293, "forward", "return F.cross_entropy(")
                    + _cuda_error("device-side assert triggered"))


def r_assert_embedding(site: Site, ctx: Ctx) -> list[str]:
    r = ctx.rng
    lines = [f"/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [{r.randint(0, 400)},0,0], "
             f"thread: [{t},0,0] Assertion `srcIndex < srcSelectDimSize` failed." for t in sorted(r.sample(range(64, 128), r.randint(2, 6)))]
    return lines + (_model_frames(site, ctx) + _at(site, ctx) + _module_call(ctx)
                    + _f(f"{ctx.sp}/torch/nn/modules/sparse.py", 190, "forward", "return F.embedding(")
                    + _cuda_error("device-side assert triggered"))


def r_illegal(site: Site, ctx: Ctx) -> list[str]:
    return _model_frames(site, ctx) + _at(site, ctx) + _cuda_error("an illegal memory access was encountered")


def r_nan_abort(site: Site, ctx: Ctx) -> list[str]:
    step = ctx.rng.randint(300, 90000)
    return _entry(site, ctx) + _at(site, ctx) + [f"RuntimeError: Loss is NaN at step {step}, stopping training"]


def r_nan_anomaly(site: Site, ctx: Ctx) -> list[str]:
    sp = ctx.sp
    fn = ctx.rng.choice(["LogSoftmaxBackward0", "DivBackward0", "SqrtBackward0"])
    return (_entry(site, ctx) + _at(site, ctx) + _f(f"{sp}/torch/_tensor.py", 581, "backward", "torch.autograd.backward(")
            + _f(f"{sp}/torch/autograd/__init__.py", 347, "backward", "_engine_run_backward(")
            + _f(f"{sp}/torch/autograd/graph.py", 825, "_engine_run_backward", "return Variable._execution_engine.run_backward(")
            + [f"RuntimeError: Function '{fn}' returned nan values in its 0th output."])


def _worker_wrap(site: Site, ctx: Ctx, exc: str, inner: list[str], original: str) -> list[str]:
    sp = ctx.sp
    wid = ctx.rng.randint(0, 7)
    out = ["Traceback (most recent call last):"]
    out += _f(f"{ctx.root}/train.py", 412, "<module>", "main(cfg)")
    out += _f(f"{ctx.root}/train.py", 371, "main", "train(model, train_loader, optimizer, cfg)")
    out += _f(f"{ctx.root}/train.py", 279, "train", "for step, batch in enumerate(train_loader):")
    out += _f(f"{sp}/torch/utils/data/dataloader.py", 701, "__next__", "data = self._next_data()")
    out += _f(f"{sp}/torch/utils/data/dataloader.py", 1465, "_next_data", "return self._process_data(data)")
    out += _f(f"{sp}/torch/utils/data/dataloader.py", 1491, "_process_data", "data.reraise()")
    out += _f(f"{sp}/torch/_utils.py", 715, "reraise", "raise exception")
    out.append(f"{exc}: Caught {exc.rsplit('.', 1)[-1]} in DataLoader worker process {wid}.")
    out.append("Original Traceback (most recent call last):")
    out += _f(f"{sp}/torch/utils/data/_utils/worker.py", 351, "_worker_loop", "data = fetcher.fetch(index)  # type: ignore[possibly-undefined]")
    out += inner
    out.append(original)
    out.append("")
    return out


def _fetch(ctx: Ctx) -> list[str]:
    sp = ctx.sp
    return (_f(f"{sp}/torch/utils/data/_utils/fetch.py", 52, "fetch", "data = [self.dataset[idx] for idx in possibly_batched_index]")
            + _f(f"{sp}/torch/utils/data/_utils/fetch.py", 52, "<listcomp>", "data = [self.dataset[idx] for idx in possibly_batched_index]"))


def r_dl_keyerror(site: Site, ctx: Ctx) -> list[str]:
    key = ctx.rng.choice(["'Dog'", "'n02085620'", "'neutral '", "'caption'", "'label'", "'Unknown'"])
    return _worker_wrap(site, ctx, "KeyError", _fetch(ctx) + _at(site, ctx), f"KeyError: {key}")


def r_dl_collate(site: Site, ctx: Ctx) -> list[str]:
    sp = ctx.sp
    r = ctx.rng
    a, b = r.sample([224, 256, 288, 320, 384, 500, 512], 2)
    inner = (_f(f"{sp}/torch/utils/data/_utils/fetch.py", 55, "fetch", "return self.collate_fn(data)")
             + _at(site, ctx)
             + _f(f"{sp}/torch/utils/data/_utils/collate.py", 398, "default_collate", "return collate(batch, collate_fn_map=default_collate_fn_map)")
             + _f(f"{sp}/torch/utils/data/_utils/collate.py", 171, "collate", "{key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem}")
             + _f(f"{sp}/torch/utils/data/_utils/collate.py", 155, "collate", "return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)")
             + _f(f"{sp}/torch/utils/data/_utils/collate.py", 272, "collate_tensor_fn", "return torch.stack(batch, 0, out=out)"))
    return _worker_wrap(site, ctx, "RuntimeError", inner,
                        f"RuntimeError: stack expects each tensor to be equal size, but got [3, {a}, {a}] at entry 0 and [3, {b}, {b}] at entry {r.randint(1, 31)}")


def r_dl_filenotfound(site: Site, ctx: Ctx) -> list[str]:
    r = ctx.rng
    path = r.choice([f"/datasets/imagenet/train/n0{r.randint(1000000, 9999999)}/n0{r.randint(1000000, 9999999)}_{r.randint(1, 99999)}.JPEG",
                     f"/mnt/data/shards/train-{r.randint(0, 2047):05d}-of-02048.tar",
                     f"/scratch/{r.choice(['ana', 'li', 'kmr'])}/coco/train2017/{r.randint(0, 999999):012d}.jpg"])
    inner = _fetch(ctx) + _f(f"{ctx.root}/data.py", 61, "__getitem__", "img = self.load_image(self.paths[idx])") + _at(site, ctx)
    inner += _f(f"{ctx.sp}/PIL/Image.py", 3431, "open", "fp = builtins.open(filename, \"rb\")")
    return _worker_wrap(site, ctx, "FileNotFoundError", inner, f"FileNotFoundError: [Errno 2] No such file or directory: '{path}'")


def r_dl_killed(site: Site, ctx: Ctx) -> list[str]:
    pid = ctx.rng.randint(20000, 4000000)
    sp = ctx.sp
    out = [f"slurmstepd: error: Detected 1 oom_kill event in StepId={ctx.rng.randint(1000000, 9999999)}.0. Some of your processes may have been "
           "killed by the cgroup out-of-memory handler.", "Traceback (most recent call last):"]
    out += _f(f"{sp}/torch/utils/data/dataloader.py", 1133, "_try_get_data", "data = self._data_queue.get(timeout=timeout)")
    out += _f(f"/usr/lib/python{ctx.py}/multiprocessing/queues.py", 113, "get", "if not self._poll(timeout):")
    out += _f(f"/usr/lib/python{ctx.py}/multiprocessing/connection.py", 257, "poll", "return self._poll(timeout)")
    out += _f(f"/usr/lib/python{ctx.py}/multiprocessing/connection.py", 424, "_poll", "r = wait([self], timeout)")
    out += _f(f"/usr/lib/python{ctx.py}/multiprocessing/connection.py", 931, "wait", "ready = selector.select(timeout)")
    out += _f(f"/usr/lib/python{ctx.py}/selectors.py", 416, "select", "fd_event_list = self._selector.poll(timeout)")
    out += _f(f"{sp}/torch/utils/data/_utils/signal_handling.py", 67, "handler", "_error_if_any_worker_fails()")
    out.append(f"RuntimeError: DataLoader worker (pid {pid}) is killed by signal: Killed. ")
    out += ["", "The above exception was the direct cause of the following exception:", "", "Traceback (most recent call last):"]
    out += _f(f"{ctx.root}/train.py", 412, "<module>", "main(cfg)")
    out += _f(f"{ctx.root}/train.py", 371, "main", "train(model, train_loader, optimizer, cfg)")
    out += _at(site, ctx)
    out += _f(f"{sp}/torch/utils/data/dataloader.py", 701, "__next__", "data = self._next_data()")
    out += _f(f"{sp}/torch/utils/data/dataloader.py", 1448, "_next_data", "idx, data = self._get_data()")
    out += _f(f"{sp}/torch/utils/data/dataloader.py", 1412, "_get_data", "success, data = self._try_get_data()")
    out += _f(f"{sp}/torch/utils/data/dataloader.py", 1146, "_try_get_data", "raise RuntimeError(f'DataLoader worker (pid(s) {pids_str}) exited unexpectedly') from e")
    out.append(f"RuntimeError: DataLoader worker (pid(s) {pid}) exited unexpectedly")
    return out


def r_dl_shm(site: Site, ctx: Ctx) -> list[str]:
    pid = ctx.rng.randint(20000, 4000000)
    out = ["ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
           " ", "Traceback (most recent call last):"]
    out += _f(f"{ctx.root}/train.py", 412, "<module>", "main(cfg)")
    out += _at(site, ctx)
    out += _f(f"{ctx.sp}/torch/utils/data/dataloader.py", 1146, "_try_get_data", "raise RuntimeError(f'DataLoader worker (pid(s) {pids_str}) exited unexpectedly') from e")
    out.append(f"RuntimeError: DataLoader worker (pid(s) {pid}) exited unexpectedly")
    return out


def r_import(site: Site, ctx: Ctx) -> list[str]:
    mod = site.code.split()[1]
    out = ["Traceback (most recent call last):"]
    out += _f(f"{ctx.root}/train.py", 14, "<module>", "from model import GPT")
    out += _at(site, ctx)
    return out + [f"ModuleNotFoundError: No module named '{mod}'"]


def r_import_symbol(site: Site, ctx: Ctx) -> list[str]:
    out = ["Traceback (most recent call last):"]
    out += _f(f"{ctx.root}/train.py", 14, "<module>", "from model import GPT")
    out += _at(site, ctx)
    out += _f(f"{ctx.sp}/flash_attn/__init__.py", 3, "<module>", "from flash_attn.flash_attn_interface import (")
    out += _f(f"{ctx.sp}/flash_attn/flash_attn_interface.py", 10, "<module>", "import flash_attn_2_cuda as flash_attn_cuda")
    py = ctx.py.replace(".", "")
    return out + [f"ImportError: {ctx.sp}/flash_attn_2_cuda.cpython-{py}-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"]


def r_ckpt_keys(site: Site, ctx: Ctx) -> list[str]:
    r = ctx.rng
    n = r.randint(2, 40)
    missing = ", ".join(f'"transformer.h.{i}.attn.c_attn.weight"' for i in range(min(n, 4)))
    unexpected = ", ".join(f'"module.transformer.h.{i}.attn.c_attn.weight"' for i in range(min(n, 4)))
    out = ["Traceback (most recent call last):"]
    out += _f(f"{ctx.root}/train.py", 412, "<module>", "main(cfg)")
    out += _f(f"{ctx.root}/train.py", 352, "main", "start_step = load_checkpoint(model, optimizer, cfg.resume_from)")
    out += _at(site, ctx)
    out += _f(f"{ctx.sp}/torch/nn/modules/module.py", 2584, "load_state_dict", "raise RuntimeError(")
    return out + [f"RuntimeError: Error(s) in loading state_dict for {r.choice(['GPT', 'LlamaForCausalLM', 'ResNet'])}:",
                  f"\tMissing key(s) in state_dict: {missing}, ... ",
                  f"\tUnexpected key(s) in state_dict: {unexpected}, ... "]


def r_ckpt_corrupt(site: Site, ctx: Ctx) -> list[str]:
    out = ["Traceback (most recent call last):"]
    out += _f(f"{ctx.root}/train.py", 412, "<module>", "main(cfg)")
    out += _f(f"{ctx.root}/train.py", 352, "main", "start_step = load_checkpoint(model, optimizer, cfg.resume_from)")
    out += _at(site, ctx)
    out += _f(f"{ctx.sp}/torch/serialization.py", 1425, "load", "with _open_zipfile_reader(opened_file) as opened_zipfile:")
    out += _f(f"{ctx.sp}/torch/serialization.py", 751, "__init__", "super().__init__(torch._C.PyTorchFileReader(name_or_buffer))")
    return out + ["RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory"]


def r_ckpt_weights_only(site: Site, ctx: Ctx) -> list[str]:
    g = ctx.rng.choice(["numpy.core.multiarray._reconstruct", "argparse.Namespace", "omegaconf.dictconfig.DictConfig"])
    out = ["Traceback (most recent call last):"]
    out += _f(f"{ctx.root}/train.py", 412, "<module>", "main(cfg)")
    out += _at(site, ctx)
    out += _f(f"{ctx.sp}/torch/serialization.py", 1470, "load", "raise pickle.UnpicklingError(_get_wo_message(str(e))) from None")
    return out + ["_pickle.UnpicklingError: Weights only load failed. This file can still be loaded, to do so you have two options, "
                  "\x1b[1mdo those steps only if you trust the source of the checkpoint\x1b[0m. ",
                  "\t(1) In PyTorch 2.6, we changed the default value of the `weights_only` argument in `torch.load` from `False` to `True`. "
                  "Re-running `torch.load` with `weights_only` set to `False` will likely succeed, but it can result in arbitrary code "
                  "execution. Do it only if you got the file from a trusted source.",
                  "\t(2) Alternatively, to load with `weights_only=True` please check the recommended steps in the following error message.",
                  f"\tWeightsUnpickler error: Unsupported global: GLOBAL {g} was not an allowed global by default. Please use "
                  f"`torch.serialization.add_safe_globals([{g.rsplit('.', 1)[-1]}])` or the `torch.serialization.safe_globals([{g.rsplit('.', 1)[-1]}])` "
                  "context manager to allowlist this global if you trust this class/function.", "",
                  "Check the documentation of torch.load to learn more about types accepted by default with weights_only "
                  "https://pytorch.org/docs/stable/generated/torch.load.html."]


def r_no_gpu(site: Site, ctx: Ctx) -> list[str]:
    out = ["Traceback (most recent call last):"]
    out += _f(f"{ctx.root}/train.py", 412, "<module>", "main(cfg)")
    out += _at(site, ctx)
    out += _f(f"{ctx.sp}/torch/cuda/__init__.py", 399, "set_device", "torch._C._cuda_setDevice(device)")
    out += _f(f"{ctx.sp}/torch/cuda/__init__.py", 319, "_lazy_init", "torch._C._cuda_init()")
    return out + ["RuntimeError: No CUDA GPUs are available"]


def r_inplace(site: Site, ctx: Ctx) -> list[str]:
    r = ctx.rng
    sp = ctx.sp
    shape = r.choice(["[64, 512]", "[128, 1]", "[32, 256, 14, 14]", "[8, 1024, 768]"])
    op = r.choice(["ReluBackward0", "SigmoidBackward0", "AsStridedBackward0", "TBackward0"])
    return (_entry(site, ctx) + _at(site, ctx) + _f(f"{sp}/torch/_tensor.py", 581, "backward", "torch.autograd.backward(")
            + _f(f"{sp}/torch/autograd/__init__.py", 347, "backward", "_engine_run_backward(")
            + _f(f"{sp}/torch/autograd/graph.py", 825, "_engine_run_backward", "return Variable._execution_engine.run_backward(")
            + [f"RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: "
               f"[torch.cuda.FloatTensor {shape}], which is output 0 of {op}, is at version {r.randint(1, 4)}; expected version 0 "
               "instead. Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
               "torch.autograd.set_detect_anomaly(True)."])


def r_backward_twice(site: Site, ctx: Ctx) -> list[str]:
    sp = ctx.sp
    return (_entry(site, ctx) + _at(site, ctx) + _f(f"{sp}/torch/_tensor.py", 581, "backward", "torch.autograd.backward(")
            + _f(f"{sp}/torch/autograd/__init__.py", 347, "backward", "_engine_run_backward(")
            + _f(f"{sp}/torch/autograd/graph.py", 825, "_engine_run_backward", "return Variable._execution_engine.run_backward(")
            + ["RuntimeError: Trying to backward through the graph a second time (or directly access saved tensors after they have "
               "already been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). "
               "Specify retain_graph=True if you need to backward through the graph a second time or if you need to access saved "
               "tensors after calling backward."])


def r_ddp_unused(site: Site, ctx: Ctx) -> list[str]:
    r = ctx.rng
    idx = ", ".join(str(i) for i in sorted(r.sample(range(100, 400), r.randint(1, 4))))
    return (_model_frames(site, ctx)[:-len(_module_call(ctx))] + _module_call(ctx)
            + _f(f"{ctx.sp}/torch/nn/parallel/distributed.py", 1639, "forward", "inputs, kwargs = self._pre_forward(*inputs, **kwargs)")
            + _f(f"{ctx.sp}/torch/nn/parallel/distributed.py", 1528, "_pre_forward", "if torch.is_grad_enabled() and self.reducer._rebuild_buckets():")
            + ["RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error "
               "indicates that your module has parameters that were not used in producing loss. You can enable unused parameter "
               "detection by passing the keyword argument `find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, "
               "and by ",
               "making sure all `forward` function outputs participate in calculating loss. ",
               "If you already have done the above, then the distributed data parallel module wasn't able to locate the output "
               "tensors in the return value of your module's `forward` function. Please include the loss function and the structure "
               "of the return value of `forward` of your module when reporting this issue (e.g. list, dict, iterable).",
               f"Parameter indices which did not receive grad for rank {ctx.rank or 0}: {idx}",
               " In addition, you can set the environment variable TORCH_DISTRIBUTED_DEBUG to either INFO or DETAIL to print out "
               "information about which particular parameters did not receive gradient on this rank as part of this error"])


def r_cudnn(site: Site, ctx: Ctx) -> list[str]:
    return (_model_frames(site, ctx) + _at(site, ctx) + _module_call(ctx)
            + _f(f"{ctx.sp}/torch/nn/modules/conv.py", 549, "_conv_forward", "return F.conv2d(")
            + ["RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED"])


def r_cublas(site: Site, ctx: Ctx) -> list[str]:
    return (_model_frames(site, ctx) + _at(site, ctx) + _module_call(ctx)
            + _f(f"{ctx.sp}/torch/nn/modules/linear.py", 125, "forward", "return F.linear(input, self.weight, self.bias)")
            + ["RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k, "
               "&falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, compute_type, "
               "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`"])


def r_ecc(site: Site, ctx: Ctx) -> list[str]:
    return (_model_frames(site, ctx) + _at(site, ctx) + _cuda_error("uncorrectable ECC error encountered"))


def r_python_attr(site: Site, ctx: Ctx) -> list[str]:
    out = ["Traceback (most recent call last):"]
    out += _f(f"{ctx.root}/train.py", 412, "<module>", "main(cfg)")
    out += _f(f"{ctx.root}/train.py", 385, "main", "callbacks.on_epoch_end(epoch, metrics)")
    out += _at(site, ctx)
    return out + ["AttributeError: 'NoneType' object has no attribute 'item'"]


def r_python_type(site: Site, ctx: Ctx) -> list[str]:
    return (_model_frames(site, ctx) + _at(site, ctx) + _module_call(ctx)
            + ["TypeError: LlamaAttention.forward() got an unexpected keyword argument 'padding_mask'"])


def r_index_cpu(site: Site, ctx: Ctx) -> list[str]:
    out = ["Traceback (most recent call last):"]
    out += _f(f"{ctx.root}/preprocess.py", 140, "<module>", "main()")
    out += _f(f"{ctx.root}/preprocess.py", 122, "main", "feats = encode_batch(encoder, batch)")
    out += _at(site, ctx) + _module_call(ctx)
    out += _f(f"{ctx.sp}/torch/nn/modules/sparse.py", 190, "forward", "return F.embedding(")
    out += _f(f"{ctx.sp}/torch/nn/functional.py", 2551, "embedding", "return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)")
    return out + ["IndexError: index out of range in self"]


def r_nccl_init(site: Site, ctx: Ctx) -> list[str]:
    r = ctx.rng
    ip = f"10.{r.randint(0, 9)}.{r.randint(0, 255)}.{r.randint(1, 254)}"
    out = ["Traceback (most recent call last):"]
    out += _f(f"{ctx.root}/train.py", 412, "<module>", "main(cfg)")
    out += _at(site, ctx)
    out += _f(f"{ctx.sp}/torch/nn/parallel/distributed.py", 835, "__init__", "_verify_param_shape_across_processes(self.process_group, parameters)")
    out += _f(f"{ctx.sp}/torch/distributed/utils.py", 282, "_verify_param_shape_across_processes", "return dist._verify_params_across_processes(process_group, tensors, logger)")
    return out + ["torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error "
                  "(run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
                  "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
                  "Last error:",
                  f"socketStartConnect: Connect to {ip}<{r.randint(30000, 60000)}> failed : Software caused connection abort"]


def r_ds_config(site: Site, ctx: Ctx) -> list[str]:
    r = ctx.rng
    mb = r.choice([4, 8, 16])
    gas = r.choice([2, 4, 8])
    ws = ctx.extra.get("world", 8)
    out = ["Traceback (most recent call last):"]
    out += _f(f"{ctx.root}/train.py", 412, "<module>", "main(cfg)")
    out += _at(site, ctx)
    out += _f(f"{ctx.sp}/deepspeed/__init__.py", 181, "initialize", "engine = DeepSpeedEngine(args=args,")
    out += _f(f"{ctx.sp}/deepspeed/runtime/config.py", 948, "_batch_assertion", "assert train_batch == micro_batch * grad_acc * self.world_size, (")
    bad = mb * gas * ws + r.choice([8, 16, 32])
    return out + [f"AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * "
                  f"world_size {bad} != {mb} * {gas} * {ws}"]


# ------------------------------------------------------------------------------------------------
# The families
# ------------------------------------------------------------------------------------------------

S = Site
FAMILIES: tuple[Family, ...] = (
    Family("oom_forward", "cuda_oom", 9, (
        S("model.py", "forward", 142, "att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))"),
        S("layers.py", "forward", 57, "h = self.act(self.fc1(x))"),
        S("vision/backbone.py", "forward", 88, "x = self.stem(images)"),
    ), r_oom_forward),
    Family("oom_backward", "cuda_oom", 7, (S("train.py", "train_step", 236, "scaler.scale(loss).backward()"),
                                           S("train_dpo.py", "train_step", 174, "loss.backward()")), r_oom_backward),
    Family("oom_optimizer", "cuda_oom", 4, (S("train.py", "train_step", 241, "optimizer.step()"),), r_oom_optimizer),
    Family("oom_eval", "cuda_oom", 4, (S("evaluate.py", "evaluate", 48, "out = model(batch['input_ids'], labels=batch['labels'])"),), r_oom_eval),
    Family("shape_linear", "shape_mismatch", 5, (S("model.py", "forward", 77, "return self.classifier(x)"),
                                                  S("heads.py", "forward", 23, "return self.proj(feats)")), r_shape_linear),
    Family("shape_view", "shape_mismatch", 3, (S("attention.py", "forward", 96, "y = y.transpose(1, 2).view(B, T, C)"),), r_shape_view),
    Family("shape_broadcast", "shape_mismatch", 3, (S("model.py", "forward", 131, "x = tok + self.pos_emb[:, :T, :]"),), r_shape_broadcast),
    Family("shape_loss", "shape_mismatch", 3, (S("losses.py", "compute_loss", 34, "return self.ce(logits.view(-1, logits.size(-1)), targets)"),), r_shape_loss),
    Family("dtype_half", "dtype_mismatch", 3, (S("model.py", "forward", 164, "logits = self.lm_head(h)"),), r_dtype_half),
    Family("dtype_target", "dtype_mismatch", 2, (S("losses.py", "compute_loss", 41, "loss = self.ce(logits, targets)"),), r_dtype_target),
    Family("device_mismatch", "device_mismatch", 4, (S("model.py", "forward", 118, "x = self.tok_emb(idx) + self.pos_emb(pos)"),
                                                     S("rl/policy.py", "act", 66, "q = q_values.gather(1, actions)")), r_device),
    Family("assert_nll", "device_side_assert", 4, (S("losses.py", "compute_loss", 41, "loss = self.ce(logits, targets)"),), r_assert_nll),
    Family("assert_embedding", "device_side_assert", 3, (S("model.py", "forward", 112, "tok = self.tok_emb(idx)"),), r_assert_embedding),
    Family("illegal_access", "illegal_memory_access", 2, (S("kernels/fused_norm.py", "forward", 73, "fused_rmsnorm_kernel[grid](x, w, out, n_cols, eps)"),), r_illegal),
    Family("nan_abort", "nan_inf", 4, (S("train.py", "train_step", 238, 'raise RuntimeError(f"Loss is NaN at step {step}, stopping training")'),), r_nan_abort),
    Family("nan_anomaly", "nan_inf", 2, (S("train.py", "train_step", 236, "loss.backward()"),), r_nan_anomaly),
    Family("dl_keyerror", "dataloader_error", 5, (S("data.py", "__getitem__", 44, 'label = self.label_map[row["label"]]'),), r_dl_keyerror),
    Family("dl_collate", "dataloader_error", 4, (S("data.py", "collate_images", 97, "batch = default_collate(samples)"),), r_dl_collate),
    Family("dl_filenotfound", "dataloader_error", 3, (S("data.py", "load_image", 29, 'return Image.open(path).convert("RGB")'),), r_dl_filenotfound),
    Family("dl_killed", "cpu_oom", 3, (S("train.py", "train", 279, "for step, batch in enumerate(train_loader):"),), r_dl_killed),
    Family("dl_shm", "dataloader_error", 2, (S("train.py", "train", 279, "for step, batch in enumerate(train_loader):"),), r_dl_shm),
    Family("import_missing", "environment_error", 4, (S("model.py", "<module>", 9, "from flash_attn import flash_attn_func"),
                                                      S("train.py", "<module>", 21, "import wandb")), r_import, all_ranks=True),
    Family("import_symbol", "environment_error", 2, (S("model.py", "<module>", 9, "from flash_attn import flash_attn_func"),), r_import_symbol, all_ranks=True),
    Family("ckpt_keys", "state_dict_loading", 3, (S("checkpoint.py", "load_checkpoint", 31, 'model.load_state_dict(state["model"])'),), r_ckpt_keys, all_ranks=True),
    Family("ckpt_corrupt", "serialization_error", 2, (S("checkpoint.py", "load_checkpoint", 27, 'state = torch.load(path, map_location="cpu")'),), r_ckpt_corrupt, all_ranks=True),
    Family("ckpt_weights_only", "serialization_error", 2, (S("train.py", "main", 347, "state = torch.load(cfg.init_from)"),), r_ckpt_weights_only, all_ranks=True),
    Family("no_gpu", "cuda_unavailable", 1, (S("train.py", "main", 318, "torch.cuda.set_device(local_rank)"),), r_no_gpu, all_ranks=True),
    Family("inplace", "inplace_autograd", 2, (S("gan_train.py", "train_step", 102, "g_loss.backward()"),), r_inplace),
    Family("backward_twice", "backward_twice", 1, (S("train.py", "train_step", 236, "loss.backward()"),), r_backward_twice),
    Family("ddp_unused", "ddp_error", 3, (S("train.py", "train_step", 231, "logits = model(batch['input_ids'])"),), r_ddp_unused, all_ranks=True),
    Family("cudnn_exec", "cudnn_error", 1, (S("vision/backbone.py", "forward", 88, "x = self.stem(images)"),), r_cudnn),
    Family("cublas_exec", "cublas_error", 1, (S("model.py", "forward", 164, "logits = self.lm_head(h)"),), r_cublas),
    Family("ecc", "hardware_error", 2, (S("model.py", "forward", 142, "att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))"),), r_ecc),
    Family("py_attr", "python_error", 2, (S("callbacks.py", "on_epoch_end", 58, 'self.best = min(self.best, metrics["val_loss"].item())'),), r_python_attr),
    Family("py_type", "python_error", 1, (S("model.py", "forward", 203, "h = layer(h, attention_mask=mask, padding_mask=pad)"),), r_python_type),
    Family("index_cpu", "index_error", 1, (S("preprocess.py", "encode_batch", 77, "return encoder(tokens)"),), r_index_cpu, gpu=False),
    Family("nccl_init", "nccl_error", 2, (S("train.py", "main", 329, "model = DDP(model, device_ids=[local_rank])"),), r_nccl_init, all_ranks=True),
    Family("ds_batch_config", "environment_error", 1, (S("train.py", "main", 333, "engine, optimizer, _, _ = deepspeed.initialize(args=args, model=model, model_parameters=params)"),),
           r_ds_config, all_ranks=True),
)
BY_ID = {f.id: f for f in FAMILIES}

# Families whose first rank's exit leaves the others waiting in a collective (NCCL watchdog) or
# failing in it (ncclRemoteError): everything raised by one rank mid-training.
MID_TRAINING = {f.id for f in FAMILIES if not f.all_ranks and f.gpu}
