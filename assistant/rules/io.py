"""Checkpoints: state_dict key/size mismatches, weights_only loading, corrupt or foreign files."""

from __future__ import annotations

import re

from assistant.rules.registry import Example, rule
from assistant.rules.base import with_location as _loc, Context, error_fact, hit, lazy_re, remedy
from dataclasses import replace

from assistant.types import Fact, Facts, RuleHit

_KEYS = lazy_re(r'"([^"]*)"')
_CHECKPOINT_WRAPPER_KEYS = {"epoch", "optimizer", "model", "state_dict", "model_state_dict", "optimizer_state_dict", "scheduler", "step", "global_step", "lr_scheduler", "args", "config", "best_acc", "loss", "scaler"}


def _keys_after(label: str, text: str) -> list[str]:
    m = re.search(label + r"[^:]*:\s*(.*?)(?:\n\s*(?:Missing|Unexpected|size mismatch)|\Z)", text, re.S)
    return _KEYS.findall(m.group(1)) if m else []



@rule(
    'io.state_dict_keys',
    category='state_dict_loading',
    docs=("state-dict-keys", "state-dict-size-mismatch", "optimizer-state-resume"),
    reads=("RuntimeError", "KeyError", "ValueError", "AttributeError", "text"),
    priority=55,
    outcomes=('io.state_dict', 'io.state_dict_prefix', 'io.state_dict_stripped', 'io.state_dict_wrapped', 'io.state_dict_head_size', 'io.state_dict_size',
              'io.state_dict_old', 'io.optimizer_state', 'io.dict_not_model', 'io.checkpoint_key', 'io.state_dict_buffers',
              'io.state_dict_bn_counters', 'io.optimizer_entry_wrong_object'),
    examples=(
        Example("captured/cpu/load-dataparallel-checkpoint-module-prefix", "io.state_dict_prefix"),
        Example("captured/cpu/compiled-model-orig-mod-prefix", "io.state_dict_prefix"),
        Example("captured/cpu/load-full-checkpoint-dict-as-state-dict", "io.state_dict_wrapped"),
        Example("captured/cpu/finetune-head-size-mismatch", "io.state_dict_head_size"),
        Example("corpus/io/state_dict_head_size_own_dataset_chinese.txt", "io.state_dict_head_size"),
        Example("realworld/dev/spin-size-mismatch-resnet-depth", "io.state_dict_size"),
        Example("realworld/dev/efficientfcn-size-mismatch-width", "io.state_dict_size"),
        Example("realworld/dev/rrl-bad-prefix-strip", "io.state_dict_stripped"),
        Example("realworld/dev/vst-why-strip-module-prefix", "io.state_dict_prefix"),
        Example("corpus/io/state_dict_keys_no_header_mvdet.txt", "io.state_dict"),
        Example("realworld/dev/xlm-embeddings-size-mismatch-max-vocab", "io.state_dict_size"),
        Example("corpus/io/state_dict_renamed_layer_captured.txt", "io.state_dict"),
        Example("realworld/dev/semseg-oldest-unexpected-key-module", "io.state_dict_old"),
        Example("corpus/io/optimizer_param_group_mismatch_captured.txt", "io.optimizer_state"),
        Example("corpus/io/optimizer_param_groups_count_captured.txt", "io.optimizer_state"),
        Example("corpus/io/state_dict_used_as_model_captured.txt", "io.dict_not_model"),
        Example("corpus/io/checkpoint_missing_state_dict_key_captured.txt", "io.checkpoint_key"),
        Example("corpus/io/optimizer_entry_holds_scheduler_state_captured.txt", "io.optimizer_entry_wrong_object"),
        Example("corpus/io/state_dict_unexpected_num_batches_tracked_siamfc.txt", "io.state_dict_bn_counters"),
        Example("corpus/io/state_dict_unexpected_position_ids.txt", "io.state_dict_buffers"),
    ),
)
def state_dict_keys(ctx: Context) -> RuleHit | None:
    """``Error(s) in loading state_dict``: prefixes, wrapped checkpoints, renamed layers, head size changes."""
    head = ctx.search(r"Error\(s\) in loading state_dict for (\w+)")
    old = ctx.search(r'(unexpected|missing) keys? "([^"]+)" in state_dict|(missing|unexpected) keys in state_dict: "?\{([^}]*)\}')
    if not head and old:
        return _old_key_message(ctx, old)
    text = ctx.text
    sizes = _SIZE_RE.findall(text) + _SIZE_OLD_RE.findall(text)
    # Reports often paste only the key lists, without the "Error(s) in loading state_dict" header line.
    keyed = ctx.search(r"(?:Missing|Unexpected) key\(s\) in state_dict: \"")
    if not head and not sizes and not keyed:
        return _optimizer_state(ctx)
    model = head.group(1) if head else "the model"
    missing = _keys_after("Missing key\\(s\\) in state_dict", text)
    unexpected = _keys_after("Unexpected key\\(s\\) in state_dict", text)
    found = [error_fact(ctx)]
    if missing:
        found.append(Fact("keys", f"missing ({len(missing)}): {', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}"))
    if unexpected:
        found.append(Fact("keys", f"unexpected ({len(unexpected)}): {', '.join(unexpected[:5])}{' …' if len(unexpected) > 5 else ''}"))
    for name, ck, cur in sizes[:4]:
        found.append(Fact("shape", f"{name}: checkpoint {ck.replace('torch.Size(', '').rstrip(')')} vs model {cur.replace('torch.Size(', '').rstrip(')')}"))
    shapes = tuple(sh for _, ck, cur in sizes[:4] for sh in (_shape(ck), _shape(cur)))
    facts = Facts(names=tuple(dict.fromkeys([*missing[:10], *unexpected[:10], *(n for n, _, _ in sizes[:10])])), shapes=shapes,
                  numbers={"missing": float(len(missing)), "unexpected": float(len(unexpected)), "size_mismatches": float(len(sizes))})
    docs: tuple[str, ...] = ("state-dict-keys", "state-dict-size-mismatch")
    fixes = []
    stripped = _stripped_chars(missing, unexpected)
    if stripped:
        i = max(range(len(missing)), key=lambda j: len(missing[j]))
        cause = (f"Each checkpoint key is the matching model key with its first {stripped} characters cut off (`{missing[i]}` became "
                 f"`{unexpected[i]}`): the loading code removes a fixed-length prefix (such as `module.`) from every key, "
                 "even though these keys never had it.")
        fixes.append(remedy("state-dict-keys#strip-prefix-only-where-present"))
        return hit("io.state_dict_stripped", "state_dict_loading", f"Checkpoint keys lost their first {stripped} characters", cause, fixes, docs,
                   _loc(ctx, found), 0.93, facts=replace(facts, numbers={**facts.numbers, "stripped_chars": float(stripped)}))
    prefix = _common_prefix(unexpected, missing)
    wrapper_keys = [k for k in unexpected if k.split(".")[0] in _CHECKPOINT_WRAPPER_KEYS]
    if prefix:
        p = prefix.rstrip(".")
        origin = {"module": "nn.DataParallel / DistributedDataParallel", "_orig_mod": "torch.compile"}.get(p, f"a wrapper that stores the network as `{p}`")
        cause = (f"Every checkpoint key carries the prefix `{prefix}` that {model}'s own keys do not have (e.g. `{unexpected[0]}` vs `{missing[0] if missing else unexpected[0][len(prefix):]}`): "
                 f"the weights were saved from a model wrapped in {origin}.")
        fixes.append(remedy("state-dict-keys#strip-prefix-before-loading", prefix=prefix))
        fixes.append(remedy("state-dict-keys#save-unwrapped-module" if p == "module" else "state-dict-keys#save-unwrapped-orig-mod"))
        return hit("io.state_dict_prefix", "state_dict_loading", f"Checkpoint keys have an extra `{prefix}` prefix", cause, fixes, docs,
                   _loc(ctx, found), 0.95, facts=replace(facts, names=(prefix, *facts.names)))
    if wrapper_keys:
        cause = (f"The dictionary passed to load_state_dict is a training checkpoint (keys like {', '.join(repr(k) for k in wrapper_keys[:4])}), "
                 "not the model's state_dict itself. The weights are one of its entries.")
        sub = next((k for k in ("model_state_dict", "state_dict", "model") if k in wrapper_keys), wrapper_keys[0])
        fixes.append(remedy("state-dict-keys#load-checkpoint-entry", key=sub))
        return hit("io.state_dict_wrapped", "state_dict_loading", "Whole training checkpoint passed to load_state_dict", cause, fixes, docs,
                   _loc(ctx, found), 0.95, facts=facts)
    if not sizes and _buffers_only(missing, unexpected):
        return _buffer_keys(ctx, model, missing, unexpected, found, facts)
    if sizes and not missing and not unexpected:
        names = [n for n, _, _ in sizes]
        head_like = all(re.search(r"(?:^|[._])(?:fc|classifier|cls|head|heads|logits|lm_head|out|output)(?:$|[._\d])", n) for n in names)
        cause = f"{model} has the same layers as the checkpoint, but {len(sizes)} tensor(s) differ in shape (" + ", ".join(f"`{n}`" for n in names[:4]) + ")."
        docs = ("state-dict-size-mismatch", "state-dict-keys")
        if head_like:
            ck, cur = _shape(sizes[0][1]), _shape(sizes[0][2])
            cause += (f" Only the output layer differs: the checkpoint's has {ck[0] if ck else '?'} outputs and the model's {cur[0] if cur else '?'} "
                      "— the model was built for a different number of outputs than the run that saved it.")
            # The loader's own message names `from_pretrained`/`ignore_mismatched_sizes`: the Hugging Face loader, whose flag re-creates the head.
            if ctx.search(r"ignore_mismatched_sizes"):
                fixes.append(remedy("hf-size-mismatch-heads#ignore-mismatched", num_classes=cur[0] if cur else None))
                docs = ("hf-size-mismatch-heads", *docs)
            fixes.append(remedy("state-dict-size-mismatch#load-all-but-output-layer", keys=names[:4]))
            fixes.append(remedy("state-dict-size-mismatch#build-with-checkpoint-outputs"))
            # Not fine-tuning at all: a training script that resumes by itself found a file from an earlier run with another class count.
            fixes.append(remedy("state-dict-size-mismatch#check-which-checkpoint-loaded"))
            return hit("io.state_dict_head_size", "state_dict_loading", "Output layer size differs from the checkpoint", cause, fixes, docs,
                       _loc(ctx, found), 0.95, facts=facts)
        cause += (" The layer names match but their sizes do not: the model was constructed with different hyper-parameters "
                  "(widths, depth/variant, input channels, embedding sizes) than the one that produced the checkpoint.")
        first, ck, cur = sizes[0]
        # An embedding table whose row count differs: its rows are the vocabulary (tokens, characters, classes) the model was built with.
        embed = next((n for n, c, m in sizes if re.search(r"embed", n, re.I) and _shape(c)[:1] != _shape(m)[:1]), None)
        if embed:
            cause += (f" `{embed}` is an embedding table with a different number of rows: the vocabulary used now is not the one the checkpoint "
                      "was trained with.")
            fixes.append(remedy("state-dict-size-mismatch#use-checkpoint-vocabulary", key=embed))
        fixes.append(remedy("state-dict-size-mismatch#build-with-checkpoint-config", key=first, checkpoint_shape=list(_shape(ck)), model_shape=list(_shape(cur))))
        if len(sizes) <= 3:
            # Few tensors differ: often a deliberate change for fine-tuning (fewer classes, new tokens), where those tensors must be learned anew.
            names = [n for n, _, _ in sizes]
            fixes.append(remedy("state-dict-size-mismatch#exclude-changed-tensors", keys=names))
        return hit("io.state_dict_size", "state_dict_loading", "Checkpoint tensor shapes differ from the model", cause, fixes, docs,
                   _loc(ctx, found), 0.93, facts=facts)
    head_only = bool(missing) and not unexpected and not sizes and all(_HEAD_KEY.search(k) for k in missing)
    if head_only:
        # Only the output layer is absent: a headless (feature-extractor) checkpoint loaded into a model built with a classifier.
        cause = (f"Only {model}'s output layer is missing from the checkpoint (" + ", ".join(f"`{k}`" for k in missing[:4]) + "): the "
                 "checkpoint has no classifier (a backbone or feature extractor), or the model was built with a new head, and a strict "
                 "load requires every key. The head has to be created anew and trained.")
        fixes.append(remedy("state-dict-keys#non-strict-shared-part"))
        if _mentions_timm(ctx):
            fixes.insert(0, remedy("state-dict-keys#timm-pretrained-file"))
        fixes.append(remedy("state-dict-keys#compare-two-key-sets"))
        return hit("io.state_dict", "state_dict_loading", "The checkpoint has no output layer for this model", cause, fixes, docs,
                   _loc(ctx, found), 0.93, facts=facts)
    cause = f"The checkpoint and {model} have different parameter names"
    if missing and unexpected:
        cause += f": {len(missing)} key(s) of the model are not in the checkpoint and {len(unexpected)} checkpoint key(s) are unknown to the model. Layers were renamed or the architecture changed between saving and loading."
    elif missing:
        cause += f": {len(missing)} key(s) the model needs are absent from the checkpoint (a model with layers the checkpoint does not have, or a partial checkpoint)."
    else:
        cause += f": the checkpoint has {len(unexpected)} key(s) the model does not (a different or larger architecture, or extra buffers)."
    if sizes:
        cause += f" In addition {len(sizes)} tensor(s) differ in shape."
    fixes.append(remedy("state-dict-keys#compare-two-key-sets"))
    fixes.append(remedy("state-dict-keys#build-with-saved-config"))
    fixes.append(remedy("state-dict-keys#rename-or-load-non-strict"))
    return hit("io.state_dict", "state_dict_loading", "state_dict keys do not match the model", cause, fixes, docs, _loc(ctx, found), 0.95, facts=facts)


_HEAD_KEY = lazy_re(r"(?:^|[._])(?:fc|classifier|cls|head|heads|logits|lm_head)(?:$|[._\d])")


def _mentions_timm(ctx: Context) -> bool:
    return bool(ctx.search(r"\btimm\b|\bcreate_model\(|pretrained_cfg"))


_SIZE_RE = lazy_re(r"size mismatch for ([\w.]+): copying a param with shape (torch\.Size\(\[[^\]]*\]\)) from checkpoint, the shape in current model is (torch\.Size\(\[[^\]]*\]\))")


# Wording of PyTorch releases before 1.0 ("copying a param of torch.Size([..]) from checkpoint, where the shape is torch.Size([..]) in current model").
_SIZE_OLD_RE = lazy_re(r"size mismatch for ([\w.]+): copying a param of (torch\.Size\(\[[^\]]*\]\)) from checkpoint, where the shape is (torch\.Size\(\[[^\]]*\]\)) in current model")


def _buffer_keys(ctx: Context, model: str, missing: list[str], unexpected: list[str], found: list[Fact], facts: Facts) -> RuleHit:
    """Only buffers differ: the saving and loading library versions disagree about which buffers a layer keeps."""
    keys = [*unexpected, *missing]
    side = "checkpoint has" if unexpected and not missing else "model expects" if missing and not unexpected else "checkpoint and model differ in"
    counters = all(k.endswith("num_batches_tracked") for k in keys)
    if counters:
        cause = (f"The only keys that differ are BatchNorm's `num_batches_tracked` counters (the {side} them, e.g. `{keys[0]}`). BatchNorm gained "
                 "that buffer in PyTorch 0.4.1, so the checkpoint was saved by a different PyTorch version than the one loading it. The "
                 "counter is only a step count: the weights themselves match.")
    else:
        cause = (f"The only keys that differ are buffers, not learned weights (the {side} e.g. `{keys[0]}`): the library that defines "
                 f"{model} (PyTorch, or the model's own package) is likely a different version than the one that saved the checkpoint, and the "
                 "two versions disagree about which buffers a layer stores.")
    names = keys[:6]
    fixes = [
        remedy("state-dict-keys#load-non-strict-skip-buffers"),
        remedy("state-dict-keys#drop-buffer-keys", keys=names),
        remedy("state-dict-keys#match-library-versions"),
    ]
    outcome = "io.state_dict_bn_counters" if counters else "io.state_dict_buffers"
    return hit(outcome, "state_dict_loading", "Only buffers differ between checkpoint and model", cause, fixes,
               ("state-dict-keys",), _loc(ctx, found), 0.9, facts=facts)


def _stripped_chars(missing: list[str], unexpected: list[str]) -> int | None:
    """N when every unexpected key is the missing key at the same position minus its first N characters."""
    if len(missing) < 2 or len(missing) != len(unexpected):
        return None
    n = max(len(m) - len(u) for m, u in zip(missing, unexpected, strict=True))
    if n <= 0 or not all(u == m[n:] for m, u in zip(missing, unexpected, strict=True)):
        return None
    return n


def _shape(text: str) -> tuple[int, ...]:
    """``torch.Size([64, 3, 3, 3])`` -> (64, 3, 3, 3)."""
    return tuple(int(v) for v in re.findall(r"\d+", text))


def _old_key_message(ctx: Context, old: re.Match[str]) -> RuleHit:
    """Pre-1.0 wording: ``unexpected key "module.x" in state_dict``."""
    key = old.group(2) or (old.group(4) or "").split(",")[0].strip(" '\"")
    kind = old.group(1) or old.group(3)
    prefix = key.split(".")[0] + "." if key.startswith(("module.", "_orig_mod.")) else None
    if prefix:
        cause = f"The checkpoint key `{key}` carries a `{prefix}` prefix the model does not use: the weights were saved from a wrapped model (DataParallel/DistributedDataParallel or torch.compile)."
        fixes = [remedy("state-dict-keys#strip-prefix-old-torch", prefix=prefix)]
    else:
        cause = f"The checkpoint and the model disagree about parameter names ({kind} key `{key}`): the architecture changed or layers were renamed between saving and loading."
        fixes = [remedy("state-dict-keys#compare-key-sets-old-message")]
    return hit("io.state_dict_old", "state_dict_loading", "state_dict keys do not match the model", cause, fixes, ("state-dict-keys",),
               _loc(ctx, [error_fact(ctx)]), 0.9, facts=Facts(names=(key,)))


def _common_prefix(unexpected: list[str], missing: list[str]) -> str | None:
    """The prefix that turns checkpoint keys into model keys (``module.``, ``_orig_mod.``, ``model.``).

    A prefix is proven only by pairs: checkpoint keys that, without it, are the model's missing keys. A list of
    unexpected (or missing) keys alone never proves one: both sides often share a submodule name (``feature.``).
    """
    if not unexpected or not missing:
        return None
    first = unexpected[0].split(".")[0] + "."
    if not all(k.startswith(first) for k in unexpected):
        return None
    stripped = {k[len(first):] for k in unexpected}
    # Wrappers' own prefixes: users often cut the key lists short, so one pair need not be visible.
    if stripped & set(missing) or first in ("module.", "_orig_mod."):
        return first
    return None


# Buffers, not learned weights: a model class gains or stops saving these across library versions.
_BUFFER_KEY = lazy_re(r"(?:^|\.)(?:num_batches_tracked|running_mean|running_var|position_ids|token_type_ids|attn\.bias|attn\.masked_bias"
                      r"|masked_bias|attention_mask|causal_mask|\w*_mask|inv_freq)$")


def _buffers_only(missing: list[str], unexpected: list[str]) -> bool:
    """Every differing key (missing and unexpected) is a buffer rather than a learned weight."""
    keys = [*missing, *unexpected]
    return bool(keys) and all(_BUFFER_KEY.search(k) for k in keys)


def _indexes_checkpoint(text: str, key: str) -> bool:
    """The report quotes code (no traceback frames needed) that reads ``key`` from a loaded checkpoint: inside a
    ``load_state_dict(...)`` call, or from a variable named like a checkpoint."""
    subscript = r"\[\s*['\"]" + re.escape(key) + r"['\"]\s*\]"
    in_load_call = r"load_state_dict\(\s*\w+" + subscript
    from_checkpoint_variable = r"\b(?:ckpt|checkpoint|state|loaded|saved)\w*" + subscript
    return re.search(f"{in_load_call}|{from_checkpoint_variable}", text, re.I) is not None


def _optimizer_state(ctx: Context) -> RuleHit | None:
    m = ctx.search(r"loaded state dict contains a parameter group that doesn't match the size of optimizer's group|loaded state dict has a different number of parameter groups")
    if m:
        groups = "different number of parameter groups" in m.group(0)
        cause = ("The optimizer state was saved for a different set of parameters: "
                 + ("the saved optimizer had a different number of parameter groups than the new one (groups were added, merged or split)."
                    if groups else "a parameter group holds a different number of tensors than when it was saved (the model changed, or parameters were frozen/unfrozen)."))
        fixes = [remedy("state-dict-size-mismatch#optimizer-same-params-or-fresh-state")]
        return hit("io.optimizer_state", "state_dict_loading", "Optimizer state does not match its parameters", cause, fixes, ("state-dict-size-mismatch", "state-dict-keys"), _loc(ctx, [error_fact(ctx)]), 0.9,
                   facts=Facts(call="load_state_dict"))
    m = ctx.search(r"'(?:collections\.)?OrderedDict' object has no attribute '(\w+)'|'dict' object has no attribute '(eval|to|cuda|forward|parameters|state_dict|load_state_dict)'")
    if m:
        cause = f"torch.load returned a state_dict (a dictionary of tensors), not a model object, so it has no `.{m.group(1) or m.group(2)}()` method."
        fixes = [remedy("state-dict-keys#build-model-then-load-weights")]
        return hit("io.dict_not_model", "state_dict_loading", "Loaded a state_dict, used it as a model", cause, fixes, ("state-dict-keys",), _loc(ctx, [error_fact(ctx)]), 0.9,
                   facts=Facts(names=(m.group(1) or m.group(2),)))
    wrong_object = ctx.search(r"KeyError: 'param_groups'") or (ctx.exc_type == "KeyError" and ctx.message.lstrip().startswith("'param_groups'"))
    if wrong_object and re.search(r"load_state_dict", ctx.failure.text or ctx.text):
        # The dictionary given to the optimizer is not an optimizer state (which always has param_groups).
        cause = ("The dictionary passed to the optimizer's load_state_dict has no 'param_groups', so it is not an optimizer state: "
                 "another object's state (often the LR scheduler's) was saved under the optimizer's key.")
        fixes = [remedy("optimizer-state-resume#save-each-under-its-key"), remedy("state-dict-keys#print-checkpoint-keys")]
        return hit("io.optimizer_entry_wrong_object", "state_dict_loading", "Optimizer entry holds another object's state", cause, fixes,
                   ("optimizer-state-resume", "state-dict-keys"), _loc(ctx, [error_fact(ctx)]), 0.85, facts=Facts(call="load_state_dict"))
    m = ctx.search(r"KeyError: '(state_dict|model_state_dict|model|net|optimizer|optimizer_state_dict|epoch)'") or (
        re.search(r"'(state_dict|model_state_dict|model|optimizer|epoch)'", ctx.message) if ctx.exc_type == "KeyError" else None)
    if m and (any(re.search(r"ckpt|checkpoint|state|torch\.load", f.source or "") for f in ctx.failure.user_frames)
              or _indexes_checkpoint(ctx.failure.text or ctx.text, m.group(1))):
        key = m.group(1)
        cause = f"The checkpoint dictionary has no '{key}' entry: it was saved in a different layout (maybe it is the state_dict itself, or uses another key name)."
        fixes = [remedy("state-dict-keys#print-checkpoint-keys")]
        docs: tuple[str, ...] = ("state-dict-keys",)
        if key.startswith("optimizer"):
            # No optimizer entry when resuming: the file is usually a weights-only release or export.
            fixes.append(remedy("optimizer-state-resume#load-weights-fresh-optimizer"))
            docs = ("state-dict-keys", "optimizer-state-resume")
        return hit("io.checkpoint_key", "state_dict_loading", f"Checkpoint has no '{key}' entry", cause, fixes, docs, _loc(ctx, [error_fact(ctx)]), 0.85,
                   facts=Facts(names=(key,)))
    return None


# A loaded model described as performing like an untrained one ...
_UNTRAINED = lazy_re(r"(?:same as|like|as if|no better than|equal to|as bad as)\s+(?:an? |the )?(?:untrained|randomly[- ]initiali[sz]ed|random(?:ly)?\b)"
                     r"|near[- ]random|(?:weights|model) (?:are |were |is |was )?not (?:loaded|restored) (?:properly|correctly)", re.I)
# ... after the user loaded weights.
_LOADED = lazy_re(r"\bload(?:ed|ing|s)?\b|checkpoint|pretrained|restor", re.I)


@rule(
    'io.loaded_model_untrained',
    category='state_dict_loading',
    docs=("state-dict-keys",),
    reads=("text",),
    priority=57,
    outcomes=('io.loaded_model_untrained',),
    examples=(
        Example("realworld/dev/robustar-loaded-model-random-accuracy-eval", "io.loaded_model_untrained"),
        Example("corpus/io/loaded_model_untrained_accuracy_lightning.txt", "io.loaded_model_untrained"),
        Example("corpus/io/loaded_checkpoint_near_random_transformers.txt", "io.loaded_model_untrained"),
    ),
)
def loaded_model_untrained(ctx: Context) -> RuleHit | None:
    """A description (no error) of a model that, after loading its weights, scores like an untrained one."""
    failure = ctx.failure
    if failure.exc_type or failure.frames or failure.cuda_asserts:
        return None
    text = failure.text or ctx.text
    untrained, loaded = _UNTRAINED.search(text), _LOADED.search(text)
    if not (untrained and loaded):
        return None
    cause = ("No error, but the loaded model evaluates like an untrained one. Either the trained weights never reach the model that is evaluated "
             "(a non-strict load that silently skipped every key, a loader that returns a new model whose result is not assigned, or evaluation "
             "of another instance), or they do and the evaluation differs from training: the model left in training mode (dropout active, "
             "batch norm using batch statistics and updating its running averages) or inputs preprocessed differently.")
    fixes = [
        remedy("state-dict-keys#eval-mode-before-evaluating"),
        remedy("state-dict-keys#check-weights-arrived"),
        remedy("state-dict-keys#preprocess-as-in-training"),
    ]
    found = [Fact("symptom", f"{loaded.group(0)} … {untrained.group(0)}")]
    return hit("io.loaded_model_untrained", "state_dict_loading", "Loaded model behaves like an untrained one", cause, fixes, ("state-dict-keys",),
               found, 0.65, facts=Facts(names=(untrained.group(0),)))


# A saved adapter file named next to a size of a few hundred bytes (or called empty): the adapter's weights were not written.
_ADAPTER_FILE = lazy_re(r"\badapter_model\w*(?:\.(?:bin|safetensors))?|\badapter (?:weights|file|checkpoint)\b", re.I)
_TINY_FILE = lazy_re(r"\b\d{1,4}[ -]?bytes?\b(?! ?/)|\b(?:empty|nearly empty|almost empty|tiny)\b[^.\n]{0,30}\b(?:file|adapter|dict)", re.I)
# A listing of saved weights (``name : torch.Size([0])`` lines) from a run whose parameters were partitioned across ranks.
# Blanks only within the line ([ \t], not \s): a run of blank lines must not be re-read from every line start.
_EMPTY_WEIGHT_LINE = lazy_re(r"^[ \t]*[\w.]+[ \t]*[:=][ \t]*(?:torch\.)?Size\(\[0\]\)", re.M)
_PARTITIONED_RUN = lazy_re(r"\bzero[-_ ]?3(?!\d)|\bstage[-_ ]?3(?!\d)|\bfsdp\b|FullyShardedDataParallel|fully_shard", re.I)
_SAVED_FILE = lazy_re(r"_model_states\.pt|\.(?:pt|pth|bin|safetensors)\b|\bsav(?:e|ed|ing)\b|\bcheckpoint\b|保存", re.I)


@rule(
    'io.adapter_saved_empty',
    category='serialization_error',
    docs=("peft-adapter-empty-save", "saved-weights-empty-partitioned"),
    reads=("text",),
    priority=72,
    examples=(Example("corpus/io/peft_adapter_saved_nearly_empty.txt", "io.adapter_saved_empty"),),
)
def adapter_saved_empty(ctx: Context) -> RuleHit | None:
    """A description (no error) of a saved LoRA/PEFT adapter file of a few hundred bytes, or of saved weights listed with
    zero-element shapes from a run whose parameters were partitioned (DeepSpeed ZeRO-3, FSDP)."""
    failure = ctx.failure
    if failure.exc_type or failure.frames:
        return None
    text = failure.text or ctx.text
    empty = _EMPTY_WEIGHT_LINE.findall(text)
    sharded, saved = _PARTITIONED_RUN.search(text), _SAVED_FILE.search(text)
    if len(empty) >= 2 and sharded and saved:
        return _saved_weights_partitioned(len(empty), sharded.group(0), saved.group(0))
    adapter, tiny = _ADAPTER_FILE.search(text), _TINY_FILE.search(text)
    if not (adapter and tiny):
        return None
    cause = ("Training ends without an error, but the saved adapter holds no weights: a file of a few hundred bytes is an empty "
             "dictionary with its serialisation overhead. The adapter selection was applied to something that no longer contained the "
             "adapter's keys (a training script that already overrides `state_dict` with the adapter-only dictionary, combined with a "
             "peft release that selects the adapter keys itself), the weights were partitioned across processes when saved, or the base "
             "model was saved instead of the PEFT wrapper.")
    fixes = [
        remedy("peft-adapter-empty-save#drop-state-dict-override"),
        remedy("peft-adapter-empty-save#pin-peft-for-script"),
        remedy("peft-adapter-empty-save#recover-from-checkpoint"),
    ]
    found = [Fact("symptom", f"{adapter.group(0)} … {tiny.group(0)}")]
    return hit("io.adapter_saved_empty", "serialization_error", "Saved adapter file is empty", cause, fixes, ("peft-adapter-empty-save",),
               found, 0.7, facts=Facts(names=(adapter.group(0),)))


def _saved_weights_partitioned(count: int, sharded: str, saved: str) -> RuleHit:
    """Saved weights listed as ``torch.Size([0])`` from a ZeRO-3 / FSDP run: the file holds placeholders of partitioned parameters."""
    cause = (f"The saved weights are zero-element placeholders ({count} listed as torch.Size([0])) from a run that partitions its parameters "
             f"across ranks ({sharded}). Under DeepSpeed ZeRO-3 or FSDP full sharding a module outside the engine's forward keeps only an "
             "empty placeholder per parameter; the real values live in the ranks' shards (the optimizer-state files of the same checkpoint). "
             "A per-rank model-states file, or a state_dict taken without gathering, therefore stores the names with empty tensors.")
    fixes = [
        remedy("deepspeed-checkpoint-loading#consolidate-fp32"),
        remedy("saved-weights-empty-partitioned#gather-on-save"),
        remedy("deepspeed-checkpoint-loading#save-16bit"),
    ]
    found = [Fact("symptom", f"{count} saved weights of shape torch.Size([0]) … {saved}")]
    return hit("io.adapter_saved_empty", "serialization_error", "Saved weights are empty placeholders of partitioned parameters", cause, fixes,
               ("saved-weights-empty-partitioned", "deepspeed-checkpoint-loading"), found, 0.75, facts=Facts(names=(sharded,)))


_LOAD_DEFAULT_RELEASE = lazy_re(r"\b(?:py)?torch\s*(?:version\s*|v)?((?:2\.(?:[6-9]|1\d)|[3-9]\.\d+)(?:\.\d+)?)\b", re.I)
_UNPICKLE_WORDS = lazy_re(r"unpickl|torch\.load\b|weights_only", re.I)


@rule(
    'io.serialization',
    category='serialization_error',
    docs=("torch-load-weights-only", "corrupt-checkpoint", "torchscript-vs-torch-load"),
    reads=("PickleError", "RuntimeError", "AttributeError", "text"),
    priority=56,
    outcomes=('io.weights_only', 'io.weights_only_other', 'io.not_torchscript', 'io.corrupt_zip', 'io.invalid_load_key', 'io.empty_file', 'io.unpicklable_save',
              'io.missing_class', 'io.saved_by_other_torch', 'io.pickle_load', 'io.safetensors'),
    examples=(
        Example("captured/cpu/weights-only-load-config-dataclass", "io.weights_only"),
        Example("captured/cpu/weights-only-load-numpy-stats", "io.weights_only"),
        Example("realworld/dev/kliff-weights-only-pytest-prefix", "io.weights_only"),
        Example("corpus/io/weights_only_unsupported_global_hparams.txt", "io.weights_only"),
        Example("corpus/io/weights_only_unsupported_global_partial.txt", "io.weights_only"),
        Example("corpus/io/weights_only_build_numpy_dtype.txt", "io.weights_only_other"),
        Example("realworld/dev/sovits-weights-only-old-unsupported-class", "io.weights_only"),
        Example("corpus/io/jit_load_state_dict_constants_pkl_captured.txt", "io.not_torchscript"),
        Example("captured/cpu/truncated-checkpoint-download", "io.corrupt_zip"),
        Example("realworld/dev/gen6d-central-directory-incomplete", "io.corrupt_zip"),
        Example("realworld/dev/mattergen-invalid-load-key-v-lfs", "io.invalid_load_key"),
        Example("realworld/dev/ultrapixel-invalid-load-key-html", "io.invalid_load_key"),
        Example("corpus/io/empty_checkpoint_ran_out_of_input_captured.txt", "io.empty_file"),
        Example("corpus/io/empty_checkpoint_weights_only_eof_captured.txt", "io.empty_file"),
        Example("captured/cpu/save-whole-model-with-lambda", "io.unpicklable_save"),
        Example("corpus/io/load_whole_model_class_missing_captured.txt", "io.missing_class"),
        Example("corpus/io/load_checkpoint_helper_missing_older_release_captured.txt", "io.saved_by_other_torch"),
        Example("corpus/io/pickle_load_torch_file_captured.txt", "io.pickle_load"),
        Example("corpus/io/safetensors_header_too_large.txt", "io.safetensors"),
        Example("corpus/io/safetensors_header_too_large_transformers.txt", "io.safetensors"),
    ),
)
def serialization(ctx: Context) -> RuleHit | None:
    """torch.load/torch.save failures: weights_only, truncated zips, HTML/LFS files, unpicklable objects."""
    docs = ("torch-load-weights-only", "corrupt-checkpoint")
    if ctx.search(r"Weights only load failed|WeightsUnpickler error|Unsupported global: GLOBAL"):
        return _weights_only(ctx, docs)
    release = None if ctx.exc_type else _LOAD_DEFAULT_RELEASE.search(ctx.text)
    if release and _UNPICKLE_WORDS.search(ctx.text):
        # A description (no error line) of a file that no longer unpickles under a release where torch.load defaults to weights_only=True.
        cause = (f"The report names PyTorch {release.group(1)}, where torch.load defaults to weights_only=True (since 2.6): files holding anything "
                 "beyond tensors and plain containers (a pickled model, a config or training object, NumPy values, a project's own intermediate "
                 "results) no longer unpickle unless their types are allowed or the file is loaded with weights_only=False.")
        fixes = [
            remedy("torch-load-weights-only#trusted-file-weights-only-false"),
            remedy("torch-load-weights-only#allow-types-involved"),
            remedy("torch-load-weights-only#resave-with-plain-data"),
        ]
        return hit("io.weights_only_other", "serialization_error", f"torch.load under PyTorch {release.group(1)} (weights_only=True default)", cause, fixes, docs,
                   _loc(ctx, []), 0.75, facts=Facts(call="torch.load"))
    path = _loaded_file(ctx)
    quoted = f"'{path}'" if path else None  # the user's path, quoted for the shell; None shows the placeholder
    facts = Facts(names=(path,) if path else ())
    if ctx.search(r"failed locating file constants\.pkl"):
        # a complete archive without constants.pkl: a torch.save file given to torch.jit.load / torch::jit::load
        cause = ("torch.jit.load (or LibTorch's torch::jit::load) was given a file written by torch.save: only TorchScript archives "
                 "contain constants.pkl and the model's code, so a state dict or pickled model cannot be loaded this way.")
        fixes = [
            remedy("torchscript-vs-torch-load#export-scripted"),
            remedy("torchscript-vs-torch-load#inspect-archive"),
        ]
        return hit("io.not_torchscript", "serialization_error", "torch.save file loaded as TorchScript", cause, fixes, ["torchscript-vs-torch-load"], _loc(ctx, [error_fact(ctx)]), 0.85, facts=facts)
    if ctx.search(r"PytorchStreamReader failed reading zip archive|failed finding central directory|PytorchStreamReader failed locating file|unexpected EOF|file read failed"):
        cause = ("The checkpoint is not a complete PyTorch zip archive: the file is truncated (the save was interrupted, the disk filled up, a copy/download "
                 "stopped early) or it is not a checkpoint at all (a Git LFS pointer or an HTML error page).")
        fixes = [
            remedy("corrupt-checkpoint#check-size-first-bytes", path=quoted),
            remedy("corrupt-checkpoint#redownload-or-save-atomically"),
        ]
        return hit("io.corrupt_zip", "serialization_error", "Checkpoint file is truncated or not a checkpoint", cause, fixes, docs[::-1], _loc(ctx, [error_fact(ctx)]), 0.93, facts=facts)
    m = ctx.search(r"invalid load key, '(.+?)'")
    if m:
        ch = m.group(1)
        story = {"<": "an HTML page (a failed download or a login page saved in place of the file)", "v": "a Git LFS pointer ('version https://git-lfs…'): the real file was never pulled"}.get(ch, "a file in another format (not a PyTorch/pickle checkpoint), or a corrupted one")
        plain = any(re.search(r"\b(?:pickle|pkl|cPickle)\.load\(", f.source or "") for f in ctx.failure.user_frames)
        cause = f"{'pickle.load' if plain else 'torch.load'} read the byte '{ch}' where a pickle/zip header should start: the file is {story}."
        fixes = [remedy("corrupt-checkpoint#look-at-the-file", path=quoted)]
        if ch == "<":
            fixes.append(remedy("corrupt-checkpoint#download-again-real-url"))
        if ch == "v":
            fixes.append(remedy("corrupt-checkpoint#fetch-lfs-object"))
        if ch not in "<v":
            # Any other first byte: a truncated/corrupt copy or a file of another format; a fresh copy settles which.
            fixes.append(remedy("corrupt-checkpoint#get-fresh-copy", path=quoted))
        return hit("io.invalid_load_key", "serialization_error", "Checkpoint file is not what torch.load expects", cause, fixes, ("corrupt-checkpoint",), _loc(ctx, [error_fact(ctx)]), 0.92,
                   facts=replace(facts, names=(*facts.names, ch)))
    if ctx.exc_type == "EOFError" and (ctx.search(r"Ran out of input") or any("serialization.py" in f.file for f in ctx.failure.frames)):
        cause = "The file being unpickled is empty (0 bytes) or cut short: a save that failed or a placeholder file."
        fixes = [remedy("corrupt-checkpoint#check-size-recreate", path=quoted)]
        return hit("io.empty_file", "serialization_error", "Empty checkpoint file", cause, fixes, ("corrupt-checkpoint",), _loc(ctx, [error_fact(ctx)]), 0.88, facts=facts)
    saving = any("serialization.py" in f.file and "save" in (f.function or "") for f in ctx.failure.frames) or any("torch.save" in (f.source or "") for f in ctx.failure.frames)
    m = ctx.search(r"Can't pickle (?:local object '([^']{1,300})'|<function ([^>]{1,300})>|([^:\n]{1,300}?): attribute lookup)|Can't get local object '([^']{1,300})'|cannot pickle '(\w+)' object")
    if m and saving:
        obj = next(g for g in m.groups() if g)
        cause = f"torch.save pickles everything it is given, and `{obj}` cannot be pickled (lambdas, local functions, open files, locks, generators). Saving the whole model object drags in every attribute."
        fixes = [remedy("corrupt-checkpoint#save-state-dict-not-model")]
        return hit("io.unpicklable_save", "serialization_error", "torch.save hit an unpicklable object", cause, fixes, ("corrupt-checkpoint",), _loc(ctx, [error_fact(ctx)]), 0.9,
                   facts=Facts(names=(obj,), call="torch.save"))
    m = ctx.search(r"Can't get attribute '(\w+)' on <module '([\w.]+)'")
    if m and (m.group(2) == "torch" or m.group(2).startswith("torch.")):
        # The unpickler looked for one of PyTorch's own helpers or classes: the file names something this release lacks.
        cause = (f"The file refers to `{m.group(2)}.{m.group(1)}`, which the installed PyTorch does not have: the checkpoint was saved by a newer release "
                 "(files load in the same or a newer release, not reliably in an older one), or, less often, by an old release whose class was since moved.")
        fixes = [remedy("checkpoint-newer-torch#upgrade-torch-to-saver"), remedy("checkpoint-newer-torch#resave-compatible")]
        return hit("io.saved_by_other_torch", "serialization_error", f"`{m.group(1)}` missing from the installed PyTorch", cause, fixes,
                   ("checkpoint-newer-torch", "corrupt-checkpoint"), _loc(ctx, [error_fact(ctx)]), 0.88, facts=Facts(names=(m.group(1), m.group(2)), call="torch.load"))
    # With no traceback and no sign of worker processes, a class the unpickler cannot find in a named module is a stored object
    # being loaded (a bare `__main__` stays with the multiprocessing reading: notebooks under spawn say the same).
    bare = (not ctx.failure.frames and m is not None and m.group(2) not in ("__main__", "__mp_main__")
            and not ctx.search(r"spawn|DataLoader|multiprocessing|worker|Pool\b", re.I))
    if m and (bare or any("serialization.py" in f.file or "torch.load" in (f.source or "") for f in ctx.failure.frames)):
        cause = f"The file holds a pickled `{m.group(1)}` object that was defined in module `{m.group(2)}` when it was saved; that class cannot be found now (renamed, moved, or defined in a script's __main__)."
        fixes = [remedy("corrupt-checkpoint#import-class-same-module-path")]
        return hit("io.missing_class", "serialization_error", f"Pickled class `{m.group(1)}` not found", cause, fixes, ("corrupt-checkpoint",), _loc(ctx, [error_fact(ctx)]), 0.88,
                   facts=Facts(names=(m.group(1), m.group(2)), call="torch.load"))
    if ctx.search(r"A load persistent id instruction was encountered,?\s+but no persistent_load function was specified"):
        cause = "A PyTorch checkpoint was opened with plain pickle.load (or another loader); tensors in it need torch.load."
        fixes = [remedy("corrupt-checkpoint#use-torch-load")]
        return hit("io.pickle_load", "serialization_error", "Checkpoint opened with pickle instead of torch.load", cause, fixes, ("corrupt-checkpoint",), _loc(ctx, [error_fact(ctx)]), 0.9,
                   facts=Facts(call="pickle.load"))
    if ctx.search(r"HeaderTooLarge|Error while deserializing header|SafetensorError"):
        cause = "safetensors could not read the file header: the file is truncated, an LFS pointer, or not a safetensors file."
        fixes = [remedy("corrupt-checkpoint#check-safetensors-redownload", path=quoted)]
        return hit("io.safetensors", "serialization_error", "Corrupt safetensors file", cause, fixes, ("corrupt-checkpoint",), _loc(ctx, [error_fact(ctx)]), 0.88, facts=facts)
    return None


def _loaded_file(ctx: Context) -> str | None:
    """The file a load call on the user's lines names (a string literal), when the traceback shows it."""
    for fr in reversed(ctx.failure.frames):
        m = re.search(r"(?:torch\.load|safe_open|load_file|open)\(\s*[rf]?['\"]([^'\"]+)['\"]", fr.source or "")
        if m:
            return m.group(1)
    return None


def _weights_only(ctx: Context, docs: tuple[str, ...]) -> RuleHit:
    """torch.load with weights_only=True met something outside its allow-list."""
    glob = ctx.search(r"Unsupported global: GLOBAL ([\w.]+)|Unsupported class:? ([\w.]+)")
    other = ctx.search(r"WeightsUnpickler error: ([^\n]+)")
    found = [error_fact(ctx)]
    what = (glob.group(1) or glob.group(2)) if glob else None
    if what:
        found.append(Fact("global", f"blocked global: {what}"))
        kind = ("a NumPy object (arrays, scalars or dtypes saved alongside the weights)" if what.startswith("numpy") else
                "a Python standard-library object" if what.split(".")[0] in ("builtins", "collections", "functools", "argparse", "typing", "pathlib", "enum") else
                "a PyTorch object that is not plain tensor data" if what.startswith("torch") else
                "a class from your own code or a library (a pickled model, config or training object)")
        cause = (f"torch.load ran with weights_only=True (the default since PyTorch 2.6), which only unpickles tensors and an allow-list "
                 f"of types. This file also contains `{what}`, {kind}, which is not on that list.")
        short = what.rsplit(".", 1)[-1]
        fixes = [
            remedy("torch-load-weights-only#allow-global-plain-name" if "." not in what else
                   "torch-load-weights-only#allow-global-from-main" if what.startswith("__main__.") else "torch-load-weights-only#allow-global-import",
                   global_name=short, module=what.rsplit(".", 1)[0] if "." in what else None),
            remedy("torch-load-weights-only#weights-only-false-trusted"),
            remedy("torch-load-weights-only#save-plain-state-dicts"),
        ]
        return hit("io.weights_only", "serialization_error", f"torch.load refused `{short}` (weights_only=True)", cause, fixes, docs,
                   _loc(ctx, found), 0.95, facts=Facts(names=(what,), call="torch.load"))
    detail = other.group(1).strip()[:200] if other else None
    cause = ("torch.load ran with weights_only=True (the default since PyTorch 2.6), and the restricted unpickler stopped on something "
             "it does not rebuild" + (f": {detail}" if detail else "") + ". The file holds objects beyond tensors and basic containers.")
    fixes = [
        remedy("torch-load-weights-only#trusted-file-weights-only-false"),
        remedy("torch-load-weights-only#allow-types-involved"),
        remedy("torch-load-weights-only#resave-with-plain-data"),
    ]
    return hit("io.weights_only_other", "serialization_error", "torch.load refused an object (weights_only=True)", cause, fixes, docs,
               _loc(ctx, found), 0.9, facts=Facts(call="torch.load"))
