"""Signals around `torchhelp run`: the child is signalled as if torchhelp were not there.

While the command runs, torchhelp sits between the user's shell and the program. Three rules keep
that invisible:

- Ctrl-C and Ctrl-\\ come from the terminal, which signals the whole foreground process group: the
  child already has them, with its own default disposition (a Python child raises KeyboardInterrupt).
  torchhelp only survives them, so that it can still diagnose the child's death. Sent to torchhelp
  alone (no terminal, or a background job), they are passed on to the child.
- SIGTERM and SIGHUP are meant for the job: they are forwarded to the child.
- When the child was killed by a signal, torchhelp ends by the same signal (``die_like``), so the
  shell's ``$?``, ``set -e`` and ``wait`` see the status they would have seen without us.
- A stop asked for twice (a second Ctrl-C, or any second SIGINT/SIGQUIT/SIGTERM/SIGHUP) while the
  child is still shutting down ends torchhelp at once: the child and every process under it are
  killed (``RunAbandoned``). A stop after the child has exited, while its last output is collected,
  ends torchhelp at once too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

from assistant.errors import RunnerError

# Signals a terminal sends to its whole foreground process group, the child included.
TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGQUIT)
# Signals aimed at the job as a whole; the child only gets them if we pass them on.
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class RunAbandoned(RunnerError):
    """A second stop arrived: the child's processes were killed and torchhelp ends without waiting.

    ``signum`` is the signal that ended it; torchhelp then dies of it like the child would have.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by a second {signal.Signals(signum).name}; the command's processes were killed")
        self.signum = signum
        self.exit_code = 128 + signum


def _in_terminal_foreground() -> bool:
    """True when our process group is the foreground group of our controlling terminal, i.e. a
    Ctrl-C typed there reached the child as well as us."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


class SignalRelay:
    """Context manager used while the child runs: survive terminal signals, forward the others.

    ``attach(pid)`` names the child once it exists; a signal that came earlier is sent then.
    ``forwarded`` lists what was passed on. Signals we were started with ignored stay ignored (the
    child inherits that, exactly as it would from the shell), and nothing is installed outside the
    main thread, where Python cannot handle signals.
    """

    def __init__(self, on_resize: Callable[[], None] | None = None) -> None:
        self.forwarded: list[int] = []
        self.stops: list[int] = []  # every stop signal torchhelp received, the terminal's included
        self._exited = False
        self._pid: int | None = None
        self._pending: list[int] = []
        self._on_resize = on_resize
        self._previous: dict[int, object] = {}

    def __enter__(self) -> SignalRelay:
        if threading.current_thread() is not threading.main_thread():
            return self
        for sig in (*TERMINAL_SIGNALS, *FORWARDED_SIGNALS):
            current = signal.getsignal(sig)
            if current is signal.SIG_IGN:
                continue
            # A Python-level handler becomes SIG_DFL in the exec'd child: the child starts with the
            # default disposition, unlike SIG_IGN which would be inherited.
            self._previous[sig] = signal.signal(sig, self._handle)
        if self._on_resize is not None:
            self._previous[signal.SIGWINCH] = signal.signal(signal.SIGWINCH, self._resize)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def attach(self, pid: int) -> None:
        """The child now exists: deliver anything that arrived while it was being started."""
        self._pid = pid
        pending, self._pending = self._pending, []
        for sig in pending:
            self._send(sig)

    def child_exited(self) -> None:
        """The child is gone: a stop from now on only cuts short the collection of its last output."""
        self._exited = True

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.stops.append(signum)
        if self._exited or len(self.stops) > 1:
            # Asked twice (or with nothing left to stop): do not wait for the child any longer.
            if self._pid is not None and not self._exited:
                kill_tree(self._pid)
            raise RunAbandoned(signum)
        if signum in TERMINAL_SIGNALS and _in_terminal_foreground():
            return  # the terminal signalled the child too; a second copy would interrupt its handler
        self._send(signum)

    def _resize(self, signum: int, frame: FrameType | None) -> None:
        if self._on_resize is not None:
            with contextlib.suppress(OSError):
                self._on_resize()

    def _send(self, sig: int) -> None:
        if self._pid is None:
            self._pending.append(sig)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._pid, sig)
            self.forwarded.append(sig)


def _descendants(pid: int) -> list[int]:
    """Every live process under ``pid`` (children, grandchildren...), read from /proc; none elsewhere."""
    parents: dict[int, list[int]] = {}
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        found.extend(kids)
        todo.extend(kids)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL the child, everything under it, and its own process group when it made one.

    The child normally shares torchhelp's process group (that is how the terminal's Ctrl-C reaches it),
    so that group is never killed as a whole: it holds torchhelp and may hold the rest of a pipeline.
    """
    tree = [pid, *_descendants(pid)]
    groups = set()
    for p in tree:
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(p))
    for p in tree:
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGKILL)
    for group in groups - {os.getpgrp()}:
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGKILL)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def stoppable() -> Iterator[None]:
    """While diagnosing: SIGTERM and SIGHUP interrupt us like Ctrl-C (KeyboardInterrupt), so the
    caller can stop early and still exit with the child's status instead of dying of the signal."""
    previous: dict[int, object] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in FORWARDED_SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                previous[sig] = signal.signal(sig, _raise_interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


def _no_core_dump() -> None:
    """Keep our own death by SIGSEGV/SIGABRT/SIGQUIT from writing a core file: it would replace the
    child's `core` in the same directory with a useless dump of torchhelp."""
    try:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_CORE)
        resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    except (ImportError, ValueError, OSError):
        pass
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            # PR_SET_DUMPABLE = 4: also stops a core_pattern pipe (systemd-coredump), which ignores RLIMIT_CORE.
            ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
        except (OSError, AttributeError):
            pass


def die_like(returncode: int) -> int:
    """Exit status for a child's ``returncode`` (subprocess convention: -N means killed by signal N).

    A normal exit code is returned as is. For a signal death we end ourselves with the same signal
    (default action restored, unblocked, no core file), so the parent shell sees the very same
    wait status; if we are somehow still alive after that, return the shell's 128+N.
    """
    if returncode >= 0:
        return returncode
    sig = -returncode
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    _no_core_dump()
    with contextlib.suppress(OSError, ValueError):  # SIGKILL/SIGSTOP refuse a disposition
        signal.signal(sig, signal.SIG_DFL)
    with contextlib.suppress(OSError, ValueError):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
    with contextlib.suppress(OSError, ValueError):
        os.kill(os.getpid(), sig)
        # With other threads alive the kernel may deliver it a moment after kill() returns.
        for _ in range(200):
            time.sleep(0.01)
    return 128 + sig
