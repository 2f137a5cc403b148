"""Resolutions in the triage SQLite state (the file ``triage --watch`` keeps, see ``state.py``).

Three tables, created on demand next to the watcher's own:

- ``resolutions``: every ``triage resolve`` (group, signature, note, who, when, runbook path);
- ``seen_groups``: the groups the last batch triage runs showed, so ``resolve <id>`` finds a
  group without triaging its folder again;
- ``regression_notices``: which regressions the watcher already announced (one message each).

These are opened through a plain connection, without the watcher's one-writer lock: a
``resolve`` while a watcher runs is allowed (SQLite's own locking orders the writes).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from assistant.errors import TriageError
from assistant.triage.resolutions import Resolution

_SCHEMA = """
CREATE TABLE IF NOT EXISTS resolutions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    group_id TEXT NOT NULL,
    category TEXT NOT NULL,
    title TEXT NOT NULL,
    template TEXT NOT NULL,
    location TEXT NOT NULL,
    note TEXT NOT NULL,
    resolved_by TEXT NOT NULL,
    resolved_at REAL NOT NULL,
    runbook TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS seen_groups (
    group_id TEXT PRIMARY KEY,
    root TEXT NOT NULL,
    category TEXT NOT NULL,
    title TEXT NOT NULL,
    template TEXT NOT NULL,
    location TEXT NOT NULL,
    error TEXT NOT NULL,
    seen_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS regression_notices (
    group_id TEXT NOT NULL,
    resolved_at REAL NOT NULL,
    job_id TEXT NOT NULL,
    notified_at REAL NOT NULL,
    PRIMARY KEY (group_id, resolved_at)
);
"""


@dataclass(frozen=True)
class SeenGroup:
    """A group as a batch triage showed it."""

    group_id: str
    root: str
    category: str
    title: str
    template: str
    location: str
    error: str
    seen_at: float


def ensure_tables(db: sqlite3.Connection) -> None:
    """Create the resolution tables if absent (idempotent)."""
    db.executescript(_SCHEMA)


@contextmanager
def connect(path: str | Path) -> Iterator[sqlite3.Connection]:
    """A connection to the state file with the resolution tables (committed on success)."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(str(p), timeout=10.0)
    except (OSError, sqlite3.Error) as exc:
        raise TriageError(f"cannot open the triage state {p}: {exc}") from None
    try:
        ensure_tables(db)
        with db:
            yield db
    except sqlite3.Error as exc:
        raise TriageError(f"triage state {p}: {exc}") from None
    finally:
        db.close()


def record_resolution(db: sqlite3.Connection, r: Resolution) -> None:
    """Store one resolution."""
    db.execute(
        "INSERT INTO resolutions (group_id, category, title, template, location, note, resolved_by, resolved_at, runbook) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (r.group_id, r.category, r.title, r.template, r.location, r.note, r.by, r.resolved_at, r.runbook),
    )


def recorded_resolutions(db: sqlite3.Connection) -> list[tuple[str, str, str, float]]:
    """(group, note, who, when) of every recorded resolution, oldest first."""
    rows = db.execute("SELECT group_id, note, resolved_by, resolved_at FROM resolutions ORDER BY id")
    return [(r[0], r[1], r[2], float(r[3])) for r in rows]


def remember_groups(db: sqlite3.Connection, groups: list[SeenGroup]) -> None:
    """Remember the groups a triage run showed (a later ``resolve <id>`` finds them here)."""
    db.executemany(
        "INSERT INTO seen_groups (group_id, root, category, title, template, location, error, seen_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (group_id) DO UPDATE SET root=excluded.root, category=excluded.category, title=excluded.title, "
        "template=excluded.template, location=excluded.location, error=excluded.error, seen_at=excluded.seen_at",
        [(g.group_id, g.root, g.category, g.title, g.template, g.location, g.error, g.seen_at) for g in groups],
    )


def seen_groups(db: sqlite3.Connection) -> list[SeenGroup]:
    """Every remembered group, most recently seen first."""
    rows = db.execute("SELECT group_id, root, category, title, template, location, error, seen_at FROM seen_groups ORDER BY seen_at DESC, group_id")
    return [SeenGroup(r[0], r[1], r[2], r[3], r[4], r[5], r[6], float(r[7])) for r in rows]


def claim_regression_notice(db: sqlite3.Connection, group_id: str, resolved_at: float, job_id: str) -> bool:
    """True the first time a regression of this resolution in this group is claimed (then message it)."""
    cur = db.execute(
        "INSERT OR IGNORE INTO regression_notices (group_id, resolved_at, job_id, notified_at) VALUES (?, ?, ?, ?)",
        (group_id, resolved_at, job_id, time.time()),
    )
    return cur.rowcount == 1
