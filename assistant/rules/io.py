"""Checkpoints: state_dict key/size mismatches, weights_only loading, corrupt or foreign files."""

from __future__ import annotations

import re

from assistant.rules.registry import Example, rule
from assistant.rules.base import with_location as _loc, Context, error_fact, fix, hit
from assistant.types import Fact, RuleHit

_KEYS = re.compile(r'"([^"]+)"')
_CHECKPOINT_WRAPPER_KEYS = {"epoch", "optimizer", "model", "state_dict", "model_state_dict", "optimizer_state_dict", "scheduler", "step", "global_step", "lr_scheduler", "args", "config", "best_acc", "loss", "scaler"}


def _keys_after(label: str, text: str) -> list[str]:
    m = re.search(label + r"[^:]*:\s*(.*?)(?:\n\s*(?:Missing|Unexpected|size mismatch)|\Z)", text, re.S)
    return _KEYS.findall(m.group(1)) if m else []



@rule(
    'io.state_dict_keys',
    category='state_dict_loading',
    docs=("state-dict-keys", "state-dict-size-mismatch"),
    priority=300,
    outcomes=('io.state_dict', 'io.state_dict_old', 'io.optimizer_state', 'io.dict_not_model', 'io.checkpoint_key'),
    examples=(),
)
def state_dict_keys(ctx: Context) -> RuleHit | None:
    """``Error(s) in loading state_dict``: prefixes, wrapped checkpoints, renamed layers, head size changes."""
    head = ctx.search(r"Error\(s\) in loading state_dict for (\w+)")
    old = ctx.search(r'(unexpected|missing) keys? "([^"]+)" in state_dict|(missing|unexpected) keys in state_dict: "?\{([^}]*)\}')
    if not head and old:
        key = old.group(2) or (old.group(4) or "").split(",")[0].strip(" '\"")
        kind = old.group(1) or old.group(3)
        prefix = key.split(".")[0] + "." if key.startswith(("module.", "_orig_mod.")) else None
        if prefix:
            cause = f"The checkpoint key `{key}` carries a `{prefix}` prefix the model does not use: the weights were saved from a model wrapped in nn.DataParallel/DistributedDataParallel (or torch.compile)."
            fixes = [fix(f"Strip the `{prefix}` prefix before loading", "", f"state = {{k.removeprefix('{prefix}'): v for k, v in state.items()}}\nmodel.load_state_dict(state)", "state-dict-keys")]
        else:
            cause = f"The checkpoint and the model disagree about parameter names: {kind} key `{key}`. The architecture changed or layers were renamed between saving and loading."
            fixes = [fix("Compare the key sets of checkpoint and model", "", "print(sorted(set(state) ^ set(model.state_dict())))", "state-dict-keys")]
        return hit("io.state_dict_old", "state_dict_loading", "state_dict keys do not match the model", cause, fixes, ("state-dict-keys",), _loc(ctx, [error_fact(ctx)]), 0.9)
    if not head:
        return _optimizer_state(ctx)
    text = ctx.text
    model = head.group(1)
    missing = _keys_after("Missing key\\(s\\) in state_dict", text)
    unexpected = _keys_after("Unexpected key\\(s\\) in state_dict", text)
    sizes = re.findall(r"size mismatch for ([\w.]+): copying a param with shape (torch\.Size\(\[[^\]]*\]\)) from checkpoint, the shape in current model is (torch\.Size\(\[[^\]]*\]\))", text)
    found = [error_fact(ctx)]
    if missing:
        found.append(Fact("keys", f"missing ({len(missing)}): {', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}"))
    if unexpected:
        found.append(Fact("keys", f"unexpected ({len(unexpected)}): {', '.join(unexpected[:5])}{' …' if len(unexpected) > 5 else ''}"))
    for name, ck, cur in sizes[:4]:
        found.append(Fact("shape", f"{name}: checkpoint {ck.replace('torch.Size(', '').rstrip(')')} vs model {cur.replace('torch.Size(', '').rstrip(')')}"))
    docs = ("state-dict-keys", "state-dict-size-mismatch")
    fixes = []
    prefix = _common_prefix(unexpected, missing)
    wrapper_keys = [k for k in unexpected if k.split(".")[0] in _CHECKPOINT_WRAPPER_KEYS]
    if prefix:
        p = prefix.rstrip(".")
        origin = {"module": "nn.DataParallel / DistributedDataParallel", "_orig_mod": "torch.compile", "model": "a wrapper object (e.g. a Lightning module's `model` attribute)"}.get(p, "a wrapper module")
        cause = (f"Every checkpoint key carries the prefix `{prefix}` that {model}'s own keys do not have (e.g. `{unexpected[0]}` vs `{missing[0] if missing else unexpected[0][len(prefix):]}`): "
                 f"the weights were saved from a model wrapped in {origin}.")
        fixes.append(fix(f"Strip the `{prefix}` prefix before loading", "", f"state = torch.load(path, map_location='cpu')\nstate = {{k.removeprefix('{prefix}'): v for k, v in state.items()}}\nmodel.load_state_dict(state)", "state-dict-keys"))
        fixes.append(fix("Save the unwrapped model next time", "", "torch.save((model.module if hasattr(model, 'module') else model).state_dict(), path)" if p == "module" else "torch.save(getattr(model, '_orig_mod', model).state_dict(), path)", "state-dict-keys"))
        title = f"Checkpoint keys have an extra `{prefix}` prefix"
    elif wrapper_keys:
        cause = (f"The checkpoint passed to load_state_dict is a training checkpoint dictionary (keys like {', '.join(repr(k) for k in wrapper_keys[:4])}), "
                 "not the model's state_dict itself. The weights are one of its entries.")
        sub = next((k for k in ("model_state_dict", "state_dict", "model") if k in wrapper_keys), "model_state_dict")
        fixes.append(fix(f"Load the `{sub}` entry", "", f"checkpoint = torch.load(path, map_location='cpu')\nmodel.load_state_dict(checkpoint['{sub}'])", "state-dict-keys"))
        title = "Whole training checkpoint passed to load_state_dict"
    elif sizes and not missing and not unexpected:
        names = [s[0] for s in sizes]
        head_like = all(re.search(r"(fc|classifier|head|out|logits|lm_head|decoder|proj)", n) for n in names)
        cause = f"{model} has the same layers as the checkpoint, but {len(sizes)} tensor(s) differ in shape (" + ", ".join(f"`{n}`" for n in names[:4]) + ")."
        if head_like:
            ck = sizes[0][1].replace("torch.Size([", "").rstrip("])").split(",")[0]
            cur = sizes[0][2].replace("torch.Size([", "").rstrip("])").split(",")[0]
            cause += f" Only the output head differs: the checkpoint was trained for {ck} outputs (classes) and your model has {cur} — the usual fine-tuning situation."
            fixes.append(fix("Load everything except the head, then train a new head", "Drop the mismatching keys and load non-strictly; check that only those keys are reported missing.", f"state = torch.load(path, map_location='cpu')\nfor k in {names!r}:\n    state.pop(k)\nresult = model.load_state_dict(state, strict=False)\nprint(result.missing_keys)  # should list only the head", "state-dict-size-mismatch"))
        else:
            cause += " The model was built with a different configuration than the checkpoint (hidden size, vocabulary size, number of classes, kernel size)."
            fixes.append(fix("Build the model with the checkpoint's configuration", "Read the hyper-parameters saved with the checkpoint and construct the model from them.", None, "state-dict-size-mismatch"))
        title = "Checkpoint tensor shapes differ from the model"
        docs = ("state-dict-size-mismatch", "state-dict-keys")
    else:
        cause = f"The checkpoint and {model} have different parameter names"
        if missing and unexpected:
            cause += f": {len(missing)} key(s) of the model are not in the checkpoint and {len(unexpected)} checkpoint key(s) are unknown to the model. Layers were renamed or the architecture changed between saving and loading."
        elif missing:
            cause += f": {len(missing)} key(s) the model needs are absent from the checkpoint (a newer model with extra layers, or a partial checkpoint)."
        else:
            cause += f": the checkpoint has {len(unexpected)} key(s) the model does not (an older/bigger architecture, or extra buffers)."
        if sizes:
            cause += f" In addition {len(sizes)} tensor(s) differ in shape."
        fixes.append(fix("Compare the two key sets", "", "ck = torch.load(path, map_location='cpu')\nprint(sorted(set(ck) - set(model.state_dict())))\nprint(sorted(set(model.state_dict()) - set(ck)))", "state-dict-keys"))
        fixes.append(fix("Rename keys to match, or load non-strictly and check what was skipped", "strict=False silently ignores mismatches: always print the result.", "res = model.load_state_dict(state, strict=False)\nprint(res.missing_keys, res.unexpected_keys)", "state-dict-keys"))
        title = "state_dict keys do not match the model"
    return hit("io.state_dict", "state_dict_loading", title, cause, fixes, docs, _loc(ctx, found), 0.95)


def _common_prefix(unexpected: list[str], missing: list[str]) -> str | None:
    """The prefix that turns checkpoint keys into model keys (``module.``, ``_orig_mod.``, ``model.``)."""
    if not unexpected:
        return None
    first = unexpected[0].split(".")[0] + "."
    if not all(k.startswith(first) for k in unexpected):
        return None
    stripped = {k[len(first):] for k in unexpected}
    if not missing or stripped & set(missing) or first in ("module.", "_orig_mod."):
        return first
    return None


def _optimizer_state(ctx: Context) -> RuleHit | None:
    if ctx.search(r"loaded state dict contains a parameter group that doesn't match the size of optimizer's group|loaded state dict has a different number of parameter groups"):
        cause = "The optimizer state was saved for a different set of parameters (the model changed, or parameters were frozen/unfrozen or grouped differently)."
        fixes = [fix("Build the optimizer over the same parameters, or start its state fresh", "Reload only the model weights when the architecture or param groups changed.", None, "state-dict-size-mismatch")]
        return hit("io.optimizer_state", "state_dict_loading", "Optimizer state does not match its parameters", cause, fixes, ("state-dict-size-mismatch", "state-dict-keys"), _loc(ctx, [error_fact(ctx)]), 0.9)
    m = ctx.search(r"'(?:collections\.)?OrderedDict' object has no attribute '(\w+)'|'dict' object has no attribute '(eval|to|cuda|forward|parameters|state_dict|load_state_dict)'")
    if m:
        cause = f"torch.load returned a state_dict (a dictionary of tensors), not a model object, so it has no `.{m.group(1) or m.group(2)}()` method."
        fixes = [fix("Build the model, then load the weights into it", "", "model = MyModel(**config)\nmodel.load_state_dict(torch.load(path, map_location='cpu'))\nmodel.eval()", "state-dict-keys")]
        return hit("io.dict_not_model", "state_dict_loading", "Loaded a state_dict, used it as a model", cause, fixes, ("state-dict-keys",), _loc(ctx, [error_fact(ctx)]), 0.9)
    m = ctx.search(r"KeyError: '(state_dict|model_state_dict|model|net|optimizer|optimizer_state_dict|epoch)'") or (ctx.exc_type == "KeyError" and re.search(r"'(state_dict|model_state_dict|model|optimizer|epoch)'", ctx.message))
    if m and any(re.search(r"ckpt|checkpoint|state|torch\.load", f.source or "") for f in ctx.failure.user_frames):
        key = m.group(1)
        cause = f"The checkpoint dictionary has no '{key}' entry: it was saved in a different layout (maybe it is the state_dict itself, or uses another key name)."
        fixes = [fix("Print the checkpoint's keys", "", "ckpt = torch.load(path, map_location='cpu')\nprint(list(ckpt)[:20])", "state-dict-keys")]
        return hit("io.checkpoint_key", "state_dict_loading", f"Checkpoint has no '{key}' entry", cause, fixes, ("state-dict-keys",), _loc(ctx, [error_fact(ctx)]), 0.85)
    return None


@rule(
    'io.serialization',
    category='serialization_error',
    docs=("torch-load-weights-only", "corrupt-checkpoint"),
    priority=301,
    outcomes=('io.weights_only', 'io.corrupt_zip', 'io.invalid_load_key', 'io.empty_file', 'io.unpicklable_save', 'io.missing_class', 'io.pickle_load', 'io.safetensors'),
    examples=(),
)
def serialization(ctx: Context) -> RuleHit | None:
    """torch.load/torch.save failures: weights_only, truncated zips, HTML/LFS files, unpicklable objects."""
    docs = ("torch-load-weights-only", "corrupt-checkpoint")
    if ctx.search(r"Weights only load failed|WeightsUnpickler error|Unsupported global: GLOBAL|weights_only"):
        glob = ctx.search(r"Unsupported global: GLOBAL ([\w.]+)")
        other = ctx.search(r"WeightsUnpickler error: ([^\n]+)")
        found = [error_fact(ctx)]
        what = glob.group(1) if glob else None
        if what:
            found.append(Fact("global", f"blocked global: {what}"))
        cause = ("Since PyTorch 2.6, torch.load defaults to weights_only=True: it only unpickles tensors and a small allow-list of types. This checkpoint contains "
                 + (f"`{what}`" if what else f"something outside that list ({other.group(1).strip()[:120]})" if other else "objects outside that list")
                 + (", a NumPy object (arrays or scalars saved alongside the weights)" if what and "numpy" in what else "")
                 + (", a class of your own (a whole pickled model or config object)" if what and not what.startswith(("numpy", "torch", "collections", "builtins")) else "")
                 + ".")
        fixes = [
            fix("If you trust the file, allow exactly that type", "Allow-listing keeps the protection against arbitrary code for everything else.",
                (f"torch.serialization.add_safe_globals([{what}])   # once, at start-up\n# or scoped:\nwith torch.serialization.safe_globals([{what}]):\n    ckpt = torch.load(path)") if what else "torch.serialization.add_safe_globals([MyClass])", "torch-load-weights-only"),
            fix("Or load with weights_only=False — only for files you created or trust", "Unpickling can execute arbitrary code.", "ckpt = torch.load(path, weights_only=False)", "torch-load-weights-only"),
            fix("Save plain state_dicts next time", "Tensors and basic Python types load under weights_only=True; convert numpy values with torch.as_tensor or .item().", "torch.save({'model': model.state_dict(), 'epoch': int(epoch)}, path)", "torch-load-weights-only"),
        ]
        return hit("io.weights_only", "serialization_error", "torch.load refused a non-weights object (weights_only=True)", cause, fixes, docs, _loc(ctx, found), 0.95)
    if ctx.search(r"PytorchStreamReader failed reading zip archive|failed finding central directory|PytorchStreamReader failed locating file|unexpected EOF|file read failed"):
        cause = ("The checkpoint is not a complete PyTorch zip archive: the file is truncated (the save was interrupted, the disk filled up, a copy/download "
                 "stopped early) or it is not a checkpoint at all (a Git LFS pointer or an HTML error page).")
        fixes = [
            fix("Check the file's size and first bytes", "A real checkpoint starts with 'PK' (a zip); an LFS pointer is a ~130-byte text file.", "ls -l model.pt; head -c 200 model.pt | xxd | head", "corrupt-checkpoint"),
            fix("Re-download or re-save it; save atomically", "Write to a temporary file and rename, so a crash never leaves a half-written checkpoint.", "tmp = path + '.tmp'\ntorch.save(state, tmp)\nos.replace(tmp, path)", "corrupt-checkpoint"),
        ]
        return hit("io.corrupt_zip", "serialization_error", "Checkpoint file is truncated or not a checkpoint", cause, fixes, docs[::-1], _loc(ctx, [error_fact(ctx)]), 0.93)
    m = ctx.search(r"invalid load key, '(.+?)'")
    if m:
        ch = m.group(1)
        story = {"<": "an HTML page (a failed download or a login page saved in place of the file)", "v": "a Git LFS pointer ('version https://git-lfs…'): the real file was never pulled"}.get(ch, "a file in another format (not a PyTorch/pickle checkpoint), or a corrupted one")
        cause = f"torch.load read the byte '{ch}' where a pickle/zip header should start: the file is {story}."
        fixes = [fix("Look at the file", "", "head -c 200 model.pt", "corrupt-checkpoint")]
        if ch == "v":
            fixes.append(fix("Fetch the LFS object", "", "git lfs pull", "corrupt-checkpoint"))
        return hit("io.invalid_load_key", "serialization_error", "Checkpoint file is not what torch.load expects", cause, fixes, ("corrupt-checkpoint",), _loc(ctx, [error_fact(ctx)]), 0.92)
    if ctx.exc_type == "EOFError" and ctx.search(r"Ran out of input"):
        cause = "The file being unpickled is empty (0 bytes) or cut short: a save that failed or a placeholder file."
        fixes = [fix("Check the file size and re-create it", "", "ls -l checkpoint.pt", "corrupt-checkpoint")]
        return hit("io.empty_file", "serialization_error", "Empty checkpoint file", cause, fixes, ("corrupt-checkpoint",), _loc(ctx, [error_fact(ctx)]), 0.88)
    saving = any("serialization.py" in f.file and "save" in (f.function or "") for f in ctx.failure.frames) or any("torch.save" in (f.source or "") for f in ctx.failure.frames)
    m = ctx.search(r"Can't pickle (?:local object '([^']+)'|<function ([^>]+)>|([^:\n]+?): attribute lookup)|Can't get local object '([^']+)'|cannot pickle '(\w+)' object")
    if m and saving:
        obj = next(g for g in m.groups() if g)
        cause = f"torch.save pickles everything it is given, and `{obj}` cannot be pickled (lambdas, local functions, open files, locks, generators). Saving the whole model object drags in every attribute."
        fixes = [fix("Save the state_dict, not the model object", "", "torch.save(model.state_dict(), path)", "corrupt-checkpoint")]
        return hit("io.unpicklable_save", "serialization_error", "torch.save hit an unpicklable object", cause, fixes, ("corrupt-checkpoint",), _loc(ctx, [error_fact(ctx)]), 0.9)
    m = ctx.search(r"Can't get attribute '(\w+)' on <module '([\w.]+)'")
    if m and any("serialization.py" in f.file or "torch.load" in (f.source or "") for f in ctx.failure.frames):
        cause = f"The file holds a pickled `{m.group(1)}` object that was defined in module `{m.group(2)}` when it was saved; that class cannot be found now (renamed, moved, or defined in a script's __main__)."
        fixes = [fix("Import/define the class under the same module path before loading — better, save and load state_dicts", "", "model = MyModel(); model.load_state_dict(torch.load(path))", "corrupt-checkpoint")]
        return hit("io.missing_class", "serialization_error", f"Pickled class `{m.group(1)}` not found", cause, fixes, ("corrupt-checkpoint",), _loc(ctx, [error_fact(ctx)]), 0.88)
    if ctx.search(r"A load persistent id instruction was encountered,? but no persistent_load function was specified"):
        cause = "A PyTorch checkpoint was opened with plain pickle.load (or another loader); tensors in it need torch.load."
        fixes = [fix("Use torch.load", "", "state = torch.load(path, map_location='cpu')", "corrupt-checkpoint")]
        return hit("io.pickle_load", "serialization_error", "Checkpoint opened with pickle instead of torch.load", cause, fixes, ("corrupt-checkpoint",), _loc(ctx, [error_fact(ctx)]), 0.9)
    if ctx.search(r"HeaderTooLarge|Error while deserializing header|SafetensorError"):
        cause = "safetensors could not read the file header: the file is truncated, an LFS pointer, or not a safetensors file."
        fixes = [fix("Check the file's size and re-download it", "", "ls -l model.safetensors", "corrupt-checkpoint")]
        return hit("io.safetensors", "serialization_error", "Corrupt safetensors file", cause, fixes, ("corrupt-checkpoint",), _loc(ctx, [error_fact(ctx)]), 0.88)
    return None
