"""Read the user's own source files around a failure: in-place operations and backward calls.

A traceback names the line that failed, not the line that caused it. For autograd errors the two
differ: ``loss.backward()`` fails because of an ``h.mul_(2)`` in ``forward`` or because another
``backward()`` in the same function already freed the graph. ``torchhelp run`` knows these files
are the user's program, so it reads them (with :mod:`ast`: linear, no execution) and hands the
rules the sites that matter, with the user's own names.

Only ``torchhelp run`` calls this: text pasted into ``ask`` or a server may name any path, and
we never open files on the strength of untrusted text.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Iterable

from assistant.types import Evidence

MAX_FILES = 4
MAX_FILE_BYTES = 1_000_000
MAX_SITES = 12
# Methods that end in "_" but do not modify a tensor that autograd may have saved.
_NOT_TENSOR_INPLACE = frozenset({"requires_grad_", "share_memory_", "set_grad_enabled_", "manual_seed_", "retain_grad_"})
_LIB_MARKERS = ("site-packages", "dist-packages", "/lib/python3", "<")


@dataclass(frozen=True)
class FrameRef:
    """Where the traceback passed: file, line, and function."""

    file: str
    line: int
    function: str


def _segment(source: str, node: ast.AST) -> str:
    text = ast.get_source_segment(source, node) or ""
    return " ".join(text.split())[:160]


def _ancestors(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    return parents


def _enclosing(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> tuple[str, bool]:
    """(name of the enclosing function or "<module>", whether a for/while loop of that scope encloses it)."""
    in_loop = False
    cur = parents.get(node)
    while cur is not None:
        if isinstance(cur, (ast.For, ast.While, ast.AsyncFor, ast.comprehension)):
            in_loop = True
        if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return getattr(cur, "name", "<lambda>"), in_loop
        cur = parents.get(cur)
    return "<module>", in_loop


def _inplace_sites(source: str, tree: ast.AST, file: str, parents: dict[ast.AST, ast.AST]) -> list[dict[str, Any]]:
    sites: list[dict[str, Any]] = []
    for node in ast.walk(tree):
        kind = call = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            if name.endswith("_") and not name.startswith("_") and name not in _NOT_TENSOR_INPLACE and not _is_init(node.func):
                kind, call = "method", f".{name}()"
        if isinstance(node, ast.Call) and any(k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True for k in node.keywords):
            kind, call = "inplace_flag", "inplace=True"
        if isinstance(node, ast.AugAssign) and isinstance(node.target, (ast.Name, ast.Attribute, ast.Subscript)):
            kind, call = "augmented", f"{_op_symbol(node.op)}="
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) for t in node.targets):
            kind, call = "item_assign", "x[...] = ..."
        if kind is None:
            continue
        function, _ = _enclosing(node, parents)
        stmt = node
        sites.append({"file": file, "line": getattr(node, "lineno", 0), "function": function, "kind": kind, "call": call, "text": _segment(source, stmt)})
    sites.sort(key=lambda s: (s["line"], s["kind"]))
    return sites


def _is_init(func: ast.Attribute) -> bool:
    """``nn.init.kaiming_normal_(...)``: initialisation, run before any graph exists."""
    value = func.value
    return isinstance(value, ast.Attribute) and value.attr == "init" or isinstance(value, ast.Name) and value.id == "init"


def _op_symbol(op: ast.operator) -> str:
    return {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.MatMult: "@", ast.Pow: "**"}.get(type(op), "?")


def _backward_calls(source: str, tree: ast.AST, file: str, parents: dict[ast.AST, ast.AST]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "backward"):
            continue
        function, in_loop = _enclosing(node, parents)
        retain = any(k.arg == "retain_graph" for k in node.keywords)
        calls.append({"file": file, "line": node.lineno, "function": function, "in_loop": in_loop, "retain_graph": retain,
                      "receiver": _segment(source, node.func.value), "text": _segment(source, node)})
    calls.sort(key=lambda c: c["line"])
    return calls


def _user_files(frames: Iterable[FrameRef], cwd: Path) -> list[Path]:
    out: list[Path] = []
    for fr in frames:
        if any(m in fr.file for m in _LIB_MARKERS) or not fr.file.endswith(".py"):
            continue
        path = Path(fr.file)
        path = path if path.is_absolute() else cwd / path
        try:
            if path.is_file() and path.stat().st_size <= MAX_FILE_BYTES and path not in out:
                out.append(path)
        except OSError:
            continue
        if len(out) >= MAX_FILES:
            break
    return out


def scan_sources(frames: Iterable[FrameRef], cwd: Path) -> dict[str, Any] | None:
    """In-place sites and backward calls in the user's files on the traceback (innermost file first).

    Returns None when no file could be read; never raises on a file it cannot parse.
    """
    frames = list(frames)
    files = _user_files(reversed(frames), cwd)
    if not files:
        return None
    inplace: list[dict[str, Any]] = []
    backward: list[dict[str, Any]] = []
    read: list[str] = []
    for path in files:
        try:
            source = path.read_text(encoding="utf-8", errors="replace")
            tree = ast.parse(source)
        except (OSError, SyntaxError, ValueError, RecursionError):
            continue
        parents = _ancestors(tree)
        read.append(str(path))
        inplace.extend(_inplace_sites(source, tree, path.name, parents))
        backward.extend(_backward_calls(source, tree, path.name, parents))
    if not read:
        return None
    failing = frames[-1] if frames else None
    return {"files": read, "inplace": inplace[:MAX_SITES], "backward": backward[:MAX_SITES],
            "failing": {"file": Path(failing.file).name, "line": failing.line, "function": failing.function} if failing else None}


def with_source_scan(evidence: Evidence, failure_text: str, cwd: Path | None = None) -> Evidence:
    """The evidence plus what the user's files on the traceback say (unchanged when none can be read)."""
    from dataclasses import replace

    from assistant.parse.traceback import parse_failure

    try:
        failure = parse_failure(failure_text)
        frames = [FrameRef(f.file, f.line or 0, f.function or "") for f in failure.user_frames]
        scan = scan_sources(frames, cwd or Path.cwd())
    except Exception:  # noqa: BLE001 - reading the user's files is a bonus, never a reason to lose the diagnosis
        return evidence
    return replace(evidence, source=scan) if scan else evidence
