"""dtype disagreements: float32 vs float64, integer targets, half precision on unsupported kernels."""

from __future__ import annotations

import re

from assistant.parse.messages import normalize_dtype, tensor_type_parts
from assistant.rules.registry import Example, rule
from assistant.rules.base import with_location as _loc, Context, error_fact, fix, hit
from assistant.types import Fact, RuleHit

_PAIRS = (
    re.compile(r"mat1 and mat2 must have the same dtype, but got (?P<a>\w+) and (?P<b>\w+)"),
    re.compile(r"expected (?:m1|mat1) and (?:m2|mat2) to have the same dtype, but got: (?P<a>[\w:]+)\s*!=\s*(?P<b>[\w:]+)"),
    re.compile(r"expected scalar type (?P<b>\w+) but found (?P<a>\w+)"),
    re.compile(r"Expected object of scalar type (?P<b>\w+) but got scalar type (?P<a>\w+)(?: for argument #\d+ '(?P<arg>\w+)')?"),
    re.compile(r"Input type \((?P<a>[\w.]+)\) and (?:weight|bias) type \((?P<b>[\w.]+)\) should be the same"),
    re.compile(r"self and mat2 must have the same dtype(?:, but got (?P<a>\w+) and (?P<b>\w+))?"),
    re.compile(r"expected both vectors to have same dtype, but found (?P<a>\w+) and (?P<b>\w+)"),
    re.compile(r"Found dtype (?P<a>\w+) but expected (?P<b>\w+)"),
    re.compile(r"result type (?P<a>\w+) can't be cast to the desired output type (?P<b>\w+)"),
    re.compile(r"expected (?:input|weight) and (?:weight|bias|input) to have the same dtype, but got (?P<a>\w+) and (?P<b>\w+)"),
)
_FLOATS = {"float32", "float64", "float16", "bfloat16"}
_INTS = {"int64", "int32", "int16", "int8", "uint8", "bool"}



@rule(
    'dtypes.loss_target_dtype',
    category='dtype_mismatch',
    docs=("loss-target-dtype", "dtype-mismatch"),
    priority=250,
    outcomes=('dtypes.loss_target',),
    examples=(),
)
def loss_target_dtype(ctx: Context) -> RuleHit | None:
    """Classification losses need integer class indices (Long); regression losses need float targets."""
    m = ctx.search(r"expected target dtype to be Long or Byte, but got (\w+)|\"nll_loss\w*\" not implemented for '(\w+)'")
    old = ctx.search(r"Expected object of scalar type Long but got scalar type (\w+) for argument #\d+ 'target'")
    is_nll = bool(m or old) or bool(ctx.search(r"expected scalar type Long but found (\w+)") and ctx.search(r"nll_loss|cross_entropy", re.I))
    if not is_nll:
        return None
    got = normalize_dtype((m.group(1) or m.group(2)) if m else old.group(1) if old else ctx.search(r"expected scalar type Long but found (\w+)").group(1))  # type: ignore[union-attr]
    found = [error_fact(ctx), Fact("dtype", f"target dtype is {got}; nll_loss/cross_entropy class targets must be int64 (Long)")]
    if got in _FLOATS:
        cause = (f"CrossEntropyLoss/NLLLoss with class-index targets needs int64 labels, but the target is {got}. Labels usually become float when "
                 "built with torch.tensor(list_of_floats), read from a float numpy/pandas column, or passed through a float transform.")
        fixes = [
            fix("Cast the labels to long", "", "loss = criterion(logits, target.long())", "loss-target-dtype"),
            fix("If the targets are probabilities (soft labels), keep them float but give them the logits' shape", "CrossEntropyLoss accepts float targets of shape (N, C).", "loss = F.cross_entropy(logits, soft_targets)  # soft_targets: (N, C) float", "loss-target-dtype"),
            fix("For binary targets with one logit, use BCEWithLogitsLoss", "", "loss = F.binary_cross_entropy_with_logits(logits.squeeze(1), target.float())", "loss-target-dtype"),
        ]
    else:
        cause = f"The loss kernel for class-index targets is implemented for int64 (Long), not {got}."
        fixes = [fix("Cast the labels to long", "", "loss = criterion(logits, target.long())", "loss-target-dtype")]
    return hit("dtypes.loss_target", "dtype_mismatch", f"Loss target has dtype {got}, expected int64 (Long)", cause, fixes, ("loss-target-dtype", "dtype-mismatch"), _loc(ctx, found), 0.95)


@rule(
    'dtypes.not_implemented_for',
    category='dtype_mismatch',
    docs=("half-not-implemented", "dtype-mismatch"),
    priority=251,
    outcomes=('dtypes.not_implemented',),
    examples=(),
)
def not_implemented_for(ctx: Context) -> RuleHit | None:
    """``"addmm_impl_cpu_" not implemented for 'Half'``: the kernel has no implementation for that dtype/device."""
    m = ctx.search(r"\"(\w+)\" not implemented for '(\w+)'")
    if not m:
        return None
    op, dtype = m.group(1), normalize_dtype(m.group(2))
    found = [error_fact(ctx), Fact("dtype", f"kernel `{op}` has no {dtype} implementation" + (" on the CPU" if "cpu" in op.lower() else ""))]
    if dtype in ("float16", "bfloat16"):
        cause = (f"The `{op}` kernel has no {dtype} version" + (" on the CPU" if "cpu" in op.lower() or "Impl" in op else "")
                 + ". Half-precision models usually run on the GPU; on the CPU many kernels only exist for float32 (and some for bfloat16).")
        fixes = [
            fix("Run float32 on the CPU (or move to the GPU)", "Call model.float() and pass float32 inputs, or .to('cuda') if half precision was intended.", "model = model.float(); x = x.float()", "half-not-implemented"),
            fix("Use autocast instead of .half()", "autocast picks a safe dtype per op; on CPU use bfloat16.", "with torch.autocast('cpu', dtype=torch.bfloat16):\n    y = model(x)", "half-not-implemented"),
        ]
    elif dtype in _INTS:
        cause = f"`{op}` is a floating-point operation but received {dtype} tensors (integer data such as raw pixels or token ids passed where floats are expected)."
        fixes = [fix("Convert the input to float", "Images: x.float() / 255.", "x = x.float()", "dtype-mismatch")]
    else:
        cause = f"`{op}` is not implemented for {dtype}."
        fixes = [fix("Convert to a supported dtype", "", "x = x.float()", "dtype-mismatch")]
    return hit("dtypes.not_implemented", "dtype_mismatch", f"`{op}` not implemented for {dtype}", cause, fixes, ("half-not-implemented", "dtype-mismatch"), _loc(ctx, found), 0.9)


@rule(
    'dtypes.dtype_pair',
    category='dtype_mismatch',
    docs=("dtype-mismatch", "half-not-implemented"),
    priority=252,
    outcomes=('dtypes.pair', 'dtypes.index_dtype'),
    examples=(),
)
def dtype_pair(ctx: Context) -> RuleHit | None:
    """Two operands with different dtypes."""
    m = next((p.search(ctx.text) for p in _PAIRS if p.search(ctx.text)), None)
    if not m:
        if ctx.search(r"Expected tensor for argument #\d+ '(\w+)' to have (?:one of the following )?scalar types?:? ([\w, ]+); but got ([\w.]+)"):
            mm = ctx.search(r"Expected tensor for argument #\d+ '(\w+)' to have (?:one of the following )?scalar types?:? ([\w, ]+); but got ([\w.]+)")
            cause = f"Argument `{mm.group(1)}` must be {mm.group(2).strip()} but is {mm.group(3)}: embedding/index arguments must be integer tensors."  # type: ignore[union-attr]
            fixes = [fix("Pass integer indices", "Token ids and indices must be int64.", "ids = ids.long()", "dtype-mismatch")]
            return hit("dtypes.index_dtype", "dtype_mismatch", "Indices must be integers", cause, fixes, ("dtype-mismatch",), _loc(ctx, [error_fact(ctx)]), 0.9)
        return None
    a_raw, b_raw = m.group("a"), m.group("b")
    if a_raw is None or b_raw is None:
        a = b = "?"
    elif "Tensor" in a_raw or "Tensor" in b_raw:
        a, b = tensor_type_parts(a_raw)[0], tensor_type_parts(b_raw)[0]
    else:
        a, b = normalize_dtype(a_raw), normalize_dtype(b_raw)
    arg = m.groupdict().get("arg")
    found = [error_fact(ctx), Fact("dtype", f"operands are {a} and {b}")]
    pair = {a, b}
    name, kind = ctx.layer
    where = f"`{name}`" if name else (f"the {kind} layer" if kind else "this operation")
    if pair == {"float64", "float32"}:
        cause = (f"{where[0].upper() + where[1:]} mixes float64 (double) and float32 tensors. Model parameters are float32 by default; "
                 "float64 usually comes from NumPy (np.float64 arrays converted with torch.from_numpy / torch.tensor keep float64) or from Python floats in torch.tensor(..., dtype=torch.double).")
        fixes = [
            fix("Convert the data to float32", "Do it once in the Dataset or right after loading.", "x = torch.from_numpy(arr).float()  # or torch.as_tensor(arr, dtype=torch.float32)", "dtype-mismatch"),
            fix("Or convert at the source", "", "arr = arr.astype(np.float32)", "dtype-mismatch"),
        ]
    elif pair & {"float16", "bfloat16"}:
        low = (pair & {"float16", "bfloat16"}).pop()
        cause = (f"{where[0].upper() + where[1:]} mixes {low} and {(pair - {low}).pop() if len(pair) > 1 else low} tensors. This happens when part of the model or the "
                 "input was converted with .half()/.bfloat16() by hand while the rest stayed float32, or when tensors produced inside an autocast region "
                 "meet float32 tensors outside it.")
        fixes = [
            fix("Let autocast manage precision instead of manual .half()", "Keep parameters float32 and wrap the forward pass.", "with torch.autocast('cuda', dtype=torch.bfloat16):\n    out = model(x)", "autocast-dtype-errors"),
            fix("Or convert model and input consistently", "", f"model = model.to(torch.{low}); x = x.to(torch.{low})", "half-not-implemented"),
        ]
    elif pair & _INTS and pair & _FLOATS:
        intd = (pair & _INTS).pop()
        cause = (f"{where[0].upper() + where[1:]} got an integer tensor ({intd}) where floating point is needed (or the reverse). "
                 + ("Regression/BCE targets must be float." if arg == "target" or ctx.search(r"mse|l1_loss|binary_cross_entropy|Found dtype", re.I) else
                    "Integer data (raw pixels, counts, labels) must be converted before it meets float weights."))
        fixes = [fix("Convert to float", "", "target = target.float()  # or x = x.float() / 255 for uint8 images", "dtype-mismatch")]
    else:
        cause = f"{where[0].upper() + where[1:]} received tensors of dtypes {a} and {b}; PyTorch does not promote them implicitly here."
        fixes = [fix(f"Convert one operand so both are {b}", "", f"x = x.to(torch.{b})" if b != "?" else "x = x.to(weight.dtype)", "dtype-mismatch")]
    fixes.append(fix("Check dtypes where data enters the model", "Print x.dtype and next(model.parameters()).dtype before the failing call.", "print(x.dtype, next(model.parameters()).dtype)", "dtype-mismatch"))
    title = f"dtype mismatch: {a} vs {b}"
    return hit("dtypes.pair", "dtype_mismatch", title, cause, fixes, ("dtype-mismatch", "half-not-implemented"), _loc(ctx, found), 0.93)
