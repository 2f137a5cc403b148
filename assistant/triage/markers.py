"""Whether a log shows several processes: the cheap test before a job-level reading.

Kept apart from :mod:`assistant.triage.verdict` so that ``ask`` on one process's traceback (most pastes) does not
import the whole job reader (about 11 ms of a cold ``ask``) only to learn there is one process.
"""

from __future__ import annotations

import re

_MULTI_PROCESS = re.compile(
    r"^\s*\[(?:rank|global_rank|default)\d+\]:|^\[1,\d+\]<std|Root Cause \(first observed failure\)|ChildFailedError|ProcessRaisedException"
    r"|ProcessExitedException|-- Process \d+ terminated with the following error|exitcode\s*:\s*-?\d+ \(pid|WORLD_SIZE=\d|world[_ ]size[=: ]+\d",
    re.MULTILINE,
)
_SRUN_LABEL = re.compile(r"^\d{1,5}: ", re.MULTILINE)  # srun --label; the reader decides whether most lines carry it


def may_show_several_processes(text: str) -> bool:
    """False when nothing in the text marks a second process (launcher reports, rank prefixes, srun labels, a
    spawned child's error): the job-level reading has nothing to add then."""
    return bool(_MULTI_PROCESS.search(text)) or len(_SRUN_LABEL.findall(text, 0, 200_000)) >= 3
