"""The backend protocol: what a backend is, apart from the registry that finds one by name.

Implementations import this module, and the registry (``assistant.backends.base``) imports the
implementations; keeping the shapes here keeps that one-way (no import circle).
"""

from __future__ import annotations

from typing import Any, Protocol
from collections.abc import Callable, Mapping, Sequence

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": str}
TokenSink = Callable[[str], None]


class Backend(Protocol):
    """Anything that can answer a chat."""

    name: str
    remote: bool  # sends text off this machine (redaction and --offline apply)

    def complete(self, messages: Sequence[Message], *, max_tokens: int = 800, on_token: TokenSink | None = None, json_mode: bool = False,
                 schema: Mapping[str, Any] | None = None) -> str:
        """Return the assistant's reply; stream tokens to ``on_token`` when given (a private buffer: callers
        show only verified text); ``json_mode`` asks the server/model to constrain its output to a JSON
        object where it can; ``schema``, a JSON schema, constrains it further where the backend can
        enforce one (a local grammar)."""
        ...
