"""Any OpenAI-compatible chat-completions server over httpx: OpenAI, vLLM, Ollama's /v1,
llama.cpp's server, LM Studio.

Streaming (SSE) or not, the whole answer must arrive within one deadline (``llm_timeout``,
retries included) and within a size cap; every reply is checked against the wire schema
(:mod:`assistant.backends.wire`); retries with backoff on 429 and 5xx (Retry-After honoured, within
the deadline). API keys follow :mod:`assistant.backends.keypolicy`. Every failure ends in
BackendReplyError with a short reason that carries no raw server text beyond a sanitised snippet.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from collections.abc import Iterator, Mapping, Sequence

from assistant.backends.protocol import Message, TokenSink
from assistant.backends.deadline import Deadline, GatedSink, run_with_deadline
from assistant.backends.keypolicy import choose_api_key, withheld_openai_key
from assistant.backends.wire import Chunk, Completion, safe_snippet, schema_problem
from assistant.errors import BackendReplyError, BackendUnavailable

RETRY_STATUSES = {429, 500, 502, 503, 504}
MAX_WIRE_BYTES = 2 << 20  # the body as sent (SSE framing is ~10x the text); a 700-token answer is ~200 KB streamed
MAX_ANSWER_CHARS = 32_000  # the answer text itself; a 700-token reply is ~3,000 characters
MAX_LINE_BYTES = 256 << 10  # one SSE line


class _Retry(Exception):
    """An attempt failed in a way worth trying again (status, timeout, connection)."""

    def __init__(self, reason: str, delay: float = 0.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay


@dataclass
class OpenAIBackend:
    """Chat completions over HTTP. ``timeout`` is the deadline for the whole answer, in seconds."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 60.0
    connect_timeout: float = 5.0
    retries: int = 2
    backoff: float = 0.5
    stream: bool = False
    max_wire_bytes: int = MAX_WIRE_BYTES
    max_answer_chars: int = MAX_ANSWER_CHARS
    key_hint: str = ""  # appended to an HTTP 401/403 reason
    name: str = "openai"
    remote: bool = True

    @classmethod
    def from_settings(cls, settings) -> OpenAIBackend:  # type: ignore[no-untyped-def]
        if not settings.llm_url:
            raise BackendUnavailable("no API configured: set TORCHHELP_LLM_URL (e.g. https://api.openai.com/v1 or http://localhost:11434/v1)")
        url = settings.llm_url.rstrip("/")
        explicit, openai_key = settings.llm_api_key, getattr(settings, "openai_api_key", None)
        hint = ("OPENAI_API_KEY is sent only to api.openai.com; set TORCHHELP_LLM_API_KEY for this server"
                if withheld_openai_key(url, explicit, openai_key) else "")
        return cls(
            base_url=url, model=settings.llm_model or "gpt-4o-mini", api_key=choose_api_key(url, explicit, openai_key),
            timeout=settings.llm_timeout, connect_timeout=settings.llm_connect_timeout, retries=settings.llm_retries, key_hint=hint,
        )

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def complete(self, messages: Sequence[Message], *, max_tokens: int = 800, on_token: TokenSink | None = None, json_mode: bool = False,
                 schema: Mapping[str, Any] | None = None) -> str:
        deadline = Deadline(self.timeout)
        sink = GatedSink(on_token, deadline) if on_token is not None else None

        def work(dl: Deadline) -> str:
            try:
                return self._complete(messages, max_tokens, sink, json_mode, dl)
            except BackendReplyError as exc:
                # Not every compatible server knows response_format: ask once more without it.
                if json_mode and "HTTP 400" in str(exc):
                    return self._complete(messages, max_tokens, sink, False, dl)
                raise

        return run_with_deadline(work, deadline, sink)

    def _complete(self, messages: Sequence[Message], max_tokens: int, sink: TokenSink | None, json_mode: bool, deadline: Deadline) -> str:
        import httpx

        body: dict[str, Any] = {"model": self.model, "messages": list(messages), "temperature": 0, "max_tokens": max_tokens}
        if json_mode:
            body["response_format"] = {"type": "json_object"}
        streaming = sink is not None or self.stream
        if streaming:
            body["stream"] = True
        url = f"{self.base_url}/chat/completions"
        last_error = "no attempt made"
        for attempt in range(self.retries + 1):
            deadline.check()
            left = deadline.left()
            # Each read waits at most what is left of the deadline; the caller's wait bounds the rest.
            timeout = httpx.Timeout(left, connect=min(self.connect_timeout, left))
            try:
                with httpx.Client(timeout=timeout, follow_redirects=False) as client, \
                        client.stream("POST", url, json=body, headers=self._headers()) as resp:
                    if resp.status_code != 200:
                        raise self._status_problem(resp, attempt, deadline)
                    chunks = self._capped(resp.iter_bytes(), deadline)
                    return self._read_stream(chunks, sink) if streaming else self._read_json(chunks)
            except _Retry as exc:
                last_error, delay = exc.reason, exc.delay
            except httpx.TimeoutException as exc:
                # Reads wait at most what was left of the deadline, so a read timeout means the deadline
                # passed: say so in the same words as the caller's own deadline, whichever fires first.
                last_error = (f"the LLM server did not connect within {min(self.connect_timeout, left):g} s ({type(exc).__name__})"
                              if isinstance(exc, httpx.ConnectTimeout) else
                              f"the LLM server did not answer in time (no complete answer within the {deadline.seconds:g} s deadline; {type(exc).__name__})")
                delay = self._delay(attempt)
            except (httpx.ConnectError, httpx.UnsupportedProtocol) as exc:
                last_error, delay = f"cannot reach the LLM server at {_where(self.base_url)} ({type(exc).__name__})", self._delay(attempt)
            except httpx.TransportError as exc:
                last_error, delay = f"the LLM server broke off the answer ({type(exc).__name__})", self._delay(attempt)
            except httpx.HTTPError as exc:
                raise BackendReplyError(f"the LLM server's reply could not be read ({type(exc).__name__})") from None
            if attempt < self.retries and delay < deadline.left():
                time.sleep(delay)
            else:
                break
        raise BackendReplyError(last_error)

    def _delay(self, attempt: int) -> float:
        return self.backoff * (2**attempt)

    def _status_problem(self, resp, attempt: int, deadline: Deadline) -> Exception:  # type: ignore[no-untyped-def]
        """A _Retry for statuses worth retrying, else the BackendReplyError to raise."""
        body = b"".join(self._capped(resp.iter_bytes(), deadline, limit=4096, truncate=True))
        snippet = safe_snippet(body)
        reason = f"the LLM server answered HTTP {resp.status_code}" + (f": {snippet}" if snippet else "")
        if resp.status_code in (401, 403) and self.key_hint:
            reason += f" ({self.key_hint})"
        if resp.status_code in RETRY_STATUSES and attempt < self.retries:
            delay = self._delay(attempt)
            try:
                delay = max(delay, min(float(resp.headers.get("retry-after", 0)), 30.0))
            except ValueError:
                pass
            return _Retry(reason, delay)
        return BackendReplyError(reason)

    def _capped(self, chunks: Iterator[bytes], deadline: Deadline, limit: int | None = None, truncate: bool = False) -> Iterator[bytes]:
        """The body's chunks, stopping at the deadline and at the size cap (an error, or a cut for error bodies)."""
        limit = self.max_wire_bytes if limit is None else limit
        total = 0
        for chunk in chunks:
            deadline.check()
            total += len(chunk)
            if total > limit:
                if truncate:
                    yield chunk[: max(0, limit - (total - len(chunk)))]
                    return
                raise BackendReplyError(f"the LLM server's reply is larger than {limit // 1024} KB")
            yield chunk

    def _read_json(self, chunks: Iterator[bytes]) -> str:
        from pydantic import ValidationError

        raw = b"".join(chunks)
        try:
            text = Completion.model_validate_json(raw).text
        except ValidationError as exc:
            raise BackendReplyError(f"the LLM server's reply is not a chat completion ({schema_problem(exc)})") from None
        if not text.strip():
            raise BackendReplyError("the LLM server returned an empty answer")
        if len(text) > self.max_answer_chars:
            raise BackendReplyError(f"the LLM server's answer is longer than {self.max_answer_chars} characters")
        return text

    def _read_stream(self, chunks: Iterator[bytes], sink: TokenSink | None) -> str:
        from pydantic import ValidationError

        parts: list[str] = []
        size = 0
        finished = False
        for line in _lines(chunks):
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                finished = True
                break
            try:
                chunk = Chunk.model_validate_json(payload)
            except ValidationError as exc:
                raise BackendReplyError(f"the LLM server sent a malformed stream event ({schema_problem(exc)})") from None
            delta = chunk.text
            if delta:
                size += len(delta)
                if size > self.max_answer_chars:
                    raise BackendReplyError(f"the LLM server's answer is longer than {self.max_answer_chars} characters")
                parts.append(delta)
                if sink:
                    sink(delta)
            if chunk.finished:
                finished = True
        text = "".join(parts)
        if not finished:
            raise BackendReplyError("the LLM stream ended before the answer was complete (truncated stream)")
        if not text.strip():
            raise BackendReplyError("the LLM server returned an empty answer")
        return text


def _where(url: str) -> str:
    """scheme://host:port of a URL: never its path, query or credentials."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname or '?'}{port}"


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Lines of an SSE body (\\n, \\r\\n or \\r), none longer than MAX_LINE_BYTES."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        lines = pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        pending = lines.pop()
        if len(pending) > MAX_LINE_BYTES:
            raise BackendReplyError("the LLM server sent a stream line longer than 256 KB")
        yield from lines
    if pending:
        yield pending
