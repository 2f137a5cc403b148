"""Bearer-token authentication as a pure-ASGI guard.

With a token configured, every request needs ``Authorization: Bearer <token>`` except the
liveness and readiness probes, the web page at ``/`` and its static assets (the page asks the user
for the token and sends it with each API call). The comparison is constant-time
(``hmac.compare_digest``). Without a token the guard is not installed at all: the CLI allows that
only on loopback.
"""

from __future__ import annotations

import hmac

from assistant.serve.limits import ASGIApp, Receive, Scope, Send, header, send_error

PUBLIC_PATHS = frozenset({"/", "/healthz", "/readyz", "/favicon.ico"})
PUBLIC_PREFIXES = ("/static/",)


def is_public(path: str) -> bool:
    """Paths served without a token."""
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def bearer_token(value: str | None) -> str | None:
    """The credential of an ``Authorization: Bearer <credential>`` header (scheme case-insensitive)."""
    if not value:
        return None
    scheme, _, credential = value.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return credential.strip() or None


def token_matches(given: str | None, expected: str) -> bool:
    """Constant-time comparison of the presented token (a header value, decoded as latin-1) and the configured one.

    Both sides are compared as the bytes that travel: the header's raw bytes and the token's UTF-8.
    """
    if given is None:
        return False
    return hmac.compare_digest(given.encode("latin-1", errors="replace"), expected.encode("utf-8"))


class BearerAuthMiddleware:
    """401 (OpenAI error shape, ``WWW-Authenticate: Bearer``) without the right token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_public(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        given = bearer_token(header(scope, b"authorization"))
        if token_matches(given, self.token):
            await self.app(scope, receive, send)
            return
        message = "missing bearer token: send 'Authorization: Bearer <token>'" if given is None else "invalid bearer token"
        await send_error(send, 401, message, code="invalid_api_key", headers=[(b"www-authenticate", b'Bearer realm="torchhelp"')])
