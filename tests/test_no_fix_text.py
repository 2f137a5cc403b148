"""Remedies live once, in the knowledge documents: no Python module writes a fix's words.

A rule (or the differential tables, or the composer) picks a documented fix by reference and fills it
with the user's values (``remedy("doc#fix", layer=...)``); it never builds a ``Fix`` from string
literals of its own. This test reads the source with ``ast`` and fails on any such construction.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import ROOT

from assistant.kb.remedies import find_fix

PACKAGES = ("assistant/rules", "assistant/differential", "assistant/compose")
_FIX_CALLS = {"fix", "Fix", "_fix"}


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).glob("*.py"))


def _literal_text(node: ast.AST) -> bool:
    """A string literal or f-string with literal words in it (a bare name or attribute is a value, not text)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(node.value.strip())
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.Constant) and str(v.value).strip() for v in node.values)
    if isinstance(node, ast.BinOp):
        return _literal_text(node.left) or _literal_text(node.right)
    if isinstance(node, ast.IfExp):
        return _literal_text(node.body) or _literal_text(node.orelse)
    return False


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_fix_is_written_in_python(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    offenders = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr if isinstance(node.func, ast.Attribute) else ""
            # The sources argument (a document id) is a literal by nature; the words are the first three arguments.
            words = list(node.args[:3]) + [kw.value for kw in node.keywords if kw.arg in ("title", "detail", "code")]
            if name in _FIX_CALLS and any(_literal_text(a) for a in words):
                offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, "fix text written in Python (move it into a knowledge document and use remedy()): " + ", ".join(offenders)


def test_every_referenced_fix_exists() -> None:
    """Every ``remedy("doc#fix")`` / ``as_fix("doc#fix")`` reference written as a literal names a real document entry."""
    missing = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in ("remedy", "as_fix") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and "#" in arg.value and find_fix(arg.value) is None:
                    missing.append(f"{path.name}:{node.lineno} {arg.value}")
    assert not missing, "references to fixes that do not exist: " + ", ".join(missing)
