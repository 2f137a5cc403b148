"""Shape mismatches: matmul/Linear, convolutions, broadcasting, view/reshape, losses, norms, RNNs."""

from __future__ import annotations

import math
import re

from assistant.parse.messages import flatten_candidates, flatten_explanations, fmt_shape, int_hints, parse_shape
from assistant.rules.dispatch import TORCH_OP
from assistant.rules.registry import FALLBACK, Example, rule
from assistant.rules.base import with_location as _with_location, Context, error_fact, hit, lazy_re, remedy
from assistant.types import Fact, Facts, Fix, RuleHit

_MATMUL = (
    lazy_re(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)"),
    lazy_re(r"size mismatch, m1: \[(\d+) x (\d+)\], m2: \[(\d+) x (\d+)\]"),
    lazy_re(r"a and b must have same reduction dim, but got \[(\d+), (\d+)\] X \[(\d+), (\d+)\]"),
)
_BMM = lazy_re(r"Expected size for first two dimensions of batch2 tensor to be: \[(\d+), (\d+)\] but got: \[(\d+), (\d+)\]")
_MATMUL_0D = lazy_re(r"both arguments to matmul need to be at least 1D, but they are (\d)D and (\d)D")


def _cap(text: str) -> str:
    """The sentence with its first letter upper-cased (labels like `fc` stay as written)."""
    return text[:1].upper() + text[1:]


def _frames_mention(ctx: Context, pattern: str) -> bool:
    """Whether the message or any frame (file, function, source line) matches ``pattern``."""
    rx = re.compile(pattern)
    return bool(ctx.search(pattern)) or any(rx.search(f"{f.file} {f.function or ''} {f.source or ''}") for f in ctx.failure.frames)


def _shape_of(text: str | None) -> tuple[int, ...]:
    """A shape read from ``[1, 2]`` / ``(1, 2)`` / ``torch.Size([1, 2])``; () when unreadable."""
    return (parse_shape(text) or ()) if text else ()


@rule(
    'shapes.matmul_mismatch',
    category='shape_mismatch',
    docs=("matmul-shape-mismatch", "overfit-one-batch"),
    reads=TORCH_OP,
    priority=40,
    outcomes=('shapes.matmul', 'shapes.matmul_input_resolution', 'shapes.matmul_operands', 'shapes.matmul_no_sizes', 'shapes.bmm', 'shapes.matmul_scalar', 'shapes.matmul_rank'),
    examples=(
        Example("captured/cpu/linear-after-conv-flatten", "shapes.matmul"),
        Example("realworld/dev/hybridsn-old-size-mismatch-cuda", "shapes.matmul"),
        Example("realworld/dev/pytorchbook-old-size-mismatch-jupyter", "shapes.matmul"),
        Example("realworld/dev/seass-old-size-mismatch-cpu", "shapes.matmul"),
        Example("realworld/dev/animateanyone-mat1-mat2-wrong-image-encoder", "shapes.matmul"),
        Example("realworld/dev/datasetgan-mat1-mat2-latent-transpose", "shapes.matmul"),
        Example("corpus/shapes/old_size_mismatch_resnet_fc_mobilepose.txt", "shapes.matmul_input_resolution"),
        Example("corpus/shapes/old_size_mismatch_resnet_fc_stanford_cars.txt", "shapes.matmul_input_resolution"),
        Example("corpus/shapes/mm_operands.txt", "shapes.matmul_operands"),
        Example("corpus/shapes/mat1_dim_no_sizes_addmm_facesr.txt", "shapes.matmul_no_sizes"),
        Example("corpus/shapes/mat1_dim_no_sizes_title_dlwithpytorch.txt", "shapes.matmul_no_sizes"),
        Example("corpus/shapes/bmm_batch2.txt", "shapes.bmm"),
        Example("corpus/shapes/matmul_0d.txt", "shapes.matmul_scalar"),
        Example("corpus/shapes/mm_vector_operand.txt", "shapes.matmul_rank"),
        Example("corpus/shapes/bmm_2d_operand.txt", "shapes.matmul_rank"),
    ),
)
def matmul_mismatch(ctx: Context) -> RuleHit | None:
    """``mat1 and mat2 shapes cannot be multiplied (AxB and CxD)``, its older spellings, bmm and 0-D matmul."""
    head = _classifier_head(ctx)
    if head and _OLD_SIZE_MISMATCH.search(ctx.text):
        return _classifier_resolution(ctx, head)
    m = next((p.search(ctx.text) for p in _MATMUL if p.search(ctx.text)), None)
    if m:
        rows, got, inner, out = (int(g) for g in m.groups())
        _, kind = ctx.layer
        # Without frames (a pasted message line) the addmm/mat1-mat2 wording almost always comes from nn.Linear.
        linear_like = kind == "Linear" or (kind is None and any("linear" in (f.function or "") or "linear.py" in f.file for f in ctx.failure.frames)) or not ctx.failure.frames
        return _linear_mismatch(ctx, rows, got, inner, out) if linear_like else _operand_mismatch(ctx, rows, got, inner, out)
    if ctx.search(r"mat1 dim 1 must match mat2 dim 0"):
        # Releases around 1.5-1.9 printed this without the sizes.
        name, kind = ctx.layer
        label = f"`{name}`" if name else "a Linear layer"
        cause = ("A matrix product's inner dimensions differ: the first operand's last dimension does not equal the second operand's first. "
                 f"Through addmm/linear this is {label} whose in_features differs from the number of features in its input — typically a "
                 "flattened feature map whose size changed with the input resolution, or a head sized for another backbone. This release does not print the sizes.")
        fixes = [
            remedy("matmul-shape-mismatch#print-input-in-features", layer=name),
            remedy("matmul-shape-mismatch#lazy-linear-first-pass", layer=name),
        ]
        return hit("shapes.matmul_no_sizes", "shape_mismatch", "Matrix product inner dimensions differ", cause, fixes, ("matmul-shape-mismatch",),
                   _with_location(ctx, [error_fact(ctx)]), 0.88, facts=Facts(layer=name, layer_kind=kind, call="addmm"))
    b = ctx.search(_BMM.pattern)
    if b:
        want_batch, want_inner, got_batch, got_inner = (int(g) for g in b.groups())
        parts = []
        if want_batch != got_batch:
            parts.append(f"the batch sizes differ ({want_batch} vs {got_batch})")
        if want_inner != got_inner:
            parts.append(f"the first operand's last dimension is {want_inner} but the second operand's middle dimension is {got_inner}")
        cause = ("A batched matrix product (bmm/baddbmm) multiplies B×n×m by B×m×p, so the second operand must start with "
                 f"[{want_batch}, {want_inner}] but it starts with [{got_batch}, {got_inner}]: {' and '.join(parts) or 'the leading sizes differ'}.")
        if want_inner != got_inner:
            cause += " A missing transpose of the second operand (k instead of k.transpose(1, 2)) gives exactly this."
        fixes = [
            remedy("matmul-shape-mismatch#print-bmm-operands"),
            remedy("matmul-shape-mismatch#bmm-transpose-second"),
        ]
        found = [error_fact(ctx), Fact("shape", f"second operand starts with [{got_batch}, {got_inner}], expected [{want_batch}, {want_inner}]")]
        values = Facts(numbers={"batch_expected": want_batch, "inner_expected": want_inner, "batch_got": got_batch, "inner_got": got_inner}, call="bmm")
        return hit("shapes.bmm", "shape_mismatch", "Batched matrix product sizes do not fit", cause, fixes, ("matmul-shape-mismatch",),
                   _with_location(ctx, found), 0.9, facts=values)
    z = ctx.search(_MATMUL_0D.pattern)
    if z:
        da, db = int(z.group(1)), int(z.group(2))
        which = "first" if da == 0 else "second"
        cause = (f"matmul got a {da}-D and a {db}-D operand: the {which} one is a 0-D scalar tensor (for example the result of a "
                 "full reduction such as .sum()/.mean(), or an element picked out by indexing), and a matrix product needs at least one dimension on both sides.")
        fixes = [
            remedy("matmul-shape-mismatch#scalar-elementwise"),
            remedy("matmul-shape-mismatch#keepdim-reduction"),
        ]
        values = Facts(numbers={"ndim_a": da, "ndim_b": db}, call="matmul")
        return hit("shapes.matmul_scalar", "shape_mismatch", "matmul with a 0-D tensor", cause, fixes, ("matmul-shape-mismatch",),
                   _with_location(ctx, [error_fact(ctx)]), 0.9, facts=values)
    r = ctx.search(r"\b(self|mat2) must be a matrix|\b(batch1|batch2) must be a 3D tensor")
    if r:
        arg = r.group(1) or r.group(2)
        which = "first" if arg in ("self", "batch1") else "second"
        if r.group(1):
            cause = (f"torch.mm multiplies two 2-D matrices, but its {which} operand is not 2-D: a vector (1-D) or a batched tensor (3-D+) "
                     "reached a function that only takes matrices.")
            fixes = [remedy("matmul-shape-mismatch#mm-use-matmul")]
        else:
            cause = (f"torch.bmm multiplies two batches of matrices (B×n×m and B×m×p), but its {which} operand is not 3-D: a single matrix or a "
                     "tensor with extra axes reached it.")
            fixes = [remedy("matmul-shape-mismatch#bmm-batch-axis")]
        fixes.append(remedy("matmul-shape-mismatch#print-operand-shapes"))
        return hit("shapes.matmul_rank", "shape_mismatch", f"Operand `{arg}` has the wrong number of dimensions", cause, fixes, ("matmul-shape-mismatch",),
                   _with_location(ctx, [error_fact(ctx)]), 0.9, facts=Facts(argument=arg, call="bmm" if r.group(2) else "mm"))
    return None


# Old (TH/THC era) wording of a failed matrix product: with or without the m1/m2 sizes.
_OLD_SIZE_MISMATCH = lazy_re(r"size mismatch(?:, m1: \[| at \S*(?:THC|TH)[/\\]|\s*$)", re.M)
# Classification networks of libraries whose older releases pooled with a fixed window before the head.
_CLASSIFIER_FILE = re.compile(r"torchvision[/\\]models[/\\]|pretrainedmodels[/\\]|timm[/\\]models[/\\]|efficientnet_pytorch[/\\]")
_HEAD_CALL = re.compile(r"self\.(fc|classifier|last_linear|_fc|head)\s*\(")


def _classifier_head(ctx: Context) -> str | None:
    """The head (`fc`, `classifier` ...) a library classification network was calling when the product failed, else None."""
    for fr in ctx.failure.frames:
        m = _HEAD_CALL.search(fr.source or "")
        if m and _CLASSIFIER_FILE.search(fr.file):
            return m.group(1)
    return None


def _classifier_resolution(ctx: Context, head: str) -> RuleHit:
    """Old `size mismatch` raised in a library classifier's head: the input resolution its fixed pooling assumes."""
    m = next((p.search(ctx.text) for p in _MATMUL if p.search(ctx.text)), None)
    sizes = tuple(int(g) for g in m.groups()) if m else ()
    found = [error_fact(ctx), Fact("layer", f"raised in the network's `{head}` layer, called from the library's own forward")]
    cause = (f"The product failed inside the classification network's `{head}` head, which is called by the library's own forward: the features "
             "reaching it do not have the size the head was built for.")
    if len(sizes) == 4:
        rows, got, inner, out = sizes
        found.append(Fact("shape", f"{got} features per sample reach `{head}`, built for {inner}"))
        cause += f" It receives {got} features per sample where it expects {inner}."
    cause += (" Older releases of these models pooled the last feature map with a fixed window, so the head only fits the input resolution "
              "the network was designed for (224×224 for most ImageNet classifiers, 299×299 for Inception); another image size (or a "
              "replaced head with another flatten size) gives this error.")
    fixes = [
        remedy("matmul-shape-mismatch#resize-to-model-input"),
        remedy("matmul-shape-mismatch#adaptive-pool-head"),
        remedy("matmul-shape-mismatch#print-input-images"),
    ]
    facts = Facts(shapes=((sizes[0], sizes[1]), (sizes[2], sizes[3])) if len(sizes) == 4 else (), layer=head, layer_kind="Linear", call="addmm")
    return hit("shapes.matmul_input_resolution", "shape_mismatch", f"Classifier head `{head}` got features of another input size", cause, fixes,
               ("matmul-shape-mismatch", "conv-input-mismatch"), _with_location(ctx, found), 0.9, facts=facts)


_EMBED_WIDTHS = frozenset({384, 512, 640, 768, 1024, 1152, 1280, 1536, 2048, 2560, 3072, 4096, 5120, 8192})


def _matmul_facts(ctx: Context, rows: int, got: int, inner: int, out: int) -> Facts:
    # evidence.py reads shapes as ((rows, got), (inner, out)): keep this exact layout.
    name, kind = ctx.layer
    return Facts(shapes=((rows, got), (inner, out)), numbers={"rows": rows, "got_features": got, "in_features": inner, "out_features": out},
                 layer=name, layer_kind=kind)


def _shape_hints(ctx: Context) -> frozenset[int]:
    """Integers the text shows that could size a feature map: the user's source lines and the message.

    The product's own sizes (``8x2048``, ``m1: [2 x 64]``) and file paths are left out: they are the
    numbers to explain, not evidence of how to split them.
    """
    message = ctx.message
    for rx in _MATMUL:
        message = rx.sub(" ", message)
    message = re.sub(r"(?<!\S)\S*[/\\]\S*", " ", message)
    sources = " ".join(f.source or "" for f in ctx.failure.user_frames)
    return int_hints(f"{message} {sources}")


def _linear_mismatch(ctx: Context, rows: int, got: int, inner: int, out: int) -> RuleHit:
    name, _ = ctx.layer
    label = f"`{name}`" if name else "the Linear layer"
    found = [error_fact(ctx), Fact("shape", f"input to the product: {rows}×{got}; weight (transposed): {inner}×{out}"),
             Fact("layer", f"{label}: in_features={inner}, out_features={out}; it received {got} features per row (batch of {rows})")]
    cause = (f"{_cap(label)} was built with in_features={inner} but the tensor reaching it has {got} features "
             f"(shape {rows}×{got}). The size of the flattened input does not match what the layer was constructed for.")
    conjecture = ""
    # Several C×H×W splits usually fit both sizes; one is stated only when the text itself pins it down.
    explain = bool(flatten_candidates(got, inner))
    determined = flatten_explanations(got, inner, _shape_hints(ctx))
    if determined:
        conjecture = (f"If the input is a flattened convolutional feature map, the numbers fit {determined[0]}: the feature map is "
                      f"{'smaller' if got < inner else 'larger'} than the layer assumed (different image size, or a conv/pool without padding changed H×W).")
    elif explain:
        conjecture = (f"If the input is a flattened convolutional feature map, it has {got} values per sample where the layer expects {inner}; "
                      "the text alone does not say its channels×height×width (several splits fit these numbers). To see the real shape, "
                      f"print(x.shape) just before {label}, or run the script with `torchhelp run`.")
    elif got % inner == 0 or inner % got == 0:
        ratio = got // inner if got % inner == 0 else inner // got
        cause += f" One size is exactly {ratio}× the other: a dimension was probably merged into the features (or split off) by a view/flatten — check which axes you flatten."
    fixes = [
        remedy("matmul-shape-mismatch#linear-match-data", got=got, in_features=inner, out_features=out, layer=name),
        remedy("matmul-shape-mismatch#lazy-linear", out_features=out, layer=name),
        remedy("matmul-shape-mismatch#dummy-input-flatten-size"),
        remedy("matmul-shape-mismatch#flatten-non-batch"),
    ]
    if got in _EMBED_WIDTHS and inner in _EMBED_WIDTHS and not explain:
        # Both sizes are common hidden widths of pretrained encoders (768 vs 1024 ...): two model variants were mixed.
        cause += (f" Both {got} and {inner} are typical embedding widths of pretrained encoders, so the features may come from a different "
                  "encoder variant (or checkpoint) than the one this layer was trained with.")
        fixes.insert(0, remedy("matmul-shape-mismatch#encoder-variant-width", in_features=inner, got=got))
    elif got % inner and inner % got:
        # Linear acts on the last axis, so the features may sit on another axis of the input (ranked lower when a flatten explains the sizes).
        fixes.insert(len(fixes) if explain else 2, remedy("matmul-shape-mismatch#features-last-axis"))
    return hit("shapes.matmul", "shape_mismatch", f"Linear layer expects {inner} input features but got {got}", cause, fixes,
               ("matmul-shape-mismatch", "overfit-one-batch"), _with_location(ctx, found), 0.95,
               facts=_matmul_facts(ctx, rows, got, inner, out), conjecture=conjecture)


def _operand_mismatch(ctx: Context, rows: int, got: int, inner: int, out: int) -> RuleHit:
    found = [error_fact(ctx), Fact("shape", f"first operand {rows}×{got}, second operand {inner}×{out}")]
    cause = f"A matrix product multiplies a {rows}×{got} by a {inner}×{out} matrix; the inner sizes {got} and {inner} must be equal."
    if out == rows:
        cause += f" The other order ({inner}×{out} @ {rows}×{got}) would be valid: the operands may be swapped."
    elif got == out:
        cause += " The second operand looks transposed: its last dimension matches instead of its first."
    fixes = [
        remedy("matmul-shape-mismatch#find-wrong-operand", rows=rows, got=got, expected=inner, cols=out),
        remedy("matmul-shape-mismatch#transpose-operands"),
    ]
    if out == inner:
        fixes.insert(1, remedy("matmul-shape-mismatch#size-square-weight", expected=inner, cols=out, got=got))
    return hit("shapes.matmul_operands", "shape_mismatch", f"Matrix product inner dimensions differ ({got} vs {inner})", cause, fixes,
               ("matmul-shape-mismatch",), _with_location(ctx, found), 0.93, facts=_matmul_facts(ctx, rows, got, inner, out))


_CONV_CHANNELS = lazy_re(
    r"weight(?: of size)? ?\[([\d, ]+)\],? (?:so )?expected input\[([\d, ]+)\] to have (\d+) channels, but got (\d+) channels"
)
_CONV_RANK = lazy_re(r"Expected (\d)D \(unbatched\) or (\d)D \(batched\) input to (conv\w+|\w+pool\w*|\w+), but got input of size: \[([\d, ]*)\]")
_CONV_RANK_OLD = lazy_re(r"Expected (\d+)-dimensional input for \d+-dimensional weight ?(\[[\d, ]+\]|[\d ]+?),? but got (?:\d+-dimensional )?input of size \[([\d, ]*)\]")
_NORM_RANK = lazy_re(r"expected (\d)D or (\d)D input \(got (\d)D input\)|expected (\d)D input \(got (\d)D input\)")
_TOO_SMALL_KERNEL = lazy_re(r"Calculated padded input size per channel: \(([\d x]+)\)\. Kernel size: \(([\d x]+)\)")
_TOO_SMALL_OUTPUT = lazy_re(r"Given input size: \(([\dx]+)\)\. Calculated output size: \(([\dx]+)\)\. Output size is too small")
_CONV_DOCS = ("conv-input-mismatch", "overfit-one-batch")


@rule(
    'shapes.conv_input',
    category='shape_mismatch',
    docs=_CONV_DOCS,
    reads=(*TORCH_OP, "ValueError"),
    priority=41,
    outcomes=('shapes.conv_channels', 'shapes.conv_channels_last', 'shapes.conv_gray_to_rgb', 'shapes.conv_rgb_to_gray',
              'shapes.conv_missing_axis', 'shapes.conv_rank', 'shapes.conv_rank_extra', 'shapes.norm_rank', 'shapes.norm_rank_other',
              'shapes.conv_too_small'),
    examples=(
        Example("corpus/shapes/conv_prev_layer_channels.txt", "shapes.conv_channels"),
        Example("corpus/shapes/conv_channels_last.txt", "shapes.conv_channels_last"),
        Example("captured/cpu/conv-grayscale-input-rgb-model", "shapes.conv_gray_to_rgb"),
        Example("realworld/dev/scda-conv-1-channel-png8", "shapes.conv_gray_to_rgb"),
        Example("corpus/shapes/conv_rgb_into_gray.txt", "shapes.conv_rgb_to_gray"),
        Example("corpus/shapes/conv_old_no_batch_histloss.txt", "shapes.conv_missing_axis"),
        Example("corpus/shapes/conv_old_no_batch_retinanet.txt", "shapes.conv_missing_axis"),
        Example("corpus/shapes/conv_rank_2d.txt", "shapes.conv_rank"),
        Example("corpus/shapes/conv_rank_5d.txt", "shapes.conv_rank_extra"),
        Example("corpus/shapes/conv_old_extra_dim_convnext.txt", "shapes.conv_rank_extra"),
        Example("captured/cpu/single-image-missing-batch-dim", "shapes.norm_rank"),
        Example("corpus/shapes/batchnorm2d_rank.txt", "shapes.norm_rank"),
        Example("corpus/shapes/batchnorm1d_4d_input.txt", "shapes.norm_rank_other"),
        Example("corpus/shapes/conv_kernel_too_big.txt", "shapes.conv_too_small"),
        Example("corpus/shapes/maxpool_output_too_small.txt", "shapes.conv_too_small"),
    ),
)
def conv_input(ctx: Context) -> RuleHit | None:
    """Convolution channel/rank/size errors, e.g. grayscale images into an RGB model."""
    m = ctx.search(_CONV_CHANNELS.pattern)
    if m:
        return _conv_channels(ctx, _shape_of(m.group(1)), _shape_of(m.group(2)), int(m.group(3)), int(m.group(4)))
    m = ctx.search(_CONV_RANK.pattern)
    if m:
        return _conv_rank(ctx, int(m.group(1)), int(m.group(2)), m.group(3), _shape_of(m.group(4)), old=False)
    m = ctx.search(_CONV_RANK_OLD.pattern)
    if m:
        batched = int(m.group(1))
        weight = _shape_of(m.group(2)) if "[" in m.group(2) else tuple(int(t) for t in m.group(2).split()[:batched])
        return _conv_rank(ctx, batched - 1, batched, "conv", _shape_of(m.group(3)), old=True, weight=weight)
    m = ctx.search(_NORM_RANK.pattern)
    if m:
        return _norm_rank(ctx, int(m.group(1) or m.group(4)), int(m.group(2) or m.group(4)), int(m.group(3) or m.group(5)))
    m, m2 = ctx.search(_TOO_SMALL_KERNEL.pattern), ctx.search(_TOO_SMALL_OUTPUT.pattern)
    if m or m2:
        return _conv_too_small(ctx, m, m2)
    return None


def _conv_channels(ctx: Context, weight: tuple[int, ...], inp: tuple[int, ...], want: int, got: int) -> RuleHit:
    name, kind = ctx.layer
    label = f"`{name}`" if name else "the convolution"
    # The conv's own out_channels and kernel size when the message printed its weight (the fix's defaults otherwise).
    conv_values = {"layer": name, "out_features": weight[0] if weight else None, "kernel_size": weight[-1] if weight else None}
    found = [error_fact(ctx), Fact("shape", f"conv weight {fmt_shape(weight)}: expects {want} input channels"),
             Fact("shape", f"input {fmt_shape(inp)}: dimension 1 (channels) is {got}")]
    values = Facts(shapes=(weight, inp), numbers={"expected_channels": want, "got_channels": got}, layer=name, layer_kind=kind or "Conv")
    if len(inp) == 4 and inp[-1] == want and got not in (1, 3, want):
        outcome, title = "shapes.conv_channels_last", "Input is channels-last (N, H, W, C)"
        cause = (f"The input {fmt_shape(inp)} is channels-last: its last dimension is {inp[-1]} = the {want} channels "
                 f"{label} expects, but PyTorch convolutions read dimension 1 as channels (N, C, H, W), so it sees {got} channels.")
        fixes = [remedy("conv-input-mismatch#permute-to-nchw")]
    elif want == 3 and got == 1:
        outcome, title = "shapes.conv_gray_to_rgb", "Convolution expects 3 channels, got 1"
        cause = (f"{_cap(label)} expects 3-channel (RGB) images but received 1-channel (grayscale) input {fmt_shape(inp)}. "
                 "Models and pretrained weights built for RGB need 3 channels.")
        fixes = [
            remedy("conv-input-mismatch#gray-to-rgb"),
            remedy("conv-input-mismatch#stem-one-channel", **conv_values),
        ]
    elif want == 1 and got == 3:
        outcome, title = "shapes.conv_rgb_to_gray", "Convolution expects 1 channel, got 3"
        cause = f"{_cap(label)} was built for 1-channel (grayscale) input but received 3-channel images {fmt_shape(inp)}."
        fixes = [
            remedy("conv-input-mismatch#rgb-to-gray"),
            remedy("conv-input-mismatch#stem-three-channels", **conv_values),
        ]
    else:
        outcome, title = "shapes.conv_channels", f"Convolution expects {want} input channels, got {got}"
        cause = (f"{_cap(label)} expects {want} input channels but the tensor it received has {got} in dimension 1 "
                 f"(shape {fmt_shape(inp)}). Either the layer before it outputs {got} channels (its out_channels does not match this conv's "
                 f"in_channels={want}), or the input is not laid out as N, C, H, W.")
        fixes = [
            remedy("conv-input-mismatch#match-channel-counts", got=got, expected=want, **conv_values),
            remedy("conv-input-mismatch#check-layout"),
        ]
    return hit(outcome, "shape_mismatch", title, cause, fixes, _CONV_DOCS, _with_location(ctx, found), 0.95, facts=values)


def _conv_rank(ctx: Context, unbatched: int, batched: int, op: str, size: tuple[int, ...], *, old: bool,
               weight: tuple[int, ...] = ()) -> RuleHit:
    got = len(size)
    accepts = f"{batched}-D" if old else f"{unbatched}-D or {batched}-D"
    found = [error_fact(ctx), Fact("shape", f"{op} received a {got}-D tensor {fmt_shape(size)}; it accepts {accepts}")]
    values = Facts(shapes=(size,) + ((weight,) if weight else ()), numbers={"got_ndim": got, "expected_ndim": batched}, call=op)
    if old and got == batched - 1:
        # Older PyTorch had no unbatched convolution: one axis short is a lone sample or a batch without its channel axis.
        in_ch = weight[1] if len(weight) > 1 else None
        if in_ch is not None and size and size[0] == in_ch:
            detail = f"its first dimension ({size[0]}) equals the conv's in_channels, so this is one sample (C, H, W) without the batch axis"
            ref = "conv-input-mismatch#add-batch-axis"
        elif in_ch == 1:
            detail = "the conv takes one channel, so this is probably a batch of single-channel images (N, H, W) without the channel axis"
            ref = "conv-input-mismatch#add-channel-axis"
        else:
            detail = "either the batch axis (a single sample) or the channel axis is missing"
            ref = "conv-input-mismatch#add-missing-axis"
        cause = f"{op} needs a {batched}-D input (N, C, …) but got {fmt_shape(size)}, one dimension short: {detail}."
        fixes = [remedy(ref)]
        return hit("shapes.conv_missing_axis", "shape_mismatch", f"{op} input is missing a dimension", cause, fixes, _CONV_DOCS,
                   _with_location(ctx, found), 0.92, facts=values)
    if got < batched:
        if got == unbatched - 1:
            cause = f"{op} got a {got}-D tensor {fmt_shape(size)}: both the batch and the channel dimension are missing (e.g. a single H×W grayscale image)."
            ref = "conv-input-mismatch#add-batch-channel-axes"
        else:
            cause = f"{op} got a {got}-D tensor {fmt_shape(size)} where it needs {accepts} (N, C, …): the data was flattened or indexed down too far."
            ref = "conv-input-mismatch#restore-layout"
        fixes = [remedy(ref)]
        return hit("shapes.conv_rank", "shape_mismatch", f"{op} received a {got}-D input", cause, fixes, _CONV_DOCS,
                   _with_location(ctx, found), 0.92, facts=values)
    cause = (f"{op} got a {got}-D tensor {fmt_shape(size)}, more dimensions than the {batched}-D (N, C, …) it accepts: an extra axis "
             "(frames of a clip, crops or views per sample) must be merged into the batch first, or a 3-D layer used.")
    fixes = [remedy("conv-input-mismatch#merge-extra-axis")]
    return hit("shapes.conv_rank_extra", "shape_mismatch", f"{op} received a {got}-D input", cause, fixes, _CONV_DOCS,
               _with_location(ctx, found), 0.92, facts=values)


def _norm_rank(ctx: Context, low: int, high: int, got: int) -> RuleHit:
    name, _ = ctx.layer
    layer = f"`{name}`" if name else "this normalization layer"
    want = f"{low}-D" if low == high else f"{low}-D or {high}-D"
    values = Facts(numbers={"got_ndim": got, "expected_ndim": low}, layer=name, layer_kind="BatchNorm")
    if got == low - 1:
        cause = (f"{_cap(layer)} expects a {want} batch but got a {got}-D tensor: the batch dimension is missing — "
                 "typically a single sample passed to the model without a batch axis.")
        fixes = [remedy("conv-input-mismatch#norm-add-batch-dim")]
        return hit("shapes.norm_rank", "shape_mismatch", f"Layer expects {want} input, got {got}-D", cause, fixes, _CONV_DOCS,
                   _with_location(ctx, [error_fact(ctx)]), 0.92, facts=values)
    cause = (f"{_cap(layer)} expects {want} input but got {got}-D: the layer variant does not match the data (BatchNorm1d takes (N, C) or "
             "(N, C, L), BatchNorm2d (N, C, H, W), BatchNorm3d (N, C, D, H, W)), or the tensor was reshaped on the way.")
    fixes = [remedy("conv-input-mismatch#norm-match-rank")]
    return hit("shapes.norm_rank_other", "shape_mismatch", f"Layer expects {want} input, got {got}-D", cause, fixes, _CONV_DOCS,
               _with_location(ctx, [error_fact(ctx)]), 0.9, facts=values)


def _conv_too_small(ctx: Context, m: re.Match[str] | None, m2: re.Match[str] | None) -> RuleHit:
    if m:
        cause = (f"The feature map reaching this layer is only {m.group(1)} (after padding) but its kernel is {m.group(2)}: earlier "
                 "convolutions/poolings shrank the input below the kernel size. The input is smaller than the network was designed for, or there are too many downsampling stages.")
        values = Facts(names=(f"input {m.group(1)}", f"kernel {m.group(2)}"))
    else:
        assert m2 is not None
        cause = (f"A pooling/conv layer got input {m2.group(1)} and would produce {m2.group(2)}: the spatial size reached zero. "
                 "The input is too small for this many downsampling stages.")
        values = Facts(names=(f"input {m2.group(1)}", f"output {m2.group(2)}"))
    fixes = [
        remedy("conv-input-mismatch#larger-inputs"),
        remedy("overfit-one-batch#print-shape-per-stage"),
    ]
    return hit("shapes.conv_too_small", "shape_mismatch", "Input too small for the kernel", cause, fixes, _CONV_DOCS,
               _with_location(ctx, [error_fact(ctx)]), 0.9, facts=values)


_WEIGHT_NAMES = lazy_re(r"(?:self\.)?(?:alpha|class_weight|weights?\b|pos_weight)")
_BCAST_DOCS = ("broadcast-size-mismatch", "overfit-one-batch")


@rule(
    'shapes.broadcast',
    category='shape_mismatch',
    docs=_BCAST_DOCS,
    reads=TORCH_OP,
    priority=47,
    outcomes=('shapes.broadcast', 'shapes.broadcast_class_weights', 'shapes.inplace_broadcast', 'shapes.cat', 'shapes.cat_rank', 'shapes.cat_zero_dim',
              'shapes.stack', 'shapes.expand'),
    examples=(
        Example("corpus/shapes/broadcast_add.txt", "shapes.broadcast"),
        Example("captured/cpu/focal-loss-alpha-broadcast", "shapes.broadcast_class_weights"),
        Example("corpus/shapes/inplace_broadcast.txt", "shapes.inplace_broadcast"),
        Example("captured/cpu/unet-skip-cat-odd-size", "shapes.cat"),
        Example("corpus/shapes/cat_sizes.txt", "shapes.cat"),
        Example("corpus/shapes/cat_rank_mismatch.txt", "shapes.cat_rank"),
        Example("corpus/shapes/cat_zero_dim.txt", "shapes.cat_zero_dim"),
        Example("corpus/shapes/stack_sizes.txt", "shapes.stack"),
        Example("corpus/shapes/expand_non_singleton.txt", "shapes.expand"),
    ),
)
def broadcast(ctx: Context) -> RuleHit | None:
    """Element-wise ops and cat/stack/expand whose sizes disagree."""
    m = ctx.search(r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton dimension (\d+)")
    if m:
        return _elementwise(ctx, *(int(g) for g in m.groups()))
    m = ctx.search(r"output with shape \[([\d, ]*)\] doesn't match the broadcast shape \[([\d, ]*)\]")
    if m:
        out, full = _shape_of(m.group(1)), _shape_of(m.group(2))
        cause = (f"An in-place operation writes into a tensor of shape {fmt_shape(out)}, but the result broadcasts to {fmt_shape(full)}. "
                 "In-place ops cannot grow their target.")
        fixes = [remedy("broadcast-size-mismatch#out-of-place")]
        return hit("shapes.inplace_broadcast", "shape_mismatch", "In-place result would need a larger shape", cause, fixes, _BCAST_DOCS,
                   _with_location(ctx, [error_fact(ctx)]), 0.9, facts=Facts(shapes=(out, full)))
    m = ctx.search(r"Sizes of tensors must match except in dimension (\d+)\. (?:Expected|Got) size (\d+) (?:but got|and) size (\d+) for tensor number (\d+) in the list")
    # Older releases' wording names the two sizes and the dimension where they differ, not the tensor's position in the list.
    legacy = None if m else ctx.search(r"Sizes of tensors must match except in dimension (\d+)\. Got (\d+) and (\d+) in dimension (\d+)")
    cat = m or legacy
    if cat:
        dim, want, got, last = (int(g) for g in cat.groups())
        numbers = {"dim": dim, "expected_size": want, "got_size": got}
        if m:
            numbers["tensor_index"] = last
            where = f"tensor number {last} in the list has size {got} where the first has {want}."
        else:
            where = f"two of the tensors have sizes {want} and {got} in dimension {last}."
        cause = f"torch.cat joins tensors along dimension {dim}, so every other dimension must agree; " + where
        if abs(want - got) == 1:
            cause += (" The sizes differ by one: a spatial size that was odd before a pooling/strided conv comes back one pixel smaller after "
                      "upsampling, so skip connections no longer line up.")
        fixes = [remedy("broadcast-size-mismatch#cat-pad-or-crop")]
        if abs(want - got) == 1:
            fixes.insert(0, remedy("broadcast-size-mismatch#cat-resize-skip"))
        values = Facts(numbers=numbers, call="torch.cat")
        return hit("shapes.cat", "shape_mismatch", "torch.cat inputs differ outside the concatenation dimension", cause, fixes, _BCAST_DOCS,
                   _with_location(ctx, [error_fact(ctx)]), 0.92, facts=values)
    m = ctx.search(r"Tensors must have same number of dimensions: got (\d+) and (\d+)")
    if m:
        a, b = int(m.group(1)), int(m.group(2))
        cause = (f"torch.cat joins tensors that all have the same number of dimensions, but the list mixes {a}-D and {b}-D tensors: one of them "
                 "lost or gained an axis (a squeeze, a missing batch/channel axis, or a per-sample tensor among batched ones).")
        fixes = [remedy("broadcast-size-mismatch#cat-same-rank")]
        return hit("shapes.cat_rank", "shape_mismatch", f"torch.cat mixes {a}-D and {b}-D tensors", cause, fixes, _BCAST_DOCS,
                   _with_location(ctx, [error_fact(ctx)]), 0.9, facts=Facts(numbers={"ndim_a": a, "ndim_b": b}, call="torch.cat"))
    m = ctx.search(r"zero-dimensional tensor \(at position (\d+)\) cannot be concatenated")
    if m:
        cause = ("torch.cat joins tensors along an existing dimension, but the list holds 0-D scalars (for example per-batch losses or "
                 "metrics collected in a list), which have no dimension to join along.")
        fixes = [remedy("broadcast-size-mismatch#stack-scalars")]
        return hit("shapes.cat_zero_dim", "shape_mismatch", "torch.cat on 0-D tensors", cause, fixes, _BCAST_DOCS,
                   _with_location(ctx, [error_fact(ctx)]), 0.9, facts=Facts(numbers={"position": int(m.group(1))}, call="torch.cat"))
    m = ctx.search(r"stack expects each tensor to be equal size, but got \[([\d, ]*)\] at entry (\d+) and \[([\d, ]*)\] at entry (\d+)")
    if m:
        first, second = _shape_of(m.group(1)), _shape_of(m.group(3))
        cause = f"torch.stack needs identical shapes, but entry {m.group(2)} is {fmt_shape(first)} and entry {m.group(4)} is {fmt_shape(second)}."
        fixes = [remedy("collate-size-mismatch#pad-before-stack")]
        return hit("shapes.stack", "shape_mismatch", "torch.stack inputs have different shapes", cause, fixes, ("collate-size-mismatch", "broadcast-size-mismatch"),
                   _with_location(ctx, [error_fact(ctx)]), 0.9, facts=Facts(shapes=(first, second), call="torch.stack"))
    m = ctx.search(r"The expanded size of the tensor \((-?\d+)\) must match the existing size \((\d+)\) at non-singleton dimension (\d+)")
    if m:
        new, old, dim = (int(g) for g in m.groups())
        cause = f"expand() can only stretch dimensions of size 1; dimension {dim} has size {old} and cannot become {new}."
        fixes = [remedy("broadcast-size-mismatch#expand-singleton")]
        return hit("shapes.expand", "shape_mismatch", "expand() on a non-singleton dimension", cause, fixes, _BCAST_DOCS,
                   _with_location(ctx, [error_fact(ctx)]), 0.9, facts=Facts(numbers={"dim": dim, "existing_size": old, "target_size": new}, call="expand"))
    return None


def _elementwise(ctx: Context, a: int, b: int, dim: int) -> RuleHit:
    found = [error_fact(ctx), Fact("shape", f"dimension {dim}: tensor a has {a}, tensor b has {b}; broadcasting needs equal sizes or a 1")]
    values = Facts(numbers={"size_a": a, "size_b": b, "dim": dim})
    src = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
    cause = (f"An element-wise operation combines two tensors whose dimension {dim} sizes are {a} and {b}. Broadcasting only stretches "
             f"dimensions of size 1, so {a} vs {b} cannot be aligned.")
    if src:
        cause += f" The failing expression is `{src}`."
    fixes = [
        remedy("broadcast-size-mismatch#print-both-shapes"),
        remedy("broadcast-size-mismatch#align-dims"),
    ]
    if a != 1 and b != 1 and (a % b == 0 or b % a == 0):
        fixes.append(remedy("broadcast-size-mismatch#merged-split-axis", larger=max(a, b), smaller=min(a, b)))
    if {a, b} == {3, 4} and dim in (0, 1):
        # 4 against 3 on the channel dimension (0 of an image, 1 of a batch): an RGBA image meeting 3-channel normalisation or weights.
        cause += (" Four against three on the channel dimension is the signature of an image with an alpha channel (RGBA) "
                  "meeting per-channel values or a model made for three RGB channels.")
        fixes.insert(1, remedy("broadcast-size-mismatch#convert-image-to-rgb"))
    weight_name = _WEIGHT_NAMES.search(src)
    if weight_name:
        # The failing line multiplies a per-class weight (alpha, class_weight, …) with per-sample values.
        cause += (f" `{weight_name.group(0).removeprefix('self.')}` on that line looks like a per-class weight vector (one entry per class) being combined with "
                  "per-sample values (one per batch element): each sample's weight must be selected by its target class first.")
        fixes.insert(0, remedy("broadcast-size-mismatch#index-class-weights", variable=weight_name.group(0)))
        return hit("shapes.broadcast_class_weights", "shape_mismatch", f"Per-class weights combined with per-sample values ({a} vs {b})", cause, fixes,
                   _BCAST_DOCS, _with_location(ctx, found), 0.93, facts=values)
    if ctx.search(r"attn|attention|mask", re.I):
        cause += " An attention mask or positional tensor built for a different sequence length is a common source."
    return hit("shapes.broadcast", "shape_mismatch", f"Sizes {a} and {b} do not broadcast (dimension {dim})", cause, fixes, _BCAST_DOCS,
               _with_location(ctx, found), 0.93, facts=values)


@rule(
    'shapes.view_reshape',
    category='shape_mismatch',
    docs=("view-reshape-invalid", "broadcast-size-mismatch"),
    reads=TORCH_OP,
    priority=46,
    outcomes=('shapes.view_invalid', 'shapes.view_batch', 'shapes.view_per_sample', 'shapes.view_ambiguous', 'shapes.view_stride'),
    examples=(
        Example("corpus/shapes/view_invalid.txt", "shapes.view_invalid"),
        Example("corpus/shapes/view_rows_only_reading_captured.txt", "shapes.view_batch"),
        Example("corpus/shapes/view_keep_lead_per_sample_captured.txt", "shapes.view_per_sample"),
        Example("captured/cpu/reshape-hardcoded-batch-size", "shapes.view_ambiguous"),
        Example("corpus/shapes/reshape_per_sample_resolution_fno.txt", "shapes.view_ambiguous"),
        Example("captured/cpu/attention-view-after-transpose", "shapes.view_stride"),
        Example("realworld/dev/endoscopy-view-stride-progressbar", "shapes.view_stride"),
        Example("corpus/shapes/view_stride.txt", "shapes.view_stride"),
    ),
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
        values = Facts(shapes=(tuple(dims),), numbers={"numel": numel})
        fixes = [remedy("view-reshape-invalid#derive-sizes")]
        readings = _view_readings(dims, numel)
        if readings:
            return _view_readings_hit(ctx, dims, numel, known, readings, found, fixes, values, docs)
        if -1 in dims:
            cause = (f"view/reshape to {dims} needs the element count ({numel}) to be divisible by the product of the given sizes ({known}); "
                     f"{numel} / {known} = {numel / known:.3g} is not a whole number.")
        else:
            cause = f"view/reshape to {dims} needs exactly {known} elements, but the tensor has {numel}."
        cause += " The sizes written in the call do not describe this tensor (a feature/sequence size changed upstream, or the wrong tensor is reshaped)."
        fixes.append(remedy("view-reshape-invalid#print-before-view"))
        return hit("shapes.view_invalid", "shape_mismatch", "Reshape to an incompatible size", cause, fixes, docs, _with_location(ctx, found), 0.93, facts=values)
    if ctx.search(r"view size is not compatible with input tensor's size and stride"):
        cause = ("view() needs memory laid out contiguously for the new shape, but this tensor is a non-contiguous view (after transpose, "
                 "permute, expand or slicing with steps), so its dimensions span separate memory regions.")
        fixes = [
            remedy("view-reshape-invalid#use-reshape"),
            remedy("view-reshape-invalid#contiguous-first"),
        ]
        return hit("shapes.view_stride", "shape_mismatch", "view() on a non-contiguous tensor", cause, fixes, docs,
                   _with_location(ctx, [error_fact(ctx)]), 0.93, facts=Facts(call="view"))
    return None


def _view_readings(dims: list[int], numel: int) -> list[tuple[str, int, int]]:
    """The ways an element count can fit a requested shape when only one part of the request is wrong.

    ``("rows", lead, per_sample)``: the trailing sizes are right and the tensor holds ``numel / prod(rest)`` rows;
    ``("per_sample", lead, per_sample)``: the leading size is right and each of its rows holds ``numel / lead`` elements.
    Only readings that divide evenly (and differ from the request) are listed; the message alone never says which is true.
    """
    if len(dims) < 2 or -1 in dims or dims[0] <= 0:
        return []
    lead, rest = dims[0], math.prod(dims[1:])
    out: list[tuple[str, int, int]] = []
    if rest > 0 and numel % rest == 0 and numel // rest != lead:
        out.append(("rows", numel // rest, rest))
    if numel % lead == 0 and numel // lead != rest:
        out.append(("per_sample", lead, numel // lead))
    return out


_BATCH_NAME = re.compile(r"batch|\bbs\b|\bbsz\b|\bB\b")


def _lead_argument(ctx: Context) -> str:
    """The first argument written in the failing view/reshape call on the user's line ('' when not visible)."""
    src = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
    m = re.search(r"\.(?:view|reshape)\(\s*\(?\s*([^,()]+(?:\([^()]*\))?[^,()]*)", src)
    return m.group(1).strip() if m else ""


def _view_readings_hit(ctx: Context, dims: list[int], numel: int, known: int, readings: list[tuple[str, int, int]],
                       found: list[Fact], fixes: list[Fix], values: Facts, docs: tuple[str, ...]) -> RuleHit:
    """Name every factorisation of the element count that fits; state one only when it is the only one that divides."""
    lead, rest = dims[0], math.prod(dims[1:])
    lead_arg = _lead_argument(ctx)
    rows_first = any(kind == "rows" and n < lead for kind, n, _ in readings) or bool(lead_arg and _BATCH_NAME.search(lead_arg))
    readings = sorted(readings, key=lambda r: (r[0] != "rows") if rows_first else (r[0] == "rows"))
    texts = []
    for kind, n, per in readings:
        if kind == "rows":
            found.append(Fact("shape", f"{numel} = {n} rows × {per} (the trailing sizes as requested)"))
            texts.append(f"the trailing sizes {dims[1:]} are right and the tensor holds {n} rows, not {lead}"
                         + (" (a smaller last batch, or another batch size at evaluation, when the first size is a fixed batch size)" if n < lead else ""))
        else:
            found.append(Fact("shape", f"{numel} = {lead} × {per} (the leading size as requested)"))
            texts.append(f"the leading size {lead} is right and each of its rows holds {per} elements, not {rest} (the per-sample size "
                         "changed upstream: another input resolution, sequence length, feature count or subsampling than the sizes in the call assume)")
    check = remedy("view-reshape-invalid#print-before-call", shape=dims)
    head = f"view/reshape to {dims} needs {known} elements, but the tensor has {numel}."
    if len(readings) > 1:
        cause = (f"{head} Several readings fit the numbers: " + "; or ".join(f"({i + 1}) {t}" for i, t in enumerate(texts))
                 + ". The message alone does not tell which one is true; the tensor's real shape does.")
        fixes = [check, *fixes, _per_sample_fix(lead)]
        if any(kind == "rows" and n < lead for kind, n, _ in readings):
            fixes.append(remedy("view-reshape-invalid#drop-last"))
        return hit("shapes.view_ambiguous", "shape_mismatch", "Reshape sizes do not match the tensor", cause, fixes, docs,
                   _with_location(ctx, found), 0.9, facts=values)
    kind, n, per = readings[0]
    if kind == "rows":
        cause = (f"{head} Only one reading divides evenly: {numel} = {n} rows of {per}, so {texts[0]}.")
        if n < lead:
            fixes.append(remedy("view-reshape-invalid#drop-last"))
        fixes.append(check)
        return hit("shapes.view_batch", "shape_mismatch", f"Reshape asks for {lead} rows, tensor holds {n}", cause, fixes, docs,
                   _with_location(ctx, found), 0.93, facts=values)
    cause = f"{head} Only one reading divides evenly: {numel} = {lead} × {per}, so {texts[0]}."
    fixes = [check, _per_sample_fix(lead)]
    return hit("shapes.view_per_sample", "shape_mismatch", "Reshape assumes another per-sample size", cause, fixes, docs,
               _with_location(ctx, found), 0.9, facts=values)


def _per_sample_fix(lead: int) -> Fix:
    return remedy("view-reshape-invalid#per-sample-from-data", lead=lead)


_LOSS_DOCS = ("loss-input-target-shape", "overfit-one-batch")


@rule(
    'shapes.loss_shapes',
    category='shape_mismatch',
    docs=_LOSS_DOCS,
    reads=(*TORCH_OP, "ValueError"),
    priority=42,
    outcomes=('shapes.loss_batch', 'shapes.loss_batch_target_larger', 'shapes.loss_batch_other', 'shapes.loss_elementwise',
              'shapes.loss_trailing_one', 'shapes.loss_broadcast_warning', 'shapes.multi_target', 'shapes.cosine_target', 'shapes.ce_target_size'),
    examples=(
        Example("corpus/shapes/ce_batch_mismatch.txt", "shapes.loss_batch"),
        Example("corpus/shapes/loss_batch_input_larger_multi_input.txt", "shapes.loss_batch"),
        Example("corpus/shapes/loss_batch_input_larger_cutout.txt", "shapes.loss_batch"),
        Example("corpus/shapes/loss_batch_target_larger_dasc.txt", "shapes.loss_batch_target_larger"),
        Example("captured/cpu/lenet-view-cross-entropy-batch-mismatch", "shapes.loss_batch_other"),
        Example("corpus/shapes/loss_batch_unrelated_textcnn.txt", "shapes.loss_batch_other"),
        Example("corpus/shapes/loss_batch_unrelated_qgen.txt", "shapes.loss_batch_other"),
        Example("corpus/shapes/bce_logits_target_size.txt", "shapes.loss_elementwise"),
        Example("corpus/shapes/bce_target_size.txt", "shapes.loss_trailing_one"),
        Example("corpus/shapes/mse_broadcast_warning_farm.txt", "shapes.loss_broadcast_warning"),
        Example("corpus/shapes/mse_broadcast_warning_deepprotein.txt", "shapes.loss_broadcast_warning"),
        Example("corpus/shapes/ce_multi_target.txt", "shapes.multi_target"),
        Example("corpus/shapes/ce_multi_target_ecg.txt", "shapes.multi_target"),
        Example("corpus/shapes/ce_multi_target_old_thnn.txt", "shapes.multi_target"),
        Example("corpus/shapes/ce_multi_target_old_thcunn.txt", "shapes.multi_target"),
        Example("corpus/shapes/cosine_embedding_multi_target.txt", "shapes.cosine_target"),
        Example("corpus/shapes/ce_sequence_target_size.txt", "shapes.ce_target_size"),
    ),
)
def loss_shapes(ctx: Context) -> RuleHit | None:
    """Loss input/target shape disagreements (cross entropy, BCE, MSE, multi-target)."""
    m = ctx.search(r"Expected input batch_size \((\d+)\) to match target batch_size \((\d+)\)")
    if m:
        return _loss_batch(ctx, int(m.group(1)), int(m.group(2)))
    m = ctx.search(r"Target size \((torch\.Size\(\[[^\]]*\]\))\) must be the same as input size \((torch\.Size\(\[[^\]]*\]\))\)")
    if m:
        return _loss_elementwise(ctx, _shape_of(m.group(2)), _shape_of(m.group(1)))
    m = ctx.search(r"Using a target size \((torch\.Size\(\[[^\]]*\]\))\) that is different to the input size \((torch\.Size\(\[[^\]]*\]\))\)")
    if m:
        return _loss_broadcast_warning(ctx, _shape_of(m.group(2)), _shape_of(m.group(1)))
    if ctx.search(r"0D or 1D target tensor expected, multi-target not supported|multi-target not supported"):
        return _multi_target(ctx)
    m = ctx.search(r"Expected target size \[([\d, ]*)\], got \[([\d, ]*)\]")
    if m:
        want, got = _shape_of(m.group(1)), _shape_of(m.group(2))
        cause = (f"For inputs with extra dimensions, cross_entropy expects logits (N, C, d1, …) and targets (N, d1, …). The target should be "
                 f"{fmt_shape(want)} but is {fmt_shape(got)}: the class dimension of the logits is not dimension 1 (for a sequence model "
                 "producing (N, T, C) the classes are last).")
        fixes = [
            remedy("loss-input-target-shape#class-dim-to-1"),
            remedy("loss-input-target-shape#flatten-both"),
        ]
        return hit("shapes.ce_target_size", "shape_mismatch", "Cross-entropy target size mismatch", cause, fixes, _LOSS_DOCS,
                   _with_location(ctx, [error_fact(ctx)]), 0.9, facts=Facts(shapes=(want, got), argument="target"))
    return None


def _loss_batch(ctx: Context, inp: int, tgt: int) -> RuleHit:
    found = [error_fact(ctx), Fact("shape", f"loss input has {inp} rows, target has {tgt}")]
    values = Facts(numbers={"input_batch": inp, "target_batch": tgt}, argument="target")
    fix_view = remedy("loss-input-target-shape#check-view-flatten")
    fix_seq = remedy("loss-input-target-shape#flatten-preds-targets")
    if inp > tgt and inp % tgt == 0:
        k = inp // tgt
        cause = (f"The loss received {inp} predictions but {tgt} targets: {inp} = {tgt} × {k}. Each sample produced {k} rows of predictions — "
                 "a view(-1, N) in the model folded part of every sample into the batch, several inputs/crops per sample were stacked along the batch, "
                 "or per-position outputs (B, T, C) were flattened while the targets were not.")
        return hit("shapes.loss_batch", "shape_mismatch", f"Loss input batch {inp} vs target batch {tgt}", cause, [fix_view, fix_seq],
                   _LOSS_DOCS, _with_location(ctx, found), 0.93, facts=values)
    if tgt > inp and tgt % inp == 0:
        k = tgt // inp
        cause = (f"The loss received {inp} predictions but {tgt} targets: {tgt} = {inp} × {k}. The targets hold {k} entries per prediction — "
                 "per-position or multi-column labels were flattened while the predictions kept one row per sample, or the model folded "
                 f"{k} samples into one row (a view with too many features per row).")
        fixes = [fix_view, remedy("loss-input-target-shape#print-before-loss")]
        if inp == 1:
            # One prediction: a single sample's target that lost its batch dimension reads its first spatial size as the batch.
            cause += (f" With a single prediction, the most common reason is a target without its batch dimension: a ({tgt}, …) mask or "
                      f"sequence whose first size {tgt} is read as the batch.")
            fixes.insert(0, remedy("loss-input-target-shape#target-batch-dim"))
        return hit("shapes.loss_batch_target_larger", "shape_mismatch", f"Loss input batch {inp} vs target batch {tgt}", cause, fixes,
                   _LOSS_DOCS, _with_location(ctx, found), 0.92, facts=values)
    cause = (f"The loss received {inp} predictions but {tgt} targets, and neither is a multiple of the other: the model output and the "
             "labels went through different reshapes (a view(-1, N) whose N is not the real per-sample size), were truncated/padded to different "
             "lengths, or come from different batches.")
    fixes = [fix_view, remedy("loss-input-target-shape#print-along-forward")]
    return hit("shapes.loss_batch_other", "shape_mismatch", f"Loss input batch {inp} vs target batch {tgt}", cause, fixes,
               _LOSS_DOCS, _with_location(ctx, found), 0.9, facts=values)


def _loss_elementwise(ctx: Context, inp: tuple[int, ...], tgt: tuple[int, ...]) -> RuleHit:
    found = [error_fact(ctx), Fact("shape", f"loss input {fmt_shape(inp)}, target {fmt_shape(tgt)}")]
    values = Facts(shapes=(inp, tgt), argument="target")
    if inp and tgt and ((len(inp) == len(tgt) + 1 and inp[-1] == 1 and inp[:-1] == tgt) or (len(tgt) == len(inp) + 1 and tgt[-1] == 1 and tgt[:-1] == inp)):
        extra_on_input = len(inp) > len(tgt)
        who = "model output" if extra_on_input else "target"
        cause = (f"The loss compares an input of shape {fmt_shape(inp)} with a target of shape {fmt_shape(tgt)}: the same values, but the "
                 f"{who} carries a trailing dimension of size 1 (one logit per sample kept as a column).")
        fixes = [remedy("loss-input-target-shape#squeeze-output" if extra_on_input else "loss-input-target-shape#squeeze-target")]
        return hit("shapes.loss_trailing_one", "shape_mismatch", "Loss input and target differ by a trailing 1", cause, fixes,
                   _LOSS_DOCS, _with_location(ctx, found), 0.93, facts=values)
    cause = (f"The loss compares an input of shape {fmt_shape(inp)} with a target of shape {fmt_shape(tgt)}; element-wise losses "
             "(BCE, BCEWithLogits, MSE) need identical shapes.")
    if inp and tgt and len(inp) == len(tgt) and inp[0] == tgt[0] and inp[1:] != tgt[1:]:
        cause += f" The batch sizes agree, so the model's output width ({inp[1:]}) does not match the label width ({tgt[1:]}): the head has a different number of outputs than the labels have columns."
    fixes = [remedy("loss-input-target-shape#head-matches-target")]
    return hit("shapes.loss_elementwise", "shape_mismatch", "Loss input and target shapes differ", cause, fixes, _LOSS_DOCS,
               _with_location(ctx, found), 0.92, facts=values)


def _loss_broadcast_warning(ctx: Context, inp: tuple[int, ...], tgt: tuple[int, ...]) -> RuleHit:
    found = [error_fact(ctx), Fact("shape", f"loss input {fmt_shape(inp)}, target {fmt_shape(tgt)}")]
    cause = (f"This is a warning, not a crash, and it is a silent bug: the regression loss (MSE/L1) got an input {fmt_shape(inp)} and a "
             f"target {fmt_shape(tgt)}, broadcasts them to a common larger shape and averages over pairs that do not belong together, so the "
             "loss value and its gradients are wrong even though training runs.")
    if inp and tgt and len(tgt) == len(inp) + 1 and tgt[-1] == 1:
        ref = "loss-input-target-shape#mse-squeeze-target"
    elif inp and tgt and len(inp) == len(tgt) + 1 and inp[-1] == 1:
        ref = "loss-input-target-shape#mse-squeeze-output"
    else:
        ref = "loss-input-target-shape#assert-same-shape"
    fixes = [remedy(ref)]
    return hit("shapes.loss_broadcast_warning", "shape_mismatch", "Loss broadcasts input and target of different shapes", cause, fixes,
               _LOSS_DOCS, _with_location(ctx, found), 0.9, facts=Facts(shapes=(inp, tgt), argument="target"))


def _multi_target(ctx: Context) -> RuleHit:
    if _frames_mention(ctx, r"cosine_embedding_loss|CosineEmbeddingLoss"):
        cause = ("cosine_embedding_loss takes a target with one entry per pair (+1 similar, -1 dissimilar), shape (N,) or a scalar, but it "
                 "received a target with more dimensions — typically a per-element or per-feature tensor passed where one label per pair is meant.")
        fixes = [remedy("loss-input-target-shape#cosine-one-label")]
        return hit("shapes.cosine_target", "shape_mismatch", "cosine_embedding_loss target has too many dimensions", cause, fixes, _LOSS_DOCS,
                   _with_location(ctx, [error_fact(ctx)]), 0.9, facts=Facts(argument="target", call="cosine_embedding_loss"))
    cause = ("cross_entropy/nll_loss with class-index targets expects one integer class per sample (shape (N,)), but the target has a second "
             "dimension. Either it keeps a trailing column of size 1, it is one-hot encoded (N, C), or it holds several labels per sample "
             "(multi-label data, which this loss does not model).")
    fixes = [
        remedy("cross-entropy-target-format#squeeze-target-column"),
        remedy("cross-entropy-target-format#one-hot-to-index"),
        remedy("loss-input-target-shape#multi-label-bce"),
    ]
    return hit("shapes.multi_target", "shape_mismatch", "Class-index loss got a multi-column target", cause, fixes,
               ("cross-entropy-target-format", "loss-input-target-shape"), _with_location(ctx, [error_fact(ctx)]), 0.92, facts=Facts(argument="target"))


_SPATIAL = lazy_re(r"only batches of spatial targets supported \((?:non-empty )?3D tensors\)(?: but got targets of (?:dimension: (\d+)|size: : \[([\d, ]*)\]))?")
_SEG_DOCS = ("segmentation-target-shape", "loss-input-target-shape")


@rule(
    'shapes.spatial_target',
    category='shape_mismatch',
    docs=_SEG_DOCS,
    reads=TORCH_OP,
    priority=43,
    outcomes=('shapes.seg_target_singleton', 'shapes.seg_target_multichannel', 'shapes.seg_target_extra_dim', 'shapes.seg_target_low_rank'),
    examples=(
        Example("corpus/shapes/seg_target_size_singleton_unet.txt", "shapes.seg_target_singleton"),
        Example("corpus/shapes/seg_target_size_singleton_ssl.txt", "shapes.seg_target_singleton"),
        Example("corpus/shapes/seg_target_size_singleton_terratorch.txt", "shapes.seg_target_singleton"),
        Example("corpus/shapes/seg_target_old_rgb_mask_unet.txt", "shapes.seg_target_multichannel"),
        Example("corpus/shapes/seg_target_old_4ch_deeplab.txt", "shapes.seg_target_multichannel"),
        Example("corpus/shapes/seg_target_channels_last_sam.txt", "shapes.seg_target_multichannel"),
        Example("corpus/shapes/seg_target_dim4_kdlib.txt", "shapes.seg_target_extra_dim"),
        Example("corpus/shapes/seg_target_channel_dim.txt", "shapes.seg_target_extra_dim"),
        Example("corpus/shapes/seg_target_old_flat_erfpspnet.txt", "shapes.seg_target_low_rank"),
        Example("corpus/shapes/seg_target_dim1_classification.txt", "shapes.seg_target_low_rank"),
    ),
)
def spatial_target(ctx: Context) -> RuleHit | None:
    """Per-pixel cross entropy (logits N×C×H×W) whose target is not an (N, H, W) map of class indices."""
    m = ctx.search(_SPATIAL.pattern)
    if not m:
        return None
    size = _shape_of(m.group(2)) if m.group(2) else ()
    ndim = len(size) if size else (int(m.group(1)) if m.group(1) else 0)
    values = Facts(shapes=(size,) if size else (), numbers={"target_ndim": ndim} if ndim else {}, argument="target")
    found = [error_fact(ctx)] + ([Fact("shape", f"target {fmt_shape(size)}; per-pixel cross entropy needs (N, H, W)")] if size else [])
    if ndim and ndim < 3:
        shown = fmt_shape(size) if size else f"{ndim}-D"
        if ndim == 1:
            cause = (f"The logits reaching the loss are a spatial map (N, C, H, W) — which makes cross entropy expect per-pixel targets — but the "
                     f"target is {shown}: one class per sample. For image classification the model output still has spatial axes: "
                     "it needs global pooling/flatten before the classifier so the logits become (N, C).")
            fixes = [remedy("segmentation-target-shape#pool-before-classifier")]
        else:
            cause = (f"The logits are a spatial map (N, C, H, W), so the target must be an (N, H, W) map of class indices, but it is {shown}: "
                     "the masks were flattened (or only part of the spatial axes survived).")
            fixes = [remedy("segmentation-target-shape#keep-masks-nhw")]
        return hit("shapes.seg_target_low_rank", "shape_mismatch", "Spatial logits, but targets have too few dimensions", cause, fixes,
                   _SEG_DOCS, _with_location(ctx, found), 0.9, facts=values)
    if len(size) == 4:
        if size[1] == 1 or size[-1] == 1:
            axis = 1 if size[1] == 1 else -1
            cause = (f"Per-pixel cross entropy needs a target of shape (N, H, W) holding class indices, but the masks are {fmt_shape(size)}: "
                     f"they keep a channel axis of size 1 (dimension {axis}), as masks loaded as single-channel images usually do.")
            fixes = [remedy("segmentation-target-shape#squeeze-channel-axis", dim=axis)]
            return hit("shapes.seg_target_singleton", "shape_mismatch", "Segmentation target has a channel axis of size 1", cause, fixes,
                       _SEG_DOCS, _with_location(ctx, found), 0.93, facts=values)
        axis = -1 if size[-1] <= size[1] else 1
        k = size[axis]
        colour = k in (3, 4)
        cause = (f"Per-pixel cross entropy needs a target of shape (N, H, W) holding one class index per pixel, but the masks are "
                 f"{fmt_shape(size)} with {k} values per pixel along dimension {axis}: "
                 + ("an RGB/RGBA colour-coded mask (each class painted as a colour), or a one-hot encoding of the classes." if colour
                    else f"a one-hot (or multi-channel) encoding with {k} channels."))
        fixes = [remedy("segmentation-target-shape#one-hot-argmax", dim=axis)]
        if colour:
            fixes.insert(0, remedy("segmentation-target-shape#colour-to-class"))
        return hit("shapes.seg_target_multichannel", "shape_mismatch", f"Segmentation target has {k} channels per pixel", cause, fixes,
                   _SEG_DOCS, _with_location(ctx, found), 0.92, facts=values)
    shown = f"{ndim}-D targets" if ndim else "targets of another shape"
    cause = (f"The logits are a spatial map (N, C, H, W), so cross entropy needs an (N, H, W) target of class indices, but it got {shown}: "
             "the masks carry an extra axis — a channel axis of size 1 from loading them as images, or a one-hot/colour axis.")
    fixes = [
        remedy("segmentation-target-shape#print-mask-remove-axis"),
    ]
    return hit("shapes.seg_target_extra_dim", "shape_mismatch", "Segmentation target has an extra dimension", cause, fixes,
               _SEG_DOCS, _with_location(ctx, found), 0.9, facts=values)


@rule(
    'shapes.norm_layers',
    category='shape_mismatch',
    docs=("batchnorm-batch-size-one",),
    reads=(*TORCH_OP, "ValueError"),
    priority=44,
    outcomes=('shapes.batchnorm_one', 'shapes.layernorm'),
    examples=(
        Example("captured/cpu/batchnorm-last-batch-size-one", "shapes.batchnorm_one"),
        Example("corpus/shapes/batchnorm_one_sample.txt", "shapes.batchnorm_one"),
        Example("corpus/shapes/layernorm_shape.txt", "shapes.layernorm"),
    ),
)
def norm_layers(ctx: Context) -> RuleHit | None:
    """BatchNorm with one value per channel, LayerNorm built for another normalized_shape."""
    m = ctx.search(r"Expected more than 1 value per channel when training, got input size (torch\.Size\(\[[^\]]*\]\)|\[[^\]]*\])")
    if m:
        shape = _shape_of(m.group(1))
        cause = (f"BatchNorm in training mode computes statistics over the batch, and got input {fmt_shape(shape)} — a single value per channel. "
                 "This usually happens on the last, incomplete batch (dataset size not divisible by the batch size) or when running one sample through a model still in train mode.")
        fixes = [
            remedy("batchnorm-batch-size-one#drop-last"),
            remedy("batchnorm-batch-size-one#eval-single-sample"),
            remedy("batchnorm-batch-size-one#groupnorm-tiny-batches"),
        ]
        return hit("shapes.batchnorm_one", "shape_mismatch", "BatchNorm got a batch of one", cause, fixes, ("batchnorm-batch-size-one",),
                   _with_location(ctx, [error_fact(ctx)]), 0.95, facts=Facts(shapes=(shape,), layer_kind="BatchNorm"))
    m = ctx.search(r"Given normalized_shape=\[([\d, ]*)\], expected input with shape \[\*, ([\d, ]*)\], but got input of size\s?\[([\d, ]*)\]")
    if m:
        norm, inp = _shape_of(m.group(1)), _shape_of(m.group(3))
        cause = (f"LayerNorm was built for trailing shape {fmt_shape(norm)} but the input is {fmt_shape(inp)}: its last "
                 f"{len(norm)} dimension(s) differ, so the feature size changed between the layer's construction and this input.")
        fixes = [remedy("broadcast-size-mismatch#layernorm-real-size")]
        return hit("shapes.layernorm", "shape_mismatch", "LayerNorm normalized_shape mismatch", cause, fixes, ("broadcast-size-mismatch",),
                   _with_location(ctx, [error_fact(ctx)]), 0.9, facts=Facts(shapes=(norm, inp), layer_kind="LayerNorm"))
    return None


_HIDDEN = lazy_re(r"Expected hidden(?:\[0\])? size \(([\d, ]+)\), got [\[(]([\d, ]+)[\])]")
_RNN_DOCS = ("rnn-shape-mismatch",)


@rule(
    'shapes.rnn',
    category='shape_mismatch',
    docs=_RNN_DOCS,
    reads=(*TORCH_OP, "ValueError"),
    priority=45,
    outcomes=('shapes.rnn_input', 'shapes.rnn_input_rank', 'shapes.rnn_hidden', 'shapes.rnn_hidden_layers', 'shapes.rnn_hidden_size',
              'shapes.rnn_hidden_rank', 'shapes.rnn_hx_contiguous'),
    examples=(
        Example("corpus/shapes/lstm_input_size.txt", "shapes.rnn_input"),
        Example("corpus/shapes/rnn_input_size_dialoguegcn.txt", "shapes.rnn_input"),
        Example("corpus/shapes/rnn_input_size_w2ner.txt", "shapes.rnn_input"),
        Example("corpus/shapes/rnn_input_size_sqlnet.txt", "shapes.rnn_input"),
        Example("corpus/shapes/lstm_input_rank.txt", "shapes.rnn_input_rank"),
        Example("corpus/shapes/lstm_hidden_batch.txt", "shapes.rnn_hidden"),
        Example("corpus/shapes/rnn_hidden_batch_handbook.txt", "shapes.rnn_hidden"),
        Example("corpus/shapes/rnn_hidden_batch_old_parens.txt", "shapes.rnn_hidden"),
        Example("corpus/shapes/rnn_hidden_batch_bptt_awdlstm.txt", "shapes.rnn_hidden"),
        Example("corpus/shapes/gru_hidden_layers.txt", "shapes.rnn_hidden_layers"),
        Example("corpus/shapes/rnn_hidden_layers_seq2seq.txt", "shapes.rnn_hidden_layers"),
        Example("corpus/shapes/rnn_hidden_layers_old_parens.txt", "shapes.rnn_hidden_layers"),
        Example("corpus/shapes/rnn_hidden_size_repair.txt", "shapes.rnn_hidden_size"),
        Example("corpus/shapes/rnn_hidden_rank_old.txt", "shapes.rnn_hidden_rank"),
        Example("corpus/shapes/rnn_hx_not_contiguous_keyphrase.txt", "shapes.rnn_hx_contiguous"),
        Example("corpus/shapes/rnn_hx_not_contiguous_darts.txt", "shapes.rnn_hx_contiguous"),
    ),
)
def rnn(ctx: Context) -> RuleHit | None:
    """RNN/LSTM/GRU input size, input rank, initial hidden state shape and contiguity."""
    name, _ = ctx.layer
    cls = next((c for c in ("GRU", "LSTM", "RNN") if _frames_mention(ctx, rf"\b{c}\b|nn\.{c}\(")), "LSTM")
    m = ctx.search(r"input\.size\(-1\) must be equal to input_size\. Expected (\d+), got (\d+)")
    if m:
        want, got = int(m.group(1)), int(m.group(2))
        cause = (f"The recurrent layer was built with input_size={want}, but the last dimension of its input is {got}. The last axis is always "
                 f"the feature axis (whatever batch_first says): either the features feeding it now have {got} values (a different embedding or "
                 "encoder width than the layer was configured for), or a transpose/permute put another axis last.")
        fixes = [
            remedy("rnn-shape-mismatch#rnn-input-size", got=got, layer=name, layer_kind=cls),
            remedy("rnn-shape-mismatch#project-features", got=got, expected=want),
        ]
        return hit("shapes.rnn_input", "shape_mismatch", f"RNN input_size is {want}, input has {got} features", cause, fixes, _RNN_DOCS,
                   _with_location(ctx, [error_fact(ctx)]), 0.92, facts=Facts(numbers={"input_size": want, "got_features": got}, layer=name, layer_kind="RNN/LSTM/GRU"))
    m = ctx.search(r"(RNN|LSTM|GRU): Expected input to be 2D or 3D, got (\d)D")
    if m:
        got = int(m.group(2))
        cause = (f"{m.group(1)} accepts (L, H_in) for one sequence or (L, N, H_in) / (N, L, H_in) for a batch, but received a {got}-D tensor: "
                 "an extra axis (channels of an image/feature map, or several sequences per sample) must be merged or removed first.")
        fixes = [remedy("rnn-shape-mismatch#reshape-batch-time-features")]
        return hit("shapes.rnn_input_rank", "shape_mismatch", f"{m.group(1)} got a {got}-D input", cause, fixes, _RNN_DOCS,
                   _with_location(ctx, [error_fact(ctx)]), 0.9, facts=Facts(numbers={"got_ndim": got}, layer_kind=m.group(1)))
    m = ctx.search(_HIDDEN.pattern)
    if m:
        return _rnn_hidden(ctx, _shape_of(m.group(1)), _shape_of(m.group(2)))
    if ctx.search(r"rnn: hx is not contiguous|rnn: cx is not contiguous"):
        cause = ("The initial hidden (or cell) state passed to the recurrent layer is a non-contiguous view: it was sliced along the batch axis "
                 "(h[:, :batch]), selected with index_select, or transposed/permuted from another layer's state. The cuDNN RNN path needs a contiguous state tensor.")
        fixes = [remedy("rnn-shape-mismatch#hx-contiguous")]
        return hit("shapes.rnn_hx_contiguous", "shape_mismatch", "RNN hidden state is not contiguous", cause, fixes, _RNN_DOCS,
                   _with_location(ctx, [error_fact(ctx)]), 0.92, facts=Facts(layer=name, layer_kind="RNN/LSTM/GRU", argument="hx"))
    return None


def _rnn_hidden(ctx: Context, want: tuple[int, ...], got: tuple[int, ...]) -> RuleHit:
    name, _ = ctx.layer
    found = [error_fact(ctx), Fact("shape", f"hidden state {fmt_shape(got)}; the layer expects {fmt_shape(want)} = (num_layers × directions, batch, hidden_size)")]
    values = Facts(shapes=(want, got), layer=name, layer_kind="RNN/LSTM/GRU", argument="hx")
    if len(got) != len(want):
        cause = (f"The initial hidden state has {len(got)} dimension(s) {fmt_shape(got)} but must be {fmt_shape(want)}: "
                 "(num_layers × num_directions, batch, hidden_size) — the leading layer axis is missing even for a single-layer RNN.")
        fixes = [remedy("rnn-shape-mismatch#h0-layer-axis")]
        return hit("shapes.rnn_hidden_rank", "shape_mismatch", "RNN hidden state has the wrong number of dimensions", cause, fixes, _RNN_DOCS,
                   _with_location(ctx, found), 0.9, facts=values)
    if want[1] != got[1]:
        cls = "LSTM" if ctx.search(r"hidden\[0\]") else "GRU"  # hidden[0] is the LSTM wording (a (h, c) tuple)
        cause = (f"The recurrent layer reads a batch size of {want[1]} from its input, but the initial hidden state was made for {got[1]}. "
                 "Either the state was created for another batch size (a fixed batch size meeting the smaller last batch, an evaluation loader "
                 "with a different batch size, or a state carried over from the previous batch), or the input's axes are not in the order "
                 f"the layer assumes: without batch_first=True the batch is dimension 1 of the input, so if {want[1]} is your sequence length "
                 "the layer and the data disagree on batch_first.")
        fixes = [
            remedy("rnn-shape-mismatch#h0-from-input"),
            remedy("rnn-shape-mismatch#batch-first-agree", layer=name, layer_kind=cls),
        ]
        return hit("shapes.rnn_hidden", "shape_mismatch", f"RNN hidden state is for batch {got[1]}, input batch is {want[1]}", cause, fixes, _RNN_DOCS,
                   _with_location(ctx, found), 0.92, facts=values)
    if want[0] != got[0]:
        cause = (f"The first axis of the hidden state must be num_layers × num_directions = {want[0]}, but it is {got[0]}: the state was "
                 "built for a different number of layers or directions than this recurrent layer has.")
        if max(want[0], got[0]) == 2 * min(want[0], got[0]):
            cause += " One is twice the other: a bidirectional layer on one side and a unidirectional one on the other, or num_layers 2 vs 1."
        fixes = [remedy("rnn-shape-mismatch#h0-from-layer", layer=name)]
        return hit("shapes.rnn_hidden_layers", "shape_mismatch", f"RNN hidden state has {got[0]} layers, layer expects {want[0]}", cause, fixes, _RNN_DOCS,
                   _with_location(ctx, found), 0.9, facts=values)
    cause = (f"The last axis of the hidden state must equal the layer's hidden_size = {want[2]}, but it is {got[2]}: the state comes from a "
             "layer with a different width (for example an encoder's state handed to a decoder built with another hidden_size).")
    if got[2] == 2 * want[2]:
        cause += " It is exactly twice as wide: forward and backward states of a bidirectional encoder concatenated and passed to a unidirectional decoder."
    fixes = [
        remedy("rnn-shape-mismatch#build-receiving-layer", got=got[2]),
        remedy("rnn-shape-mismatch#project-state", got=got[2], expected=want[2]),
    ]
    return hit("shapes.rnn_hidden_size", "shape_mismatch", f"RNN hidden state width {got[2]}, layer expects {want[2]}", cause, fixes, _RNN_DOCS,
               _with_location(ctx, found), 0.9, facts=values)


def _generic_shape(ctx: Context, outcome: str, what: str, docs: tuple[str, ...]) -> RuleHit:
    cause = f"A {what} operation received tensors whose shapes do not fit together. The error names the sizes that disagree."
    fixes = [remedy(f"{docs[0]}#print-operands-failing-line")]
    return hit(outcome, "shape_mismatch", "Tensor shapes do not fit together", cause, fixes, docs, _with_location(ctx, [error_fact(ctx)]), 0.8)


# SDPA's per-backend warning before "No available kernel": the fused kernels take 4-D query/key/value only.
_SDPA_RANK = lazy_re(r"(?:All|Both) fused kernels requires? query, key and value to be 4 dimensional, but got Query dim: (\d+), Key dim: (\d+), Value dim: (\d+)")


@rule(
    'shapes.attention_rank',
    category='shape_mismatch',
    docs=("sdpa-no-available-kernel",),
    reads=TORCH_OP,
    priority=69,
    examples=(Example("corpus/shapes/sdpa_fused_kernels_3d_inputs_captured.txt", "shapes.attention_rank"),),
)
def attention_rank(ctx: Context) -> RuleHit | None:
    """scaled_dot_product_attention restricted to fused kernels, given query/key/value that are not 4-D."""
    m = _SDPA_RANK.search(ctx.failure.text or "")
    if not m or not ctx.search(r"No available kernel"):
        return None
    dims = tuple(int(g) for g in m.groups())
    cause = (f"scaled_dot_product_attention got query, key and value with {dims[0]}, {dims[1]} and {dims[2]} dimensions, and its fused kernels "
             "(flash, memory-efficient, cuDNN) accept only 4-D (batch, heads, seq, head_dim) inputs. With the math fallback switched off "
             "(sdpa_kernel / sdp_kernel restricted to fused backends) no kernel is left to run.")
    fixes = [remedy("sdpa-no-available-kernel#four-d-qkv"), remedy("sdpa-no-available-kernel#allow-fallback")]
    return hit("shapes.attention_rank", "shape_mismatch", "Attention inputs are not 4-D", cause, fixes, ("sdpa-no-available-kernel",),
               _with_location(ctx, [error_fact(ctx), Fact("shape", f"query/key/value dims {dims}, fused kernels need 4")]), 0.93,
               facts=Facts(numbers={"got_ndim": dims[0], "expected_ndim": 4}, call="scaled_dot_product_attention"))


@rule(
    'shapes.generic_shape',
    category='shape_mismatch',
    docs=("broadcast-size-mismatch", "matmul-shape-mismatch", "overfit-one-batch"),
    reads=(*TORCH_OP, "ValueError"),
    priority=FALLBACK,
    outcomes=('shapes.tensor',),
    examples=(Example("corpus/shapes/permute_dims.txt", "shapes.tensor"),),
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
