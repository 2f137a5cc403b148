"""Plain Python errors that kill training jobs, read in terms of the user's own code."""

from __future__ import annotations

import re

from assistant.rules.registry import Example, rule
from assistant.rules.base import basic_facts as _found, Context, fix, hit
from assistant.types import RuleHit

_DOCS = ("python-errors", "module-misuse")
_BUILTIN = {
    "KeyError", "TypeError", "AttributeError", "NameError", "ValueError", "ZeroDivisionError", "AssertionError",
    "RecursionError", "NotImplementedError", "UnboundLocalError", "IndexError", "StopIteration", "SyntaxError",
    "IndentationError", "UnicodeDecodeError", "UnicodeEncodeError", "OverflowError", "LookupError", "json.decoder.JSONDecodeError", "JSONDecodeError",
}



@rule(
    'python.module_misuse',
    category='python_error',
    docs=_DOCS[::-1],
    priority=340,
    outcomes=('python.super_init', 'python.missing_argument', 'python.too_many_args', 'python.wrapper_attribute', 'python.empty_params', 'python.no_forward'),
    examples=(),
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
        fixes = [fix("Call super().__init__() first in __init__", "", f"class {cls or 'Net'}(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(10, 2)", "module-misuse")]
        return hit("python.super_init", "python_error", "super().__init__() not called", cause, fixes, _DOCS[::-1], _found(ctx), 0.95)
    m = ctx.search(r"(forward|__init__|__call__|\w+)\(\) missing (\d+) required positional arguments?: ([^\n]+)")
    if m:
        fn, n, names = m.groups()
        cause = f"`{fn}()` was called without {n} required argument(s): {names.strip()}."
        if fn == "forward":
            cause += " The model's forward signature and the call site disagree (e.g. the DataLoader yields a tuple that is passed as one argument, or a second input such as a mask/lengths was added to forward but not to the call)."
        fixes = [fix("Match the call to the signature", "Unpack batches explicitly: `x, y = batch; model(x)`; or give the new argument a default.", "def forward(self, x, mask=None): ...", "module-misuse")]
        return hit("python.missing_argument", "python_error", f"{fn}() missing argument(s)", cause, fixes, _DOCS[::-1], _found(ctx), 0.9)
    m = ctx.search(r"(\w+)\(\) takes (\d+) positional arguments? but (\d+) (?:were|was) given")
    if m:
        fn, want, got = m.groups()
        cause = f"`{fn}()` accepts {int(want) - 1 if fn in ('forward', '__init__') else want} argument(s) (besides self) but was called with {int(got) - 1 if fn in ('forward', '__init__') else got}."
        if fn == "forward":
            cause += " Often the whole batch tuple, or an extra target/label, is passed to the model."
        fixes = [fix("Match the call to the signature", "", "outputs = model(inputs)   # not model(inputs, labels)", "module-misuse")]
        return hit("python.too_many_args", "python_error", f"{fn}() got too many arguments", cause, fixes, _DOCS[::-1], _found(ctx), 0.9)
    m = ctx.search(r"'(DataParallel|DistributedDataParallel|OptimizedModule)' object has no attribute '(\w+)'")
    if m:
        cause = f"`{m.group(2)}` is an attribute of your model, but the model is wrapped in {m.group(1)}; the wrapper forwards calls, not attributes."
        inner = "model.module" if m.group(1) != "OptimizedModule" else "model._orig_mod"
        fixes = [fix(f"Reach through the wrapper: {inner}.{m.group(2)}", "", f"{inner}.{m.group(2)}", "module-misuse")]
        return hit("python.wrapper_attribute", "python_error", f"{m.group(1)} has no attribute `{m.group(2)}`", cause, fixes, _DOCS[::-1], _found(ctx), 0.92)
    if ctx.search(r"optimizer got an empty parameter list"):
        cause = ("The optimizer received no parameters: model.parameters() is empty because the layers are kept in a plain Python list/dict (not registered) "
                 "or created in forward() instead of __init__, or a filter like `if p.requires_grad` removed everything.")
        fixes = [fix("Register layers with nn.ModuleList / nn.ModuleDict", "", "self.blocks = nn.ModuleList([Block() for _ in range(4)])", "module-misuse")]
        return hit("python.empty_params", "python_error", "Optimizer got no parameters", cause, fixes, _DOCS[::-1], _found(ctx), 0.93)
    if ctx.search(r'Module \[(\w+)\] is missing the required "forward" function'):
        cause = "The module has no forward() method — usually a typo (`foward`, `Forward`) or wrong indentation placing it outside the class."
        fixes = [fix("Define forward(self, x) inside the class", "", None, "module-misuse")]
        return hit("python.no_forward", "python_error", "Module without forward()", cause, fixes, _DOCS[::-1], _found(ctx), 0.93)
    return None


@rule(
    'python.python_exception',
    category='python_error',
    docs=_DOCS,
    priority=910,
    outcomes=('python.builtin',),
    examples=(),
)
def python_exception(ctx: Context) -> RuleHit | None:
    """Fallback for built-in Python exceptions raised by user code."""
    exc = ctx.exc_type
    if exc not in _BUILTIN:
        return None
    frame = ctx.user_frame
    found = _found(ctx)
    msg = ctx.message.strip().splitlines()[0] if ctx.message.strip() else ""
    at = f" in {ctx.where()}" if frame else ""
    if exc == "KeyError":
        key = msg
        src = frame.source if frame and frame.source else ""
        m = re.search(r"(\w+)\[", src)
        container = m.group(1) if m else "a dict"
        cause = f"The key {key} is not in `{container}`{at}. " + (
            "It reads a configuration: the config file/arguments lack this entry, or it is spelled differently." if re.search(r"cfg|config|conf|args|opt|hparams|params|settings", container, re.I) else
            "It indexes a batch/sample dict: the Dataset returns different keys than the training loop expects." if re.search(r"batch|sample|item|data|inputs", container, re.I) else
            "Print the available keys to see what is there.")
        fixes = [fix("Print the keys that exist at that point", "", f"print(list({container if container != 'a dict' else 'd'}.keys()))", "python-errors"),
                 fix("Use an explicit default where the key is optional", "", f"value = {container if container != 'a dict' else 'd'}.get({key}, default)", "python-errors")]
    elif exc == "AttributeError":
        m = re.search(r"'(\w+)' object has no attribute '(\w+)'", msg)
        if m and m.group(1) == "NoneType":
            cause = f"Something that should be an object is None{at} when `.{m.group(2)}` is accessed: a function that returned nothing (missing `return`), a failed load (cv2.imread returns None for a bad path), or an optional value never set."
        elif m:
            cause = f"A `{m.group(1)}` object has no attribute `{m.group(2)}`{at}: a typo, a different type than expected, or an API that changed between versions."
        else:
            cause = f"An attribute lookup failed{at}: {msg}."
        fixes = [fix("Print the object's type at the failing line", "", "print(type(obj))", "python-errors")]
    elif exc == "TypeError":
        cause = f"A value of the wrong type reached the call{at}: {msg}."
        if "not callable" in msg:
            cause += " A name that should be a function/layer was overwritten by a value (e.g. a tensor assigned to `self.relu` or a variable named like a module)."
        if "unexpected keyword argument" in msg:
            cause += " The installed library version may not support that argument (API changed)."
        fixes = [fix("Check the types and the signature of what is called", "", "print(type(x)); help(fn)", "python-errors")]
    elif exc == "IndexError":
        cause = f"A Python sequence was indexed past its end{at}: {msg}." + (" Inside a Dataset this usually means __len__ reports more items than the data has." if "list index" in msg or "tuple index" in msg else "")
        fixes = [fix("Check the lengths involved", "", "print(len(seq), idx)", "python-errors")]
    elif exc == "NameError":
        cause = f"A name is used before it is defined{at}: {msg} (a typo, a missing import, or a variable defined only in one branch)."
        fixes = [fix("Define or import it before use", "", None, "python-errors")]
    elif exc == "RecursionError":
        cause = f"Infinite recursion{at}: typically a forward() that calls self(...) or a property that reads itself."
        fixes = [fix("Look at the repeating frames in the traceback", "", None, "python-errors")]
    else:
        cause = f"{exc} raised{at}: {msg}" + ("" if msg.endswith(".") else ".") + " This is an error in the program's own logic or data, not a PyTorch failure."
        fixes = [fix("Start from the last frame in your code", "Inspect the values on that line (a debugger: python -m pdb, or breakpoint()).", "python -m pdb -c continue train.py", "python-errors")]
    return hit("python.builtin", "python_error", f"Python {exc}" + (f" in {frame.function}" if frame and frame.function else ""), cause, fixes, _DOCS, found, 0.7)
