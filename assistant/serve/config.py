"""The server's one frozen configuration, and the checks that must pass before it listens.

Nothing here imports FastAPI or uvicorn: the CLI builds and checks a :class:`ServeConfig` (and
refuses an unsafe one) before the ``serve`` extra is even needed.
"""

from __future__ import annotations

import ipaddress
import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from assistant.errors import ConfigError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_MAX_BODY_BYTES = 8 << 20  # 8 MiB
DEFAULT_TIMEOUT_S = 30.0
BACKENDS = ("none", "local", "openai")  # what `--llm` and `model="torchhelp:<backend>"` may name
TOKEN_ENV = "TORCHHELP_SERVE_TOKEN"
CONFIG_ENV = "TORCHHELP_SERVE_CONFIG"  # how `--workers N` hands the configuration to each worker process
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


class InsecureBindError(ConfigError):
    """Listening beyond loopback without a token would expose the server to anyone who can reach it."""


@dataclass(frozen=True)
class ServeConfig:
    """Everything `torchhelp serve` needs; the token never appears in ``repr``."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = field(default=None, repr=False)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    request_timeout_s: float = DEFAULT_TIMEOUT_S
    cors_origins: tuple[str, ...] = ()  # none: CORS is off
    workers: int = 1
    llm: str | None = None  # the backend of model "torchhelp"; None = the settings' own (auto)
    max_concurrency: int = 16  # engine calls running at once in worker threads (more wait for a slot)
    max_archive_members: int = 10_000  # /v1/triage: entries in one uploaded archive
    archive_expansion: int = 10  # /v1/triage: uncompressed size allowed, as a multiple of max_body_bytes
    cache_entries: int = 2048  # deterministic diagnoses kept (LRU); 0 turns the cache off
    triage_roots: tuple[str, ...] = ()  # folders whose triage reports GET /triage/{n} serves (with Resolve buttons)
    docs: bool = False  # /docs and /redoc: FastAPI's pages load Swagger UI and ReDoc from a CDN, so they are off unless asked for
    keep_alive_s: int = 5  # idle time between two requests of one connection (uvicorn's timeout_keep_alive)
    read_timeout_s: float = 15.0  # a request (headers and body) must arrive whole within this, else its connection is closed
    max_connections: int = 200  # open connections (uvicorn's limit_concurrency): beyond, 503 and closed at once
    max_header_bytes: int = 32 * 1024  # request line and headers (h11's max_incomplete_event_size): beyond, 400
    allowed_hosts: tuple[str, ...] = ()  # Host names accepted besides loopback ones on a tokenless server (DNS rebinding guard)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port must be between 0 and 65535, not {self.port}")
        if self.max_body_bytes < 1024:
            raise ConfigError("the request body limit must be at least 1 KiB")
        if not self.request_timeout_s > 0:
            raise ConfigError("--timeout-s must be positive")
        if self.workers < 1:
            raise ConfigError(f"--workers must be at least 1, not {self.workers}")
        if self.cache_entries < 0:
            raise ConfigError("--cache-entries cannot be negative")
        if self.max_concurrency < 1:
            raise ConfigError("max_concurrency must be at least 1")
        if self.keep_alive_s < 1 or not self.read_timeout_s > 0:
            raise ConfigError("the keep-alive and read timeouts must be positive")
        if self.max_connections < 2:
            raise ConfigError("--max-connections must be at least 2")
        if self.max_header_bytes < 1024:
            raise ConfigError("the header limit must be at least 1 KiB")
        if self.llm is not None and self.llm not in BACKENDS:
            raise ConfigError(f"unknown --llm {self.llm!r} (use {', '.join(BACKENDS)})")
        if self.token is not None and not self.token.strip():
            raise ConfigError("the serve token is empty")
        for origin in self.cors_origins:
            if origin != "*" and not origin.startswith(("http://", "https://")):
                raise ConfigError(f"--cors-origin must be an origin like https://chat.example.org, not {origin!r}")

    @property
    def max_archive_bytes(self) -> int:
        """The most an uploaded archive may expand to."""
        return self.max_body_bytes * self.archive_expansion

    def to_env(self) -> dict[str, str]:
        """Environment for worker processes: the configuration (without the token) and the token apart."""
        data = {k: v for k, v in asdict(self).items() if k != "token"}
        env = {CONFIG_ENV: json.dumps(data)}
        if self.token:
            env[TOKEN_ENV] = self.token
        return env

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ServeConfig:
        """The configuration a worker process was started with (see :meth:`to_env`)."""
        env = dict(os.environ) if env is None else env
        try:
            data: dict[str, Any] = json.loads(env.get(CONFIG_ENV) or "{}")
        except ValueError:
            raise ConfigError(f"{CONFIG_ENV} is not valid JSON") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{CONFIG_ENV} must hold a JSON object")
        if "cors_origins" in data:
            data["cors_origins"] = tuple(data["cors_origins"] or ())
        for key in ("triage_roots", "allowed_hosts"):
            if key in data:
                data[key] = tuple(data[key] or ())
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"{CONFIG_ENV}: unknown field(s) {', '.join(sorted(unknown))}")
        return cls(**data, token=env.get(TOKEN_ENV) or None)

    def with_(self, **changes: Any) -> ServeConfig:
        """A copy with some fields changed."""
        return replace(self, **changes)


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach: 127.0.0.0/8, ::1 and the name localhost."""
    name = host.strip().strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # any other host name may resolve beyond this machine


def check_bind(config: ServeConfig) -> None:
    """Refuse to listen beyond loopback without a token (raises InsecureBindError, exit code 2)."""
    if not config.token and not is_loopback(config.host):
        raise InsecureBindError(
            # No "token: <word>" in this sentence: the CLI masks credentials in every message it prints,
            # and that shape reads as one (it printed "without a token: [REDACTED] who can reach it").
            f"refusing to listen on {config.host} without a token, since anyone who can reach it could use the server. "
            f"Pass --token-file FILE or set {TOKEN_ENV}, or listen on 127.0.0.1."
        )


def read_token(token_file: str | os.PathLike[str] | None, env: dict[str, str] | None = None) -> str | None:
    """The bearer token: the first line of ``token_file``, else ``$TORCHHELP_SERVE_TOKEN``, else None."""
    env = dict(os.environ) if env is None else env
    if token_file is not None:
        path = Path(token_file).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"token file not found: {path}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read token file {path}: {exc}") from None
        lines = text.strip().splitlines()
        token = lines[0].strip() if lines else ""
        if not token:
            raise ConfigError(f"token file {path} is empty")
        return token
    token = (env.get(TOKEN_ENV) or "").strip()
    return token or None
