"""Eval cases on disk (``eval/cases/<slug>/{repro.py,case.toml}``) and outside case files (JSONL)."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from assistant.errors import EvalError
from assistant.types import CATEGORIES

DEVICES = ("cpu", "cuda", "multi_gpu")
LAUNCHERS = ("python", "torchrun")


@dataclass(frozen=True)
class Case:
    """One reproducible failure and what a correct diagnosis of it must say."""

    slug: str
    directory: Path
    category: str
    device: str
    expect_exception: str
    must_mention: tuple[str, ...]
    must_not_mention: tuple[str, ...] = ()
    why: str = ""
    timeout: float = 120.0
    launcher: str = "python"
    env: dict[str, str] = field(default_factory=dict)

    @property
    def script(self) -> Path:
        return self.directory / "repro.py"


def repo_root() -> Path:
    """The repository root (the folder holding eval/ and knowledge/)."""
    return Path(__file__).resolve().parents[2]


def default_cases_dir() -> Path:
    return repo_root() / "eval" / "cases"


def load_case(directory: Path) -> Case:
    """Read and validate one case directory."""
    toml_path = directory / "case.toml"
    if not toml_path.is_file() or not (directory / "repro.py").is_file():
        raise EvalError(f"{directory}: a case needs repro.py and case.toml")
    try:
        data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise EvalError(f"{toml_path}: {exc}") from None
    missing = [k for k in ("category", "device", "expect_exception", "must_mention") if k not in data]
    if missing:
        raise EvalError(f"{toml_path}: missing {', '.join(missing)}")
    if data["category"] not in CATEGORIES:
        raise EvalError(f"{toml_path}: unknown category {data['category']!r}")
    if data["device"] not in DEVICES:
        raise EvalError(f"{toml_path}: device must be one of {DEVICES}")
    launcher = data.get("launcher", "python")
    if launcher not in LAUNCHERS:
        raise EvalError(f"{toml_path}: launcher must be one of {LAUNCHERS}")
    try:
        re.compile(data["expect_exception"])
    except re.error as exc:
        raise EvalError(f"{toml_path}: expect_exception is not a valid regex: {exc}") from None
    return Case(
        slug=directory.name, directory=directory, category=data["category"], device=data["device"],
        expect_exception=data["expect_exception"], must_mention=tuple(data["must_mention"]),
        must_not_mention=tuple(data.get("must_not_mention", ())), why=data.get("why", ""),
        timeout=float(data.get("timeout", 120)), launcher=launcher, env={k: str(v) for k, v in data.get("env", {}).items()},
    )


def load_cases(cases_dir: Path | None = None, device: str | None = None, pattern: str | None = None) -> list[Case]:
    """All cases, optionally filtered by device and a glob on the slug (several globs: separated by commas)."""
    root = cases_dir or default_cases_dir()
    if not root.is_dir():
        raise EvalError(f"no cases directory at {root}")
    out = []
    for d in sorted(p for p in root.iterdir() if p.is_dir() and (p / "case.toml").exists()):
        case = load_case(d)
        if device and case.device != device:
            continue
        if pattern and not any(fnmatch.fnmatch(case.slug, p.strip()) for p in pattern.split(",") if p.strip()):
            continue
        out.append(case)
    return out


@dataclass(frozen=True)
class OutsideCase:
    """A case from a JSONL file: error text, expected category, keywords a good answer contains."""

    id: str
    error_text: str
    category: str
    fix_keywords: tuple[str, ...]
    source: str | None = None
    kind: str | None = None  # traceback | message | prose, when the set records it
    must_not_claim: tuple[str, ...] = ()  # wrong specific causes/remedies for this case (from a claims sidecar file)
    label_syntax: str = "substring"  # how fix_keywords / must_not_claim are matched: "substring" (with | alternatives) or "regex"


def label_syntax(path: Path) -> str:
    """How a case file's labels are written: ``split.json`` beside it may say ``"label_syntax": {stem: "regex"}``."""
    meta = path.parent / "split.json"
    if not meta.is_file():
        return "substring"
    try:
        syntax = json.loads(meta.read_text(encoding="utf-8")).get("label_syntax", {}).get(path.stem, "substring")
    except (ValueError, AttributeError):
        return "substring"
    return syntax if syntax in ("substring", "regex") else "substring"


def load_outside_cases(path: Path) -> list[OutsideCase]:
    """Read ``{error_text, category, fix_keywords}`` lines; bad lines are reported with their number."""
    if not path.is_file():
        raise EvalError(f"no such case file: {path}")
    out: list[OutsideCase] = []
    syntax = label_syntax(path)
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            text, category = row["error_text"], row["category"]
        except (ValueError, KeyError, TypeError) as exc:
            raise EvalError(f"{path}:{n}: expected a JSON object with error_text, category, fix_keywords ({exc})") from None
        if category not in CATEGORIES:
            raise EvalError(f"{path}:{n}: unknown category {category!r}")
        keywords = row.get("fix_keywords") or []
        out.append(OutsideCase(str(row.get("id") or f"line{n}"), str(text), category, tuple(str(k) for k in keywords), row.get("source"), row.get("kind"), label_syntax=syntax))
    if not out:
        raise EvalError(f"{path}: no cases")
    return out


def load_claims(path: Path) -> dict[str, tuple[str, ...]]:
    """A claims sidecar: ``{"id", "must_not_claim": [...]}`` per line -> the phrases per case id.

    The labels live beside the frozen case files instead of inside them, so labelling never edits a split.
    """
    if not path.is_file():
        raise EvalError(f"no such claims file: {path}")
    out: dict[str, tuple[str, ...]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            out[str(row["id"])] = tuple(str(p) for p in row.get("must_not_claim") or ())
        except (ValueError, KeyError, TypeError) as exc:
            raise EvalError(f"{path}:{n}: expected a JSON object with id and must_not_claim ({exc})") from None
    return out


def with_claims(cases: list[OutsideCase], claims: dict[str, tuple[str, ...]]) -> list[OutsideCase]:
    """The cases with their must-not-claim phrases attached (cases without a label keep none)."""
    from dataclasses import replace

    return [replace(c, must_not_claim=claims.get(c.id, c.must_not_claim)) for c in cases]
