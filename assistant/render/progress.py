"""Progress for index builds and ``kb add`` embeddings, shared by every command that may build the index.

Its own module so that ``assistant.cli`` and ``assistant.eval.cli`` both import it and not each other.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

ProgressCallback = Callable[[str, int, int], None]


def index_progress() -> ProgressCallback:
    """A progress callback for index builds and ``kb add`` embeddings: a bar with an ETA on a terminal, one line otherwise."""
    from rich.console import Console

    console = Console(stderr=True)
    state: dict[str, Any] = {}

    def callback(stage: str, done: int, total: int) -> None:
        if not console.is_terminal:
            if "announced" not in state:
                state["announced"] = True
                print(f"torchhelp: embedding {total} chunk(s) for the knowledge index…", file=sys.stderr)
            return
        if "progress" not in state:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            p = Progress(TextColumn("embedding knowledge chunks"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                         console=console, transient=True)
            p.start()
            state["progress"] = p
            state["task"] = p.add_task(stage, total=total)
        state["progress"].update(state["task"], completed=done)
        if done >= total:
            state["progress"].stop()

    return callback
