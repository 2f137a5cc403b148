"""The backend protocol and registry.

A backend turns chat messages into text. It is registered by name (``openai``, ``local``) and
third parties can add their own through the ``torchhelp.backends`` entry-point group: the entry
point names a factory ``(settings) -> Backend``. Backends raise BackendUnavailable (cannot be
used here) or BackendReplyError (used, but no usable reply); callers fall back to the
deterministic answer.
"""

from __future__ import annotations

from typing import Any, Protocol
from collections.abc import Callable, Mapping, Sequence

from assistant.errors import BackendUnavailable

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": str}
TokenSink = Callable[[str], None]


class Backend(Protocol):
    """Anything that can answer a chat."""

    name: str
    remote: bool  # sends text off this machine (redaction and --offline apply)

    def complete(self, messages: Sequence[Message], *, max_tokens: int = 800, on_token: TokenSink | None = None, json_mode: bool = False,
                 schema: Mapping[str, Any] | None = None) -> str:
        """Return the assistant's reply; stream tokens to ``on_token`` when given; ``json_mode``
        asks the server/model to constrain its output to a JSON object where it can; ``schema``, a
        JSON schema, constrains it further where the backend can enforce one (a local grammar)."""
        ...


Factory = Callable[..., Backend]
_REGISTRY: dict[str, Factory] = {}


def register(name: str, factory: Factory) -> None:
    """Make a backend available under ``name``."""
    _REGISTRY[name] = factory


def _builtin() -> None:
    if "openai" not in _REGISTRY:
        from assistant.backends.openai_http import OpenAIBackend
        from assistant.backends.local_llamacpp import LocalBackend

        register("openai", OpenAIBackend.from_settings)
        register("local", LocalBackend.from_settings)


def _entry_points() -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group="torchhelp.backends"):
        if ep.name not in _REGISTRY:
            try:
                register(ep.name, ep.load())
            except Exception:  # noqa: BLE001 - a broken plugin must not break the built-in backends
                continue


def available() -> list[str]:
    """Registered backend names (built-ins and plugins)."""
    _builtin()
    _entry_points()
    return sorted(_REGISTRY)


def get_backend(name: str, settings) -> Backend:  # type: ignore[no-untyped-def]
    """Instantiate a backend by name; refuses remote ones in offline mode."""
    _builtin()
    if name not in _REGISTRY:
        _entry_points()
    factory = _REGISTRY.get(name)
    if factory is None:
        raise BackendUnavailable(f"unknown LLM backend {name!r} (available: {', '.join(available())})")
    backend = factory(settings)
    if getattr(backend, "remote", False) and settings.offline:
        raise BackendUnavailable(f"backend {name!r} sends data off this machine, and offline mode forbids that")
    return backend
