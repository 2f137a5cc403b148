"""In-process doors: ``assistant.install()``, ``with assistant.watch():`` and ``%load_ext assistant``.

Each prints the normal traceback first, then a diagnosis that uses probes of the live frames.
A failure inside torchhelp is reported in one line and never replaces the user's own error.
"""

from __future__ import annotations

import sys
import traceback
import types
from contextlib import contextmanager
from typing import Any, TextIO
from collections.abc import Iterator

_original_excepthook = None


def diagnose_exception(exc: BaseException, tb: types.TracebackType | None = None, memory_history: bool = False):  # type: ignore[no-untyped-def]
    """Diagnose a live exception with in-process probes; returns the Diagnosis."""
    from assistant.engine import default_engine
    from assistant.probes.collect import collect_evidence, evidence_from_record

    tb = tb if tb is not None else exc.__traceback__
    record = collect_evidence(exc, tb, memory_history=memory_history)
    return default_engine().diagnose(record["traceback"], evidence=evidence_from_record(record))


def _report(exc: BaseException, tb: types.TracebackType | None, stream: TextIO | None = None) -> None:
    try:
        from rich.console import Console

        from assistant.render.terminal import render_terminal

        render_terminal(diagnose_exception(exc, tb), Console(file=stream or sys.stderr))
    except Exception as err:  # noqa: BLE001 - our failure must not hide theirs
        print(f"torchhelp: could not diagnose this error ({type(err).__name__}: {err})", file=stream or sys.stderr)


def install() -> None:
    """Diagnose every uncaught exception of this process (after the usual traceback)."""
    global _original_excepthook
    if _original_excepthook is not None:
        return
    _original_excepthook = sys.excepthook

    def hook(exc_type: type[BaseException], exc: BaseException, tb: types.TracebackType | None) -> None:
        assert _original_excepthook is not None
        _original_excepthook(exc_type, exc, tb)
        if not issubclass(exc_type, (KeyboardInterrupt, SystemExit)):
            _report(exc, tb)

    sys.excepthook = hook


def uninstall() -> None:
    """Restore the excepthook that was active before install()."""
    global _original_excepthook
    if _original_excepthook is not None:
        sys.excepthook = _original_excepthook
        _original_excepthook = None


@contextmanager
def watch(reraise: bool = True, stream: TextIO | None = None) -> Iterator[None]:
    """Diagnose an exception raised inside the block (then re-raise it unless ``reraise=False``)."""
    try:
        yield
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        print("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)), end="", file=stream or sys.stderr)
        _report(exc, exc.__traceback__, stream)
        if reraise:
            raise


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext assistant`: failing cells show their traceback, then a diagnosis."""

    def handler(shell: Any, etype: type[BaseException], value: BaseException, tb: types.TracebackType, tb_offset: int | None = None) -> Any:
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        _report(value, tb, sys.stdout)
        return None

    ipython.set_custom_exc((Exception,), handler)


def unload_ipython_extension(ipython: Any) -> None:
    ipython.set_custom_exc((), None)
