"""Who owns a class name: a third-party library, torch, or (by elimination) the user's own program.

Read from ``data/library_classes.json.gz``, which ``scripts/build_library_classes.py`` builds from the libraries'
source. Loaded on first use and kept for the process.
"""

from __future__ import annotations

import gzip
import json
import re
from functools import lru_cache
from pathlib import Path

_DATA = Path(__file__).parent / "data" / "library_classes.json.gz"
# One capitalised word ("Net", "Model", "Trainer", "Generator"): users name their own classes so too, and so do
# libraries' demos, so such a name says nothing about who wrote the class.
_ONE_WORD = re.compile(r"^[A-Z][a-z]+$")


@lru_cache(maxsize=1)
def _atlas() -> tuple[dict[str, tuple[str, ...]], frozenset[str]]:
    try:
        doc = json.loads(gzip.decompress(_DATA.read_bytes()))
    except (OSError, ValueError):  # a checkout without the built file: no class is known, every reading stays generic
        return {}, frozenset()
    owners: dict[str, list[str]] = {}
    for library, names in doc.get("libraries", {}).items():
        for name in names:
            owners.setdefault(name, []).append(library)
    return {k: tuple(v) for k, v in owners.items()}, frozenset(doc.get("torch", ()))


def library_owning(class_name: str) -> tuple[str, ...]:
    """The third-party packages (top-level import names) that define ``class_name``, when the name is distinctive and
    torch does not define it too; else ``()``. ``"DeepSpeedZeroOptimizer_Stage3"`` gives ``("deepspeed",)``."""
    name = class_name.rsplit(".", 1)[-1]
    if not name or _ONE_WORD.match(name):
        return ()
    owners, torch_classes = _atlas()
    if name in torch_classes:
        return ()
    return owners.get(name, ())


def is_torch_class(class_name: str) -> bool:
    """Whether torch's own Python source defines a class of this name."""
    return class_name.rsplit(".", 1)[-1] in _atlas()[1]


def is_library_package(top_level: str) -> bool:
    """Whether ``top_level`` is an import name of a third-party library the class atlas was read from."""
    return top_level in _packages()


@lru_cache(maxsize=1)
def _packages() -> frozenset[str]:
    try:
        return frozenset(json.loads(gzip.decompress(_DATA.read_bytes())).get("libraries", {}))
    except (OSError, ValueError):
        return frozenset()
