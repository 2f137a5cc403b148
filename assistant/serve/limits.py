"""Pure-ASGI guards around the app: request body size, request deadline, content type.

They sit outside FastAPI's own request handling, so they answer before a body is parsed and
whatever the route does. Every refusal is a JSON body in OpenAI's error shape
(``{"error": {"message", "type", "param", "code"}}``), which OpenAI clients turn into their own
exceptions with the message intact.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import anyio

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# OpenAI's error "type" values for the statuses we send.
ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    405: "invalid_request_error", 413: "invalid_request_error", 415: "invalid_request_error", 422: "invalid_request_error",
    429: "rate_limit_error", 500: "server_error", 503: "server_error", 504: "timeout_error",
}


def error_payload(status: int, message: str, *, code: str | None = None, param: str | None = None, type_: str | None = None) -> dict[str, Any]:
    """The body of an error response, in OpenAI's shape."""
    kind = type_ or ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def dump_json(content: Any) -> bytes:
    """Compact UTF-8 JSON; text that cannot be encoded (lone surrogates from a client) is replaced, never a 500."""
    return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8", errors="replace")


async def send_error(send: Send, status: int, message: str, *, code: str | None = None, param: str | None = None,
                     headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    """Send a whole JSON error response."""
    body = dump_json(error_payload(status, message, code=code, param=param))
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of a request header (latin-1 decoded, as HTTP defines), or None."""
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return value.decode("latin-1")
    return None


class _BodyTooLarge(Exception):
    """Raised from ``receive`` once the body passed the limit."""


class BodyLimitMiddleware:
    """413 for a body over ``max_bytes``: at once from Content-Length, else as soon as the stream passes it.

    The body is never read past the limit. When the app has already turned the aborted read into an
    answer of its own (FastAPI reports any body-read failure as 400), that answer is replaced by the 413.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> str:
        return f"request body too large: the limit is {self.max_bytes / (1 << 20):.1f} MiB"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = header(scope, b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await send_error(send, 400, "invalid Content-Length header", code="invalid_content_length", headers=[(b"connection", b"close")])
                return
            if length > self.max_bytes:
                await send_error(send, 413, self._too_large(), code="request_too_large", headers=[(b"connection", b"close")])
                return
        state = {"received": 0, "over": False, "started": False}

        async def limited_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > self.max_bytes:
                    state["over"] = True
                    raise _BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            if state["over"]:
                if message["type"] == "http.response.start" and not state["started"]:
                    state["started"] = True
                    await send_error(send, 413, self._too_large(), code="request_too_large", headers=[(b"connection", b"close")])
                return  # the app's own answer to the aborted read is dropped
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not state["over"]:
                raise
            if not state["started"]:
                await send_error(send, 413, self._too_large(), code="request_too_large", headers=[(b"connection", b"close")])


class TimeoutMiddleware:
    """504 when no response has started within ``timeout_s``.

    The deadline covers the work before the first byte (all of a diagnosis: streamed answers are
    computed and verified first); once a response has started it is lifted, so a slow reader of a
    stream is not cut off. Work running in a worker thread is abandoned, not killed (threads cannot be).
    """

    def __init__(self, app: ASGIApp, timeout_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False
        with anyio.CancelScope(deadline=anyio.current_time() + self.timeout_s) as cancel_scope:

            async def send_started(message: Message) -> None:
                nonlocal started
                if message["type"] == "http.response.start":
                    started = True
                    cancel_scope.deadline = math.inf
                await send(message)

            await self.app(scope, receive, send_started)
        if cancel_scope.cancelled_caught and not started:
            await send_error(send, 504, f"the request took longer than {self.timeout_s:g} s and was abandoned", code="timeout")


class ContentTypeMiddleware:
    """415 when a POST to a known route does not send the media type it takes (JSON or multipart).

    ``routes`` maps a path to its media type, e.g. ``{"/v1/diagnose": "application/json"}``; a
    type ending in ``/*`` matches any subtype, and ``application/json`` also accepts ``+json``.
    """

    def __init__(self, app: ASGIApp, routes: Mapping[str, str]) -> None:
        self.app = app
        self.routes = dict(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        wanted = self.routes.get(scope.get("path", "")) if scope["type"] == "http" and scope.get("method") == "POST" else None
        if wanted is None:
            await self.app(scope, receive, send)
            return
        given = (header(scope, b"content-type") or "").split(";", 1)[0].strip().lower()
        if _matches(given, wanted):
            await self.app(scope, receive, send)
            return
        shown = given or "none"
        await send_error(send, 415, f"unsupported Content-Type {shown!r}: this endpoint takes {wanted}", code="unsupported_media_type")


def _matches(given: str, wanted: str) -> bool:
    if not given:
        return False
    if given == wanted:
        return True
    if wanted == "application/json":
        return given.startswith("application/") and given.endswith("+json")
    return False
