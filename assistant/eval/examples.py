"""Resolve a rule example's source (``@rule(..., examples=[Example(source, outcome)])``) to its real text.

Sources name where the text lives in the repository:

- ``captured/<device>/<slug>``: stderr of a failure reproduced by ``torchhelp eval reproduce``;
- ``realworld/dev/<id>``: a report of the real-world **dev** split (dev.jsonl or dev_fresh.jsonl; the
  test split is never an example);
- ``corpus/<path>``: a text file under ``eval/corpus/``, a real error text copied verbatim from a real
  run or a public report; leading lines starting with ``#`` name its origin and are not part of it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from assistant.errors import EvalError


def _root() -> Path:
    from assistant.eval.cases import repo_root

    return repo_root()


@cache
def _dev_reports(path: Path) -> dict[str, str]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {r["id"]: r["error_text"] for r in rows}


def strip_origin(text: str) -> str:
    """A corpus file's text without its leading ``#`` origin lines."""
    lines = text.splitlines()
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "\n".join(lines).strip("\n") + "\n"


def example_text(source: str, root: Path | None = None) -> str:
    """The real error text an example names; raises EvalError when it does not exist or is not allowed."""
    root = root or _root()
    kind, _, rest = source.partition("/")
    if kind == "captured":
        path = root / "eval" / "captured" / f"{rest}.json"
        if not path.is_file():
            raise EvalError(f"example {source}: no capture {path}")
        data = json.loads(path.read_text(encoding="utf-8"))
        return data.get("stderr") or data.get("stdout_tail", "")
    if kind == "realworld":
        split, _, ident = rest.partition("/")
        if split != "dev":
            raise EvalError(f"example {source}: only the dev split of the real-world reports may serve as a rule example")
        reports = {k: v for name in ("dev.jsonl", "dev_fresh.jsonl") if (root / "eval" / "realworld" / name).exists()
                   for k, v in _dev_reports(root / "eval" / "realworld" / name).items()}
        if ident not in reports:
            raise EvalError(f"example {source}: no dev report with id {ident!r}")
        return reports[ident]
    if kind == "corpus":
        path = root / "eval" / "corpus" / rest
        if not path.is_file():
            raise EvalError(f"example {source}: no corpus file {path}")
        return strip_origin(path.read_text(encoding="utf-8"))
    raise EvalError(f"example {source}: unknown source kind {kind!r} (captured/, realworld/dev/, corpus/)")
