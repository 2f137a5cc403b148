"""The experiments an investigation can run, read from ``experiments.toml`` (data, not code), and which apply.

An experiment is one change to a re-run: environment variables, or switches the crash hook turns on
inside the program (see :mod:`assistant.investigate.switches`). Each says which hypotheses each
outcome verifies or rules out; an experiment is worth running for a diagnosis in proportion to the
likelihood it can move.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from assistant.errors import InputError
from assistant.types import Diagnosis

CATALOGUE = Path(__file__).with_name("experiments.toml")
OUTCOMES = ("passed", "same", "other")


@dataclass(frozen=True)
class ExperimentSpec:
    """One experiment: its change, what it asks, and what each outcome means for the hypotheses."""

    id: str
    title: str
    change: str
    question: str
    categories: tuple[str, ...] = ()
    hypotheses: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    switches: tuple[str, ...] = ()
    cuda: bool = False
    when: str = ""  # a regular expression the failure's text must match (case-insensitive); "" for any
    unless: tuple[str, ...] = ()  # conclusions (Facts.flags) the rule already read that make this experiment pointless
    reader: str = ""
    verifies: dict[str, tuple[str, ...]] = field(default_factory=dict)  # outcome -> hypothesis ids or prefixes
    rules_out: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def moves(self, outcome: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(verified, ruled out) hypothesis ids or prefixes for an outcome ("passed", "same", "other")."""
        return self.verifies.get(outcome, ()), self.rules_out.get(outcome, ())

    def named(self) -> tuple[str, ...]:
        """Every hypothesis id or prefix this experiment can move."""
        ids = [*self.hypotheses]
        for table in (self.verifies, self.rules_out):
            for values in table.values():
                ids.extend(values)
        return tuple(dict.fromkeys(ids))


def matches(hypothesis_id: str, patterns: tuple[str, ...]) -> bool:
    """Whether a hypothesis id is named by one of ``patterns`` (an exact id, or a prefix ending in ".")."""
    return any(hypothesis_id == p or (p.endswith(".") and hypothesis_id.startswith(p)) for p in patterns)


def _spec(raw: dict) -> ExperimentSpec:
    try:
        return ExperimentSpec(
            id=raw["id"], title=raw["title"], change=raw["change"], question=raw["question"],
            categories=tuple(raw.get("categories", ())), hypotheses=tuple(raw.get("hypotheses", ())),
            env=tuple(sorted((str(k), str(v)) for k, v in raw.get("env", {}).items())), switches=tuple(raw.get("switches", ())),
            cuda=bool(raw.get("cuda", False)), when=raw.get("when", ""), unless=tuple(raw.get("unless", ())), reader=raw.get("reader", ""),
            verifies={o: tuple(raw.get(f"{o}_verifies", ())) for o in OUTCOMES},
            rules_out={o: tuple(raw.get(f"{o}_rules_out", ())) for o in OUTCOMES},
        )
    except KeyError as missing:
        raise InputError(f"{CATALOGUE.name}: an experiment lacks {missing}") from None


@lru_cache(maxsize=1)
def catalogue() -> tuple[ExperimentSpec, ...]:
    """Every experiment, in the file's order."""
    with CATALOGUE.open("rb") as fh:
        return tuple(_spec(raw) for raw in tomllib.load(fh).get("experiment", []))


def by_id(experiment_id: str) -> ExperimentSpec:
    """One experiment by id; an unknown id is a one-line input error naming the known ones."""
    for spec in catalogue():
        if spec.id == experiment_id:
            return spec
    raise InputError(f"unknown experiment {experiment_id!r}; known: {', '.join(s.id for s in catalogue())}")


def _value(spec: ExperimentSpec, d: Diagnosis) -> tuple[float, float]:
    """How much likelihood the experiment can move: the hypotheses it names, or the whole answer when it names
    the category; then, to order experiments of equal worth, the likelihood of the hypotheses it names itself
    (the one that can verify a present cause goes before one that can only locate the failure)."""
    named = spec.named()
    moved = sum(h.likelihood for h in d.hypotheses if matches(h.id, named))
    value = moved
    if d.category in spec.categories:
        # It reads the failure itself (the real op, the parameter names, the first NaN): worth the lead's share at least.
        value = max(moved, d.hypotheses[0].likelihood if d.hypotheses else d.confidence)
    return value, moved


def applicable(d: Diagnosis, used_cuda: bool, only: tuple[str, ...] = (), text: str = "") -> list[ExperimentSpec]:
    """The experiments for this diagnosis, the one that can move the most likelihood first.

    ``only`` restricts them to the named ids (in that order), and runs them even where they would not
    be chosen; CUDA experiments are left out when the failing run did not use CUDA, an experiment
    with a ``when`` pattern when the failure's ``text`` does not match it, and one whose question the
    rule already answered from the message's own numbers (``unless``).
    """
    import re

    if only:
        return [by_id(i) for i in only]
    chosen = []
    for spec in catalogue():
        if (spec.cuda and not used_cuda) or (spec.when and not re.search(spec.when, text, re.I)) or set(spec.unless) & d.facts.flags:
            continue
        in_scope = d.category in spec.categories or any(matches(h.id, spec.hypotheses) for h in d.hypotheses[:3])
        if in_scope:
            chosen.append((_value(spec, d), spec))
    chosen.sort(key=lambda vs: (-vs[0][0], -vs[0][1]))
    return [spec for value, spec in chosen if value[0] > 0]
