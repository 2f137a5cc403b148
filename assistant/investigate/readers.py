"""Readers: what an experiment's re-run showed, pulled out of its output as one finding.

Each reader gets the re-run's text (its stderr tail and the crash hook's traceback) and probe record,
and returns a :class:`Finding`: a sentence in the program's own names (the op and the offending value,
the parameters without gradients, the module that made the first NaN) and the hypotheses it settles.
A reader that finds nothing returns an empty finding; the outcome alone then decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

from assistant.investigate.switches import MARK

LEAD = "lead"  # stands for the diagnosis's leading hypothesis in a finding's verdicts
RULE = "rule"  # the leading hypothesis when it is a rule's own reading, not one of its family's common causes


@dataclass(frozen=True)
class Finding:
    """What one re-run showed, and which hypotheses that verifies or rules out."""

    text: str = ""
    verifies: tuple[str, ...] = ()
    rules_out: tuple[str, ...] = ()
    replaces: bool = False
    values: dict[str, Any] | None = None  # the finding as values, for rules to read (the op and the offending index, the real location)  # the re-run's own failure is the one to diagnose (e.g. the model fails without torch.compile too)


@dataclass(frozen=True)
class RerunView:
    """The parts of a re-run the readers look at."""

    outcome: str  # "passed" | "same" | "other" | "stopped"
    text: str  # stderr tail followed by the hook's traceback
    record: dict[str, Any]
    headline: str  # the re-run's final error line ("" when it passed)
    location: str  # its innermost user frame ("" when unknown)
    original_location: str
    category: str = ""  # the diagnosis's category before the experiment
    switch_values: dict[str, Any] | None = None  # what a switch found, as values


def switch_message(text: str, switch: str) -> str | None:
    """The message a switch raised (``torchhelp experiment [switch]: ...``), or None."""
    found = re.search(re.escape(f"{MARK} [{switch}]: ") + r"([^\n]{1,600})", text)
    return found.group(1).strip() if found else None


def _place(location: str) -> str:
    """``file:line`` of a location written ``file:line in function[: code]``."""
    return location.split(" in ", 1)[0].strip()


def _located(view: RerunView) -> Finding:
    if view.outcome not in ("same", "other") or not view.location:
        return Finding()
    values = {"location": view.location, "headline": view.headline, "moved": _place(view.location) != _place(view.original_location)}
    if values["moved"]:
        return Finding(f"with synchronous launches the error is raised at {view.location}, not at {view.original_location or 'the reported line'}: "
                       "that is the operation that really failed", values=values)
    return Finding(f"with synchronous launches the error is raised at the same line, {view.location}: the reported operation is the failing one",
                   values=values)


_GUARD_OPS = {"cross_entropy": "assert.label_range", "nll_loss": "assert.label_range", "embedding": "assert.embedding_ids",
              "one_hot": "assert.index_range", "gather": "assert.index_range", "scatter": "assert.index_range",
              "scatter_add": "assert.index_range", "index_select": "assert.index_range", "indexing": "assert.index_range",
              "index assignment": "assert.index_range", "multinomial": "assert.not_probabilities"}


def _guard(view: RerunView) -> Finding:
    message = switch_message(view.text, "guard_index")
    if message is None:
        return Finding()
    values = dict(view.switch_values or {})
    op = str(values.get("op") or message.split(":", 1)[0].strip())
    where = f" (called from {view.location})" if view.location else ""
    if view.location:
        values["location"] = view.location
    verified = _GUARD_OPS.get(op)
    others = tuple(sorted(set(_GUARD_OPS.values()) - {verified})) if verified else ()
    # A rule that read an index error from the message is confirmed by the value found here.
    return Finding(f"{message}{where}", verifies=(verified, "ima.bad_indices", RULE) if verified else ("ima.bad_indices", RULE), rules_out=others,
                   values=values or None)


def _memory_sites(view: RerunView) -> Finding:
    sites = ((view.record.get("memory") or {}).get("allocation_sites")) or []
    if not sites:
        return Finding()
    shown = "; ".join(f"{s.get('site')} ({_gib(s.get('bytes', 0))})" for s in sites[:3])
    return Finding(f"the allocations alive at the failure come mostly from: {shown}")


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


_BACKWARD_NAN = re.compile(r"Function '(\w+)' returned nan values in its (\d+)(?:st|nd|rd|th) output")


def _nonfinite(view: RerunView) -> Finding:
    message = switch_message(view.text, "nonfinite")
    found = view.switch_values or {}
    if message is not None and found.get("switch") == "nonfinite":
        first_call = int(found.get("call") or 0) <= 1
        values: dict[str, Any] = {k: found[k] for k in ("module", "type", "where", "call") if k in found}
        if found.get("where") == "input":
            return Finding(message, verifies=("nan.bad_input_or_op",), rules_out=("nan.learning_rate",) if first_call else (), values=values)
        # Finite inputs, non-finite output: an op that cannot take these values at the first step; weights that diverged later.
        return Finding(message, verifies=("nan.bad_input_or_op",) if first_call else ("nan.learning_rate",),
                       rules_out=("nan.learning_rate",) if first_call else (), values=values)
    backward = _BACKWARD_NAN.search(view.text)
    if backward:
        return Finding(f"the first NaN appears in backward, in {backward.group(1)} (output {backward.group(2)}); the forward pass was finite",
                       verifies=("nan.bad_input_or_op",))
    if view.outcome == "passed":
        return Finding("no module produced NaN or Inf in forward and no backward function returned NaN during the re-run")
    if view.outcome == "same":
        return Finding("no module's forward output held NaN or Inf before the failure: the non-finite value arises outside the modules "
                       "(in the loss, a functional op or the optimizer step)")
    return Finding()


_FORWARD_TRACE = re.compile(r"Traceback of forward call that caused the error:\n(?P<body>(?:[ \t]+[^\n]*\n?){1,400})")
_FRAME = re.compile(r'File "(?P<file>[^"\n]+)", line (?P<line>\d+), in (?P<func>[^\n]+)\n[ \t]+(?P<code>[^\n]*)')


def _anomaly_trace(view: RerunView) -> Finding:
    from assistant.parse.traceback import is_user_file

    block = _FORWARD_TRACE.search(view.text)
    if not block:
        return Finding()
    frames = [m for m in _FRAME.finditer(block.group("body")) if is_user_file(m.group("file"))]
    if not frames:
        return Finding("anomaly detection printed the forward call, in library code only")
    last = frames[-1]
    return Finding(f"anomaly detection names the forward operation: {last.group('file')}:{last.group('line')} in {last.group('func').strip()}: "
                   f"`{last.group('code').strip()}`", verifies=(LEAD,))


_NO_GRAD = re.compile(r"Parameters? which did not receive grad for rank (\d+): ([^\n]{1,800})")
_COLLECTIVE_MISMATCH = re.compile(r"Detected mismatch between collectives on ranks[^\n]{0,600}")


def _ddp_detail(view: RerunView) -> Finding:
    unused = _NO_GRAD.search(view.text)
    if unused:
        return Finding(f"rank {unused.group(1)}: these parameters got no gradient: {unused.group(2).strip()}", verifies=("ddp.unused_parameters", RULE))
    mismatch = _COLLECTIVE_MISMATCH.search(view.text)
    if mismatch:
        return Finding(mismatch.group(0), verifies=("ddp.changing_graph",))
    return Finding()


_NCCL_WARN = re.compile(r"NCCL WARN [^\n]{1,300}")


def _nccl_debug(view: RerunView) -> Finding:
    mismatch = _COLLECTIVE_MISMATCH.search(view.text)
    if mismatch:
        # The ranks called different collectives (or shapes): a rule that read a mismatch from the message is confirmed.
        return Finding(mismatch.group(0), verifies=("nccl.rank_desync", RULE), rules_out=("nccl.transport",))
    warn = _NCCL_WARN.search(view.text)
    if warn:
        return Finding(f"NCCL's first warning: {warn.group(0)}")
    return Finding()


def _flight_recorder(view: RerunView) -> Finding:
    """Which collective each rank was in when the watchdog fired (see :mod:`assistant.investigate.flight`)."""
    summary = (view.switch_values or {}).get("flight")
    if not isinstance(summary, dict):
        return Finding("no rank wrote a flight-recorder dump: the re-run did not reach the watchdog's timeout, "
                       "or this build of torch does not record collectives") if view.outcome in ("same", "other") else Finding()
    ranks: dict[str, dict[str, Any]] = summary.get("ranks") or {}
    missing = [int(r) for r in summary.get("missing_ranks") or ()]
    waiting = {r: s["waiting"] for r, s in ranks.items() if isinstance(s.get("waiting"), dict)}
    done = {r: int(s.get("last_completed") or 0) for r, s in ranks.items()}
    values = {"waiting": {r: f"{w['op']} #{w['seq']}" for r, w in waiting.items()}, "completed": done, "missing_ranks": missing}
    if not waiting:
        return Finding("the ranks' collective traces show none left waiting when the run ended", values=values)

    def where(rank: str) -> str:
        w = waiting[rank]
        sizes = f" on inputs {w['sizes']}" if w.get("sizes") else ""
        return f"rank {rank} was waiting in {w['op']} #{w['seq']}{sizes} after {done[rank]} completed collectives"

    said = "; ".join(where(r) for r in sorted(waiting, key=int))
    positions = {(w["op"], w["seq"]) for w in waiting.values()}
    behind = [r for r in ranks if r not in waiting and done[r] < min(w["seq"] for w in waiting.values())]
    worked = max(done.values()) >= 1  # earlier collectives completed: the ranks could reach each other
    transport = ("nccl.transport",) if worked else ()
    if len(positions) > 1 or behind:
        extra = "".join(f"; rank {r} had finished its collectives after {done[r]}" for r in behind)
        return Finding(f"{said}{extra}: the ranks were not in the same collective", verifies=("nccl.rank_desync",),
                       rules_out=transport, values=values)
    sizes = {str(w.get("sizes")) for w in waiting.values()}
    if len(sizes) > 1:
        return Finding(f"{said}: the ranks called the same collective with tensors of different sizes",
                       verifies=("nccl.rank_desync", RULE), rules_out=transport, values=values)
    if missing:
        gone = ", ".join(str(r) for r in missing)
        return Finding(f"{said}; rank {gone} left no trace: it had stopped calling collectives (it exited, crashed or "
                       "never reached this one)", rules_out=transport, values=values)
    return Finding(f"{said}: every rank entered the same collective and it never finished, so the ranks agree and the "
                   "collective itself is stuck", rules_out=("nccl.rank_desync",), values=values)


def _compile_eager(view: RerunView) -> Finding:
    if view.outcome == "passed":
        return Finding("without torch.compile the program passes the point where it failed: the failure is torch.compile's", verifies=(LEAD,))
    if view.outcome in ("same", "other"):
        return Finding(f"without torch.compile it still fails: {view.headline}" + (f" at {view.location}" if view.location else "")
                       + "; the error is in the program, and compiling only reported it", rules_out=(LEAD,), replaces=True)
    return Finding()


def _main_process(view: RerunView) -> Finding:
    if view.outcome in ("same", "other") and view.headline:
        where = f" at {view.location}" if view.location else ""
        return Finding(f"loading in the main process, the error is {view.headline}{where}")
    if view.outcome == "passed":
        # A worker-process failure (CUDA in a forked worker, a missing main guard) is what the multiprocessing rules read.
        confirms = (RULE,) if view.category == "multiprocessing_error" else ()
        return Finding("loading in the main process passes: the failure needs worker processes", verifies=confirms)
    return Finding()


READERS: dict[str, Callable[[RerunView], Finding]] = {
    "located": _located, "guard": _guard, "memory_sites": _memory_sites, "nonfinite": _nonfinite, "anomaly_trace": _anomaly_trace,
    "ddp_detail": _ddp_detail, "nccl_debug": _nccl_debug, "compile_eager": _compile_eager, "main_process": _main_process,
    "flight_recorder": _flight_recorder,
}


def read(reader: str, view: RerunView) -> Finding:
    """The named reader's finding (an empty one for no reader)."""
    return READERS[reader](view) if reader else Finding()
