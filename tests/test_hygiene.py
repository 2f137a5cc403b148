"""Hygiene the next engineer trips on (issue 21): undeclared imports, import circles, settings drift.

Everything here reads the source with ``ast`` (nothing is imported to be inspected), so it is fast.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "assistant"

# Packages whose modules run on the default `ask` path: what they import at module level must be a core
# dependency, not an extra (a fresh `pip install torchhelp` would fail to import them otherwise).
CORE_PACKAGES = ("assistant.backends", "assistant.compose", "assistant.decide", "assistant.differential", "assistant.kb", "assistant.parse",
                 "assistant.render", "assistant.rules", "assistant.engine", "assistant.settings", "assistant.cli", "assistant.pipeline")


def _norm(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    return _norm(re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0])


def _declared() -> tuple[set[str], set[str]]:
    """(core dependencies, every dependency including the extras) from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = {_requirement_name(r) for r in project["dependencies"]}
    extras = {_requirement_name(r) for reqs in project.get("optional-dependencies", {}).values() for r in reqs}
    return core, core | extras


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, tuple[Path, ast.Module]]:
    return {_module_name(p): (p, ast.parse(p.read_text(encoding="utf-8"), filename=str(p))) for p in sorted(PACKAGE.rglob("*.py"))}


def _third_party_imports(module: ast.Module, *, top_level_only: bool) -> set[str]:
    """Top-level names of absolute imports that are neither the standard library nor ``assistant``."""
    nodes = module.body if top_level_only else ast.walk(module)
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("assistant", "__future__")}


def test_every_third_party_import_is_a_declared_dependency() -> None:
    """`pydantic` was imported on the answer path but declared nowhere (it came in through typer by luck)."""
    _, declared = _declared()
    distributions = packages_distributions()
    missing: dict[str, list[str]] = {}
    for name, (_, tree) in _sources().items():
        for top in _third_party_imports(tree, top_level_only=False):
            dists = {_norm(d) for d in distributions.get(top, [])}
            if not dists:
                pytest.fail(f"{name} imports {top!r}, which no installed distribution provides (install the test extra)")
            if not dists & declared:
                missing.setdefault(f"{top} ({', '.join(sorted(dists))})", []).append(name)
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_the_answer_path_imports_only_core_dependencies_at_module_level() -> None:
    core, _ = _declared()
    distributions = packages_distributions()
    wrong = {}
    for name, (_, tree) in _sources().items():
        if not name.startswith(CORE_PACKAGES):
            continue
        for top in _third_party_imports(tree, top_level_only=True):
            dists = {_norm(d) for d in distributions.get(top, [])}
            if not dists & core:
                wrong.setdefault(top, []).append(name)
    assert not wrong, f"imported at module level on the answer path but only in an extra (import it where it is used, or make it core): {wrong}"
