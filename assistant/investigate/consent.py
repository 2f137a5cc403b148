"""Consent to re-run: the program may write files, send requests or spend money each time it runs.

At a terminal the user is asked once, naming the experiments; elsewhere only ``--yes`` allows it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from assistant.investigate.catalogue import ExperimentSpec


def ask_consent(argv: Sequence[str], specs: Sequence[ExperimentSpec], assume_yes: bool) -> tuple[bool, str]:
    """(allowed, why): ``--yes``, or a "y" typed at the controlling terminal; never a guess."""
    if assume_yes:
        return True, "allowed by --yes"
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return False, "not re-run: no terminal to ask; pass --yes to allow re-running the command"
    from assistant.render.outgoing import shown_line  # the command line is the user's text: no escapes reach the terminal

    names = ", ".join(s.change for s in specs)
    question = (f"torchhelp: re-run `{shown_line(' '.join(argv))[:120]}` up to {len(specs)} time(s), one change each ({names})?\n"
                "  Each re-run repeats what the program does (files it writes, requests it sends). [y/N] ")
    try:
        # Two plain byte streams: a text stream opened "r+" on a terminal is refused as not seekable.
        with open("/dev/tty", "wb", buffering=0) as out, open("/dev/tty", "rb", buffering=0) as inp:
            out.write(question.encode("utf-8", errors="replace"))
            answer = inp.readline(64).decode("utf-8", errors="replace")
    except OSError:
        return False, "not re-run: the terminal could not be read; pass --yes to allow re-running the command"
    if answer.strip().lower() in ("y", "yes"):
        return True, "allowed at the terminal"
    return False, "not re-run: declined at the terminal"

