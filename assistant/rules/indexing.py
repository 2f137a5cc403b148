"""Index errors on tensors: embeddings, out-of-bounds indices, dimensions that do not exist, CPU loss targets."""

from __future__ import annotations

import re

from assistant.rules.registry import Example, rule
from assistant.rules.base import basic_facts as _found, Context, fix, hit
from assistant.types import Fact, RuleHit

_DOCS = ("index-out-of-range", "device-side-assert")



@rule(
    'indexing.tensor_index',
    category='index_error',
    docs=_DOCS,
    priority=290,
    outcomes=('index.out_of_range_self', 'index.out_of_bounds', 'index.dim_out_of_range', 'index.target_oob', 'index.too_many', 'index.zero_dim', 'index.gather_shape', 'index.embedding'),
    examples=(),
)
def tensor_index(ctx: Context) -> RuleHit | None:
    """Out-of-range indices and dimensions in tensor operations (CPU messages are precise)."""
    if ctx.search(r"index out of range in self"):
        name, kind = ctx.layer
        embedding = kind == "Embedding" or any("embedding" in (f.function or "") or "sparse.py" in f.file for f in ctx.failure.frames) or bool(ctx.search(r"embedding", re.I))
        what = f"`{name}`" if name else "the embedding"
        if embedding:
            cause = (f"An input id is outside {what}'s table: nn.Embedding(num_embeddings, dim) accepts ids 0 … num_embeddings-1. The usual reasons: "
                     "the tokenizer/vocabulary has more entries than num_embeddings (special or added tokens, a different tokenizer), an unknown-token or padding id "
                     "set to len(vocab), or negative ids (e.g. -100 label padding fed as input).")
            fixes = [
                fix("Compare the largest id with num_embeddings", "", f"print(ids.min().item(), ids.max().item(), model.{name or 'embedding'}.num_embeddings)", "index-out-of-range"),
                fix("Size the embedding from the vocabulary", "After adding tokens to a Hugging Face tokenizer call model.resize_token_embeddings(len(tokenizer)).", "self.embed = nn.Embedding(len(vocab), dim, padding_idx=vocab['<pad>'])", "index-out-of-range"),
            ]
            return hit("index.embedding", "index_error", "Embedding index out of range", cause, fixes, _DOCS, _found(ctx), 0.93)
        cause = "index_select/an indexing op received an index >= the size of the indexed dimension (or a negative one)."
        fixes = [fix("Check the index range", "", "assert idx.min() >= 0 and idx.max() < t.size(dim)", "index-out-of-range")]
        return hit("index.out_of_range_self", "index_error", "Index out of range", cause, fixes, _DOCS, _found(ctx), 0.88)
    m = ctx.search(r"index (-?\d+) is out of bounds for dimension (\d+) with size (\d+)")
    if m:
        idx, dim, size = (int(g) for g in m.groups())
        fact = Fact("index", f"index {idx} on dimension {dim} of size {size} (valid: {-size}…{size - 1})")
        cause = f"Index {idx} was used on dimension {dim}, which has size {size} (valid indices are 0…{size - 1}, or -{size}…-1)."
        if idx == size:
            cause += " It is exactly one past the end — an off-by-one: 1-based indices/labels, or using a length (len(x), x.size(0)) as an index."
        elif idx < 0:
            cause += " A negative index this large usually comes from a padding or sentinel value (-1, -100) used as a real index."
        fixes = [
            fix("Check how the index is computed", "Print the index and the size at the failing line.", "print(idx, t.shape)", "index-out-of-range"),
            fix("Use 0-based indices / clamp only if the semantics allow it", "", "labels = labels - 1  # if they were 1-based", "index-out-of-range"),
        ]
        return hit("index.out_of_bounds", "index_error", f"Index {idx} out of bounds for size {size}", cause, fixes, _DOCS, _found(ctx, fact), 0.93)
    m = ctx.search(r"Dimension out of range \(expected to be in range of \[(-?\d+), (-?\d+)\], but got (-?\d+)\)")
    if m:
        lo, hi, got = (int(g) for g in m.groups())
        ndim = hi + 1
        src = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
        op = re.search(r"\.(\w+)\((?:dim\s*=\s*)?-?\d", src)
        opname = f"`{op.group(1)}`" if op else "The operation"
        cause = (f"{opname} asked for dimension {got}, but the tensor has only {ndim} dimension(s) (valid: {lo}…{hi}, i.e. the last one is dim={hi} or dim=-1). "
                 + ("The tensor is probably missing a dimension the code assumes (a batch or sequence axis), or was squeezed/flattened earlier." if got >= ndim else ""))
        fixes = [
            fix(f"Use a dimension that exists: dim={hi} (or dim=-1)" + (f" in {opname}" if op else ""), "If the tensor really should have more dimensions, fix where it lost them instead.", src.replace(f"({got},", f"({hi},") if op and f"({got}," in src else f"x.{op.group(1) if op else 'sum'}(dim=-1)", "index-out-of-range"),
            fix("Print the tensor's shape at the failing line", "", "print(x.shape, x.dim())", "index-out-of-range"),
            fix("Add the missing batch dimension, or use a negative dim that works for both", "", "x = x.unsqueeze(0)        # single sample -> batch of 1\nprobs = logits.softmax(dim=-1)", "index-out-of-range"),
        ]
        return hit("index.dim_out_of_range", "index_error", f"Dimension {got} out of range for a {ndim}-D tensor", cause, fixes, _DOCS, _found(ctx, Fact("shape", f"tensor has {ndim} dimension(s), dimension {got} requested")), 0.92)
    m = ctx.search(r"Target (-?\d+) is out of bounds")
    if m:
        t = int(m.group(1))
        cause = (f"A class label {t} is outside the range the loss accepts (0 … C-1, where C is the number of logits per sample). "
                 + ("A label equal to C usually means labels are numbered 1…C, or the final layer has one output too few." if t > 0 else "Negative labels (padding) need ignore_index."))
        fixes = [
            fix("Compare the label range with the output layer size", "", "print(y.min().item(), y.max().item(), logits.shape[-1])", "device-side-assert"),
            fix("Make the final layer's out_features equal to the number of classes, and labels 0-based", "", "self.head = nn.Linear(hidden, num_classes)\nloss = F.cross_entropy(logits, y - 1)  # if labels are 1-based", "device-side-assert"),
        ]
        return hit("index.target_oob", "index_error", f"Class label {t} out of range", cause, fixes, ("device-side-assert", "index-out-of-range"), _found(ctx), 0.93)
    m = ctx.search(r"too many indices for tensor of dimension (\d+)")
    if m:
        cause = f"The code indexes with more subscripts than the tensor has dimensions ({m.group(1)}): the tensor has fewer dimensions than expected (e.g. labels of shape (N,) indexed as y[:, 0])."
        fixes = [fix("Print the shape and index accordingly", "", "print(t.shape)", "index-out-of-range")]
        return hit("index.too_many", "index_error", "Too many indices", cause, fixes, _DOCS, _found(ctx), 0.9)
    if ctx.search(r"invalid index of a 0-dim tensor"):
        cause = "A 0-dimensional (scalar) tensor was indexed like a sequence — typically `loss.data[0]` from old code."
        fixes = [fix("Use .item() to read a scalar", "", "value = loss.item()", "index-out-of-range")]
        return hit("index.zero_dim", "index_error", "Indexing a 0-dim tensor", cause, fixes, _DOCS, _found(ctx), 0.92)
    if ctx.search(r"Index tensor must have the same number of dimensions as input tensor|index_select\(\): Index is supposed to be a vector|gather\(\): Expected dtype int64 for index|Expected index .* to be smaller than self"):
        cause = "gather/index_select/scatter got an index tensor of the wrong rank or dtype: gather needs an int64 index with as many dimensions as the input."
        fixes = [fix("Shape the index like the input (unsqueeze) and make it int64", "", "out = x.gather(1, idx.long().unsqueeze(1)).squeeze(1)", "index-out-of-range")]
        return hit("index.gather_shape", "index_error", "Index tensor has the wrong shape for gather/index_select", cause, fixes, _DOCS, _found(ctx), 0.9)
    return None
