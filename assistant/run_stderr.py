"""The child's stderr under `torchhelp run`: shown live, and its last MiB kept for the diagnosis.

CUDA kernel assertion lines, NCCL warnings and DataLoader worker tracebacks are printed to stderr,
not carried by the final exception; without them a diagnosis loses its best clues. So stderr goes
through us. When our own stderr is a terminal, the child writes to a pseudo-terminal instead of a
pipe: it still sees ``isatty()`` true (progress bars, colours, line buffering stay as the user
knows them), and we copy the bytes unchanged to the real terminal.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import threading

STDERR_TAIL_BYTES = 1 << 20


def _stderr_fd() -> int | None:
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _open_pty_like(term_fd: int) -> tuple[int, int] | None:
    """A pty pair shaped like our terminal, bytes passed through untouched; None if unavailable."""
    try:
        import fcntl
        import termios

        master, slave = os.openpty()
    except (ImportError, OSError):
        return None
    with contextlib.suppress(OSError, termios.error):
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.OPOST  # no "\n" -> "\r\n" here: the user's terminal does its own
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
    with contextlib.suppress(OSError):
        fcntl.ioctl(slave, termios.TIOCSWINSZ, fcntl.ioctl(term_fd, termios.TIOCGWINSZ, b"\0" * 8))
    return master, slave


class StderrTee:
    """Copy what the child writes to its stderr onto ours as it arrives, keeping the tail.

    ``child_fd`` is what to hand the child as stderr (close it in the parent after the start,
    via ``started()``). ``is_pty`` tells whether it is a pseudo-terminal.
    """

    def __init__(self, use_pty: bool | None = None) -> None:
        term_fd = _stderr_fd()
        if use_pty is None:
            use_pty = term_fd is not None and os.isatty(term_fd)
        pair = _open_pty_like(term_fd) if use_pty and term_fd is not None else None
        self.is_pty = pair is not None
        self._read_fd, self.child_fd = pair if pair is not None else os.pipe()
        self._term_fd = term_fd
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._thread = threading.Thread(target=self._pump, name="torchhelp-stderr-tee", daemon=True)

    def started(self) -> None:
        """The child holds its end now: drop ours (so the end of its output is seen) and start copying."""
        os.close(self.child_fd)
        self._thread.start()

    def abandon(self) -> None:
        """The child could not be started: release both ends."""
        for fd in (self._read_fd, self.child_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def sync_size(self) -> None:
        """Give the pseudo-terminal our terminal's current size (after SIGWINCH)."""
        if not self.is_pty or self._term_fd is None:
            return
        import fcntl
        import termios

        size = fcntl.ioctl(self._term_fd, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(self._read_fd, termios.TIOCSWINSZ, size)

    def _pump(self) -> None:
        out = getattr(sys.stderr, "buffer", None)
        while True:
            try:
                chunk = os.read(self._read_fd, 65536)
            except OSError:  # EIO: a pty whose every writer has gone (Linux's end of file)
                break
            if not chunk:
                break
            try:
                if out is not None:
                    out.write(chunk)
                    out.flush()
                else:
                    sys.stderr.write(chunk.decode("utf-8", errors="replace"))
            except (OSError, ValueError):
                pass
            self._chunks.append(chunk)
            self._size += len(chunk)
            while self._size - len(self._chunks[0]) > STDERR_TAIL_BYTES:
                self._size -= len(self._chunks.popleft())
        os.close(self._read_fd)

    def tail(self, wait_s: float = 10.0) -> str:
        """The last MiB the child wrote (waits up to ``wait_s`` for writers that outlive it, e.g. workers)."""
        if self._thread.is_alive():
            self._thread.join(timeout=wait_s)
        return b"".join(self._chunks).decode("utf-8", errors="replace")
