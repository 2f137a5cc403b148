"""`torchhelp triage resolve <group> --note "..."`: write the team runbook of a group and record it.

The group is named by the id every triage output shows (``shape_mismatch-1a2b3c4d``), or by a
unique prefix of it (or of its digest, ``1a2b``). It is looked up in the groups the last triage
runs showed (kept in the triage state), or, with ``root``, by triaging that folder again.
"""

from __future__ import annotations

import getpass
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from assistant.errors import TriageError
from assistant.triage.model import TriageResult
from assistant.triage.resolution_log import SeenGroup, connect, record_resolution, remember_groups, seen_groups
from assistant.triage.resolutions import Resolution, write_runbook

MAX_NOTE_CHARS = 2000


def who(by: str | None = None) -> str:
    """Who resolves: ``by``, else ``$USER``, else the login name, else ``unknown``."""
    if by and by.strip():
        return by.strip()
    user = os.environ.get("USER") or os.environ.get("USERNAME")
    if user:
        return user
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry (containers)  # noqa: BLE001
        return "unknown"


def seen_from_result(result: TriageResult, root: str, now: float | None = None) -> list[SeenGroup]:
    """The groups of a result as the state remembers them (signature and error line included)."""
    from assistant.triage.known import group_signature
    from assistant.triage.render_terminal import error_line

    when = time.time() if now is None else now
    out = []
    for g in result.groups:
        template, location = group_signature(g)
        error = " ".join(error_line(result, g).split())[:400]
        out.append(SeenGroup(g.group_id, root, g.category, g.title, template, location, error, when))
    return out


def remember(state_path: Path, result: TriageResult, roots: Sequence[str]) -> None:
    """Remember the groups of a batch triage, so that ``resolve <id>`` needs no folder."""
    root = ", ".join(str(Path(r).resolve()) if Path(r).exists() else str(r) for r in roots)
    with connect(state_path) as db:
        remember_groups(db, seen_from_result(result, root))


def pick(ref: str, groups: Sequence[SeenGroup]) -> SeenGroup:
    """The group ``ref`` names: its id, or a unique prefix of its id or of its digest."""
    ref = ref.strip()
    if not ref:
        raise TriageError("no group given: pass a group id from the triage output")
    exact = [g for g in groups if g.group_id == ref]
    if exact:
        return exact[0]
    found = [g for g in groups if g.group_id.startswith(ref) or g.group_id.split("-", 1)[-1].startswith(ref)]
    ids = sorted({g.group_id for g in found})
    if len(ids) == 1:
        return next(g for g in found if g.group_id == ids[0])
    if not ids:
        known = f"{len(groups)} group(s) known" if groups else "no groups known yet"
        raise TriageError(f"unknown group {ref!r} ({known}; run `torchhelp triage <folder>` first, or pass --root <folder>)")
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    raise TriageError(f"ambiguous group prefix {ref!r}: it matches {shown}")


def check_note(note: str | None) -> str:
    """The note, stripped; an empty or oversized note is an error."""
    text = (note or "").strip()
    if not text:
        raise TriageError('empty note: say what fixed it, e.g. --note "pin the tokenizer to v2"')
    if len(text) > MAX_NOTE_CHARS:
        raise TriageError(f"note too long ({len(text)} characters; at most {MAX_NOTE_CHARS})")
    return text


def resolve_group(
    ref: str,
    note: str | None,
    *,
    home: Path,
    state_path: Path,
    root: str | Path | None = None,
    result: TriageResult | None = None,
    by: str | None = None,
    now: float | None = None,
    engine_obj: Any = None,
) -> Resolution:
    """Resolve the group ``ref`` names: write its runbook under ``home`` and record it in the state.

    The group is looked up in ``result`` when given (the server has just triaged the folder), else
    by triaging ``root`` (as ``torchhelp triage`` would, diagnosis included: a group's id names its
    category), else among the groups the last triage runs remembered in ``state_path``.
    """
    text = check_note(note)
    if result is None and root is not None:
        from assistant.triage.api import build_result, triage

        if not Path(root).exists():
            raise TriageError(f"no such folder: {root}")
        result = triage([root]) if engine_obj is None else _triage_with(root, engine_obj, build_result)
    if result is not None:
        groups = seen_from_result(result, str(root or ""))
    else:
        with connect(state_path) as db:
            groups = seen_groups(db)
    group = pick(ref, groups)
    resolution = Resolution(
        group_id=group.group_id, category=group.category, title=group.title, template=group.template,
        location=group.location, error=group.error, note=text, by=who(by), resolved_at=time.time() if now is None else now,
    )
    resolution = write_runbook(home, resolution)
    with connect(state_path) as db:
        record_resolution(db, resolution)
        if result is not None:
            remember_groups(db, groups)
    return resolution


def _triage_with(root: str | Path, engine_obj: Any, build_result: Any) -> TriageResult:
    """Triage one folder locally with a given engine (the server's)."""
    from assistant.triage.distribute import extract_all
    from assistant.triage.jobs import discover

    reports = extract_all(discover([root]), engine="local", jobs=1)
    return build_result(reports, engine_obj=engine_obj)
