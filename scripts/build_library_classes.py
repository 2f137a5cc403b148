"""Build the class atlas: which installed library defines a class name (``assistant/atlas/data/library_classes.tsv.gz``).

An ``AttributeError: 'X' object has no attribute 'y'`` means different things by who owns ``X``: a class the user
wrote (a typo, an attribute never set), a PyTorch class (usually misuse: a wrapped model's ``.module``), or a class of
a third-party library (the calling code and that library are from different releases). Which is which is a fact about
the libraries' source, so it is read from their source here, once, at build time, not guessed by a pattern.

Usage (wheels from ``pip download --no-deps``, unpacked source folders, or both; the installed torch is always read):

    python scripts/build_library_classes.py /path/to/wheels /path/to/source-folder ...

Test, example and documentation files are skipped: a class there is not something a user's program receives.
"""

from __future__ import annotations

import gzip
import re
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "assistant" / "atlas" / "data" / "library_classes.tsv.gz"
_CLASS = re.compile(r"^[ \t]*class[ \t]+([A-Za-z_]\w*)", re.M)
_SKIP_PART = re.compile(r"(?:^|/)(?:tests?|testing|examples?|docs?|benchmarks?|scripts)(?:/|$)")
_WHEEL_NAME = re.compile(r"^([A-Za-z0-9_.]+?)-([0-9][^-]*)-")


def _python_files_in_wheel(path: Path) -> Iterator[tuple[str, str]]:
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            if name.endswith(".py") and ".dist-info/" not in name and not _SKIP_PART.search(name):
                yield name, zf.read(name).decode("utf-8", "replace")


def _python_files_in_folder(folder: Path) -> Iterator[tuple[str, str]]:
    for path in folder.rglob("*.py"):
        rel = path.relative_to(folder).as_posix()
        if not _SKIP_PART.search(rel):
            yield rel, path.read_text(encoding="utf-8", errors="replace")


def _collect(files: Iterator[tuple[str, str]], into: dict[str, set[str]]) -> None:
    for rel, text in files:
        top = rel.split("/", 1)[0]
        if not top.isidentifier():
            continue
        # Every package read is recorded, classes or not (a package whose classes are compiled still names a library).
        into.setdefault(top, set()).update(_CLASS.findall(text))


def main(sources: list[str]) -> None:
    """Read every source given plus the installed torch, and write the class atlas."""
    import torch

    owners: dict[str, set[str]] = {}
    read: list[str] = []
    for src in map(Path, sources):
        wheels = sorted(src.glob("*.whl")) if src.is_dir() else [src]
        for wheel in wheels:
            if wheel.suffix == ".whl":
                _collect(_python_files_in_wheel(wheel), owners)
                m = _WHEEL_NAME.match(wheel.name)
                read.append(f"{m.group(1)}=={m.group(2)}" if m else wheel.name)
        if src.is_dir() and not wheels:
            _collect(_python_files_in_folder(src), owners)
            read.append(src.name)
    torch_root = Path(torch.__file__).parent
    torch_classes: dict[str, set[str]] = {}
    _collect(((f"torch/{rel}", text) for rel, text in _python_files_in_folder(torch_root)), torch_classes)
    # torch's own classes are kept apart: a user meets them directly (Tensor, Linear, DataParallel), so a missing
    # attribute on one is read as misuse, not as two libraries out of step.
    owners.pop("torch", None)
    # One line per class name, "Name<TAB>owner,owner" (torch among the owners when torch defines it too), sorted, after
    # two header lines: what was read, and every package read. Plain text, so that a lookup is a string search on the
    # decompressed file and a cold process pays no parsing for it.
    named: dict[str, set[str]] = {}
    for lib, names in owners.items():
        for name in names:
            named.setdefault(name, set()).add(lib)
    for name in torch_classes.get("torch", set()):
        named.setdefault(name, set()).add("torch")
    lines = ["#read\t" + ",".join(sorted(read) + [f"torch=={torch.__version__.split('+')[0]}"]), "#packages\t" + ",".join(sorted(owners))]
    lines += [f"{name}\t{','.join(sorted(libs))}" for name, libs in sorted(named.items())]
    OUT.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    print(f"{OUT.relative_to(ROOT)}: {len(named)} class names in {len(owners)} packages and torch, {OUT.stat().st_size // 1024} KiB")

if __name__ == "__main__":
    main(sys.argv[1:])
