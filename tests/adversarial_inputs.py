"""Adversarial inputs for regular expressions, shared by the tests and ``scripts/fuzz.py``.

A backtracking regex engine is slow on text that keeps almost matching: long runs of the
pattern's own literals, word characters before a literal that never comes, spaces, quotes,
brackets. :func:`collect_patterns` reads every literal pattern out of the source of the modules
that search user text, and :func:`adversarial_texts` builds long lines from such fragments.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[1]
# Every module whose patterns run over untrusted text.
SCANNED = (
    sorted((ROOT / "assistant" / "rules").glob("*.py"))
    + sorted((ROOT / "assistant" / "parse").glob("*.py"))
    + [ROOT / "assistant" / "triage" / name for name in ("events.py", "extract.py", "reading.py")]
)
_RE_FUNCS = {"search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split", "compile", "lazy_re"}
_FLAG_NAMES = {"I": re.I, "IGNORECASE": re.I, "M": re.M, "MULTILINE": re.M, "S": re.S, "DOTALL": re.S, "X": re.X, "VERBOSE": re.X}
# Fragments that make backtracking patterns slow, whatever their literals.
GENERIC = (" ", "a", "a ", "'", '"', "(", "()", "[[", "[1, ", "1", "1x", "1, ", "a.", "a: ", "\t", "a=", "/a", "-", "<", "*",
           "word_", "0x1", "a\n", " \n", "\n\n", "~", ":", "a(", "'a' ", "torch.Size([", "x ", "\\", "a_b.c(", "e-", "\n ")


@dataclass(frozen=True)
class Pattern:
    """One literal pattern found in the source, with the place it came from."""

    file: str
    line: int
    source: str
    flags: int

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def compiled(self) -> re.Pattern[str] | None:
        try:
            return re.compile(self.source, self.flags)
        except re.error:  # a fragment joined at run time, not a whole pattern
            return None


def _flags(node: ast.AST) -> int:
    if isinstance(node, ast.Attribute) and node.attr in _FLAG_NAMES:
        return _FLAG_NAMES[node.attr]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _flags(node.left) | _flags(node.right)
    return 0


def _literal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left), _literal(node.right)
        return left + right if left is not None and right is not None else None
    return None


def collect_patterns(files: tuple[Path, ...] | list[Path] = SCANNED) -> list[Pattern]:
    """Every pattern written as a string literal in a regex call (``re.search``, ``lazy_re``, ``ctx.search``…)."""
    found: dict[tuple[str, int], Pattern] = {}
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # Patterns held in a variable first (``pattern = r"..."; ctx.search(pattern)``).
        names = {n.args[0].id for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Name)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id in names:
                src = _literal(node.value)
                if src is not None and len(src) >= 2:
                    found.setdefault((src, 0), Pattern(str(path.relative_to(ROOT)), node.lineno, src, 0))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name not in _RE_FUNCS:
                continue
            src = _literal(node.args[0])
            if src is None or len(src) < 2:
                continue
            flags = 0
            for kw in node.keywords:
                if kw.arg == "flags":
                    flags = _flags(kw.value)
            for extra in node.args[1:]:
                flags |= _flags(extra)
            key = (src, flags)
            if key not in found:
                found[key] = Pattern(str(path.relative_to(ROOT)), node.lineno, src, flags)
    return list(found.values())


_META = re.compile(r"\\[dDsSwWbBAZ]|\\.|\[[^\]]*\]|[(){}|?*+^$.]|\{\d*,?\d*\}")


def literal_fragments(source: str, limit: int = 6) -> list[str]:
    """Runs of literal text in a pattern (``"size mismatch"``, ``"() missing "``), longest first."""
    pieces = [p.replace("\\", "") for p in _META.split(source)]
    # Longest first, ties by text: the same fragments on every run, whatever the hash seed.
    runs = sorted({p for p in pieces if len(p.strip()) >= 2}, key=lambda p: (-len(p), p))
    return runs[:limit]


def adversarial_texts(pattern: Pattern, size: int, literals: int = 6) -> Iterator[tuple[str, str]]:
    """(family name, text of about ``size`` characters) built to make ``pattern`` backtrack."""
    frags = list(GENERIC)
    lits = literal_fragments(pattern.source, literals)
    frags += lits
    frags += [lit + " " for lit in lits]
    if len(lits) >= 2:
        frags.append(lits[-1] + " " + lits[0] + " ")  # pieces in the wrong order
    for frag in frags:
        body = (frag * (size // len(frag) + 1))[:size]
        yield repr(frag)[:40], body
        yield repr(frag)[:40] + "+err", "RuntimeError: " + body
