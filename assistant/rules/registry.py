"""The rule registry: one declaration per rule, with the real error texts that must produce it.

A rule module declares each rule with :func:`rule`::

    @rule("amp.gradscaler", category="amp_error", docs=("gradscaler-misuse",),
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
- ``priority`` orders rules: lower runs first, and the first answer wins. Declaration order breaks
  ties within a module.
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

from assistant.types import CATEGORIES, Fix, RuleHit

log = logging.getLogger(__name__)

EARLY = 100  # messages that would otherwise be mistaken for a more generic family
NORMAL = 500
FALLBACK = 900  # generic catch-alls, tried when nothing specific answered

# Modules of this package that hold infrastructure, not rules.
_NOT_RULE_MODULES = {"base", "registry", "evidence", "examples"}


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
        fixes = tuple(f if f.sources else Fix(f.title, f.detail, f.code, docs[:1]) for f in result.fixes)
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
    examples: Iterable[Example] = (),
    outcomes: Iterable[str] | None = None,
    priority: int = NORMAL,
    wraps: bool = False,
    also: Iterable[str] = (),
) -> Callable[[Callable[..., RuleHit | None]], Callable[..., RuleHit | None]]:
    """Register a rule. ``outcomes`` defaults to the rule id itself (a rule with one answer).

    ``also`` lists further categories the rule may answer with (rare: one message family whose
    outcomes belong to different taxonomy ids).
    """
    cats = frozenset({category, *also})
    unknown = cats - set(CATEGORIES)
    if unknown:
        raise RuleDefinitionError(f"rule {id}: unknown categories {sorted(unknown)}")

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
        _REGISTRY[id] = RuleSpec(id, category, tuple(docs), func, outs, exs, priority, _sequence, wraps, cats)
        return func

    return register


_ordered: dict[int, tuple[tuple[RuleSpec, ...], tuple[RuleSpec, ...], tuple[RuleSpec, ...]]] = {}


def _orders() -> tuple[tuple[RuleSpec, ...], tuple[RuleSpec, ...], tuple[RuleSpec, ...]]:
    """(all, answering, wrapping) rules in order; recomputed only when a rule was registered or removed."""
    _import_rule_modules()
    key = hash(tuple(_REGISTRY))
    if key not in _ordered:
        ordered = tuple(sorted(_REGISTRY.values(), key=lambda s: (s.priority, s.sequence)))
        _ordered.clear()
        _ordered[key] = (ordered, tuple(s for s in ordered if not s.wraps), tuple(s for s in ordered if s.wraps))
    return _ordered[key]


def all_rules() -> tuple[RuleSpec, ...]:
    """Every registered rule (importing every rule module once), in the order they are tried."""
    return _orders()[0]


def answer_rules() -> tuple[RuleSpec, ...]:
    """The rules that answer a failure, in order."""
    return _orders()[1]


def wrapper_rules() -> tuple[RuleSpec, ...]:
    """The rules that may re-frame an answer, in order."""
    return _orders()[2]


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
