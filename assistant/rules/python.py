"""Plain Python errors that kill training jobs, read in terms of the user's own code."""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path

from assistant.rules.registry import FALLBACK, Example, rule
from assistant.rules.base import basic_facts as _found, Context, hit, lazy_re, remedy
from assistant.types import Fact, Facts, Fix, Frame, RuleHit

_DOCS = ("python-errors", "module-misuse")
_BUILTIN = {
    "KeyError", "TypeError", "AttributeError", "NameError", "ValueError", "ZeroDivisionError", "AssertionError",
    "RecursionError", "NotImplementedError", "UnboundLocalError", "IndexError", "StopIteration", "SyntaxError",
    "IndentationError", "UnicodeDecodeError", "UnicodeEncodeError", "OverflowError", "LookupError", "json.decoder.JSONDecodeError", "JSONDecodeError",
}


@rule(
    'python.module_misuse',
    category='python_error',
    docs=(*_DOCS[::-1], "freezing-layers"),
    reads=("TypeError", "ValueError", "AttributeError", "NotImplementedError", "text", "other"),
    priority=68,
    outcomes=('python.super_init', 'python.missing_argument', 'python.too_many_args', 'python.wrapper_attribute', 'python.empty_params', 'python.no_forward',
              'python.module_not_callable', 'python.frozen_params'),
    examples=(
        Example("captured/cpu/module-missing-super-init", "python.super_init"),
        Example("captured/cpu/forward-missing-mask-argument", "python.missing_argument"),
        Example("realworld/dev/foundationpose-forward-missing-L-stale-code", "python.missing_argument"),
        Example("realworld/dev/torchsummaryx-forward-missing-idx-scale", "python.missing_argument"),
        Example("corpus/python/forward_too_many_args_captured.txt", "python.too_many_args"),
        Example("corpus/python/dataparallel_attribute_captured.txt", "python.wrapper_attribute"),
        Example("captured/cpu/layers-in-plain-list-empty-optimizer", "python.empty_params"),
        Example("corpus/python/optimizer_frozen_params_old_torch_deepvo.txt", "python.frozen_params"),
        Example("corpus/python/module_missing_forward_captured.txt", "python.no_forward"),
        Example("realworld/dev/fastformer-module-not-callable-import", "python.module_not_callable"),
        Example("corpus/python/module_not_callable_3dbbox.txt", "python.module_not_callable"),
        Example("corpus/python/module_not_callable_panpp.txt", "python.module_not_callable"),
    ),
)
def module_misuse(ctx: Context) -> RuleHit | None:
    """nn.Module mistakes that surface as Python errors."""
    if ctx.search(r"cannot assign module before Module\.__init__\(\) call|cannot assign parameters before Module\.__init__\(\) call"):
        frames = ctx.failure.frames
        cls = None
        for i, fr in enumerate(frames):
            if fr.function == "__init__" and fr.is_user and i > 0:
                m = re.search(r"([A-Z]\w*)\s*\(", frames[i - 1].source or "")
                cls = m.group(1) if m else None
        who = f"`{cls}`" if cls else "the Module subclass"
        cause = (f"{who}'s __init__ assigns a layer/parameter before calling super().__init__(), so nn.Module's bookkeeping "
                 "(the registries of submodules and parameters) does not exist yet.")
        fixes = [remedy("module-misuse#call-super-init-first", module_class=cls)]
        return hit("python.super_init", "python_error", "super().__init__() not called", cause, fixes, _DOCS[::-1], _found(ctx), 0.95,
                   facts=Facts(names=(cls,) if cls else ()))
    m = ctx.search(r"(?<!\w)(forward|__init__|__call__|\w+)\(\) missing (\d+) required positional arguments?: ([^\n]+)")
    if m:
        fn, n, names = m.groups()
        args = tuple(re.findall(r"'(\w+)'", names))
        cause = f"`{fn}()` was called without {n} required argument(s): {names.strip()}."
        if fn == "forward":
            cause += (" The model's forward signature and the call site disagree: the call passes fewer inputs than forward() "
                      "declares (an input added to forward but not to every caller, or a batch passed as one object).")
        fixes = [remedy("module-misuse#match-call-to-signature", function=fn, argument=args[0] if args else None)]
        return hit("python.missing_argument", "python_error", f"{fn}() missing argument(s)", cause, fixes, _DOCS[::-1], _found(ctx), 0.9,
                   facts=Facts(call=fn, names=args, numbers={"missing": float(n)}))
    m = ctx.search(r"(?<!\w)(\w+)\(\) takes (\d+) positional arguments? but (\d+) (?:were|was) given")
    if m:
        fn, want, got = m.groups()
        method = fn in ("forward", "__init__") or bool(ctx.search(r"\w+\." + re.escape(fn) + r"\(\) takes"))
        want_n, got_n = (int(want) - 1, int(got) - 1) if method else (int(want), int(got))
        cause = f"`{fn}()` accepts {want_n} argument(s){' besides self' if method else ''} but was called with {got_n}."
        if fn == "forward":
            cause += " The call passes more inputs to the model than its forward() declares (for example a target or a whole batch tuple)."
        fixes = [remedy("module-misuse#pass-only-declared-inputs")]
        return hit("python.too_many_args", "python_error", f"{fn}() got too many arguments", cause, fixes, _DOCS[::-1], _found(ctx), 0.9,
                   facts=Facts(call=fn, numbers={"accepted": float(want_n), "given": float(got_n)}))
    m = ctx.search(r"'(DataParallel|DistributedDataParallel|OptimizedModule|FullyShardedDataParallel)' object has no attribute '(\w+)'")
    if m:
        wrapper, attr = m.groups()
        cause = f"`{attr}` is an attribute of your model, but the model is wrapped in {wrapper}; the wrapper forwards calls, not attributes."
        fixes = [remedy("module-misuse#reach-through-orig-mod" if wrapper == "OptimizedModule" else "module-misuse#reach-through-module", attribute=attr)]
        return hit("python.wrapper_attribute", "python_error", f"{wrapper} has no attribute `{attr}`", cause, fixes, _DOCS[::-1], _found(ctx), 0.92,
                   facts=Facts(names=(wrapper, attr)))
    # The raw text too: notebook tracebacks with Windows paths can leave the final message out of the parsed one.
    if ctx.search(r"'module' object is not callable") or re.search(r"TypeError: 'module' object is not callable", ctx.failure.text):
        return _module_not_callable(ctx)
    if ctx.search(r"optimizer got an empty parameter list"):
        cause = ("The optimizer received no parameters: the model's parameters() is empty because its layers are kept in a plain "
                 "Python list/dict (not registered) or created in forward() instead of __init__, or a filter removed every parameter.")
        fixes = [remedy("module-misuse#register-with-modulelist")]
        return hit("python.empty_params", "python_error", "Optimizer got no parameters", cause, fixes, _DOCS[::-1], _found(ctx), 0.93)
    if ctx.search(r"optimizing a parameter that doesn't require gradients"):
        cause = ("The optimizer was given parameters with requires_grad=False (frozen, for example loaded pretrained layers); "
                 "older PyTorch releases refuse them when the optimizer is built.")
        fixes = [remedy("freezing-layers#freeze-then-filter")]
        return hit("python.frozen_params", "python_error", "Optimizer given frozen parameters", cause, fixes, ("freezing-layers", *_DOCS), _found(ctx), 0.9)
    m = ctx.search(r'Module \[(\w+)\] is missing the required "forward" function')
    if m:
        cause = (f"`{m.group(1)}` defines no forward() method that nn.Module can find: the method is misspelled or indented "
                 "outside the class, so calling the module reaches nn.Module's placeholder.")
        fixes = [remedy("module-misuse#define-forward", module_class=m.group(1))]
        return hit("python.no_forward", "python_error", "Module without forward()", cause, fixes, _DOCS[::-1], _found(ctx), 0.93,
                   facts=Facts(names=(m.group(1),)))
    return None


_CALLED = re.compile(r"(?:^|[=\s(])([A-Za-z_]\w*)\s*\(")


def _module_not_callable(ctx: Context) -> RuleHit:
    """`import X` followed by `X(...)`: the module (file) is called instead of the class or function inside it."""
    line = ctx.user_frame.source if ctx.user_frame and ctx.user_frame.source else ""
    if not line:
        # Notebook tracebacks mark the failing line with an arrow; pasted snippets quote it just above the message.
        marked = re.search(r"(?<!-)-+>\s*\d*\s+([^\n]+)", ctx.failure.text) or re.search(r"(?<![^\n])((?=[^\n]*\w[ \t]*\()[^\n]*)\n[^\n]*'module' object is not callable", ctx.failure.text)
        line = marked.group(1).strip(" `") if marked else ""
    called = _CALLED.search(line)
    name = called.group(1) if called else None
    cause = ((f"`{name}` on the failing line (`{line}`) is a module" if name else "The name called on the failing line is a module")
             + ", i.e. a .py file or package, not the class or function defined inside it: `import X` binds the file, so `X(...)` calls the module. "
             "This happens when a file and the class/function in it share a name.")
    target = name or "Name"
    fixes = [remedy("python-errors#import-the-name-itself", module=name)]
    return hit("python.module_not_callable", "python_error", f"Module `{target}` called like a function", cause, fixes, _DOCS, _found(ctx), 0.9,
               facts=Facts(call=name, names=(name,) if name else ()))


# "Exception ignored in: <function X.__del__ ...>": Python reporting an error in a destructor at teardown.
_IGNORED_IN_DEL = lazy_re(r"^Exception ignored in: <function [\w.]+\.__del__\b", re.M)
# A library's own message that a feature the code uses is gone since a named release ("... has been removed in v2.0.0").
# A package listed with its version ("transformers | 2.11.0", "transformers==2.11.0", "- transformers: 2.11.0", "transformers version 2.11.0"):
# the user's own account of the environment. The interpreter, torch itself and system components are not libraries calling each other.
_LISTED_PACKAGE = lazy_re(r"^[ \t*|-]*([A-Za-z][\w.-]*[A-Za-z0-9])[ \t]*(?:\||==|:|[ \t](?:version[ \t])?v?)[ \t]*v?(\d+(?:\.\d+)+)\b", re.M)
_NOT_A_LIBRARY = frozenset({"torch", "pytorch", "python", "cuda", "cudnn", "os", "gpu", "driver", "nvidia", "ubuntu", "windows", "macos", "gcc"})


def _listed_libraries(text: str) -> list[str]:
    """The libraries (other than torch) the user lists with a version, in order, without duplicates."""
    seen: dict[str, None] = {}
    for m in _LISTED_PACKAGE.finditer(text):
        name = m.group(1)
        if name.lower() not in _NOT_A_LIBRARY and not name.lower().startswith(("python", "cuda", "nvidia")):
            seen.setdefault(name, None)
    return list(seen)


_REMOVED_IN_VERSION = lazy_re(r"\b(?:has been|have been|was|were) removed in (?:v(?:ersion)?\s?)?\d+\.\d+", re.I)
# A config-driven framework's registry lookup ("X is not in the mmdet::model registry", "No object named 'X' found in 'BACKBONE' registry").
_REGISTRY_LOOKUP = lazy_re(r"\bis not in the [\w:]+ registry\b|\bfound in '\w+' registry\b")
# PyTorch's dispatcher names an ATen operator that has no kernel for a device or backend ("The operator 'aten::roll' is not
# currently implemented for the MPS device", "Could not run 'aten::foo' with arguments from the 'CUDA' backend"): a property
# of the installed build and device, not of the program's logic.
_OPERATOR_NOT_IMPLEMENTED = lazy_re(r"\boperator \\?'aten::\w+\\?' is not (?:currently )?implemented for the \w+ device|\bCould not run \\?'(?:aten|quantized)::\w+")
# An exception line ("SomeError: ...", "Exception: ...") at the start of a line.
_ERROR_LINE = lazy_re(r"^(?:[\w.]+\.)?\w*(?:Error|Exception): \S", re.M)


_MISSING_ATTRIBUTE = lazy_re(r"(?:'([\w.]+)' object|type object '([\w.]+)') has no attribute '(\w+)'")
# Attributes that are missing for a reason of the user's own making whatever the class: `.module` exists only on a
# wrapped model (DataParallel, DDP), so its absence means the model was never wrapped (or was unwrapped).
_WRAPPER_ONLY_ATTRIBUTES = frozenset({"module"})


def _read_on_own_instance(frames: tuple[Frame, ...], attr: str) -> bool:
    """The innermost frame that reads ``.attr`` is the user's and reads it from ``self``: the object is an instance
    of the user's own class, whatever that class is called."""
    for frame in reversed(frames):
        if frame.source and re.search(r"\." + re.escape(attr) + r"\b", frame.source):
            return frame.is_user and re.search(r"\bself\." + re.escape(attr) + r"\b", frame.source) is not None
    return False


def _library_owned_attribute(msg: str, text: str, suggested: bool, frames: tuple[Frame, ...] = ()) -> tuple[str, str, tuple[str, ...]] | None:
    """(class, attribute, owning packages) when the object lacking the attribute is of a class that a third-party
    library defines (by the class atlas) and the user's text does not define a class of that name; else None.

    Python's own suggestion ("Did you mean") points at a misspelling, so it keeps the generic reading; so does an
    attribute the user's own method reads from ``self`` (a class of the user's that shares a library class's name).
    """
    from assistant.atlas.classes import library_owning

    m = _MISSING_ATTRIBUTE.search(msg)
    if m is None or suggested:
        return None
    owner, attr = (m.group(1) or m.group(2)), m.group(3)
    short = owner.rsplit(".", 1)[-1]
    if attr in _WRAPPER_ONLY_ATTRIBUTES or re.search(r"\bclass\s+" + re.escape(short) + r"\b", text) or _read_on_own_instance(frames, attr):
        return None
    packages = library_owning(short)
    return (short, attr, packages) if packages else None


@lru_cache(maxsize=1)
def _torch_nn_sources() -> str:
    """The Python source of torch's built-in layers (``torch/nn/modules``), read from the installed torch without importing
    it; empty when torch is not installed here, so every reading that needs it stays generic."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return ""
    folder = Path(next(iter(spec.submodule_search_locations))) / "nn" / "modules"
    try:
        return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(folder.glob("*.py")))
    except OSError:
        return ""


def _torch_layer_sets(cls: str, attr: str, depth: int = 0) -> bool:
    """Whether torch's own layer class ``cls`` (or a base class of it inside torch.nn) sets attribute ``attr``: by
    ``self.attr =`` or, for nn.Module's bookkeeping, by ``__setattr__("attr", ...)``, in the class's own body."""
    source = _torch_nn_sources()
    head = re.search(r"^class " + re.escape(cls) + r"(?:\(([^)\n]*)\))?:", source, re.M)
    if head is None or depth > 4:
        return False
    end = source.find("\nclass ", head.end())
    body = source[head.end():end if end >= 0 else None]
    if re.search(r"\bself\." + re.escape(attr) + r"\s*(?::[^=\n]*)?=(?!=)|__setattr__\(['\"]" + re.escape(attr) + r"['\"]", body):
        return True
    bases = [b.strip().rsplit(".", 1)[-1] for b in (head.group(1) or "").split(",")]
    return any(_torch_layer_sets(b, attr, depth + 1) for b in bases if re.fullmatch(r"[A-Za-z_]\w*", b) and b != cls)


def _layer_from_older_torch(msg: str, text: str, suggested: bool, frames: tuple[Frame, ...]) -> tuple[str, str] | None:
    """(class, attribute) when a built-in PyTorch layer object lacks an attribute that the installed torch's own class
    sets: the object was not built by this release's constructor (unpickled from a file saved under an older release).
    A Python suggestion (a misspelling), a class the user's text defines, or an attribute the user's own method reads
    from ``self`` keep the generic reading."""
    m = _MISSING_ATTRIBUTE.search(msg)
    if m is None or suggested or m.group(2):
        return None
    owner, attr = m.group(1).rsplit(".", 1)[-1], m.group(3)
    if re.search(r"\bclass\s+" + re.escape(owner) + r"\b", text) or _read_on_own_instance(frames, attr):
        return None
    return (owner, attr) if _torch_layer_sets(owner, attr) else None


def _layer_from_older_torch_hit(layer: tuple[str, str], at: str, found: list[Fact]) -> RuleHit:
    owner, attr = layer
    found.append(Fact("environment", f"the installed torch's `nn.{owner}` sets `{attr}`"))
    cause = (f"`{owner}` is a built-in PyTorch layer and the installed release's `nn.{owner}` has an attribute `{attr}`, yet this `{owner}` "
             f"object{at} has none: it was not built by this release's constructor but unpickled from a model file (a whole model saved "
             "with torch.save) written under an older PyTorch, before that attribute was added. The installed torch and the one the model "
             "was saved with are out of step.")
    fixes = [remedy("whole-model-pickle#older-torch-for-pickled-layers"), remedy("whole-model-pickle#update-project-for-new-torch"),
             remedy("whole-model-pickle#patch-missing-layer-attribute", layer_kind=owner, argument=attr),
             remedy("whole-model-pickle#save-state-dict")]
    return hit("python.library_class_attribute", "environment_error", f"{owner} pickled by an older PyTorch lacks `{attr}`", cause, fixes,
               ("whole-model-pickle", "checkpoint-newer-torch"), found, 0.62, facts=Facts(names=(owner, attr), package="torch"))


# Python 3.10+ names the method with its class: "UNet2DConditionModel.forward() got an unexpected keyword argument 'x'".
_QUALIFIED_SIGNATURE = lazy_re(r"\b([A-Za-z_]\w*)\.(\w+)\(\) (?:got an unexpected keyword argument '\w+'|missing \d+ required (?:positional|keyword-only) argument)")


def _library_method_signature(msg: str, text: str) -> tuple[str, str, tuple[str, ...]] | None:
    """(class, method, owning packages) when a call does not fit the signature of a method whose class a third-party
    library defines (by the class atlas) and the user's text defines no class of that name; else None."""
    from assistant.atlas.classes import library_owning

    m = _QUALIFIED_SIGNATURE.search(msg)
    if m is None or re.search(r"\bclass\s+" + re.escape(m.group(1)) + r"\b", text):
        return None
    packages = library_owning(m.group(1))
    return (m.group(1), m.group(2), packages) if packages else None


_INSTALLED_PACKAGE = lazy_re(r"[/\\](?:site|dist)-packages[/\\]([A-Za-z_]\w*)[/\\]")
_UNEXPECTED_KEYWORD = lazy_re(r"\b(\w+)\(\) got an unexpected keyword argument '\w+'")
# Packages whose calls into the user's code are the norm (a framework calling the user's model, dataset or hook), or
# that are the interpreter's own: a call they make that does not fit says nothing about two releases.
_NOT_A_THIRD_PARTY_CALLER = frozenset({"torch", "pip", "setuptools", "_pytest", "IPython", "ipykernel", "typing_extensions"})


def _library_made_call(msg: str, frames: tuple[Frame, ...]) -> tuple[str, str] | None:
    """(package, function) when the innermost frame, the one whose call did not fit, lies inside an installed
    third-party package: that package passes a keyword its callee (in another release of a library it drives) does not
    take. A ``forward()`` is left out: frameworks pass the batch's keys to the user's own model."""
    m = _UNEXPECTED_KEYWORD.search(msg)
    if m is None or m.group(1) == "forward" or not frames:
        return None
    where = _INSTALLED_PACKAGE.search(frames[-1].file)
    if where is None or where.group(1) in _NOT_A_THIRD_PARTY_CALLER:
        return None
    return where.group(1), m.group(1)


def _library_fixes(packages: tuple[str, ...]) -> list[Fix]:
    package = packages[0] if len(packages) == 1 else None
    return [remedy("library-version-mismatch#install-required-version", package=package or "<library>"),
            remedy("library-version-mismatch#compatible-releases", packages=" and ".join(packages)),
            remedy("library-version-mismatch#pip-show-installed", package=package or " ".join(packages))]


def _library_attribute_hit(owned: tuple[str, str, tuple[str, ...]], at: str, found: list[Fact]) -> RuleHit:
    """A third-party library's object lacks an attribute: the code reading it and the library are from different releases."""
    owner_class, attr, packages = owned
    found.append(Fact("environment", f"`{owner_class}` is a class of {', '.join(packages)}"))
    cause = (f"`{owner_class}` is a class of {' / '.join(packages)}, not of your program, and it has no attribute `{attr}`{at}: the code "
             "that reads it was written for another release of that library (the attribute was added later, or renamed or "
             "removed since), or another package that drives it is at a release made for a different version of it.")
    return hit("python.library_class_attribute", "environment_error", f"{owner_class} (from {' / '.join(packages)}) lacks `{attr}`: a release mismatch",
               cause, _library_fixes(packages), ("library-version-mismatch",), found, 0.62,
               facts=Facts(names=(owner_class, attr), package=packages[0] if len(packages) == 1 else None))


def _library_signature_hit(skewed: tuple[str, str, tuple[str, ...]], msg: str, at: str, found: list[Fact]) -> RuleHit:
    """A third-party library's method is called with arguments its installed release does not take."""
    owner_class, method, packages = skewed
    found.append(Fact("environment", f"`{owner_class}` is a class of {', '.join(packages)}"))
    cause = (f"`{owner_class}.{method}()` belongs to {' / '.join(packages)}, and the call{at} does not fit its signature in the "
             f"installed release ({msg.strip()}): the calling code (your own, or another package that drives it) was written for a "
             "release where that argument existed, or for one that added it later.")
    return hit("python.library_class_signature", "environment_error", f"{owner_class}.{method}() called with another release's arguments",
               cause, _library_fixes(packages), ("library-version-mismatch",), found, 0.6,
               facts=Facts(names=(owner_class, method), package=packages[0] if len(packages) == 1 else None))


def _library_call_hit(caller: tuple[str, str], msg: str, found: list[Fact]) -> RuleHit:
    """A call made inside an installed package passes a keyword that its callee does not take."""
    package, function = caller
    frame_fact = f"the call that does not fit is made inside {package}"
    found.append(Fact("environment", frame_fact))
    cause = (f"The call that fails is made inside the installed {package} package, not in your code ({msg.strip()}): {package} passes "
             f"`{function}()` an argument that the installed release of what it calls does not take. {package} and a library it drives "
             f"(or {package} and the code it was asked to run) are from releases not made for each other.")
    return hit("python.library_call_signature", "environment_error", f"A call inside {package} does not fit its callee: a release mismatch",
               cause, _library_fixes((package,)), ("library-version-mismatch",), found, 0.58, facts=Facts(names=(function,), package=package))


def _teardown_fallout(ctx: Context) -> bool:
    """The chosen error was raised in ``__del__`` at teardown, after another exception earlier in the text: an object whose
    ``__init__`` failed is destroyed and its destructor touches attributes that were never set."""
    text = ctx.failure.text or ctx.text
    ignored = _IGNORED_IN_DEL.search(text)
    return bool(ignored and _ERROR_LINE.search(text, 0, ignored.start()))


@rule(
    'python.python_exception',
    category='python_error',
    docs=_DOCS,
    also=("environment_error",),
    reads=("KeyError", "TypeError", "AttributeError", "NameError", "ValueError", "ArithmeticError", "AssertionError",
           "NotImplementedError", "IndexError", "RuntimeError", "text", "other"),
    priority=FALLBACK + 1,
    outcomes=('python.builtin', 'python.key_error', 'python.reader_none', 'python.none_attribute', 'python.attribute_error', 'python.type_error',
              'python.index_error', 'python.name_error', 'python.recursion', 'python.tensor_to_scalar', 'python.peft_targets',
              'python.library_attribute_version', 'python.timm_factory_keyword', 'python.library_class_attribute',
              'python.library_class_signature', 'python.library_call_signature'),
    examples=(
        Example("corpus/python/valueerror_config_float_captured.txt", "python.builtin"),
        Example("captured/cpu/config-key-renamed-keyerror", "python.key_error"),
        Example("corpus/python/keyerror_batch_dict_captured.txt", "python.key_error"),
        Example("corpus/python/imread_none_from_numpy_yolact.txt", "python.reader_none"),
        Example("corpus/python/imread_none_subscript_gradcam.txt", "python.reader_none"),
        Example("corpus/python/imread_none_subscript_contournet.txt", "python.reader_none"),
        Example("corpus/python/imread_warning_none_subscript_dcgan.txt", "python.reader_none"),
        Example("corpus/python/attributeerror_nonetype_missing_return_captured.txt", "python.none_attribute"),
        Example("realworld/dev/s2fpn-nonetype-copy-windows-path", "python.none_attribute"),
        Example("corpus/python/nonetype_shape_image_tcmr.txt", "python.none_attribute"),
        Example("corpus/python/nonetype_shape_getitem_retinaface.txt", "python.none_attribute"),
        Example("corpus/python/attributeerror_typo_captured.txt", "python.attribute_error"),
        Example("corpus/python/typeerror_tensor_not_callable_captured.txt", "python.type_error"),
        Example("corpus/python/indexerror_dataset_len_captured.txt", "python.index_error"),
        Example("corpus/python/nameerror_undefined_criterion_captured.txt", "python.name_error"),
        Example("corpus/python/recursionerror_forward_calls_self_captured.txt", "python.recursion"),
        Example("corpus/python/item_multi_element_loss_captured.txt", "python.tensor_to_scalar"),
        Example("corpus/python/float_multi_element_tensor_captured.txt", "python.tensor_to_scalar"),
        Example("corpus/python/peft_target_modules_not_found.txt", "python.peft_targets"),
        Example("corpus/python/attributeerror_library_versions_listed.txt", "python.library_attribute_version"),
        Example("corpus/python/timm_create_model_num_classes_mae.txt", "python.timm_factory_keyword"),
        Example("corpus/python/timm_default_cfg_detic.txt", "python.timm_factory_keyword"),
        Example("corpus/python/attributeerror_library_class_zero3_optimizer.txt", "python.library_class_attribute"),
        Example("corpus/python/typeerror_library_method_keyword_captured.txt", "python.library_class_signature"),
        Example("corpus/python/typeerror_library_call_keyword_8bit.txt", "python.library_call_signature"),
    ),
)
def python_exception(ctx: Context) -> RuleHit | None:
    """Fallback for built-in Python exceptions raised by user code, one answer per exception family."""
    exc = ctx.exc_type
    msg = ctx.message.strip().splitlines()[0] if ctx.message.strip() else ""
    if not exc:
        # A report in prose that quotes the error ("there is an AttributeError: 'NoneType' object has no attribute 'copy'").
        quoted = re.search(r"\bAttributeError: ('NoneType' object has no attribute '\w+')", ctx.text)
        if quoted:
            exc, msg = "AttributeError", quoted.group(1)
        else:
            # A report in prose that quotes a library's object lacking an attribute, or its method refusing an argument.
            said = re.search(r"\b(?:AttributeError|TypeError): ([^\n`]{1,300})", ctx.text)
            quote = said.group(1) if said else ""
            owned = _library_owned_attribute(quote, ctx.text, "Did you mean" in quote) if quote else None
            if owned is not None:
                return _library_attribute_hit(owned, "", _found(ctx))
            skewed = _library_method_signature(quote, ctx.text) if quote else None
            if skewed is not None:
                return _library_signature_hit(skewed, quote, "", _found(ctx))
    many = ctx.search(r"only one element tensors can be converted to Python scalars|a Tensor with (\d+) elements cannot be converted to Scalar")
    if many and exc in ("ValueError", "RuntimeError"):
        return _tensor_to_scalar(ctx, many)
    if exc not in _BUILTIN:
        return None
    if _teardown_fallout(ctx):
        return None  # a destructor failing because its object's __init__ raised first: that earlier error is the failure
    if _REMOVED_IN_VERSION.search(msg):
        return None  # a library says the API the code uses was removed in a named release: a version mismatch, not the program's logic
    if exc == "NotImplementedError" and _OPERATOR_NOT_IMPLEMENTED.search(msg):
        return None  # an operator missing from a device's backend in the installed PyTorch: the backend's documents answer
    if exc == "KeyError" and _REGISTRY_LOOKUP.search(msg):
        return None  # a framework's registry has no class of that name: how the package is installed and imported, not a dict key
    frame = ctx.user_frame
    src = frame.source if frame and frame.source else ""
    at = f" in {ctx.where()}" if frame else ""
    found = _found(ctx)
    title = f"Python {exc}" + (f" in {frame.function}" if frame and frame.function else "")
    if exc == "KeyError":
        return _key_error(ctx, msg, src, at, found, title)
    if exc in ("TypeError", "AttributeError") and "NoneType" in msg:
        reader = _NONE_READER.search(src)
        if reader:
            return _reader_returned_none(ctx, reader.group(1), reader.group(2).split(",")[0].strip() or "path", msg, at, found, title)
        warned = _CV_WARNING.search(ctx.failure.text)
        if warned:
            found.append(Fact("log", f"OpenCV could not read '{warned.group(1)}'"))
            return _reader_returned_none(ctx, "cv2.imread", "path", msg, at, found, title, unread=warned.group(1))
    if exc == "AttributeError":
        m = re.search(r"'([\w.]+)' object has no attribute '(\w+)'", msg)
        if m and m.group(1) == "NoneType":
            cause = (f"A value that should be an object is None{at} when `.{m.group(2)}` is read: the call that produced it "
                     "returned nothing on this path (a missing `return`, a loader that returns None on failure, an optional value never set).")
            fixes = [remedy("python-errors#trace-none-value")]
            attr = m.group(2)
            owner = re.search(r"([\w.\[\]'\"]+)\." + re.escape(attr) + r"\b", src)
            if owner and re.search(r"\b(?:cfg|config|conf|args|opt|opts|hparams|params|settings)\b", owner.group(1), re.I):
                # `config.a.b.attr` with b None: the config file has the key but with a null value, or an older layout.
                cause += f" Here `{owner.group(1)}` comes from the configuration and is None."
                fixes.insert(0, remedy("python-errors#fill-config-entry", variable=owner.group(1)))
            elif attr in ("copy", "shape", "astype", "transpose", "resize", "size") and re.search(r"imread|image|img|\.png|\.jpe?g|path", src + "\n" + ctx.failure.text, re.I):
                # Image readers (cv2.imread) return None for a path they cannot open instead of raising.
                fixes.insert(0, remedy("python-errors#check-image-path-none"))
            return hit("python.none_attribute", "python_error", title, cause, fixes, _DOCS, found, 0.75,
                       facts=Facts(names=("NoneType", m.group(2))))
        hint = re.search(r"Did you mean: '(\w+)'", msg)
        raw = ctx.failure.text or ctx.text
        libraries = _listed_libraries(raw) if m and not hint and not re.search(r"\bclass " + re.escape(m.group(1).split(".")[-1]) + r"\b", raw) else []
        if m and len(libraries) >= 2:
            # A library's own object lacks an attribute and the user lists several libraries' versions: one calls the other
            # through an API the installed release of the other renamed or removed.
            found.append(Fact("environment", "listed versions: " + ", ".join(libraries)))
            cause = (f"A `{m.group(1)}` object has no attribute `{m.group(2)}`{at}, and the libraries you list ({', '.join(libraries)}) are at "
                     "versions that may not be made for each other: one library calls the other through an attribute the installed release "
                     "renamed or removed.")
            fixes = [remedy("library-version-mismatch#compatible-releases", packages=" and ".join(libraries)),
                     remedy("library-version-mismatch#pip-show-installed")]
            return hit("python.library_attribute_version", "environment_error", "AttributeError between libraries at mismatched versions", cause, fixes, ("library-version-mismatch",), found, 0.7,
                       facts=Facts(names=(m.group(1), m.group(2))))
        owned = _library_owned_attribute(msg, raw, hint is not None, ctx.failure.frames)
        if owned is not None:
            return _library_attribute_hit(owned, at, found)
        layer = _layer_from_older_torch(msg, raw, hint is not None, ctx.failure.frames)
        if layer is not None:
            return _layer_from_older_torch_hit(layer, at, found)
        cause = ((f"A `{m.group(1)}` object has no attribute `{m.group(2)}`{at}: " if m else f"An attribute lookup failed{at} ({msg}): ")
                 + (f"a misspelling of `{hint.group(1)}`." if hint else "the object is of a different type than the code assumes, the name is misspelled, or the API differs in the installed version."))
        fixes = [remedy("python-errors#inspect-attributes")]
        return hit("python.attribute_error", "python_error", title, cause, fixes, _DOCS, found, 0.72,
                   facts=Facts(names=(m.group(1), m.group(2)) if m else ()))
    if exc == "TypeError":
        cause = f"A value of the wrong type reached the call{at}: {msg}."
        call = None
        nc = re.search(r"'(\w+)' object is not callable", msg)
        if nc:
            cause += f" A name used as a function holds a `{nc.group(1)}` value (a variable or attribute that shadows a function/layer)."
            call = nc.group(1)
        kw = re.search(r"got an unexpected keyword argument '(\w+)'", msg)
        if kw:
            timm = _timm_factory_keyword(ctx, kw.group(1))
            if timm is not None:
                return timm
        skewed = _library_method_signature(msg, ctx.failure.text or ctx.text)
        if skewed is not None:
            return _library_signature_hit(skewed, msg, at, found)
        caller = _library_made_call(msg, ctx.failure.frames)
        if caller is not None:
            return _library_call_hit(caller, msg, found)
        fixes = [remedy("python-errors#check-types-and-signature")]
        if call == "NoneType":
            called = _CALLED.search(src)
            name = called.group(1) if called else None
            # `x = x.eval()` / `x = lst.sort()`: the name now holds what an in-place method returned.
            reassigned = re.search(r"(?<![\w.])(\w+)\s*=\s*\1\.(\w+)\(", ctx.text)
            if reassigned or name:  # a bare name is called (not an attribute such as an optional `self.head`)
                var = reassigned.group(1) if reassigned else name
                cause += (f" When `{var}` was assigned from one of its own methods that works in place (an overridden train()/eval() "
                          "without `return self`, a list's sort()), it now holds None.")
                fixes.insert(0, remedy("python-errors#keep-object-not-method-result", variable=var))
        return hit("python.type_error", "python_error", title, cause, fixes, _DOCS, found, 0.7,
                   facts=Facts(call=call, argument=kw.group(1) if kw else None))
    if exc == "IndexError":
        in_dataset = bool(frame and frame.function == "__getitem__")
        cause = (f"A Python sequence was indexed past its end{at}: {msg}."
                 + (" It happens in a Dataset's __getitem__: __len__ reports more items than the underlying list holds." if in_dataset else ""))
        fixes = [remedy("python-errors#check-lengths")]
        return hit("python.index_error", "python_error", title, cause, fixes, _DOCS, found, 0.7)
    if exc == "NameError":
        name = re.search(r"name '(\w+)' is not defined", msg)
        cause = (f"`{name.group(1)}` is used{at} but never defined in that scope" if name else f"A name is used before it is defined{at}: {msg}") \
            + " (a typo, a missing import, or a variable defined only in another function or branch)."
        fixes = [remedy("python-errors#define-or-import")]
        return hit("python.name_error", "python_error", title, cause, fixes, _DOCS, found, 0.75,
                   facts=Facts(names=(name.group(1),) if name else ()))
    targets = re.search(r"Target modules? (.{1,200}?) (?:not found in the base model|is not supported)", msg)
    if exc == "ValueError" and targets:
        names = targets.group(1)
        cause = (f"The adapter configuration asks to wrap {names}, but the model has no layer of that name (or of a supported type): "
                 "`target_modules` is matched against this model's own module names, and architectures name (and sometimes fuse) "
                 "their attention projections differently.")
        fixes = [remedy("peft-target-modules#list-linear-names"), remedy("peft-target-modules#target-models-own-names"),
                 remedy("peft-target-modules#target-all-linear")]
        return hit("python.peft_targets", "python_error", "LoRA target modules not in this model", cause, fixes, ("peft-target-modules", *_DOCS),
                   found, 0.9, facts=Facts(names=(names,)))
    if exc == "RecursionError":
        cause = (f"Infinite recursion{at}: a function keeps calling itself" + (f" (`{src}`)" if src else "")
                 + ", for example a forward() that calls the module itself or a property that reads itself.")
        fixes = [remedy("python-errors#repeating-frames")]
        return hit("python.recursion", "python_error", title, cause, fixes, _DOCS, found, 0.75)
    cause = f"{exc} raised{at}: {msg}" + ("" if msg.endswith(".") else ".") + " This is an error in the program's own logic or data, not a PyTorch failure."
    fixes = [remedy("python-errors#start-from-last-frame")]
    return hit("python.builtin", "python_error", title, cause, fixes, _DOCS, found, 0.7)


# Keywords only timm's model factory hands to a model class (the per-model configuration, called default_cfg before
# timm 0.6 and pretrained_cfg since): a constructor rejecting one was built through timm, whatever the traceback shows.
_TIMM_CFG_KEYWORDS = frozenset({"default_cfg", "pretrained_cfg", "pretrained_cfg_overlay"})


def _timm_factory_keyword(ctx: Context, name: str) -> RuleHit | None:
    """``__init__() got an unexpected keyword argument`` from a model that timm's factory builds: a keyword of timm's own
    configuration (the model code and the installed timm are of different releases), or any keyword when the traceback
    passes through timm's ``create_model``/``build_model_with_cfg`` (the project's constructor does not take what the
    factory forwards)."""
    # timm and its factory on one line, tested line by line: one pattern with `[^\n]*` between them is quadratic.
    through_timm = any(re.search(r"[/\\]timm[/\\]", f.file) for f in ctx.failure.frames) or any(
        "timm" in line and re.search(r"\btimm\b", line) and re.search(r"\b(?:create_model|build_model_with_cfg)\b", line)
        for line in ctx.failure.text.splitlines())
    if name not in _TIMM_CFG_KEYWORDS and not through_timm:
        return None
    found = _found(ctx)
    if name in _TIMM_CFG_KEYWORDS:
        cause = (f"timm's model factory handed `{name}` to a model constructor that does not take it: `{name}` is timm's per-model "
                 "configuration, whose name and handling changed between timm releases, so the model code (a project's backbone built "
                 "through timm) was written for another timm release than the one installed.")
        fixes = [remedy("timm-create-model-kwargs#install-project-timm"), remedy("timm-create-model-kwargs#accept-factory-kwargs")]
        return hit("python.timm_factory_keyword", "environment_error", f"timm passes `{name}` the model does not accept", cause, fixes,
                   ("timm-create-model-kwargs", "library-version-mismatch"), found, 0.85, facts=Facts(argument=name))
    cause = (f"timm's `create_model` forwards its keyword arguments (here `{name}`) to the registered model function and on to the model "
             "class; this model's constructor lists only its own arguments and rejects the one the factory passes.")
    fixes = [remedy("timm-create-model-kwargs#accept-factory-kwargs"), remedy("timm-create-model-kwargs#install-project-timm")]
    return hit("python.timm_factory_keyword", "python_error", f"The model built by timm does not accept `{name}`", cause, fixes,
               ("timm-create-model-kwargs", *_DOCS), found, 0.85, facts=Facts(argument=name))


# Words that put the model on several GPUs through a wrapper that gathers one output (and one loss) per GPU.
_MULTI_GPU = re.compile(r"\bDataParallel\b|multi[- ]?gpus?\b|(?:multiple|several|two|(?<!\d)\d{1,4}|many) (?:GPUs|cards)\b|device_ids|nn\.parallel", re.I)


def _tensor_to_scalar(ctx: Context, m: re.Match[str]) -> RuleHit:
    """item()/float() on a tensor of several elements: a value that was never reduced to one number."""
    frame = ctx.user_frame
    src = frame.source if frame and frame.source else ""
    if not src:
        # The line's first visible character is required after the indent, so the indent and the rest cannot trade
        # characters: linear on a long blank line (the two runs could split it every way).
        quoted = re.search(r"(?<![^\n])[ \t]*(\S[^\n]*(?:\.item\(\)|float\(|int\()[^\n]*)\n[^\n]*(?:only one element|cannot be converted to Scalar)", ctx.failure.text)
        src = quoted.group(1).strip() if quoted else ""
    at = f" in {ctx.where()}" if frame else ""
    n = f" has {m.group(1)} elements" if m.group(1) else " has more than one element"
    line = f" (`{src}`)" if src and not frame else ""
    cause = f"The tensor converted to a Python number{at}{line}{n}, but item(), float() and int() need exactly one."
    multi = _MULTI_GPU.search(ctx.text)
    if multi:
        cause += (f" The text mentions {multi.group(0)}: a loss computed inside a module wrapped in nn.DataParallel comes back with "
                  "one value per GPU, so it must be reduced (or the run kept on one GPU) before it is read as a number.")
    else:
        cause += (" The value was never reduced: a loss with reduction='none', a per-sample or per-class metric, or a loss returned "
                  "by a DataParallel-wrapped model (one value per GPU).")
    fixes = [remedy("tensor-to-python-scalar#reduce-then-item"), remedy("tensor-to-python-scalar#convert-whole-tensor")]
    facts = Facts(numbers={"elements": float(m.group(1))} if m.group(1) else {}, flags=frozenset({"multi_gpu"}) if multi else frozenset())
    return hit("python.tensor_to_scalar", "python_error", "Tensor with several elements converted to a number", cause, fixes,
               ("tensor-to-python-scalar",) + _DOCS, _found(ctx), 0.85, facts=facts)


# OpenCV 4.x logs this (as a warning, not an error) when imread fails, then returns None.
_CV_WARNING = re.compile(r"imread_\('([^'\n]*)'\): can't open/read file")
# Readers that return None instead of raising when a file is missing or cannot be decoded (OpenCV's image readers).
_NONE_READER = re.compile(r"\b(cv2?\.(?:imread|imdecode|imreadmulti))\s*\(([^()]*(?:\([^()]*\))?[^()]*)\)")


def _reader_returned_none(ctx: Context, fn: str, arg: str, msg: str, at: str, found: list[Fact], title: str, unread: str | None = None) -> RuleHit:
    """A NoneType error where a reader that returns None on failure (cv2.imread) is on the failing line, or logged that it failed."""
    if unread is None:
        found.append(Fact("code", f"the failing line calls {fn}({arg})"))
        lead = f"The failing line{at} passes the result of `{fn}({arg})` on, and the error says it is None ({msg})."
    else:
        lead = (f"OpenCV logged that it cannot open or read '{unread}', and the image is then used{at} as if it had been read: "
                f"the error says it is None ({msg}).")
    cause = (f"{lead} {fn} does not raise when it cannot read a file: it returns None when the path does not exist (relative to the working "
             "directory the script runs in), has a typo or another extension than the file on disk, points to a directory, or the file "
             "cannot be decoded as an image.")
    # A plain name can go straight into the snippets; an expression is bound to `path` first.
    simple = re.fullmatch(r"[A-Za-z_][\w.]*(?:\[[^\[\]]*\])?", arg) is not None
    variant = "" if simple else "-expression"
    fixes = [
        remedy(f"python-errors#check-reader-path{variant}", function=fn, variable=arg),
        remedy(f"python-errors#fail-loudly-on-none{variant}", function=fn, variable=arg),
    ]
    return hit("python.reader_none", "python_error", f"{fn} returned None", cause, fixes, _DOCS, found, 0.85,
               facts=Facts(call=fn, argument=arg, names=("NoneType",)))


def _key_error(ctx: Context, key: str, src: str, at: str, found: list[Fact], title: str) -> RuleHit:
    """KeyError: name the key and the container the user's line indexes."""
    m = re.search(r"(?<!\w)(\w+)\[", src)
    container = m.group(1) if m else None
    if container and re.search(r"cfg|config|conf|args|opt|hparams|params|settings", container, re.I):
        kind = " It reads a configuration: the config file or arguments lack this entry, or spell it differently."
    elif container and re.search(r"batch|sample|item|data|inputs", container, re.I):
        kind = " It indexes a batch/sample dict: the data pipeline produces different keys than this code expects."
    else:
        kind = ""
    cause = f"The key {key} is not in {'`' + container + '`' if container else 'the dictionary'}{at}." + kind
    fixes = [remedy("python-errors#print-existing-keys", variable=container),
             remedy("python-errors#dict-get-default", variable=container, key=key)]
    return hit("python.key_error", "python_error", title, cause, fixes, _DOCS, found, 0.75,
               facts=Facts(names=tuple(x for x in (key.strip("'\""), container) if x)))
