"""Index errors on tensors: embeddings, out-of-bounds indices, dimensions that do not exist, loss targets out of range."""

from __future__ import annotations

import re

from assistant.rules.dispatch import TORCH_OP
from assistant.rules.registry import Example, rule
from assistant.rules.base import basic_facts as _found, Context, hit, remedy
from assistant.types import Fact, Facts, Fix, RuleHit

_DOCS = ("index-out-of-range", "device-side-assert")


def _mentions(ctx: Context, pattern: str, flags: int = 0) -> bool:
    """Whether the messages or any frame (file, function, source line) match ``pattern``."""
    rx = re.compile(pattern, flags)
    return bool(ctx.search(pattern, flags)) or any(rx.search(f"{f.file} {f.function or ''} {f.source or ''}") for f in ctx.failure.frames)


@rule(
    'indexing.tensor_index',
    category='index_error',
    docs=_DOCS,
    reads=(*TORCH_OP, "IndexError"),
    priority=54,
    outcomes=('index.embedding', 'index.out_of_range_self', 'index.out_of_bounds', 'index.empty_tensor', 'index.small_batch', 'index.off_by_one', 'index.negative', 'index.dim_out_of_range',
              'index.target_oob', 'index.target_void_label', 'index.target_negative', 'index.too_many', 'index.zero_dim', 'index.gather_shape', 'index.select_vector',
              'index.float_indices'),
    examples=(
        Example("realworld/dev/keqa-embedding-index-out-of-range", "index.embedding"),
        Example("captured/cpu/embedding-unk-token-out-of-vocab", "index.embedding"),
        Example("corpus/indexing/embedding_out_of_range.txt", "index.embedding"),
        Example("corpus/indexing/index_select_out_of_range.txt", "index.out_of_range_self"),
        Example("corpus/indexing/index_out_of_bounds_far.txt", "index.out_of_bounds"),
        Example("realworld/dev/convntm-batch-size-1-empty-edges", "index.empty_tensor"),
        Example("corpus/indexing/empty_dim_after_epochs_gvar.txt", "index.empty_tensor"),
        Example("corpus/indexing/empty_dim_landmark_trainer.txt", "index.empty_tensor"),
        Example("realworld/dev/deformablelka-last-batch-size1-index", "index.small_batch"),
        Example("corpus/indexing/small_batch_transunet_image_batch.txt", "index.small_batch"),
        Example("captured/cpu/one-hot-labels-one-based", "index.off_by_one"),
        Example("captured/cuda/index-error-task-head-out-of-range", "index.off_by_one"),
        Example("corpus/indexing/index_out_of_bounds.txt", "index.off_by_one"),
        Example("corpus/indexing/index_negative_out_of_bounds.txt", "index.negative"),
        Example("realworld/dev/flowgrpo-dim-out-of-range-rank-prefix", "index.dim_out_of_range"),
        Example("captured/cpu/gather-dim-out-of-range", "index.dim_out_of_range"),
        Example("corpus/indexing/dim_out_of_range.txt", "index.dim_out_of_range"),
        Example("corpus/indexing/ce_target_out_of_bounds.txt", "index.target_oob"),
        Example("realworld/dev/deeplabv3plus-target-225-ignore-index", "index.target_void_label"),
        Example("corpus/indexing/ce_target_255_unet_dwt.txt", "index.target_void_label"),
        Example("corpus/indexing/ce_target_255_binary_mask_unet.txt", "index.target_void_label"),
        Example("corpus/indexing/ce_target_negative.txt", "index.target_negative"),
        Example("corpus/indexing/too_many_indices.txt", "index.too_many"),
        Example("corpus/indexing/too_many_indices_1d_feature_window_captured.txt", "index.too_many"),
        Example("corpus/indexing/too_many_indices_1d_feature_mvts.txt", "index.too_many"),
        Example("corpus/indexing/zero_dim_index.txt", "index.zero_dim"),
        Example("corpus/indexing/gather_index_rank.txt", "index.gather_shape"),
        Example("corpus/indexing/gather_index_too_large.txt", "index.gather_shape"),
        Example("corpus/indexing/index_select_matrix_index.txt", "index.select_vector"),
        Example("corpus/indexing/float_index_tensor.txt", "index.float_indices"),
    ),
)
def tensor_index(ctx: Context) -> RuleHit | None:
    """Out-of-range indices and dimensions in tensor operations (CPU messages are precise)."""
    if ctx.search(r"index out of range in self"):
        return _index_self(ctx)
    m = ctx.search(r"index (-?\d+) is out of bounds for dimension (\d+) with size (\d+)")
    if m:
        return _out_of_bounds(ctx, *(int(g) for g in m.groups()))
    m = ctx.search(r"Dimension out of range \(expected to be in range of \[(-?\d+), (-?\d+)\], but got (-?\d+)\)")
    if m:
        return _dim_out_of_range(ctx, *(int(g) for g in m.groups()))
    m = ctx.search(r"Target (-?\d+) is out of bounds")
    if m:
        return _target_oob(ctx, int(m.group(1)))
    m = ctx.search(r"too many indices for tensor of dimension (\d+)")
    if m:
        ndim = int(m.group(1))
        cause = (f"The code indexes with more subscripts than the tensor has dimensions ({ndim}): the tensor has fewer dimensions than the "
                 "indexing assumes (for example labels of shape (N,) indexed as y[:, 0], or a tensor squeezed earlier).")
        # Often only some samples lose a dimension: data with a single feature/channel/item comes out with that axis squeezed away.
        cause += (" A common way to get there: the code was written for samples with one more dimension, and some samples (or all) arrive "
                  "with one fewer, because a size-1 dimension (a single feature, channel or item) was dropped when the data was built, "
                  "squeezed, or selected with an integer index.")
        fixes = [remedy("index-out-of-range#print-shape-ndim"),
                 remedy("index-out-of-range#restore-missing-dim", ndim=ndim)]
        return hit("index.too_many", "index_error", "Too many indices", cause, fixes, _DOCS, _found(ctx), 0.9, facts=Facts(numbers={"ndim": ndim}))
    if ctx.search(r"invalid index of a 0-dim tensor"):
        cause = "A 0-dimensional (scalar) tensor was indexed like a sequence — typically `loss.data[0]` or `loss[0]` from code written for very old PyTorch releases."
        fixes = [remedy("index-out-of-range#item-for-scalar")]
        return hit("index.zero_dim", "index_error", "Indexing a 0-dim tensor", cause, fixes, _DOCS, _found(ctx), 0.92)
    if ctx.search(r"Index tensor must have the same number of dimensions as input tensor|expected index \[[\d, ]*\] to be (?:smaller than|no larger than) self"):
        cause = ("gather/scatter got an index tensor whose shape does not fit the input: the index needs as many dimensions as the input, and "
                 "outside the gathered dimension no size larger than the input's.")
        fixes = [remedy("index-out-of-range#gather-index-shape")]
        return hit("index.gather_shape", "index_error", "Index tensor has the wrong shape for gather/scatter", cause, fixes, _DOCS, _found(ctx), 0.9, facts=Facts(call="gather"))
    if ctx.search(r"index_select\(\): Index is supposed to be a vector"):
        cause = "index_select takes a 1-D index tensor (a list of positions along one dimension), but the index has more dimensions."
        fixes = [remedy("index-out-of-range#flatten-select-index")]
        return hit("index.select_vector", "index_error", "index_select needs a 1-D index", cause, fixes, _DOCS, _found(ctx), 0.9, facts=Facts(call="index_select"))
    if ctx.search(r"tensors used as indices must be long, int, byte or bool tensors"):
        cause = ("A tensor used as an index holds floating-point values: indices must be integer (positions) or bool (a mask). Index "
                 "tensors become float when computed with float arithmetic (division, rounding, a float constructor).")
        fixes = [remedy("index-out-of-range#long-index")]
        return hit("index.float_indices", "index_error", "Index tensor is floating point", cause, fixes, _DOCS, _found(ctx), 0.9, facts=Facts(argument="index"))
    return None


def _index_self(ctx: Context) -> RuleHit:
    name, kind = ctx.layer
    # The report points at the sequence length (a tokenizer max_length, "length of the sequence"): position ids past the position table.
    longer = ctx.search(r"\bmax_length\s*=|\b(?:sequence|input|text) length\b|length of the (?:sequence|input|text)|max_position_embeddings") is not None
    # The deepest line outside torch.nn that calls an embedding looks a position table up (`self.pos_embedding(pos)`): positions past its size.
    # A called name containing "embed": whole words only (`\b\w+`), so a long run of word characters is read once.
    lookups = [f.source for f in ctx.failure.frames if f.source and any("embed" in m.group(0).lower() for m in re.finditer(r"\b\w+\s*\(", f.source))
               and not re.search(r"[\\/]torch[\\/]nn[\\/]", f.file or "")]
    if lookups and re.search(r"\bpos(?:ition)?(?:al)?_?(?:embedding|embed|emb|enc)\w*\s*\(", lookups[-1], re.I):
        longer = True
    embedding = kind == "Embedding" or _mentions(ctx, r"embedding|sparse\.py", re.I)
    if embedding:
        what = f"`{name}`" if name else "the embedding"
        cause = (f"An input id is outside {what}'s table: nn.Embedding(num_embeddings, dim) accepts ids 0 … num_embeddings-1. The usual reasons: "
                 "the vocabulary/tokenizer has more entries than num_embeddings (added or special tokens, a different vocabulary), an unknown-token or "
                 "padding id set to len(vocab), or negative ids (a padding/ignore value fed as input).")
        fixes = [remedy("index-out-of-range#compare-ids-num-embeddings", layer=name)]
        if longer:
            fixes.insert(0, remedy("index-out-of-range#truncate-to-position-limit"))
        if _mentions(ctx, r"transformers|tokenizer", re.I):
            fixes.append(remedy("index-out-of-range#resize-token-embeddings"))
        else:
            fixes.append(remedy("index-out-of-range#embedding-from-vocab"))
        return hit("index.embedding", "index_error", "Embedding index out of range", cause, fixes, _DOCS, _found(ctx), 0.93,
                   facts=Facts(layer=name, layer_kind="Embedding", argument="input"))
    cause = "index_select (or an indexing operation built on it) received an index >= the size of the indexed dimension, or a negative one."
    if longer:
        cause += (" The text sets or asks about the sequence length: with a transformer, position ids beyond the model's position table "
                  "(max_position_embeddings) fail this way even when every token id is valid.")
    fixes = [remedy("index-out-of-range#assert-index-range")]
    # The bare message with no traceback: nothing shows the call, and nn.Embedding lookups are its most common source, so the
    # id-range check comes along. A traceback that shows the indexing call keeps the generic advice.
    if not ctx.failure.frames and not _mentions(ctx, r"index_select|\bgather\b|\bscatter", re.I):
        fixes.append(remedy("index-out-of-range#compare-ids-num-embeddings"))
    if longer:
        fixes.insert(0, remedy("index-out-of-range#truncate-to-position-limit"))
    return hit("index.out_of_range_self", "index_error", "Index out of range", cause, fixes, _DOCS, _found(ctx), 0.88, facts=Facts(call="index_select"))


def _out_of_bounds(ctx: Context, idx: int, dim: int, size: int) -> RuleHit:
    fact = Fact("index", f"index {idx} on dimension {dim} of size {size} (valid: {-size}…{size - 1})")
    values = Facts(numbers={"index": idx, "dim": dim, "size": size})
    base = f"Index {idx} was used on dimension {dim}, which has size {size} (valid indices are 0…{size - 1}, or -{size}…-1)."
    src = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
    if src:
        base += f" The failing line is `{src}`."
    check = remedy("index-out-of-range#check-index-computation")
    if size == 0:
        return _empty_tensor(ctx, idx, dim, base, check, fact, values)
    # A fixed position on dimension 0 of a batch (`image_batch[1, ...]`): fails when a batch holds fewer samples than assumed.
    batch_pick = _BATCH_PICK.search(src) or (None if src else _BATCH_PICK.search(ctx.failure.text or ""))
    if dim == 0 and idx >= size and batch_pick:
        return _small_batch(ctx, idx, size, batch_pick.group(0), base, check, fact, values)
    if idx == size:
        cause = base + (" It is exactly one past the end — an off-by-one: 1-based indices or labels, a count (len(x), x.size(0)) used as an "
                        "index, or a table built one entry too small.")
        fixes = [check, remedy("index-out-of-range#zero-based-indices")]
        return hit("index.off_by_one", "index_error", f"Index {idx} is one past the end (size {size})", cause, fixes, _DOCS, _found(ctx, fact), 0.93, facts=values)
    if idx < 0:
        cause = base + " A negative index this large usually comes from a padding or sentinel value (-1, -100) used as a real index."
        fixes = [check, remedy("index-out-of-range#mask-sentinels")]
        return hit("index.negative", "index_error", f"Negative index {idx} out of bounds for size {size}", cause, fixes, _DOCS, _found(ctx, fact), 0.92, facts=values)
    cause = base + f" The index is {idx - size + 1} beyond the last position: it refers to a larger tensor than this one (a different vocabulary, class count or sequence length)."
    fixes = [check, remedy("index-out-of-range#build-for-full-range")]
    return hit("index.out_of_bounds", "index_error", f"Index {idx} out of bounds for size {size}", cause, fixes, _DOCS, _found(ctx, fact), 0.92, facts=values)


_BATCH_PICK = re.compile(r"\b\w{0,40}batch\w{0,40}\s*\[\s*\d+\s*[,\]]", re.I)
_BATCH_SIZE_WORDS = re.compile(r"batch[_ ]?size|\bbs\s*=\s*1\b|last batch|single (?:sample|image)", re.I)


def _empty_tensor(ctx: Context, idx: int, dim: int, base: str, check: Fix, fact: Fact, values: Facts) -> RuleHit:
    """Indexing into a tensor that has no elements along the dimension (size 0)."""
    cause = (base + f" The tensor is empty along dimension {dim}: whatever should have filled it produced nothing for this input — a filter or "
             "mask that selected no element, a sample with no objects/edges/tokens, or an empty batch. Code that takes element 0 then fails.")
    fixes = [remedy("index-out-of-range#handle-empty-case"), check]
    if _BATCH_SIZE_WORDS.search(ctx.failure.text or ""):
        # The user links the failure to the batch size: with one sample per batch, pairwise structures (edges, pairs) come out empty.
        fixes.insert(0, remedy("index-out-of-range#small-batch-empty"))
    return hit("index.empty_tensor", "index_error", f"Index {idx} into an empty dimension", cause, fixes, _DOCS, _found(ctx, fact), 0.9, facts=values)


def _small_batch(ctx: Context, idx: int, size: int, pick: str, base: str, check: Fix, fact: Fact, values: Facts) -> RuleHit:
    """A hard-coded sample position in a batch that, this time, holds fewer samples."""
    cause = (base + f" `{pick.strip()}` picks a fixed sample position on the batch dimension, but this batch has only {size} sample(s). "
             "The last batch of an epoch is smaller when the dataset size is not a multiple of the batch size (or the batch size is set low), "
             "so code that assumes a full batch fails there.")
    fixes = [
        remedy("index-out-of-range#index-existing-sample"),
        remedy("index-out-of-range#drop-last-batch"),
        check,
    ]
    return hit("index.small_batch", "index_error", f"Sample {idx} requested from a batch of {size}", cause, fixes, _DOCS, _found(ctx, fact), 0.9,
               facts=Facts(numbers=dict(values.numbers), call=pick.strip()))


def _dim_out_of_range(ctx: Context, lo: int, hi: int, got: int) -> RuleHit:
    ndim = hi + 1
    src = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
    op = re.search(r"\.(\w+)\((?:dim\s*=\s*)?\(?-?\d", src)
    opname = f"`{op.group(1)}`" if op else "The operation"
    cause = (f"{opname} asked for dimension {got}, but the tensor has only {ndim} dimension(s) (valid: {lo}…{hi}, i.e. the last one is dim={hi} or dim=-1). "
             + ("The tensor is probably missing a dimension the code assumes (a batch, channel or sequence axis), or was squeezed/flattened earlier." if got >= ndim
                else "A negative dimension counts from the end and also has to exist."))
    fixes = [
        remedy("index-out-of-range#use-existing-dim-in-op", last_dim=hi, op=op.group(1)) if op else remedy("index-out-of-range#use-existing-dim", last_dim=hi),
        remedy("index-out-of-range#print-tensor-shape"),
    ]
    values = Facts(numbers={"ndim": ndim, "dim": got}, call=op.group(1) if op else None)
    return hit("index.dim_out_of_range", "index_error", f"Dimension {got} out of range for a {ndim}-D tensor", cause, fixes, _DOCS,
               _found(ctx, Fact("shape", f"tensor has {ndim} dimension(s), dimension {got} requested")), 0.92, facts=values)


def _target_oob(ctx: Context, t: int) -> RuleHit:
    docs = ("device-side-assert", "index-out-of-range")
    values = Facts(numbers={"target": t}, argument="target")
    if t < 0:
        cause = (f"A class label is {t}: the loss accepts 0 … C-1 only. Negative labels are padding/ignore markers; the loss skips them only when "
                 "they equal its ignore_index (default -100).")
        fixes = [remedy("index-out-of-range#ignore-negative-label", label=t)]
        return hit("index.target_negative", "index_error", f"Negative class label {t}", cause, fixes, docs, _found(ctx), 0.93, facts=values)
    seg = r"segment|\bmasks?\b|pixel|pascal|\bvoc\b|cityscapes|ade20k|deeplab|unet"
    # The user's own description around the message often says what the labels are (a Pascal-format dataset, masks).
    if t >= 250 or (t >= 100 and (_mentions(ctx, seg, re.I) or re.search(seg, ctx.failure.text or "", re.I))):
        return _target_void_label(ctx, t, docs, values)
    cause = (f"A class label {t} is outside the range the loss accepts (0 … C-1, where C is the number of logits per sample): the labels "
             f"reach {t} but the model produces at most {t} classes — labels numbered from 1, or an output layer with too few classes.")
    fixes = [
        remedy("device-side-assert#compare-labels-with-output"),
        remedy("device-side-assert#output-size-num-classes"),
    ]
    if t >= 100:
        # A label this high inside the 8-bit range is also what label images read as raw pixel values produce.
        cause += " A value this high within 0 … 255 can also be a pixel value of a label image that was never mapped to class indices."
        fixes.append(remedy("index-out-of-range#map-mask-pixels-to-ids"))
    return hit("index.target_oob", "index_error", f"Class label {t} out of range", cause, fixes, docs, _found(ctx), 0.93, facts=values)


def _target_void_label(ctx: Context, t: int, docs: tuple[str, ...], values: Facts) -> RuleHit:
    """A label value far above any class count: a void/border marker (255) or a mask that does not hold class ids."""
    cause = (f"The target holds the value {t}, far above any plausible class count. In segmentation-style label maps such a value is either a "
             "'void'/border marker that should be ignored (255 in Pascal VOC-style masks), or a sign that the masks do not hold class ids at all: "
             "binary masks saved as 0/255, RGB or palette images read as colours, or masks resized with bilinear interpolation or saved as JPEG "
             "(which creates in-between values).")
    fixes = [
        remedy("index-out-of-range#ignore-void-label", label=t),
        remedy("index-out-of-range#check-label-map-values"),
        remedy("index-out-of-range#nearest-resize-masks"),
    ]
    return hit("index.target_void_label", "index_error", f"Label value {t} is not a class id", cause, fixes, docs, _found(ctx), 0.9, facts=values)
