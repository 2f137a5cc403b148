"""Who owns a class name: a third-party library, torch, or (by elimination) the user's own program.

Read from ``data/library_classes.tsv.gz``, which ``scripts/build_library_classes.py`` builds from the libraries'
source: one ``Name<TAB>owner,owner`` line per class name. Decompressed on first use and kept for the process; a
lookup is a string search, so a cold process pays a few milliseconds, not a parse of fifty thousand names.
"""

from __future__ import annotations

import gzip
import re
from functools import lru_cache
from pathlib import Path

_DATA = Path(__file__).parent / "data" / "library_classes.tsv.gz"
# One capitalised word ("Net", "Model", "Trainer", "Generator"): users name their own classes so too, and so do
# libraries' demos, so such a name says nothing about who wrote the class.
_ONE_WORD = re.compile(r"^[A-Z][a-z]+$")
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")


@lru_cache(maxsize=1)
def _text() -> str:
    try:
        return "\n" + gzip.decompress(_DATA.read_bytes()).decode("utf-8")
    except (OSError, ValueError):  # a checkout without the built file: no class is known, every reading stays generic
        return "\n"


def _owners(name: str) -> tuple[str, ...]:
    text = _text()
    at = text.find(f"\n{name}\t")
    if at < 0:
        return ()
    start = at + len(name) + 2
    end = text.find("\n", start)
    return tuple(text[start:end if end >= 0 else None].split(","))


def library_owning(class_name: str) -> tuple[str, ...]:
    """The third-party packages (top-level import names) that define ``class_name``, when the name is distinctive and
    torch does not define it too; else ``()``. ``"DeepSpeedZeroOptimizer_Stage3"`` gives ``("deepspeed",)``."""
    name = class_name.rsplit(".", 1)[-1]
    if not _IDENTIFIER.match(name) or _ONE_WORD.match(name):
        return ()
    owners = _owners(name)
    return () if "torch" in owners else owners


def is_torch_class(class_name: str) -> bool:
    """Whether torch's own Python source defines a class of this name."""
    name = class_name.rsplit(".", 1)[-1]
    return bool(_IDENTIFIER.match(name)) and "torch" in _owners(name)


def is_library_package(top_level: str) -> bool:
    """Whether ``top_level`` is an import name of a third-party library the class atlas was read from."""
    return top_level in _packages()


@lru_cache(maxsize=1)
def _packages() -> frozenset[str]:
    line = re.search(r"\n#packages\t([^\n]*)", _text())
    return frozenset(line.group(1).split(",")) if line else frozenset()
