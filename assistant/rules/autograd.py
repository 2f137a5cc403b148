"""Autograd misuse: in-place edits of saved tensors, double backward, graphs that do not exist, NaN grads."""

from __future__ import annotations

import re

from assistant.rules.registry import Example, rule
from assistant.rules.base import with_location as _loc, Context, error_fact, fix, hit
from assistant.types import Fact, RuleHit

_INPLACE = re.compile(
    r"one of the variables needed for gradient computation has been modified by an inplace operation: "
    r"\[(?P<type>[\w.]+) \[(?P<shape>[\d, ]*)\]\](?:, which is output (?P<out>\d+) of (?P<op>\w+))?, is at version (?P<ver>\d+); expected version (?P<exp>\d+)"
)
# Backward node -> what its forward was, for prose.
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


def _op_name(node: str) -> str:
    base = re.sub(r"Backward\d*$", "", node)
    return _OP_NAMES.get(base, f"`{base}`")



@rule(
    'autograd.inplace_modified',
    category='inplace_autograd',
    docs=("inplace-modification", "anomaly-detection"),
    priority=280,
    outcomes=('autograd.inplace', 'autograd.leaf_inplace', 'autograd.view_inplace'),
    examples=(),
)
def inplace_modified(ctx: Context) -> RuleHit | None:
    """A tensor saved for backward was changed in place before backward ran."""
    m = _INPLACE.search(ctx.text)
    docs = ("inplace-modification", "anomaly-detection")
    if m:
        shape = m.group("shape")
        op = m.group("op")
        ver, exp = int(m.group("ver")), int(m.group("exp"))
        found = [error_fact(ctx), Fact("tensor", f"{m.group('type')} of shape [{shape}]" + (f", output {m.group('out')} of {op}" if op else "") + f"; version {ver} now, {exp} when saved ({ver - exp} in-place change(s))")]
        looks_like_weight = op and re.match(r"(T|AsStrided|TBackward|Addmm|Mm)", op) and "," in shape
        if looks_like_weight:
            cause = (f"A parameter-like tensor of shape [{shape}] (saved via {_op_name(op)}) was modified in place after the forward pass and "
                     "before backward. The classic case is calling optimizer.step() between computing a loss and calling its backward "
                     "(e.g. GAN training: stepping the discriminator/generator optimizer, then backpropagating a loss computed with the old weights), "
                     "or editing weights in place (weight.data.clamp_, weight *= ...) inside the training step.")
            fixes = [
                fix("Finish every backward before the optimizer step that changes those weights", "Compute each loss and call backward, then step; or recompute the forward pass after the step.", "loss_d.backward()\nloss_g.backward()  # both before any step\nopt_d.step(); opt_g.step()", "inplace-modification"),
                fix("Detach what the other network's loss should not backprop through", "", "fake = generator(z)\nloss_d = crit(disc(fake.detach()), zeros)", "inplace-modification"),
            ]
        else:
            what = _op_name(op) if op else "an operation"
            cause = (f"The output of {what} (shape [{shape}]) was saved for computing gradients, then changed by an in-place operation "
                     f"({ver - exp} time(s)) before backward. Common sources: nn.ReLU(inplace=True) or F.relu(x, inplace=True) applied to a tensor that is also used elsewhere, "
                     "`x += ...`, `x[idx] = ...`, `x.mul_()` on a tensor the graph still needs.")
            fixes = [
                fix("Replace the in-place operation with its out-of-place form", "", "x = x + residual      # instead of x += residual\nact = nn.ReLU()       # instead of nn.ReLU(inplace=True)", "inplace-modification"),
                fix("Clone before modifying", "If you need to edit a tensor the graph uses, edit a copy.", "y = x.clone()\ny[mask] = 0", "inplace-modification"),
            ]
        fixes.append(fix("Let anomaly detection point at the forward line", "With it enabled, the error also prints the traceback of the forward operation whose saved tensor was modified.", "torch.autograd.set_detect_anomaly(True)", "anomaly-detection"))
        return hit("autograd.inplace", "inplace_autograd", "A tensor needed for backward was modified in place", cause, fixes, docs, _loc(ctx, found), 0.95)

    if ctx.search(r"a (?:view of a )?leaf Variable that requires grad (?:is being|has been) used in an in-place operation"):
        view = bool(ctx.search(r"a view of a leaf Variable"))
        cause = ("An in-place operation (e.g. `w.add_()`, `w[...] = ...`, `w.uniform_()`, `w -= lr * w.grad`) was applied to a leaf tensor that requires grad"
                 + (" through a view of it" if view else "") + ". Autograd forbids it because the leaf's value is what gradients are computed with respect to. "
                 "This usually happens in manual weight initialisation or hand-written SGD updates done outside torch.no_grad().")
        fixes = [
            fix("Wrap manual updates/initialisation in torch.no_grad()", "", "with torch.no_grad():\n    w -= lr * w.grad\n    w.grad.zero_()", "leaf-inplace"),
            fix("Use nn.init functions for initialisation", "They run under no_grad for you.", "nn.init.kaiming_normal_(layer.weight)", "leaf-inplace"),
        ]
        return hit("autograd.leaf_inplace", "inplace_autograd", "In-place operation on a leaf that requires grad", cause, fixes, ("leaf-inplace", "inplace-modification"), _loc(ctx, [error_fact(ctx)]), 0.95)

    m = ctx.search(r"Output (\d+) of (\w+) is a view and (?:is being|its base or another view of its base has been) modified inplace")
    if m:
        cause = (f"Output {m.group(1)} of {m.group(2)} is a view that autograd cannot track through an in-place change "
                 "(views returned by custom Functions, unbind/split/chunk outputs, or views created in no_grad mode).")
        fixes = [fix("Clone the view before modifying it", "", "part = part.clone()\npart.mul_(2)", "leaf-inplace")]
        return hit("autograd.view_inplace", "inplace_autograd", "In-place change of a view autograd cannot track", cause, fixes, ("leaf-inplace", "inplace-modification"), _loc(ctx, [error_fact(ctx)]), 0.9)
    return None


@rule(
    'autograd.backward_twice',
    category='backward_twice',
    docs=("backward-twice",),
    priority=281,
    outcomes=('autograd.backward_twice',),
    examples=(),
)
def backward_twice(ctx: Context) -> RuleHit | None:
    """Backward through a graph whose saved tensors were already freed."""
    if not ctx.search(r"Trying to backward through the graph a second time|buffers have already been freed|saved intermediate (?:results|values) .* (?:already been )?freed"):
        return None
    src = " ".join(f.source or "" for f in ctx.failure.user_frames)
    found = [error_fact(ctx)]
    rnn_hint = re.search(r"hidden|\bh\b|\bhx\b|state|lstm|gru|rnn", src, re.I)
    cause = ("A second backward pass went through (part of) a graph whose saved tensors were freed by the first backward. "
             "The usual cause is state carried across iterations: an RNN hidden state, a running average, an embedding cache or a tensor "
             "computed once before the loop is reused in the next step's graph without being detached.")
    if rnn_hint:
        cause = ("The hidden state carried from the previous batch still belongs to the previous batch's graph; the second backward reaches into "
                 "that freed graph. (Truncated backpropagation through time needs the state detached each step.)")
    fixes = [
        fix("Detach state carried between iterations", "", "hidden = hidden.detach()  # for LSTM: h, c = h.detach(), c.detach()", "backward-twice"),
        fix("Accumulate plain numbers, not loss tensors", "A running total built from loss tensors (`total = total + loss`) links every step's graph; backward on it re-enters freed graphs. Sum `loss.item()` for logging and call backward on each step's own loss.", "running_loss += loss.item()\nloss.backward()", "backward-twice"),
        fix("Recompute what you need inside the loop", "Tensors computed once before the loop and reused in every loss share one graph; compute them per step or detach them.", None, "backward-twice"),
        fix("Use retain_graph=True only if you really backpropagate twice through the same graph", "E.g. two losses sharing a trunk: better to sum them and call backward once.", "(loss_a + loss_b).backward()", "backward-twice"),
    ]
    return hit("autograd.backward_twice", "backward_twice", "Backward through a freed graph", cause, fixes, ("backward-twice",), _loc(ctx, found), 0.95)


@rule(
    'autograd.no_grad_fn',
    category='no_grad_fn',
    docs=("no-grad-fn", "detach-numpy"),
    priority=282,
    outcomes=('autograd.no_grad_fn', 'autograd.non_scalar', 'autograd.numpy', 'autograd.unused_input', 'autograd.inference_tensor'),
    examples=(),
)
def no_grad_fn(ctx: Context) -> RuleHit | None:
    """backward() on something with no graph, non-scalar backward, numpy() on a grad tensor."""
    docs = ("no-grad-fn", "detach-numpy")
    if ctx.search(r"does not require grad and does not have a grad_fn"):
        src = " ".join(f.source or "" for f in ctx.failure.user_frames)
        cause = ("backward() was called on a tensor that is not connected to any parameter that requires grad, so there is no graph to differentiate. "
                 "The forward pass ran under torch.no_grad()/torch.inference_mode(), or the loss was rebuilt from values that left the graph "
                 "(.item(), .detach(), .numpy(), torch.tensor(...) of outputs, argmax/round), or all parameters are frozen (requires_grad=False).")
        if re.search(r"torch\.tensor\(|\.item\(\)|\.detach\(\)|\.numpy\(\)", src):
            cause += " The failing line itself converts or detaches values."
        fixes = [
            fix("Build the loss from the model's output tensors directly", "Keep every step differentiable; no .item()/.detach()/torch.tensor() in the loss path.", "loss = criterion(model(x), y)   # not torch.tensor(loss_value)", "no-grad-fn"),
            fix("Make sure training is not inside no_grad / inference_mode", "Check for a decorator or a context manager around the training step.", "torch.set_grad_enabled(True)", "no-grad-fn"),
            fix("Check that some parameters require grad", "", "print(sum(p.requires_grad for p in model.parameters()))", "no-grad-fn"),
        ]
        return hit("autograd.no_grad_fn", "no_grad_fn", "backward() on a tensor with no graph", cause, fixes, docs, _loc(ctx, [error_fact(ctx)]), 0.95)
    if ctx.search(r"grad can be implicitly created only for scalar outputs"):
        cause = "backward() without arguments needs a scalar (one-element) tensor, but the tensor has several elements — typically a loss with reduction='none' or a per-sample loss that was not averaged."
        fixes = [fix("Reduce to a scalar before backward", "", "loss.mean().backward()   # or pass gradient=torch.ones_like(loss)", "no-grad-fn")]
        return hit("autograd.non_scalar", "no_grad_fn", "backward() on a non-scalar tensor", cause, fixes, ("no-grad-fn",), _loc(ctx, [error_fact(ctx)]), 0.93)
    if ctx.search(r"Can't call numpy\(\) on Tensor that requires grad"):
        cause = "A tensor that is part of the autograd graph was converted to NumPy (for logging, metrics or plotting); NumPy cannot carry gradients, so PyTorch refuses."
        fixes = [fix("Detach (and move to CPU) before converting", "", "value = out.detach().cpu().numpy()   # or loss.item() for a scalar", "detach-numpy")]
        return hit("autograd.numpy", "no_grad_fn", "numpy() on a tensor that requires grad", cause, fixes, docs[::-1], _loc(ctx, [error_fact(ctx)]), 0.95)
    if ctx.search(r"One of the differentiated Tensors appears to not have been used in the graph|One of the differentiated Tensors does not require grad"):
        cause = "torch.autograd.grad was asked for the gradient of an input the output does not depend on (or that does not require grad)."
        fixes = [fix("Pass allow_unused=True, or differentiate only inputs the output uses", "", "torch.autograd.grad(out, inputs, allow_unused=True)", "no-grad-fn")]
        return hit("autograd.unused_input", "no_grad_fn", "Gradient of an unused input", cause, fixes, ("no-grad-fn",), _loc(ctx, [error_fact(ctx)]), 0.9)
    if ctx.search(r"Inference tensors cannot be saved for backward|Inference tensors do not track version counter"):
        cause = "A tensor created under torch.inference_mode() is used in a computation that needs gradients; inference tensors can never join a graph."
        fixes = [fix("Create it outside inference_mode, or clone it", "", "x = x.clone()  # outside inference_mode", "no-grad-fn")]
        return hit("autograd.inference_tensor", "no_grad_fn", "Inference tensor used in a graph", cause, fixes, ("no-grad-fn",), _loc(ctx, [error_fact(ctx)]), 0.9)
    return None


_NAN_ANOMALY = re.compile(r"Function '(\w+)' returned nan values in its (\d+)\w* output")
_NAN_SOURCES = {
    "Log": "log of 0 (or a negative number): log(0) = -inf and its gradient 1/x is infinite",
    "Div": "a division by zero or by a tiny denominator",
    "Sqrt": "sqrt at 0: its gradient 1/(2·sqrt(x)) is infinite (common in distances/norms of identical points)",
    "Pow": "pow with a negative base and fractional exponent, or 0 to a negative power",
    "Mul": "an infinite value multiplied by zero (inf · 0 = NaN) coming from an earlier overflow",
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


@rule(
    'autograd.nan_inf',
    category='nan_inf',
    docs=("nan-inf-anomaly", "exploding-gradients", "anomaly-detection"),
    priority=283,
    outcomes=('autograd.nan_anomaly', 'autograd.nonfinite_norm', 'autograd.nan_generic'),
    examples=(),
)
def nan_inf(ctx: Context) -> RuleHit | None:
    """NaN/Inf from anomaly detection, non-finite gradient norms, or a user check on the loss."""
    docs = ("nan-inf-anomaly", "exploding-gradients", "anomaly-detection")
    m = _NAN_ANOMALY.search(ctx.text)
    if m:
        node = m.group(1)
        base = re.sub(r"Backward\d*$", "", node)
        source = _NAN_SOURCES.get(base, f"the backward of {_op_name(node)} producing NaN")
        found = [error_fact(ctx), Fact("autograd", f"first NaN appeared in {node} (output {m.group(2)}): the backward of {_op_name(node)}")]
        cause = (f"Anomaly detection stopped at {node}: the gradient of {_op_name(node)} became NaN. The likely source is {source}. "
                 "The forward traceback printed above the error (\"Traceback of forward call that caused the error\") shows the exact line.")
        fixes = [
            fix("Guard the operation's domain", "Add a small eps / clamp inputs away from the singular point, or use the numerically stable fused form.", {
                "Log": "torch.log(x.clamp_min(1e-8))   # or use log_softmax / BCEWithLogitsLoss",
                "Div": "y = a / (b + eps)  # eps = 1e-8; or F.normalize(x, dim=-1, eps=1e-12) instead of x / x.norm()\n# or mask: torch.where(b > 0, a / b.clamp_min(eps), torch.zeros_like(a))",
                "Sqrt": "d = torch.sqrt(sq_dist + eps)  # eps = 1e-12 keeps the gradient finite at 0",
                "Norm": "n = x.norm(dim=-1).clamp_min(1e-12)",
                "LinalgVectorNorm": "n = torch.linalg.vector_norm(x, dim=-1).clamp_min(1e-12)",
                "BinaryCrossEntropy": "loss = F.binary_cross_entropy_with_logits(logits, target)",
            }.get(base, "x = torch.nan_to_num(x)  # only after finding why it is non-finite"), "nan-inf-anomaly"),
            fix("Check the data and the learning rate", "Assert inputs are finite; a too-high learning rate drives values to overflow.", "assert torch.isfinite(x).all(), 'non-finite input'", "nan-inf-anomaly"),
            fix("Turn anomaly detection off once found", "It slows training considerably.", "torch.autograd.set_detect_anomaly(False)", "anomaly-detection"),
        ]
        return hit("autograd.nan_anomaly", "nan_inf", f"NaN in the backward of {base}", cause, fixes, docs, _loc(ctx, found), 0.95)
    m = ctx.search(r"The total norm of order ([\d.]+|inf) for gradients from `parameters` is non-finite")
    if m:
        cause = ("clip_grad_norm_ found the gradient norm to be NaN or Inf, so some gradient is already non-finite: the loss or an intermediate value "
                 "overflowed or hit a singular operation (log 0, division by 0, sqrt 0) in this step.")
        fixes = [
            fix("Find the first non-finite value with anomaly detection", "", "torch.autograd.set_detect_anomaly(True)", "anomaly-detection"),
            fix("Lower the learning rate / add warmup", "Gradients that grow step after step until they overflow point at a too-high learning rate.", None, "exploding-gradients"),
            fix("With fp16, use GradScaler (it skips steps with inf gradients)", "", "scaler = torch.amp.GradScaler('cuda')", "exploding-gradients"),
        ]
        return hit("autograd.nonfinite_norm", "nan_inf", "Non-finite gradient norm", cause, fixes, docs[1::-1] + docs[2:], _loc(ctx, [error_fact(ctx)]), 0.93)
    if ctx.search(r"probability tensor contains either `inf`, `nan` or element < 0|invalid multinomial distribution|but found invalid values|Input contains (?:NaN|infinity)|\bloss (?:is|became|=) ?(?:nan|inf)\b|\b(?:nan|inf) loss\b|non-finite loss|Loss is (?:NaN|nan|inf)|(?:became|is) (?:infinite|inf) or NaN|FloatingPointError|nan values? (?:in|detected)", re.I):
        cause = ("Values became NaN or Inf before this check: the loss, the logits or a distribution's parameters are non-finite. Typical causes are a too-high "
                 "learning rate, log/sqrt/division at 0, fp16 overflow, or NaN already present in the input data.")
        fixes = [
            fix("Locate the first non-finite value", "Enable anomaly detection for backward; assert torch.isfinite on inputs and intermediate outputs for forward.", "torch.autograd.set_detect_anomaly(True)\nassert torch.isfinite(batch).all()", "anomaly-detection"),
            fix("Stabilise training", "Lower the learning rate, clip gradients, use log_softmax/BCEWithLogitsLoss instead of softmax+log.", "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", "exploding-gradients"),
        ]
        return hit("autograd.nan_generic", "nan_inf", "NaN/Inf values", cause, fixes, docs, _loc(ctx, [error_fact(ctx)]), 0.85)
    return None
