"""Tensors on different devices, and CUDA that is not there at all."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from assistant.parse.messages import tensor_type_parts
from assistant.rules.base import Context, error_fact, hit, lazy_re, remedy
from assistant.rules.base import with_location as _loc
from assistant.rules.dispatch import TORCH_OP
from assistant.rules.registry import Example, rule
from assistant.types import Fact, Facts, Fix, RuleHit

_SAME_DEVICE = lazy_re(
    r"Expected all tensors to be on the same device, but (?:found at least two devices\s*, (?P<a>[\w:]+) and (?P<b>[\w:]+)"
    r"|got (?P<arg>\w+) is on (?P<c>[\w:]+), different from other tensors on (?P<d>[\w:]+)"
    r"|found at least two devices \(when checking argument for argument (?P<arg2>\w+))"
)
# Older wording (torch.cat / torch.stack on CUDA, about 1.5-1.9): "All input tensors must be on the same device. Received cuda:0 and cpu".
_ALL_INPUTS = lazy_re(r"All input tensors must be on the same device\. Received (?P<a>[\w:]+) and (?P<b>[\w:]+)", re.I)
_ARG_FOR = lazy_re(r"when checking argument for argument (\w+)")
_TYPE_PAIR = lazy_re(r"Input type \((?P<inp>torch\.[\w.]+|\w+)\) and (?P<what>weight|bias) type \((?P<w>torch\.[\w.]+|\w+)\) should be the same")
_OLD_DEVICE = lazy_re(
    r"(?:Expected object of device type (?P<want>\w+) but got )?device type (?P<got>\w+) for argument #(?P<n>\d+) '(?P<arg>\w+)'"
    r"|Expected object of backend (?P<want2>\w+) but got backend (?P<got2>\w+) for argument #(?P<n2>\d+) '(?P<arg2>\w+)'"
)
_EXPECTED_DEVICE = lazy_re(r"Tensor on device (\S+) is not on the expected device (\S+?)!")
_DEVICE_TYPE = lazy_re(r"Expected tensor to have (\w+) DeviceType, but got tensor with (\w+) DeviceType")
_INDICES = lazy_re(r"indices should be either on (\w+) or on the same device as the indexed tensor \((\w+)\)")
_DATAPARALLEL = lazy_re(r"module must have its parameters and buffers on device (\S+) \(device_ids\[0\]\) but found one of them on device: (\S+)")
_GENERATOR = lazy_re(r"Expected a '(\w+)' device type for generator but found '(\w+)'")
_RNN_HIDDEN = lazy_re(r"Input and hidden tensors are not at the same device, found input tensor at (\S+) and hidden tensor at (\S+)")
_CUDA_NUMPY = lazy_re(r"can't convert (\S+?)(?: device type)? tensor to numpy")
# Factory functions that create a tensor on the default (CPU) device unless given device=.
# (*_like factories inherit the device of their argument, so they are not listed.)
_FACTORY = lazy_re(r"torch\.(arange|zeros|ones|full|empty|randn|rand|randint|randperm|tensor|as_tensor|from_numpy|eye|linspace)\((?![^)]*device\s*=)")
_SELF_CALLS = lazy_re(r"self\.([A-Za-z_]\w*)\s*\(")
_LAYER_KINDS = ("Linear", "Conv", "Embedding", "RNN/LSTM/GRU", "BatchNorm", "LayerNorm", "Transformer", "MultiheadAttention")


@dataclass(frozen=True)
class _Pair:
    """The two devices a message names and the argument it blames (any part may be unknown)."""

    a: str | None  # the odd one out (the blamed argument's device when the message names one)
    b: str | None  # the device the other operands are on
    arg: str | None
    kind: str = "operands"  # operands | index | generator | module | hidden


def _read_pair(ctx: Context) -> _Pair | None:
    """The devices of a device-mismatch message, in every wording generation; None when the text is not one."""
    m = _SAME_DEVICE.search(ctx.text)
    if m:
        arg = m.group("arg") or m.group("arg2")
        if not arg:
            extra = _ARG_FOR.search(ctx.text)
            arg = extra.group(1) if extra else None
        return _Pair(m.group("a") or m.group("c"), m.group("b") or m.group("d"), arg)
    if m := _ALL_INPUTS.search(ctx.text):
        return _Pair(m.group("a"), m.group("b"), None)
    t = _TYPE_PAIR.search(ctx.text)
    if t:
        (_, dev_i), (_, dev_w) = tensor_type_parts(t.group("inp")), tensor_type_parts(t.group("w"))
        if dev_i == dev_w:
            return None  # same device, different dtype: the dtype rule explains it
        return _Pair(dev_i, dev_w, "input")
    o = _OLD_DEVICE.search(ctx.text)
    if o:
        a = (o.group("got") or o.group("got2") or "").lower()
        b = (o.group("want") or o.group("want2") or ("cuda" if a == "cpu" else "cpu")).lower()
        return _Pair(a, b, o.group("arg") or o.group("arg2"))
    if m := _EXPECTED_DEVICE.search(ctx.text):
        return _Pair(m.group(1), m.group(2), None)
    if m := _DEVICE_TYPE.search(ctx.text):
        return _Pair(m.group(2).lower(), m.group(1).lower(), None)
    if m := _INDICES.search(ctx.text):
        return _Pair(None, m.group(2), "indices", "index")
    if m := _DATAPARALLEL.search(ctx.text):
        return _Pair(m.group(2), m.group(1), "module", "module")
    if m := _GENERATOR.search(ctx.text):
        return _Pair(m.group(2), m.group(1), "generator", "generator")
    if m := _RNN_HIDDEN.search(ctx.text):
        return _Pair(m.group(2), m.group(1), "hidden", "hidden")
    if ctx.search(r"Placeholder storage has not been allocated on MPS device"):
        # Apple-GPU wording of a mismatch: an operand of an MPS operation lives on the CPU.
        return _Pair("cpu", "mps", None)
    return None


def _probe_devices(ctx: Context) -> list[Fact]:
    """Facts from live probes: which module parameters and which tensors live where."""
    out: list[Fact] = []
    for mod in ctx.evidence.modules:
        if mod.param_devices:
            out.append(Fact("probe", f"module `{mod.name}` ({mod.type_name}) parameters on {', '.join(mod.param_devices)}"))
    for t in ctx.evidence.tensors:
        if t.frame and ctx.user_frame and t.frame == (ctx.user_frame.function or ""):
            out.append(Fact("probe", f"tensor `{t.name}` {tuple(t.shape)} on {t.device}"))
    return out[:6]


def _user_line(ctx: Context) -> str:
    return ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""


def _devices(p: _Pair) -> tuple[str, ...]:
    return tuple(d for d in (p.a, p.b) if d)


def _both(p: _Pair) -> str:
    """``cpu and cuda:0`` (or what is known of it)."""
    return " and ".join(_devices(p)) or "two devices"


# Fixes several answers share (document references, filled when an answer is built).
_MOVE_ALL = "device-mismatch#move-model-and-batches"
_NEW_ON_INPUT = "device-mismatch#new-tensors-on-input-device"
_BUFFERS = "device-mismatch#register-constant-buffers"


@rule(
    'devices.device_mismatch',
    category='device_mismatch',
    docs=("device-mismatch", "cuda-unavailable"),
    reads=(*TORCH_OP, "TypeError"),
    priority=32,
    outcomes=('devices.mismatch', 'devices.mismatch_other', 'devices.move_not_assigned', 'devices.created_in_forward', 'devices.two_gpus', 'devices.generator',
              'devices.dataparallel', 'devices.meta', 'devices.embedding_index', 'devices.index_device', 'devices.loss_target',
              'devices.rnn_hidden', 'devices.optimizer_state', 'devices.cuda_numpy', 'devices.unregistered_layers', 'devices.library_offload'),
    examples=(
        Example("captured/cuda/device-mismatch-cnn-batch-on-cpu", "devices.mismatch"),
        Example("corpus/devices/offload_regression_flux.txt", "devices.library_offload"),
        Example("realworld/dev/torchsummary-old-input-cuda-weight-cpu", "devices.mismatch"),
        Example("realworld/dev/uap-old-input-cuda-weight-cpu-elided", "devices.mismatch"),
        Example("corpus/devices/mps_placeholder_linear_rfdiffusion.txt", "devices.mismatch"),
        Example("realworld/dev/fastnn-mm-wrapper-device", "devices.mismatch_other"),
        Example("realworld/dev/geektime-bn-created-in-forward-device", "devices.mismatch_other"),
        Example("captured/cuda/device-mismatch-gather-actions-cpu", "devices.mismatch_other"),
        Example("corpus/devices/index_select_two_devices_viewfusion.txt", "devices.mismatch_other"),
        Example("corpus/devices/ones_in_forward_without_device_gpu.txt", "devices.mismatch_other"),
        Example("corpus/devices/mps_placeholder_lm_eval.txt", "devices.mismatch_other"),
        Example("corpus/devices/all_inputs_same_device_cat_sassd.txt", "devices.mismatch_other"),
        Example("corpus/devices/all_inputs_same_device_cat_minimalhand.txt", "devices.mismatch_other"),
        Example("corpus/devices/all_inputs_same_device_darnn.txt", "devices.mismatch_other"),
        Example("realworld/dev/pl-self-log-tensor-cpu-device", "devices.mismatch_other"),
        Example("realworld/dev/pgt-dcrnn-hidden-state-cpu", "devices.mismatch_other"),
        Example("corpus/devices/tensor_to_not_assigned_effnet.txt", "devices.move_not_assigned"),
        Example("corpus/devices/meta_model_arange_without_device.txt", "devices.created_in_forward"),
        Example("corpus/devices/arange_positions_in_forward_gpu.txt", "devices.created_in_forward"),
        Example("captured/multi_gpu/multigpu-pipeline-cuda0-cuda1-mismatch", "devices.two_gpus"),
        Example("realworld/dev/irnet-dataparallel-kt-on-cuda0", "devices.two_gpus"),
        Example("corpus/devices/generator_cuda_randperm_cunerf.txt", "devices.generator"),
        Example("corpus/devices/generator_cuda_oneline_froyo.txt", "devices.generator"),
        Example("corpus/devices/generator_default_device_cuda_gpu.txt", "devices.generator"),
        Example("corpus/devices/dataparallel_params_on_cpu_mlcreid.txt", "devices.dataparallel"),
        Example("corpus/devices/dataparallel_params_on_cuda1_cog.txt", "devices.dataparallel"),
        Example("captured/cpu/meta-device-init-load-without-assign", "devices.meta"),
        Example("captured/cuda/device-mismatch-arange-in-forward", "devices.embedding_index"),
        Example("corpus/devices/embedding_index_on_cpu_lightrag.txt", "devices.embedding_index"),
        Example("corpus/devices/indices_on_gpu_tensor_on_cpu_shapeguided.txt", "devices.index_device"),
        Example("corpus/devices/indices_on_gpu_semicon.txt", "devices.index_device"),
        Example("corpus/devices/index_table_cpu_indices_gpu.txt", "devices.index_device"),
        Example("captured/cuda/device-mismatch-labels-on-cpu", "devices.loss_target"),
        Example("corpus/devices/loss_class_weight_on_cpu_gpu.txt", "devices.loss_target"),
        Example("captured/cuda/device-mismatch-lstm-hidden-cpu", "devices.rnn_hidden"),
        Example("corpus/devices/optimizer_state_cpu_resume_cream.txt", "devices.optimizer_state"),
        Example("corpus/devices/optimizer_state_resume_prodigy.txt", "devices.optimizer_state"),
        Example("corpus/devices/optimizer_state_steps_fused_adamw_var.txt", "devices.optimizer_state"),
        Example("corpus/devices/cuda_numpy_fastreid.txt", "devices.cuda_numpy"),
        Example("corpus/devices/cuda_numpy_fastllm.txt", "devices.cuda_numpy"),
        Example("corpus/devices/cuda_numpy_old_wording_pvrnet.txt", "devices.cuda_numpy"),
        Example("corpus/devices/cuda_numpy_predictions_gpu.txt", "devices.cuda_numpy"),
        Example("corpus/devices/layers_in_list_cuda_prose_pt15005.txt", "devices.unregistered_layers"),
        Example("corpus/devices/layers_in_list_input_cuda_weight_cpu_lightning.txt", "devices.unregistered_layers"),
    ),
)
def device_mismatch(ctx: Context) -> RuleHit | None:
    """Operands on different devices (cpu vs cuda, two GPUs, meta), in every message generation."""
    pair = _read_pair(ctx)
    listed = _layers_in_plain_list(ctx)
    if listed and (pair is not None and pair.kind == "operands" or pair is None and not ctx.exc_type and _DEVICE_TALK.search(ctx.failure.text)):
        return _unregistered_layers(ctx, listed, pair)
    if pair is None:
        return _cuda_to_numpy(ctx)
    name, kind = ctx.layer
    line = _user_line(ctx)
    if len(set(_SELF_CALLS.findall(line))) > 1:
        name = None  # several module calls on the failing line: the message does not say which one failed
    found = [error_fact(ctx), Fact("device", f"operands on {_both(pair)}" + (f" (argument `{pair.arg}` is on {pair.a})" if pair.arg and pair.a and pair.kind == "operands" else ""))]
    found += _probe_devices(ctx)
    facts = Facts(devices=_devices(pair), argument=pair.arg, layer=name, layer_kind=kind)
    created = _FACTORY.search(line)
    # A factory call without device= on the failing line is the most specific explanation there is.
    if created and pair.kind in ("operands", "index"):
        return _created_in_forward(ctx, pair, f"torch.{created.group(1)}", line, found, facts)
    unassigned = _unassigned_move(ctx) if pair.kind == "operands" and "cpu" in _devices(pair) else None
    if unassigned:
        return _move_not_assigned(ctx, pair, unassigned, found, facts)
    if "meta" in _devices(pair):
        return _meta(ctx, pair, found, facts)
    if pair.kind == "generator":
        return _generator(ctx, pair, found, facts)
    if pair.kind == "module":
        return _dataparallel(ctx, pair, found, facts)
    if pair.kind == "hidden":
        return _rnn_hidden(ctx, pair, found, facts)
    if pair.kind == "index":
        return _index_device(ctx, pair, found, facts)
    offload = _OFFLOAD.search(ctx.failure.text or ctx.text)
    if offload and pair.kind == "operands" and "cpu" in _devices(pair):
        return _library_offload(ctx, pair, offload.group(0), found, facts)
    if _in_optimizer_step(ctx, pair):
        return _optimizer_state(ctx, pair, found, facts)
    if pair.a and pair.b and pair.a.startswith("cuda") and pair.b.startswith("cuda") and pair.a != pair.b:
        return _two_gpus(ctx, pair, found, facts)
    if kind == "Embedding" and pair.arg in ("index", "indices", "input"):
        return _embedding_index(ctx, pair, line, found, facts)
    users = " ".join(f.source or "" for f in ctx.failure.user_frames[-1:])
    if kind == "loss" or pair.arg == "target" or re.search(r"loss|criterion", users, re.I):
        return _loss_target(ctx, pair, found, facts)
    if kind in _LAYER_KINDS or pair.arg == "input":
        return _layer_input(ctx, pair, name, kind, found, facts)
    return _plain(ctx, pair, found, facts)


# Layers kept in a plain list attribute: `self.x = []` filled with `self.x.append(nn.Conv2d(...))`, or `self.x = [nn.Linear(...), ...]`.
_PLAIN_LIST = lazy_re(r"self\.(\w+)\s*=\s*\[\s*(?:\]|\\?\s*(?:[\w.]*\bnn\.[A-Z]))")
# A report about moving the model to the GPU (not every mention of a device).
_DEVICE_TALK = lazy_re(r"\.cuda\(|\bis_cuda\b|\bGPU\b|\bCUDA\b|\.to\([^)\n]*cuda", re.I)


def _layers_in_plain_list(ctx: Context) -> str | None:
    """The attribute holding layers in a plain Python list (so never registered), when the text's code shows one."""
    text = ctx.failure.text
    for m in _PLAIN_LIST.finditer(text):
        name = re.escape(m.group(1))
        filled = m.group(0).endswith("]") and re.search(rf"self\.{name}\.(?:append|extend)\(\s*\[?\s*[\w.]*\bnn\.[A-Z]", text)
        if not (filled or not m.group(0).endswith("]")):
            continue
        if re.search(rf"nn\.(?:ModuleList|ModuleDict|Sequential)\(\s*\*?self\.{name}\b|add_module\(|register_module\(", text):
            continue  # registered afterwards
        return m.group(1)
    return None


def _unregistered_layers(ctx: Context, attr: str, p: _Pair | None) -> RuleHit:
    cause = (f"The layers in `self.{attr}` are kept in a plain Python list, which nn.Module does not look into: they are not registered as "
             "submodules, so model.to(device) / model.cuda() leaves their weights on the CPU"
             + (f" (the operation finds its operands on {_both(p)})" if p else "")
             + "; they are also missing from model.parameters() (the optimizer never updates them) and from the state_dict.")
    found = [Fact("code", f"`self.{attr}` is a plain list of layers")]
    if p:
        found.insert(0, error_fact(ctx))
    fixes = [remedy("module-misuse#register-with-modulelist")]
    return hit("devices.unregistered_layers", "device_mismatch", f"Layers in the plain list `self.{attr}` are not moved", cause, fixes,
               ("device-mismatch", "module-misuse"), _loc(ctx, found), 0.93, facts=Facts(names=(attr,)))


# A statement that is only `name.to(...)` / `name.cuda()` (its result not assigned), as quoted in a report or a snippet.
_BARE_MOVE = lazy_re(r"^[ \t`>.]*(?:\d+[ \t]+)?([A-Za-z_][\w.\[\]'\"]*?)\.(to\([^()\n]*(?:\([^()\n]*\))?[^()\n]*\)|cuda\([^()\n]*\))\s*`?\s*(?:#.*)?$", re.M)
# Names that are modules (moved in place, so a bare call is right): called like a function, or used with Module-only methods.
_MODULE_USE = r"(?:\b{name}\s*\(|\b{name}\.(?:eval|train|parameters|named_parameters|load_state_dict|state_dict|modules|children|apply|half|float)\s*\()"
_MODULE_NAME = re.compile(r"(?:model|net|module|encoder|decoder|backbone|layer|head|classifier|criterion|loss)\w*$", re.I)


def _unassigned_move(ctx: Context) -> tuple[str, str] | None:
    """(name, call) of a tensor moved with a bare `x.to(device)` / `x.cuda()` whose result is thrown away, when the text shows one."""
    for m in _BARE_MOVE.finditer(ctx.failure.text):
        name, call = m.group(1), m.group(2)
        last = name.rsplit(".", 1)[-1]
        if _MODULE_NAME.search(last) or re.search(_MODULE_USE.format(name=re.escape(name)), ctx.failure.text):
            continue  # modules move in place: `model.to(device)` on its own is correct
        if re.search(rf"\b{re.escape(name)}\s*=\s*[\w.]*(?:tokenizer|processor|feature_extractor)\w*\s*\(", ctx.failure.text, re.I):
            continue  # tokenizer/processor outputs (BatchEncoding) also move in place
        return name, call
    return None


def _move_not_assigned(ctx: Context, p: _Pair, move: tuple[str, str], found: list[Fact], facts: Facts) -> RuleHit:
    name, call = move
    method = call.split("(", 1)[0]
    found.append(Fact("code", f"`{name}.{call}` stands alone: its result is not assigned"))
    cause = (f"The text shows `{name}.{call}` as a statement of its own. For a tensor, .{method}() does not move it in place: it returns a new "
             f"tensor on the target device and leaves `{name}` where it was, so the result is thrown away and `{name}` stays on its old device; "
             f"the operation then finds its operands on {_both(p)}. (Modules are different: model.to(device) moves the module's parameters in place.)")
    fixes = [
        remedy("device-mismatch#assign-moved-tensor", variable=name, call=call),
        remedy(_MOVE_ALL),
    ]
    return hit("devices.move_not_assigned", "device_mismatch", f"`{name}.{method}()` result not assigned", cause, fixes, ("device-mismatch",),
               _loc(ctx, found), 0.95, facts=_with(facts, names=(name,), call=method))


def _in_optimizer_step(ctx: Context, p: _Pair) -> bool:
    """The mismatch happened inside an optimizer's step (its state tensors), not in the model."""
    in_optim = any(re.search(r"/torch/optim/(?!lr_scheduler)\w+\.py$|/optimizers?/\w+\.py$", f.file.replace("\\", "/")) and f.function == "step"
                   or "_single_tensor_" in (f.function or "") or "_multi_tensor_" in (f.function or "") for f in ctx.failure.frames)
    return in_optim or p.arg in ("state_steps", "exp_avg", "exp_avg_sq", "momentum_buffer_list") or bool(ctx.search(r"fused_adamw?_|_foreach_\w+"))


def _optimizer_state(ctx: Context, p: _Pair, found: list[Fact], facts: Facts) -> RuleHit:
    cause = (f"The optimizer step mixes tensors on {_both(p)}: the parameters and their gradients are on the GPU, but part of the optimizer's own state "
             "(momentum buffers, Adam's moving averages, step counters) is on the CPU. This happens when the optimizer state is restored from a checkpoint "
             "loaded with map_location='cpu' (or before the model was moved), or when the optimizer was created and stepped before model.to(device).")
    fixes = [
        remedy("device-mismatch#move-model-before-optimizer"),
        remedy("device-mismatch#move-optimizer-state"),
    ]
    return hit("devices.optimizer_state", "device_mismatch", f"Optimizer state on another device ({_both(p)})", cause, fixes, ("device-mismatch",), _loc(ctx, found), 0.92,
               facts=_with(facts, call="optimizer.step"))


def _created_in_forward(ctx: Context, p: _Pair, call: str, line: str, found: list[Fact], facts: Facts) -> RuleHit:
    short = call.split(".")[-1]
    found.append(Fact("call", f"`{call}(...)` on the failing line has no device= argument"))
    other = next((d for d in _devices(p) if d != "cpu"), "the other operands' device")
    cause = (f"The failing line `{line}` builds a tensor with {call}(...) and no device=, so it is created on the default device (the CPU) "
             f"while the tensors it is combined with are on {other}. Tensors made inside forward or the training step do not follow model.to(device).")
    if short == "from_numpy":  # from_numpy has no device argument: move the result instead
        first = remedy("device-mismatch#from-numpy-to-input-device")
    else:
        first = remedy("device-mismatch#arange-on-input-device") if short == "arange" else remedy("device-mismatch#factory-on-input-device", op=short)
    fixes = [
        first,
        remedy("device-mismatch#constant-as-buffer"),
    ]
    return hit("devices.created_in_forward", "device_mismatch", f"{call}(...) created on the CPU inside the computation", cause, fixes,
               ("device-mismatch",), _loc(ctx, found), 0.95, facts=_with(facts, call=call))


def _meta(ctx: Context, p: _Pair, found: list[Fact], facts: Facts) -> RuleHit:
    real = next((d for d in _devices(p) if d != "meta"), "another device")
    cause = (f"A tensor on the `meta` device (shape only, no storage) meets tensors with real data on {real}. Modules built under torch.device('meta') "
             "(or by loaders that create empty weights first) have no storage until they are materialised; loading a checkpoint into them with "
             "load_state_dict without assign=True leaves them empty.")
    fixes = [
        remedy("device-mismatch#load-with-assign"),
        remedy("device-mismatch#materialise-then-load"),
    ]
    return hit("devices.meta", "device_mismatch", "Meta-device tensors used as real tensors", cause, fixes, ("device-mismatch",), _loc(ctx, found), 0.93, facts=facts)


def _generator(ctx: Context, p: _Pair, found: list[Fact], facts: Facts) -> RuleHit:
    in_sampler = any("sampler" in f.file for f in ctx.failure.frames) or "DataLoader" in ctx.text
    cause = (f"A random-number generator on {p.a} is passed to an operation that needs a {p.b} generator. "
             + ("The DataLoader's sampler draws its order with torch.randperm on the CPU; a CUDA default device (torch.set_default_device / "
                "torch.set_default_tensor_type with a cuda type) or a generator=torch.Generator('cuda') given to the DataLoader breaks that."
                if in_sampler or p.b == "cpu" else "The generator and the tensors being sampled must be on the same device type."))
    fixes = [
        remedy("device-mismatch#cpu-generator-for-sampler"),
        remedy("device-mismatch#no-global-cuda-default"),
    ]
    return hit("devices.generator", "device_mismatch", "Generator on the wrong device", cause, fixes, ("device-mismatch",), _loc(ctx, found), 0.92, facts=facts)


def _dataparallel(ctx: Context, p: _Pair, found: list[Fact], facts: Facts) -> RuleHit:
    cause = (f"nn.DataParallel gathers the model on device_ids[0] ({p.b}), but at least one parameter or buffer is on {p.a}. "
             + ("The model was wrapped (or run) without first being moved to that GPU." if p.a == "cpu"
                else f"The model was moved to {p.a} while DataParallel's first device is {p.b}; its first device must hold the model."))
    fixes = [
        remedy("device-mismatch#model-to-first-device-id", expected_device=p.b),
        remedy("device-mismatch#choose-device-ids"),
        remedy("device-mismatch#no-dataparallel-without-gpu"),
    ]
    if p.a != "cpu":
        fixes.pop()
    return hit("devices.dataparallel", "device_mismatch", "DataParallel model not on device_ids[0]", cause, fixes, ("device-mismatch",), _loc(ctx, found), 0.93, facts=facts)


def _rnn_hidden(ctx: Context, p: _Pair, found: list[Fact], facts: Facts) -> RuleHit:
    cause = (f"The recurrent layer got its input on {p.b} but the initial hidden state on {p.a}. A hidden state created with torch.zeros(...) "
             "without device=, or carried over from a step that ran elsewhere, does not move with model.to(device).")
    fixes = [
        remedy("device-mismatch#hidden-from-input"),
        remedy("device-mismatch#move-hidden-with-batch"),
    ]
    return hit("devices.rnn_hidden", "device_mismatch", "RNN hidden state on another device", cause, fixes, ("device-mismatch",), _loc(ctx, found), 0.93, facts=facts)


def _index_device(ctx: Context, p: _Pair, found: list[Fact], facts: Facts) -> RuleHit:
    line = _user_line(ctx)
    cause = (f"A tensor on {p.b} is indexed with an index tensor on another device (a GPU). Indices may be on the CPU or on the indexed tensor's "
             "device, nothing else" + (f"; on `{line}` the index comes from GPU computation while the indexed tensor stayed on the CPU." if line else "."))
    fixes = [
        remedy("device-mismatch#move-index-to-table-device"),
        remedy("device-mismatch#lookup-table-as-buffer"),
    ]
    return hit("devices.index_device", "device_mismatch", "Index tensor on another device than the indexed tensor", cause, fixes, ("device-mismatch",), _loc(ctx, found), 0.9, facts=facts)


def _two_gpus(ctx: Context, p: _Pair, found: list[Fact], facts: Facts) -> RuleHit:
    cause = (f"One operation mixes tensors on {p.a} and {p.b}; PyTorch never copies between GPUs implicitly. Typical sources: a hard-coded "
             "'cuda:0' (or bare .cuda(), which uses the current device) in a process meant for another GPU, or model stages on different GPUs "
             "without moving the activations between them.")
    fixes = [
        remedy("device-mismatch#one-device-per-process"),
        remedy("device-mismatch#move-activations-between-stages"),
        # DataParallel replicates parameters and buffers only: a plain tensor attribute (or one made with .cuda()) stays on the first GPU.
        remedy("device-mismatch#dataparallel-buffers"),
    ]
    # The report ties the failure to which GPUs are visible (or to automatic placement over several): the model was spread over
    # every GPU it could see while the inputs went to the first one.
    if ctx.search(r"CUDA_VISIBLE_DEVICES|device_map|\b(?:multiple|several|all|more than one) (?:of the )?GPUs?\b|multi-?GPU"):
        fixes.insert(0, remedy("device-mismatch#one-visible-gpu"))
    return hit("devices.two_gpus", "device_mismatch", f"Tensors on two different GPUs ({p.a}, {p.b})", cause, fixes, ("device-mismatch",), _loc(ctx, found), 0.95, facts=facts)


def _embedding_index(ctx: Context, p: _Pair, line: str, found: list[Fact], facts: Facts) -> RuleHit:
    calls = list(dict.fromkeys(_SELF_CALLS.findall(line)))
    what = f"`{calls[0]}`" if len(calls) == 1 else (f"one of {', '.join(f'`{c}`' for c in calls)}" if calls else "an nn.Embedding")
    cause = (f"The indices passed to {what} (an embedding lookup) are on {p.a} while its weight is on {p.b}. Either the id tensors were not moved "
             "with the batch, or they were built inside forward without a device (a range of positions, a mask) and landed on the CPU.")
    fixes = [
        remedy("device-mismatch#move-ids-with-batch"),
        remedy(_NEW_ON_INPUT),
        remedy(_MOVE_ALL),
    ]
    return hit("devices.embedding_index", "device_mismatch", f"Embedding indices on {p.a}, weights on {p.b}", cause, fixes, ("device-mismatch",), _loc(ctx, found), 0.95, facts=facts)


def _loss_target(ctx: Context, p: _Pair, found: list[Fact], facts: Facts) -> RuleHit:
    move_targets = remedy("device-mismatch#move-targets-with-inputs")
    move_weights = remedy("device-mismatch#move-loss-weight")
    if p.arg and "weight" in p.arg:
        cause = (f"The loss received its `{p.arg}` tensor on {p.a} while the predictions and targets are on {p.b}. Class weights passed to the loss "
                 "when it was constructed were created on the CPU and never moved with the model.")
        fixes = [move_weights, move_targets]
    else:
        cause = (f"The loss received tensors on {_both(p)}" + (f": `{p.arg}` is on {p.a}." if p.arg else ".")
                 + " The predictions come from the model's device, but the targets/labels were not moved there with the inputs.")
        fixes = [move_targets, move_weights]
    return hit("devices.loss_target", "device_mismatch", f"Loss inputs on different devices ({_both(p)})", cause, fixes, ("device-mismatch",), _loc(ctx, found), 0.95, facts=facts)


def _layer_input(ctx: Context, p: _Pair, name: str | None, kind: str | None, found: list[Fact], facts: Facts) -> RuleHit:
    what = f"`{name}`" if name else (f"the {kind} layer" if kind else "the model")
    gpu = next((d for d in _devices(p) if d != "cpu"), "the GPU")
    cause = (f"{what[0].upper() + what[1:]} received its input and its weights on different devices ({_both(p)}). The model and the batch were not moved to "
             f"the same place: typically the model is on {gpu} and the batch is still on the CPU (DataLoader batches always start there), or the reverse.")
    return hit("devices.mismatch", "device_mismatch", f"Model and input on different devices ({_both(p)})", cause, [remedy(_MOVE_ALL), remedy(_BUFFERS)],
               ("device-mismatch", "cuda-unavailable"), _loc(ctx, found), 0.95, facts=facts)


# A library's CPU offloading named in the text (diffusers' pipeline methods, accelerate's hooks).
_OFFLOAD = lazy_re(r"\benable_(?:sequential|model)_cpu_offload\b|\bcpu_offload(?:_with_hook)?\(|\bCPU offload(?:ing)?\b|\bsequential offload(?:ing)?\b", re.I)
# The text says the same call worked with an earlier version or commit of the code that changed.
_WORKED_EARLIER = lazy_re(r"\bparent commit\b|\bregression\b|\b(?:works?|worked|working)\b[^.\n]{0,40}\b(?:previous|earlier|older|last) "
                          r"(?:release|version|commit)\b|\b(?:works?|worked)\b[^.\n]{0,30}\bbefore (?:the |an? )?(?:update|upgrade)\b", re.I)


def _library_offload(ctx: Context, p: _Pair, named: str, found: list[Fact], facts: Facts) -> RuleHit:
    """Operands on the CPU and a GPU while a library's CPU offloading is on: its hooks move modules only while they run."""
    found.append(Fact("context", f"CPU offloading: “{named}”"))
    cause = (f"An operation received tensors on {_both(p)} while the library's CPU offloading (`{named}`) is on: offloading keeps weights on "
             "the CPU and its hooks move each module to the GPU only while it runs, so a tensor created or kept outside those hooks (or a "
             "module moved by hand after offloading was enabled) meets the GPU copy of the other operand.")
    fixes = [remedy("device-mismatch#let-offload-place-tensors"), remedy("device-mismatch#print-operand-devices")]
    earlier = _WORKED_EARLIER.search(ctx.failure.text or ctx.text)
    if earlier:
        found.append(Fact("symptom", f"worked with an earlier version: “{earlier.group(0)}”"))
        cause += (" The text says the same call worked with an earlier version or commit, so the change in the library between the two is "
                  "the cause: a regression in its offloading path.")
        fixes.insert(0, remedy("device-mismatch#pin-working-library-version"))
    return hit("devices.library_offload", "device_mismatch", f"Tensors on different devices under CPU offloading ({_both(p)})", cause, fixes,
               ("device-mismatch",), _loc(ctx, found), 0.85, facts=facts)


def _plain(ctx: Context, p: _Pair, found: list[Fact], facts: Facts) -> RuleHit:
    line = _user_line(ctx)
    cause = (f"An operation received tensors on {_both(p)}" + (f" (argument `{p.arg}` is on {p.a})" if p.arg and p.a else "")
             + (f" at `{line}`" if line else "") + ". Every operand of one operation must be on the same device. One of them was not moved: a tensor "
             "created without device= (it defaults to the CPU), a layer built inside forward, a plain tensor attribute that is not a registered buffer, or a batch field left behind.")
    fixes = [
        remedy("device-mismatch#print-operand-devices"),
        remedy(_NEW_ON_INPUT), remedy(_BUFFERS),
        remedy("device-mismatch#build-layers-in-init"),
        remedy(_MOVE_ALL),
    ]
    return hit("devices.mismatch_other", "device_mismatch", f"Tensors on different devices ({_both(p)})", cause, fixes, ("device-mismatch",), _loc(ctx, found), 0.9, facts=facts)


def _with(facts: Facts, **changes: object) -> Facts:
    return replace(facts, **changes)  # type: ignore[arg-type]


def _cuda_to_numpy(ctx: Context) -> RuleHit | None:
    m = _CUDA_NUMPY.search(ctx.text)
    if not m:
        return None
    dev = m.group(1).lower()
    line = _user_line(ctx)
    cause = (f"A tensor on {dev} was handed to NumPy" + (f" at `{line}`" if line else "") + " (.numpy(), np.asarray, or a library such as matplotlib/sklearn that converts it); "
             "NumPy can only read host memory, so the tensor has to be copied to the CPU first.")
    fixes: list[Fix] = [remedy("detach-numpy#cpu-before-numpy")]
    return hit("devices.cuda_numpy", "device_mismatch", "GPU tensor passed to NumPy", cause, fixes, ("detach-numpy", "device-mismatch"),
               _loc(ctx, [error_fact(ctx)]), 0.92, facts=Facts(devices=(dev,), call=".numpy" if ".numpy(" in line else None))


# (outcome, pattern, title, cause, references of the fixes)
_CUDA_CASES: tuple[tuple[str, str, str, str, tuple[str, ...]], ...] = (
    # autocast's and GradScaler's warnings (old and new wordings) when asked for CUDA in a process where
    # torch.cuda.is_available() is False; they turn themselves off and the program runs on the CPU.
    ("devices.cuda_unavailable", r"Torch not compiled with CUDA enabled|User provided device_type of 'cuda', but CUDA is not available"
     r"|CUDA is not available or torch_xla is imported\. Disabling autocast|GradScaler is enabled, but CUDA is not available", "PyTorch build without CUDA",
     "The installed PyTorch is a CPU-only build, so any .cuda() / device='cuda' call fails. Either pip picked a CPU wheel (a default index or a "
     "requirements pin without a CUDA build) or the script runs in another environment than the one with the CUDA build.",
     ("cuda-unavailable#install-cuda-build",
      "cuda-unavailable#device-agnostic-code")),
    ("devices.cuda_checkpoint_on_cpu", r"Attempting to deserialize object on a CUDA device but torch\.cuda\.is_available\(\) is False", "CUDA checkpoint loaded without a GPU",
     "The checkpoint holds tensors saved from a GPU, and torch.load tries to restore them onto a GPU this machine does not have (or cannot use).",
     ("cuda-unavailable#load-map-location-cpu",)),
    ("devices.no_gpu_visible", r"Found no NVIDIA driver on your system|no CUDA-capable device is detected|No CUDA GPUs are available|CUDA driver initialization failed", "No usable GPU or driver",
     "A CUDA build of PyTorch is installed but this process sees no GPU: no NVIDIA driver, a container started without GPU access, or "
     "CUDA_VISIBLE_DEVICES set (often inside the script) to an index that does not exist or to an empty list.",
     ("cuda-unavailable#check-driver-and-visibility",)),
    ("devices.driver_too_old", r"driver version is insufficient for CUDA runtime version|NVIDIA driver on your system is too old", "NVIDIA driver too old",
     "The PyTorch wheel was built for a newer CUDA runtime than the installed NVIDIA driver supports.",
     ("cuda-unavailable#update-driver-or-older-wheel",)),
    ("devices.invalid_ordinal", r"invalid device ordinal", "GPU index does not exist",
     "The code asks for a GPU index this process cannot see: e.g. cuda:1 on a single-GPU machine, more processes per node than GPUs, or CUDA_VISIBLE_DEVICES renumbering the visible GPUs from 0.",
     ("cuda-unavailable#index-below-device-count",)),
    ("devices.nvml_mismatch", r"NVML: ?Driver/library version mismatch|Failed to initialize NVML", "NVIDIA driver/library mismatch",
     "The loaded kernel driver and the user-space NVIDIA libraries have different versions, typically after a driver update without a reboot.",
     ("cuda-unavailable#reboot-reload-modules",)),
    ("devices.gpu_busy", r"CUDA-capable device\(s\) is/are busy or unavailable|all CUDA-capable devices are busy", "GPU busy or unavailable",
     "The GPU refused a new context: it is in exclusive-process compute mode and another process holds it, or the device is in a bad state.",
     ("cuda-unavailable#find-gpu-holder", "cuda-unavailable#one-process-per-gpu")),
    ("devices.cuda_unknown_error", r"CUDA unknown error - this may be due to an incorrectly set up environment", "CUDA initialisation failed",
     "CUDA could not initialise: the driver and the container/runtime disagree, the GPU is in a bad state after a crash or suspend/resume, "
     "or CUDA_VISIBLE_DEVICES was changed after CUDA had started in this process.",
     ("cuda-unavailable#check-environment-then-reset", "cuda-unavailable#reset-driver-state")),
)


# The user ties the failure to a suspend/resume cycle of the machine.
_SUSPEND = lazy_re(r"\b(?:suspend(?:s|ed|ing)?|hibernat\w*|standby|(?:wakes?|woke|waking) up|after (?:sleep|resume)|resum\w* from (?:sleep|suspend))\b", re.I)


def _checkpoint_gpu_index(ctx: Context, index: int, count: int) -> RuleHit:
    cause = (f"The checkpoint stores tensors that were saved on cuda:{index} (it was written on a machine or process using that GPU), and torch.load "
             f"restores each tensor onto the device it was saved from by default; this process sees {count} GPU(s), so cuda:{index} does not exist here.")
    fixes = [
        remedy("cuda-unavailable#map-location-remap", index=index),
        remedy("cuda-unavailable#save-device-independent"),
    ]
    found = [error_fact(ctx), Fact("device", f"checkpoint tensors on cuda:{index}; {count} GPU(s) visible")]
    return hit("devices.checkpoint_gpu_index", "cuda_unavailable", f"Checkpoint saved on cuda:{index}, only {count} GPU(s) here", cause, fixes,
               ("cuda-unavailable", "cuda-arch-mismatch"), _loc(ctx, found), 0.93,
               facts=Facts(devices=(f"cuda:{index}",), numbers={"device_index": float(index), "device_count": float(count)}, call="torch.load"))


@rule(
    'devices.cuda_unavailable',
    category='cuda_unavailable',
    docs=("cuda-unavailable", "cuda-arch-mismatch"),
    reads=(*TORCH_OP, "AssertionError"),
    priority=16,
    outcomes=tuple(case[0] for case in _CUDA_CASES) + ('devices.checkpoint_gpu_index',),
    examples=(
        Example("captured/cpu/hardcoded-cuda-device-cpu-build", "devices.cuda_unavailable"),
        Example("realworld/dev/detectron2-old-not-compiled-cuda-check-driver", "devices.cuda_unavailable"),
        Example("captured/cpu/torch-load-map-location-cuda-no-gpu", "devices.cuda_checkpoint_on_cpu"),
        Example("corpus/devices/checkpoint_cuda_index_caricature.txt", "devices.checkpoint_gpu_index"),
        Example("corpus/devices/checkpoint_cuda_index_deepsort.txt", "devices.checkpoint_gpu_index"),
        Example("realworld/dev/gaitset-old-no-nvidia-driver-multiline", "devices.no_gpu_visible"),
        Example("corpus/devices/no_cuda_gpus_available_samus.txt", "devices.no_gpu_visible"),
        Example("corpus/devices/no_cuda_gpus_visible_empty_env.txt", "devices.no_gpu_visible"),
        Example("corpus/devices/driver_too_old_fooocus.txt", "devices.driver_too_old"),
        Example("corpus/devices/driver_too_old_assert_fastfcn.txt", "devices.driver_too_old"),
        Example("corpus/devices/invalid_ordinal_set_device_opensora.txt", "devices.invalid_ordinal"),
        Example("corpus/devices/invalid_ordinal_model_to_odcnn.txt", "devices.invalid_ordinal"),
        Example("corpus/devices/invalid_ordinal_accelerator_error_gpu.txt", "devices.invalid_ordinal"),
        Example("corpus/devices/nvml_mismatch_mozilla.txt", "devices.nvml_mismatch"),
        Example("corpus/devices/busy_unavailable_pamir.txt", "devices.gpu_busy"),
        Example("corpus/devices/busy_unavailable_cosipy.txt", "devices.gpu_busy"),
        Example("corpus/devices/cuda_unknown_error_set_device_oldphotos.txt", "devices.cuda_unknown_error"),
        Example("corpus/devices/cuda_unknown_error_cogsvd.txt", "devices.cuda_unknown_error"),
    ),
)
def cuda_unavailable(ctx: Context) -> RuleHit | None:
    """CUDA requested but not usable: CPU-only build, no driver, old driver, bad ordinal, CUDA checkpoint on CPU."""
    m = ctx.search(r"Attempting to deserialize object on CUDA device (\d+) but torch\.cuda\.device_count\(\) is (\d+)")
    if m:
        return _checkpoint_gpu_index(ctx, int(m.group(1)), int(m.group(2)))
    for outcome, pattern, title, cause, refs in _CUDA_CASES:
        m = ctx.search(pattern)
        if not m:
            continue
        found = [error_fact(ctx)]
        numbers: dict[str, float] = {}
        version = ctx.search(r"too old \(found version (\d+)\)")
        if version:
            numbers["driver_cuda_version"] = float(version.group(1))
            found.append(Fact("driver", f"driver supports CUDA up to version code {version.group(1)}"))
        line = _user_line(ctx)
        devs = tuple(dict.fromkeys(re.findall(r"cuda:\d+", line)))
        if outcome == "devices.cuda_unknown_error" and (sleep := _SUSPEND.search(ctx.failure.text or ctx.text)):
            # The user ties it to a suspend/resume cycle: the driver's state, not the environment variable.
            found.append(Fact("context", f"after a suspend: “{sleep.group(0)}”"))
            cause = ("CUDA stopped initialising after the machine was suspended and woke up: the NVIDIA driver (its unified-memory module, "
                     "nvidia_uvm) is left in a bad state by the suspend/resume cycle, so every CUDA program fails until that module is "
                     "reloaded or the machine is rebooted.")
            refs = ("cuda-unavailable#reset-driver-state", "cuda-unavailable#reboot-or-reload-modules")
        return hit(outcome, "cuda_unavailable", title, cause, [remedy(r) for r in refs], ("cuda-unavailable", "cuda-arch-mismatch"), _loc(ctx, found), 0.93,
                   facts=Facts(numbers=numbers, devices=devs, names=(m.group(0),)))
    return None


# torch.cuda.is_available() shown answering False: an interpreter session's output line, or the user's words about it.
_IS_AVAILABLE_FALSE = lazy_re(r"cuda\.is_available\(\)[ \t]*(?:\r?\n[ \t]*(?:Out\[\d+\]:[ \t]*)?|[ \t]+(?:always[ \t]+)?"
                              r"(?:returns?|returned|returning|gives|gave|is|prints?|printed|shows?|showed|outputs?|says)[ \t]+(?:always[ \t]+)?)False\b")


@rule(
    'devices.cuda_reported_unavailable',
    category='cuda_unavailable',
    docs=("cuda-unavailable",),
    reads=("text",),
    priority=71,  # a weak reading of prose: after the family's own messages
    outcomes=('devices.cuda_reported_unavailable',),
    examples=(
        Example("corpus/devices/is_available_false_repl_pip_wheel.txt", "devices.cuda_reported_unavailable"),
    ),
)
def cuda_reported_unavailable(ctx: Context) -> RuleHit | None:
    """No exception: the report shows torch.cuda.is_available() answering False."""
    m = _IS_AVAILABLE_FALSE.search(ctx.text)
    if not m:
        return None
    cause = ("torch.cuda.is_available() answers False, so this PyTorch cannot use a GPU in this process. The usual reasons: a CPU-only build "
             "was installed; the build targets a newer CUDA release than the installed NVIDIA driver supports (each CUDA release needs a "
             "minimum driver version); or the process sees no GPU (no driver, a container without GPU access, CUDA_VISIBLE_DEVICES).")
    fixes = [
        remedy("cuda-unavailable#check-driver-and-visibility"),
        remedy("cuda-unavailable#update-driver-or-older-wheel"),
        remedy("cuda-unavailable#install-cuda-build"),
    ]
    found = [Fact("output", " ".join(m.group(0).split()))]
    return hit("devices.cuda_reported_unavailable", "cuda_unavailable", "CUDA not available to PyTorch", cause, fixes,
               ("cuda-unavailable",), _loc(ctx, found), 0.8)
