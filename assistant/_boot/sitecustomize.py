"""Loaded by every Python process started under `torchhelp run` (via PYTHONPATH).

It installs torchhelp's crash hook when TORCHHELP_RUN_DIR is set, then hands over to any other
sitecustomize module further down the path, so the user's own customisation still runs.
"""

import importlib.machinery
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))

if os.environ.get("TORCHHELP_RUN_DIR"):
    try:
        _parent = os.environ.get("TORCHHELP_PKG_PARENT")
        if _parent and _parent not in sys.path:
            sys.path.append(_parent)
        from assistant.probes.child_hook import install_child_hook

        install_child_hook(os.environ["TORCHHELP_RUN_DIR"])
    except Exception as _exc:  # noqa: BLE001 - never break the user's program
        sys.stderr.write(f"torchhelp: crash hook not installed ({type(_exc).__name__}: {_exc})\n")

_rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if _spec is not None and _spec.loader is not None and os.path.dirname(os.path.abspath(_spec.origin or "")) != _here:
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["sitecustomize"] = _module
    _spec.loader.exec_module(_module)
