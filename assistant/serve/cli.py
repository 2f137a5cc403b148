"""`torchhelp serve`: the HTTP door (OpenAI-compatible chat, /v1/diagnose, /v1/triage, a web page).

Wired into the main app by ``assistant.serve.cli.register(app)``. Flags are checked (and an
unsafe bind refused) before FastAPI or uvicorn are imported, so the refusal works without the
``serve`` extra and costs nothing.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Optional

import typer

from assistant.errors import TorchhelpError
from assistant.serve.config import BACKENDS, DEFAULT_HOST, DEFAULT_PORT, ServeConfig, check_bind, read_token

GRACEFUL_SHUTDOWN_S = 10  # in-flight requests get this long to finish on SIGINT/SIGTERM


class ServeNotInstalled(TorchhelpError):
    """The `serve` extra (FastAPI, uvicorn, prometheus-client, python-multipart) is not installed."""

    exit_code = 2


def register(app: typer.Typer) -> None:
    """Add the `serve` command to the main app (idempotent)."""
    if any(c.name == "serve" for c in app.registered_commands):
        return
    app.command("serve", help="Serve the assistant over HTTP: an OpenAI-compatible chat endpoint, /v1/diagnose, /v1/triage and a web page.")(serve_cmd)


def build_config(
    host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, token_file: str | None = None, workers: int = 1, llm: str | None = None,
    cors_origins: list[str] | tuple[str, ...] = (), max_body_mb: float = 8.0, timeout_s: float = 30.0, env: dict[str, str] | None = None,
    cache_entries: int = 2048, triage_roots: list[str] | tuple[str, ...] = (), docs: bool = False,
    read_timeout_s: float = 15.0, max_connections: int = 200, allowed_hosts: list[str] | tuple[str, ...] = (),
) -> ServeConfig:
    """The configuration the flags describe, checked (an unsafe bind raises InsecureBindError, exit code 2)."""
    from assistant.errors import ConfigError

    if not max_body_mb > 0:
        raise ConfigError("--max-body-mb must be positive")
    config = ServeConfig(
        host=host, port=port, token=read_token(token_file, env), workers=workers, llm=llm, cors_origins=tuple(cors_origins),
        max_body_bytes=int(max_body_mb * (1 << 20)), request_timeout_s=timeout_s, cache_entries=cache_entries,
        triage_roots=tuple(_triage_root(r) for r in triage_roots), docs=docs,
        read_timeout_s=read_timeout_s, max_connections=max_connections, allowed_hosts=tuple(allowed_hosts),
    )
    check_bind(config)
    return config


def _triage_root(path: str) -> str:
    """A --triage-root folder, absolute; a missing one is a configuration error."""
    from pathlib import Path

    from assistant.errors import ConfigError

    p = Path(path).expanduser()
    if not p.is_dir():
        raise ConfigError(f"--triage-root {path}: not a folder")
    return str(p.resolve())


def _require_extra() -> None:
    from importlib.util import find_spec

    needs = {"fastapi": ("fastapi",), "uvicorn": ("uvicorn",), "prometheus-client": ("prometheus_client",), "python-multipart": ("python_multipart", "multipart")}
    missing = [package for package, modules in needs.items() if not any(find_spec(m) for m in modules)]
    if missing:
        raise ServeNotInstalled(f"`torchhelp serve` needs {', '.join(missing)}: pip install 'torchhelp[serve]'")


def run_server(config: ServeConfig, *, log_level: str = "info", access_log: bool = True) -> None:
    """Run uvicorn until SIGINT/SIGTERM (graceful: in-flight requests finish first)."""
    import uvicorn

    from assistant.serve.protocol import uvicorn_limits

    common = dict(host=config.host, port=config.port, log_level=log_level, access_log=access_log,
                  timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, server_header=False, **uvicorn_limits(config))
    if config.workers > 1:
        # Multi-process mode needs an import string: each worker builds its app from the environment.
        os.environ.update(config.to_env())
        uvicorn.run("assistant.serve.app:create_app_from_env", factory=True, workers=config.workers, **common)
        return
    from assistant.serve.app import create_app

    uvicorn.run(create_app(config), **common)


def serve_cmd(
    host: str = typer.Option(DEFAULT_HOST, "--host", help="Address to listen on; beyond loopback a token is required."),
    port: int = typer.Option(DEFAULT_PORT, "--port", help="Port to listen on."),
    token_file: Optional[str] = typer.Option(None, "--token-file", help="File whose first line is the bearer token (else $TORCHHELP_SERVE_TOKEN)."),
    workers: int = typer.Option(1, "--workers", min=1, help="Worker processes (each loads the engine once)."),
    llm: Optional[str] = typer.Option(None, "--llm", help=f"Backend of model 'torchhelp': {' | '.join(BACKENDS)} (default: the settings' own)."),
    cors_origin: Optional[list[str]] = typer.Option(None, "--cors-origin", help="Allow browser calls from this origin (repeatable; CORS is off without it)."),
    max_body_mb: float = typer.Option(8.0, "--max-body-mb", help="Largest request body, in MiB (413 beyond)."),
    timeout_s: float = typer.Option(30.0, "--timeout-s", help="Per-request deadline in seconds (504 beyond)."),
    cache_entries: int = typer.Option(2048, "--cache-entries", min=0, help="Deterministic diagnoses kept in memory (0: no cache)."),
    triage_root: Optional[list[str]] = typer.Option(None, "--triage-root", help="Serve this folder's triage report at /triage/N with a Resolve button per group (repeatable)."),
    log_level: str = typer.Option("info", "--log-level", help="critical | error | warning | info | debug"),
    access_log: bool = typer.Option(True, "--access-log/--no-access-log", help="Log one line per request."),
    docs: bool = typer.Option(False, "--docs", help="Serve /docs and /redoc (FastAPI's pages: the browser loads Swagger UI and ReDoc from a CDN)."),
    read_timeout_s: float = typer.Option(15.0, "--read-timeout-s", help="A request (headers and body) must arrive whole within this; else its connection is closed."),
    max_connections: int = typer.Option(200, "--max-connections", min=2, help="Open connections at most (503 and closed beyond)."),
    allowed_host: Optional[list[str]] = typer.Option(None, "--allowed-host", help="Without a token only loopback Host names are answered: also answer this one (repeatable)."),
) -> None:
    """Serve the assistant over HTTP (OpenAI-compatible `/v1/chat/completions`)."""
    config = build_config(host=host, port=port, token_file=token_file, workers=workers, llm=llm, cors_origins=cors_origin or (),
                          max_body_mb=max_body_mb, timeout_s=timeout_s, cache_entries=cache_entries,
                          triage_roots=triage_root or (), docs=docs, read_timeout_s=read_timeout_s,
                          max_connections=max_connections, allowed_hosts=allowed_host or ())
    _require_extra()
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), format="%(levelname)s:     %(message)s")
    shown = f"[{config.host}]" if ":" in config.host else config.host
    print(f"torchhelp serve: http://{shown}:{config.port}  (token {'required' if config.token else 'off (loopback only)'}, "
          f"llm {config.llm or 'from settings'}, workers {config.workers}{', CORS ' + ' '.join(config.cors_origins) if config.cors_origins else ''})",
          file=sys.stderr)
    run_server(config, log_level=log_level, access_log=access_log)
