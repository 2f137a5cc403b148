"""`torchhelp triage --watch`: keep triaging as jobs finish, and tell a webhook about new root causes.

Each poll: discover the jobs; fingerprint each one's files (names, sizes, mtimes); a job not yet
reported with its current fingerprint is *finished* when

- its fingerprint has not changed for ``settle_s`` (measured across polls, and across restarts:
  the first time a fingerprint was seen is stored), or its newest file is already ``settle_s``
  old (a backlog present at start is triaged at once), or
- a terminal marker (:data:`TERMINAL_MARKERS`) is in the last bytes of one of its files and the
  files have been quiet for :data:`MARKER_GRACE_S` (launchers and ranks still flush a few lines
  after the summary; the grace keeps them in the report).

A finished job is extracted (``extract_job``), assigned a group by the persisted Drain3
``Grouper`` (new or existing), and stored; a message is queued on a new group and each time a
group grew by ``notify_every`` jobs, in the same transaction, then delivered (see ``state.py``).
A job whose files change after it was reported (a requeued job appending to its log) is triaged
again when it settles, moving between groups if its failure changed. Restarting with the same
state re-reports nothing. Ctrl-C and SIGTERM stop between steps, and a webhook delivery at once
(within a fraction of a second, however slowly the receiver answers): what was committed stays, a
job caught half-way is triaged again next time, an undelivered message stays in the outbox, and a
"stopped" event closes the run. Delivery is at least once, in order, with a per-message cap (see
``webhook``): a refused message is dropped with a note instead of blocking the ones after it.

Clock note: the mtime shortcut trusts the file server's clock; a server far behind ours could
make a live job look settled. The fingerprint clock (ours only) is the fallback that always holds.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from assistant.errors import TriageError
from assistant.triage.model import FAILED, JobReport, JobSpec

log = logging.getLogger(__name__)

# How a job's logs say it is over. Small on purpose: a marker only shortens the wait, settling
# by time always works. Matched against the last TAIL_BYTES of each (uncompressed) file.
TERMINAL_MARKERS = re.compile(
    "|".join((
        r"Root Cause \(first observed failure\)",  # torchrun's failure summary, printed last
        r"\bChildFailedError\b",  # torchrun / elastic launcher gave up
        r"\bCANCELLED AT\b",  # slurmstepd: *** JOB 42 ON node1 CANCELLED AT ... (time limit, scancel, preemption)
        r"(?i:\bjob (?:finished|completed)\b)",  # batch scripts' own epilogue
        r"(?i:\bexit(?:ed)? with (?:exit )?code\b|\bexit ?code\s*[:=]\s*-?\d+)",  # srun task exits, torchrun exitcode, wrappers
    ))
)
TAIL_BYTES = 8192
MARKER_GRACE_S = 2.0
GROUPER_KEY = "grouper_json"  # JSON (see Grouper.to_json)
LEGACY_GROUPER_KEY = "grouper"  # the pickle older versions stored: refused, never loaded


@dataclass(frozen=True)
class WatchEvent:
    """Something the watcher did; ``text`` is the line a terminal shows."""

    kind: str  # job | new_group | group_grew | regression | sent | send_failed | send_dropped | error | stopped
    text: str
    job_id: str | None = None
    group: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WatchSummary:
    """What one ``watch`` run did."""

    polls: int
    jobs_reported: int
    new_groups: int
    messages_sent: int
    pending: int  # messages still undelivered (kept for the next run)
    stopped_by: str  # once | stop | interrupt | sigterm
    dropped: int = 0  # messages the webhook refused for good, or that failed MAX_DELIVERY_ROUNDS polls


@dataclass(frozen=True)
class Observation:
    """A job's files right now."""

    fingerprint: str
    newest_mtime: float | None  # None when a file vanished between discovery and stat


def observe_files(spec: JobSpec) -> Observation:
    """Fingerprint of the job's files: relative names, sizes and mtimes (ns)."""
    digest = hashlib.sha1()
    newest: float | None = 0.0
    for path in spec.files:
        try:
            st = os.stat(path)
        except OSError:
            digest.update(f"{path}\0missing\n".encode("utf-8", "surrogateescape"))
            newest = None
            continue
        rel = os.path.relpath(path, spec.root)
        digest.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
        if newest is not None:
            newest = max(newest, st.st_mtime)
    return Observation(digest.hexdigest(), newest)


def terminal_marker(spec: JobSpec) -> str | None:
    """The first terminal marker in the last bytes of the job's files, or None (gzip files are
    skipped: finding their end means inflating all of them; they settle by time)."""
    for path in spec.files:
        if path.endswith(".gz"):
            continue
        try:
            with open(path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - TAIL_BYTES))
                tail = fh.read(TAIL_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        found = TERMINAL_MARKERS.search(tail)
        if found:
            return found.group(0)
    return None


def is_finished(spec: JobSpec, obs: Observation, observed_at: float, now: float, settle_s: float) -> bool:
    """Whether the job's logs are final (see the module doc)."""
    if obs.newest_mtime is None:  # files are being rotated or deleted right now
        return False
    quiet_for = max(now - observed_at, now - obs.newest_mtime)
    if quiet_for >= settle_s:
        return True
    return quiet_for >= min(MARKER_GRACE_S, settle_s) and terminal_marker(spec) is not None


class Watcher:
    """One watcher over some paths, with its state; :meth:`poll` is one round."""

    def __init__(self, paths: Sequence[str | os.PathLike[str]], *, settle_s: float = 60.0, webhook: str | None = None,
                 notify_every: int = 10, state_path: str | Path | None = None,
                 on_event: Callable[[WatchEvent], None] | None = None, diagnose_groups: bool = True,
                 options: Any = None, engine_obj: Any = None, regression_after: float | None = None,
                 stop: threading.Event | None = None) -> None:
        from assistant.triage.resolution_log import ensure_tables
        from assistant.triage.state import TriageState

        if notify_every < 1:
            raise TriageError(f"notify_every must be at least 1, not {notify_every}")
        self.paths = list(paths)
        self.settle_s = settle_s
        self.webhook = webhook
        self.notify_every = notify_every
        self.on_event = on_event
        self.diagnose_groups = diagnose_groups
        self.options = options
        self._engine_obj = engine_obj
        self.state = TriageState(state_path)
        self.regression_after = regression_after
        self._resolutions: list[Any] = []
        try:
            ensure_tables(self.state.db)
            self.grouper = self._load_grouper()
        except BaseException:
            self.state.close()  # a refused state releases its lock: the user may move it away and start again
            raise
        self.polls = 0
        self.jobs_reported = 0
        self.new_groups = 0
        self.messages_sent = 0
        self.messages_dropped = 0
        self.stop = stop or threading.Event()  # set by SIGTERM/stop(): a poll ends between steps, a delivery at once

    # -- the grouper travels inside the state -------------------------------------------------

    def _load_grouper(self) -> Any:
        """The grouper saved in the state (JSON), a fresh one when none; an older pickled one is refused."""
        from assistant.triage.grouping import Grouper, parse_grouper_bytes

        if self.state.get_blob(LEGACY_GROUPER_KEY) is not None:
            raise TriageError(f"{self.state.path} holds a grouper saved by an older torchhelp as a pickle, which is never "
                              "loaded (a writable state file would run code). Move the file away (or delete it) to start "
                              "fresh: jobs already reported will be reported once more.")
        blob = self.state.get_blob(GROUPER_KEY)
        if blob is None:
            return Grouper()
        return Grouper.from_json(parse_grouper_bytes(blob, str(self.state.path)))

    def _grouper_bytes(self) -> bytes:
        """The grouper as JSON bytes, stored in the same transaction as the jobs it has seen."""
        import json

        return json.dumps(self.grouper.to_json()).encode("utf-8")

    # -- events -------------------------------------------------------------------------------

    def emit(self, event: WatchEvent) -> None:
        """Hand an event to ``on_event`` (or the log when there is none).

        Its line quotes job and folder names, titles and webhook answers: it goes out as
        :func:`~assistant.render.outgoing.shown_line` made it (no terminal controls, no credentials).
        """
        from assistant.render.outgoing import shown_line

        event = replace(event, text=shown_line(event.text))
        if self.on_event is None:
            log.info("%s", event.text)
        else:
            self.on_event(event)

    # -- one poll -----------------------------------------------------------------------------

    def poll(self, *, first: bool = False) -> None:
        """Discover, settle, triage what finished, deliver queued messages."""
        self.polls += 1
        self._resolutions = self._load_resolutions()
        specs = self._discover(first)
        now = time.time()
        ready: list[tuple[JobSpec, str]] = []
        with self.state.transaction():
            for spec in specs:
                obs = observe_files(spec)
                observed_at = self.state.observe(spec.root, spec.job_id, obs.fingerprint, now)
                row = self.state.job(spec.root, spec.job_id)
                if row is not None and row.reported_fingerprint == obs.fingerprint:
                    continue  # reported with exactly these files (this run or an earlier one)
                if is_finished(spec, obs, observed_at, now, self.settle_s):
                    ready.append((spec, obs.fingerprint))
        for spec, fp in ready:
            if self.stop.is_set():
                return  # the rest is triaged next time (nothing of theirs was committed)
            self._report(spec, fp)
        self.flush()

    def _load_resolutions(self) -> list[Any]:
        """The team's resolution runbooks, read again each poll (a `resolve` while watching counts at once)."""
        from assistant.settings import load_settings
        from assistant.triage.resolutions import load_resolutions

        return load_resolutions(load_settings().home)

    def _known(self, report: JobReport) -> tuple[dict[str, Any], float, bool] | None:
        """(known, resolved_at, is a regression) when the job's group matches a resolution, else None."""
        if not self._resolutions:
            return None
        from assistant.triage.grouping import normalize_location
        from assistant.triage.known import known_of
        from assistant.triage.resolutions import find_resolution

        r = find_resolution(self._resolutions, template=self.grouper.template(report),
                            location=normalize_location(report.location), category=report.category)
        if r is None:
            return None
        cutoff = self.regression_after if self.regression_after is not None else r.resolved_at
        ended = report.end if report.end is not None else report.start
        return known_of(r, cutoff).to_dict(), r.resolved_at, ended is not None and ended > cutoff

    def _discover(self, first: bool) -> list[JobSpec]:
        from assistant.triage.jobs import discover

        try:
            return discover(self.paths)
        except TriageError as exc:
            if str(exc).startswith("no job logs found"):
                return []  # an empty directory: jobs will come
            if first:
                raise  # a path that does not exist: the user's mistake, say it at once
            # later: a network filesystem hiccup must not end the watch
            self.emit(WatchEvent("error", f"cannot list jobs: {exc}"))
            return []

    def _report(self, spec: JobSpec, fingerprint: str) -> None:
        from assistant.triage.distribute import safe_extract
        from assistant.triage.webhook import message

        report = safe_extract(spec, self.options)
        if report.status == FAILED and report.category is None:
            from assistant.triage.extract import categorize

            report = categorize(report)  # one job at a time: the rules run per job here
        previous = self.state.job(spec.root, spec.job_id)
        group_id: str | None = None
        described: tuple[str, str, str | None, str | None] | None = None
        if report.status == FAILED:
            group_id = self.grouper.key(report)
            if self.state.group(group_id) is None:
                described = self._describe(report)  # outside the transaction: diagnosis takes time
        known = self._known(report) if group_id is not None else None
        now = time.time()
        hours = report.gpu_hours or 0.0
        events: list[WatchEvent] = []
        with self.state.transaction():
            if previous is not None and previous.reported_fingerprint is not None and previous.group_id:
                # triaged before with other files: take it out of its old group first
                self.state.change_group(previous.group_id, jobs=-1, gpu_hours=-(previous.gpu_hours or 0.0))
            self.state.record_job(spec.root, spec.job_id, fingerprint=fingerprint, status=report.status,
                                  group_id=group_id, category=report.category if group_id else None,
                                  title=report.title if group_id else None, gpu_hours=report.gpu_hours, now=now)
            status_text = f"{report.status}" + (f" → {group_id} ({report.category})" if group_id else "")
            events.append(WatchEvent("job", f"{spec.job_id}: {status_text}", spec.job_id, group_id,
                                     {"status": report.status, "category": report.category, "gpu_hours": report.gpu_hours}))
            if group_id is not None:
                if described is not None:
                    category, title, d_title, d_cause = described
                    self.state.add_group(group_id, category=category, title=title, now=now,
                                         diagnosis_title=d_title, diagnosis_cause=d_cause)
                self.state.change_group(group_id, jobs=1, gpu_hours=hours)
                group = self.state.group(group_id)
                assert group is not None
                event = None
                if described is not None:
                    event = "new_group"
                elif group.job_count - group.notified_count >= self.notify_every:
                    event = "group_grew"
                if event is not None:
                    jobs = self.state.jobs_in_group(group_id)
                    new_jobs = jobs[group.notified_count:] if event == "group_grew" else jobs
                    payload = message(event, group=group_id, category=group.category, title=group.title,
                                      job_count=group.job_count, gpu_hours=group.gpu_hours, job_ids=jobs,
                                      new_job_ids=new_jobs, diagnosis_title=group.diagnosis_title,
                                      diagnosis_cause=group.diagnosis_cause, known=known[0] if known else None)
                    if self.webhook:
                        self.state.enqueue(payload, now)
                    self.state.set_notified(group_id, group.job_count)
                    events.append(WatchEvent(event, payload["text"].splitlines()[0], spec.job_id, group_id, payload["torchhelp"]))
                if known is not None and known[2]:
                    from assistant.triage.resolution_log import claim_regression_notice

                    if claim_regression_notice(self.state.db, group_id, known[1], spec.job_id):
                        jobs = self.state.jobs_in_group(group_id)
                        payload = message("regression", group=group_id, category=group.category, title=group.title,
                                          job_count=group.job_count, gpu_hours=group.gpu_hours, job_ids=jobs,
                                          new_job_ids=[spec.job_id], known=known[0], regression_job=spec.job_id)
                        if self.webhook:
                            self.state.enqueue(payload, now)
                        events.append(WatchEvent("regression", payload["text"].splitlines()[0], spec.job_id, group_id, payload["torchhelp"]))
                self.state.put_blob(GROUPER_KEY, self._grouper_bytes())
        self.jobs_reported += 1
        self.new_groups += described is not None
        for ev in events:
            self.emit(ev)

    def _describe(self, report: JobReport) -> tuple[str, str, str | None, str | None]:
        """Category, title, diagnosis title and cause for a new group whose first job is ``report``.

        Uses the batch path (``build_result`` on this one job), so a watched group is named and
        diagnosed exactly as ``torchhelp triage`` would; a failing diagnosis never stops the watch.
        """
        category = report.category or "unknown"
        title = report.title or report.headline or "unknown failure"
        if not self.diagnose_groups:
            return category, title, None, None
        try:
            from assistant.triage.api import build_result

            if self._engine_obj is None:
                from assistant.engine import default_engine

                self._engine_obj = default_engine()
            result = build_result([report], engine_obj=self._engine_obj, diagnose_groups=True)
            group = result.groups[0]
            diagnosis = group.diagnosis
            return (group.category or category, group.title or title,
                    diagnosis.title if diagnosis else None, diagnosis.cause if diagnosis else None)
        except Exception as exc:
            log.warning("could not diagnose the new group of job %s: %s: %s", report.job_id, type(exc).__name__, exc)
            return category, title, None, None

    # -- the outbox ---------------------------------------------------------------------------

    def flush(self) -> None:
        """Deliver queued messages, oldest first (at least once; see ``webhook``'s module doc).

        A permanent refusal (4xx other than 408/429, a redirect) drops that message with a note and
        goes on with the next. A transient failure keeps it and stops this round (the receiver is
        down: waiting out every message would stall the watch); after ``MAX_DELIVERY_ROUNDS`` such
        rounds it is dropped with a note, so it cannot hold the later ones back forever. A stop
        (SIGTERM, Ctrl-C, the stop event) ends the round at once: undelivered messages stay queued."""
        if not self.webhook:
            return
        from assistant.triage.webhook import MAX_DELIVERY_ROUNDS, post

        for msg in self.state.pending():
            if self.stop.is_set():
                return
            delivery = post(self.webhook, msg.payload, stop=self.stop)
            if delivery.stopped:
                return  # nothing was decided: the message stays as it was
            if delivery.ok:
                self.state.delivered(msg.id)
                self.messages_sent += 1
                self.emit(WatchEvent("sent", f"sent: {msg.payload.get('text', '').splitlines()[0]}",
                                     group=msg.payload.get("torchhelp", {}).get("group")))
                continue
            if delivery.permanent:
                self._drop(msg, delivery, "refused by the webhook")
                continue
            self.state.failed_delivery(msg.id, delivery.error)
            if msg.attempts + 1 >= MAX_DELIVERY_ROUNDS:
                self._drop(msg, delivery, f"undelivered after {msg.attempts + 1} polls")
                continue
            self.emit(WatchEvent("send_failed", f"webhook failed ({delivery.error}); message kept for the next poll",
                                 group=msg.payload.get("torchhelp", {}).get("group"),
                                 data={"status": delivery.status, "attempts": delivery.attempts}))
            break

    def _drop(self, msg: Any, delivery: Any, why: str) -> None:
        """Take a message that will never be delivered out of the outbox, with a logged note and an event."""
        self.state.delivered(msg.id)
        self.messages_dropped += 1
        group = msg.payload.get("torchhelp", {}).get("group")
        log.warning("webhook message %d (group %s) dropped, %s: %s", msg.id, group, why, delivery.error)
        self.emit(WatchEvent("send_dropped", f"webhook message dropped, {why} ({delivery.error}); later messages go on",
                             group=group, data={"status": delivery.status, "attempts": delivery.attempts}))

    def close(self) -> None:
        """Close the state (everything was committed as it happened)."""
        self.state.close()


def watch(
    paths: Sequence[str | os.PathLike[str]],
    *,
    interval_s: float = 10.0,
    settle_s: float = 60.0,
    webhook: str | None = None,
    notify_every: int = 10,
    state_path: str | Path | None = None,
    stop: threading.Event | None = None,
    on_event: Callable[[WatchEvent], None] | None = None,
    once: bool = False,
    diagnose_groups: bool = True,
    options: Any = None,
    engine_obj: Any = None,
    regression_after: float | None = None,
) -> WatchSummary:
    """Poll ``paths`` every ``interval_s`` until stopped; triage each job as it finishes.

    ``stop`` (set from another thread), Ctrl-C and SIGTERM end it cleanly; ``once=True`` does a
    single poll. ``on_event`` receives every :class:`WatchEvent` (the CLI prints them); without it
    they go to the log. Returns what was done; the state keeps everything for the next run.
    A job of a resolved group (see ``triage.resolutions``) that ended after the resolution (or
    after ``regression_after``, epoch seconds) sends one ``regression`` message per group.
    """
    stop = stop or threading.Event()
    watcher = Watcher(paths, settle_s=settle_s, webhook=webhook, notify_every=notify_every, state_path=state_path,
                      on_event=on_event, diagnose_groups=diagnose_groups, options=options, engine_obj=engine_obj,
                      regression_after=regression_after, stop=stop)
    sigterm = threading.Event()
    previous_handler: Any = None
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        def on_sigterm(signum: int, frame: Any) -> None:
            sigterm.set()
            stop.set()

        previous_handler = signal.signal(signal.SIGTERM, on_sigterm)
    stopped_by = "once"
    try:
        first = True
        while not stop.is_set():
            watcher.poll(first=first)
            first = False
            if once:
                break
            stop.wait(interval_s)
        if stop.is_set():
            stopped_by = "sigterm" if sigterm.is_set() else "stop"
    except KeyboardInterrupt:
        stopped_by = "interrupt"
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous_handler if previous_handler is not None else signal.SIG_DFL)
        try:
            pending = watcher.state.counts()["pending"]
        finally:
            watcher.close()
    summary = WatchSummary(watcher.polls, watcher.jobs_reported, watcher.new_groups, watcher.messages_sent, pending, stopped_by,
                           watcher.messages_dropped)
    reason = {"once": "after one poll", "stop": "on request", "interrupt": "by Ctrl-C", "sigterm": "by SIGTERM"}[stopped_by]
    text = (f"stopped {reason}: {summary.jobs_reported} job(s) triaged, {summary.new_groups} new group(s), "
            f"{summary.messages_sent} message(s) sent" + (f", {pending} kept for the next run" if pending else ""))
    watcher.emit(WatchEvent("stopped", text, data={"stopped_by": stopped_by}))
    return summary
