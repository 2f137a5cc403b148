"""A real loopback webhook for tests: a ThreadingHTTPServer on 127.0.0.1 that records what the watcher posts."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = int | tuple[int, dict[str, str]]  # a status, or a status with headers


class Receiver:
    """Records JSON bodies (of 200 answers), request paths and the request count.

    ``script`` holds answers given before plain 200s (``[500, 500]`` or ``[(307, {"Location": ...})]``); ``always``, when
    set, is the answer once the script is spent. A 429 without headers says ``Retry-After: 0``."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.requests = 0
        self.script: list[Answer] = []
        self.always: Answer | None = None
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.lock:
                    receiver.requests += 1
                    receiver.paths.append(self.path)
                    answer = receiver.script.pop(0) if receiver.script else (receiver.always or 200)
                    status, headers = answer if isinstance(answer, tuple) else (answer, {"Retry-After": "0"} if answer == 429 else {})
                    if status == 200:
                        receiver.bodies.append(json.loads(raw))
                body = b"ok!!" if status == 200 else b"nope"
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = self.base + "/hooks/T000/B000/secret"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self) -> list[tuple[str, str, int]]:
        return [(b["torchhelp"]["event"], b["torchhelp"]["group"], b["torchhelp"]["job_count"]) for b in self.bodies]

    def groups(self) -> list[str]:
        return [b["torchhelp"]["group"] for b in self.bodies]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
