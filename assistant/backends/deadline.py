"""One deadline for a whole answer, however the server behaves.

A socket timeout bounds each read, so a server that drips a byte a second never times out. The
request therefore runs in a worker thread and the caller waits for it at most the deadline; on
expiry the worker is told to stop and its late tokens are dropped, never shown.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from assistant.errors import BackendReplyError

T = TypeVar("T")


class Deadline:
    """A point in time: how long is left, and whether the caller has given up."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.cancelled = threading.Event()

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def check(self) -> None:
        """Raise when the time is up or the caller stopped waiting (the worker calls this between reads)."""
        if self.cancelled.is_set() or self.left() <= 0:
            raise BackendReplyError(f"the LLM server did not answer in time (no complete answer within the {self.seconds:g} s deadline)")


class GatedSink:
    """Forwards tokens only while the caller is still waiting: nothing arrives after it gave up."""

    def __init__(self, sink: Callable[[str], None], deadline: Deadline) -> None:
        self._sink = sink
        self._deadline = deadline
        self._lock = threading.Lock()

    def __call__(self, token: str) -> None:
        with self._lock:
            if not self._deadline.cancelled.is_set():
                self._sink(token)

    def close(self) -> None:
        with self._lock:
            self._deadline.cancelled.set()


def run_with_deadline(work: Callable[[Deadline], T], deadline: Deadline, sink: GatedSink | None = None) -> T:
    """Run ``work(deadline)`` in a daemon thread; its result, its exception, or BackendReplyError at the deadline."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = work(deadline)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread unchanged
            box["error"] = exc

    worker = threading.Thread(target=target, name="torchhelp-llm", daemon=True)
    worker.start()
    worker.join(deadline.left() + 0.05)
    if worker.is_alive():
        if sink is not None:
            sink.close()
        deadline.cancelled.set()
        raise BackendReplyError(f"the LLM server did not answer in time (no complete answer within the {deadline.seconds:g} s deadline)")
    if sink is not None:
        sink.close()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
