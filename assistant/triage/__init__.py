"""`torchhelp triage`: failed job logs -> failed or not, first failing rank, root-cause groups ranked by GPU hours lost.

Public API::

    from assistant import triage
    result = triage(["/scratch/logs"])      # a TriageResult: result.jobs, result.groups, result.jsonl_rows()

``assistant.triage`` is this package, and the package itself is callable (it forwards to
:func:`assistant.triage.api.triage`), so the import above works whether or not a submodule was
imported first — a plain function of the same name would be shadowed by the subpackage.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = ["triage"]


def triage(*args: Any, **kwargs: Any) -> Any:
    """Triage every job under the given paths; see :func:`assistant.triage.api.triage`."""
    from assistant.triage.api import triage as run

    return run(*args, **kwargs)


class _CallablePackage(types.ModuleType):
    """Module type whose instances can be called like :func:`triage`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return triage(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
