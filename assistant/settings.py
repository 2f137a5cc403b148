"""One frozen Settings object: defaults < config file < TORCHHELP_* environment < explicit flags.

The config file is ``$TORCHHELP_HOME/config.toml`` (home defaults to ``~/.cache/torchhelp``);
``TORCHHELP_HOME`` makes tests hermetic, like ``LLM_USER_PATH`` does for simonw/llm.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any
from collections.abc import Mapping

from assistant.errors import ConfigError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class Settings:
    """Every tunable of the engine and its doors."""

    home: Path = Path("~/.cache/torchhelp").expanduser()
    dense: bool = True  # dense (embedding) retrieval available; lexical always runs
    # When to embed the query: "auto" = only when no confident rule already named the documents
    # (a rule's documents plus lexical search ground its answer; embedding costs ~25 ms per query);
    # "always" = every query.
    dense_policy: str = "auto"
    # Query and document embeddings: "static" (MiniLM distilled to static word vectors: ~0.1 ms a query),
    # "numpy" (the full MiniLM forward in NumPy: 10-100+ ms a query) or "sentence-transformers" (reference, imports torch).
    encoder: str = "static"
    top_k: int = 5
    atlas: bool = True  # recognise messages PyTorch raises with the error atlas (TORCHHELP_ATLAS=0 turns it off)
    window_bytes: int = 1 << 20
    llm: str = "auto"  # auto | none | local | openai | any registered backend name
    llm_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = None  # sent to llm_url, whatever its host (TORCHHELP_LLM_API_KEY)
    openai_api_key: str | None = None  # OPENAI_API_KEY: sent to api.openai.com only
    llm_timeout: float = 60.0
    llm_connect_timeout: float = 5.0
    llm_retries: int = 2
    local_model_path: str | None = None
    offline: bool = False

    def with_overrides(self, **overrides: Any) -> Settings:
        """A copy with the non-None overrides applied (what CLI flags do)."""
        clean = {k: v for k, v in overrides.items() if v is not None}
        unknown = set(clean) - {f.name for f in fields(self)}
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        return replace(self, **clean)


@dataclass(frozen=True)
class EnvVar:
    """One ``TORCHHELP_*`` (or other) environment variable torchhelp reads: the one list of them.

    ``setting`` names the :class:`Settings` field it sets (None: read elsewhere, for the reason in ``meaning``);
    ``audience`` is ``user`` (documented for everyone), ``internal`` (set by torchhelp for a child process it
    starts) or ``test`` (the test suite's switches).
    """

    name: str
    meaning: str
    setting: str | None = None
    audience: str = "user"


ENVIRONMENT: tuple[EnvVar, ...] = (
    EnvVar("TORCHHELP_HOME", "Where the index, your documents, config.toml and triage state live (default ~/.cache/torchhelp).", "home"),
    EnvVar("TORCHHELP_LLM", "Who writes the answer: auto (an API if TORCHHELP_LLM_URL is set, else none) | none | local | openai | a plugin's name.", "llm"),
    EnvVar("TORCHHELP_LLM_URL", "Base URL of an OpenAI-compatible API (https://api.openai.com/v1, http://localhost:11434/v1, …).", "llm_url"),
    EnvVar("TORCHHELP_LLM_MODEL", "The model name sent to that API (default gpt-4o-mini).", "llm_model"),
    EnvVar("TORCHHELP_LLM_API_KEY", "The key sent to TORCHHELP_LLM_URL, whatever its host (never over plain http except to loopback).", "llm_api_key"),
    EnvVar("OPENAI_API_KEY", "OpenAI's key: sent to api.openai.com only.", "openai_api_key"),
    EnvVar("TORCHHELP_LLM_TIMEOUT", "Seconds for the whole LLM answer, retries included.", "llm_timeout"),
    EnvVar("TORCHHELP_LOCAL_MODEL", "The GGUF for --llm local: a path, or gemma3-270m (default: the bundled SmolLM2-135M).", "local_model_path"),
    EnvVar("TORCHHELP_OFFLINE", "1: never send anything off this machine (remote LLM backends are refused).", "offline"),
    EnvVar("TORCHHELP_DENSE", "0: lexical retrieval only (no embedding model).", "dense"),
    EnvVar("TORCHHELP_DENSE_POLICY", "When to embed the query: auto (only without a confident rule) | always.", "dense_policy"),
    EnvVar("TORCHHELP_ENCODER", "Embeddings: static (default, fast) | numpy (the full MiniLM) | sentence-transformers (imports torch).", "encoder"),
    EnvVar("TORCHHELP_TOP_K", "How many passages retrieval returns.", "top_k"),
    EnvVar("TORCHHELP_ATLAS", "0: do not recognise messages with the error atlas.", "atlas"),
    EnvVar("TORCHHELP_ENCODER_CACHE", "Where the static encoder keeps its per-machine table (default: the user cache)."),
    EnvVar("TORCHHELP_DEBUG", "1: show torchhelp's own traceback on an internal error."),
    EnvVar("TORCHHELP_SERVE_TOKEN", "torchhelp serve: the bearer token every API route requires (or --token-file)."),
    EnvVar("TORCHHELP_SERVE_CONFIG", "torchhelp serve --workers N: the configuration handed to each worker.", audience="internal"),
    EnvVar("TORCHHELP_RUN_DIR", "torchhelp run: where the child's crash hook writes its evidence.", audience="internal"),
    EnvVar("TORCHHELP_PKG_PARENT", "torchhelp run: where the child finds the assistant package.", audience="internal"),
    EnvVar("TORCHHELP_MEMORY_HISTORY", "torchhelp run --memory-history: record CUDA allocation stacks in the child.", audience="internal"),
    EnvVar("TORCHHELP_SWITCHES", "torchhelp run --investigate: the experiment switches the child turns on (anomaly, guard_index...).", audience="internal"),
    EnvVar("TORCHHELP_PROBE_BUDGET", "torchhelp run: seconds the probes may take at a crash (default 3).", audience="user"),
    EnvVar("TORCHHELP_GPU_OUT", "Tests: keep the GPU tests' reports and outputs here (for committing).", audience="test"),
    EnvVar("TORCHHELP_REQUIRE_CHROMIUM", "Tests: 1 fails (not skips) the browser tests without Chromium (CI sets it).", audience="test"),
    EnvVar("TORCHHELP_UPDATE_GOLDEN", "Tests: 1 rewrites the golden LLM replies.", audience="test"),
)

# The variables that set a Settings field (TORCHHELP_HOME and OPENAI_API_KEY are read on their own in load_settings).
_ENV = {v.name: v.setting for v in ENVIRONMENT if v.setting is not None and v.name not in ("TORCHHELP_HOME", "OPENAI_API_KEY")}

SOURCES = ("default", "config.toml", "environment", "flag")


def _coerce(name: str, value: Any) -> Any:
    kind = {f.name: f.type for f in fields(Settings)}[name]
    try:
        if kind in ("bool",):
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise ValueError(value)
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "Path":
            return Path(str(value)).expanduser()
        return None if value is None else str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"invalid value for {name}: {value!r}") from None


def load_settings(env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Resolve settings from the config file, the environment and explicit overrides."""
    return load_settings_with_sources(env, **overrides)[0]


def load_settings_with_sources(env: Mapping[str, str] | None = None, **overrides: Any) -> tuple[Settings, dict[str, str]]:
    """The settings, and where each field's value came from: one of :data:`SOURCES` per field."""
    env = os.environ if env is None else env
    home = Path(env.get("TORCHHELP_HOME") or "~/.cache/torchhelp").expanduser()
    values: dict[str, Any] = {"home": home}
    sources = {f.name: "default" for f in fields(Settings)}
    if env.get("TORCHHELP_HOME"):
        sources["home"] = "environment"
    config = home / "config.toml"
    if config.is_file():
        try:
            data = tomllib.loads(config.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read {config}: {exc}") from None
        known = {f.name for f in fields(Settings)}
        for key, value in data.items():
            if key not in known or key == "home":
                raise ConfigError(f"{config}: unknown setting {key!r}")
            values[key] = _coerce(key, value)
            sources[key] = "config.toml"
    for var, name in _ENV.items():
        if var in env:
            values[name] = _coerce(name, env[var])
            sources[name] = "environment"
    if env.get("OPENAI_API_KEY"):
        # Kept apart from llm_api_key: this key belongs to OpenAI, not to whatever llm_url names.
        values["openai_api_key"] = env["OPENAI_API_KEY"]
        sources["openai_api_key"] = "environment"
    settings = Settings(**values).with_overrides(**overrides)
    sources.update({k: "flag" for k, v in overrides.items() if v is not None})
    if settings.dense_policy not in ("auto", "always"):
        raise ConfigError(f"dense_policy must be 'auto' or 'always', not {settings.dense_policy!r}")
    return settings, sources
