"""The team's memory of fixed failure groups: one runbook per resolution, in the team's knowledge folder.

``torchhelp triage resolve`` writes a Markdown runbook into the user documents folder
(``$TORCHHELP_HOME/user_docs``, the folder ``torchhelp kb add`` copies documents into). Its front
matter carries

- ``signatures``: the representative job's own error line, so the engine's runbook matching
  (:func:`assistant.kb.runbooks.match_runbooks`, "team documents that quote the failure's own
  error text") cites it in every later diagnosis of that error, and
- ``triage``: the group's signature (the masked template and the user frame that define the
  group), the note, who resolved it and when.

The runbooks are the source of truth: a folder shared by a team (or kept in git) carries its
resolutions with it; deleting a runbook forgets the resolution.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from assistant.errors import TriageError

RUNBOOK_PREFIX = "triage-resolved-"
TAG = "triage-resolution"
_HOLE = re.compile(r"<[A-Z*]+>")
_SPACE = re.compile(r"\s+")
_SLUG = re.compile(r"[^a-z0-9_.-]+")


@dataclass(frozen=True)
class Resolution:
    """A resolved failure group: its signature, the team's note, who and when, and the runbook that holds it."""

    group_id: str
    category: str
    title: str
    template: str  # the masked error template of the group
    location: str  # the user frame, numbers masked ("" when the failure has none)
    error: str  # the representative job's error line (the runbook's signature for the engine)
    note: str
    by: str
    resolved_at: float  # epoch seconds, UTC
    runbook: str = ""  # path of the runbook file
    doc_id: str = ""  # the runbook's knowledge-document id ("user:...")

    @property
    def resolved_day(self) -> str:
        """The resolution date as ``YYYY-MM-DD`` (UTC)."""
        return datetime.fromtimestamp(self.resolved_at, UTC).strftime("%Y-%m-%d")


def runbooks_dir(home: Path) -> Path:
    """The team's knowledge folder: where ``torchhelp kb add`` stores user documents."""
    from assistant.kb.index import user_docs_dir

    return user_docs_dir(home)


def runbook_name(group_id: str) -> str:
    """The runbook's file name for a group id."""
    return RUNBOOK_PREFIX + (_SLUG.sub("-", group_id.lower()).strip("-") or "group") + ".md"


def write_runbook(home: Path, resolution: Resolution) -> Resolution:
    """Write (atomically) the runbook of ``resolution`` and return it with its path and document id."""
    import yaml

    from assistant.kb.documents import read_user_doc

    folder = runbooks_dir(home)
    path = folder / runbook_name(resolution.group_id)
    when = datetime.fromtimestamp(resolution.resolved_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = {
        "title": f"Resolved: {resolution.title}",
        "category": resolution.category,
        "signatures": [resolution.error] if resolution.error else [],
        "tags": [TAG],
        "triage": {
            "group": resolution.group_id,
            "template": resolution.template,
            "location": resolution.location,
            "error": resolution.error,
            "note": resolution.note,
            "resolved_by": resolution.by,
            "resolved_at": when,
        },
    }
    where = f" at `{resolution.location}`" if resolution.location else ""
    body = "\n".join([
        f"# Resolved: {resolution.title}",
        "",
        "## Symptoms",
        "",
        f"Failure group `{resolution.group_id}` ({resolution.category}){where}:",
        "",
        "```text",
        resolution.error or resolution.template,
        "```",
        "",
        "## Resolution",
        "",
        resolution.note,
        "",
        f"Resolved by {resolution.by} on {resolution.resolved_day} with `torchhelp triage resolve`.",
        "",
    ])
    text = "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=10_000) + "---\n" + body
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".md.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise TriageError(f"cannot write the runbook {path}: {exc.strerror or exc}") from None
    from assistant.kb.retrieve import clear_cache

    clear_cache()  # the next engine in this process indexes the new runbook
    return _with_file(resolution, path, read_user_doc(path).id)


def load_resolutions(home: Path) -> list[Resolution]:
    """Every resolution runbook in the team's knowledge folder, newest first (unreadable ones are skipped)."""
    folder = runbooks_dir(home)
    if not folder.is_dir():
        return []
    out: list[Resolution] = []
    for path in sorted(folder.glob("*.md")):
        found = read_resolution(path)
        if found is not None:
            out.append(found)
    return sorted(out, key=lambda r: (-r.resolved_at, r.group_id))


def read_resolution(path: Path) -> Resolution | None:
    """The resolution a runbook carries, or None when it is not a triage runbook (or unreadable)."""
    from assistant.kb.documents import read_user_doc

    try:
        raw = path.read_text(encoding="utf-8", errors="replace")
        meta = _front_matter(raw)
        doc_id = read_user_doc(path).id
    except Exception:  # a hand-edited, broken runbook must never stop a triage  # noqa: BLE001
        return None
    info = meta.get("triage")
    if not isinstance(info, dict) or not info.get("group") or not info.get("note"):
        return None
    try:
        when = parse_when(str(info.get("resolved_at") or ""))
    except TriageError:
        return None
    return Resolution(
        group_id=str(info["group"]), category=str(meta.get("category") or "unknown"),
        title=str(meta.get("title") or "").removeprefix("Resolved: "), template=str(info.get("template") or ""),
        location=str(info.get("location") or ""), error=str(info.get("error") or ""), note=str(info["note"]),
        by=str(info.get("resolved_by") or "unknown"), resolved_at=when, runbook=str(path), doc_id=doc_id,
    )


def _front_matter(raw: str) -> dict:
    import yaml

    if not raw.startswith("---\n"):
        return {}
    end = raw.find("\n---\n", 4)
    if end < 0:
        return {}
    meta = yaml.safe_load(raw[4:end])
    return meta if isinstance(meta, dict) else {}


def _with_file(resolution: Resolution, path: Path, doc_id: str) -> Resolution:
    from dataclasses import replace

    return replace(resolution, runbook=str(path), doc_id=doc_id)


def parse_when(text: str) -> float:
    """``YYYY-MM-DD`` (00:00 UTC) or an ISO date-time (UTC when it names no zone) as epoch seconds."""
    value = text.strip()
    if not value:
        raise TriageError("no date given: use YYYY-MM-DD or an ISO date-time")
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise TriageError(f"not a date: {text!r} (use YYYY-MM-DD or an ISO date-time)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def _pattern(template: str) -> re.Pattern[str]:
    """A template as a regex: its holes (``<*>``, ``<NUM>``, ``<PATH>``...) match any text."""
    parts = _HOLE.split(_SPACE.sub(" ", template.strip()))
    return re.compile(".+?".join(re.escape(p) for p in parts), re.S)


def same_template(a: str, b: str) -> bool:
    """Whether two masked templates name one error: equal, or one's holes cover the other's words.

    Drain3 generalises a template as it sees more messages (a word becomes ``<*>``), so a template
    written at resolution time and one mined later from other jobs may differ only in holes.
    """
    x, y = _SPACE.sub(" ", a.strip()), _SPACE.sub(" ", b.strip())
    if not x or not y:
        return False
    return x == y or _pattern(x).fullmatch(y) is not None or _pattern(y).fullmatch(x) is not None


def find_resolution(resolutions: list[Resolution], *, template: str, location: str, category: str | None = None) -> Resolution | None:
    """The newest resolution whose signature (template and user frame) is this group's, or None.

    ``location`` must already be normalised (``grouping.normalize_location``); a category, when
    given, must agree too (the same template raised by two different root causes stays apart).
    """
    for r in resolutions:
        if r.location != location:
            continue
        if category is not None and r.category not in (category, "unknown") and category != "unknown":
            continue
        if same_template(r.template, template):
            return r
    return None
