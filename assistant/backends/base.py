"""The backend registry (the protocol itself is in ``assistant.backends.protocol``).

A backend turns chat messages into text. It is registered by name (``openai``, ``local``) and
third parties can add their own through the ``torchhelp.backends`` entry-point group: the entry
point names a factory ``(settings) -> Backend``. Backends raise BackendUnavailable (cannot be
used here) or BackendReplyError (used, but no usable reply); callers fall back to the
deterministic answer.
"""

from __future__ import annotations

from collections.abc import Callable

from assistant.backends.protocol import Backend, Message, TokenSink
from assistant.errors import BackendUnavailable

__all__ = ["Backend", "Factory", "Message", "TokenSink", "available", "get_backend", "register"]

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
