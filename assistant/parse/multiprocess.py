"""A log of several processes, read the way triage reads a job: the error that ended the run, the rank that failed first.

Torchrun, ``mp.spawn`` and per-rank prefixed logs carry many tracebacks: a rank's own error, its peers' NCCL
errors and timeouts, the launcher's summary. :mod:`assistant.triage.verdict` decides which one ended the run
(for ``triage``, per job); this module hands that decision to the parser, so ``ask`` and ``run`` name the same
error and rank as ``triage`` for the same log.
"""

from __future__ import annotations

from dataclasses import replace

from assistant.parse.bounds import MAX_PARSE_LINES, bound_for_parse
from assistant.types import Failure


_UNWRAPPED = ("spawned process", "DataLoader worker", "DataParallel replica")


def job_failure(text: str) -> Failure | None:
    """The failure of a multi-process log as triage decides it; None for one process (the parser reads it alone)."""
    from assistant.triage.markers import may_show_several_processes

    # The job-level pass reads at most what the parser reads (the tail around the last traceback of a huge paste);
    # the marker test too: on a whole huge paste of blank lines its line-start patterns take seconds.
    bounded, bound_notes = bound_for_parse(text) if text.count("\n") >= MAX_PARSE_LINES else (text, ())
    if not may_show_several_processes(bounded):
        return None  # one process: the parser reads it alone (and the job reader is not even imported)
    from assistant.parse.traceback import parse_failure
    from assistant.triage.verdict import failure_stem, verdict_of_text

    verdict = verdict_of_text(bounded)
    if verdict is None or not verdict.text.strip():
        return None
    if verdict.reason != "exception":
        # A signal, a launcher's exit report, a scheduler's verdict or a hang: the whole log tells that story better
        # than its one line (what the processes were doing, the launcher's summary); the rank is the job's.
        whole = parse_failure(text)
        return replace(whole, rank=verdict.first_rank, notes=tuple(dict.fromkeys((*whole.notes, *verdict.notes))))
    whole = parse_failure(text)
    if (whole.exc_type and (whole.wrapper or "").startswith(_UNWRAPPED)
            and failure_stem(f"{whole.exc_type}: {whole.message}") == failure_stem(verdict.headline)):
        # The parser read the same error out of the wrapper that re-raised it (a spawned child's traceback quoted in
        # ProcessRaisedException, a DataLoader worker's): its reading keeps what the wrapper says; the rank is the job's.
        return replace(whole, rank=verdict.first_rank, notes=tuple(dict.fromkeys((*bound_notes, *whole.notes, *verdict.notes))))
    inner = parse_failure(verdict.text)
    decided = verdict.headline.strip()
    if decided and not inner.headline.startswith(decided) and failure_stem(inner.headline) != failure_stem(decided):
        # The decided error's context runs on into other processes' output (a C++ abort's `what():` line followed by
        # the launcher's own traceback): read the text only up to the decided error's line.
        upto = _through_line(verdict.text, verdict.headline)
        if upto:
            inner = parse_failure(upto)
    if not (inner.exc_type or inner.message.strip() or inner.cuda_asserts or inner.nccl_lines or inner.signal_lines):
        return None
    notes = tuple(dict.fromkeys((*bound_notes, *inner.notes, *verdict.notes)))
    return replace(inner, rank=verdict.first_rank, notes=notes)


def _through_line(text: str, headline: str) -> str:
    """``text`` up to and including the first line that holds ``headline`` ("" when none does)."""
    lines = text.splitlines()
    probe = headline.strip()[:120]
    for i, line in enumerate(lines):
        if probe and probe in line:
            return "\n".join(lines[: i + 1])
    return ""
