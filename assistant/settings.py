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


_ENV = {
    "TORCHHELP_DENSE": "dense", "TORCHHELP_DENSE_POLICY": "dense_policy", "TORCHHELP_ENCODER": "encoder", "TORCHHELP_TOP_K": "top_k", "TORCHHELP_ATLAS": "atlas",
    "TORCHHELP_LLM": "llm", "TORCHHELP_LLM_URL": "llm_url", "TORCHHELP_LLM_MODEL": "llm_model",
    "TORCHHELP_LLM_API_KEY": "llm_api_key", "TORCHHELP_LLM_TIMEOUT": "llm_timeout",
    "TORCHHELP_LOCAL_MODEL": "local_model_path", "TORCHHELP_OFFLINE": "offline",
}


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
    env = os.environ if env is None else env
    home = Path(env.get("TORCHHELP_HOME") or "~/.cache/torchhelp").expanduser()
    values: dict[str, Any] = {"home": home}
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
    for var, name in _ENV.items():
        if var in env:
            values[name] = _coerce(name, env[var])
    if env.get("OPENAI_API_KEY"):
        # Kept apart from llm_api_key: this key belongs to OpenAI, not to whatever llm_url names.
        values["openai_api_key"] = env["OPENAI_API_KEY"]
    settings = Settings(**values).with_overrides(**overrides)
    if settings.dense_policy not in ("auto", "always"):
        raise ConfigError(f"dense_policy must be 'auto' or 'always', not {settings.dense_policy!r}")
    return settings
