"""diagnose(): the public entry point, a thin call into the shared :class:`~assistant.engine.Engine`."""

from __future__ import annotations

from typing import Any
from collections.abc import Sequence

from assistant.engine import default_engine
from assistant.settings import Settings
from assistant.types import Diagnosis, Evidence


def diagnose(
    text: str | bytes,
    *,
    evidence: Evidence | None = None,
    settings: Settings | None = None,
    notes: Sequence[str] = (),
    llm: str | None = None,
    **overrides: Any,
) -> Diagnosis:
    """Diagnose a PyTorch failure from its text (a traceback, a log, or a bare error line).

    ``evidence`` carries live probe facts (from ``torchhelp run``); ``llm`` picks a backend
    (``none``, ``local``, ``openai``…; default from settings); other keyword overrides are
    settings fields (e.g. ``dense=False``, ``top_k=3``). An LLM's answer is returned only once verified:
    nothing of it is streamed.
    Raises ``InputError`` for empty input.
    """
    engine = default_engine(settings).with_settings(**overrides, llm=llm)
    return engine.diagnose(text, evidence=evidence, notes=notes)
