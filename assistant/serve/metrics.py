"""Prometheus metrics, one registry per app (two apps in one process never share counters).

    torchhelp_http_requests_total{route,method,status}     every response
    torchhelp_http_request_duration_seconds{route}          latency histogram (until the response is complete)
    torchhelp_http_errors_total{route,status}               responses with status >= 400 (and unhandled exceptions, as 500)
    torchhelp_http_requests_in_flight                       requests being answered now
    torchhelp_llm_fallbacks_total{backend,endpoint}         an LLM answer was rejected or the backend failed, and the
                                                            deterministic answer was served instead
    torchhelp_diagnoses_total{category}                     diagnoses served, by category

``route`` is the route's template (``/v1/chat/completions``), never the raw path, so unknown URLs
cannot blow up the label set; requests that match no route count as ``unmatched``. With
``--workers N`` each worker process has its own registry: ``/metrics`` shows the worker that answered.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from assistant.serve.limits import ASGIApp, Message, Receive, Scope, Send

LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    """The app's collectors and their registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("torchhelp_http_requests", "HTTP responses by route, method and status.", ["route", "method", "status"], registry=r)
        self.latency = Histogram("torchhelp_http_request_duration_seconds", "Time to answer a request, by route.", ["route"], buckets=LATENCY_BUCKETS, registry=r)
        self.errors = Counter("torchhelp_http_errors", "Responses with status >= 400, by route and status.", ["route", "status"], registry=r)
        self.in_flight = Gauge("torchhelp_http_requests_in_flight", "Requests being answered now.", registry=r)
        self.fallbacks = Counter("torchhelp_llm_fallbacks", "LLM answers rejected or failed, replaced by the deterministic answer.", ["backend", "endpoint"], registry=r)
        self.diagnoses = Counter("torchhelp_diagnoses", "Diagnoses served, by category.", ["category"], registry=r)

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).inc()
        self.latency.labels(route).observe(seconds)
        if status >= 400:
            self.errors.labels(route, str(status)).inc()


def route_label(app: Any, scope: Scope) -> str:
    """The template of the route that answered (or would have: 401s and 413s are sent before routing)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if path:
        return str(path)
    from starlette.routing import Match

    for candidate in getattr(getattr(app, "router", None), "routes", ()):
        try:
            found, _ = candidate.matches(scope)
        except Exception:  # noqa: BLE001 - a label must never break a request
            continue
        if found != Match.NONE:
            return str(getattr(candidate, "path", "unmatched") or "unmatched")
    return "unmatched"


class MetricsMiddleware:
    """Counts every HTTP response, whoever sent it (the guards inside it included)."""

    def __init__(self, app: ASGIApp, metrics: Metrics, router_app: Any) -> None:
        self.app = app
        self.metrics = metrics
        self.router_app = router_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_status)
        finally:
            self.metrics.in_flight.dec()
            self.metrics.observe(route_label(self.router_app, scope), scope.get("method", "?"), status, time.perf_counter() - start)
