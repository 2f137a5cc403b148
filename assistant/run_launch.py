"""A command that never started its work: the script, module or program it names does not exist.

``python trian.py`` (a typo) exits 2 after one line from Python, ``python -m pkg.mdl`` exits 1, and
``pyhton x.py`` cannot be started at all. None of these is a crash to diagnose: the useful answer is
what was not found, where it was looked for, and the closest name that does exist there.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable
from pathlib import Path

# Python's own words when the script it was given does not exist (main.c, one line, exit status 2).
_CANNOT_OPEN = re.compile(r"^(?P<prog>[^\n]*?): can't open file (?P<q>['\"])(?P<path>.+?)(?P=q): \[Errno 2\] No such file or directory\s*$", re.M)
# runpy's words for ``python -m NAME`` when NAME (or a package above it) cannot be found (exit status 1).
_NO_MODULE = re.compile(
    r"^[^\n]*?: (?:No module named (?P<name>[\w.]+)"
    r"|Error while finding module specification for '(?P<spec>[\w.]+)' \(ModuleNotFoundError: No module named '(?P<missing>[\w.]+)'\))\s*$",
    re.M,
)
_CUTOFF = 0.6


def closest_name(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate most like ``name`` (difflib ratio at least 0.6), or None."""
    names = sorted({c for c in candidates if c and c != name})
    found = difflib.get_close_matches(name, names, n=1, cutoff=_CUTOFF)
    return found[0] if found else None


def _entries(directory: Path) -> list[str]:
    """The names in ``directory`` (hidden ones left out), or none when it cannot be listed."""
    try:
        return [e.name for e in os.scandir(directory) if not e.name.startswith(".")]
    except OSError:
        return []


def _deepest_existing(path: Path) -> tuple[Path, str]:
    """The deepest existing folder on ``path`` and the first name under it that does not exist."""
    parts = path.parts
    here = Path(parts[0])
    for part in parts[1:]:
        if not (here / part).exists():
            return here, part
        here = here / part
    return here.parent, here.name


def _shown_path(path: Path, cwd: Path) -> str:
    """``path`` relative to the working directory when it lies under it, else absolute."""
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def missing_script(stderr_tail: str, argv: list[str], cwd: Path) -> str | None:
    """One line for a Python script that does not exist (Python said "can't open file"), else None."""
    m = _CANNOT_OPEN.search(stderr_tail)
    if m is None:
        return None
    path = Path(m.group("path"))
    path = path if path.is_absolute() else cwd / path
    typed = _typed_argument(argv, path, cwd)
    if typed is None:
        return None  # a script some process of the command tried to start, not the command's own
    folder, missing = _deepest_existing(path)
    where = "" if folder == path.parent else f" (there is no {_shown_path(folder / missing, cwd)})"
    text = f"the script {_shown_path(path, cwd)} was not found, looking from {cwd}{where}."
    guess = closest_name(missing, _entries(folder))
    if guess is None:
        return text + f" No file in {folder} has a similar name."
    shown = _shown_path(folder / guess, cwd)
    if folder != path.parent:
        return text + f" Did you mean {shown}?"
    fixed = typed[: len(typed) - len(missing)] + guess if typed.endswith(missing) else shown
    return text + f" Did you mean {shown}? `{_command(argv, typed, fixed)}`"


def _typed_argument(argv: list[str], path: Path, cwd: Path) -> str | None:
    """The argument of ``argv`` that names ``path`` as the user typed it, or None."""
    for arg in argv[1:]:
        if arg and not arg.startswith("-") and os.path.normpath(os.path.join(cwd, arg)) == os.path.normpath(path):
            return arg
    return None


def missing_module(stderr_tail: str, argv: list[str], cwd: Path) -> str | None:
    """One line for ``python -m NAME`` whose module does not exist (runpy's message), else None."""
    module = _module_argument(argv)
    if module is None:
        return None
    m = _NO_MODULE.search(stderr_tail)
    if m is None:
        return None
    missing = m.group("missing") or m.group("name")
    parts = module.split(".")
    depth = min(len(missing.split(".")), len(parts)) - 1  # the first part of the module that was not found
    folder = cwd.joinpath(*parts[:depth])
    part = parts[depth]
    modules = [n[:-3] if n.endswith(".py") else n for n in _entries(folder)
               if n.endswith(".py") or (folder / n).is_dir() and n.isidentifier()]
    text = f"no module named {module} was found (`-m` looks in {cwd} and the installed packages; {missing} is missing)."
    guess = closest_name(part, modules)
    if guess is None:
        return text
    dotted = ".".join([*parts[:depth], guess, *parts[depth + 1:]])
    return text + f" Did you mean {dotted}? `{_command(argv, module, dotted)}`"


def _module_argument(argv: list[str]) -> str | None:
    """NAME in ``python [options] -m NAME ...``, or None when the command is not that."""
    if not argv or not Path(argv[0]).name.startswith("python"):
        return None
    for i, arg in enumerate(argv[1:], start=1):
        if arg == "-m":
            return argv[i + 1] if i + 1 < len(argv) else None
        if arg.startswith("-m") and len(arg) > 2:
            return arg[2:]
        if not arg.startswith("-"):
            return None
    return None


def _command(argv: list[str], old: str, new: str) -> str:
    """The command line with the first ``old`` argument replaced by ``new``, for copying."""
    import shlex

    i = argv.index(old) if old in argv else -1
    fixed = [*argv[:i], new, *argv[i + 1:]] if i >= 0 else argv
    return shlex.join(fixed)


def missing_launch(stderr_tail: str, argv: list[str], cwd: Path | None = None) -> str | None:
    """What the command could not find, as one line, when that is why it failed; None otherwise."""
    here = Path.cwd() if cwd is None else cwd
    return missing_script(stderr_tail, argv, here) or missing_module(stderr_tail, argv, here)


def _path_commands(path_var: str) -> list[str]:
    """Every executable name on ``PATH``."""
    names: list[str] = []
    for folder in path_var.split(os.pathsep):
        try:
            with os.scandir(folder or ".") as it:
                names.extend(e.name for e in it if not e.name.startswith(".") and os.access(e.path, os.X_OK))
        except OSError:
            continue
    return names


def command_not_found(command: str, path_var: str | None = None) -> str:
    """The message for a command that is neither a file nor on ``PATH``, with the closest one that is."""
    if os.sep in command:
        folder = Path(command).parent
        guess = closest_name(Path(command).name, _entries(folder))
        where = f"no such file in {folder.resolve()}"
        shown = command[: len(command) - len(Path(command).name)] + guess if guess else ""
        return f"command not found: {command} ({where}" + (f"; did you mean {shown}?)" if guess else ")")
    guess = closest_name(command, _path_commands(os.environ.get("PATH", "") if path_var is None else path_var))
    return f"command not found: {command} (not on PATH" + (f"; did you mean {guess}?)" if guess else ")")
