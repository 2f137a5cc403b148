"""Mixed precision: GradScaler misuse, autocast-unsafe losses, fp16 overflow in constants."""

from __future__ import annotations

from assistant.rules.registry import Example, rule
from assistant.rules.base import basic_facts as _found, Context, fix, hit
from assistant.types import RuleHit

_DOCS = ("gradscaler-misuse", "autocast-dtype-errors")



@rule(
    'amp.gradscaler',
    category='amp_error',
    docs=_DOCS,
    priority=230,
    outcomes=('amp.fp16_params', 'amp.unscale_twice', 'amp.no_inf_checks', 'amp.order'),
    examples=(),
)
def gradscaler(ctx: Context) -> RuleHit | None:
    """The GradScaler state machine used out of order, or on fp16 parameters."""
    if ctx.search(r"Attempting to unscale FP16 gradients"):
        cause = ("GradScaler found float16 gradients, which means the model's parameters themselves are float16 (model.half()). Mixed precision keeps "
                 "float32 master weights and lets autocast run the math in fp16; unscaling fp16 gradients would lose the small values scaling protects.")
        fixes = [
            fix("Keep the model in float32 and use autocast", "Remove model.half(); autocast chooses fp16 per operation.", "model = model.float()\nscaler = torch.amp.GradScaler('cuda')\nwith torch.autocast('cuda', dtype=torch.float16):\n    loss = criterion(model(x), y)\nscaler.scale(loss).backward()\nscaler.step(optimizer)\nscaler.update()", "gradscaler-misuse"),
            fix("Or use bfloat16, which needs no GradScaler", "On Ampere/Hopper GPUs bf16 has fp32's range.", "with torch.autocast('cuda', dtype=torch.bfloat16):\n    loss = criterion(model(x), y)\nloss.backward(); optimizer.step()", "gradscaler-misuse"),
        ]
        return hit("amp.fp16_params", "amp_error", "GradScaler with float16 parameters", cause, fixes, _DOCS, _found(ctx), 0.95)
    if ctx.search(r"unscale_\(\) has already been called on this optimizer since the last update\(\)"):
        cause = ("scaler.unscale_(optimizer) ran twice for the same optimizer before scaler.update(): typically once explicitly for gradient clipping and once "
                 "more (another unscale_ call, or a helper/library that also unscales), or update() is missing so the state never resets.")
        fixes = [fix("Call unscale_ once per optimizer per step, then step and update", "", "scaler.scale(loss).backward()\nscaler.unscale_(optimizer)\ntorch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\nscaler.step(optimizer)   # does not unscale again\nscaler.update()", "gradscaler-misuse")]
        return hit("amp.unscale_twice", "amp_error", "GradScaler.unscale_() called twice", cause, fixes, _DOCS, _found(ctx), 0.95)
    if ctx.search(r"No inf checks were recorded for this optimizer"):
        cause = ("scaler.step(optimizer) found no gradients it had scaled: backward was called on the unscaled loss (loss.backward() instead of "
                 "scaler.scale(loss).backward()), or none of this optimizer's parameters received gradients.")
        fixes = [fix("Backpropagate the scaled loss", "", "scaler.scale(loss).backward()\nscaler.step(optimizer)\nscaler.update()", "gradscaler-misuse")]
        return hit("amp.no_inf_checks", "amp_error", "GradScaler.step() without scaled gradients", cause, fixes, _DOCS, _found(ctx), 0.93)
    if ctx.search(r"step\(\) has already been called since the last update\(\)|update\(\) called before step"):
        cause = "GradScaler's step()/update() sequence is out of order for this optimizer (step twice without update)."
        fixes = [fix("One scale/backward, one step per optimizer, then a single update", "", "scaler.step(opt); scaler.update()", "gradscaler-misuse")]
        return hit("amp.order", "amp_error", "GradScaler calls out of order", cause, fixes, _DOCS, _found(ctx), 0.9)
    return None


@rule(
    'amp.autocast_misc',
    category='amp_error',
    docs=_DOCS[::-1],
    priority=231,
    outcomes=('amp.bce_unsafe', 'amp.overflow_constant', 'amp.no_bf16'),
    examples=(),
)
def autocast_misc(ctx: Context) -> RuleHit | None:
    """Ops that refuse autocast, and constants that overflow half precision."""
    if ctx.search(r"binary_cross_entropy and torch\.nn\.BCELoss are unsafe to autocast"):
        cause = "BCELoss on probabilities is numerically unsafe in float16, so autocast refuses it."
        fixes = [fix("Use BCEWithLogitsLoss on raw logits", "Remove the sigmoid from the model's output.", "criterion = nn.BCEWithLogitsLoss()\nloss = criterion(logits, target)", "autocast-dtype-errors")]
        return hit("amp.bce_unsafe", "amp_error", "BCELoss under autocast", cause, fixes, _DOCS[::-1], _found(ctx), 0.95)
    if ctx.search(r"value cannot be converted to type (?:at::)?(Half|BFloat16|c10::Half) without overflow"):
        cause = ("A Python constant (typically -1e9 or 1e10 used to mask attention scores) does not fit in float16 (max ≈ 65504), so filling a half tensor with it fails.")
        fixes = [fix("Use the dtype's own limits", "", "scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)", "autocast-dtype-errors")]
        return hit("amp.overflow_constant", "amp_error", "Constant overflows half precision", cause, fixes, _DOCS[::-1], _found(ctx), 0.92)
    if ctx.search(r"Current CUDA Device does not support bfloat16"):
        cause = "bfloat16 was requested on a GPU without native bf16 support (pre-Ampere)."
        fixes = [fix("Use float16 with GradScaler instead", "", "torch.autocast('cuda', dtype=torch.float16)", "gradscaler-misuse")]
        return hit("amp.no_bf16", "amp_error", "GPU without bfloat16", cause, fixes, _DOCS, _found(ctx), 0.9)
    return None
