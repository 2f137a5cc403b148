"""The watcher's memory: one SQLite file, so that a restart re-reports nothing.

Default path: ``$TORCHHELP_HOME/triage/state.sqlite``. Tables:

- ``jobs``: every job seen under the watched roots: the fingerprint of its files (names, sizes,
  mtimes) and since when that fingerprint is unchanged (how "settled" is measured across polls and
  restarts); once reported: the fingerprint it was reported with, its status, group, category.
- ``groups``: one row per failure group: category, title, job count, GPU hours, the diagnosis
  title/cause sent in messages, and the job count at the last message (growth notifications).
- ``pending``: the outbox. A message is queued in the same transaction that changes the group, then
  delivered; a message that could not be delivered stays and is retried on the next poll. Delivery
  is at least once: a crash between the receiver's 200 and our delete sends it again on restart (so
  does a stop in the middle of a delivery). A permanent refusal (4xx other than 408/429, a redirect)
  drops the message with a note; ``attempts`` counts failed polls, and at ``MAX_DELIVERY_ROUNDS``
  (webhook.py) the message is dropped with a note too, so none blocks the ones after it forever.
- ``meta``: the Drain3 grouper as explicit JSON (clusters: id, template tokens, size; the prefix
  tree; the group table; see ``Grouper.to_json``), stored in the same transaction as the jobs it
  has seen, so group ids survive a restart and never disagree with the ``groups`` table. No pickle
  is ever stored or loaded: a state that holds one (older versions) is refused with a TriageError.

WAL journal, one writer: an exclusive lock file next to the database stops a second watcher on the
same state (two would double-report).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assistant.errors import TriageError

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    root TEXT NOT NULL,
    job_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,        -- latest observed
    observed_at REAL NOT NULL,        -- when `fingerprint` was first observed (settle clock)
    reported_fingerprint TEXT,        -- the fingerprint the job was triaged with; NULL = not yet
    status TEXT,
    group_id TEXT,
    category TEXT,
    title TEXT,
    gpu_hours REAL,
    reported_at REAL,
    PRIMARY KEY (root, job_id)
);
CREATE INDEX IF NOT EXISTS jobs_group ON jobs (group_id);
CREATE TABLE IF NOT EXISTS groups (
    group_id TEXT PRIMARY KEY,
    category TEXT NOT NULL,
    title TEXT NOT NULL,
    job_count INTEGER NOT NULL DEFAULT 0,
    gpu_hours REAL NOT NULL DEFAULT 0,
    diagnosis_title TEXT,
    diagnosis_cause TEXT,
    notified_count INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS pending (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    payload TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value BLOB
);
"""


def default_state_path() -> Path:
    """``$TORCHHELP_HOME/triage/state.sqlite`` (home as the settings resolve it)."""
    from assistant.settings import load_settings

    return load_settings().home / "triage" / "state.sqlite"


@dataclass(frozen=True)
class JobRow:
    """What the state remembers of one job."""

    root: str
    job_id: str
    fingerprint: str
    observed_at: float
    reported_fingerprint: str | None
    status: str | None
    group_id: str | None
    category: str | None
    title: str | None
    gpu_hours: float | None
    reported_at: float | None


@dataclass(frozen=True)
class GroupRow:
    """What the state remembers of one failure group."""

    group_id: str
    category: str
    title: str
    job_count: int
    gpu_hours: float
    diagnosis_title: str | None
    diagnosis_cause: str | None
    notified_count: int
    created_at: float


@dataclass(frozen=True)
class PendingMessage:
    """A webhook message not delivered yet."""

    id: int
    payload: dict[str, Any]
    attempts: int
    last_error: str | None


class TriageState:
    """The SQLite state of one watcher. Not thread-safe: the watcher is its only user and writer."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_state_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_fd = self._take_lock()
        try:
            # isolation_level=None: we open transactions ourselves (see `transaction`)
            self.db = sqlite3.connect(str(self.path), isolation_level=None, timeout=10.0)
            self.db.row_factory = sqlite3.Row
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise TriageError(f"{self.path}: state schema {version} is not {SCHEMA_VERSION}; move the file away to start afresh")
            self.db.executescript(_SCHEMA)
            self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.Error as exc:
            self._release_lock()
            raise TriageError(f"cannot open the triage state {self.path}: {exc}") from None
        except BaseException:
            self._release_lock()
            raise

    # -- one writer --------------------------------------------------------------------------

    def _take_lock(self) -> int | None:
        try:
            import fcntl
        except ImportError:  # Windows: no advisory locks; one watcher per state is then the user's job
            return None
        fd = os.open(str(self.path) + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise TriageError(f"another watcher is using {self.path}; stop it or give --state another file") from None
        return fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor drops the flock
            self._lock_fd = None

    def close(self) -> None:
        """Commit nothing pending (transactions are explicit), close the database, release the lock."""
        try:
            self.db.close()
        finally:
            self._release_lock()

    def __enter__(self) -> TriageState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic unit (a job's report, its group change and its queued message)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:  # KeyboardInterrupt included: a half-reported job is retried on restart
            self.db.execute("ROLLBACK")
            raise
        else:
            self.db.execute("COMMIT")

    # -- jobs ---------------------------------------------------------------------------------

    def job(self, root: str, job_id: str) -> JobRow | None:
        """The remembered job, or None when never seen."""
        row = self.db.execute("SELECT * FROM jobs WHERE root=? AND job_id=?", (root, job_id)).fetchone()
        return JobRow(**dict(row)) if row else None

    def observe(self, root: str, job_id: str, fingerprint: str, now: float) -> float:
        """Record the job's current fingerprint (call inside :meth:`transaction`); returns since when
        this fingerprint has been seen: ``now`` when it is new or changed (the settle clock restarts)."""
        row = self.db.execute("SELECT fingerprint, observed_at FROM jobs WHERE root=? AND job_id=?", (root, job_id)).fetchone()
        if row is not None and row[0] == fingerprint:
            return float(row[1])
        self.db.execute(
            "INSERT INTO jobs (root, job_id, fingerprint, observed_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (root, job_id) DO UPDATE SET fingerprint=excluded.fingerprint, observed_at=excluded.observed_at",
            (root, job_id, fingerprint, now),
        )
        return now

    def record_job(self, root: str, job_id: str, *, fingerprint: str, status: str, group_id: str | None,
                   category: str | None, title: str | None, gpu_hours: float | None, now: float) -> None:
        """Mark the job reported (call inside :meth:`transaction`)."""
        self.db.execute(
            "UPDATE jobs SET reported_fingerprint=?, status=?, group_id=?, category=?, title=?, gpu_hours=?, reported_at=? "
            "WHERE root=? AND job_id=?",
            (fingerprint, status, group_id, category, title, gpu_hours, now, root, job_id),
        )

    def jobs_in_group(self, group_id: str) -> list[str]:
        """The group's job ids, in the order they were reported."""
        rows = self.db.execute("SELECT job_id FROM jobs WHERE group_id=? ORDER BY reported_at, job_id", (group_id,))
        return [r[0] for r in rows]

    def counts(self) -> dict[str, int]:
        """Jobs seen, reported, failed; groups; undelivered messages."""
        q = self.db.execute
        return {
            "jobs_seen": q("SELECT COUNT(*) FROM jobs").fetchone()[0],
            "jobs_reported": q("SELECT COUNT(*) FROM jobs WHERE reported_fingerprint IS NOT NULL").fetchone()[0],
            "jobs_failed": q("SELECT COUNT(*) FROM jobs WHERE status='failed'").fetchone()[0],
            "groups": q("SELECT COUNT(*) FROM groups").fetchone()[0],
            "pending": q("SELECT COUNT(*) FROM pending").fetchone()[0],
        }

    # -- groups -------------------------------------------------------------------------------

    def group(self, group_id: str) -> GroupRow | None:
        """The remembered group, or None."""
        row = self.db.execute("SELECT * FROM groups WHERE group_id=?", (group_id,)).fetchone()
        return GroupRow(**dict(row)) if row else None

    def groups(self) -> list[GroupRow]:
        """Every group, most GPU hours first, then most jobs."""
        rows = self.db.execute("SELECT * FROM groups ORDER BY gpu_hours DESC, job_count DESC, group_id")
        return [GroupRow(**dict(r)) for r in rows]

    def add_group(self, group_id: str, *, category: str, title: str, now: float,
                  diagnosis_title: str | None = None, diagnosis_cause: str | None = None) -> None:
        """A new, empty group (call inside :meth:`transaction`)."""
        self.db.execute(
            "INSERT INTO groups (group_id, category, title, diagnosis_title, diagnosis_cause, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (group_id, category, title, diagnosis_title, diagnosis_cause, now),
        )

    def change_group(self, group_id: str, *, jobs: int, gpu_hours: float) -> None:
        """Add (or, negative, remove) jobs and GPU hours (call inside :meth:`transaction`)."""
        self.db.execute(
            "UPDATE groups SET job_count=job_count+?, gpu_hours=MAX(0, gpu_hours+?) WHERE group_id=?",
            (jobs, gpu_hours, group_id),
        )

    def set_notified(self, group_id: str, count: int) -> None:
        """The job count the last message announced (call inside :meth:`transaction`)."""
        self.db.execute("UPDATE groups SET notified_count=? WHERE group_id=?", (count, group_id))

    # -- outbox -------------------------------------------------------------------------------

    def enqueue(self, payload: dict[str, Any], now: float) -> None:
        """Queue a webhook message (call inside :meth:`transaction`)."""
        self.db.execute("INSERT INTO pending (payload, created_at) VALUES (?, ?)", (json.dumps(payload), now))

    def pending(self) -> list[PendingMessage]:
        """Undelivered messages, oldest first."""
        rows = self.db.execute("SELECT id, payload, attempts, last_error FROM pending ORDER BY id")
        return [PendingMessage(r[0], json.loads(r[1]), r[2], r[3]) for r in rows]

    def delivered(self, message_id: int) -> None:
        """Drop a delivered (or hopeless) message."""
        with self.transaction() as db:
            db.execute("DELETE FROM pending WHERE id=?", (message_id,))

    def failed_delivery(self, message_id: int, error: str) -> None:
        """Keep the message for the next poll, remembering why it failed."""
        with self.transaction() as db:
            db.execute("UPDATE pending SET attempts=attempts+1, last_error=? WHERE id=?", (error[:500], message_id))

    # -- blobs (the grouper) ------------------------------------------------------------------

    def get_blob(self, key: str) -> bytes | None:
        """A stored blob, or None."""
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return bytes(row[0]) if row and row[0] is not None else None

    def put_blob(self, key: str, value: bytes) -> None:
        """Store a blob (call inside :meth:`transaction` so it commits with the jobs it reflects)."""
        self.db.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value=excluded.value",
                        (key, sqlite3.Binary(value)))

