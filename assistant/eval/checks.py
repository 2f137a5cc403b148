"""What counts as a *concrete* check: something a user can run, add or print, not advice in prose.

A hypothesis's ``check`` is concrete when it is non-empty and holds at least one of:

* a call with its parentheses: ``torch.cuda.max_memory_allocated()``, ``print(x.shape)``;
* a dotted Python name: ``model.fc.in_features``, ``torch.backends.cudnn.enabled``, ``os.environ`` (not the
  abbreviations ``e.g.`` / ``i.e.``, and not a version number);
* an environment setting ``NAME=value`` (``CUDA_LAUNCH_BLOCKING=1``), an argument setting ``name=value``
  (``num_workers=0``, ``strict=False``) or a command-line flag (``--nproc-per-node``);
* a shell command that tools ship under that name (``nvidia-smi``, ``pip show``, ``python -c``, ``ldd`` ...);
* an inline code span holding code: an operator, a bracket, a path or a dotted or snake_case name
  (```C % num_groups```, ```[::-1]```, ```device_ids```), or a command of two words or more (```which nvcc```).

"check your data" or "look at the shapes" is not concrete: it names no thing to run or print. The
definition is mechanical on purpose, so that ``eval score`` can count it on every answer
(``check_share``, ``lead_check_share``) and the knowledge test can hold every document's causes to it.
"""

from __future__ import annotations

import re

_CALL = re.compile(r"\b[A-Za-z_][\w.]*\((?P<args>[^()\n]*(?:\([^()\n]*\)[^()\n]*)*)\)")
_DOTTED = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_ENV = re.compile(r"\b[A-Z][A-Z0-9_]{2,}=\S+")
_KWARG = re.compile(r"(?<![\w.])[a-z_][a-z0-9_]*=(?![=\s])")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")
_COMMANDS = re.compile(
    r"(?<![\w-])(?:nvidia-smi|rocm-smi|nvcc\s+--version|ldd|dmesg|ulimit|free\s+-[a-z]|df\s+-[a-z]|"
    r"pip\s+(?:show|list|install|freeze|uninstall|check)|conda\s+(?:list|install|env)|"
    r"python3?\s+-(?:c|m|X|W)|torchrun|accelerate\s+(?:env|config|launch)|sacct|squeue|scontrol|sinfo|"
    r"py-spy|gdb|strace|lsof|du\s+-[a-z]+|ls\s+-[a-z]+|cat\s+/)(?![\w-])"
)
_CODE_SPAN = re.compile(r"`{1,3}([^`]+)`{1,3}")
_CODE_CHARS = re.compile(r"[()\[\]=%*/<>.:_-]")
_NOT_NAMES = frozenset({"e.g", "i.e", "etc", "vs", "a.k.a"})


def _dotted(text: str) -> bool:
    return any(m.group(0).lower().rstrip(".") not in _NOT_NAMES for m in _DOTTED.finditer(text))


def _call(text: str) -> bool:
    # "value(s)" and "layer(s)" are English plurals, not calls.
    return any(m.group("args") != "s" for m in _CALL.finditer(text))


def is_concrete_check(check: str | None) -> bool:
    """Whether ``check`` names something to run, add or print (see the module's docstring)."""
    if not check or not check.strip():
        return False
    text = check.strip()
    if _call(text) or _dotted(text) or _ENV.search(text) or _KWARG.search(text) or _FLAG.search(text) or _COMMANDS.search(text):
        return True
    return any(_code(m.group(1).strip()) for m in _CODE_SPAN.finditer(text))


def _code(span: str) -> bool:
    """An inline code span that holds code (not one plain word or a quoted English phrase)."""
    if _CODE_CHARS.search(span):
        return True
    # A command the patterns above do not know (`which nvcc`): two words or more, not a capitalised phrase.
    return len(span.split()) >= 2 and not span[:1].isupper()
