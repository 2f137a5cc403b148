"""Autograd causes read from the user's own source (``torchhelp run``'s source scan and module probes).

The message of a freed-graph or in-place error names torch's internals; the user's file names the
culprit. Two backward calls in one function with no loop around them are two losses sharing one
forward graph, not state carried across iterations; an ``h.mul_(2)`` or a layer built with
``inplace=True`` is the in-place operation to undo. These helpers turn the scan into facts, a cause
and fixes written with the user's own names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from collections.abc import Mapping, Sequence

from assistant.kb.code_values import UserCode
from assistant.rules.base import remedy
from assistant.types import Fact, Fix, ModuleSummary

DOC_TWICE = "backward-twice"
DOC_INPLACE = "inplace-modification"
MAX_NAMED_SITES = 4
# Outcomes where some in-place operation in the forward pass changed a saved activation.
_SAVED_TENSOR_OUTCOMES = frozenset({"autograd.inplace", "autograd.inplace_bare", "autograd.inplace_prose"})
MAX_RECEIVER = 40
# `x.data.mul_()` / `p.grad.zero_()` do not bump autograd's version counter; `optimizer.zero_grad()` is not a tensor op.
_HARMLESS = re.compile(r"\.(?:data|grad)\.|zero_grad|\.step\(")
_METHOD = re.compile(r"^(?P<recv>[A-Za-z_][\w.]*(?:\[[^\]]*\])?)\.(?P<name>[a-z][a-z0-9_]*?)_\((?P<args>.*)\)$")
_AUG = re.compile(r"^(?P<target>[^=]*?[^=\s])\s*(?P<op>\*\*|[-+*/@])=\s*(?P<rhs>.+)$")


@dataclass(frozen=True)
class SourceFinding:
    """What the user's source says about an autograd error."""

    facts: list[Fact]
    fixes: tuple[Fix, ...]
    cause: str = ""
    sentence: str = ""


def _receiver(call: Mapping[str, Any]) -> str:
    text = str(call.get("receiver") or "loss")
    return text if len(text) <= MAX_RECEIVER else "loss"


def backward_twice_from_source(source: Mapping[str, Any] | None) -> SourceFinding | None:
    """Two backward calls in the failing function and no loop around them: two losses sharing one graph."""
    if not source or not source.get("failing"):
        return None
    failing = source["failing"]
    calls = [c for c in source.get("backward", []) if c["file"] == failing["file"] and c["function"] == failing["function"]]
    failed = next((c for c in calls if c["line"] == failing["line"]), None)
    if failed is None:
        return None
    earlier = [c for c in calls if c["line"] < failed["line"]]
    facts = [Fact("source", f"{c['file']}:{c['line']} `{c['text']}`" + (" (inside a loop)" if c["in_loop"] else "")) for c in calls[:MAX_NAMED_SITES]]
    if failed["in_loop"] or not earlier:
        # A loop (or a single call) fits the rule's own story of state kept from an earlier step: only add the facts.
        return SourceFinding(facts, ())
    first = earlier[-1]
    a, b = _receiver(first), _receiver(failed)
    where = "the module level" if failing["function"] == "<module>" else f"`{failing['function']}`"
    cause = (f"`{b}.backward()` (line {failed['line']}) is the second backward pass in {where}: `{a}.backward()` at line {first['line']} ran first "
             "and freed the tensors the forward pass saved. Neither call sits in a loop, so nothing is carried across iterations: the two losses "
             "share part of one graph, and the first backward released it.")
    fixes = (
        remedy(f"{DOC_TWICE}#add-losses-backward-once-named", first_loss=a, second_loss=b),
        remedy(f"{DOC_TWICE}#retain-graph-second-pass-named", first_loss=a, second_loss=b),
    )
    return SourceFinding(facts, fixes, cause=cause)


def out_of_place(text: str, kind: str) -> str | None:
    """The out-of-place spelling of an in-place statement from the user's code, or None when unsure."""
    text = text.strip()
    if kind == "inplace_flag":
        return text.replace("inplace=True", "inplace=False")
    if kind == "augmented":
        m = _AUG.match(text)
        if m:
            target = m.group("target").strip()
            return f"{target} = {target} {m.group('op')} {m.group('rhs').strip()}"
    if kind == "method":
        m = _METHOD.match(text)
        if m:
            recv = m.group("recv").strip()
            return f"{recv} = {recv}.{m.group('name')}({m.group('args')})"
    return None


def _out_of_place_values(text: str, kind: str) -> tuple[str, dict[str, str]] | None:
    """The pieces of the user's in-place statement that its out-of-place spelling (``out_of_place``) is written from,
    with the name of the document fix that spells it: ("augmented" | "method" | "inplace-flag", values)."""
    text = text.strip()
    if kind == "inplace_flag":
        before, _, after = text.partition("inplace=True")
        return "inplace-flag", {"before": UserCode(before), "after": UserCode(after.replace("inplace=True", "inplace=False"))}
    if kind == "augmented":
        m = _AUG.match(text)
        if m:
            return "augmented", {"variable": UserCode(m.group("target").strip()), "operator": UserCode(m.group("op")), "rhs": UserCode(m.group("rhs").strip())}
    if kind == "method":
        m = _METHOD.match(text)
        if m:
            return "method", {"variable": UserCode(m.group("recv").strip()), "method": m.group("name"), "args": UserCode(m.group("args"))}
    return None


_SITE_FIXES = {"augmented": "site-out-of-place-augmented", "method": "site-out-of-place-method", "inplace-flag": "site-inplace-flag-off"}
_FAILING_LINE_FIXES = {"augmented": "failing-line-out-of-place-augmented", "method": "failing-line-out-of-place-method",
                       "inplace-flag": "failing-line-inplace-flag-off"}


def _inplace_layers(modules: Sequence[ModuleSummary]) -> list[str]:
    out = []
    for m in modules:
        for layer in m.layers:
            if layer.get("inplace") and layer.get("name"):
                out.append(f"{layer['name']} ({layer.get('type', '?')}(inplace=True))")
    return list(dict.fromkeys(out))


def inplace_from_source(source: Mapping[str, Any] | None, modules: Sequence[ModuleSummary], rule: str) -> SourceFinding | None:
    """Name the in-place operations in the user's code and offer their out-of-place forms first."""
    if rule not in _SAVED_TENSOR_OUTCOMES:
        return None  # leaf/view errors name the failing line's own op; weight edits come from optimizer steps
    sites = [s for s in (source or {}).get("inplace", []) if s["kind"] != "item_assign" and not _HARMLESS.search(s["text"])]
    layers = _inplace_layers(modules)
    if not sites and not layers:
        return None
    named = [f"`{s['text']}` ({s['file']}:{s['line']}" + (f" in {s['function']})" if s["function"] != "<module>" else ")") for s in sites[:MAX_NAMED_SITES]]
    named += [f"layer `{x}`" for x in layers[:2]]
    facts = [Fact("source", f"in-place: {n}") for n in named]
    fixes: list[Fix] = []
    # Operations first (they run in forward), then flags set where layers are built.
    for s in sorted(sites, key=lambda s: s["kind"] == "inplace_flag"):
        spelled = out_of_place(s["text"], s["kind"])
        pieces = _out_of_place_values(s["text"], s["kind"]) if spelled else None
        if pieces and len(fixes) < 2:
            form, values = pieces
            fixes.append(remedy(f"{DOC_INPLACE}#{_SITE_FIXES[form]}", statement=s["text"][:60], path=s["file"], lineno=s["line"], line=s["text"], **values))
    sentence = "Your code modifies tensors in place at " + "; ".join(named) + ": one of them changes the tensor backward needs."
    return SourceFinding(facts, tuple(fixes), sentence=sentence)


def statement_kind(line: str) -> str | None:
    """What kind of in-place statement a single source line is ("method", "augmented", "inplace_flag"), if any."""
    import ast

    try:
        tree = ast.parse(line.strip())
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.AugAssign):
            return "augmented"
        if isinstance(node, ast.Call) and any(k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True for k in node.keywords):
            return "inplace_flag"
    stmt = tree.body[0] if len(tree.body) == 1 else None
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr.endswith("_"):
        return "method"
    return None


def failing_line_fix(line: str) -> Fix | None:
    """When the failing line itself is an in-place statement, its out-of-place spelling as the first fix."""
    line = line.strip()
    kind = statement_kind(line) if line and not _HARMLESS.search(line) else None
    spelled = out_of_place(line, kind) if kind else None
    pieces = _out_of_place_values(line, kind) if spelled and spelled != line and kind else None
    if pieces is None:
        return None
    form, values = pieces
    return remedy(f"{DOC_INPLACE}#{_FAILING_LINE_FIXES[form]}", statement=line[:60], line=line, **values)
