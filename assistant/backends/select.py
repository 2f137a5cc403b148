"""Choosing the backend that writes the final answer (the deterministic composer is always the floor)."""

from __future__ import annotations

from assistant.settings import Settings
from assistant.types import Diagnosis, Evidence, Failure, Passage, RuleHit


def resolve_backend_name(settings: Settings) -> str:
    """``auto`` means: a configured OpenAI-compatible API if there is one (and not offline), else ``none``."""
    name = settings.llm
    if name == "auto":
        return "openai" if settings.llm_url and not settings.offline else "none"
    return name


def maybe_llm_compose(
    diagnosis: Diagnosis, failure: Failure, evidence: Evidence, passages: list[Passage], hit: RuleHit | None, settings: Settings,
) -> Diagnosis:
    """Let the selected LLM backend rewrite the diagnosis; any failure keeps the deterministic answer."""
    name = resolve_backend_name(settings)
    if name == "none":
        return diagnosis
    from assistant.compose.llm import llm_compose

    return llm_compose(name, diagnosis, failure, evidence, passages, hit, settings)
