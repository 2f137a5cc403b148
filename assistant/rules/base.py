"""What every rule shares: the context it reads and small helpers to build a RuleHit.

A rule is a plain function ``(ctx) -> RuleHit | None``. It either declines (None) or answers with
a cause written in terms of the values it read. Rules never raise: the registry guards them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from collections.abc import Iterable

from assistant.types import Evidence, Fact, Facts, Failure, Fix, Frame, RuleHit

# Library files whose ``forward`` identifies the kind of layer that failed.
_LAYER_FILES = {
    "linear.py": "Linear", "conv.py": "Conv", "sparse.py": "Embedding", "batchnorm.py": "BatchNorm",
    "normalization.py": "LayerNorm", "rnn.py": "RNN/LSTM/GRU", "activation.py": "MultiheadAttention",
    "loss.py": "loss", "pooling.py": "pooling", "transformer.py": "Transformer",
}
class LazyPattern:
    """A regular expression compiled on first use.

    Rule modules declare hundreds of patterns and one diagnosis needs a handful; compiling them all
    at import cost more than the rest of `torchhelp ask`'s start-up (measured in benchmarks/ask.json).
    """

    __slots__ = ("pattern", "flags", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (compiled once)."""
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return self._compiled

    def search(self, text: str, *args: int) -> re.Match[str] | None:
        return self.compiled().search(text, *args)

    def match(self, text: str, *args: int) -> re.Match[str] | None:
        return self.compiled().match(text, *args)

    def fullmatch(self, text: str, *args: int) -> re.Match[str] | None:
        return self.compiled().fullmatch(text, *args)

    def finditer(self, text: str, *args: int):
        return self.compiled().finditer(text, *args)

    def findall(self, text: str, *args: int) -> list:
        return self.compiled().findall(text, *args)

    def sub(self, repl, text: str, count: int = 0) -> str:
        return self.compiled().sub(repl, text, count)

    def split(self, text: str, maxsplit: int = 0) -> list:
        return self.compiled().split(text, maxsplit)


def lazy_re(pattern: str, flags: int = 0) -> LazyPattern:
    """Declare a module-level pattern without compiling it at import."""
    return LazyPattern(pattern, flags)


_CALL_ATTR = re.compile(r"self\.([A-Za-z_]\w*(?:\[\d+\])?(?:\.[A-Za-z_]\w*)*)\s*\(")
_CALL_NAME = re.compile(r"(?:^|[=\s(])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*\(")


@lru_cache(maxsize=8192)
def _compiled_pattern(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A rule's pattern, compiled once per process. The rules use more distinct patterns than the ``re`` module's
    own cache holds (512), so without this every diagnosis recompiled most of them."""
    return re.compile(pattern, flags)


@dataclass
class Context:
    """The failure (and live evidence, if any) as rules see it."""

    failure: Failure
    evidence: Evidence = field(default_factory=Evidence)

    @cached_property
    def text(self) -> str:
        return self.failure.search_text

    @property
    def message(self) -> str:
        return self.failure.message

    @property
    def exc_type(self) -> str:
        return (self.failure.exc_type or "").split(".")[-1]

    def search(self, pattern: str, flags: int = 0) -> re.Match[str] | None:
        """Search the combined failure text (all messages, asserts, NCCL and signal lines)."""
        return _compiled_pattern(pattern, flags).search(self.text)

    @cached_property
    def user_frame(self) -> Frame | None:
        """The innermost frame in the user's own code."""
        frames = self.failure.user_frames
        return frames[-1] if frames else None

    @cached_property
    def library_frame(self) -> Frame | None:
        """The innermost frame overall (usually inside torch)."""
        return self.failure.frames[-1] if self.failure.frames else None

    @cached_property
    def layer(self) -> tuple[str | None, str | None]:
        """(attribute name, layer kind) of the module call that failed, read from the frames.

        ``x = self.fc(x)`` in the user's ``forward`` followed by ``torch/nn/modules/linear.py``
        gives ("fc", "Linear"). Either part may be unknown.
        """
        frames = self.failure.frames
        kind: str | None = None
        for fr in reversed(frames):
            base = fr.file.replace("\\", "/").rsplit("/", 1)[-1]
            if "/torch/nn/modules/" in fr.file.replace("\\", "/") and base in _LAYER_FILES and fr.function in {"forward", "_conv_forward"}:
                kind = _LAYER_FILES[base]
                break
        for fr in reversed(frames):
            if fr.is_user and fr.source:
                m = _CALL_ATTR.search(fr.source)
                if m:
                    return m.group(1), kind
        return None, kind

    def where(self) -> str:
        """Human phrase for the user's failing line, e.g. ``train.py:42 (`loss = crit(out, y)`)``."""
        fr = self.user_frame
        if fr is None:
            return ""
        name = fr.file.replace("\\", "/").rsplit("/", 1)[-1]
        loc = f"{name}:{fr.line}" if fr.line else name
        return f"{loc} (`{fr.source}`)" if fr.source else loc


class UnknownRemedy(LookupError):
    """A rule named a document fix that does not exist: a bug in the rule or the document, never user input."""


def remedy(ref: str, **values: object) -> Fix:
    """The document fix ``doc-id#fix-id`` filled with the values this rule read (names the fix's ``{{placeholders}}`` use).

    The words live in the knowledge document; the rule only chooses the fix and supplies the user's values.
    A value of None leaves the placeholder's default in place.
    """
    from assistant.kb.remedies import as_fix

    found = as_fix(ref, values)
    if found is None:
        raise UnknownRemedy(f"no fix {ref!r} in the knowledge documents")
    return found


def facts(*pairs: tuple[str, str] | None) -> tuple[Fact, ...]:
    """Facts from (kind, text) pairs, skipping None."""
    return tuple(Fact(kind, text) for pair in pairs if pair for kind, text in [pair])


def hit(
    rule: str,
    category: str,
    title: str,
    cause: str,
    fixes: Iterable[Fix],
    doc_ids: Iterable[str] = (),
    found: Iterable[Fact] = (),
    confidence: float = 0.9,
    query_hint: str = "",
    *,
    facts: Facts | None = None,
    conjecture: str = "",
) -> RuleHit:
    """Build a rule's answer. ``rule`` is the outcome id (declared in the rule's ``@rule``).

    ``doc_ids`` default to the rule's declared documents; the registry completes citations.
    ``found`` is the evidence shown to the user, ``facts`` the same values typed.
    """
    return RuleHit(rule, category, title, cause, tuple(fixes), tuple(found), tuple(doc_ids), confidence, query_hint,
                   facts if facts is not None else Facts(), conjecture)


def error_fact(ctx: Context) -> Fact:
    """The error line itself, always the first piece of evidence."""
    return Fact("error", ctx.failure.headline[:400])


def location_fact(ctx: Context) -> Fact | None:
    w = ctx.where()
    return Fact("location", f"failing line in your code: {w}") if w else None


def with_location(ctx: Context, found: Iterable[Fact], *extra: Fact) -> list[Fact]:
    """The given facts, then ``extra``, then the user's failing line (when known)."""
    loc = location_fact(ctx)
    return [*found, *extra] + ([loc] if loc else [])


def basic_facts(ctx: Context, *extra: Fact) -> list[Fact]:
    """The error line, ``extra`` facts, and the user's failing line."""
    return with_location(ctx, [error_fact(ctx)], *extra)
