"""torchhelp: a grounded debugging assistant for PyTorch failures.

    >>> from assistant import diagnose
    >>> diagnose(traceback_text).to_dict()

In-process doors: ``assistant.install()`` (excepthook), ``with assistant.watch(): ...`` and, in
IPython/Jupyter, ``%load_ext assistant``.

Names are imported on first use: the crash hook that `torchhelp run` puts into every child process
imports this package, and must not pay for the engine until something fails.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
__all__ = [
    "Diagnosis", "TorchhelpError", "__version__", "diagnose", "install", "load_ipython_extension",
    "triage", "uninstall", "unload_ipython_extension", "watch",
]
_LAZY = {
    "diagnose": "assistant.pipeline", "Diagnosis": "assistant.types", "TorchhelpError": "assistant.errors",
    "install": "assistant.hooks", "uninstall": "assistant.hooks", "watch": "assistant.hooks",
    "load_ipython_extension": "assistant.hooks", "unload_ipython_extension": "assistant.hooks",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'assistant' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
