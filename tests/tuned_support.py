"""Shared helpers of the tests written while tuning on the dev_fresh* parts: a rule's reading of a text, the text of
a fix list, and a dev report's text by id."""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

from assistant import rules
from assistant.parse import parse_failure
from assistant.types import RuleHit

ROOT = Path(__file__).resolve().parents[1]


def hit_of(text: str) -> RuleHit:
    """The rule reading of ``text``; fails the test when no rule reads it."""
    found = rules.match(parse_failure(text)).hit
    assert found is not None
    return found


def fix_text(fixes: Iterable[Any]) -> str:
    """Titles, details and code of a fix list, as one string to search."""
    return " ".join(f"{f.title} {f.detail} {f.code or ''}" for f in fixes)


def dev_report(part: str, report_id: str) -> str:
    """The pasted text of one report of ``eval/realworld/<part>.jsonl`` (dev parts only)."""
    if not part.startswith("dev"):
        raise ValueError("tests read dev reports only")
    for line in (ROOT / "eval" / "realworld" / f"{part}.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row["id"] == report_id:
                return str(row["error_text"])
    raise KeyError(report_id)


def dev_reader(part: str):  # type: ignore[no-untyped-def]
    """``dev_report`` bound to one part."""
    return partial(dev_report, part)
