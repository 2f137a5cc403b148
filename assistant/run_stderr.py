"""The child's stderr under `torchhelp run`: shown live, and its last MiB kept for the diagnosis.

CUDA kernel assertion lines, NCCL warnings and DataLoader worker tracebacks are printed to stderr,
not carried by the final exception; without them a diagnosis loses its best clues. So stderr goes
through us. When our own stderr is a terminal, the child writes to a pseudo-terminal instead of a
pipe: it still sees ``isatty()`` true (progress bars, colours, line buffering stay as the user
knows them), and we copy the bytes unchanged to the real terminal.

A process the command started may outlive it and keep the stderr it inherited (``prog &`` in a
shell script, a detached helper). We do not wait for it: once the command has exited and its
output has paused for a moment, what is left of the pipe (or pseudo-terminal) is handed to a small
forwarding process that copies it to our stderr until its last writer closes it. So `run` returns
at once, and the background process is neither blocked nor killed by SIGPIPE when we exit.
"""

from __future__ import annotations

import collections
import contextlib
import os
import selectors
import subprocess
import sys
import threading
import time

STDERR_TAIL_BYTES = 1 << 20
IDLE_GRACE_S = 0.25  # after the command exits, this much silence on its stderr ends the wait for more
FOLLOW_S = 2.0  # ... and output that keeps coming (a dying worker's traceback, a background progress bar) this long
# The forwarder: copies fd argv[1] to its stderr until every writer has closed it.
_FORWARDER = """
import os, sys
fd = int(sys.argv[1])
while True:
    try:
        data = os.read(fd, 65536)
    except OSError:  # EIO: a pseudo-terminal whose last writer has gone
        break
    if not data:
        break
    try:
        while data:
            data = data[os.write(2, data):]
    except OSError:  # our stderr is gone: nothing left to copy to
        break
"""


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
        self._last = time.monotonic()  # when the last chunk arrived
        self._reading = True  # our read end is open (closed at end of file or once handed over)
        self._wake_r, self._wake_w = os.pipe()  # a byte here stops the pump without closing the read end
        self._thread = threading.Thread(target=self._pump, name="torchhelp-stderr-tee", daemon=True)

    def started(self) -> None:
        """The child holds its end now: drop ours (so the end of its output is seen) and start copying."""
        os.close(self.child_fd)
        self._thread.start()

    def abandon(self) -> None:
        """The child could not be started: release both ends."""
        for fd in (self._read_fd, self.child_fd, self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._reading = False

    def sync_size(self) -> None:
        """Give the pseudo-terminal our terminal's current size (after SIGWINCH)."""
        if not self.is_pty or self._term_fd is None or not self._reading:
            return
        import fcntl
        import termios

        size = fcntl.ioctl(self._term_fd, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(self._read_fd, termios.TIOCSWINSZ, size)

    def _selector(self) -> selectors.BaseSelector | None:
        """Waits on the read end and the wake pipe; None where pipes cannot be selected (then reads block)."""
        sel = selectors.DefaultSelector()
        try:
            sel.register(self._read_fd, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
        except (OSError, ValueError):
            sel.close()
            return None
        return sel

    def _pump(self) -> None:
        out = getattr(sys.stderr, "buffer", None)
        sel = self._selector()
        with sel if sel is not None else contextlib.nullcontext():
            while True:
                if sel is not None and any(key.fd == self._wake_r for key, _ in sel.select()):
                    return  # told to stop: the read end stays open for the forwarder
                try:
                    chunk = os.read(self._read_fd, 65536)
                except OSError:  # EIO: a pty whose every writer has gone (Linux's end of file)
                    break
                if not chunk:
                    break
                self._last = time.monotonic()
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
        self._reading = False
        os.close(self._read_fd)

    def tail(self, wait_s: float = 10.0) -> str:
        """The last MiB the child wrote, once its writers are done or have paused.

        Call it after the command has exited. Processes that outlive it (dying workers) may still be
        writing: we wait while output keeps coming, up to ``wait_s`` and :data:`FOLLOW_S`, but stop
        after :data:`IDLE_GRACE_S` of silence. A writer still holding the pipe then (a background
        process) gets the rest copied to our stderr by a forwarder that outlives us (see :func:`_hand_off`).
        """
        if self._thread.is_alive():
            start = time.monotonic()
            limit = min(wait_s, FOLLOW_S)
            while self._thread.is_alive():
                now = time.monotonic()
                if now - start >= limit or now - max(self._last, start) >= IDLE_GRACE_S:
                    break
                self._thread.join(timeout=0.02)
            if self._thread.is_alive():
                self._hand_off()
        return b"".join(self._chunks).decode("utf-8", errors="replace")

    def _hand_off(self) -> None:
        """Stop copying here and give the open read end to a forwarding process."""
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        self._thread.join(timeout=1.0)
        if self._thread.is_alive():  # blocked writing to our stderr (a paused terminal): keep the old way
            return
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        if not self._reading:  # the end of file came while we were stopping it
            return
        self._reading = False
        try:
            # The forwarder copies to our stderr (fd 2 inherited); without a file descriptor there is nowhere
            # to copy to, and it only drains the pipe so that the writer is not blocked or killed.
            subprocess.Popen([sys.executable, "-I", "-S", "-c", _FORWARDER, str(self._read_fd)], pass_fds=(self._read_fd,),
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=self._term_fd if self._term_fd is not None else subprocess.DEVNULL,
                             # Its own session, like the background process it serves: a Ctrl-C meant for our
                             # diagnosis, or the hangup sent when a session leader running us exits, must
                             # not cut that process's output (it ends when its last writer closes the pipe).
                             start_new_session=True)
        except OSError:
            pass  # cannot start one: the writer sees a closed pipe when we exit, as before
        finally:
            os.close(self._read_fd)
