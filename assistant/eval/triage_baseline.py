"""The naive triage baseline: what a 40-line script over the same logs does.

Per job (an immediate subdirectory, or a loose log file whose id is its name up to the first dot):
read every file (gzip transparently), all files of a job concatenated in name order, keep the last
non-empty line and the last 50 lines. The job failed when that line or the last 20 lines hold an
error-ish word; its group is that last line with digits masked; its category is the keyword
regex of :mod:`assistant.eval.baseline` over the last 50 lines. No ranks, no GPU hours.

``torchhelp eval triage`` scores it beside ``torchhelp triage``; ``scripts/bench_triage.py`` times
it. It reads line by line and keeps only the tail, so a huge log costs time, not memory.
"""

from __future__ import annotations

import gzip
import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from assistant.eval.baseline import regex_category

_ERRORISH = re.compile(r"Error|Exception|Killed|Segmentation fault|CANCELLED|error:|Traceback|Aborted")
_DIGITS = re.compile(r"\d+")


def _job_files(paths: list[Path]) -> dict[str, list[Path]]:
    """job id -> its files in name order (relative path order inside a job directory)."""
    jobs: dict[str, list[Path]] = {}
    for root in paths:
        root = Path(root)
        entries = [root] if root.is_file() else sorted(root.iterdir())
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_dir():
                files = sorted((f for f in entry.rglob("*") if f.is_file() and not f.name.startswith(".")),
                               key=lambda f: f.relative_to(entry).as_posix())
                if files:
                    jobs.setdefault(entry.name, []).extend(files)
            elif entry.is_file():
                jobs.setdefault(entry.name.split(".", 1)[0] or entry.name, []).append(entry)
    return jobs


def _lines(path: Path) -> Iterator[str]:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as handle:  # type: ignore[operator]
            for line in handle:
                yield from line.split("\r")
    except (OSError, EOFError):
        return


def naive_job(files: list[Path]) -> dict[str, Any]:
    """Status, group and category of one job from the tail of its concatenated files."""
    tail: deque[str] = deque(maxlen=50)
    for path in files:
        for line in _lines(path):
            line = line.rstrip("\n")
            if line.strip():
                tail.append(line)
    last = tail[-1] if tail else ""
    window = list(tail)[-20:]
    failed = bool(_ERRORISH.search(last)) or any(_ERRORISH.search(line) for line in window)
    if not failed:
        return {"status": "succeeded", "group": None, "category": None}
    return {"status": "failed", "group": _DIGITS.sub("<N>", last.strip()), "category": regex_category("\n".join(tail))}


def naive_triage(paths: list[Path]) -> list[dict[str, Any]]:
    """One contract row per job under ``paths``, sorted by job id (first_failing_rank and gpu_hours null)."""
    rows = []
    for job_id, files in sorted(_job_files([Path(p) for p in paths]).items()):
        verdict = naive_job(files)
        rows.append({
            "job_id": job_id, "status": verdict["status"], "group": verdict["group"], "category": verdict["category"],
            "first_failing_rank": None, "gpu_hours": None, "files": [f.name for f in files], "title": verdict["group"],
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    """``python -m assistant.eval.triage_baseline DIR... > rows.jsonl`` (the bench runs it this way)."""
    import json
    import sys

    args = sys.argv[1:] if argv is None else argv
    for row in naive_triage([Path(a) for a in args]):
        sys.stdout.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
