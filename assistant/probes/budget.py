"""Time budgets for probes: a probe that would hang the crashing process is cut off, and says so.

In the main thread on POSIX a SIGALRM timer interrupts the probe; elsewhere the budget is
cooperative (checked between items). Either way the probe never raises to its caller.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from collections.abc import Iterator


class ProbeTimeout(BaseException):
    """Raised inside a probe when its budget is spent.

    A BaseException on purpose: the `except Exception` guards around individual objects (and in
    user code the probe calls, like a Dataset's __len__) must not swallow the deadline.
    """


class Budget:
    """A deadline shared by a group of probes."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def expired(self) -> bool:
        return self.left() <= 0.0


@contextmanager
def limit(seconds: float) -> Iterator[None]:
    """Interrupt the body with ProbeTimeout after ``seconds`` (main thread, POSIX); otherwise no-op."""
    use_alarm = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread() and seconds > 0
    if not use_alarm:
        yield
        return

    def on_alarm(signum, frame):  # type: ignore[no-untyped-def]
        raise ProbeTimeout(f"probe exceeded its {seconds:.1f} s budget")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    old_timer = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if old_timer[0] > 0:  # restore a timer the user program had set
            signal.setitimer(signal.ITIMER_REAL, old_timer[0], old_timer[1])
