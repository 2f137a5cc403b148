"""Shape mismatches: matmul/Linear, convolutions, broadcasting, view/reshape, losses, norms, RNNs."""

from __future__ import annotations

import math
import re

from assistant.parse.messages import flatten_explanations, fmt_shape, parse_shape
from assistant.rules.registry import Example, rule
from assistant.rules.base import with_location as _with_location, Context, error_fact, fix, hit
from assistant.types import Fact, Facts, RuleHit

_MATMUL = (
    re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)"),
    re.compile(r"size mismatch, m1: \[(\d+) x (\d+)\], m2: \[(\d+) x (\d+)\]"),
    re.compile(r"a and b must have same reduction dim, but got \[(\d+), (\d+)\] X \[(\d+), (\d+)\]"),
    re.compile(r"mat1 dim 1 must match mat2 dim 0.*?\((\d+)x(\d+)\).*?\((\d+)x(\d+)\)"),
)



@rule(
    'shapes.matmul_mismatch',
    category='shape_mismatch',
    docs=("matmul-shape-mismatch", "overfit-one-batch"),
    priority=270,
    outcomes=('shapes.matmul', 'shapes.matmul_generic'),
    examples=(),
)
def matmul_mismatch(ctx: Context) -> RuleHit | None:
    """``mat1 and mat2 shapes cannot be multiplied (AxB and CxD)`` and its older spellings."""
    m = next((p.search(ctx.text) for p in _MATMUL if p.search(ctx.text)), None)
    if not m:
        if ctx.search(r"mat1 dim 1 must match mat2 dim 0|both arguments to matmul need to be at least 1D|Expected size for first two dimensions of batch2 tensor"):
            return _generic_shape(ctx, "shapes.matmul_generic", "matmul", ("matmul-shape-mismatch", "broadcast-size-mismatch"))
        return None
    rows, got, inner, out = (int(g) for g in m.groups())
    name, kind = ctx.layer
    conjecture = ""
    linear_like = kind == "Linear" or (kind is None and any("linear" in (f.function or "") or "linear.py" in f.file for f in ctx.failure.frames)) or not ctx.failure.frames
    label = f"`{name}`" if name else "the Linear layer"
    found = [error_fact(ctx), Fact("shape", f"input to the product: {rows}×{got}; weight (transposed): {inner}×{out}")]
    if linear_like:
        found.append(Fact("layer", f"{label}: in_features={inner}, out_features={out}; it received {got} features per row (batch of {rows})"))
        cause = (f"{label[0].upper() + label[1:]} was built with in_features={inner} but the tensor reaching it has {got} features "
                 f"(shape {rows}×{got}). The size of the flattened input does not match what the layer was constructed for.")
        explain = flatten_explanations(got, inner)
        if explain:
            conjecture = (f"If the input is a flattened convolutional feature map, the numbers fit {explain[0]}: the feature map is "
                      f"{'smaller' if got < inner else 'larger'} than the layer assumed (different image size, or a conv/pool without padding changed H×W).")
        elif got % inner == 0 or inner % got == 0:
            ratio = got // inner if got % inner == 0 else inner // got
            cause += f" One size is exactly {ratio}× the other: a dimension was probably merged into the features (or split off) by a view/flatten — check which axes you flatten."
        fixes = [
            fix(f"Make the layer match the data: nn.Linear({got}, {out})", f"If {got} features per sample is correct, build the layer with in_features={got}.", f"self.{name or 'fc'} = nn.Linear({got}, {out})", "matmul-shape-mismatch"),
            fix("Let PyTorch infer in_features", "nn.LazyLinear infers in_features on the first forward pass, so changing the input resolution no longer breaks the head.", f"self.{name or 'fc'} = nn.LazyLinear({out})", "matmul-shape-mismatch"),
            fix("Or compute the flatten size from a dummy input", "Run the feature extractor once on a tensor of the real input size and read the flattened size instead of hard-coding it.", "with torch.no_grad():\n    n_features = self.features(torch.zeros(1, *input_shape)).flatten(1).shape[1]", "matmul-shape-mismatch"),
            fix("Flatten only the non-batch dimensions", "x.flatten(1) (or x.view(x.size(0), -1)) keeps the batch axis intact; a hard-coded view can fold the batch into the features.", "x = torch.flatten(x, 1)", "matmul-shape-mismatch"),
        ]
        title = f"Linear layer expects {inner} input features but got {got}"
    else:
        cause = (f"A matrix product multiplies a {rows}×{got} by a {inner}×{out} matrix; the inner sizes {got} and {inner} must be equal.")
        if out == rows:
            cause += f" The other order ({inner}×{out} @ {rows}×{got}) would be valid: the operands may be swapped."
        elif got == out:
            cause += " The second operand looks transposed: try `.T` / `.transpose(-2, -1)` on it."
        fixes = [
            fix("Print both operand shapes and fix the one that is wrong", "Check which operand's layout differs from what the code assumes (transposed, batch-first vs sequence-first).", "print(a.shape, b.shape)", "matmul-shape-mismatch"),
            fix("Transpose or reorder the operands", "Use b.transpose(-2, -1) or swap a and b so the inner dimensions agree.", None, "matmul-shape-mismatch"),
        ]
        title = f"Matrix product inner dimensions differ ({got} vs {inner})"
    values = Facts(shapes=((rows, got), (inner, out)), numbers={"rows": rows, "got_features": got, "in_features": inner, "out_features": out},
                   layer=name, layer_kind=kind)
    return hit("shapes.matmul", "shape_mismatch", title, cause, fixes, ("matmul-shape-mismatch", "overfit-one-batch"), _with_location(ctx, found), 0.95,
               facts=values, conjecture=conjecture)


_CONV_CHANNELS = re.compile(
    r"weight(?: of size)? ?\[([\d, ]+)\],? (?:so )?expected input\[([\d, ]+)\] to have (\d+) channels, but got (\d+) channels"
)


@rule(
    'shapes.conv_input',
    category='shape_mismatch',
    docs=("conv-input-mismatch", "overfit-one-batch"),
    priority=271,
    outcomes=('shapes.conv_channels', 'shapes.conv_rank', 'shapes.norm_rank', 'shapes.conv_too_small'),
    examples=(),
)
def conv_input(ctx: Context) -> RuleHit | None:
    """Convolution channel/rank/size errors, e.g. grayscale images into an RGB model."""
    m = _CONV_CHANNELS.search(ctx.text)
    name, _ = ctx.layer
    label = f"`{name}`" if name else "the convolution"
    docs = ("conv-input-mismatch", "overfit-one-batch")
    if m:
        weight = parse_shape(m.group(1)) or ()
        inp = parse_shape(m.group(2)) or ()
        want, got = int(m.group(3)), int(m.group(4))
        found = [error_fact(ctx), Fact("shape", f"conv weight {fmt_shape(weight)}: expects {want} input channels"), Fact("shape", f"input {fmt_shape(inp)}: dimension 1 (channels) is {got}")]
        fixes = []
        if len(inp) == 4 and inp[-1] == want and got not in (1, 3, want):
            cause = (f"The input {fmt_shape(inp)} is channels-last (N, H, W, C): its last dimension is {inp[-1]} = the {want} channels "
                     f"{label} expects, but PyTorch convolutions read dimension 1 as channels (N, C, H, W).")
            fixes.append(fix("Permute images to N, C, H, W", "Images from PIL/OpenCV/numpy are H×W×C; convert before the model (torchvision's ToTensor does this).", "x = x.permute(0, 3, 1, 2).contiguous()", "conv-input-mismatch"))
        elif want == 3 and got == 1:
            cause = (f"{label[0].upper() + label[1:]} expects 3-channel (RGB) images but received 1-channel (grayscale) input {fmt_shape(inp)}. "
                     "Models and pretrained weights built for RGB need 3 channels.")
            fixes.append(fix("Convert the images to 3 channels", "Repeat the gray channel (or convert at load time with PIL .convert('RGB') / torchvision Grayscale(num_output_channels=3)).", "x = x.repeat(1, 3, 1, 1)  # or x.expand(-1, 3, -1, -1)", "conv-input-mismatch"))
            fixes.append(fix("Or build the first conv for 1 channel (in_channels=1)", "If you train from scratch on grayscale data, make the stem accept one channel.", f"self.{name or 'conv1'} = nn.Conv2d(1, {weight[0] if weight else 64}, kernel_size={weight[-1] if weight else 3})", "conv-input-mismatch"))
        elif want == 1 and got == 3:
            cause = f"{label[0].upper() + label[1:]} was built for 1-channel (grayscale) input but received 3-channel (RGB) images {fmt_shape(inp)}."
            fixes.append(fix("Convert the images to grayscale", "Convert at load time, or average the channels.", "x = x.mean(dim=1, keepdim=True)", "conv-input-mismatch"))
            fixes.append(fix("Or build the first conv for 3 channels", "If the data really is RGB, make the stem accept it.", f"self.{name or 'conv1'} = nn.Conv2d(3, {weight[0] if weight else 32}, kernel_size={weight[-1] if weight else 3})", "conv-input-mismatch"))
        else:
            cause = (f"{label[0].upper() + label[1:]} expects {want} input channels but the tensor it received has {got} in dimension 1 "
                     f"(shape {fmt_shape(inp)}). Either the previous layer outputs {got} channels (its out_channels does not match this conv's "
                     f"in_channels={want}), or the input is not laid out as N, C, H, W.")
            fixes.append(fix(f"Make in_channels match: nn.Conv2d({got}, ...)", f"Set this conv's in_channels to {got}, or the previous layer's out_channels to {want}.", f"self.{name or 'conv'} = nn.Conv2d({got}, {weight[0] if weight else 'out_channels'}, kernel_size={weight[-1] if weight else 3})", "conv-input-mismatch"))
            fixes.append(fix("Check the layout", "Print x.shape before the conv; channels must be dimension 1.", "print(x.shape)  # expect (N, C, H, W)", "conv-input-mismatch"))
        title = f"Convolution expects {want} input channels, got {got}"
        return hit("shapes.conv_channels", "shape_mismatch", title, cause, fixes, docs, _with_location(ctx, found), 0.95)

    m = ctx.search(r"Expected (\d)D \(unbatched\) or (\d)D \(batched\) input to (conv\w+|\w+pool\w*|\w+), but got input of size: \[([\d, ]*)\]")
    m_old = ctx.search(r"Expected (\d+)-dimensional input for (\d+)-dimensional weight \[([\d, ]+)\], but got (\d+)-dimensional input of size \[([\d, ]*)\]")
    if m or m_old:
        if m:
            unbatched, batched, op, size = int(m.group(1)), int(m.group(2)), m.group(3), parse_shape(m.group(4)) or ()
        else:
            batched, op, size = int(m_old.group(1)), "conv", parse_shape(m_old.group(5)) or ()
            unbatched = batched - 1
        got = len(size)
        found = [error_fact(ctx), Fact("shape", f"{op} received a {got}-D tensor {fmt_shape(size)}; it accepts {unbatched}-D or {batched}-D")]
        if got == unbatched - 1:
            cause = f"{op} got a {got}-D tensor {fmt_shape(size)}: both the batch and the channel dimension are missing (e.g. a single H×W grayscale image)."
            code = "x = x.unsqueeze(0).unsqueeze(0)  # (H, W) -> (1, 1, H, W)"
        elif got < unbatched:
            cause = f"{op} got a {got}-D tensor {fmt_shape(size)} where it needs {batched}-D (N, C, …); the data was flattened or indexed down too far."
            code = "print(x.shape)  # restore (N, C, H, W) with view/unsqueeze"
        else:
            cause = f"{op} got a {got}-D tensor {fmt_shape(size)}, more dimensions than the {batched}-D (N, C, …) it accepts: an extra axis (e.g. a time or crop axis) must be merged into the batch first."
            code = "x = x.flatten(0, 1)  # (N, T, C, H, W) -> (N*T, C, H, W)"
        fixes = [fix("Give the tensor the layout the layer expects", "Add the missing batch/channel axis or merge extra axes.", code, "conv-input-mismatch")]
        return hit("shapes.conv_rank", "shape_mismatch", f"{op} received a {got}-D input", cause, fixes, docs, _with_location(ctx, found), 0.92)

    m = ctx.search(r"expected (\d)D or (\d)D input \(got (\d)D input\)|expected (\d)D input \(got (\d)D input\)")
    if m:
        want = int(m.group(2) or m.group(4))
        got = int(m.group(3) or m.group(5))
        layer = f"`{name}`" if name else "this layer (BatchNorm/InstanceNorm)"
        if got == want - 1:
            cause = (f"{layer[0].upper() + layer[1:]} expects a {want}-D batch but got a {got}-D tensor: the batch dimension is missing — "
                     "typically a single sample (one image C×H×W) passed to the model without a batch axis.")
            code = "x = x.unsqueeze(0)  # (C, H, W) -> (1, C, H, W): a batch of one"
        else:
            cause = f"{layer[0].upper() + layer[1:]} expects a {want}-D input but got {got}-D: the tensor's layout does not match the layer (N, C, …)."
            code = "print(x.shape)"
        fixes = [fix("Add the batch dimension" if got == want - 1 else "Reshape the input to the layer's layout", "", code, "conv-input-mismatch")]
        return hit("shapes.norm_rank", "shape_mismatch", f"Layer expects {want}-D input, got {got}-D", cause, fixes, docs, _with_location(ctx, [error_fact(ctx)]), 0.92)

    m = ctx.search(r"Calculated padded input size per channel: \(([\d x]+)\)\. Kernel size: \(([\d x]+)\)")
    m2 = ctx.search(r"Given input size: \(([\dx]+)\)\. Calculated output size: \(([\dx]+)\)\. Output size is too small")
    if m or m2:
        if m:
            cause = (f"The feature map reaching this layer is only {m.group(1)} (after padding) but its kernel is {m.group(2)}: earlier "
                     "convolutions/poolings shrank the input below the kernel size. The input images are smaller than the network was designed for, or there are too many downsampling stages.")
        else:
            cause = (f"A pooling/conv layer got input {m2.group(1)} and would produce {m2.group(2)}: the spatial size reached zero. "
                     "The input is too small for this many downsampling stages.")
        fixes = [
            fix("Feed larger inputs or downsample less", "Resize inputs to the resolution the architecture expects, or remove a pooling stage / add padding.", "transforms.Resize((224, 224))", "conv-input-mismatch"),
            fix("Print the shape after each stage", "A forward hook per layer shows where the spatial size collapses.", "for n, m in model.named_modules():\n    m.register_forward_hook(lambda mod, i, o, n=n: print(n, tuple(o.shape)) if torch.is_tensor(o) else None)", "overfit-one-batch"),
        ]
        return hit("shapes.conv_too_small", "shape_mismatch", "Input too small for the kernel", cause, fixes, docs, _with_location(ctx, [error_fact(ctx)]), 0.9)
    return None


@rule(
    'shapes.broadcast',
    category='shape_mismatch',
    docs=("broadcast-size-mismatch", "overfit-one-batch"),
    priority=275,
    outcomes=('shapes.broadcast', 'shapes.inplace_broadcast', 'shapes.cat', 'shapes.stack', 'shapes.expand'),
    examples=(),
)
def broadcast(ctx: Context) -> RuleHit | None:
    """Element-wise ops and cat/stack whose sizes disagree."""
    m = ctx.search(r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton dimension (\d+)")
    docs = ("broadcast-size-mismatch", "overfit-one-batch")
    if m:
        a, b, dim = (int(g) for g in m.groups())
        found = [error_fact(ctx), Fact("shape", f"dimension {dim}: tensor a has {a}, tensor b has {b}; broadcasting needs equal sizes or a 1")]
        cause = (f"An element-wise operation combines two tensors whose dimension {dim} sizes are {a} and {b}. Broadcasting only stretches "
                 f"dimensions of size 1, so {a} vs {b} cannot be aligned.")
        src = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
        if src:
            cause += f" The failing expression is `{src}`."
        if re.search(r"alpha|class_weight|weights?\b|pos_weight", src):
            cause += (" A per-class weight vector (one entry per class) is being multiplied with per-sample values (one per batch element): "
                      "select each sample's weight by its target class first, e.g. `alpha[target]`.")
        elif ctx.search(r"attn|mask|attention", re.I):
            cause += " An attention mask or positional tensor built for a different sequence length is a common source."
        fixes = [
            fix("Print both shapes right before the failing line", "Find which operand has the unexpected size at that dimension.", "print(a.shape, b.shape)", "broadcast-size-mismatch"),
            fix("Align the dimensions explicitly", "Use unsqueeze/view/permute so the axes you mean line up; don't rely on implicit broadcasting.", "b = b.unsqueeze(1)  # (N,) -> (N, 1)", "broadcast-size-mismatch"),
        ]
        if re.search(r"alpha|class_weight|weights?\b|pos_weight", src):
            fixes.insert(0, fix("Index per-class weights by the target", "Gives one weight per sample, matching the per-sample loss.", "w = self.alpha[target]   # (N,) from (num_classes,)\nloss = w * (1 - pt) ** self.gamma * ce", "broadcast-size-mismatch"))
        if {a, b} & {1} == set() and (a % b == 0 or b % a == 0):
            fixes.append(fix("Check for a merged or split axis", f"{max(a, b)} is a multiple of {min(a, b)}: a reshape may have merged the batch with another axis.", None, "broadcast-size-mismatch"))
        return hit("shapes.broadcast", "shape_mismatch", f"Sizes {a} and {b} do not broadcast (dimension {dim})", cause, fixes, docs, _with_location(ctx, found), 0.93)
    m = ctx.search(r"output with shape \[([\d, ]*)\] doesn't match the broadcast shape \[([\d, ]*)\]")
    if m:
        cause = (f"An in-place operation writes into a tensor of shape [{m.group(1)}], but the result broadcasts to [{m.group(2)}]. "
                 "In-place ops cannot grow their target.")
        fixes = [fix("Use the out-of-place form", "Write `x = x + y` instead of `x += y` (or `x.add_(y)`), or make the smaller operand the other one.", "x = x + y", "broadcast-size-mismatch")]
        return hit("shapes.inplace_broadcast", "shape_mismatch", "In-place result would need a larger shape", cause, fixes, docs, _with_location(ctx, [error_fact(ctx)]), 0.9)
    m = ctx.search(r"Sizes of tensors must match except in dimension (\d+)\. (?:Expected|Got) size (\d+) (?:but got|and) size (\d+) for tensor number (\d+) in the list")
    if m:
        dim, want, got, idx = (int(g) for g in m.groups())
        cause = (f"torch.cat joins tensors along dimension {dim}, so every other dimension must agree; tensor number {idx} in the list "
                 f"has size {got} where the first has {want}.")
        fixes = [fix("Pad or crop to a common size, or concatenate along the dimension that differs", "Print [t.shape for t in tensors] to see which one is off.", "print([t.shape for t in tensors])", "broadcast-size-mismatch")]
        return hit("shapes.cat", "shape_mismatch", "torch.cat inputs differ outside the concatenation dimension", cause, fixes, docs, _with_location(ctx, [error_fact(ctx)]), 0.92)
    m = ctx.search(r"stack expects each tensor to be equal size, but got \[([\d, ]*)\] at entry (\d+) and \[([\d, ]*)\] at entry (\d+)")
    if m:
        cause = f"torch.stack needs identical shapes, but entry {m.group(2)} is [{m.group(1)}] and entry {m.group(4)} is [{m.group(3)}]."
        fixes = [fix("Pad to a common size before stacking", "For sequences use torch.nn.utils.rnn.pad_sequence; for images resize/crop first.", "from torch.nn.utils.rnn import pad_sequence\nbatch = pad_sequence(seqs, batch_first=True)", "collate-size-mismatch")]
        return hit("shapes.stack", "shape_mismatch", "torch.stack inputs have different shapes", cause, fixes, ("collate-size-mismatch", "broadcast-size-mismatch"), _with_location(ctx, [error_fact(ctx)]), 0.9)
    m = ctx.search(r"The expanded size of the tensor \((\d+)\) must match the existing size \((\d+)\) at non-singleton dimension (\d+)")
    if m:
        cause = f"expand() can only stretch dimensions of size 1; dimension {m.group(3)} has size {m.group(2)} and cannot become {m.group(1)}."
        fixes = [fix("Expand only size-1 dimensions", "unsqueeze the tensor first, or use repeat() if you really need copies.", "t = t.unsqueeze(0).expand(n, -1)", "broadcast-size-mismatch")]
        return hit("shapes.expand", "shape_mismatch", "expand() on a non-singleton dimension", cause, fixes, docs, _with_location(ctx, [error_fact(ctx)]), 0.9)
    return None


@rule(
    'shapes.view_reshape',
    category='shape_mismatch',
    docs=("view-reshape-invalid", "broadcast-size-mismatch"),
    priority=274,
    outcomes=('shapes.view_invalid', 'shapes.view_stride'),
    examples=(),
)
def view_reshape(ctx: Context) -> RuleHit | None:
    """``shape '[..]' is invalid for input of size N`` and non-contiguous ``view``."""
    docs = ("view-reshape-invalid", "broadcast-size-mismatch")
    m = ctx.search(r"shape '\[([-\d, ]*)\]' is invalid for input of size (\d+)")
    if m:
        dims = [int(d) for d in m.group(1).split(",") if d.strip()]
        numel = int(m.group(2))
        known = math.prod(d for d in dims if d != -1) or 1
        found = [error_fact(ctx), Fact("shape", f"requested shape {dims} for a tensor with {numel} elements")]
        if -1 in dims:
            cause = (f"view/reshape to {dims} needs the element count ({numel}) to be divisible by the product of the given sizes ({known}); "
                     f"{numel} / {known} = {numel / known:.3g} is not a whole number.")
        else:
            cause = f"view/reshape to {dims} needs exactly {known} elements, but the tensor has {numel}."
        if dims and dims[0] > 0 and numel % max(1, known // dims[0]) == 0 and known // max(1, dims[0]) > 0:
            per_sample = known // dims[0]
            actual = numel // per_sample if per_sample else 0
            if actual and actual != dims[0] and numel % per_sample == 0:
                cause += (f" The tensor holds {actual} rows of {per_sample}, not {dims[0]}: a hard-coded batch size fails on a smaller "
                          "final batch (or a different batch size at evaluation).")
                found.append(Fact("shape", f"{numel} = {actual} × {per_sample}"))
        fixes = [
            fix("Derive sizes from the tensor, not constants", "Use the tensor's own batch size and let -1 infer one dimension.", "x = x.view(x.size(0), -1)  # or torch.flatten(x, 1)", "view-reshape-invalid"),
            fix("Or drop the incomplete last batch", "If the model needs a fixed batch size.", "DataLoader(ds, batch_size=64, drop_last=True)", "view-reshape-invalid"),
        ]
        return hit("shapes.view_invalid", "shape_mismatch", "Reshape to an incompatible size", cause, fixes, docs, _with_location(ctx, found), 0.93)
    if ctx.search(r"view size is not compatible with input tensor's size and stride"):
        cause = ("view() needs memory laid out contiguously for the new shape, but this tensor is a non-contiguous view (after transpose, "
                 "permute, expand or slicing with steps), so its dimensions span separate memory regions.")
        fixes = [
            fix("Use reshape (copies only if needed)", "reshape() returns a view when possible and a copy otherwise.", "y = x.reshape(n, -1)", "view-reshape-invalid"),
            fix("Or make the tensor contiguous first", "", "y = x.contiguous().view(n, -1)", "view-reshape-invalid"),
        ]
        return hit("shapes.view_stride", "shape_mismatch", "view() on a non-contiguous tensor", cause, fixes, docs, _with_location(ctx, [error_fact(ctx)]), 0.93)
    return None


@rule(
    'shapes.loss_shapes',
    category='shape_mismatch',
    docs=("loss-input-target-shape", "overfit-one-batch"),
    priority=272,
    outcomes=('shapes.loss_batch', 'shapes.loss_elementwise', 'shapes.multi_target', 'shapes.ce_target_size'),
    examples=(),
)
def loss_shapes(ctx: Context) -> RuleHit | None:
    """Loss input/target shape disagreements (cross entropy, BCE, MSE, multi-target)."""
    docs = ("loss-input-target-shape", "overfit-one-batch")
    m = ctx.search(r"Expected input batch_size \((\d+)\) to match target batch_size \((\d+)\)")
    if m:
        inp, tgt = int(m.group(1)), int(m.group(2))
        found = [error_fact(ctx), Fact("shape", f"loss input has {inp} rows, target has {tgt}")]
        cause = f"The loss received {inp} predictions but {tgt} targets."
        if inp > tgt and inp % tgt == 0:
            cause += (f" {inp} = {tgt} × {inp // tgt}: predictions were flattened across a second axis (e.g. logits (B, T, C) viewed as (B·T, C)) "
                      "but the targets were not — or a view(-1, N) in the model merged part of each sample into the batch.")
        elif tgt > inp and tgt % inp == 0:
            cause += f" {tgt} = {inp} × {tgt // inp}: the targets were flattened across an axis the predictions still keep, or they are one-hot/multi-column."
        else:
            cause += " The model output and the labels come from different batches or were reshaped differently."
        fixes = [
            fix("Flatten predictions and targets the same way", "For sequence outputs, flatten both to (B·T, C) and (B·T,).", "loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))", "loss-input-target-shape"),
            fix("Check view/flatten inside the model", "A hard-coded view(-1, features) with the wrong features count changes the batch size silently.", "x = x.flatten(1)", "loss-input-target-shape"),
        ]
        return hit("shapes.loss_batch", "shape_mismatch", f"Loss input batch {inp} vs target batch {tgt}", cause, fixes, docs, _with_location(ctx, found), 0.93)
    m = ctx.search(r"Target size \((torch\.Size\(\[[^\]]*\]\))\) must be the same as input size \((torch\.Size\(\[[^\]]*\]\))\)")
    m2 = ctx.search(r"Using a target size \((torch\.Size\(\[[^\]]*\]\))\) that is different to the input size \((torch\.Size\(\[[^\]]*\]\))\)")
    if m or m2:
        mm = m or m2
        tgt, inp = parse_shape(mm.group(1)), parse_shape(mm.group(2))
        found = [error_fact(ctx), Fact("shape", f"loss input {fmt_shape(inp)}, target {fmt_shape(tgt)}")]
        cause = f"The loss compares an input of shape {fmt_shape(inp)} with a target of shape {fmt_shape(tgt)}; element-wise losses need identical shapes."
        if inp and tgt and len(inp) == len(tgt) + 1 and inp[-1] == 1:
            cause += " The model outputs a trailing dimension of 1 (one logit per sample) while the target is flat."
            code = "loss = criterion(output.squeeze(-1), target.float())"
        elif inp and tgt and len(tgt) == len(inp) + 1 and tgt[-1] == 1:
            code = "loss = criterion(output, target.squeeze(-1))"
        else:
            code = "print(output.shape, target.shape)"
        if m2:
            cause += " MSELoss/L1Loss only warn here and then broadcast to a wrong (N×N) shape — a silent bug even when nothing crashes."
        fixes = [fix("Make output and target the same shape", "squeeze/unsqueeze the trailing dimension so both match exactly.", code, "loss-input-target-shape")]
        return hit("shapes.loss_elementwise", "shape_mismatch", "Loss input and target shapes differ", cause, fixes, docs, _with_location(ctx, found), 0.93)
    if ctx.search(r"0D or 1D target tensor expected, multi-target not supported|multi-target not supported"):
        cause = ("cross_entropy/nll_loss with class-index targets expects a 1-D target of shape (N,) holding class indices, but got a 2-D target — "
                 "usually one-hot encoded labels or labels with a trailing dimension of 1.")
        fixes = [
            fix("Pass class indices", "Convert one-hot labels with argmax, or squeeze a trailing 1.", "loss = F.cross_entropy(logits, target.argmax(dim=1))  # or target.squeeze(1)", "loss-input-target-shape"),
            fix("Or pass class probabilities as float", "CrossEntropyLoss also accepts float targets with the same shape as the logits.", "loss = F.cross_entropy(logits, target.float())", "loss-input-target-shape"),
        ]
        return hit("shapes.multi_target", "shape_mismatch", "Cross-entropy got a multi-column target", cause, fixes, docs, _with_location(ctx, [error_fact(ctx)]), 0.92)
    m = ctx.search(r"Expected target size \[([\d, ]*)\], got \[([\d, ]*)\]")
    if m:
        cause = (f"For inputs with extra dimensions, cross_entropy expects logits (N, C, d1, …) and targets (N, d1, …). The target should be "
                 f"[{m.group(1)}] but is [{m.group(2)}]: the class dimension of the logits is probably last instead of second.")
        fixes = [fix("Move the class dimension to position 1", "For sequence models producing (N, T, C), permute or flatten.", "loss = F.cross_entropy(logits.permute(0, 2, 1), target)  # (N, C, T) vs (N, T)", "loss-input-target-shape")]
        return hit("shapes.ce_target_size", "shape_mismatch", "Cross-entropy target size mismatch", cause, fixes, docs, _with_location(ctx, [error_fact(ctx)]), 0.9)
    return None


@rule(
    'shapes.norm_and_rnn',
    category='shape_mismatch',
    docs=("batchnorm-batch-size-one",),
    priority=273,
    outcomes=('shapes.batchnorm_one', 'shapes.layernorm', 'shapes.rnn_input', 'shapes.rnn_hidden'),
    examples=(),
)
def norm_and_rnn(ctx: Context) -> RuleHit | None:
    """BatchNorm with one sample, LayerNorm normalized_shape, RNN input/hidden sizes."""
    m = ctx.search(r"Expected more than 1 value per channel when training, got input size (torch\.Size\(\[[^\]]*\]\)|\[[^\]]*\])")
    if m:
        shape = parse_shape(m.group(1))
        cause = (f"BatchNorm in training mode computes statistics over the batch, and got input {fmt_shape(shape)} — a single value per channel. "
                 "This usually happens on the last, incomplete batch (dataset size not divisible by the batch size) or when running one sample through a model still in train mode.")
        fixes = [
            fix("Drop the incomplete last batch", "", "DataLoader(ds, batch_size=32, shuffle=True, drop_last=True)", "batchnorm-batch-size-one"),
            fix("Switch to eval mode for single-sample inference", "BatchNorm then uses its running statistics.", "model.eval()\nwith torch.no_grad():\n    y = model(x)", "batchnorm-batch-size-one"),
            fix("For tiny batches use GroupNorm/LayerNorm", "They do not depend on the batch dimension.", "nn.GroupNorm(num_groups=8, num_channels=C)", "batchnorm-batch-size-one"),
        ]
        return hit("shapes.batchnorm_one", "shape_mismatch", "BatchNorm got a batch of one", cause, fixes, ("batchnorm-batch-size-one",), _with_location(ctx, [error_fact(ctx)]), 0.95)
    m = ctx.search(r"Given normalized_shape=\[([\d, ]*)\], expected input with shape \[\*, ([\d, ]*)\], but got input of size\s?\[([\d, ]*)\]")
    if m:
        cause = f"LayerNorm was built for trailing shape [{m.group(1)}] but the input is [{m.group(3)}]: its last dimension(s) differ."
        fixes = [fix("Build LayerNorm with the real feature size", "normalized_shape must equal the input's last dimension(s).", "self.norm = nn.LayerNorm(x.shape[-1])", "broadcast-size-mismatch")]
        return hit("shapes.layernorm", "shape_mismatch", "LayerNorm normalized_shape mismatch", cause, fixes, ("broadcast-size-mismatch",), _with_location(ctx, [error_fact(ctx)]), 0.9)
    m = ctx.search(r"input\.size\(-1\) must be equal to input_size\. Expected (\d+), got (\d+)")
    if m:
        cause = f"The RNN/LSTM/GRU was built with input_size={m.group(1)} but its input's last dimension is {m.group(2)}."
        if ctx.search(r"batch_first", re.I) is None:
            cause += " Also check batch_first: without it the input must be (seq_len, batch, features)."
        fixes = [fix(f"Set input_size={m.group(2)} (or project the features first)", "", f"nn.LSTM(input_size={m.group(2)}, hidden_size=H, batch_first=True)", "broadcast-size-mismatch")]
        return hit("shapes.rnn_input", "shape_mismatch", "RNN input_size mismatch", cause, fixes, ("broadcast-size-mismatch",), _with_location(ctx, [error_fact(ctx)]), 0.9)
    m = ctx.search(r"Expected hidden(?:\[0\])? size \(([\d, ]+)\), got \[([\d, ]+)\]")
    if m:
        cause = (f"The initial hidden state has shape [{m.group(2)}] but the RNN expects ({m.group(1)}) = (num_layers·directions, batch, hidden). "
                 "A hidden state kept from a previous batch of a different size (the last, smaller batch) is the usual cause.")
        fixes = [fix("Create the hidden state from the current batch size", "", "h0 = torch.zeros(num_layers, x.size(0), hidden, device=x.device)", "broadcast-size-mismatch")]
        return hit("shapes.rnn_hidden", "shape_mismatch", "RNN hidden state shape mismatch", cause, fixes, ("broadcast-size-mismatch",), _with_location(ctx, [error_fact(ctx)]), 0.9)
    return None


def _generic_shape(ctx: Context, outcome: str, what: str, docs: tuple[str, ...]) -> RuleHit:
    cause = f"A {what} operation received tensors whose shapes do not fit together. The error names the sizes that disagree."
    fixes = [fix("Print the shapes of the operands on the failing line", "Compare them with what the operation requires.", "print(a.shape, b.shape)", docs[0])]
    return hit(outcome, "shape_mismatch", "Tensor shapes do not fit together", cause, fixes, docs, _with_location(ctx, [error_fact(ctx)]), 0.8)


@rule(
    'shapes.generic_shape',
    category='shape_mismatch',
    docs=("broadcast-size-mismatch", "matmul-shape-mismatch", "overfit-one-batch"),
    priority=900,
    outcomes=('shapes.tensor',),
    examples=(),
)
def generic_shape(ctx: Context) -> RuleHit | None:
    """Other PyTorch shape complaints, recognised by their vocabulary."""
    if ctx.search(
        r"size mismatch(?! for )|shape mismatch|shapes? (?:cannot|can't|do not|don't) (?:be )?(?:broadcast|match|multipl)"
        r"|must match the size|number of dims don't match|Expected \d+D|Expected input to have|expected \d+D input"
        r"|Wrong shape|has (?:an )?invalid shape|dimension mismatch|incompatible shapes?|inconsistent tensor size"
        r"|number of dimensions in the tensor input does not match|is not equal to len\(dims\)|must have the same number of dimensions",
        re.I,
    ) and not ctx.search(r"state_dict|copying a param"):
        return _generic_shape(ctx, "shapes.tensor", "tensor", ("broadcast-size-mismatch", "matmul-shape-mismatch", "overfit-one-batch"))
    return None
