"""torchhelp on a real pseudo-terminal (POSIX), for the tests that type into it as a user would."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import sys
import termios
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from conftest import ROOT


@contextmanager
def torchhelp_on_a_terminal(args: Sequence[str], env: Mapping[str, str], columns: int | None = None) -> Iterator[tuple[int, int]]:
    """Start ``python -m assistant ARGS`` with stdin, stdout and stderr on a new terminal; yield (pid, fd).
    On leaving, the child is killed if it still runs and reaped, and the terminal closed."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: stdin, stdout and stderr are the terminal
        os.chdir(ROOT)
        os.execve(sys.executable, [sys.executable, "-m", "assistant", *args], dict(env))
    if columns is not None:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    try:
        yield pid, fd
    finally:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)


def drain(fd: int, sink: bytearray, wait: float) -> bool:
    """Read what the child printed for up to `wait` seconds; False once the terminal is closed."""
    ready, _, _ = select.select([fd], [], [], wait)
    if not ready:
        return True
    try:
        data = os.read(fd, 65536)
    except OSError:  # EIO: the child exited and closed the terminal
        return False
    if not data:
        return False
    sink.extend(data)
    return True


def read_until(fd: int, out: bytearray, done: Callable[[bytearray], bool], timeout: float) -> bool:
    """Read the child's output until done(out) or the timeout; False once the terminal is closed."""
    deadline = time.monotonic() + timeout
    while not done(out):
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        if not drain(fd, out, min(left, 0.5)):
            return False
    return True
