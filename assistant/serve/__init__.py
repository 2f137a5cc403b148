"""`torchhelp serve`: the engine behind an OpenAI-compatible HTTP API (extra ``torchhelp[serve]``).

    from assistant.serve import ServeConfig, create_app
    app = create_app(ServeConfig(token="..."))      # a FastAPI app; run it with any ASGI server

Modules: ``config`` (ServeConfig, bind and token checks; no FastAPI import), ``app`` (create_app,
routes, upload extraction), ``openai_chat`` (request/response models, the chat logic), ``auth``,
``limits`` (body size, deadline, content type), ``metrics``, ``cli`` (`torchhelp serve`).
"""

from __future__ import annotations

from typing import Any

from assistant.serve.config import ServeConfig

__all__ = ["ServeConfig", "create_app"]


def create_app(config: ServeConfig | None = None, **kwargs: Any) -> Any:
    """The FastAPI application (imported on first use: FastAPI is an optional dependency)."""
    from assistant.serve.app import create_app as _create_app

    return _create_app(config, **kwargs)
