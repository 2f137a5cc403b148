"""The tokenless server's guard against DNS rebinding and cross-site requests.

Without a token the server listens on loopback only (``config.check_bind``), but a web page the
user visits can still reach it: through DNS rebinding (``evil.example`` resolving to 127.0.0.1, so
the browser sends ``Host: evil.example``) or with a plain cross-origin form POST (a "simple" request
that needs no CORS preflight, e.g. an upload to ``/v1/triage``). So, on a tokenless server:

- the ``Host`` header must name a loopback address (127.0.0.0/8, ::1, localhost) or one of
  ``allowed_hosts``; anything else is refused with 403 before the app sees the request;
- an unsafe request (POST, PUT, PATCH, DELETE) is refused with 403 when the browser says it is
  cross-site (``Sec-Fetch-Site`` other than ``same-origin`` or ``none``; when present it decides,
  since a same-origin form under ``Referrer-Policy: no-referrer`` sends ``Origin: null``), or, from a
  browser without ``Sec-Fetch-Site``, carries an ``Origin`` that is neither this server's own (same
  host and port as ``Host``) nor one of ``--cors-origin``.

Clients that are not browsers (curl, SDKs) send neither header and are unaffected. With a token the
guard is not installed: a page cannot learn the token.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from assistant.serve.config import is_loopback
from assistant.serve.limits import ASGIApp, Receive, Scope, Send, header, send_error

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SAFE_FETCH_SITES = frozenset({"same-origin", "none"})


def split_host(value: str) -> tuple[str, str]:
    """(host, port) of a ``Host`` header value; the port is '' when absent. IPv6 brackets are removed."""
    value = value.strip().lower()
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else ""
    if value.count(":") == 1:
        host, _, port = value.partition(":")
        return host, port
    return value, ""


def host_allowed(value: str | None, allowed: frozenset[str]) -> bool:
    """Whether a ``Host`` header names this machine (or a configured name). No header: allowed (HTTP/1.0 clients)."""
    if value is None:
        return True
    host, _ = split_host(value)
    return bool(host) and (is_loopback(host) or host.rstrip(".") in allowed)


def same_origin(origin: str, host_value: str | None, scheme: str) -> bool:
    """Whether ``origin`` (``scheme://host[:port]``) is the server itself as the request's ``Host`` names it."""
    if not host_value:
        return False
    parts = urlsplit(origin.strip().lower())
    if parts.scheme != scheme or not parts.hostname:
        return False
    default = "443" if scheme == "https" else "80"
    host, port = split_host(host_value)
    try:
        origin_port = str(parts.port) if parts.port is not None else default
    except ValueError:
        return False
    return parts.hostname == host and origin_port == (port or default)


class HostOriginMiddleware:
    """403 for a foreign ``Host`` and for cross-site unsafe requests (install only on a tokenless server)."""

    def __init__(self, app: ASGIApp, allowed_hosts: tuple[str, ...] = (), cors_origins: tuple[str, ...] = ()) -> None:
        self.app = app
        self.allowed = frozenset(h.strip().lower().rstrip(".") for h in allowed_hosts)
        self.origins = frozenset(o.strip().lower().rstrip("/") for o in cors_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        await send_error(send, 403, refusal[1], code=refusal[0], headers=[(b"connection", b"close")])

    def refusal(self, scope: Scope) -> tuple[str, str] | None:
        """(code, message) when the request must be refused, else None."""
        host = header(scope, b"host")
        if not host_allowed(host, self.allowed):
            return ("host_not_allowed", f"Host {host!r} is not this server: a server without a token answers only "
                                        "loopback names (add others with --allowed-host)")
        if scope.get("method") not in UNSAFE_METHODS:
            return None
        site = (header(scope, b"sec-fetch-site") or "").strip().lower()
        origin = header(scope, b"origin")
        if origin is not None and (origin.strip().lower().rstrip("/") in self.origins or "*" in self.origins):
            return None  # an origin the operator allowed with --cors-origin
        if site:  # the browser's own verdict wins: a same-origin form under Referrer-Policy no-referrer sends Origin: null
            if site in SAFE_FETCH_SITES:
                return None
            return ("cross_origin", f"cross-site request refused (Sec-Fetch-Site: {site}): a server without a token "
                                    "takes requests only from its own page or from clients that are not browsers")
        if origin is not None and not same_origin(origin, host, scope.get("scheme", "http")):
            return ("cross_origin", f"cross-origin request from {origin!r} refused: a server without a token takes "
                                    "requests only from its own page (allow an origin with --cors-origin)")
        return None
