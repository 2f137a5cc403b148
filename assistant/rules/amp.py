"""Mixed precision: GradScaler misuse, autocast-unsafe losses, constants that overflow half precision."""

from __future__ import annotations

import re

from assistant.kb.code_values import UserCode
from assistant.rules.dispatch import TORCH_OP
from assistant.rules.registry import Example, rule
from assistant.rules.base import basic_facts as _found, Context, hit, lazy_re, remedy
from assistant.types import Fact, Facts, Fix, RuleHit

_DOCS = ("gradscaler-misuse", "autocast-dtype-errors")
_MIXED_DOCS = ("autocast-mixed-reduced-types", "autocast-dtype-errors")
_LIBRARY = lazy_re(r"transformers/trainer\.py|accelerate/|pytorch_lightning|lightning/|peft/|deepspeed")


_HF_TRAINER_FLAGS = lazy_re(r"--per_device_train_batch_size|--gradient_accumulation_steps|TrainingArguments\(")
# The user's code reaches a training framework's own scaler or backward (Accelerate, Lightning): that framework owns the loss scaling.
_FRAMEWORK_SCALER = lazy_re(r"accelerator\.(?:scaler|backward)\b|\bmanual_backward\(|trainer\.(?:scaler|precision_plugin)\b")
_BCE_WORD = lazy_re(r"binary_cross_entropy|\bBCELoss\b|binary cross[- ]entropy", re.I)
_AUTOCAST_WORD = lazy_re(r"autocast|precision\s*=\s*['\"]?16|mixed[- ]precision|\bAMP\b")
_REFUSAL_WORD = lazy_re(r"\berror\b|unsafe|can'?t|cannot|doesn'?t support|not supported|crash|fails?\b|complain", re.I)


# A compiled extension reading its input as float (data<float> / data_ptr<float>) was handed a half tensor.
_FLOAT_KERNEL_GOT_HALF = lazy_re(r"expected scalar type Float but found Half[^\n]*data(?:_ptr)?<float>|data(?:_ptr)?<float>[^\n]*expected scalar type Float but found Half")
_MIXED_CONTEXT = lazy_re(r"\bapex\b|autocast|\bamp\b|mixed[- ]precision|mix-precision|\bfp16\b|opt_level", re.I)


def _custom_op_half(ctx: Context) -> RuleHit | None:
    """Mixed precision (apex O1 / autocast) feeds float16 tensors to a custom float32-only CUDA/C++ op."""
    apex = any("/apex/amp/" in f.file.replace("\\", "/") for f in ctx.failure.frames)
    if not (ctx.search(_FLOAT_KERNEL_GOT_HALF.pattern) and (apex or _MIXED_CONTEXT.search(ctx.text))):
        return None
    cause = ("Under mixed precision (apex amp or autocast) the tensors reaching a custom compiled operation are float16, but its kernel reads "
             "them as float32 (the message comes from the extension asking for a float pointer). Mixed precision casts the inputs of "
             "standard PyTorch ops only; a custom extension op has to be told to run in float32, or be given float32 inputs.")
    fixes = [
        remedy("autocast-dtype-errors#cast-custom-op-inputs"),
        remedy("autocast-dtype-errors#custom-fwd-float32"),
    ]
    if apex:
        fixes.append(remedy("autocast-dtype-errors#apex-register-float-function"))
    return hit("amp.custom_op_half", "amp_error", "Custom op given float16 under mixed precision", cause, fixes, _DOCS[::-1], _found(ctx), 0.9,
               facts=Facts(dtypes=("float16", "float32"), names=("apex",) if apex else ()))


# Autocast's "promote" policy (cat, stack, index_put, grid_sample, addcmul, ...) met floating inputs of a reduced type that
# is not the region's own: float16 inside a bfloat16 region or the reverse (also fp8). Same wording in every release.
_PRIORITIZE = lazy_re(r"Unexpected floating ScalarType in at::autocast::prioritize")
# An explicit cast to a reduced type written on a tensor: the usual way a second reduced type enters an autocast region.
_HAND_CAST = lazy_re(r"\.half\(\)|\.bfloat16\(\)|\.to\([^)\n]{0,60}(?:float16|bfloat16|\bhalf\b)|\.type\([^)\n]{0,40}(?:Half|BFloat16)")
_HALF_NAME = lazy_re(r"\.half\(\)|float16|\bfp16\b|\bHalf\b")
_BF16_NAME = lazy_re(r"bfloat16|\bbf16\b|BFloat16")
_BACKWARD_CALL = lazy_re(r"\.backward\(|autograd\.backward|run_backward|\bbackward pass\b|\bin backward\b")


def _whole(ctx: Context) -> str:
    """The pasted text as the user gave it (code blocks included), for the code-level cues."""
    return ctx.failure.text or ctx.text


def _in_backward(ctx: Context) -> bool:
    """Whether the error is raised by backward: a backward frame, or (prose) backward named beside the error."""
    if ctx.failure.frames:
        return any(f.function in ("backward", "run_backward", "_engine_run_backward") or "autograd/__init__" in f.file.replace("\\", "/")
                   for f in ctx.failure.frames)
    return bool(_BACKWARD_CALL.search(_whole(ctx)))


def _drop_cast(text: str) -> Fix:
    """The fix dropping the cast, shown on the user's own line that casts when the text shows one."""
    m = _HAND_CAST.search(text) if text else None
    if m is None:
        return remedy("autocast-mixed-reduced-types#drop-manual-cast")
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    own = text[start:end if end != -1 else len(text)].strip()
    return remedy("autocast-mixed-reduced-types#drop-manual-cast-own-line", line=UserCode(own), cast=m.group(0))


def _prioritize(ctx: Context) -> RuleHit | None:
    """Autocast's promote policy met two different reduced floating types among one op's inputs."""
    if not ctx.search(_PRIORITIZE.pattern) and not _PRIORITIZE.search(_whole(ctx)):
        return None
    text = _whole(ctx)
    cast = _HAND_CAST.search(text)
    backward = _in_backward(ctx)
    line = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
    names = tuple(n for n, pat in (("float16", _HALF_NAME), ("bfloat16", _BF16_NAME)) if pat.search(text))
    found = _found(ctx)
    if cast:
        found.append(Fact("cast", f"your text casts a tensor by hand: `{cast.group(0)}`"))
    mixed_story = ("Under autocast, ops on its promote list (cat, stack, index_put, grid_sample, addcmul and similar) look at all their "
                   "floating inputs and pick one dtype for them: float32 wins over a reduced type, and the reduced type must be the one "
                   "the autocast region uses. This op received a float16 input inside a bfloat16 region (or a bfloat16 input inside a "
                   "float16 region, or an fp8 tensor), a combination autocast refuses to mix.")
    if backward and not cast:
        cause = ("The error comes from backward under " + ("bfloat16 " if "bfloat16" in names else "") + "autocast. Older PyTorch releases "
                 "kept the autocast dtype per thread, and backward runs on its own threads, where autocast fell back to its default "
                 "float16 and met the bfloat16 tensors saved in forward: a PyTorch bug, fixed upstream in 2024 (releases from 2.5 on). "
                 + mixed_story
                 + " If your own code casts tensors to another reduced type inside the region, that gives the same error in forward.")
        fixes = [
            remedy("autocast-mixed-reduced-types#upgrade-torch-backward-autocast-dtype"),
            remedy("autocast-mixed-reduced-types#op-outside-autocast-float32"),
            remedy("autocast-mixed-reduced-types#float32-inputs-let-autocast-choose"),
        ]
        return hit("amp.prioritize_backward", "amp_error", "Mixed reduced types under autocast in backward", cause, fixes, _MIXED_DOCS, found, 0.85,
                   facts=Facts(dtypes=("bfloat16", "float16"), flags=frozenset({"in_backward"})))
    cause = mixed_story + (" Your text casts a tensor by hand (`" + cast.group(0) + "`): a manual cast to the other reduced type inside the "
                           "region is the usual source." if cast else " Usually one input was cast by hand (`.half()`, `.bfloat16()`, "
                           "`.to(torch.float16)`) or created or loaded in the other reduced type (weights, cached features or a "
                           "checkpoint stored in float16 while the run autocasts to bfloat16).")
    if "float16" in names and "bfloat16" in names:
        cause += " The text names both float16 and bfloat16."
    if backward:
        cause += (" Raised in backward with no such cast in sight, it can also be a bug of older releases (backward running with autocast's "
                  "default float16 instead of the region's bfloat16); upgrading PyTorch fixes that one.")
    fixes = [
        _drop_cast(line if line and _HAND_CAST.search(line) else text),
        remedy("autocast-mixed-reduced-types#one-dtype-for-op-inputs"),
        remedy("autocast-mixed-reduced-types#convert-stored-tensors-on-load"),
    ]
    if backward:
        fixes.append(remedy("autocast-mixed-reduced-types#upgrade-if-raised-in-backward"))
    return hit("amp.prioritize_mixed", "amp_error", "Two reduced float types mixed under autocast", cause, fixes, _MIXED_DOCS, found, 0.9,
               facts=Facts(dtypes=names or ("bfloat16", "float16"), call=cast.group(0) if cast else None))


def _library(ctx: Context) -> str | None:
    """The training library whose frames appear in the traceback (its own scaler calls are then involved)."""
    for f in ctx.failure.frames:
        m = _LIBRARY.search(f.file.replace("\\", "/"))
        if m:
            return m.group(0).split("/")[0].removesuffix(".py")
    return None


@rule(
    'amp.gradscaler',
    category='amp_error',
    docs=_DOCS,
    reads=(*TORCH_OP, "ValueError", "AssertionError"),
    priority=30,
    outcomes=('amp.fp16_params', 'amp.unscale_twice', 'amp.unscale_after_step', 'amp.no_inf_checks', 'amp.order', 'amp.update_without_step', 'amp.no_scale'),
    examples=(
        Example("captured/cpu/gradscaler-fp16-params-cpu", "amp.fp16_params"),
        Example("captured/cuda/amp-gradscaler-half-model", "amp.fp16_params"),
        Example("realworld/dev/chinesevicuna-unscale-fp16-trainer", "amp.fp16_params"),
        Example("corpus/amp/unscale_fp16_dreambooth.txt", "amp.fp16_params"),
        Example("corpus/amp/unscale_fp16_cogvideo.txt", "amp.fp16_params"),
        Example("captured/cuda/amp-unscale-twice-grad-accum", "amp.unscale_twice"),
        Example("corpus/amp/unscale_twice_cpu.txt", "amp.unscale_twice"),
        Example("corpus/amp/unscale_twice_lvsm.txt", "amp.unscale_twice"),
        Example("corpus/amp/unscale_twice_swin.txt", "amp.unscale_twice"),
        Example("realworld/dev/chatglm-eff-unscale-already-called-fp16", "amp.unscale_twice"),
        Example("corpus/amp/unscale_after_step_cpu.txt", "amp.unscale_after_step"),
        Example("realworld/dev/gof-no-inf-checks-spawn-none-grads", "amp.no_inf_checks"),
        Example("realworld/dev/mmseg-no-inf-checks-custom-loss-detached", "amp.no_inf_checks"),
        Example("corpus/amp/no_inf_checks_other_optimizer_cpu.txt", "amp.no_inf_checks"),
        Example("corpus/amp/step_twice_cpu.txt", "amp.order"),
        Example("corpus/amp/step_twice_msamp.txt", "amp.order"),
        Example("corpus/amp/step_twice_icefall.txt", "amp.order"),
        Example("corpus/amp/update_without_step_cpu.txt", "amp.update_without_step"),
        Example("corpus/amp/step_without_scale_cpu.txt", "amp.no_scale"),
    ),
)
def gradscaler(ctx: Context) -> RuleHit | None:
    """The GradScaler state machine used out of order, or on fp16 parameters."""
    lib = _library(ctx)
    # The device the scaler runs on, for the example code: CPU only when the text shows a CPU scaler.
    dev = "cpu" if re.search(r"GradScaler\(\s*['\"]cpu|device_type\s*=\s*['\"]cpu", ctx.failure.text or "") or (
        not re.search(r"cuda", ctx.failure.text or "", re.I)) else "cuda"
    if ctx.search(r"Attempting to unscale FP16 gradients"):
        cause = ("GradScaler found float16 gradients, which means the parameters being optimized are themselves float16 (the model or some of "
                 "its layers were converted with .half() or loaded in float16). Mixed precision keeps float32 weights and lets autocast run the "
                 "math in float16; the scaler refuses to unscale gradients that are already half precision.")
        if lib:
            cause += (f" The traceback runs through {lib}: its fp16/mixed-precision option adds a GradScaler, which conflicts with trainable "
                      "weights loaded in float16 — keep the trainable parameters (e.g. adapter weights) in float32.")
        fixes = [
            remedy("gradscaler-misuse#float32-params-with-autocast", device=dev),
            remedy("gradscaler-misuse#bfloat16-without-scaler", device=dev),
        ]
        # The report ties the failure to a validation/sampling step run during training: that step cast the shared model.
        if ctx.search(r"validation|log_validation|\bevaluat(?:e|ion)\b.{0,40}(?:during|while) training"):
            cause += (" The text ties the failure to a validation step: code that prepares the model for inference in float16 "
                      "converts the weights being trained as well.")
            fixes.insert(0, remedy("gradscaler-misuse#keep-dtype-during-validation"))
        return hit("amp.fp16_params", "amp_error", "GradScaler with float16 parameters", cause, fixes, _DOCS, _found(ctx), 0.95,
                   facts=Facts(dtypes=("float16",), call="GradScaler.unscale_", names=(lib,) if lib else ()))
    if ctx.search(r"unscale_\(\) has already been called on this optimizer since the last update\(\)"):
        cause = ("scaler.unscale_(optimizer) ran a second time for the same optimizer before scaler.update() reset its state: an explicit "
                 "unscale_ (for gradient clipping) combined with another one, unscale_ inside a gradient-accumulation loop that runs every "
                 "micro-batch, or an update() that is skipped on some iterations (for example together with a skipped step).")
        if lib:
            cause += f" The traceback runs through {lib}, which unscales for its own gradient clipping: a version mismatch between it and the code calling it is a known source."
        elif _HF_TRAINER_FLAGS.search(ctx.failure.text or ""):
            # No frames, but the command line is a Hugging Face Trainer one (TrainingArguments flags): the Trainer does the unscaling.
            lib = "transformers"
            cause += (" The options shown are Hugging Face Trainer arguments (fp16 with gradient accumulation): the Trainer and accelerate "
                      "unscale for gradient clipping themselves, and mismatched releases of the two are a known source of a double unscale.")
        fixes = [remedy("gradscaler-misuse#unscale-once-update-every-iteration")]
        if lib:
            fixes.append(remedy("gradscaler-misuse#upgrade-training-library", package=lib))
        return hit("amp.unscale_twice", "amp_error", "GradScaler.unscale_() called twice", cause, fixes, _DOCS, _found(ctx), 0.95,
                   facts=Facts(call="GradScaler.unscale_", names=(lib,) if lib else ()))
    if ctx.search(r"unscale_\(\) is being called after step\(\)"):
        cause = ("scaler.unscale_(optimizer) was called after scaler.step(optimizer) in the same iteration: step() already unscaled (and applied) "
                 "the gradients, so clipping or inspecting them has to happen before step().")
        fixes = [remedy("gradscaler-misuse#unscale-clip-before-step")]
        return hit("amp.unscale_after_step", "amp_error", "GradScaler.unscale_() after step()", cause, fixes, _DOCS, _found(ctx), 0.93,
                   facts=Facts(call="GradScaler.unscale_"))
    if ctx.search(r"No inf checks were recorded for this optimizer"):
        cause = ("scaler.step(optimizer) found no gradients that the scaler had processed for this optimizer: none of its parameters received a "
                 "gradient from the scaled loss — the loss was detached from them (a custom loss computed outside the graph, .detach()/.item()/numpy "
                 "on the way, or values re-wrapped with torch.tensor(...)), the optimizer holds parameters of another model, or backward was called on the unscaled loss.")
        fixes = [
            remedy("gradscaler-misuse#backward-scaled-loss"),
            remedy("gradscaler-misuse#check-params-got-gradients"),
        ]
        if "torch.tensor(" in (ctx.failure.text or "") or any("torch.tensor(" in (f.source or "") for f in ctx.failure.frames):
            fixes.insert(0, remedy("gradscaler-misuse#loss-from-prediction-tensors"))
        if _FRAMEWORK_SCALER.search(ctx.failure.text or ""):
            fixes.insert(0, remedy("gradscaler-misuse#let-framework-scale"))
        return hit("amp.no_inf_checks", "amp_error", "GradScaler.step() without gradients from the scaled loss", cause, fixes, _DOCS, _found(ctx), 0.93,
                   facts=Facts(call="GradScaler.step"))
    if ctx.search(r"step\(\) has already been called since the last update\(\)"):
        cause = ("scaler.step(optimizer) ran twice for the same optimizer without scaler.update() in between: update() is missing from the loop, "
                 "sits inside a condition or outside the loop, or the same optimizer object is stepped twice per iteration.")
        fixes = [remedy("gradscaler-misuse#one-step-one-update")]
        return hit("amp.order", "amp_error", "GradScaler.step() twice without update()", cause, fixes, _DOCS, _found(ctx), 0.92,
                   facts=Facts(call="GradScaler.step"))
    if ctx.search(r"No inf checks were recorded prior to update"):
        cause = ("scaler.update() ran although no scaler.step(optimizer) happened since the last update: the step was skipped on this iteration "
                 "(for example inside a gradient-accumulation branch) while update() still runs.")
        fixes = [remedy("gradscaler-misuse#update-only-after-step")]
        if _FRAMEWORK_SCALER.search(ctx.failure.text or ""):
            cause += (" The code reaches the training framework's own scaler: the framework already scales, steps and updates inside its "
                      "backward and wrapped optimizer, so calling that scaler by hand leaves its per-iteration record empty.")
            fixes.insert(0, remedy("gradscaler-misuse#let-framework-scale"))
        return hit("amp.update_without_step", "amp_error", "GradScaler.update() without step()", cause, fixes, _DOCS, _found(ctx), 0.9,
                   facts=Facts(call="GradScaler.update"))
    m = ctx.search(r"Attempted (\w+) but _scale is None")
    if m:
        cause = (f"scaler.{m.group(1)}() was called before the scaler ever scaled a loss: scaler.scale(loss) is never called, so backward ran on "
                 "the unscaled loss and the scaler has no scale factor yet.")
        fixes = [remedy("gradscaler-misuse#scale-loss-before-backward")]
        return hit("amp.no_scale", "amp_error", f"GradScaler.{m.group(1)}() before scale()", cause, fixes, _DOCS, _found(ctx), 0.92,
                   facts=Facts(call=f"GradScaler.{m.group(1)}"))
    return None


@rule(
    'amp.autocast_misc',
    category='amp_error',
    docs=(*_DOCS[::-1], "autocast-mixed-reduced-types", "bf16-unsupported-gpu"),
    reads=(*TORCH_OP, "ValueError"),
    priority=31,
    outcomes=('amp.bce_unsafe', 'amp.overflow_constant', 'amp.no_bf16', 'amp.custom_op_half', 'amp.prioritize_mixed', 'amp.prioritize_backward'),
    examples=(
        Example("corpus/amp/prioritize_half_in_bf16_roma.txt", "amp.prioritize_mixed"),
        Example("corpus/amp/prioritize_cat_half_in_bf16_cpu.txt", "amp.prioritize_mixed"),
        Example("corpus/amp/prioritize_stack_bf16_half_cpu.txt", "amp.prioritize_mixed"),
        Example("corpus/amp/prioritize_bf16_backward_pt132715.txt", "amp.prioritize_backward"),
        Example("corpus/amp/bce_unsafe_transfiner.txt", "amp.bce_unsafe"),
        Example("corpus/amp/bce_unsafe_yolox.txt", "amp.bce_unsafe"),
        Example("realworld/dev/lightning-precision16-bce-autocast", "amp.bce_unsafe"),
        Example("realworld/dev/yolov4-vc-binary-cross-entropy-autocast", "amp.bce_unsafe"),
        Example("corpus/amp/bce_unsafe_prose_pyaptamer_title.txt", "amp.bce_unsafe"),
        Example("corpus/amp/bce_unsafe_prose_bcewithlogits_comment.txt", "amp.bce_unsafe"),
        Example("corpus/amp/half_masked_fill_overflow.txt", "amp.overflow_constant"),
        Example("corpus/amp/no_bf16_rtg.txt", "amp.no_bf16"),
        Example("corpus/amp/no_bf16_nanogpt.txt", "amp.no_bf16"),
        Example("corpus/amp/no_bf16_trainer_args_v100_fastchat.txt", "amp.no_bf16"),
        Example("realworld/dev/apex-custom-iou-op-half-float", "amp.custom_op_half"),
        Example("corpus/amp/custom_op_half_dcnv2_apex_2080ti.txt", "amp.custom_op_half"),
        Example("corpus/amp/custom_op_half_dcnv2_apex_mixprecision.txt", "amp.custom_op_half"),
    ),
)
def autocast_misc(ctx: Context) -> RuleHit | None:
    """Ops that refuse autocast, constants that overflow half precision, bf16 on GPUs without it, mixed reduced types."""
    mixed = _prioritize(ctx)
    if mixed:
        return mixed
    # The message itself, or a description of it: "binary_cross_entropy gives an autocast error", "BCELoss doesn't support autocasting".
    bce_prose = not ctx.exc_type and bool(_BCE_WORD.search(ctx.text) and _AUTOCAST_WORD.search(ctx.text) and _REFUSAL_WORD.search(ctx.text))
    if ctx.search(r"binary_cross_entropy and torch\.nn\.BCELoss are unsafe to autocast") or bce_prose:
        cause = ("binary_cross_entropy/BCELoss takes probabilities (after a sigmoid), which lose too much precision in float16, so autocast refuses "
                 "to run it inside an autocast region.")
        fixes = [
            remedy("autocast-dtype-errors#bce-with-logits-under-autocast"),
            remedy("autocast-dtype-errors#bce-outside-autocast-float32"),
        ]
        return hit("amp.bce_unsafe", "amp_error", "BCELoss under autocast", cause, fixes, _DOCS[::-1], _found(ctx), 0.95, facts=Facts(call="binary_cross_entropy"))
    custom = _custom_op_half(ctx)
    if custom:
        return custom
    m = ctx.search(r"value cannot be converted to type (?:at::|c10::)?(Half|BFloat16) without overflow")
    if m:
        cause = ("A Python constant is written into a half-precision tensor but does not fit its range (float16 tops out near 65504): large "
                 "sentinel values such as -1e9 or 1e10, used for masking or initialisation, overflow once the tensor is float16.")
        masked = any("masked_fill" in (f.source or "") or f.function == "masked_fill" for f in ctx.failure.frames)
        fixes = [remedy("autocast-dtype-errors#finfo-min-masked-fill" if masked else "autocast-dtype-errors#finfo-min-fill-value")]
        return hit("amp.overflow_constant", "amp_error", "Constant overflows half precision", cause, fixes, _DOCS[::-1], _found(ctx), 0.92,
                   facts=Facts(dtypes=("float16" if m.group(1) == "Half" else "bfloat16",)))
    if ctx.search(r"Current CUDA Device does not support bfloat16"):
        cause = "bfloat16 autocast was requested on a GPU without native bfloat16 support (GPUs older than the Ampere generation)."
        fixes = [
            remedy("gradscaler-misuse#dtype-from-gpu-bf16-support"),
        ]
        return hit("amp.no_bf16", "amp_error", "GPU without bfloat16", cause, fixes, _DOCS, _found(ctx), 0.9, facts=Facts(dtypes=("bfloat16",)))
    # A training library's own check of a bf16 option (Trainer, accelerate, vLLM): the device has no native bfloat16.
    if ctx.search(r"Your setup doesn't support bf16/(?:gpu|cpu)|bf16 mixed precision requires PyTorch >= 1\.10 and a supported device"
                  r"|Bfloat16 is only supported on GPUs with compute capability"):
        cause = ("A bf16 option was turned on (a training argument, a mixed-precision setting or a model dtype), and the library's check found that "
                 "this device has no native bfloat16 support: GPUs older than the Ampere generation (compute capability below 8.0), or no usable GPU at all.")
        fixes = [remedy("bf16-unsupported-gpu#use-fp16-amp"), remedy("bf16-unsupported-gpu#choose-dtype-at-runtime")]
        return hit("amp.no_bf16", "amp_error", "bf16 requested on a device without it", cause, fixes, ("bf16-unsupported-gpu", *_DOCS), _found(ctx), 0.9,
                   facts=Facts(dtypes=("bfloat16",)))
    return None
