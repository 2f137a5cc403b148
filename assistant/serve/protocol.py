"""uvicorn's h11 protocol with the deadlines it lacks: a connection that never finishes its request is closed.

uvicorn bounds the idle time *between* requests (``timeout_keep_alive``) but not the time a client
takes to send one: a socket that connects and sends nothing, or drips its headers or body a byte at
a time, was held forever (1,100 of them took a 1024-descriptor server offline). Here:

- a request must be read whole (headers and body) within ``read_timeout_s`` of its first byte, or
  of the connection opening; past it the connection is closed (a ``408`` first when part of a
  request line or headers came and nothing was answered yet);
- beyond ``limit_concurrency`` open connections a new one is answered ``503`` and closed at once, so
  descriptors stay bounded however many sockets a client opens;
- headers are capped by h11's ``max_incomplete_event_size`` (uvicorn's ``h11_max_incomplete_event_size``).

The settings are class attributes (uvicorn builds one protocol object per connection from the class);
:func:`configure` sets them from a :class:`~assistant.serve.config.ServeConfig` in each process.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from assistant.serve.config import ServeConfig

log = logging.getLogger("torchhelp.serve")

REFUSE_LINGER_S = 0.5  # a refused connection is closed this long after its 503 (see _refuse_busy)
_READING = (h11.IDLE, h11.SEND_BODY)  # the client's side while a request is (still) being read
_TIMEOUT_408 = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
                b"content-length: %d\r\n\r\n%s")
_BUSY_503 = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
             b"retry-after: 1\r\ncontent-length: %d\r\n\r\n%s")


def _body(message: str, code: str, kind: str) -> bytes:
    """An OpenAI-shaped JSON error body, as bytes."""
    import json

    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()


class DeadlineH11Protocol(H11Protocol):
    """H11Protocol plus a whole-request read deadline and a cap on open connections."""

    read_timeout_s: float = ServeConfig.read_timeout_s

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Count the connection; refuse it at once beyond the limit, else start its read deadline."""
        self._read_timer: asyncio.TimerHandle | None = None
        self._got_bytes = False
        self._refused = False
        super().connection_made(transport)
        if self.limit_concurrency is not None and len(self.connections) > self.limit_concurrency:
            self._refuse_busy()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        """Feed h11; the deadline runs from a request's first byte until the request is read whole."""
        if self._refused:
            return  # answered 503 already: what the client sends is read and dropped (no reset before it reads the 503)
        self._got_bytes = True
        super().data_received(data)
        if self.conn.their_state in _READING:
            self._arm()
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the deadline with the connection."""
        self._disarm()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        """A kept-alive connection idles under uvicorn's keep-alive timeout until its next request's first byte."""
        self._got_bytes = False
        super().on_response_complete()

    # -- the deadline ------------------------------------------------------------------------------

    def _arm(self) -> None:
        """Start the read deadline unless one is running (a drip does not restart it)."""
        if self._read_timer is None and not self.transport.is_closing():
            self._read_timer = self.loop.call_later(self.read_timeout_s, self._read_timed_out)

    def _disarm(self) -> None:
        """Stop the read deadline (the request was read whole, or the connection is gone)."""
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        """Close a connection whose request did not arrive in time (408 when a request had begun)."""
        self._read_timer = None
        if self.transport.is_closing() or self.conn.their_state not in _READING:
            return
        if self.conn.their_state is h11.IDLE and self._got_bytes and self.conn.our_state is h11.IDLE:
            body = _body(f"the request was not received within {self.read_timeout_s:g} s", "request_timeout", "timeout_error")
            self.transport.write(_TIMEOUT_408 % (len(body), body))
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True  # the app waiting on the body sees a disconnect
            self.cycle.message_event.set()
        log.info("closed a connection from %s: no whole request within %g s", _peer(self.client), self.read_timeout_s)
        self.transport.close()

    def _refuse_busy(self) -> None:
        """Answer 503 and close: more connections are open than the server takes.

        The close comes :data:`REFUSE_LINGER_S` later (the request the client sends meanwhile is read
        and dropped): closing with its bytes unread would reset the connection before it reads the 503."""
        self._refused = True
        body = _body(f"the server has {self.limit_concurrency} connections open; try again shortly", "server_busy", "server_error")
        self.transport.write(_BUSY_503 % (len(body), body))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(REFUSE_LINGER_S, self.transport.close)


def _peer(client: Any) -> str:
    """host:port of a client address tuple, or '?'."""
    return f"{client[0]}:{client[1]}" if client else "?"


def configure(config: ServeConfig) -> None:
    """Set the protocol's read deadline from ``config`` (called in every server process)."""
    DeadlineH11Protocol.read_timeout_s = config.read_timeout_s


def uvicorn_limits(config: ServeConfig) -> dict[str, Any]:
    """uvicorn's keyword arguments for the connection limits of ``config``."""
    configure(config)
    return {"http": DeadlineH11Protocol, "timeout_keep_alive": config.keep_alive_s, "limit_concurrency": config.max_connections,
            "h11_max_incomplete_event_size": config.max_header_bytes}
