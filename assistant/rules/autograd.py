"""Autograd misuse: in-place edits of saved tensors, double backward, graphs that do not exist, NaN grads."""

from __future__ import annotations

import re
from dataclasses import replace

from assistant.parse.messages import tensor_type_parts
from assistant.rules.autograd_source import failing_line_fix
from assistant.rules.base import Context, error_fact, hit, lazy_re, remedy
from assistant.rules.base import with_location as _loc
from assistant.rules.dispatch import TORCH_OP
from assistant.rules.registry import Example, rule
from assistant.types import Fact, Facts, RuleHit

_INPLACE = lazy_re(
    r"one of the variables needed for gradient computation has been modified by an inplace operation: "
    r"\[(?P<type>[\w.]+) \[(?P<shape>[\d, ]*)\]\](?:, which is output (?P<out>\d+) of (?P<op>\w+))?,? is at version (?P<ver>\d+); expected version (?P<exp>\d+)"
)
# Backward node -> what its forward was, for prose.
# The same error without the tensor details: torch <= 0.4 printed only this sentence, and users often quote only it.
_INPLACE_BARE = lazy_re(r"one of the variables needed for gradient computation has been modified by an inplace operation")
# Prose: the user found that an inplace flag breaks backward ("removed inplace from the MLP", "inplace=True ... prevents backward").
_INPLACE_PROSE = lazy_re(r"\b(?:remov|disabl|drop)\w*\s+(?:the\s+)?in-?place\b|\bin-?place\s*=\s*(?:True|False)\b|\bin-?place\s+(?:option|flag)", re.I)
# ...and says backward is involved, or that changing the flag made the error go away.
_BACKWARD_WORDS = lazy_re(r"backward|backprop|gradient|\b(?:fixed|solved|resolved)\b|goes away|disappear", re.I)
# Words that point at alternating updates of two networks (GAN, actor-critic) or an optimizer step between forward and backward.
_GAN_WORDS = lazy_re(r"(?i:\bgans?\b)|\b[A-Za-z]{0,12}GANs?\b|\b(?:[gd]|gen|disc)_loss\b|\berr_?[GD]\b|\bloss_?[GD]\b|\b[GD]_curr\b|retain_graph\s*=\s*True|\bgenerator\b|\bdiscriminator\b|\badversarial\b|\bcritic\b|\bnet_?[GD]\b|\boptimi[sz]er_?(?:net)?[GD]\b|\bopt_?[GD]\b"
                     r"|\btwo optimi[sz]ers\b|\b(?:optimi[sz]er|opt)\w*\.step\(")
# Prose that reports an in-place error without quoting the message ("I encountered inplace operation error in ...").
_INPLACE_ERROR_PROSE = lazy_re(r"\bin[- ]?place (?:operation |op )?(?:error|issue|problem|exception)\b"
                               r"|\b(?:error|exception)\b[^.\n]{0,30}\bin[- ]?place (?:operation|op)\b"
                               r"|\bin[- ]?place operations?\b[^.\n]{0,40}\b(?:error|fails?|crash\w*|raises?)\b", re.I)
# `x += y` typed anywhere in the text (an ipdb/REPL line, a quoted snippet), when no traceback frame gives the line.
_AUG_ASSIGN = lazy_re(r"^[ \t>*.:|]*(?:ipdb>[ \t]*|>>>[ \t]*)?(?P<name>[A-Za-z_][\w.]*)[ \t]*(?P<op>[-+*/])=(?!=)[ \t]*(?P<rhs>\S.*)$", re.M)
_OP_NAMES = {
    "Relu": "a ReLU", "Sigmoid": "a sigmoid", "Tanh": "a tanh", "Exp": "an exp", "Addmm": "a Linear layer (addmm)",
    "Mm": "a matrix multiply", "T": "a transposed weight (Linear's weight.t())", "AsStrided": "a view of a parameter",
    "Cudnn": "a cuDNN op", "NativeBatchNorm": "BatchNorm", "Softmax": "a softmax", "LogSoftmax": "a log_softmax",
    "Convolution": "a convolution", "Embedding": "an embedding", "Mul": "a multiplication", "Div": "a division",
    "Log": "a log", "Sqrt": "a sqrt", "Pow": "a pow", "Norm": "a norm", "Mean": "a mean", "Sum": "a sum",
    "Add": "an addition", "Sub": "a subtraction", "Clamp": "a clamp", "Select": "an indexing (select)", "Slice": "a slice",
    "Unsqueeze": "an unsqueeze", "View": "a view", "Index": "advanced indexing", "Acos": "an acos", "Asin": "an asin",
    "Atan2": "an atan2", "Cdist": "a pairwise distance (cdist)", "BinaryCrossEntropy": "binary cross entropy",
    "NllLoss": "an NLL loss", "Rsqrt": "an rsqrt", "Reciprocal": "a reciprocal", "Gelu": "a GELU", "Silu": "a SiLU",
    "LinalgVectorNorm": "a vector norm", "Std": "a standard deviation", "Var": "a variance",
}


def _line(ctx: Context) -> str:
    return ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""


def _inplace_call(line: str) -> str | None:
    """The in-place method (``.uniform_``, ``.add_``) or augmented assignment on the user's line, if any."""
    m = re.search(r"\.([a-z][a-z0-9]*_)\(", line)
    if m:
        return f".{m.group(1)}"
    m = re.search(r"[^=!<>]([-+*/])=(?!=)", line)
    return f"{m.group(1)}=" if m else None


def _op_name(node: str) -> str:
    base = re.sub(r"Backward\d*$", "", node)
    return _OP_NAMES.get(base, f"`{base}`")



_WEIGHT_OPS = lazy_re(r"(T|AsStrided|TBackward|Addmm|Mm|Convolution|CudnnConvolution|ConvolutionBackward)")


def _looks_like_weight(shape: tuple[int, ...], op: str | None) -> bool:
    """A saved tensor that is probably a parameter: saved through a transpose/view of a weight, or a conv-kernel shape."""
    if op:
        return bool(_WEIGHT_OPS.match(op)) and len(shape) >= 2
    # out_channels x in_channels x k x k with a small odd square kernel
    return len(shape) == 4 and shape[2] == shape[3] and shape[2] in (1, 3, 5, 7)


@rule(
    'autograd.inplace_modified',
    category='inplace_autograd',
    docs=("inplace-modification", "anomaly-detection"),
    reads=TORCH_OP,
    priority=48,
    outcomes=('autograd.inplace', 'autograd.inplace_weight', 'autograd.leaf_inplace', 'autograd.view_inplace', 'autograd.inplace_bare',
              'autograd.inplace_prose', 'autograd.inplace_gan_prose', 'autograd.inplace_error_prose'),
    examples=(
        Example("captured/cpu/relu-inplace-after-sigmoid-gate", "autograd.inplace"),
        Example("captured/cpu/residual-add-inplace-after-relu", "autograd.inplace"),
        Example("realworld/dev/modof-inplace-relubackward", "autograd.inplace"),
        Example("corpus/autograd/inplace_mul_after_sigmoid.txt", "autograd.inplace"),
        Example("captured/cpu/gan-generator-backward-after-d-step", "autograd.inplace_weight"),
        Example("realworld/dev/singan-inplace-optimizer-step-15", "autograd.inplace_weight"),
        Example("corpus/autograd/inplace_weight_tbackward_plus_equals_nnr.txt", "autograd.inplace_weight"),
        Example("corpus/autograd/inplace_weight_tbackward_gan_morvan.txt", "autograd.inplace_weight"),
        Example("captured/cpu/weight-init-inplace-on-leaf", "autograd.leaf_inplace"),
        Example("realworld/dev/nyudlsp-jupyter-view-leaf-inplace", "autograd.leaf_inplace"),
        Example("realworld/dev/msswift-npu-inputs-embeds-leaf-inplace", "autograd.leaf_inplace"),
        Example("corpus/autograd/unbind_view_inplace.txt", "autograd.view_inplace"),
        Example("realworld/dev/tsan-inplace-out-equals-x", "autograd.inplace_bare"),
        Example("corpus/autograd/inplace_bare_syncbn_041.txt", "autograd.inplace_bare"),
        Example("corpus/autograd/inplace_bare_xception_relu.txt", "autograd.inplace_bare"),
        Example("corpus/autograd/inplace_bare_videocaption_040.txt", "autograd.inplace_bare"),
        Example("realworld/dev/powerfulbenchmarker-relu-inplace-classifier", "autograd.inplace_prose"),
        Example("corpus/autograd/inplace_prose_relu_rpnet.txt", "autograd.inplace_prose"),
        Example("corpus/autograd/inplace_prose_relu_distdl.txt", "autograd.inplace_prose"),
        Example("corpus/autograd/inplace_prose_gan_adversarial_vidode.txt", "autograd.inplace_gan_prose"),
        Example("corpus/autograd/inplace_prose_gan_title_molgan.txt", "autograd.inplace_gan_prose"),
        Example("corpus/autograd/inplace_prose_error_liteflownet.txt", "autograd.inplace_error_prose"),
    ),
)
def inplace_modified(ctx: Context) -> RuleHit | None:
    """A tensor saved for backward was changed in place before backward ran."""
    m = _INPLACE.search(ctx.text)
    docs = ("inplace-modification", "anomaly-detection")
    if m:
        shape_text = m.group("shape")
        shape = tuple(int(v) for v in shape_text.replace(" ", "").split(",") if v)
        op = m.group("op")
        ver, exp = int(m.group("ver")), int(m.group("exp"))
        dtype, device = tensor_type_parts(m.group("type"))
        found = [error_fact(ctx), Fact("tensor", f"{m.group('type')} of shape [{shape_text}]" + (f", output {m.group('out')} of {op}" if op else "") + f"; version {ver} now, {exp} when saved ({ver - exp} in-place change(s))")]
        facts = Facts(shapes=(shape,), numbers={"version": ver, "expected_version": exp}, devices=(device,), dtypes=(dtype,),
                      names=(op,) if op else ())
        fixes_tail = remedy(_ANOMALY)
        if _looks_like_weight(shape, op):
            saved = f"saved via {_op_name(op)}" if op else "its shape looks like a convolution kernel"
            gan = _GAN_WORDS.search(_whole(ctx))
            step_story = ("an optimizer.step() that runs before a backward through a graph built with the old weights (alternating updates of "
                          "two networks trained against each other, or several losses sharing a graph with retain_graph=True), or an in-place "
                          "edit of weights (weight.data.clamp_(), weight *= ...) inside the training step")
            forward_story = ("an in-place operation in the forward code on the saved tensor or on one sharing its storage (`x += y`, `x *= y`, "
                             "`x[idx] = ...`, methods ending in `_` such as relu_(), layers built with inplace=True); newer PyTorch releases "
                             "check more of these and raise where older ones ran")
            step_fix = remedy("inplace-modification#every-backward-before-step")
            detach_fix = remedy("inplace-modification#detach-other-network-input")
            if gan:
                cause = (f"A parameter-like tensor of shape [{shape_text}] ({saved}) changed in place {ver - exp} time(s) between the forward pass that saved it and "
                         f"the backward that needs it. Your text points at alternating updates (“{gan.group(0)}”), so the likely cause is {step_story}. "
                         f"If no step runs in between, the other story is {forward_story}.")
                fixes = [step_fix, detach_fix, remedy(_OUT_OF_PLACE_ARITH), fixes_tail]
            else:
                if op and re.match(r"T(?:Backward\d*)?$", op):
                    saved = "saved via a transpose: `.t()` of a Linear weight or of another tensor"
                cause = (f"A tensor of shape [{shape_text}] ({saved}) changed in place {ver - exp} time(s) between the forward pass that saved it and the "
                         f"backward that needs it. Two stories fit: {forward_story}; or {step_story}. With a single model and one backward per "
                         "optimizer step, look for the in-place operation in the forward code first.")
                fixes = [remedy(_OUT_OF_PLACE_ARITH), remedy(_CLONE), step_fix, fixes_tail]
                own = failing_line_fix(_line(ctx))
                if own is not None:
                    fixes.insert(0, own)
            title = "Weights changed in place before backward" if gan else "A saved tensor (or weight) was changed in place before backward"
            return hit("autograd.inplace_weight", "inplace_autograd", title, cause, fixes, docs, _loc(ctx, found), 0.93,
                       facts=replace(facts, flags=frozenset({"gan_words"})) if gan else facts)
        what = _op_name(op) if op else "an operation"
        cause = (f"The output of {what} (shape [{shape_text}]) was saved for computing gradients, then changed by an in-place operation "
                 f"({ver - exp} time(s)) before backward. In-place forms are `x += ...`, `x[idx] = ...`, methods ending in `_` (`x.mul_()`), and "
                 "layers built with inplace=True; any of them on a tensor the graph still needs breaks backward.")
        if op and re.match(r"Relu|Sigmoid|Tanh|Gelu|Silu|Exp|Softmax", op):
            cause += f" {_op_name(op)[0].upper() + _op_name(op)[1:]} saves its own output, so the output itself must not be modified in place afterwards (an activation with inplace=True applied to it, or `+=` on it)."
        fixes = [
            remedy("inplace-modification#out-of-place-form"),
            remedy("inplace-modification#clone-before-modifying"),
            fixes_tail,
        ]
        own = failing_line_fix(_line(ctx))
        if own is not None:
            fixes.insert(0, own)
        return hit("autograd.inplace", "inplace_autograd", "A tensor needed for backward was modified in place", cause, fixes, docs, _loc(ctx, found), 0.95, facts=facts)

    if ctx.search(r"a (?:view of a )?leaf Variable that requires grad (?:is being|has been) used in an in-place operation"):
        view = bool(ctx.search(r"a view of a leaf Variable"))
        cause = ("An in-place operation (e.g. `w.add_()`, `w[...] = ...`, `w.uniform_()`, `w -= lr * w.grad`) was applied to a leaf tensor that requires grad"
                 + (" through a view of it" if view else "") + ". Autograd forbids it because the leaf's value is what gradients are computed with respect to. "
                 "This usually happens in manual weight initialisation or hand-written SGD updates done outside torch.no_grad().")
        call = _inplace_call(_line(ctx))
        if call:
            cause += f" The failing line applies `{call}` directly to such a tensor."
        aug = None if _line(ctx) else _AUG_ASSIGN.search(ctx.text)
        fixes = []
        if aug:
            # The user quotes `x += y` on such a tensor: the out-of-place spelling makes a new tensor in the graph instead.
            name, op, rhs = aug.group("name"), aug.group("op"), aug.group("rhs").strip()
            call = call or f"{op}="
            cause += f" Your text shows `{name} {op}= ...`, an in-place update of such a tensor."
            fixes.append(remedy("leaf-inplace#aug-assign-out-of-place", variable=name, operator=op, rhs=rhs))
        fixes += [
            remedy("leaf-inplace#no-grad-manual-updates"),
            remedy("leaf-inplace#nn-init-functions"),
            remedy("leaf-inplace#edit-a-clone"),
        ]
        return hit("autograd.leaf_inplace", "inplace_autograd", "In-place operation on a leaf that requires grad", cause, fixes, ("leaf-inplace", "inplace-modification"), _loc(ctx, [error_fact(ctx)]), 0.95,
                   facts=Facts(call=call, flags=frozenset({"through_view"}) if view else frozenset()))

    m = ctx.search(r"Output (\d+) of (\w+) is a view and (?:is being|its base or another view of its base has been) modified inplace")
    if m:
        cause = (f"Output {m.group(1)} of {m.group(2)} is a view that autograd cannot track through an in-place change "
                 "(views returned by custom Functions, unbind/split/chunk outputs, or views created in no_grad mode).")
        fixes = [remedy("leaf-inplace#clone-view-before-modifying")]
        return hit("autograd.view_inplace", "inplace_autograd", "In-place change of a view autograd cannot track", cause, fixes, ("leaf-inplace", "inplace-modification"), _loc(ctx, [error_fact(ctx)]), 0.9,
                   facts=Facts(names=(m.group(2),), numbers={"output": float(m.group(1))}, call=_inplace_call(_line(ctx))))
    if _INPLACE_BARE.search(ctx.text):
        return _inplace_unspecified(ctx, docs)
    if not ctx.exc_type and _INPLACE_PROSE.search(ctx.text) and _BACKWARD_WORDS.search(ctx.text):
        return _inplace_prose(ctx, docs)
    if not ctx.exc_type and _INPLACE_ERROR_PROSE.search(_whole(ctx)):
        return _inplace_error_prose(ctx, docs)
    return None


# Fixes several stories share, by reference (their words live in the documents).
_OUT_OF_PLACE = "inplace-modification#out-of-place-form"
_CLONE = "inplace-modification#clone-before-modifying"
_ANOMALY = "anomaly-detection#anomaly-forward-line"


# The same rewrite without activations: for saved tensors that no activation produced (weights, transposes, sums).
_OUT_OF_PLACE_ARITH = "inplace-modification#out-of-place-updates"
_STEP_ORDER = "inplace-modification#finish-backward-before-step"


def _whole(ctx: Context) -> str:
    """The text as pasted (prose and code included), for words around the message."""
    return ctx.failure.text or ctx.text


def _inplace_error_prose(ctx: Context, docs: tuple[str, ...]) -> RuleHit:
    """A report that names an in-place error without quoting it: adversarial training or a plain in-place op."""
    text = _whole(ctx)
    gan = _GAN_WORDS.search(text)
    if gan:
        cause = (f"The report describes an in-place error while training networks against each other (“{gan.group(0)}”). The usual cause in "
                 "adversarial training is the update order: one optimizer's step() changes its network's weights in place while a loss "
                 "computed through those weights in the same iteration still has to be backpropagated (the generator's loss goes through the "
                 "discriminator). PyTorch releases from 1.5 on flag the optimizers' in-place updates, so code written for older versions "
                 "raises here. If no step runs between the two, the other source is an in-place operation in the forward code (`x += y`, "
                 "`x[idx] = ...`, methods ending in `_`, layers built with inplace=True) on a tensor saved for backward.")
        fixes = [remedy(_STEP_ORDER),
                 remedy("inplace-modification#detach-generated-sample"),
                 remedy(_OUT_OF_PLACE_ARITH), remedy(_ANOMALY)]
        return hit("autograd.inplace_gan_prose", "inplace_autograd", "In-place error in adversarial training", cause, fixes, docs, _loc(ctx, []), 0.72,
                   facts=Facts(flags=frozenset({"gan_words"}), names=(gan.group(0),)))
    cause = ("The report names an in-place error without the message: a tensor that autograd saved during the forward pass was changed in "
             "place before backward used it. Look for in-place forms between the inputs and the loss: `x += ...`, `x *= ...`, `x[idx] = ...`, "
             "methods ending in `_`, layers built with inplace=True. Newer PyTorch releases check more of these, so code that ran on an older "
             "version can raise now. When weights are updated by optimizer.step() between a forward pass and a backward through it (two "
             "networks, several losses), the step is the in-place change.")
    fixes = [remedy(_OUT_OF_PLACE_ARITH), remedy(_CLONE), remedy(_ANOMALY),
             remedy("inplace-modification#backward-before-optimizer-step")]
    return hit("autograd.inplace_error_prose", "inplace_autograd", "In-place error described without its message", cause, fixes, docs, _loc(ctx, []), 0.65)


def _inplace_unspecified(ctx: Context, docs: tuple[str, ...]) -> RuleHit:
    """The in-place error quoted without the tensor, its shape or its version numbers."""
    call = _inplace_call(_line(ctx))
    cause = ("A tensor that autograd saved during the forward pass was changed in place before backward used it. The text does not say which "
             "tensor (older versions print no shape or version, and the quote may be cut), so look for in-place forms on the way from the "
             "inputs to the loss: `x += ...`, `x[idx] = ...`, methods ending in `_`, an output written into its own input (out=x), "
             "and layers built with inplace=True.")
    if call:
        cause += f" The failing line uses `{call}`."
    fixes = [remedy(_ANOMALY), remedy(_OUT_OF_PLACE), remedy(_CLONE)]
    gan = _GAN_WORDS.search(_whole(ctx))
    if gan:
        cause += (f" Your text points at alternating updates (“{gan.group(0)}”): an optimizer step that changes weights before a backward "
                  "through a graph built with them is the other usual source.")
        fixes = [remedy(_STEP_ORDER), *fixes]
    own = failing_line_fix(_line(ctx))
    if own is not None:
        fixes.insert(0, own)
    return hit("autograd.inplace_bare", "inplace_autograd", "A tensor needed for backward was modified in place", cause, fixes, docs,
               _loc(ctx, [error_fact(ctx)]), 0.85, facts=Facts(call=call))


def _inplace_prose(ctx: Context, docs: tuple[str, ...]) -> RuleHit:
    """A description (no error line) of backward failing until an inplace flag was turned off."""
    flag = ctx.search(r"\bin-?place\s*=\s*(True|False)")
    cause = ("The description ties the failure of backward to an in-place option (inplace=True on an activation or similar). An in-place layer "
             "overwrites its input; when that input was saved by an earlier operation for computing gradients, backward can no longer run. "
             "Turning the flag off is the right fix: it only costs a little memory and does not change what the layer computes or how gradients flow.")
    fixes = [
        remedy("inplace-modification#activations-inplace-false"),
        remedy(_CLONE),
        remedy(_ANOMALY),
    ]
    return hit("autograd.inplace_prose", "inplace_autograd", "An in-place layer breaks backward", cause, fixes, docs, _loc(ctx, []), 0.7,
               facts=Facts(flags=frozenset({f"inplace_{flag.group(1).lower()}"}) if flag else frozenset()))


# Prose: "backwards through the ... twice", "call backward on one variable twice", together with the retain flag.
_TWICE_PROSE = lazy_re(r"backward\w{0,30}\b[^.\n]{0,60}\btwice\b|\btwice\b[^.\n]{0,40}\bbackward", re.I)
_RETAIN_WORD = lazy_re(r"\bretain(?:_graphs?|_variables?)?\b", re.I)
_RUNNING_TOTAL = lazy_re(r"\b(?=\w*?(?:total|running|sum|acc|accum|epoch))(\w+)\s*\.backward\(", re.I)


# Adapter fine-tuning of a frozen base model (PEFT/LoRA), or activation checkpointing: with every base weight frozen the
# embedding outputs do not require grad, so reentrant checkpointed blocks return a loss with no graph.
_FROZEN_BASE_ADAPTERS = lazy_re(r"\b(?:peft|q?lora|get_peft_model|prepare_model_for_(?:kbit|int8)_training|gradient[_ ]checkpointing(?:_enable)?|use_gradient_checkpointing|enable_input_require_grads)\b", re.I)
_STATEFUL_LAYERS = lazy_re(r"spikingjelly|snntorch|\bnorse\b|spiking|membrane potential", re.I)
# The run involves several GPUs: a DataParallel wrapper (in the text or the traceback's files), several GPUs named, or a distributed setting.
_MULTI_GPU_RUN = lazy_re(r"\b(?:Distributed)?DataParallel\b|\bdata_parallel\b|\bmulti[- ]?gpus?\b|\b(?:multiple|several|two|\d{1,2}) GPUs\b|\bdevice_ids\b|\bdistributed\b", re.I)


@rule(
    'autograd.backward_twice',
    category='backward_twice',
    docs=("backward-twice",),
    reads=TORCH_OP,
    priority=49,
    outcomes=('autograd.backward_twice', 'autograd.backward_twice_accumulated', 'autograd.backward_twice_prose'),
    examples=(
        Example("captured/cpu/char-rnn-hidden-not-detached", "autograd.backward_twice"),
        Example("realworld/dev/gnmot-backward-twice-new-wording-pycharm", "autograd.backward_twice"),
        Example("realworld/dev/handgraph-backward-twice-16-wording", "autograd.backward_twice"),
        Example("corpus/autograd/backward_twice_shared_features.txt", "autograd.backward_twice"),
        Example("captured/cpu/accumulated-loss-backward", "autograd.backward_twice_accumulated"),
        Example("realworld/dev/ctrlgen-old-backward-twice-buffers-py27", "autograd.backward_twice_accumulated"),
        Example("realworld/dev/revtorch-backward-twice-reversible", "autograd.backward_twice_prose"),
        Example("corpus/autograd/backward_twice_prose_tutorials_pr.txt", "autograd.backward_twice_prose"),
        Example("corpus/autograd/backward_twice_prose_td_loop.txt", "autograd.backward_twice_prose"),
    ),
)
def backward_twice(ctx: Context) -> RuleHit | None:
    """Backward through a graph whose saved tensors were already freed."""
    if not ctx.search(r"Trying to backward through the graph a second time|buffers have already been freed|saved intermediate (?:results|values) .* (?:already been )?freed"):
        if not ctx.exc_type and _TWICE_PROSE.search(ctx.text) and _RETAIN_WORD.search(ctx.text):
            return _backward_twice_prose(ctx)
        return None
    found = [error_fact(ctx)]
    line = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
    total = _RUNNING_TOTAL.search(line)
    retain = "retain_graph" in line
    accumulate = remedy("backward-twice#accumulate-plain-numbers")
    if total:
        name = total.group(1)
        found.append(Fact("call", f"backward() is called on `{name}`, a sum of losses"))
        cause = (f"`{name}.backward()` runs backward on a sum of losses. When that sum carries terms from earlier iterations (a running total kept as "
                 "a tensor) or shares a sub-graph with a loss that was already backpropagated, those parts of the graph were freed by the earlier "
                 f"backward, so this pass fails. Keep running totals as Python numbers (`loss.item()`), and build `{name}` only from this step's losses.")
        fixes = [accumulate,
                 remedy("backward-twice#sum-step-losses-backward-once")]
        return hit("autograd.backward_twice_accumulated", "backward_twice", "Backward through an accumulated loss", cause, fixes, ("backward-twice",), _loc(ctx, found), 0.93,
                   facts=Facts(call=f"{name}.backward", names=(name,)))
    cause = ("A second backward pass went through (part of) a graph whose saved tensors the first backward had freed. Two stories fit this "
             "message: two backward calls in one step over losses that share part of a forward pass (the first call freed the shared part), or "
             "something built in an earlier step reused in the next step's graph without being detached (a recurrent hidden state carried between "
             "batches, a running average or cache kept as a tensor, a tensor computed once before the loop). The traceback shows only the failing "
             "call; which story it is depends on whether another backward ran earlier in the same step.")
    if retain:
        cause += " The failing line already passes retain_graph, so the freed graph is an older one, from a previous iteration."
    fixes = [
        remedy("backward-twice#detach-carried-state"),
        remedy("backward-twice#add-two-losses-backward-once"),
        remedy("backward-twice#recompute-inside-loop"),
        accumulate,
        remedy("backward-twice#remove-duplicate-backward"),
    ]
    # Spiking-network layers keep a membrane state between batches: the carried tensor is inside the layer, reset by the library.
    if _STATEFUL_LAYERS.search(" ".join(f.file for f in ctx.failure.frames)) or _STATEFUL_LAYERS.search(ctx.text):
        found.append(Fact("layer", "the failing backward runs through spiking-neuron layers, which keep state between batches"))
        cause += " Here the graph runs through spiking-neuron layers, which keep their state from the previous batch unless it is reset after each step."
        fixes = [remedy("backward-twice#reset-stateful-layers"), *fixes[:3]]
    elif _MULTI_GPU_RUN.search(" ".join(f.file for f in ctx.failure.frames)) or _MULTI_GPU_RUN.search(ctx.text):
        # A model copied to several GPUs on each forward shares the tensors its module keeps with an earlier step's graph.
        found.append(Fact("context", "the run involves several GPUs or a distributed setting"))
        cause += (" Your text mentions several GPUs or a distributed setting: when the failure appears only with more than one GPU visible, "
                  "the model is wrapped for several GPUs and a tensor the module keeps between steps carries an earlier step's graph.")
        fixes = [*fixes[:2], remedy("backward-twice#single-visible-gpu"), *fixes[2:4]]
    return hit("autograd.backward_twice", "backward_twice", "Backward through a freed graph", cause, fixes, ("backward-twice",), _loc(ctx, found), 0.95,
               facts=Facts(flags=frozenset({"retain_graph_on_line"}) if retain else frozenset()))


def _backward_twice_prose(ctx: Context) -> RuleHit:
    """A description (no error line) of a second backward through one graph, with the retain flag mentioned."""
    cause = ("The description is of a second backward pass through a graph the first pass already freed: after backward, the tensors saved "
             "for gradients are released unless retain_graph=True was passed to the first call. Passing it only helps when you really need "
             "two passes through the same graph; values a custom autograd Function keeps on ctx (or frees itself in its backward) are not "
             "kept by retain_graph, so such a Function must not free them, or the second pass must use a freshly built graph.")
    fixes = [
        remedy("backward-twice#retain-graph-all-but-last"),
        remedy("backward-twice#sum-losses-backward-once"),
        remedy("backward-twice#detach-earlier-step-state"),
    ]
    return hit("autograd.backward_twice_prose", "backward_twice", "Second backward through a freed graph", cause, fixes, ("backward-twice",), _loc(ctx, []), 0.7,
               facts=Facts(flags=frozenset({"retain_graph_mentioned"})))


@rule(
    'autograd.no_grad_fn',
    category='no_grad_fn',
    docs=("no-grad-fn", "detach-numpy"),
    reads=TORCH_OP,
    priority=50,
    outcomes=('autograd.no_grad_fn', 'autograd.non_scalar', 'autograd.numpy', 'autograd.unused_input', 'autograd.inference_tensor'),
    examples=(
        Example("captured/cpu/forward-under-no-grad-training", "autograd.no_grad_fn"),
        Example("captured/cpu/argmax-in-loss-path", "autograd.no_grad_fn"),
        Example("captured/cpu/numpy-postprocess-breaks-graph", "autograd.no_grad_fn"),
        Example("realworld/dev/torchsplatting-no-grad-fn-loss-printed", "autograd.no_grad_fn"),
        Example("realworld/dev/opensplat-libtorch-no-grad-fn", "autograd.no_grad_fn"),
        Example("realworld/dev/cdpn-argmax-loss-no-grad-fn", "autograd.no_grad_fn"),
        Example("corpus/autograd/backward_non_scalar_reduction_none.txt", "autograd.non_scalar"),
        Example("captured/cpu/sklearn-metric-numpy-on-grad-tensor", "autograd.numpy"),
        Example("realworld/dev/ssvae-old-numpy-variable-requires-grad", "autograd.numpy"),
        Example("corpus/autograd/grad_unused_input.txt", "autograd.unused_input"),
        Example("captured/cpu/inference-mode-frozen-backbone-features", "autograd.inference_tensor"),
        Example("corpus/autograd/inference_mode_features_backward.txt", "autograd.inference_tensor"),
    ),
)
def no_grad_fn(ctx: Context) -> RuleHit | None:
    """backward() on something with no graph, non-scalar backward, numpy() on a grad tensor."""
    docs = ("no-grad-fn", "detach-numpy")
    if ctx.search(r"does not require grad and does not have a grad_fn"):
        src = " ".join(f.source or "" for f in ctx.failure.user_frames)
        cause = ("backward() was called on a tensor that is not connected to any parameter that requires grad, so there is no graph to differentiate. "
                 "The forward pass ran under torch.no_grad()/torch.inference_mode(), or the loss was rebuilt from values that left the graph "
                 "(.item(), .detach(), .numpy(), torch.tensor(...) of outputs, argmax/round), or all parameters are frozen (requires_grad=False).")
        breakers = r"torch\.tensor\(|\.item\(\)|\.detach\(\)|\.numpy\(\)|\.arg(?:max|min)\(|torch\.arg(?:max|min)\(|\.round\("
        # No traceback frames: the user may still quote the code that builds the loss.
        breaker = re.search(breakers, src) or (None if ctx.failure.user_frames else re.search(breakers, ctx.text))
        if breaker:
            cause += f" Your own code calls {breaker.group(0).rstrip('(')}(...) on the way to the loss, which cuts the graph there."
        fixes = []
        if breaker and re.search(r"arg(?:max|min)|round", breaker.group(0)):
            # Index-valued / rounded results have no gradient at all; the loss must use the values before that step.
            fixes.append(remedy("no-grad-fn#loss-before-non-differentiable", op=breaker.group(0).strip('.(').replace('torch.', '')))
        fixes += [
            remedy("no-grad-fn#loss-from-output-tensors"),
            remedy("no-grad-fn#not-inside-no-grad"),
            remedy("no-grad-fn#check-params-require-grad"),
        ]
        adapters = None if breaker else _FROZEN_BASE_ADAPTERS.search(ctx.text)
        if adapters:
            cause += (f" Your text mentions {adapters.group(0)}: when adapters train on a frozen base model with gradient checkpointing, "
                      "the frozen embeddings output tensors that do not require grad, and the checkpointed blocks then return a loss with no graph.")
            fixes.insert(0, remedy("activation-checkpointing#enable-input-grads"))
        return hit("autograd.no_grad_fn", "no_grad_fn", "backward() on a tensor with no graph", cause, fixes, docs, _loc(ctx, [error_fact(ctx)]), 0.95,
                   facts=Facts(call=breaker.group(0).rstrip("(") if breaker else None))
    if ctx.search(r"grad can be implicitly created only for scalar outputs"):
        cause = "backward() without arguments needs a scalar (one-element) tensor, but the tensor has several elements — typically a loss with reduction='none' or a per-sample loss that was not averaged."
        fixes = [remedy("no-grad-fn#reduce-to-scalar")]
        return hit("autograd.non_scalar", "no_grad_fn", "backward() on a non-scalar tensor", cause, fixes, ("no-grad-fn",), _loc(ctx, [error_fact(ctx)]), 0.93,
                   facts=Facts(call="backward"))
    if ctx.search(r"Can't call numpy\(\) on (?:Tensor|Variable) that requires grad"):
        cause = "A tensor that is part of the autograd graph was converted to NumPy (for logging, metrics or plotting); NumPy cannot carry gradients, so PyTorch refuses."
        fixes = [remedy("detach-numpy#detach-cpu-before-numpy")]
        return hit("autograd.numpy", "no_grad_fn", "numpy() on a tensor that requires grad", cause, fixes, docs[::-1], _loc(ctx, [error_fact(ctx)]), 0.95,
                   facts=Facts(call=".numpy"))
    unused = ctx.search(r"(?:One of the differentiated Tensors|The differentiated Tensor at index (\d+)) (?:appears to not have been used in the graph|does not require grad)")
    if unused:
        which = f"input number {unused.group(1)} (counting from 0)" if unused.group(1) else "one of the inputs"
        cause = f"torch.autograd.grad was asked for the gradient with respect to {which}, but the output does not depend on it (or it does not require grad)."
        fixes = [remedy("no-grad-fn#allow-unused")]
        return hit("autograd.unused_input", "no_grad_fn", "Gradient of an unused input", cause, fixes, ("no-grad-fn",), _loc(ctx, [error_fact(ctx)]), 0.9,
                   facts=Facts(numbers={"index": float(unused.group(1))} if unused.group(1) else {}, call="torch.autograd.grad"))
    if ctx.search(r"Inference tensors cannot be saved for backward|Inference tensors do not track version counter"):
        cause = "A tensor created under torch.inference_mode() is used in a computation that needs gradients; inference tensors can never join a graph."
        fixes = [remedy("no-grad-fn#outside-inference-mode-or-clone")]
        return hit("autograd.inference_tensor", "no_grad_fn", "Inference tensor used in a graph", cause, fixes, ("no-grad-fn",), _loc(ctx, [error_fact(ctx)]), 0.9,
                   facts=Facts(layer=ctx.layer[0], layer_kind=ctx.layer[1]))
    return None


_NAN_ANOMALY = lazy_re(r"Function '(\w+)' returned nan values in its (\d+)\w* output")
_NAN_SOURCES = {
    "Log": "log of 0 (or a negative number): log(0) = -inf and its gradient 1/x is infinite",
    "Div": "a division by zero or by a tiny denominator",
    "Sqrt": "sqrt at 0: its gradient 1/(2·sqrt(x)) is infinite (common in distances/norms of identical points)",
    "Pow": "pow with a negative base and fractional exponent, or 0 raised to a power below 1 (its gradient p·x^(p-1) is infinite at 0)",
    "Mul": "an infinite factor multiplied by zero (inf · 0 = NaN): often the backward of a norm, sqrt or pow at zero, whose gradient multiplies by an infinite 1/x term, or an earlier overflow",
    "Norm": "the norm of an all-zero vector (its gradient divides by the norm)",
    "LinalgVectorNorm": "the norm of an all-zero vector (its gradient divides by the norm)",
    "Cdist": "distances between identical points (gradient of sqrt at 0)",
    "Acos": "acos at ±1 (gradient is infinite), e.g. cosine similarity of identical vectors",
    "Asin": "asin at ±1 (gradient is infinite)",
    "BinaryCrossEntropy": "probabilities exactly 0 or 1 fed to binary_cross_entropy",
    "Softmax": "infinite logits (overflow) entering softmax",
    "LogSoftmax": "infinite logits (overflow) entering log_softmax",
    "Exp": "exp overflowing to inf",
    "Rsqrt": "rsqrt at 0",
    "Reciprocal": "1/x at x = 0",
    "Std": "the standard deviation of a single element or constant values",
    "Atan2": "atan2(0, 0)",
}


# A backward function named next to NaN in prose ("SoftmaxBackward NaN issue"), or anomaly mode's warning with NaN in the text.
_NAN_NODE_PROSE = lazy_re(r"\b(?P<node>[A-Z][A-Za-z0-9]*Backward\d*)\b[^\n]{0,60}(?i:\bnan\b)|(?i:\bnan\b)[^\n]{0,60}\b(?P<node2>[A-Z][A-Za-z0-9]*Backward\d*)\b"
                          r"|Error detected in (?P<node3>[A-Z][A-Za-z0-9]*Backward\d*)")
_NAN_WORD = lazy_re(r"\bnan\b", re.I)
# Half precision with a loss scaler around it: fp16/AMP words, apex opt levels, a scaler call in the code.
_HALF_RUN = lazy_re(r"\bfp16\b|float16|--half\b|\bhalf[- ]precision\b|\.half\(\)|(?<!&)\bamp\b(?!;)|autocast|GradScaler|scaler\.scale\(|opt[_-]level"
                    r"|mixed[- ]precision|\bapex\b|loss[_ ]scal", re.I)
_ANOMALY_SWITCH = lazy_re(r"set_detect_anomaly\(\s*True\s*\)|detect_anomaly\(\)|\banomal\w* detect\w*(?: (?:is |was )?on)?", re.I)
# Operations with a singular point (infinite gradient at the edge of their domain): the guard is the fix, not the learning rate.
_DOMAIN_OPS = frozenset({"Pow", "Sqrt", "Rsqrt", "Log", "Log1p", "Log2", "Log10", "Div", "Reciprocal", "Acos", "Asin", "Atan2", "Norm",
                         "LinalgVectorNorm", "Cdist", "BinaryCrossEntropy"})
# The domain guard for each operation whose singular points are best known (nan-inf-anomaly#guard-*); others get the generic guard.
_GUARD_FIXES = {
    "Pow": "guard-pow", "Mul": "guard-mul", "Log": "guard-log", "Div": "guard-div", "Sqrt": "guard-sqrt", "Rsqrt": "guard-rsqrt",
    "Reciprocal": "guard-reciprocal", "Acos": "guard-acos", "Asin": "guard-asin", "Atan2": "guard-atan2", "Norm": "guard-norm",
    "LinalgVectorNorm": "guard-linalg-vector-norm", "Cdist": "guard-cdist", "BinaryCrossEntropy": "guard-binary-cross-entropy",
}


def _nan_anomaly(ctx: Context, node: str, output: str | None, docs: tuple[str, ...]) -> RuleHit:
    """Anomaly detection named the backward function whose result was NaN (quoted, or named in the report)."""
    base = re.sub(r"Backward\d*$", "", node)
    domain = base in _DOMAIN_OPS
    text = _whole(ctx)
    half = _HALF_RUN.search(text)
    switch = _ANOMALY_SWITCH.search(text)
    source = _NAN_SOURCES.get(base, f"the backward of {_op_name(node)} producing NaN")
    found = [error_fact(ctx), Fact("autograd", f"first NaN appeared in {node}" + (f" (output {output})" if output else "") + f": the backward of {_op_name(node)}")]
    if half:
        found.append(Fact("precision", f"the run uses half precision (“{half.group(0)}”)"))
    if switch:
        found.append(Fact("anomaly", f"anomaly detection is mentioned (“{switch.group(0)}”)"))
    guard = remedy(f"nan-inf-anomaly#{_GUARD_FIXES.get(base, 'guard-domain')}")
    anomaly_off = remedy("anomaly-detection#turn-anomaly-off-once-found")
    facts = Facts(names=(node,), numbers={"output": float(output)} if output else {}, dtypes=("float16",) if half else (),
                  flags=frozenset({"fp16"} if half else set()) | frozenset({"domain_op"} if domain else set()))
    if half:
        cause = (f"Anomaly detection stopped at {node} (the backward of {_op_name(node)}) in a run that uses half precision. With float16 and a "
                 "dynamic loss scaler (GradScaler, apex amp, or a training framework's fp16 option), a step whose gradients overflow now and "
                 "then is expected: the scaler finds the inf/NaN gradients, skips that update and lowers the scale. Anomaly detection checks "
                 "every backward result for NaN and raises on such a step before the scaler can skip it, so a harmless skipped step becomes "
                 "a crash. Check whether anomaly detection is switched on (set_detect_anomaly(True) or detect_anomaly() in the training "
                 "script, or a debug option of the framework): for normal training it should be off. If the NaN comes back at every step "
                 f"without it (the scale keeps falling and no update is applied), the overflow is real; here the likely source is {source}.")
        check = remedy("anomaly-detection#check-anomaly-detection-on")
        scaler = remedy("nan-inf-anomaly#scaler-skips-occasional-steps")
        overflow = remedy("nan-inf-anomaly#find-overflowing-activation")
        fixes = [guard, check, scaler] if domain else [check, scaler, overflow]
        return hit("autograd.nan_anomaly_fp16", "nan_inf", f"NaN in the backward of {base} under half precision", cause, fixes, docs, _loc(ctx, found), 0.9, facts=facts)
    cause = (f"Anomaly detection stopped at {node}: the gradient of {_op_name(node)} became NaN. The likely source is {source}. "
             "The forward traceback printed above the error (\"Traceback of forward call that caused the error\") shows the exact line.")
    if domain:
        # An operation at its singular point: the guard is the fix; the learning rate has nothing to do with it.
        fixes = [guard,
                 remedy("nan-inf-anomaly#find-singular-inputs"),
                 anomaly_off]
    else:
        fixes = [guard,
                 remedy("nan-inf-anomaly#check-data-and-lr"),
                 anomaly_off]
    return hit("autograd.nan_anomaly", "nan_inf", f"NaN in the backward of {base}", cause, fixes, docs, _loc(ctx, found), 0.95, facts=facts)


@rule(
    'autograd.nan_inf',
    category='nan_inf',
    docs=("nan-inf-anomaly", "exploding-gradients", "anomaly-detection"),
    reads=(*TORCH_OP, "ArithmeticError"),
    priority=52,
    outcomes=('autograd.nan_anomaly', 'autograd.nan_anomaly_fp16', 'autograd.nonfinite_norm', 'autograd.nan_generic'),
    examples=(
        Example("corpus/autograd/nan_anomaly_prose_fp16_fairseq.txt", "autograd.nan_anomaly_fp16"),
        Example("corpus/autograd/nan_anomaly_fp16_msg3d_logsoftmax.txt", "autograd.nan_anomaly_fp16"),
        Example("corpus/autograd/nan_anomaly_fp16_opennmt_bmm.txt", "autograd.nan_anomaly_fp16"),
        Example("corpus/autograd/nan_anomaly_prose_fp16_gpt2_softmax.txt", "autograd.nan_anomaly_fp16"),
        Example("corpus/autograd/nan_anomaly_fp16_exp_overflow_cpu.txt", "autograd.nan_anomaly_fp16"),
        Example("corpus/autograd/nan_anomaly_pow_asteroid.txt", "autograd.nan_anomaly"),
        Example("captured/cpu/manual-bce-log-zero-anomaly", "autograd.nan_anomaly"),
        Example("captured/cpu/contrastive-sqrt-zero-distance-nan", "autograd.nan_anomaly"),
        Example("captured/cpu/normalize-zero-embedding-div-nan", "autograd.nan_anomaly"),
        Example("realworld/dev/pytorch-22820-divbackward-nan-smape", "autograd.nan_anomaly"),
        Example("realworld/dev/pytorch-38714-anomaly-powbackward1", "autograd.nan_anomaly"),
        Example("realworld/dev/pytorch-51196-norm-mulbackward-nan", "autograd.nan_anomaly"),
        Example("captured/cpu/clip-grad-norm-nonfinite-constant-feature", "autograd.nonfinite_norm"),
        Example("captured/cuda/nan-fp16-mse-overflow", "autograd.nan_generic"),
        Example("realworld/dev/d2-838-loss-nan-batch-reduced", "autograd.nan_generic"),
        Example("corpus/autograd/multinomial_nan_probs.txt", "autograd.nan_generic"),
    ),
)
def nan_inf(ctx: Context) -> RuleHit | None:
    """NaN/Inf from anomaly detection, non-finite gradient norms, or a user check on the loss."""
    docs = ("nan-inf-anomaly", "exploding-gradients", "anomaly-detection")
    m = _NAN_ANOMALY.search(ctx.text) or _NAN_ANOMALY.search(_whole(ctx))
    node, output = (m.group(1), m.group(2)) if m else (None, None)
    if node is None:
        prose = _NAN_NODE_PROSE.search(_whole(ctx))
        # Anomaly mode's warning alone names the node for any backward error: it counts only when the text speaks of NaN.
        # Quoted with no error of its own (no other exception named anywhere), the warning is most often anomaly mode stopping on a NaN.
        alone = not re.search(r"\b(?!UserWarning\b)\w*(?:Error|Exception)\b(?!\s+detected in)", _whole(ctx))
        if prose and (not ctx.exc_type or ctx.exc_type in ("UserWarning", "Warning")) and (not prose.group("node3") or _NAN_WORD.search(_whole(ctx)) or alone):
            node = prose.group("node") or prose.group("node2") or prose.group("node3")
    if node:
        return _nan_anomaly(ctx, node, output, docs)
    m = ctx.search(r"The total norm of order ([\d.]+|inf) for gradients from `parameters` is non-finite")
    if m:
        cause = ("clip_grad_norm_ found the gradient norm to be NaN or Inf, so some gradient is already non-finite: the loss or an intermediate value "
                 "overflowed or hit a singular operation (log 0, division by 0, sqrt 0) in this step.")
        fixes = [
            remedy("anomaly-detection#first-nonfinite-with-anomaly"),
            remedy("exploding-gradients#lower-lr-warmup"),
            remedy("exploding-gradients#fp16-gradscaler-skips-inf"),
        ]
        order = m.group(1)
        return hit("autograd.nonfinite_norm", "nan_inf", "Non-finite gradient norm", cause, fixes, docs[1::-1] + docs[2:], _loc(ctx, [error_fact(ctx)]), 0.93,
                   facts=Facts(call="clip_grad_norm_", numbers={"norm_type": float("inf") if order == "inf" else float(order)}))
    if ctx.search(r"probability tensor contains either `inf`, `nan` or element < 0|invalid multinomial distribution|but found invalid values|Input contains (?:NaN|infinity)|\bloss (?:is|became|=) ?(?:nan|inf)\b|\b(?:nan|inf) loss\b|non-finite loss|Loss is (?:NaN|nan|inf)|(?:became|is) (?:infinite|inf) or NaN|FloatingPointError|nan values? (?:in|detected)", re.I):
        cause = ("Values became NaN or Inf before this check: the loss, the logits or a distribution's parameters are non-finite. Typical causes are a too-high "
                 "learning rate, log/sqrt/division at 0, fp16 overflow, or NaN already present in the input data.")
        fixes = [
            remedy("anomaly-detection#locate-first-nonfinite"),
            remedy("exploding-gradients#stabilise-training"),
        ]
        half = ctx.search(r"float16|torch\.half\b|HalfTensor|\bfp16\b", re.I)
        if half:
            cause += " The text shows float16 values: fp16 overflows to inf above about 65504, so large losses or activations need fp32 (autocast keeps losses in fp32) or a loss scaler."
        sampler = ctx.search(r"probability tensor contains|invalid multinomial distribution|but found invalid values")
        if sampler:
            cause += " Here the non-finite values reached a sampling call (torch.multinomial or a torch.distributions object), which validates its probabilities."
        return hit("autograd.nan_generic", "nan_inf", "NaN/Inf values", cause, fixes, docs, _loc(ctx, [error_fact(ctx)]), 0.85,
                   facts=Facts(call="torch.multinomial" if sampler and "multinomial" in _line(ctx) else None,
                               dtypes=("float16",) if half else (), flags=frozenset({"fp16"}) if half else frozenset()))
    return None


_GRAD_SHAPE = lazy_re(r"Mismatch in shape: grad_output\[(\d+)\] has a shape of torch\.Size\(\[([\d, ]*)\]\) and output\[\d+\] has a shape of torch\.Size\(\[([\d, ]*)\]\)")
_NO_DERIVATIVE = lazy_re(r"(?:the )?derivative for '?([\w.]+?)'? is not implemented")


def _size(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.replace(" ", "").split(",") if v)


@rule(
    'autograd.autograd_misuse',
    category='no_grad_fn',
    docs=("autograd-misuse", "no-grad-fn"),
    reads=(*TORCH_OP, "TypeError", "Warning"),
    priority=53,
    outcomes=('autograd.requires_grad_nonleaf', 'autograd.grad_shape_scalar', 'autograd.grad_shape', 'autograd.no_derivative', 'autograd.no_double_backward',
              'autograd.hook_no_grad', 'autograd.grad_none_nonleaf'),
    examples=(
        Example("corpus/autograd/requires_grad_nonleaf_output.txt", "autograd.requires_grad_nonleaf"),
        Example("corpus/autograd/requires_grad_nonleaf_tensorwatch.txt", "autograd.requires_grad_nonleaf"),
        Example("corpus/autograd/requires_grad_nonleaf_deepfool.txt", "autograd.requires_grad_nonleaf"),
        Example("corpus/autograd/requires_grad_nonleaf_fairscale.txt", "autograd.requires_grad_nonleaf"),
        Example("corpus/autograd/grad_shape_scalar_loss_hopenet.txt", "autograd.grad_shape_scalar"),
        Example("corpus/autograd/grad_shape_scalar_loss_pcb.txt", "autograd.grad_shape_scalar"),
        Example("corpus/autograd/grad_shape_backward_gradient_arg.txt", "autograd.grad_shape"),
        Example("corpus/autograd/grad_shape_relevance_zennit.txt", "autograd.grad_shape"),
        Example("corpus/autograd/no_derivative_lstsq_vcformer.txt", "autograd.no_derivative"),
        Example("corpus/autograd/no_derivative_to_sparse_spconv.txt", "autograd.no_derivative"),
        Example("corpus/autograd/no_double_backward_im2col.txt", "autograd.no_double_backward"),
        Example("corpus/autograd/no_double_backward_lstm_cell_savn.txt", "autograd.no_double_backward"),
        Example("corpus/autograd/hook_on_no_grad_tensor.txt", "autograd.hook_no_grad"),
        Example("corpus/autograd/grad_none_on_non_leaf_update.txt", "autograd.grad_none_nonleaf"),
        Example("corpus/autograd/grad_nonleaf_warning_bytetrack.txt", "autograd.grad_none_nonleaf"),
    ),
)
def autograd_misuse(ctx: Context) -> RuleHit | None:
    """Autograd API misuse: requires_grad on non-leaves, wrong gradient shapes, operations without a derivative."""
    docs = ("autograd-misuse", "no-grad-fn")
    line = _line(ctx)
    if ctx.search(r"you can only change requires_grad flags of leaf variables"):
        # The assignment may sit in a library frame (an attack or saliency helper): read the innermost line that sets the flag.
        setter = next((f.source for f in reversed(ctx.failure.frames) if f.source and "requires_grad" in f.source), line)
        m = re.search(r"(?<![\w.\[\]])([\w.\[\]]+)\.requires_grad(?:_\(|\s*=)", setter or "")
        name = m.group(1) if m else None
        cause = ((f"`{name}`" if name else "The tensor") + " is the result of a computation (a non-leaf: it has a grad_fn), and requires_grad can only be "
                 "switched on tensors created directly (leaves). To stop gradients at a computed value, detach it; to get gradients with respect to an "
                 "input, make the input a leaf before it goes through the computation.")
        fixes = [
            remedy("autograd-misuse#detach-computed-value", variable=name),
            remedy("autograd-misuse#leaf-before-use"),
            remedy("autograd-misuse#freeze-module-parameters"),
        ]
        return hit("autograd.requires_grad_nonleaf", "no_grad_fn", "requires_grad changed on a non-leaf tensor", cause, fixes, docs, _loc(ctx, [error_fact(ctx)]), 0.93,
                   facts=Facts(names=(name,) if name else (), call=".requires_grad"))
    if ctx.search(r"cannot register a hook on a tensor that doesn't require gradient"):
        cause = ("A backward hook was registered on a tensor that is not part of any graph (requires_grad=False): it was computed under torch.no_grad() / "
                 "inference_mode, detached, or comes from parameters that are all frozen, so no gradient will ever reach it.")
        fixes = [remedy("autograd-misuse#hooks-on-grad-tensors")]
        return hit("autograd.hook_no_grad", "no_grad_fn", "Hook on a tensor without gradients", cause, fixes, docs, _loc(ctx, [error_fact(ctx)]), 0.9, facts=Facts(call="register_hook"))
    if re.search(r"The \.grad attribute of a Tensor that is not a leaf Tensor is being accessed", ctx.failure.text):
        m = re.search(r"(?<![\w.\[\]])([\w.\[\]]+)\.grad\b", line)
        name = m.group(1) if m else None
        cause = ((f"`{name}`" if name else "The tensor whose .grad is read") + " is not a leaf: it was produced by an operation (for example "
                 "`torch.randn(..., requires_grad=True) * 0.01`, `.to(device)` or `.cuda()` applied after requires_grad=True), so backward() does not store "
                 "a gradient in it and .grad stays None."
                 + (" The error that follows comes from using that None." if ctx.search(r"NoneType") else ""))
        fixes = [
            remedy("autograd-misuse#make-parameter-leaf"),
            remedy("autograd-misuse#retain-grad-intermediate"),
        ]
        return hit("autograd.grad_none_nonleaf", "no_grad_fn", ".grad is None on a non-leaf tensor", cause, fixes, docs, _loc(ctx, [error_fact(ctx)]), 0.9,
                   facts=Facts(names=(name,) if name else (), call=".grad"))
    m = _GRAD_SHAPE.search(ctx.text)
    if m:
        given, out = _size(m.group(2)), _size(m.group(3))
        facts = Facts(shapes=(given, out), numbers={"index": float(m.group(1))}, call="backward")
        found = [error_fact(ctx), Fact("shape", f"gradient given with shape {list(given)}, output has shape {list(out)}")]
        if out == () and given in ((1,), ()):
            cause = ("The loss is a 0-dimensional scalar, but the gradient passed to backward() has shape [1]. Losses became 0-dim tensors in PyTorch 0.4; "
                     "code written before that passes torch.ones(1) (or a one-element tensor) as the gradient. A scalar loss needs no gradient argument at all.")
            fixes = [
                remedy("autograd-misuse#scalar-backward-no-gradient"),
                remedy("autograd-misuse#zero-dim-gradient"),
            ]
            return hit("autograd.grad_shape_scalar", "no_grad_fn", "Gradient of shape [1] for a scalar loss", cause, fixes, docs, _loc(ctx, found), 0.93, facts=facts)
        cause = (f"backward() (or autograd.grad) was given a gradient of shape {list(given)} for an output of shape {list(out)}; the gradient argument "
                 "must have exactly the output's shape (it is the upstream dLoss/dOutput).")
        fixes = [
            remedy("autograd-misuse#gradient-shaped-like-output"),
            remedy("autograd-misuse#match-gradient-to-output"),
        ]
        return hit("autograd.grad_shape", "no_grad_fn", "Gradient shape does not match the output", cause, fixes, docs, _loc(ctx, found), 0.9, facts=facts)
    m = _NO_DERIVATIVE.search(ctx.text)
    if m:
        op = m.group(1)
        if op.endswith("_backward"):
            cause = (f"A second-order gradient was requested (create_graph=True, a gradient penalty, autograd.grad of a gradient, or double backward in "
                     f"meta-learning), but `{op}` — the backward of an operation — has no derivative of its own in this PyTorch build.")
            fixes = [
                remedy("autograd-misuse#avoid-double-differentiation"),
                remedy("autograd-misuse#upgrade-for-double-backward"),
            ]
            return hit("autograd.no_double_backward", "no_grad_fn", f"No double backward for {op}", cause, fixes, docs, _loc(ctx, [error_fact(ctx)]), 0.88,
                       facts=Facts(names=(op,), flags=frozenset({"double_backward"})))
        cause = (f"The backward pass reached `{op}`, an operation (or argument) autograd cannot differentiate in this PyTorch version, so gradients cannot "
                 "flow through it.")
        fixes = [
            remedy("autograd-misuse#keep-op-out-of-differentiated-path", op=op),
            remedy("autograd-misuse#upgrade-for-derivatives"),
        ]
        return hit("autograd.no_derivative", "no_grad_fn", f"No derivative for {op}", cause, fixes, docs, _loc(ctx, [error_fact(ctx)]), 0.88, facts=Facts(names=(op,)))
    return None
