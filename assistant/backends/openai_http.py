"""Any OpenAI-compatible chat-completions server over httpx: OpenAI, vLLM, Ollama's /v1,
llama.cpp's server, LM Studio. Streaming (SSE), connect/read timeouts, retries with backoff on
429 and 5xx (Retry-After honoured). Every failure ends in BackendReplyError with a clear reason."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any
from collections.abc import Mapping, Sequence

from assistant.backends.base import Message, TokenSink
from assistant.errors import BackendReplyError, BackendUnavailable

RETRY_STATUSES = {429, 500, 502, 503, 504}


@dataclass
class OpenAIBackend:
    """Chat completions over HTTP."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 60.0
    connect_timeout: float = 5.0
    retries: int = 2
    backoff: float = 0.5
    stream: bool = False
    name: str = "openai"
    remote: bool = True

    @classmethod
    def from_settings(cls, settings) -> OpenAIBackend:  # type: ignore[no-untyped-def]
        if not settings.llm_url:
            raise BackendUnavailable("no API configured: set TORCHHELP_LLM_URL (e.g. https://api.openai.com/v1 or http://localhost:11434/v1)")
        return cls(
            base_url=settings.llm_url.rstrip("/"), model=settings.llm_model or "gpt-4o-mini", api_key=settings.llm_api_key,
            timeout=settings.llm_timeout, connect_timeout=settings.llm_connect_timeout, retries=settings.llm_retries,
        )

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def complete(self, messages: Sequence[Message], *, max_tokens: int = 800, on_token: TokenSink | None = None, json_mode: bool = False,
                 schema: Mapping[str, Any] | None = None) -> str:
        try:
            return self._complete(messages, max_tokens, on_token, json_mode)
        except BackendReplyError as exc:
            # Not every compatible server knows response_format: ask once more without it.
            if json_mode and "HTTP 400" in str(exc):
                return self._complete(messages, max_tokens, on_token, False)
            raise

    def _complete(self, messages: Sequence[Message], max_tokens: int, on_token: TokenSink | None, json_mode: bool) -> str:
        import httpx

        body: dict[str, Any] = {"model": self.model, "messages": list(messages), "temperature": 0, "max_tokens": max_tokens}
        if json_mode:
            body["response_format"] = {"type": "json_object"}
        streaming = on_token is not None or self.stream
        if streaming:
            body["stream"] = True
        url = f"{self.base_url}/chat/completions"
        timeout = httpx.Timeout(self.timeout, connect=self.connect_timeout)
        last_error = "no attempt made"
        for attempt in range(self.retries + 1):
            try:
                with httpx.Client(timeout=timeout) as client:
                    if streaming:
                        with client.stream("POST", url, json=body, headers=self._headers()) as resp:
                            if resp.status_code != 200:
                                resp.read()
                                last_error = self._status_error(resp)
                                if resp.status_code in RETRY_STATUSES and attempt < self.retries:
                                    self._sleep(attempt, resp)
                                    continue
                                raise BackendReplyError(last_error)
                            return self._read_stream(resp, on_token)
                    resp = client.post(url, json=body, headers=self._headers())
                    if resp.status_code != 200:
                        last_error = self._status_error(resp)
                        if resp.status_code in RETRY_STATUSES and attempt < self.retries:
                            self._sleep(attempt, resp)
                            continue
                        raise BackendReplyError(last_error)
                    return self._read_json(resp)
            except httpx.TimeoutException as exc:
                last_error = f"the LLM server did not answer in time ({type(exc).__name__})"
            except httpx.TransportError as exc:
                last_error = f"cannot reach the LLM server at {self.base_url} ({type(exc).__name__}: {exc})"
            if attempt < self.retries:
                self._sleep(attempt, None)
        raise BackendReplyError(last_error)

    def _sleep(self, attempt: int, resp) -> None:  # type: ignore[no-untyped-def]
        delay = self.backoff * (2**attempt)
        if resp is not None:
            try:
                delay = max(delay, min(float(resp.headers.get("retry-after", 0)), 30.0))
            except ValueError:
                pass
        time.sleep(delay)

    @staticmethod
    def _status_error(resp) -> str:  # type: ignore[no-untyped-def]
        snippet = resp.text[:200].replace("\n", " ") if resp.text else ""
        return f"the LLM server answered HTTP {resp.status_code}" + (f": {snippet}" if snippet else "")

    @staticmethod
    def _read_json(resp) -> str:  # type: ignore[no-untyped-def]
        try:
            data = resp.json()
            content = data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise BackendReplyError(f"the LLM server's reply is not a chat completion ({type(exc).__name__})") from None
        if not isinstance(content, str) or not content.strip():
            raise BackendReplyError("the LLM server returned an empty answer")
        return content

    @staticmethod
    def _read_stream(resp, on_token: TokenSink | None) -> str:  # type: ignore[no-untyped-def]
        parts: list[str] = []
        finished = False
        for line in resp.iter_lines():
            if not line or not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                finished = True
                break
            try:
                chunk = json.loads(payload)
                choice = chunk["choices"][0]
            except (ValueError, KeyError, IndexError, TypeError):
                raise BackendReplyError("the LLM server sent a malformed stream event") from None
            delta = (choice.get("delta") or {}).get("content") or ""
            if delta:
                parts.append(delta)
                if on_token:
                    on_token(delta)
            if choice.get("finish_reason"):
                finished = True
        text = "".join(parts)
        if not finished:
            raise BackendReplyError("the LLM stream ended before the answer was complete (truncated stream)")
        if not text.strip():
            raise BackendReplyError("the LLM server returned an empty answer")
        return text
