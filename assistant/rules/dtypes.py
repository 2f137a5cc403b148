"""dtype disagreements: float32 vs float64, integer targets, half precision on unsupported kernels."""

from __future__ import annotations

import re

from assistant.parse.messages import normalize_dtype, tensor_type_parts
from assistant.rules.dispatch import TORCH_OP
from assistant.rules.registry import Example, rule
from assistant.rules.base import with_location as _loc, Context, error_fact, hit, lazy_re, remedy
from assistant.types import Fact, Facts, RuleHit

_PAIRS = (
    lazy_re(r"mat1 and mat2 must have the same dtype, but got (?P<a>\w+) and (?P<b>\w+)"),
    lazy_re(r"expected (?:m1|mat1) and (?:m2|mat2) to have the same dtype, but got: (?P<a>[\w:]+)\s*!=\s*(?P<b>[\w:]+)"),
    lazy_re(r"expected scalar type (?P<b>\w+) but found (?P<a>\w+)"),
    lazy_re(r"Expected object of scalar type (?P<b>\w+) but got scalar type (?P<a>\w+)(?: for (?:argument #\d+ '(?P<arg>\w+)'|sequence element \d+ in sequence argument at position #\d+ '(?P<seq>\w+)'))?"),
    lazy_re(r"Input type \((?P<a>[\w.:]+)\) and (?:weight|bias) type \((?P<b>[\w.:]+)\) should be the same"),
    lazy_re(r"self and mat2 must have the same dtype(?:, but got (?P<a>\w+) and (?P<b>\w+))?"),
    lazy_re(r"expected both vectors to have same dtype, but found (?P<a>\w+) and (?P<b>\w+)"),
    lazy_re(r"Found dtype (?P<a>\w+) but expected (?P<b>\w+)"),
    lazy_re(r"result type (?P<a>\w+) can't be cast to the desired output type (?P<b>\w+)"),
    lazy_re(r"expected (?:input|weight) and (?:weight|bias|input) to have the same dtype, but got (?P<a>\w+) and (?P<b>\w+)"),
)
_FLOATS = {"float32", "float64", "float16", "bfloat16"}
_INTS = {"int64", "int32", "int16", "int8", "uint8", "bool"}
_LOW = {"float16", "bfloat16"}
# CPU kernel names whose dtype dispatch fails for half precision on the CPU (their names carry no "cpu").
_CPU_KERNELS = {"LayerNormKernelImpl", "cdist", "baddbmm_with_gemm", "softmax_lastdim_kernel_impl", "log_softmax_lastdim_kernel_impl"}


def _mentions(ctx: Context, pattern: str, flags: int = 0) -> bool:
    """Whether the messages, the raw text or any frame (file, function, source line) match ``pattern``."""
    rx = re.compile(pattern, flags)
    if ctx.search(pattern, flags) or rx.search(ctx.failure.text or ""):
        return True
    return any(rx.search(f"{f.file} {f.function or ''} {f.source or ''}") for f in ctx.failure.frames)


def _dtype(raw: str) -> str:
    """A dtype from any spelling, including tensor type names (torch.cuda.HalfTensor) and c10::Half."""
    raw = raw.replace("c10::", "")
    return tensor_type_parts(raw)[0] if "Tensor" in raw else normalize_dtype(raw)


_TARGET_DOCS = ("loss-target-dtype", "cross-entropy-target-format", "dtype-mismatch")

# SDPA's per-backend warning before "No available kernel": the backends left enabled take half precision only.
_SDPA_DTYPE = lazy_re(r"Expected query, key and value to all be of dtype: \{([^}]*)\}\. Got Query dtype: (\w+)")


@rule(
    'dtypes.attention_dtype',
    category='dtype_mismatch',
    docs=("sdpa-no-available-kernel",),
    reads=(*TORCH_OP, "text"),
    priority=33,
    examples=(Example("corpus/dtypes/sdpa_flash_only_float32_warning.txt", "dtypes.attention_dtype"),),
)
def attention_dtype(ctx: Context) -> RuleHit | None:
    """scaled_dot_product_attention restricted to kernels that take half precision, given float32 (or float64) inputs."""
    m = _SDPA_DTYPE.search(ctx.failure.text or "")
    if not m or not ctx.search(r"No available kernel") and not re.search(r"No available kernel", ctx.failure.text or ""):
        return None
    got = _dtype(m.group(2))
    if got in _LOW:
        return None
    cause = (f"scaled_dot_product_attention got {got} query, key and value, while the backends left enabled (flash attention, cuDNN "
             f"attention) accept only {m.group(1).strip()}; with the others switched off (sdpa_kernel / sdp_kernel, or a library's "
             "flash-only setting) no kernel is left to run.")
    fixes = [remedy("sdpa-no-available-kernel#cast-or-autocast"), remedy("sdpa-no-available-kernel#allow-fallback"),
             remedy("sdpa-no-available-kernel#mem-efficient-backend")]
    return hit("dtypes.attention_dtype", "dtype_mismatch", f"Attention inputs are {got}; the enabled kernels need half precision", cause, fixes,
               ("sdpa-no-available-kernel",), _loc(ctx, [error_fact(ctx), Fact("dtype", f"query dtype {got}")]), 0.92,
               facts=Facts(dtypes=(got,), call="scaled_dot_product_attention"))


@rule(
    'dtypes.loss_target_dtype',
    category='dtype_mismatch',
    docs=_TARGET_DOCS,
    reads=TORCH_OP,
    priority=33,
    outcomes=('dtypes.loss_target', 'dtypes.loss_target_int', 'dtypes.ce_prob_target'),
    examples=(
        Example("captured/cpu/cross-entropy-float-class-labels", "dtypes.loss_target"),
        Example("realworld/dev/stem-old-long-float-target-soft-labels", "dtypes.loss_target"),
        Example("corpus/dtypes/nll_long_float_target_zscl.txt", "dtypes.loss_target"),
        Example("corpus/dtypes/nll_long_float_target_zerotoall.txt", "dtypes.loss_target"),
        Example("corpus/dtypes/nll_cuda_float_target_watermark.txt", "dtypes.loss_target"),
        Example("realworld/dev/maml-old-long-int-target-windows", "dtypes.loss_target_int"),
        Example("realworld/dev/romanian-old-long-int-target-pr", "dtypes.loss_target_int"),
        Example("corpus/dtypes/ce_int32_target.txt", "dtypes.loss_target_int"),
        Example("corpus/dtypes/ce_int8_target_byte.txt", "dtypes.loss_target_int"),
        Example("corpus/dtypes/nll_cuda_int_target_closerlook.txt", "dtypes.loss_target_int"),
        Example("corpus/dtypes/ce_onehot_long_target.txt", "dtypes.ce_prob_target"),
        Example("corpus/dtypes/ce_prob_target_long_eresgat.txt", "dtypes.ce_prob_target"),
        Example("corpus/dtypes/ce_prob_target_long_deepethogram.txt", "dtypes.ce_prob_target"),
    ),
)
def loss_target_dtype(ctx: Context) -> RuleHit | None:
    """Classification losses need int64 class indices, or float probabilities shaped like the logits."""
    p = ctx.search(r"Expected floating point type for target with class probabilities, got (\w+)")
    if p:
        got = normalize_dtype(p.group(1))
        cause = (f"The target has the same shape as the logits, so cross_entropy treats it as class probabilities, which must be float — "
                 f"but it is {got}. An integer target shaped like the logits is almost always one-hot encoded labels.")
        fixes = [
            remedy("cross-entropy-target-format#one-hot-rows-to-indices"),
            remedy("cross-entropy-target-format#one-hot-rows-as-probabilities"),
        ]
        found = [error_fact(ctx), Fact("dtype", f"target dtype {got}, same shape as the logits")]
        return hit("dtypes.ce_prob_target", "dtype_mismatch", f"Probability-style target has dtype {got}", cause, fixes, _TARGET_DOCS,
                   _loc(ctx, found), 0.93, facts=Facts(dtypes=(got,), argument="target", call="cross_entropy"))
    m = ctx.search(r"expected target dtype to be Long or Byte, but got (\w+)|\"nll_loss\w*\" not implemented for '(\w+)'")
    old = ctx.search(r"Expected object of scalar type Long but got scalar type (\w+) for argument #\d+ 'target'")
    generic = ctx.search(r"expected scalar type Long but found (\w+)")
    if m:
        raw = m.group(1) or m.group(2)
    elif old:
        raw = old.group(1)
    elif generic and _mentions(ctx, r"nll_loss|cross_entropy|CrossEntropyLoss|NLLLoss"):
        raw = generic.group(1)
    else:
        return None
    got = normalize_dtype(raw)
    found = [error_fact(ctx), Fact("dtype", f"target dtype is {got}; nll_loss/cross_entropy class targets must be int64 (Long)")]
    values = Facts(dtypes=(got, "int64"), argument="target")
    if got in _FLOATS:
        cause = (f"CrossEntropyLoss/NLLLoss with class-index targets needs int64 labels, but the target is {got}. Labels become float when "
                 "built from a float array/column, produced by float arithmetic, or passed through a float transform.")
        if old:
            cause += (" This PyTorch release only accepts class indices: soft labels or one-hot rows of probabilities are not supported by "
                      "cross_entropy before 1.10.")
        fixes = [
            remedy("loss-target-dtype#cast-class-labels-long"),
            remedy("cross-entropy-target-format#one-hot-or-probability-rows"),
            remedy("loss-target-dtype#binary-bce-with-logits"),
        ]
        if old:
            fixes.insert(1, remedy("cross-entropy-target-format#upgrade-for-soft-labels"))
        return hit("dtypes.loss_target", "dtype_mismatch", f"Loss target has dtype {got}, expected int64 (Long)", cause, fixes, _TARGET_DOCS,
                   _loc(ctx, found), 0.95, facts=values)
    cause = (f"The class-index targets are integers, but {got} rather than int64 (Long), which the loss kernel requires. Narrow integer labels "
             "come from NumPy/pandas int32 columns, torch.tensor(..., dtype=torch.int) or .int() conversions.")
    fixes = [remedy("loss-target-dtype#cast-int-labels-int64")]
    return hit("dtypes.loss_target_int", "dtype_mismatch", f"Loss target has dtype {got}, expected int64 (Long)", cause, fixes, _TARGET_DOCS,
               _loc(ctx, found), 0.95, facts=values)


@rule(
    'dtypes.not_implemented_for',
    category='dtype_mismatch',
    docs=("half-not-implemented", "dtype-mismatch"),
    reads=(*TORCH_OP, "NotImplementedError", "AttributeError"),
    priority=34,
    outcomes=('dtypes.half_cpu', 'dtypes.half_kernel', 'dtypes.not_implemented_int', 'dtypes.not_implemented'),
    examples=(
        Example("captured/cpu/half-model-cdist-on-cpu", "dtypes.half_cpu"),
        Example("corpus/dtypes/half_cpu_addmm_chatglm3.txt", "dtypes.half_cpu"),
        Example("corpus/dtypes/half_cpu_addmm_rwkv.txt", "dtypes.half_cpu"),
        Example("corpus/dtypes/half_cpu_addmm_knowlm.txt", "dtypes.half_cpu"),
        Example("realworld/dev/huatuo-addmm-half-cpu-torch-build", "dtypes.half_cpu"),
        Example("corpus/dtypes/half_cpu_layernorm_onediff.txt", "dtypes.half_cpu"),
        Example("corpus/dtypes/half_cpu_layernorm_iqa.txt", "dtypes.half_cpu"),
        Example("corpus/dtypes/half_cpu_slow_conv2d_prd.txt", "dtypes.half_cpu"),
        Example("corpus/dtypes/half_cpu_slow_conv2d_hybridnets.txt", "dtypes.half_cpu"),
        Example("corpus/dtypes/half_cpu_threshold_old.txt", "dtypes.half_cpu"),
        Example("corpus/dtypes/half_cpu_clamp_min.txt", "dtypes.half_cpu"),
        Example("corpus/dtypes/half_cpu_mul_isclose.txt", "dtypes.half_cpu"),
        Example("corpus/dtypes/half_cpu_tensor_no_attribute_sub.txt", "dtypes.half_cpu"),
        Example("corpus/dtypes/half_cpu_tensor_no_attribute_uniform.txt", "dtypes.half_cpu"),
        Example("corpus/dtypes/bf16_copy_not_implemented_cuda_old.txt", "dtypes.half_kernel"),
        Example("corpus/dtypes/softmax_long.txt", "dtypes.not_implemented_int"),
        Example("corpus/dtypes/mm_bool.txt", "dtypes.not_implemented"),
    ),
)
def not_implemented_for(ctx: Context) -> RuleHit | None:
    """``"addmm_impl_cpu_" not implemented for 'Half'``: the kernel has no implementation for that dtype/device."""
    m = ctx.search(r"\"(\w+)\" not implemented for '(\w+)'")
    # Very old releases had no math on CPU half tensors at all: the method is simply missing.
    legacy = ctx.search(r"'torch\.(?:HalfTensor|BFloat16Tensor)' object has no attribute '(\w+)'") or re.search(r"'torch\.(?:HalfTensor|BFloat16Tensor)' object has no attribute '(\w+)'", ctx.failure.text or "")
    if m:
        op, dtype = m.group(1), normalize_dtype(m.group(2))
    elif legacy:
        op, dtype = legacy.group(1), "float16"
    else:
        return None
    values = Facts(dtypes=(dtype,), names=(op,))
    docs = ("half-not-implemented", "dtype-mismatch")
    if dtype in _LOW:
        on_gpu = _mentions(ctx, r"\.cuda\(|cuda:\d|device=['\"]cuda|torch\.cuda\.\w+Tensor|\bcuda\b", re.I)
        on_cpu = bool(legacy) or "cpu" in op.lower() or op in _CPU_KERNELS or not on_gpu
        if on_cpu:
            found = [error_fact(ctx), Fact("dtype", f"CPU kernel `{op}` has no {dtype} implementation")]
            cause = (f"The `{op}` kernel runs on the CPU and has no {dtype} version: the model or its inputs were put in half precision "
                     "(.half(), a float16 torch_dtype or an fp16 option) while the computation happens on the CPU — no GPU is in use (CUDA not "
                     "available, a CPU-only PyTorch build, or the model/tensors were never moved), or only part of the model was moved to the GPU.")
            fixes = [
                remedy("half-not-implemented#cpu-run-float32"),
                remedy("half-not-implemented#half-model-to-gpu"),
            ]
            if dtype == "float16":
                fixes.append(remedy("half-not-implemented#cpu-bfloat16-autocast"))
            return hit("dtypes.half_cpu", "dtype_mismatch", f"`{op}` has no {dtype} kernel on the CPU", cause, fixes, docs,
                       _loc(ctx, found), 0.93, facts=Facts(dtypes=(dtype,), names=(op,), devices=("cpu",)))
        found = [error_fact(ctx), Fact("dtype", f"kernel `{op}` has no {dtype} implementation on this device")]
        cause = (f"The `{op}` kernel has no {dtype} version on the device it runs on in this PyTorch release; reduced-precision coverage "
                 "differs per operation, device and release.")
        fixes = [
            remedy("half-not-implemented#op-in-float32"),
            remedy("half-not-implemented#upgrade-for-half-kernels"),
        ]
        return hit("dtypes.half_kernel", "dtype_mismatch", f"`{op}` not implemented for {dtype}", cause, fixes, docs, _loc(ctx, found), 0.88, facts=values)
    found = [error_fact(ctx), Fact("dtype", f"kernel `{op}` has no {dtype} implementation")]
    if dtype in _INTS - {"bool"}:
        cause = (f"`{op}` is a floating-point operation but received a {dtype} tensor: integer data (raw pixel values, counts, token ids "
                 "or labels) reached an operation that needs real numbers.")
        fixes = [remedy("dtype-mismatch#int-input-to-float-before-op")]
        return hit("dtypes.not_implemented_int", "dtype_mismatch", f"`{op}` not implemented for {dtype}", cause, fixes, docs, _loc(ctx, found), 0.9, facts=values)
    cause = f"`{op}` has no implementation for {dtype} tensors: this operation is defined for other dtypes only."
    fixes = [remedy("dtype-mismatch#convert-to-supported-dtype")]
    return hit("dtypes.not_implemented", "dtype_mismatch", f"`{op}` not implemented for {dtype}", cause, fixes, docs, _loc(ctx, found), 0.85, facts=values)


_INDEX_ARG = lazy_re(r"Expected tensor for argument #\d+ '(\w+)' to have (?:one of the following )?scalar types?:? ([\w, ]+); but got ([\w.]+)")


@rule(
    'dtypes.dtype_pair',
    category='dtype_mismatch',
    docs=("dtype-mismatch", "half-not-implemented"),
    reads=TORCH_OP,
    priority=35,
    outcomes=('dtypes.pair', 'dtypes.pair_half', 'dtypes.pair_int_float', 'dtypes.pair_int_target', 'dtypes.result_cast', 'dtypes.pair_other',
              'dtypes.index_dtype', 'dtypes.index_int32'),
    examples=(
        Example("captured/cpu/numpy-float64-input-linear", "dtypes.pair"),
        Example("realworld/dev/scarches-jupyter-float-double-linear", "dtypes.pair"),
        Example("realworld/dev/cbdnet-old-cat-double-float", "dtypes.pair"),
        Example("realworld/dev/cfnsr-old-addmm-double-float", "dtypes.pair"),
        Example("realworld/dev/yolo2-old-float-double-other", "dtypes.pair"),
        Example("corpus/dtypes/linear_double_input.txt", "dtypes.pair"),
        Example("captured/cuda/dtype-float-input-half-conv", "dtypes.pair_half"),
        Example("corpus/dtypes/linear_half_input.txt", "dtypes.pair_half"),
        Example("corpus/dtypes/linear_long_input.txt", "dtypes.pair_int_float"),
        Example("captured/cpu/bce-with-logits-integer-labels", "dtypes.pair_int_target"),
        Example("corpus/dtypes/inplace_add_float_into_long.txt", "dtypes.result_cast"),
        Example("corpus/dtypes/dot_int_long.txt", "dtypes.pair_other"),
        Example("corpus/dtypes/embedding_float_ids.txt", "dtypes.index_dtype"),
        Example("corpus/dtypes/embedding_float_indices_old_summary.txt", "dtypes.index_dtype"),
        Example("corpus/dtypes/embedding_float_indices_cosyvoice.txt", "dtypes.index_dtype"),
        Example("corpus/dtypes/embedding_int_indices_old_pgpr.txt", "dtypes.index_int32"),
    ),
)
def dtype_pair(ctx: Context) -> RuleHit | None:
    """Two operands with different dtypes, and index arguments of the wrong dtype."""
    m = next((p.search(ctx.text) for p in _PAIRS if p.search(ctx.text)), None)
    if not m:
        mm = ctx.search(_INDEX_ARG.pattern)
        return _index_dtype(ctx, mm.group(1), mm.group(2).strip(), mm.group(3)) if mm else None
    a_raw, b_raw = m.group("a"), m.group("b")
    a, b = (_dtype(a_raw), _dtype(b_raw)) if a_raw and b_raw else ("?", "?")
    groups = m.groupdict()
    arg = groups.get("arg") or groups.get("seq")
    found = [error_fact(ctx), Fact("dtype", f"operands are {a} and {b}")]
    pair = {a, b}
    name, kind = ctx.layer
    where = f"`{name}`" if name else (f"the {kind} layer" if kind else "this operation")
    where = where[:1].upper() + where[1:]
    values = Facts(dtypes=(a, b), argument=arg, layer=name, layer_kind=kind)
    check = remedy("dtype-mismatch#print-dtypes-at-entry")
    if pair == {"float64", "float32"}:
        cause = (f"{where} mixes float64 (double) and float32 tensors. Model parameters are float32 by default; float64 usually comes from "
                 "NumPy (float64 arrays keep their dtype through torch.from_numpy / torch.tensor) or from tensors created with dtype=torch.double.")
        fixes = [remedy("dtype-mismatch#data-to-float32"), check]
        if _mentions(ctx, r"numpy|np\.|from_numpy|pandas|\.values\b"):
            # The text shows NumPy/pandas data: convert the array itself, where float64 is the default.
            fixes.insert(1, remedy("dtype-mismatch#numpy-array-float32"))
        return hit("dtypes.pair", "dtype_mismatch", f"dtype mismatch: {a} vs {b}", cause, fixes, ("dtype-mismatch",), _loc(ctx, found), 0.93, facts=values)
    if pair & _LOW:
        low = (pair & _LOW).pop()
        other = (pair - {low}).pop() if len(pair) > 1 else low
        cause = (f"{where} mixes {low} and {other} tensors. Part of the model or the input was converted with .half()/.bfloat16() by hand while "
                 "the rest stayed float32, or tensors produced inside an autocast region meet float32 tensors outside it.")
        fixes = [
            remedy("autocast-dtype-errors#autocast-instead-of-manual-cast"),
            remedy("half-not-implemented#convert-model-and-input-consistently", dtype=low),
            check,
        ]
        if low == "float16" and _mentions(ctx, r"bitsandbytes|load_in_8bit|\b8[- ]?bit\b|\bint8\b|LLM\.int8", re.I):
            # 8-bit layers compute in float16 while the unquantized modules stay float32 unless the model is loaded in float16.
            cause += (" Here the model is loaded in 8-bit with bitsandbytes: its int8 layers compute in float16, while the modules left "
                      "unquantized keep float32 unless the model is loaded with torch_dtype=torch.float16.")
            fixes = [remedy("bitsandbytes-quantized-models#load-8bit-in-float16"),
                     remedy("bitsandbytes-quantized-models#load-in-float16-without-8bit"), check]
        return hit("dtypes.pair_half", "dtype_mismatch", f"dtype mismatch: {a} vs {b}", cause, fixes, ("dtype-mismatch", "half-not-implemented"), _loc(ctx, found), 0.92, facts=values)
    if pair & _INTS and pair & _FLOATS:
        intd = (pair & _INTS).pop()
        raw_int = a_raw if a == intd else b_raw
        # Keep the message's own spelling too (Long, torch.LongTensor): users search for the word they saw.
        shown = f"{intd}, {raw_int.removeprefix('c10::')}" if raw_int and raw_int.lower() != intd else intd
        if arg == "target" or _mentions(ctx, r"mse_loss|l1_loss|binary_cross_entropy|smooth_l1|MSELoss|BCE\w*Loss"):
            cause = (f"A regression/binary loss got an integer ({shown}) target: losses such as BCE, BCEWithLogits and MSE compute with real "
                     "numbers and need float targets, even when the labels are 0/1.")
            fixes = [remedy("dtype-mismatch#target-to-float"), check]
            return hit("dtypes.pair_int_target", "dtype_mismatch", f"Loss target is {intd}, float expected", cause, fixes, ("dtype-mismatch",), _loc(ctx, found), 0.92, facts=values)
        if "can't be cast to the desired output type" in m.group(0):
            cause = (f"An operation produced a {a} result that has to be written into an existing {b} tensor (an in-place operation such as "
                     "`+=`/`.add_()`, or out=): PyTorch does not narrow the result type implicitly.")
            fixes = [remedy("dtype-mismatch#out-of-place-or-destination-dtype", dtype=a), check]
            return hit("dtypes.result_cast", "dtype_mismatch", f"{a} result cannot be written into a {b} tensor", cause, fixes, ("dtype-mismatch",), _loc(ctx, found), 0.9, facts=values)
        cause = (f"{where} got an integer tensor ({shown}) where floating point is needed: integer data (raw pixels, counts, ids) must be "
                 "converted before it meets float weights.")
        fixes = [remedy("dtype-mismatch#int-input-to-float"), check]
        return hit("dtypes.pair_int_float", "dtype_mismatch", f"dtype mismatch: {a} vs {b}", cause, fixes, ("dtype-mismatch",), _loc(ctx, found), 0.92, facts=values)
    cause = f"{where} received tensors of dtypes {a} and {b}; PyTorch does not promote them implicitly for this operation."
    fixes = [(remedy("dtype-mismatch#operand-to-other-dtype", expected_dtype=b) if b != "?" else remedy("dtype-mismatch#operand-to-unknown-dtype")), check]
    return hit("dtypes.pair_other", "dtype_mismatch", f"dtype mismatch: {a} vs {b}", cause, fixes, ("dtype-mismatch",), _loc(ctx, found), 0.9, facts=values)


def _index_dtype(ctx: Context, arg: str, allowed: str, got_raw: str) -> RuleHit:
    got, device = tensor_type_parts(got_raw) if "Tensor" in got_raw else (normalize_dtype(got_raw), "")
    if got_raw.startswith("CUDA"):  # old spelling: CUDAIntTensor
        got = normalize_dtype(got_raw.removeprefix("CUDA").removesuffix("Tensor"))
    found = [error_fact(ctx), Fact("dtype", f"argument `{arg}` is {got}; allowed: {allowed}")]
    values = Facts(dtypes=(got,), argument=arg, call="embedding" if _mentions(ctx, r"embedding") else None)
    if got in _INTS:
        cause = (f"Argument `{arg}` holds {got} indices, but this PyTorch release accepts only {allowed} here: indices created as int32 "
                 "(NumPy int32 arrays, .int() conversions) must be int64.")
        fixes = [remedy("dtype-mismatch#indices-to-int64")]
        return hit("dtypes.index_int32", "dtype_mismatch", f"Indices are {got}, {allowed} expected", cause, fixes, ("dtype-mismatch",), _loc(ctx, found), 0.9, facts=values)
    cause = (f"Argument `{arg}` must hold integer indices ({allowed}) but is {got}: the ids/indices were built as floating point "
             "(a float array or a float tensor constructor, or arithmetic that produced floats).")
    fixes = [remedy("dtype-mismatch#pass-integer-indices")]
    return hit("dtypes.index_dtype", "dtype_mismatch", "Indices must be integers", cause, fixes, ("dtype-mismatch",), _loc(ctx, found), 0.9, facts=values)
