"""Refine a rule's answer with live probe facts (from `torchhelp run`, install(), watch()).

The traceback says where; the probes say why: which module holds parameters on which device,
what the Linear's neighbours produce, how far the labels range, how fragmented the allocator is.
Each refinement adds evidence and, when the facts are decisive, a sentence to the cause.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any
from collections.abc import Iterable, Mapping

from assistant.parse.messages import fmt_bytes
from assistant.rules.base import Context
from assistant.types import Fact, Fix, RuleHit, TensorSummary

MAX_TENSOR_FACTS = 6


@dataclass(frozen=True)
class Refinement:
    """What one family's refiner read from the probes: facts, a sentence for the cause, and whether
    it measured what the rule could only conjecture from the text."""

    facts: list[Fact] = field(default_factory=list)
    sentence: str = ""
    settles_conjecture: bool = False
    cause: str = ""  # replaces the rule's cause when the probes contradict its story
    lead_fixes: tuple[Fix, ...] = ()  # fixes the probes point to, with the user's own names: shown first


def enrich(hit: RuleHit, ctx: Context) -> RuleHit:
    """Add probe facts to a hit; category and fixes stay the rule's."""
    ev = ctx.evidence
    if ev.empty:
        return hit
    facts: list[Fact] = []
    extra: list[str] = []
    refine = _REFINERS.get(hit.category)
    refinement = refine(hit, ctx) if refine is not None else Refinement()
    facts.extend(refinement.facts)
    if refinement.sentence:
        extra.append(refinement.sentence)
    facts.extend(_frame_tensors(ctx, exclude={f.text for f in facts}))
    if not facts and not extra and not refinement.cause and not refinement.lead_fixes:
        return hit
    # A conjecture read from the text alone gives way when the probes measured the same thing.
    conjecture = "" if refinement.settles_conjecture else hit.conjecture
    cause = (refinement.cause or hit.cause) + ("" if not extra else " Live state: " + " ".join(extra))
    lead = refinement.lead_fixes
    # A replaced cause means the rule's story does not fit this program: its fixes for that story go with it.
    kept = () if refinement.cause else tuple(f for f in hit.fixes if f.title not in {x.title for x in lead})
    fixes = lead + kept
    return replace(hit, cause=cause, conjecture=conjecture, evidence=hit.evidence + tuple(facts), fixes=fixes)


def _describe(t: TensorSummary) -> str:
    parts = [f"`{t.name}` {tuple(t.shape)} {t.dtype} on {t.device}"]
    if t.requires_grad:
        parts.append("requires_grad" + (f" ({t.grad_fn})" if t.grad_fn else ", leaf"))
    if t.nan_count:
        parts.append(f"{t.nan_count} NaN")
    if t.inf_count:
        parts.append(f"{t.inf_count} Inf")
    if t.min_value is not None and t.max_value is not None:
        parts.append(f"values {t.min_value}..{t.max_value}")
    if t.contiguous is False:
        parts.append("non-contiguous")
    return ", ".join(parts) + f" (in {t.frame})"


def _frame_tensors(ctx: Context, exclude: set[str]) -> list[Fact]:
    user = ctx.user_frame.function if ctx.user_frame else None
    # Tensors held by torch's own frames carry torch's names (`t_outputs[0]`): the user cannot act on them.
    own = [t for t in ctx.evidence.tensors if not t.library]
    tensors = [t for t in own if user is None or t.frame == user] or own
    out = []
    for t in tensors[:MAX_TENSOR_FACTS]:
        text = _describe(t)
        if text not in exclude:
            out.append(Fact("probe", text))
    return out


def _layers(ctx: Context) -> Iterable[Mapping[str, Any]]:
    for m in ctx.evidence.modules:
        yield from m.layers


_MATMUL_OUTCOMES = frozenset({"shapes.matmul", "shapes.matmul_operands"})


def _shape(hit: RuleHit, ctx: Context) -> Refinement:
    # Only a matrix product's operands are (rows, got) and (in_features, out_features).
    if hit.rule not in _MATMUL_OUTCOMES or len(hit.facts.shapes) != 2 or any(len(s) != 2 for s in hit.facts.shapes):
        return Refinement([], "")
    (rows, got), (inner, out_f) = hit.facts.shapes
    layers = list(_layers(ctx))
    linear = next((layer for layer in layers if layer.get("type") in ("Linear", "LazyLinear") and layer.get("in_features") == inner and layer.get("out_features") == out_f), None)
    if linear is None:
        return Refinement([], "")
    idx = layers.index(linear)
    conv = next((layer for layer in reversed(layers[:idx]) if "out_channels" in layer), None)
    measured = False
    facts = [Fact("probe", f"layer `{linear['name']}` is Linear(in_features={inner}, out_features={out_f})")]
    sentence = f"The layer is `{linear['name']}` (Linear, in_features={inner}); it received a ({rows}, {got}) tensor"
    if conv is not None and got % conv["out_channels"] == 0:
        per_channel = got // conv["out_channels"]
        side = math.isqrt(per_channel)
        if side * side == per_channel:
            measured = True
            sentence += f" from flattening the output of `{conv['name']}` ({conv['out_channels']} channels): {got} = {conv['out_channels']}×{side}×{side}"
            expected_side = math.isqrt(inner // conv["out_channels"]) if inner % conv["out_channels"] == 0 else None
            if expected_side and expected_side * expected_side * conv["out_channels"] == inner:
                sentence += f", while the layer was sized for {conv['out_channels']}×{expected_side}×{expected_side}"
    return Refinement(facts, sentence + ".", settles_conjecture=measured)


def _label(name: str, type_name: str) -> str:
    """How to call a probed module: `self` inside forward() is better named by its class."""
    return type_name if name == "self" else name


def _device(hit: RuleHit, ctx: Context) -> Refinement:
    facts: list[Fact] = []
    mods = [m for m in ctx.evidence.modules if m.param_devices]
    for mod in mods[:3]:
        facts.append(Fact("probe", f"module `{_label(mod.name, mod.type_name)}` ({mod.type_name}) parameters on {', '.join(mod.param_devices)}"))
    if not mods:
        return Refinement(facts, "")
    model_devs = set(mods[0].param_devices)
    others = [t for t in ctx.evidence.tensors if t.device not in model_devs and t.device != "meta"]
    if not others:
        return Refinement(facts, "")
    t = others[0]
    sentence = f"model `{_label(mods[0].name, mods[0].type_name)}` has its parameters on {', '.join(sorted(model_devs))}, while tensor `{t.name}` {tuple(t.shape)} is on {t.device}."
    facts.append(Fact("probe", f"`{t.name}` {tuple(t.shape)} on {t.device}"))
    return Refinement(facts, sentence[0].upper() + sentence[1:])


def _memory(hit: RuleHit, ctx: Context) -> Refinement:
    mem = ctx.evidence.memory or {}
    facts: list[Fact] = []
    sentence = ""
    for d in mem.get("devices", [])[:2]:
        share = d.get("fragmentation_share_of_total")
        facts.append(Fact("probe", f"cuda:{d['index']} {d['name']}: allocated {fmt_bytes(d['allocated'])}, reserved {fmt_bytes(d['reserved'])}, "
                                   f"peak {fmt_bytes(d['peak_allocated'])}, reserved-but-unallocated {fmt_bytes(d['reserved_unallocated'])}"
                                   + (f" = {share:.0%} of capacity" if share is not None else "")))
        if share is not None and share >= 0.2 and not sentence:
            sentence = f"reserved-but-unallocated memory is {share:.0%} of cuda:{d['index']}'s capacity: fragmentation is a real factor."
    for t in mem.get("largest_tensors", [])[:3]:
        facts.append(Fact("probe", f"live tensor {tuple(t['shape'])} {t['dtype']} = {fmt_bytes(t['bytes'])}" + (" (requires grad)" if t.get("requires_grad") else "")))
    for s in mem.get("allocation_sites", [])[:4]:
        facts.append(Fact("probe", f"allocation site {s['site']}: {fmt_bytes(s['bytes'])} in {s['blocks']} block(s)"))
    if mem.get("allocation_sites") and not sentence:
        top = mem["allocation_sites"][0]
        sentence = f"the most memory was allocated at {top['site']} ({fmt_bytes(top['bytes'])})."
    return Refinement(facts, (sentence[0].upper() + sentence[1:]) if sentence else "")


def _labels(hit: RuleHit, ctx: Context) -> Refinement:
    facts: list[Fact] = []
    sentence = ""
    heads = [layer for layer in _layers(ctx) if layer.get("type") in ("Linear", "LazyLinear") and "out_features" in layer]
    embeds = [layer for layer in _layers(ctx) if layer.get("type") == "Embedding"]
    for t in ctx.evidence.tensors:
        if t.max_value is None:
            continue
        if embeds and re.search(r"id|token|idx|input", t.name, re.I):
            e = embeds[0]
            if t.max_value >= e["num_embeddings"] or t.min_value is not None and t.min_value < 0:
                sentence = f"`{t.name}` holds ids {t.min_value}..{t.max_value} but `{e['name']}` has num_embeddings={e['num_embeddings']}."
                facts.append(Fact("probe", sentence))
                break
        if heads and re.search(r"label|target|^y$|cls|class", t.name, re.I):
            n = heads[-1]["out_features"]
            if t.max_value >= n or (t.min_value is not None and t.min_value < 0):
                sentence = f"`{t.name}` holds labels {t.min_value}..{t.max_value} but the output layer `{heads[-1]['name']}` has {n} classes (valid 0..{n - 1})."
                facts.append(Fact("probe", sentence))
                break
    guard = ctx.evidence.experiment_values("guard_index")
    if guard and "value" in guard:
        found = _guarded_value(guard)
        facts.append(Fact("experiment", found))
        sentence += (" " if sentence else "") + found
    located = ctx.evidence.experiment_values("launch_blocking")
    if located and located.get("location") and not (ctx.evidence.rerun or {}).get("location"):
        facts.append(Fact("experiment", f"CUDA_LAUNCH_BLOCKING=1 re-run: {located.get('headline', '')} at {located['location']}"))
        sentence += (" " if sentence else "") + f"Re-run with CUDA_LAUNCH_BLOCKING=1, the failing operation is at {located['location']}."
    rerun = ctx.evidence.rerun
    if rerun and rerun.get("headline"):
        facts.append(Fact("rerun", f"CUDA_LAUNCH_BLOCKING=1 rerun: {rerun['headline']}" + (f" at {rerun['location']}" if rerun.get("location") else "")))
        sentence += (" " if sentence else "") + (f"Re-run with CUDA_LAUNCH_BLOCKING=1, the failing operation is at {rerun['location']}." if rerun.get("location") else "")
    return Refinement(facts, sentence)


def _guarded_value(values: Mapping[str, Any]) -> str:
    """The offending value a host-side guard found, and what its place in the range says."""
    op, value, low, high, ignored = values.get("op"), values.get("value"), values.get("low"), values.get("high"), values.get("ignored")
    where = f" (from {values['location']})" if values.get("location") else ""
    last = int(high) - 1 if isinstance(high, (int, float)) else high
    text = (f"Re-run with the indices checked on the host, `{op}` got {value} at flat position {values.get('position')} of a "
            f"{values.get('shape')} argument{where}; valid values are {low} to {last}.")
    if value == high:
        text += " It is one past the last valid value: the values probably count from 1."
    elif ignored is not None and isinstance(value, int) and value < 0:
        text += f" A negative value other than the loss's ignore_index ({ignored}) is a padding or missing-label marker the loss is not told to skip."
    return text


def _nan(hit: RuleHit, ctx: Context) -> Refinement:
    bad = [t for t in ctx.evidence.tensors if (t.nan_count or 0) + (t.inf_count or 0) > 0]
    if not bad:
        return Refinement([], "")
    facts = [Fact("probe", _describe(t)) for t in bad[:4]]
    return Refinement(facts, "Non-finite values are present in " + ", ".join(f"`{t.name}`" for t in bad[:4]) + ".")


def _dtype(hit: RuleHit, ctx: Context) -> Refinement:
    mods = [m for m in ctx.evidence.modules if m.param_dtypes]
    if not mods:
        return Refinement([], "")
    label = _label(mods[0].name, mods[0].type_name)
    fact = Fact("probe", f"module `{label}` parameters are {', '.join(mods[0].param_dtypes)}")
    odd = [t for t in ctx.evidence.tensors if t.dtype not in mods[0].param_dtypes and t.dtype.startswith(("float", "bfloat"))]
    if odd:
        return Refinement([fact], f"`{label}` is {', '.join(mods[0].param_dtypes)} but `{odd[0].name}` is {odd[0].dtype}.")
    return Refinement([fact], "")


def _loader(hit: RuleHit, ctx: Context) -> Refinement:
    loaders = [o for o in ctx.evidence.objects if o.get("kind") == "dataloader"]
    facts = [Fact("probe", f"DataLoader `{o['name']}`: num_workers={o['num_workers']}, batch_size={o['batch_size']}, start method {o.get('start_method')}, dataset {o.get('dataset')} of {o.get('dataset_len')} items") for o in loaders[:2]]
    return Refinement(facts, "")


def _backward_twice(hit: RuleHit, ctx: Context) -> Refinement:
    from assistant.rules.autograd_source import backward_twice_from_source

    found = backward_twice_from_source(ctx.evidence.source)
    return Refinement(found.facts, cause=found.cause, lead_fixes=found.fixes) if found else Refinement()


def _inplace(hit: RuleHit, ctx: Context) -> Refinement:
    from assistant.rules.autograd_source import inplace_from_source

    found = inplace_from_source(ctx.evidence.source, ctx.evidence.modules, hit.rule or "")
    return Refinement(found.facts, found.sentence, lead_fixes=found.fixes) if found else Refinement()


_REFINERS = {
    "shape_mismatch": _shape, "device_mismatch": _device, "cuda_oom": _memory, "cublas_error": _memory, "cudnn_error": _memory,
    "device_side_assert": _labels, "index_error": _labels, "nan_inf": _nan, "dtype_mismatch": _dtype, "amp_error": _dtype,
    "dataloader_error": _loader, "multiprocessing_error": _loader, "backward_twice": _backward_twice, "inplace_autograd": _inplace,
}
