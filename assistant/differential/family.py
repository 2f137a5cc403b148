"""The shape of an error family's differential: :class:`Alternative` (one common cause) and :class:`Family`.

The data lives in :mod:`assistant.differential.families` and :mod:`assistant.differential.families_more`;
both import these classes from here, so neither imports the other's half (no import circle).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping

from assistant.kb.remedies import DocCause, as_fix, find_cause
from assistant.types import Fix


@dataclass(frozen=True)
class Alternative:
    """One common cause of an error family: the wiring here, the words in the document ``ref`` names."""

    id: str
    ref: str  # "doc-id#cause-id": the document's cause entry (its sentence, check and fixes)
    prior: float
    cues: Mapping[str, float] = field(default_factory=dict)
    outcomes: frozenset[str] = frozenset()

    @property
    def available(self) -> bool:
        """Whether the knowledge in use has this cause's entry (a reduced knowledge folder may lack it)."""
        return find_cause(self.ref) is not None

    def _entry(self) -> DocCause:
        found = find_cause(self.ref)
        if found is None:
            raise LookupError(f"{self.id}: no cause {self.ref!r} in the knowledge documents")
        return found

    @property
    def cause(self) -> str:
        """The cause as the document words it."""
        return self._entry().text

    @property
    def check(self) -> str:
        """The one check that confirms or rules out this cause."""
        return self._entry().check

    @property
    def fixes(self) -> tuple[Fix, ...]:
        """The cause's fixes, each citing the document it lives in."""
        # A fix whose document is not in the knowledge in use is left out (tests/test_knowledge.py checks that
        # every reference exists in the shipped documents).
        return tuple(fx for fx in (as_fix(ref) for ref in self._entry().fix_refs) if fx is not None)


@dataclass(frozen=True)
class Family:
    """The alternatives of one category, and the rule outcomes that settle it on their own."""

    alternatives: tuple[Alternative, ...]
    decisive: frozenset[str] = frozenset()
    # The family's plain reading of its message (any OOM gives "memory.cuda_oom"): no evidence for one branch over another.
    plain: frozenset[str] = frozenset()

    def covers(self, outcome: str | None) -> bool:
        """Whether a rule outcome belongs to this family's differential (None: no rule, the category alone)."""
        return outcome is None or outcome in self.decisive or any(outcome in a.outcomes for a in self.alternatives)
