"""Split hygiene: nothing from a frozen-test thread may feed the engine or its tests.

A thread (a GitHub issue, a forum topic, a Stack Overflow question) belongs to one split. This module
finds every place in the repository where a frozen-test thread shows up anyway:

- its link (normalised to the thread: comment anchors, pages and slugs do not matter), or
- its final error line, verbatim, when that line is *identifying*: it carries values particular to one
  run (a shape, a pid, a key name, a long number). Constant PyTorch messages ("Attempting to unscale FP16
  gradients.") are every report's and every document's; quoting them is not a leak.

``tests/test_split_hygiene.py`` fails on any overlap; ``scan`` also serves a one-off audit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

TEST_PREFIX = "test"  # eval/realworld/test*.jsonl: every frozen part (test, test_fresh, test_fresh2, ...)
# Where engine inputs and tests live: rule-example corpora, captures, knowledge, cases, every test file, code.
SCANNED = ("eval/corpus", "eval/captured", "eval/cases", "eval/triage", "eval/claims", "knowledge", "tests", "assistant", "examples", "scripts")
# The frozen parts themselves (and their claims, which share their names) are what the scan looks for, not where.
_URL = re.compile(r"https?://[^\s)\]>\"'`]+")
_ERROR_LINE = re.compile(r"^(?:[\w.]*(?:Error|Exception|Warning|Interrupt)\b[^:]*:|.*\bError:)")
# Numbers that are not particular to one run: exit codes, signals, devices, ranks, versions.
_GENERIC_NUMBER = re.compile(r"(?i)\b(?:exit code|exit status|signal|status|code|sm_|cuda:|rank|version|opset version|line)\s*-?\d+"
                             r"|\b(?:block|thread):\s*\[[\d,\s]+\]|\.(?:cu|cuh|cpp|h|py):\d+")  # kernel coordinates, PyTorch's own source lines
_SHAPE = re.compile(r"\[\s*\d+\s*(?:,\s*\d+\s*){1,}\]|\(\s*\d+\s*(?:,\s*\d+\s*){1,}\)|\b\d+x\d+\b")
_DOTTED_KEY = re.compile(r"[\"'][A-Za-z_][\w]*(?:\.[\w]+){2,}[\"']")


def thread_key(url: str) -> str:
    """The thread a link points into: ``github.com/owner/repo/issues/12``, ``discuss.pytorch.org/t/123``, ..."""
    url = url.strip().rstrip(".,;:)]>\"'")
    try:
        parsed = urlparse(url)
    except ValueError:
        return url
    host = parsed.netloc.lower().removeprefix("www.")
    parts = [p for p in parsed.path.split("/") if p]
    if host == "github.com" and len(parts) >= 4 and parts[2] in ("issues", "pull", "discussions"):
        return f"github.com/{parts[0].lower()}/{parts[1].lower()}/{'issues' if parts[2] == 'pull' else parts[2]}/{parts[3]}"
    if host == "discuss.pytorch.org" and len(parts) >= 2 and parts[0] == "t":
        number = next((p for p in parts[1:] if p.isdigit()), parts[1])
        return f"discuss.pytorch.org/t/{number}"
    if host.endswith("stackoverflow.com") and len(parts) >= 2 and parts[0] in ("questions", "q", "a"):
        return f"stackoverflow.com/q/{parts[1]}"
    return host + "/" + "/".join(parts)


def final_line(text: str) -> str:
    """The last error-looking line of a report (else its last non-empty line), stripped."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if _ERROR_LINE.match(ln)]
    return errors[-1] if errors else (lines[-1] if lines else "")


def identifying(line: str) -> bool:
    """True when the line carries values particular to one run (so quoting it verbatim copies that report)."""
    rest = _GENERIC_NUMBER.sub("", line)
    return bool(re.search(r"\d{3,}", rest) or _SHAPE.search(rest) or _DOTTED_KEY.search(rest))


@dataclass(frozen=True)
class Overlap:
    """A frozen-test thread found in a repository file."""

    path: str
    case_id: str
    how: str  # "link" | "final line"
    detail: str


def _test_cases(root: Path) -> list[dict]:
    folder = root / "eval" / "realworld"
    return [json.loads(line) for path in sorted(folder.glob(f"{TEST_PREFIX}*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _frozen_part(path: Path) -> bool:
    """A frozen test part or its claims (``eval/realworld/test*.jsonl``, ``eval/claims/test*.jsonl``)."""
    return path.suffix == ".jsonl" and path.name.startswith(TEST_PREFIX) and path.parent.name in ("realworld", "claims")


def _files(root: Path) -> Iterator[Path]:
    for sub in SCANNED:
        base = root / sub
        if base.is_file():
            yield base
            continue
        for path in sorted(base.rglob("*")):
            if path.is_file() and not _frozen_part(path) and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".gz", ".png"):
                yield path


def scan(root: Path, extra_texts: Iterable[tuple[str, str]] = ()) -> list[Overlap]:
    """Every place a frozen-test thread shows up: its link, or its identifying final line verbatim.

    ``extra_texts`` are further (name, text) pairs to check, e.g. resolved rule-example texts.
    """
    cases = _test_cases(root)
    threads = {thread_key(c["source"]): c["id"] for c in cases if c.get("source")}
    lines = {}
    for c in cases:
        line = final_line(c["error_text"])
        if len(line) >= 25 and identifying(line):
            lines.setdefault(line, c["id"])
    found: list[Overlap] = []

    def check(name: str, text: str) -> None:
        for url in _URL.findall(text):
            key = thread_key(url)
            if key in threads:
                found.append(Overlap(name, threads[key], "link", key))
        for line, case_id in lines.items():
            if line in text:
                found.append(Overlap(name, case_id, "final line", line[:120]))

    for path in _files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        check(str(path.relative_to(root)), text)
    for name, text in extra_texts:
        check(name, text)
    return found
