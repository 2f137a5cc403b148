"""Atlas entries from PyTorch's Python sources: every ``raise``, ``assert``, ``torch._check*``, warning and graph break.

The walk is purely static (``ast``): nothing under the package is imported, so it works on any checkout,
old or new. Each entry's ``template`` is the message with typed holes (``⟦int⟧`` ``⟦float⟧`` ``⟦shape⟧``
``⟦dtype⟧`` ``⟦device⟧`` ``⟦name⟧`` ``⟦any⟧``), built from string literals, f-strings, ``%`` and
``.format`` formatting, concatenation, and simple message variables assigned earlier in the function.

The template helpers at the top (``Parts``, ``render``, ``matchable``) are shared with ``extract_cpp``.
"""

from __future__ import annotations

import ast
import re
import string
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

# ---------------------------------------------------------------------------------------------------------------
# Templates: a list of parts, each a literal string or a Hole.
# ---------------------------------------------------------------------------------------------------------------

HOLE_TYPES = ("int", "float", "shape", "dtype", "device", "name", "any")
HOLE_RE = re.compile(r"⟦(int|float|shape|dtype|device|name|any)⟧")
MIN_FRAGMENT = 12  # a template needs one literal fragment this long to be matchable (ATLAS_BRIEF)
MAX_TEMPLATE = 2000  # longer messages are cut (with a trailing ⟦any⟧); they are banners, not checks
MAX_CONDITION = 400


@dataclass(frozen=True)
class Hole:
    type: str = "any"


Part = str | Hole
Parts = list[Part]


def hole(kind: str) -> str:
    return f"⟦{kind}⟧"


def normalize(parts: Iterable[Part]) -> Parts:
    """Merge adjacent literals; merge adjacent holes (same type kept, different types become ``any``)."""
    out: Parts = []
    for p in parts:
        if isinstance(p, str):
            if not p:
                continue
            if out and isinstance(out[-1], str):
                out[-1] += p
            else:
                out.append(p)
        else:
            if out and isinstance(out[-1], Hole):
                if out[-1].type != p.type:
                    out[-1] = Hole("any")
            else:
                out.append(p)
    return out


def render(parts: Iterable[Part]) -> str:
    """The template text: literals as written, holes as ``⟦type⟧``."""
    text = "".join(p if isinstance(p, str) else hole(p.type) for p in normalize(parts))
    if len(text) > MAX_TEMPLATE:
        cut = text[:MAX_TEMPLATE]
        if "⟦" in cut[-8:]:  # do not split a hole marker
            cut = cut[: cut.rindex("⟦")]
        text = cut + hole("any")
    return text


def parse_template(text: str) -> Parts:
    """The inverse of :func:`render`: split a template back into parts."""
    parts: Parts = []
    pos = 0
    for m in HOLE_RE.finditer(text):
        if m.start() > pos:
            parts.append(text[pos : m.start()])
        parts.append(Hole(m.group(1)))
        pos = m.end()
    if pos < len(text):
        parts.append(text[pos:])
    return parts


def literal_fragments(template: str) -> list[str]:
    return [f for f in HOLE_RE.split(template) if f and f not in HOLE_TYPES]


def matchable(template: str) -> bool:
    """A template is matchable when one literal fragment has at least 12 non-blank characters."""
    return any(len(f.strip()) >= MIN_FRAGMENT for f in HOLE_RE.split(template) if f not in HOLE_TYPES)


def has_text(parts: Iterable[Part]) -> bool:
    """At least one literal character that is not whitespace or punctuation."""
    return any(isinstance(p, str) and re.search(r"[A-Za-z]", p) for p in parts)


def text_transform(parts: Parts, fn) -> Parts:
    """Apply a string function (dedent, strip, ...) to a template, holes travelling as markers."""
    return parse_template(fn(render(parts)))


# Hole types from the text of an expression (Python or C++): the heuristics of the brief.
_INT_NAMES = re.compile(
    r"^(n|i|j|k|m|idx|index|dim|dims|ndim|ndims|rank|world_size|len|length|count|axis|nnz|numel|step|"
    r"batch_size|num_\w+|n_\w+|\w+_(dim|idx|index|count|len|length|num|rank|size_t|numel|id|ndim|nnz))$"
)
_FLOAT_NAMES = re.compile(r"^(lr|eps|epsilon|momentum|alpha|beta|tol|atol|rtol|weight_decay|dampening|\w+_rate|\w+_eps|p)$")
_SHAPE_NAMES = re.compile(r"^(shape|sizes|\w+_shape|\w+_sizes|\w+_shapes|shapes)$")
_NAME_NAMES = re.compile(r"^(name|\w+_name|qualname|\w+_qualname|attr|attr_name|op|op_name|opname|fn_name|func_name|backend|key|target|kind|mode|device_type|layout)$")


def hole_type_for_text(expr: str) -> str:
    """Guess a hole's type from the expression that fills it (works on Python and C++ text)."""
    e = expr.strip()
    low = e.lower()
    last = re.split(r"[.\->:]+", re.sub(r"\(.*\)$", "", e).strip())[-1].lower() if e else ""
    if re.match(r"^-?\d+$", e):
        return "int"
    if re.search(r"\b(len|numel|nelement|size_t|count)\s*\(", low) or re.search(r"\.(dim|ndim|ndimension|numel|nelement|nnz|_nnz|itemsize|element_size|rank|storage_offset)\s*\(?\)?$", low):
        return "int"
    if re.search(r"\.(size|shape|sizes)\s*\(\s*[^)\s]", low) or re.search(r"\.(shape|sizes\(\))\s*\[", low) or re.search(r"\.size\(\s*-?\w+\s*\)$", low):
        return "int"
    if re.search(r"\.(sizes|sym_sizes|strides|sym_strides|stride)\s*\(\s*\)", low) or re.search(r"\.shape\b", low) or re.search(r"\.size\(\s*\)", low):
        return "shape"
    if re.search(r"\b(tuple|list)\(\s*\w+\.shape", low):
        return "shape"
    if re.match(r"^type\(|^typeid\(|^typename\b", low) or re.search(r"__(name|qualname)__$|__class__$", low):
        return "name"
    if re.search(r"(^|[^a-z])dtype|scalar_?type|typemeta", low) or low.endswith(".type()"):
        return "dtype"
    if re.search(r"\.(device|get_device)\s*\(?\)?$", low) or re.search(r"\bdevice(s)?\b", low) and "device_type" not in low and "count" not in low and "index" not in low:
        if "device_type" in low:
            return "name"
        return "device"
    if re.search(r"__(name|qualname)__|\.name\(\)|\btype\(\w+\)|__class__", low) or re.search(r"\b(typeid|typename)\b", low):
        return "name"
    if _INT_NAMES.match(last):
        return "int"
    if _FLOAT_NAMES.match(last):
        return "float"
    if _SHAPE_NAMES.match(last):
        return "shape"
    if _NAME_NAMES.match(last):
        return "name"
    return "any"


# ---------------------------------------------------------------------------------------------------------------
# Python expressions -> Parts
# ---------------------------------------------------------------------------------------------------------------

_PRINTF_RE = re.compile(r"%(\([^)]*\))?[-#0 +]*(\*|\d+)?(\.(\*|\d+))?[hlL]?([diouxXeEfFgGcrsa%])")


def printf_parts(fmt: str, arg_types: list[str] | dict[str, str] | None) -> Parts:
    """Split a printf-style format into parts; conversion letters decide the hole type when the argument cannot."""
    out: Parts = []
    pos = 0
    k = 0
    for m in _PRINTF_RE.finditer(fmt):
        out.append(fmt[pos : m.start()])
        pos = m.end()
        conv = m.group(5)
        if conv == "%":
            out.append("%")
            continue
        if conv in "dioux" or conv == "X":
            kind = "int"
        elif conv in "eEfFgG":
            kind = "float"
        else:
            kind = "any"
            if isinstance(arg_types, dict) and m.group(1):
                kind = arg_types.get(m.group(1)[1:-1], "any")
            elif isinstance(arg_types, list) and k < len(arg_types):
                kind = arg_types[k]
        k += 1
        out.append(Hole(kind))
    out.append(fmt[pos:])
    return out


class ExprTemplater:
    """Turns a Python message expression into parts, resolving simple local variables."""

    def __init__(self, resolve_name=None, depth: int = 0):
        self.resolve_name = resolve_name  # callable(name, node) -> ast.expr | None
        self.depth = depth

    def hole_for(self, node: ast.AST, conversion: int = -1, spec: str = "") -> Hole:
        if spec:
            s = spec.rstrip()
            if s.endswith(("d", "n", "x", "X", "o", "b", ",")):
                return Hole("int")
            if s.endswith(("f", "e", "g", "%", "E", "F", "G")):
                return Hole("float")
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return Hole("int" if isinstance(node.value, int) else "float")
        try:
            text = ast.unparse(node)
        except Exception:  # pragma: no cover - unparse is total on parsed trees
            return Hole("any")
        return Hole(hole_type_for_text(text))

    def parts(self, node: ast.AST | None) -> Parts:
        if node is None:
            return [Hole("any")]
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return [node.value]
            if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
                return [str(node.value)]
            return [Hole("any")]
        if isinstance(node, ast.JoinedStr):
            out: Parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    out.append(str(v.value))
                elif isinstance(v, ast.FormattedValue):
                    spec = ""
                    if isinstance(v.format_spec, ast.JoinedStr):
                        spec = "".join(str(x.value) for x in v.format_spec.values if isinstance(x, ast.Constant))
                    inner = v.value
                    if isinstance(inner, ast.Constant) and isinstance(inner.value, str) and v.conversion in (-1, 115):
                        out.append(inner.value)
                    elif isinstance(inner, ast.JoinedStr) and v.conversion in (-1, 115) and not spec:
                        out.extend(self.parts(inner))
                    elif isinstance(inner, ast.Name) and v.conversion in (-1, 115) and not spec and self._field_text(inner) is not None:
                        out.extend(self._field_text(inner) or [])
                    else:
                        out.append(self.hole_for(inner, v.conversion, spec))
            return out
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Add):
                left, right = self.parts(node.left), self.parts(node.right)
                return left + right
            if isinstance(node.op, ast.Mod) and self._is_str_expr(node.left):
                return self._percent(node)
            return [self.hole_for(node)]
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Name):
            if self.resolve_name is not None and self.depth < 6:
                target = self.resolve_name(node.id, node)
                if target is not None:
                    sub = ExprTemplater(self.resolve_name, self.depth + 1)
                    return sub.parts(target)
            return [self.hole_for(node)]
        if isinstance(node, ast.Lambda):
            return self.parts(node.body)
        if isinstance(node, ast.IfExp):
            a, b = self.parts(node.body), self.parts(node.orelse)
            # A conditional message: keep the common literal prefix/suffix shape by choosing the richer side.
            if not has_text(a) and not has_text(b):
                return [Hole("any")]
            return [Hole("any")]
        return [self.hole_for(node)]

    def _field_text(self, node: ast.Name) -> Parts | None:
        """A local message piece used in an f-string field (``{prefix}``); parameters' defaults do not count."""
        if self.resolve_name is None or self.depth >= 6:
            return None
        target = self.resolve_name(node.id, node, True)
        if target is None or not self._is_str_expr(target):
            return None
        return ExprTemplater(self.resolve_name, self.depth + 1).parts(target)

    def _is_str_expr(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str)
        if isinstance(node, ast.JoinedStr):
            return True
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self._is_str_expr(node.left) or self._is_str_expr(node.right)
        if isinstance(node, ast.Name) and self.resolve_name is not None and self.depth < 6:
            target = self.resolve_name(node.id, node)
            return target is not None and ExprTemplater(self.resolve_name, self.depth + 1)._is_str_expr(target)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("format", "strip", "rstrip", "lstrip", "join"):
            return self._is_str_expr(node.func.value) or node.func.attr == "join"
        if isinstance(node, ast.Call) and _call_name(node.func) in ("textwrap.dedent", "dedent", "inspect.cleandoc", "cleandoc", "str"):
            return True
        return False

    def _arg_types(self, elts: list[ast.expr]) -> list[str]:
        return [self.hole_for(e).type for e in elts]

    def _percent(self, node: ast.BinOp) -> Parts:
        left = self.parts(node.left)
        right = node.right
        arg_nodes: list[ast.expr] | dict[str, ast.expr]
        if isinstance(right, ast.Tuple):
            arg_nodes = list(right.elts)
        elif isinstance(right, ast.Dict):
            arg_nodes = {k.value: v for k, v in zip(right.keys, right.values, strict=False) if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        else:
            arg_nodes = [right]
        out: Parts = []
        k = 0
        for p in left:
            if isinstance(p, Hole):
                out.append(p)
                continue
            pos = 0
            for m in _PRINTF_RE.finditer(p):
                out.append(p[pos : m.start()])
                pos = m.end()
                conv = m.group(5)
                if conv == "%":
                    out.append("%")
                    continue
                arg = None
                if isinstance(arg_nodes, dict):
                    if m.group(1):
                        arg = arg_nodes.get(m.group(1)[1:-1])
                elif k < len(arg_nodes):
                    arg = arg_nodes[k]
                k += 1
                if conv in "diouxX":
                    out.append(Hole("int"))
                elif conv in "eEfFgG":
                    out.append(Hole("float"))
                elif arg is not None and conv == "s" and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    out.append(arg.value)
                elif arg is not None:
                    out.append(self.hole_for(arg))
                else:
                    out.append(Hole("any"))
            out.append(p[pos:])
        return out

    def _format(self, fmt_parts: Parts, call: ast.Call) -> Parts:
        args = list(call.args)
        kwargs = {k.arg: k.value for k in call.keywords if k.arg}
        out: Parts = []
        auto = 0
        for p in fmt_parts:
            if isinstance(p, Hole):
                out.append(p)
                continue
            try:
                pieces = list(string.Formatter().parse(p))
            except ValueError:
                out.append(p)
                continue
            for lit, field, spec, conv in pieces:
                out.append(lit)
                if field is None:
                    continue
                base = re.split(r"[.\[]", field, maxsplit=1)[0]
                arg: ast.expr | None = None
                if base == "":
                    arg = args[auto] if auto < len(args) else None
                    auto += 1
                elif base.isdigit():
                    arg = args[int(base)] if int(base) < len(args) else None
                else:
                    arg = kwargs.get(base)
                if arg is not None and field == base and not spec and conv in (None, "s") and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    out.append(arg.value)
                elif arg is not None and field == base:
                    out.append(self.hole_for(arg, -1, spec or ""))
                elif arg is not None:
                    out.append(Hole(hole_type_for_text(ast.unparse(arg) + field[len(base) :])))
                else:
                    out.append(Hole(hole_type_for_text(field)))
        return out

    def _call(self, node: ast.Call) -> Parts:
        name = _call_name(node.func)
        if isinstance(node.func, ast.Attribute):
            attr = node.func.attr
            recv = node.func.value
            if attr == "format" and self._is_str_expr(recv):
                return self._format(self.parts(recv), node)
            if attr in ("strip", "rstrip", "lstrip") and self._is_str_expr(recv) and not node.args:
                return text_transform(self.parts(recv), getattr(str, attr))
            if attr == "join" and isinstance(recv, ast.Constant) and isinstance(recv.value, str) and node.args:
                seq = node.args[0]
                if isinstance(seq, (ast.List, ast.Tuple)) and seq.elts:
                    out: Parts = []
                    for i, e in enumerate(seq.elts):
                        if i:
                            out.append(recv.value)
                        out.extend(self.parts(e))
                    return out
                return [Hole("any")]
        if name in ("textwrap.dedent", "dedent") and node.args:
            return text_transform(self.parts(node.args[0]), textwrap.dedent)
        if name in ("inspect.cleandoc", "cleandoc") and node.args:
            import inspect

            return text_transform(self.parts(node.args[0]), inspect.cleandoc)
        if name == "str" and len(node.args) == 1:
            inner = node.args[0]
            if self._is_str_expr(inner):
                return self.parts(inner)
            return [self.hole_for(inner)]
        if name in ("repr",) and len(node.args) == 1:
            return [self.hole_for(node.args[0])]
        if name in ("len",):
            return [Hole("int")]
        if name in ("type",):
            return [Hole("name")]
        return [self.hole_for(node)]


def _call_name(func: ast.AST) -> str:
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    elif isinstance(func, ast.Call):
        parts.append(_call_name(func.func) + "()")
    else:
        return ""
    return ".".join(reversed(parts))


# ---------------------------------------------------------------------------------------------------------------
# Public names: where a module-level def/class is re-exported (torch.nn.modules.conv.Conv2d -> torch.nn.Conv2d)
# ---------------------------------------------------------------------------------------------------------------


def _module_name(rel: Path) -> str:
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve_from(module: str, is_pkg: bool, node: ast.ImportFrom) -> str | None:
    if node.level == 0:
        return node.module
    base = module.split(".")
    if not is_pkg:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    if not base:
        return None
    return ".".join(base + ([node.module] if node.module else []))


def _top_level_names(tree: ast.Module) -> tuple[list[str] | None, set[str]]:
    """``__all__`` (when a literal list) and the public top-level definitions of a module."""
    all_names: list[str] | None = None
    defined: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    if t.id == "__all__" and isinstance(stmt.value, (ast.List, ast.Tuple)):
                        all_names = [e.value for e in stmt.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                    defined.add(t.id)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == "__all__":
            if isinstance(stmt.value, (ast.List, ast.Tuple)) and all_names is not None:
                all_names += [e.value for e in stmt.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return all_names, {n for n in defined if not n.startswith("_")}


class PublicNames:
    """(defining module, top-level name) -> the shortest public dotted name that re-exports it."""

    def __init__(self, trees: dict[str, tuple[ast.Module, bool]], loader=None):
        # exports[(module, name)] = set of (package, alias)
        self.best: dict[tuple[str, str], str] = {}
        edges: dict[tuple[str, str], set[str]] = {}
        star_cache: dict[str, set[str]] = {}

        def star_names(mod: str) -> set[str]:
            if mod in star_cache:
                return star_cache[mod]
            entry = trees.get(mod)
            if entry is None and loader is not None:
                entry = loader(mod)
            if entry is None:
                star_cache[mod] = set()
                return set()
            all_names, defined = _top_level_names(entry[0])
            star_cache[mod] = set(all_names) if all_names is not None else defined
            return star_cache[mod]

        for mod, (tree, is_pkg) in list(trees.items()):
            if not is_pkg:
                continue
            for stmt in tree.body:
                if not isinstance(stmt, ast.ImportFrom):
                    continue
                src = _resolve_from(mod, is_pkg, stmt)
                if not src or not src.startswith(mod.split(".")[0]):
                    continue
                for alias in stmt.names:
                    if alias.name == "*":
                        for n in star_names(src):
                            edges.setdefault((src, n), set()).add(f"{mod}.{n}")
                    else:
                        public = alias.asname or alias.name
                        if public.startswith("_") and not public.startswith("__"):
                            continue
                        edges.setdefault((src, alias.name), set()).add(f"{mod}.{public}")
        self.edges = edges

    def public(self, module: str, name: str) -> str:
        key = (module, name)
        if key in self.best:
            return self.best[key]
        seen = {f"{module}.{name}"}
        frontier = [f"{module}.{name}"]
        for _ in range(6):
            nxt = []
            for full in frontier:
                m, _, n = full.rpartition(".")
                for alias in self.edges.get((m, n), ()):
                    if alias not in seen:
                        seen.add(alias)
                        nxt.append(alias)
            frontier = nxt
            if not frontier:
                break

        def rank(s: str) -> tuple[int, int, int, str]:
            comps = s.split(".")
            private = sum(1 for c in comps[:-1] if c.startswith("_"))
            return (private, len(comps), len(s), s)

        best = min(seen, key=rank)
        self.best[key] = best
        return best


# ---------------------------------------------------------------------------------------------------------------
# The walk
# ---------------------------------------------------------------------------------------------------------------

_WARN_FUNCS = {"warnings.warn": "UserWarning", "warn": "UserWarning", "warnings.warn_explicit": "UserWarning", "_warnings.warn": "UserWarning"}
_CHECK_FUNCS = {
    "_check": "RuntimeError",
    "_check_index": "IndexError",
    "_check_value": "ValueError",
    "_check_type": "TypeError",
    "_check_not_implemented": "NotImplementedError",
    "_check_is_size": "RuntimeError",
    "_check_tensor_all": "RuntimeError",
}
_SKIP_DIRS = {"_vendor", "include", "share", "bin", "lib", "test", "__pycache__"}
_SKIP_PREFIXES = ("testing/_internal",)
_EXC_SUFFIXES = ("Error", "Exception", "Warning", "Exit", "Interrupt", "Failed", "Unsupported", "Abort", "Skip")


_BUILTIN_EXC = {"Exception", "BaseException", "KeyError", "StopIteration", "SystemExit", "KeyboardInterrupt"}


def _exc_name(func: ast.AST) -> str | None:
    name = _call_name(func)
    if not name:
        return None
    last = name.split(".")[-1]
    if last and last[0].isupper():
        return last
    if last.endswith(_EXC_SUFFIXES):
        return last
    return None


class _FunctionIndex:
    """Statements of one function body (not nested defs), to resolve message variables."""

    def __init__(self, body: list[ast.stmt]):
        self.assigns: dict[str, list[tuple[ast.stmt, list[ast.stmt]]]] = {}
        self.params: set[str] = set()
        self._collect(body)

    def _collect(self, block: list[ast.stmt]) -> None:
        for stmt in block:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                self.assigns.setdefault(stmt.targets[0].id, []).append((stmt, block))
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                self.assigns.setdefault(stmt.target.id, []).append((stmt, block))
            elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and isinstance(stmt.op, ast.Add):
                self.assigns.setdefault(stmt.target.id, []).append((stmt, block))
            for field in ("body", "orelse", "finalbody", "handlers"):
                sub = getattr(stmt, field, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], (ast.stmt, ast.excepthandler)):
                    if field == "handlers":
                        for h in sub:
                            self._collect(h.body)
                    else:
                        self._collect(sub)
            if isinstance(stmt, ast.Match):
                for case in stmt.cases:
                    self._collect(case.body)

    def add_defaults(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """String defaults of parameters (``msg: str = "Expected hidden size {}, got {}"``) dominate the body."""
        a = fn.args
        self.params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
        positional = a.posonlyargs + a.args
        pairs = list(zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=False))
        pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=False) if d is not None]
        for arg, default in pairs:
            if isinstance(default, ast.Constant) and isinstance(default.value, str) and arg.arg not in self.assigns:
                value = ast.Constant(value=default.value)
                value._param_default = True  # type: ignore[attr-defined]
                stmt = ast.Assign(targets=[ast.Name(id=arg.arg)], value=value, lineno=fn.lineno, col_offset=0)
                self.assigns[arg.arg] = [(stmt, fn.body)]

    def candidates(self, name: str, before_line: int, ancestors: list[list[ast.stmt]]) -> list[ast.expr]:
        """The expressions that can hold ``name`` at ``before_line`` (nearest dominating plain assignment
        plus the ``+=`` and branch assignments after it)."""
        entries = [(s, b) for s, b in self.assigns.get(name, []) if s.lineno < before_line]
        if not entries:
            return []
        ancestor_ids = {id(b) for b in ancestors}
        plain = [(s, b) for s, b in entries if not isinstance(s, ast.AugAssign)]
        dominating = [(s, b) for s, b in plain if id(b) in ancestor_ids]
        start = dominating[-1] if dominating else None
        out: list[ast.expr] = []
        if start is not None:
            base: ast.expr = start[0].value  # type: ignore[assignment]
            for s, b in entries:
                if s.lineno <= start[0].lineno:
                    continue
                if isinstance(s, ast.AugAssign):
                    if b is start[1]:
                        base = ast.BinOp(left=base, op=ast.Add(), right=s.value)
                    else:
                        base = ast.BinOp(left=base, op=ast.Add(), right=ast.Name(id="__optional__"))
                else:
                    out.append(s.value)  # an assignment in a branch after the dominating one
            out.insert(0, base)
        else:
            out = [s.value for s, _ in plain]  # type: ignore[misc]
        return out[:4]


@dataclass
class _Ctx:
    stack: list[tuple[str, str]]  # (kind, name) for enclosing class/def
    findex: _FunctionIndex | None


class PythonExtractor(ast.NodeVisitor):
    def __init__(self, rel_file: str, module: str, public: PublicNames | None, module_consts: dict[str, ast.expr]):
        self.rel_file = rel_file
        self.module = module
        self.public = public
        self.module_consts = module_consts
        self.entries: list[dict] = []
        self.stack: list[tuple[str, str]] = []
        self.findex: list[_FunctionIndex] = []
        self.blocks: list[list[ast.stmt]] = []  # enclosing statement lists, outermost first
        self.if_of_block: dict[int, tuple[ast.If, bool]] = {}  # id(block) -> (If node, is_body)
        self.exc_class_stack: list[str] = []
        self.callers: dict[str, set[str]] = {}

    # --- context ---------------------------------------------------------------------------------------------
    def function(self) -> str | None:
        names = [n for _, n in self.stack]
        return ".".join(names) if names else None

    def op(self) -> str:
        if not self.stack:
            return self.module
        first_kind, first = self.stack[0]
        if first_kind == "def" and first.startswith("_") and not first.startswith("__"):
            caller = _public_caller(first, self.callers)
            if caller is not None:  # a private helper with one public caller in its module: that caller is the API
                return self.public.public(self.module, caller) if self.public else f"{self.module}.{caller}"
        head = self.public.public(self.module, first) if self.public else f"{self.module}.{first}"
        rest = []
        if first_kind == "class":
            # Class.method (the method of the outermost class; nested helpers belong to it)
            for kind, name in self.stack[1:]:
                rest.append(name)
                if kind == "def":
                    break
        return ".".join([head, *rest])

    def condition(self, stmt: ast.stmt) -> tuple[str | None, str | None]:
        if not self.blocks:
            return None, None
        block = self.blocks[-1]
        info = self.if_of_block.get(id(block))
        if info is None:
            return None, None
        node, is_body = info
        try:
            test = ast.unparse(node.test)
        except Exception:  # pragma: no cover
            return None, None
        if not is_body:
            test = f"not ({test})"
        return test[:MAX_CONDITION], "failing"

    def _resolve(self, name: str, node: ast.AST, in_field: bool = False) -> ast.expr | None:
        if name == "__optional__":
            return None
        if self.findex:
            cands = self.findex[-1].candidates(name, getattr(node, "lineno", 10**9), self.blocks)
            if cands:
                if in_field and (len(cands) > 1 or getattr(cands[0], "_param_default", False)):
                    return None  # a caller's value or a value set on several paths: not a fixed text
                return cands[0]
            if name in self.findex[-1].params:
                return None  # a parameter shadows a module constant
        value = self.module_consts.get(name)
        return value

    # --- visiting --------------------------------------------------------------------------------------------
    def visit_block(self, block: list[ast.stmt], if_info: tuple[ast.If, bool] | None = None) -> None:
        if if_info is not None:
            self.if_of_block[id(block)] = if_info
        self.blocks.append(block)
        for stmt in block:
            self.visit(stmt)
        self.blocks.pop()

    def generic_visit(self, node: ast.AST) -> None:
        for field, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                if isinstance(node, ast.If) and field in ("body", "orelse"):
                    # an `elif` is an If inside orelse: its own test is the condition of its body
                    self.visit_block(value, (node, field == "body"))
                else:
                    self.visit_block(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        self.stack.append(("class", node.name))
        is_exc = any(_call_name(b).split(".")[-1].endswith(_EXC_SUFFIXES) or _call_name(b) in _BUILTIN_EXC for b in node.bases)
        self.exc_class_stack.append(node.name if is_exc else "")
        self.visit_block(node.body)
        self.exc_class_stack.pop()
        self.stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list:
            self._maybe_deprecated(d, node)
            self.visit(d)
        self.stack.append(("def", node.name))
        index = _FunctionIndex(node.body)
        index.add_defaults(node)
        self.findex.append(index)
        saved_blocks = self.blocks
        self.blocks = []
        self.visit_block(node.body)
        self.blocks = saved_blocks
        self.findex.pop()
        self.stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Name) and self.findex:
            # `err = ValueError("..."); raise err`
            cands = self.findex[-1].candidates(exc.id, node.lineno, self.blocks)
            if cands and isinstance(cands[0], ast.Call):
                exc = cands[0]
        if isinstance(exc, ast.Call) and isinstance(exc.func, ast.Attribute) and exc.func.attr == "with_traceback" and isinstance(exc.func.value, ast.Call):
            exc = exc.func.value  # raise X("...").with_traceback(tb)
        if isinstance(exc, ast.Call):
            exc_type = _exc_name(exc.func)
            first = exc.args[0] if exc.args else None
            if isinstance(first, (ast.Name, ast.Attribute)) and _call_name(first).split(".")[-1].endswith(("Error", "Exception", "Warning")):
                exc_type = _call_name(first).split(".")[-1]  # ErrorMeta(ValueError, msg), make_error(TypeError, msg)
            for msg in self._message_args(exc):
                if self._emit(node, msg, kind="error", exc_type=exc_type, sense_from_if=True):
                    break
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        if node.msg is not None:
            cond = ast.unparse(node.test)[:MAX_CONDITION]
            self._emit(node, node.msg, kind="error", exc_type="AssertionError", condition=(cond, "required"))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _call_name(node.func)
        last = name.split(".")[-1]
        if name in _WARN_FUNCS or (last == "warn" and name.endswith("warnings.warn")):
            msg = node.args[0] if node.args else _kw(node, "message")
            cat = node.args[1] if len(node.args) > 1 else _kw(node, "category")
            exc_type = _exc_name(cat) if isinstance(cat, (ast.Name, ast.Attribute)) else None
            if isinstance(cat, ast.Name):
                exc_type = cat.id
            if msg is not None:
                self._emit(node, msg, kind="warning", exc_type=exc_type or "UserWarning", sense_from_if=True)
        elif last in ("warn_once", "_warn_once", "warning_once") and node.args and "log" not in name:
            self._emit(node, node.args[-1] if last != "warning_once" else node.args[0], kind="warning", exc_type="UserWarning", sense_from_if=True)
        elif last in _CHECK_FUNCS and (name.startswith("torch.") or name == last) and node.args:
            msg = node.args[1] if len(node.args) > 1 else _kw(node, "message")
            if msg is not None:
                cond = ast.unparse(node.args[0])[:MAX_CONDITION]
                self._emit(node, msg, kind="error", exc_type=_CHECK_FUNCS[last], condition=(cond, "required"))
        elif last == "_check_with" and len(node.args) >= 3:
            exc_type = _exc_name(node.args[0]) if isinstance(node.args[0], (ast.Name, ast.Attribute)) else None
            cond = ast.unparse(node.args[1])[:MAX_CONDITION]
            self._emit(node, node.args[2], kind="error", exc_type=exc_type, condition=(cond, "required"))
        elif last in ("unimplemented", "unimplemented_v2") and _kw(node, "gb_type") is not None:
            self._graph_break(node)
        elif last == "__init__" and isinstance(node.func, ast.Attribute) and _call_name(node.func.value) in ("super()",) and self.exc_class_stack and self.exc_class_stack[-1]:
            # an exception class that builds its own message: super().__init__(f"...")
            if node.args and ExprTemplater()._is_str_expr(node.args[0]):
                self._emit(node, node.args[0], kind="error", exc_type=self.exc_class_stack[-1])
        self.generic_visit(node)

    # --- helpers ---------------------------------------------------------------------------------------------
    def _maybe_deprecated(self, dec: ast.expr, fn: ast.AST) -> None:
        if isinstance(dec, ast.Call) and _call_name(dec.func).split(".")[-1] == "deprecated" and dec.args:
            cat = _kw(dec, "category")
            exc_type = "DeprecationWarning"
            if isinstance(cat, (ast.Name, ast.Attribute)):
                exc_type = _call_name(cat).split(".")[-1]
            elif isinstance(cat, ast.Constant) and cat.value is None:
                return
            self._emit(dec, dec.args[0], kind="warning", exc_type=exc_type, function_extra=getattr(fn, "name", None))

    def _message_args(self, call: ast.Call) -> list[ast.expr]:
        """The arguments that may carry the message, most likely first (``UserError(kind, msg)`` has it second)."""
        out: list[ast.expr] = [a for a in call.args[:3] if not isinstance(a, ast.Starred)]
        for k in ("msg", "message", "reason", "what", "error_msg"):
            v = _kw(call, k)
            if v is not None:
                out.append(v)
        return out

    def _graph_break(self, node: ast.Call) -> None:
        templ = ExprTemplater(self._resolve)
        gb = templ.parts(_kw(node, "gb_type"))
        expl_node = _kw(node, "explanation")
        expl = templ.parts(expl_node) if expl_node is not None else [Hole("any")]
        expl = [p.replace("\n", "\n    ") if isinstance(p, str) else p for p in expl]
        expl = text_transform(expl, str.lstrip)
        parts = [*gb, "\n  Explanation: ", *expl, Hole("any")]
        self._add(node, parts, kind="error", exc_type="Unsupported", condition=self.condition(node))

    def _emit(self, node: ast.AST, msg: ast.expr, *, kind: str, exc_type: str | None, condition=None, sense_from_if=False, function_extra=None) -> bool:
        templ = ExprTemplater(self._resolve)
        variants: list[Parts] = []
        if isinstance(msg, ast.Name) and self.findex:
            for cand in self.findex[-1].candidates(msg.id, getattr(node, "lineno", 10**9), self.blocks):
                variants.append(ExprTemplater(self._resolve, 1).parts(cand))
        if not variants:
            variants = [templ.parts(msg)]
        if condition is None and sense_from_if:
            condition = self.condition(node)  # type: ignore[arg-type]
        seen = set()
        added = False
        for parts in variants:
            if exc_type == "KeyError":
                parts = ["'", *parts, "'"]
            key = render(parts)
            if key in seen:
                continue
            seen.add(key)
            added = self._add(node, parts, kind=kind, exc_type=exc_type, condition=condition, function_extra=function_extra) or added
        return added

    def _add(self, node: ast.AST, parts: Parts, *, kind: str, exc_type: str | None, condition, function_extra=None) -> bool:
        if not has_text(parts):
            return False
        template = render(parts)
        cond, sense = condition if condition else (None, None)
        function = self.function()
        if function_extra:
            function = f"{function}.{function_extra}" if function else function_extra
        self.entries.append(
            {
                "template": template,
                "kind": kind,
                "exc_type": exc_type,
                "file": self.rel_file,
                "line": getattr(node, "lineno", None),
                "function": function,
                "op": self.op() + (f".{function_extra}" if function_extra and not self.stack else ""),
                "condition": cond,
                "condition_sense": sense,
                "internal": False,
            }
        )
        return True


def _module_callers(tree: ast.Module) -> dict[str, set[str]]:
    """For each top-level function of a module, the top-level functions that call it by name."""
    callers: dict[str, set[str]] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(stmt):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id != stmt.name:
                    callers.setdefault(node.func.id, set()).add(stmt.name)
    return callers


def _public_caller(name: str, callers: dict[str, set[str]]) -> str | None:
    """The one public function that reaches private ``name`` through private helpers (None when 0 or several)."""
    seen = {name}
    frontier = [name]
    found: set[str] = set()
    for _ in range(4):
        nxt = []
        for f in frontier:
            for c in callers.get(f, ()):
                if c in seen:
                    continue
                seen.add(c)
                if c.startswith("_"):
                    nxt.append(c)
                else:
                    found.add(c)
        frontier = nxt
    return next(iter(found)) if len(found) == 1 else None


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def _module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            v = stmt.value
            if isinstance(v, (ast.Constant, ast.JoinedStr, ast.BinOp)) and ExprTemplater()._is_str_expr(v):
                out[stmt.targets[0].id] = v
    return out


def iter_python_files(package_dir: Path) -> Iterator[Path]:
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir)
        if any(p in _SKIP_DIRS for p in rel.parts[:-1]):
            continue
        if rel.as_posix().startswith(_SKIP_PREFIXES):
            continue
        yield path


def parse_file(path: Path) -> ast.Module | None:
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
        return ast.parse(source, filename=str(path))
    except (SyntaxError, ValueError, RecursionError):
        return None


def extract(package_dir: str | Path, *, torch_version: str = "", commit: str = "", source: str = "python", only: Iterable[str] | None = None) -> list[dict]:
    """Every message entry under a ``torch`` package directory (``site-packages/torch`` or ``<checkout>/torch``).

    ``only`` limits the files that give entries (paths under the package, ``"nn/"`` or ``"functional.py"``);
    every ``__init__.py`` is still read, for the public names.
    """
    package_dir = Path(package_dir)
    root_name = package_dir.name  # "torch"
    wanted = [o.rstrip("/") for o in only] if only is not None else None
    paths: dict[str, Path] = {}
    for path in iter_python_files(package_dir):
        rel = Path(root_name) / path.relative_to(package_dir)
        paths[_module_name(rel)] = path
    trees: dict[str, tuple[ast.Module, bool]] = {}
    failed: list[str] = []

    def load(mod: str) -> tuple[ast.Module, bool] | None:
        if mod in trees:
            return trees[mod]
        path = paths.get(mod)
        if path is None:
            return None
        tree = parse_file(path)
        if tree is None:
            failed.append((Path(root_name) / path.relative_to(package_dir)).as_posix())
            return None
        trees[mod] = (tree, path.name == "__init__.py")
        return trees[mod]

    def is_wanted(path: Path) -> bool:
        if wanted is None:
            return True
        rel = path.relative_to(package_dir).as_posix()
        return any(rel == w or rel.startswith(w + "/") for w in wanted)

    emit = [mod for mod, path in paths.items() if is_wanted(path)]
    for mod, path in paths.items():
        if path.name == "__init__.py" or mod in emit:
            load(mod)
    public = PublicNames(dict(trees), loader=load)
    entries: list[dict] = []
    for mod in emit:
        entry = load(mod)
        if entry is None:
            continue
        rel = (Path(root_name) / paths[mod].relative_to(package_dir)).as_posix()
        ex = PythonExtractor(rel, mod, public, _module_constants(entry[0]))
        ex.callers = _module_callers(entry[0])
        ex.visit_block(entry[0].body)
        entries.extend(ex.entries)
    counts: dict[tuple[str, int], int] = {}
    for e in entries:
        base = f"{source}:{e['file']}:{e['line']}"
        n = counts.get((e["file"], e["line"]), 0)
        counts[(e["file"], e["line"])] = n + 1
        e["id"] = base if n == 0 else f"{base}:{n}"
        e["source"] = source
        e["torch_version"] = torch_version
        e["commit"] = commit
        e["matchable"] = matchable(e["template"])
    extract.failed_files = failed  # type: ignore[attr-defined]
    return entries


def package_version(package_dir: str | Path) -> tuple[str, str]:
    """``(version, git commit)`` from ``torch/version.py`` without importing it (empty strings when absent)."""
    path = Path(package_dir) / "version.py"
    version = commit = ""
    if path.is_file():
        tree = parse_file(path)
        if tree is not None:
            for stmt in tree.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                    for t in stmt.targets:
                        if isinstance(t, ast.Name) and t.id == "__version__":
                            version = stmt.value.value
                        elif isinstance(t, ast.Name) and t.id == "git_version":
                            commit = stmt.value.value
    return version, commit
