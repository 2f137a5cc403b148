"""The rule registry: one declaration per rule, with the real error texts that must produce it.

A rule module declares each rule with :func:`rule`::

    @rule("amp.gradscaler", category="amp_error", docs=("gradscaler-misuse",),
          reads=(*TORCH_OP, "ValueError", "AssertionError"), priority=30,
          outcomes=("amp.fp16_params", "amp.unscale_twice"),
          examples=(Example("captured/cpu/amp_fp16_unscale", "amp.fp16_params"),
                    Example("corpus/amp/unscale_twice.txt", "amp.unscale_twice")))
    def gradscaler(ctx: Context) -> RuleHit | None: ...

- ``outcomes`` names every answer the rule can give (one per branch that writes a cause); a
  rule returning an undeclared outcome is a definition error.
- ``examples`` are real error texts, named by where they live (``captured/<device>/<slug>``,
  ``realworld/dev/<id>``, ``corpus/<path>``: see ``assistant.eval.examples``); the registry test
  runs every one through the whole rule set and requires that every declared outcome is produced
  by at least one.
- ``reads`` (required) names the exception families the rule reads (:mod:`assistant.rules.dispatch`:
  ``"RuntimeError"``, ``"KeyError"``, ``"text"`` for a message with no exception type, ...). Matching
  dispatches by family first: a failure is shown only to the rules that read its family. Declare every
  family the rule's messages arrive in (a CUDA OOM comes as ``RuntimeError``/``OutOfMemoryError``, inside
  a compiler's error, or as a bare pasted line: ``TORCH_OP``). ``("any",)`` declares a reader of every
  failure whatever its type (a launcher's summary, a native crash's signal line, a symptom told in
  prose); such rules are tried after the rules of the failure's families.
- ``priority`` orders rules *within a family*: among the rules that read the failure's family, lower
  runs first and the first answer wins. Numbers are compared only between rules that share a family
  (the ``"any"`` rules form a group of their own), so rules of different families may use the same
  number; two rules of different modules that share a family must not (their order would rest on
  module import order). Within a module, declaration order breaks ties. The bands below are local:
  :data:`EARLY` for messages that a more generic reader of the same family would take,
  :data:`NORMAL` for the family's own messages, :data:`FALLBACK` for its generic catch-alls.
  :func:`family_rules` lists a family's rules in order (what a new rule's number is placed among).
- ``wraps=True`` declares a wrapper rule: it runs after the first answer, takes ``(ctx, inner)``
  and may re-frame it (an ordinary error raised inside a DataLoader worker is a Dataset bug).

Every module in this package is imported by :func:`all_rules`, so adding a rule means touching one
rule module (and its knowledge document), nothing else.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from dataclasses import dataclass, field, replace
from collections.abc import Callable, Iterable

from assistant.rules.dispatch import ANY, FAMILY_NAMES
from assistant.types import CATEGORIES, RuleHit

log = logging.getLogger(__name__)

# Local priority bands: numbers are compared only among the rules that read the same family.
EARLY = 10  # 10-19: messages that a more generic reader of the same family would otherwise take
NORMAL = 20  # 20-89: the family's own messages
FALLBACK = 90  # 90-: generic catch-alls, tried when nothing specific in the family answered

# Modules of this package that hold infrastructure, not rules.
_NOT_RULE_MODULES = {"base", "registry", "evidence", "examples", "dispatch"}


class RuleDefinitionError(Exception):
    """A rule broke its own declaration (undeclared outcome, unknown category). A bug, never user input."""


@dataclass(frozen=True)
class Example:
    """A real error text that must produce ``outcome``; ``source`` says where the text lives."""

    source: str
    outcome: str


@dataclass(frozen=True)
class RuleSpec:
    """A registered rule."""

    id: str
    category: str
    docs: tuple[str, ...]
    func: Callable[..., RuleHit | None]
    outcomes: tuple[str, ...]
    examples: tuple[Example, ...]
    priority: int
    sequence: int
    wraps: bool = False
    categories: frozenset[str] = field(default_factory=frozenset)
    reads: tuple[str, ...] = (ANY,)

    @property
    def module(self) -> str:
        return self.func.__module__.rsplit(".", 1)[-1]

    def finish(self, result: RuleHit) -> RuleHit:
        """Check a raw answer against the declaration and complete it (rule id, citations)."""
        if result.rule not in self.outcomes:
            raise RuleDefinitionError(f"rule {self.id} returned undeclared outcome {result.rule!r}")
        if result.category not in self.categories:
            raise RuleDefinitionError(f"rule {self.id} answered category {result.category!r}, not one it declares")
        docs = tuple(dict.fromkeys(result.doc_ids or self.docs))
        # A fix without its own citation cites the rule's first document.
        fixes = tuple(f if f.sources else replace(f, sources=docs[:1]) for f in result.fixes)
        # Every document a fix cites is one of the answer's documents, so retrieval is asked for all of them.
        docs = docs + tuple(dict.fromkeys(s for f in fixes for s in f.sources if s not in docs))
        return replace(result, rule_id=self.id, fixes=fixes, doc_ids=docs)


_REGISTRY: dict[str, RuleSpec] = {}
_sequence = 0


def rule(
    id: str,
    *,
    category: str,
    docs: Iterable[str],
    reads: Iterable[str],
    examples: Iterable[Example] = (),
    outcomes: Iterable[str] | None = None,
    priority: int = NORMAL,
    wraps: bool = False,
    also: Iterable[str] = (),
) -> Callable[[Callable[..., RuleHit | None]], Callable[..., RuleHit | None]]:
    """Register a rule. ``outcomes`` defaults to the rule id itself (a rule with one answer).

    ``also`` lists further categories the rule may answer with (rare: one message family whose
    outcomes belong to different taxonomy ids). ``reads`` names the exception families the rule reads
    (see the module docstring).
    """
    cats = frozenset({category, *also})
    unknown = cats - set(CATEGORIES)
    if unknown:
        raise RuleDefinitionError(f"rule {id}: unknown categories {sorted(unknown)}")
    families = tuple(dict.fromkeys([reads] if isinstance(reads, str) else reads))
    if not families or set(families) - {*FAMILY_NAMES, ANY}:
        raise RuleDefinitionError(f"rule {id}: reads must name families of {FAMILY_NAMES} (or 'any'), not {families}")
    if ANY in families and len(families) > 1:
        raise RuleDefinitionError(f"rule {id}: 'any' already reads every family; it takes no others")

    def register(func: Callable[..., RuleHit | None]) -> Callable[..., RuleHit | None]:
        global _sequence
        if id in _REGISTRY and _REGISTRY[id].func.__qualname__ != func.__qualname__:
            raise RuleDefinitionError(f"rule id {id} is declared twice")
        _sequence += 1
        outs = tuple(outcomes) if outcomes is not None else (id,)
        exs = tuple(examples)
        stray = [e.outcome for e in exs if e.outcome not in outs]
        if stray:
            raise RuleDefinitionError(f"rule {id}: examples name undeclared outcomes {stray}")
        _REGISTRY[id] = RuleSpec(id, category, tuple(docs), func, outs, exs, priority, _sequence, wraps, cats, families)
        return func

    return register


@dataclass(frozen=True)
class _Orders:
    every: tuple[RuleSpec, ...]  # answering rules by (family-free) listing order, then wrappers
    answering: tuple[RuleSpec, ...]
    wrapping: tuple[RuleSpec, ...]
    by_family: dict[str, tuple[RuleSpec, ...]]  # family (or "any") -> its answering rules, in local order


_ordered: dict[int, _Orders] = {}


def _local(spec: RuleSpec) -> tuple[int, int]:
    return spec.priority, spec.sequence


def _orders() -> _Orders:
    """The rules grouped and ordered; recomputed only when a rule was registered or removed."""
    _import_rule_modules()
    key = hash(tuple(_REGISTRY))
    if key not in _ordered:
        specs = sorted(_REGISTRY.values(), key=lambda s: s.sequence)
        answering = tuple(s for s in specs if not s.wraps)
        wrapping = tuple(sorted((s for s in specs if s.wraps), key=_local))
        by_family = {fam: tuple(sorted((s for s in answering if fam in s.reads), key=_local)) for fam in (*FAMILY_NAMES, ANY)}
        _ordered.clear()
        _ordered[key] = _Orders(answering + wrapping, answering, wrapping, by_family)
    return _ordered[key]


def all_rules() -> tuple[RuleSpec, ...]:
    """Every registered rule (importing every rule module once): answering rules in declaration order, then wrappers.

    There is no global order: a failure's rules are those of its family (:func:`family_rules`).
    """
    return _orders().every


def answer_rules() -> tuple[RuleSpec, ...]:
    """The rules that answer a failure (in declaration order: which of them run, and when, depends on the family)."""
    return _orders().answering


def family_rules(family: str) -> tuple[RuleSpec, ...]:
    """The answering rules that read ``family`` (a family of :mod:`assistant.rules.dispatch`, or ``"any"``), in local priority order."""
    return _orders().by_family.get(family, ())


def wrapper_rules() -> tuple[RuleSpec, ...]:
    """The rules that may re-frame an answer, in order."""
    return _orders().wrapping


def ambiguous_priorities() -> list[tuple[str, RuleSpec, RuleSpec]]:
    """(family, a, b) for rules of different modules that read one family with the same priority: their order would be import order."""
    out = []
    for fam, specs in _orders().by_family.items():
        for a, b in zip(specs, specs[1:], strict=False):
            if a.priority == b.priority and a.module != b.module:
                out.append((fam, a, b))
    return out


def get(rule_id: str) -> RuleSpec:
    """The rule registered under ``rule_id``."""
    _import_rule_modules()
    return _REGISTRY[rule_id]


_imported = False


def _import_rule_modules() -> None:
    global _imported
    if _imported:
        return
    import assistant.rules as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name not in _NOT_RULE_MODULES and not info.name.startswith("_"):
            importlib.import_module(f"{package.__name__}.{info.name}")
    _imported = True
