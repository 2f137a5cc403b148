"""Options shared by several commands, so that one name means one thing everywhere."""

from __future__ import annotations

from typing import Any

import typer

LLM_HELP = "Answer writer: none | local | openai (default: a configured API, else none; TORCHHELP_LLM)."


def llm_option(help_text: str = LLM_HELP) -> Any:
    """``--llm``: which backend writes the answer (verified before it is shown), as in ``ask``."""
    return typer.Option(None, "--llm", help=help_text)
