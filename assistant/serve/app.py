"""`create_app(config)`: the FastAPI application behind `torchhelp serve`.

    GET  /                      the web page (static/index.html; no token needed, it asks for one)
    GET  /static/...            its assets
    GET  /healthz               liveness: always 200 {"status": "ok"}
    GET  /readyz                200 once the engine and its index are loaded, 503 before
    GET  /metrics               Prometheus text (this app's own registry)
    GET  /v1/models             OpenAI's model list: torchhelp, torchhelp:none|local|openai
    POST /v1/chat/completions   OpenAI-compatible chat (stream or not); the diagnosis rides in "torchhelp"
    POST /v1/diagnose           {"text", "evidence"?, "llm"?} -> exactly Diagnosis.to_dict() (= `ask --json`)
    POST /v1/triage             multipart "file": a log, or a tar/tar.gz/tgz/zip of job folders -> triage JSON
    GET  /triage/{n}            with --triage-root: that folder's triage HTML report, a Resolve button per group
    POST /triage/{n}/resolve    the button's form: writes the group's team runbook (see serve/triage_pages.py)

The engine (knowledge index, encoder, backend settings) is loaded once, in the lifespan, and
shared; engine work runs in worker threads behind a capacity limiter, never on the event loop.
Requests that arrive while it loads wait for it (within the request deadline). The server is an
edge of the exception tree: TorchhelpError and everything else become JSON errors in OpenAI's
shape, never a traceback. Guards (outermost first): metrics, CORS (only with --cors-origin), bearer
auth (only with a token), Host and Origin checks (only without a token: serve/origin.py), body
limit, request deadline, content type. Connection deadlines and limits live in serve/protocol.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
from fastapi import FastAPI, File, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request

from assistant.render.outgoing import shown
from assistant.errors import ConfigError, InputError, KnowledgeError, TorchhelpError, TriageError
from assistant.serve.config import ServeConfig
from assistant.serve.limits import BodyLimitMiddleware, ContentTypeMiddleware, TimeoutMiddleware, dump_json, error_payload
from assistant.serve.metrics import Metrics, MetricsMiddleware
from assistant.serve.uploads import ArchiveError, triage_upload
from assistant.serve.openai_chat import (
    ChatCompletion, ChatRequest, ChatTooLarge, DiagnoseRequest, ErrorResponse, ModelList, ModelNotFound, answer_chat,
    backend_for_model, cached_diagnosis, check_chat_size, completion_body, diagnose_text, llm_fell_back, models_list, stream_chunks,
)

log = logging.getLogger("torchhelp.serve")
STATIC_DIR = Path(__file__).resolve().parent / "static"
CACHE_ON_LOOP_CHARS = 64 * 1024  # longer texts are windowed and hashed in a worker thread, off the event loop
T = TypeVar("T")


class JSON(JSONResponse):
    """JSON responses that cannot fail to encode (see :func:`~assistant.serve.limits.dump_json`)."""

    def render(self, content: Any) -> bytes:
        return dump_json(content)


def error_response(status: int, message: str, *, code: str | None = None, param: str | None = None, headers: dict[str, str] | None = None) -> JSON:
    return JSON(error_payload(status, message, code=code, param=param), status_code=status, headers=headers)


class NotReady(TorchhelpError):
    """The engine failed to load at start-up."""


class ServerState:
    """What the app shares between requests: the loaded engine, the thread limiter, the metrics."""

    def __init__(self, config: ServeConfig, settings: Any) -> None:
        self.config = config
        self.settings = settings
        self.engine: Any = None
        self.load_error: str | None = None
        self.load_notes: list[str] = []
        self.load_seconds: float | None = None
        self.ready: anyio.Event | None = None
        self.limiter = anyio.CapacityLimiter(config.max_concurrency)
        self.metrics = Metrics()
        self.created = int(time.time())
        # llama.cpp models are not safe to call from two threads at once: local-backend work is serialised.
        self.local_lock = threading.Lock()

    # -- start-up ---------------------------------------------------------------------------------

    def _load_sync(self) -> Any:
        from assistant.engine import default_engine

        started = time.perf_counter()
        engine = default_engine(self.settings)
        try:
            retriever = engine.retriever()
        except KnowledgeError as exc:
            if not engine.settings.dense:
                raise
            self.load_notes.append(f"dense retrieval unavailable ({exc}); lexical retrieval only")
            retriever = engine.retriever(dense=False)
        if retriever.dense_available:
            retriever.search("warm up the query encoder", k=1, use_dense=True)  # loads the encoder now, not on a request
        engine.match(engine.parse("RuntimeError: warm up the rules"))  # imports and registers every rule module
        # Everything loaded so far lives as long as the server: move it out of the collector's reach, so
        # a full collection walks only per-request garbage (it walked the whole index and rule set before,
        # a tail-latency spike of tens of milliseconds every few hundred requests).
        import gc

        gc.collect()
        gc.freeze()
        self.load_seconds = round(time.perf_counter() - started, 3)
        return engine

    async def load(self) -> None:
        assert self.ready is not None
        try:
            self.engine = await anyio.to_thread.run_sync(self._load_sync, abandon_on_cancel=True)
            log.info("torchhelp serve: engine ready in %.2f s", self.load_seconds or 0.0)
        except Exception as exc:  # noqa: BLE001 - reported by /readyz and every request, not a crash
            self.load_error = f"{type(exc).__name__}: {exc}"
            log.error("torchhelp serve: the engine failed to load: %s", self.load_error)
        finally:
            self.ready.set()

    # -- per request --------------------------------------------------------------------------------

    async def engine_for(self, backend: str | None) -> Any:
        """The shared engine (waiting for it while it loads), with another backend when one is asked for."""
        if self.ready is None:
            raise NotReady("the server is not started")
        await self.ready.wait()
        if self.engine is None:
            raise NotReady(f"the engine failed to load: {self.load_error}")
        return self.engine.with_settings(llm=backend) if backend else self.engine

    async def call(self, engine: Any, fn: Callable[..., T], *args: Any) -> T:
        """Run CPU-bound engine work in a worker thread (bounded; abandoned, not awaited, on timeout)."""
        from assistant.backends.select import resolve_backend_name

        def work() -> T:
            if resolve_backend_name(engine.settings) == "local":
                with self.local_lock:
                    return fn(*args)
            return fn(*args)

        return await anyio.to_thread.run_sync(work, limiter=self.limiter, abandon_on_cancel=True)

    def count(self, engine: Any, diagnosis: Any, endpoint: str, fallback: bool | None = None) -> None:
        """Diagnosis and LLM-fallback metrics for one answer."""
        if diagnosis is None:
            return
        self.metrics.diagnoses.labels(diagnosis.category).inc()
        from assistant.backends.select import resolve_backend_name

        if fallback if fallback is not None else llm_fell_back(engine, diagnosis):
            self.metrics.fallbacks.labels(resolve_backend_name(engine.settings), endpoint).inc()


# -- /v1/triage: the upload path lives in assistant/serve/uploads.py ---------------------------------------

_ARCHIVE_CODES = {400: "invalid_input", 413: "archive_too_large", 422: "nested_compression"}


# -- the application --------------------------------------------------------------------------------

_ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorResponse} for code in (400, 401, 413, 415, 503, 504)}
JSON_ROUTES = {"/v1/chat/completions": "application/json", "/v1/diagnose": "application/json", "/v1/triage": "multipart/form-data"}


def create_app(config: ServeConfig | None = None, *, settings: Any = None) -> FastAPI:
    """The application for ``config``; ``settings`` (default: loaded from the environment, with
    ``config.llm``) are the engine's, including the LLM backend URL: never a client's."""
    from assistant.settings import load_settings

    from assistant.serve.openai_chat import DIAGNOSES

    config = config or ServeConfig()
    settings = settings if settings is not None else load_settings(llm=config.llm)
    state = ServerState(config, settings)
    DIAGNOSES.resize(config.cache_entries)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.ready = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(state.load)
            yield
            tg.cancel_scope.cancel()  # shutting down while still loading: stop waiting for it

    app = FastAPI(
        title="torchhelp", version=_version(), lifespan=lifespan, default_response_class=JSON,
        docs_url="/docs" if config.docs else None, redoc_url="/redoc" if config.docs else None,  # CDN pages: off offline
        description="Diagnose PyTorch failures: an OpenAI-compatible chat endpoint and a structured `/v1/diagnose`. "
                    "Send `Authorization: Bearer <token>` when the server has a token.",
    )
    app.state.torchhelp = state
    _install_error_handlers(app)
    _install_routes(app, state)
    from assistant.serve.triage_pages import install_triage_pages

    install_triage_pages(app, state, config.triage_roots)
    _install_openapi(app, config)
    # Guards, innermost first (each add_middleware wraps everything added before it).
    app.add_middleware(ContentTypeMiddleware, routes=JSON_ROUTES)
    app.add_middleware(TimeoutMiddleware, timeout_s=config.request_timeout_s)
    app.add_middleware(BodyLimitMiddleware, max_bytes=config.max_body_bytes)
    if config.token:
        from assistant.serve.auth import BearerAuthMiddleware

        app.add_middleware(BearerAuthMiddleware, token=config.token)
    if not config.token:
        from assistant.serve.origin import HostOriginMiddleware

        app.add_middleware(HostOriginMiddleware, allowed_hosts=config.allowed_hosts, cors_origins=config.cors_origins)
    if config.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(config.cors_origins), allow_methods=["GET", "POST", "OPTIONS"],
                           allow_headers=["Authorization", "Content-Type"], allow_credentials=False, max_age=600)
    app.add_middleware(MetricsMiddleware, metrics=state.metrics, router_app=app)
    return app


def create_app_from_env() -> FastAPI:
    """The uvicorn factory for ``--workers N``: each worker process builds its app from the environment."""
    from assistant.serve.protocol import configure

    config = ServeConfig.from_env()
    configure(config)  # this process's connection read deadline
    return create_app(config)


def _version() -> str:
    from assistant import __version__

    return __version__


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        detail = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 400 and detail == "There was an error parsing the body":
            detail = "the request body could not be parsed (malformed JSON, not UTF-8, or a broken multipart form)"
        return error_response(exc.status_code, detail, code=_code_for(exc.status_code), headers=dict(exc.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        first = errors[0] if errors else {}
        loc = [str(p) for p in first.get("loc", ()) if p != "body"]
        if first.get("type") == "json_invalid":
            message = "the request body is not valid JSON" + (f" ({first['ctx']['error']})" if first.get("ctx", {}).get("error") else "")
            return error_response(400, message, code="invalid_json")
        where = ".".join(loc)
        message = f"{where}: {first.get('msg', 'invalid value')}" if where else str(first.get("msg", "invalid request body"))
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        return error_response(400, message, code="invalid_request", param=where or None)

    @app.exception_handler(TorchhelpError)
    async def torchhelp_error(request: Request, exc: TorchhelpError) -> Response:
        if isinstance(exc, ModelNotFound):
            return error_response(400, str(exc), code="model_not_found", param="model")
        if isinstance(exc, ChatTooLarge):
            return error_response(413, str(exc), code="chat_too_large", param="messages")
        if isinstance(exc, (InputError, ConfigError, TriageError)):
            return error_response(400, str(exc), code="invalid_input")
        if isinstance(exc, (KnowledgeError, NotReady)):
            return error_response(503, str(exc), code="not_ready")
        log.error("torchhelp error on %s: %s", request.url.path, exc)
        return error_response(500, f"{type(exc).__name__}: {exc}", code="internal_error")

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("internal error on %s", request.url.path)
        return error_response(500, "internal server error (details are in the server log)", code="internal_error")


def _code_for(status: int) -> str | None:
    return {404: "not_found", 405: "method_not_allowed", 413: "request_too_large", 415: "unsupported_media_type"}.get(status)


def _install_routes(app: FastAPI, state: ServerState) -> None:
    config = state.config

    @app.get("/", include_in_schema=False)
    async def page() -> Response:
        index = STATIC_DIR / "index.html"
        if not index.is_file():
            return error_response(404, "the web page is not installed", code="not_found")
        # The same policy as the page's meta tag, plus what only a header can say (no framing).
        csp = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; frame-ancestors 'none'"
        return FileResponse(index, media_type="text/html", headers={"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                                                                       "Cache-Control": "no-cache", "Content-Security-Policy": csp,
                                                                       "X-Frame-Options": "DENY"})

    app.mount("/static", StaticFiles(directory=STATIC_DIR, check_dir=False), name="static")

    @app.get("/healthz", tags=["probes"], summary="Liveness")
    async def healthz() -> Response:
        return JSON({"status": "ok"})

    @app.get("/readyz", tags=["probes"], summary="Readiness: the engine and its index are loaded", responses={503: {"description": "loading or failed"}})
    async def readyz() -> Response:
        if state.engine is not None:
            s = state.engine.settings
            return JSON({"status": "ready", "load_seconds": state.load_seconds, "dense": s.dense, "notes": state.load_notes})
        if state.load_error:
            return JSON({"status": "failed", "error": state.load_error}, status_code=503)
        return JSON({"status": "loading"}, status_code=503)

    @app.get("/metrics", tags=["probes"], summary="Prometheus metrics", response_class=Response)
    async def metrics() -> Response:
        body, content_type = state.metrics.render()
        return Response(body, media_type=content_type)

    @app.get("/v1/models", tags=["openai"], response_model=ModelList, responses=_ERRORS)
    async def list_models() -> Response:
        return JSON(models_list(state.created))

    @app.get("/v1/models/{model_id}", tags=["openai"], responses=_ERRORS)
    async def get_model(model_id: str) -> Response:
        for card in models_list(state.created)["data"]:
            if card["id"] == model_id:
                return JSON(card)
        return error_response(404, f"unknown model {model_id!r}", code="model_not_found", param="model")

    @app.post("/v1/chat/completions", tags=["openai"], response_model=ChatCompletion, responses=_ERRORS,
              summary="OpenAI-compatible chat: diagnose the newest error in the conversation, or answer a follow-up")
    async def chat_completions(body: ChatRequest) -> Response:
        backend = backend_for_model(body.model)
        prompt = [(m.role, m.text()) for m in body.messages]
        check_chat_size(prompt)  # before waiting for the engine: a refusal costs nothing
        engine = await state.engine_for(backend)
        outcome = await state.call(engine, answer_chat, engine, prompt)
        state.count(engine, outcome.diagnosis, "chat", outcome.fallback)
        if not body.stream:
            return JSON(completion_body(outcome, body.model, prompt))
        include_usage = bool(body.stream_options and body.stream_options.include_usage)

        async def events() -> AsyncIterator[bytes]:
            for chunk in stream_chunks(outcome, body.model, prompt, include_usage):
                yield b"data: " + dump_json(chunk) + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @app.post("/v1/diagnose", tags=["torchhelp"], responses=_ERRORS, summary="Diagnosis.to_dict() for an error text (same as `torchhelp ask --json`)")
    async def diagnose(body: DiagnoseRequest) -> Response:
        engine = await state.engine_for(body.llm)
        evidence = body.evidence.to_evidence() if body.evidence is not None else None
        # A repeated error is answered on the event loop from the cache; only new work goes to a thread.
        diagnosis = cached_diagnosis(engine, body.text, evidence) if len(body.text) <= CACHE_ON_LOOP_CHARS else None
        if diagnosis is None:
            diagnosis = await state.call(engine, diagnose_text, engine, body.text, evidence)
        state.count(engine, diagnosis, "diagnose")
        return JSON(shown(diagnosis).to_dict())  # untrusted text: no terminal controls, no credentials

    @app.post("/v1/triage", tags=["torchhelp"], responses=_ERRORS,
              summary="Triage an uploaded job log, or a tar/tar.gz/tgz/zip of job folders")
    async def triage(file: UploadFile = File(..., description="One log file (job id from its name) or an archive of job folders")) -> Response:
        engine = await state.engine_for(None)
        cancel = threading.Event()  # set when this request ends, however: an abandoned upload's work stops
        try:
            result = await state.call(engine, triage_upload, engine, file.file, file.filename, config, cancel)
        except ArchiveError as exc:
            return error_response(exc.status, str(exc), code=_ARCHIVE_CODES.get(exc.status, "invalid_input"))
        except ImportError as exc:
            return error_response(503, f"triage is not installed here ({exc.name or exc}): pip install 'torchhelp[triage]'", code="not_installed")
        finally:
            cancel.set()
            await file.close()
        return JSON(result)


def _install_openapi(app: FastAPI, config: ServeConfig) -> None:
    """Declare bearer auth in the OpenAPI document when a token is required."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        if config.token:
            schema.setdefault("components", {})["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
            public = {"/healthz", "/readyz"}
            for path, ops in schema.get("paths", {}).items():
                if path not in public:
                    for op in ops.values():
                        op["security"] = [{"bearer": []}]
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
