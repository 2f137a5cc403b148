"""A FastAPI app under a real uvicorn on a pre-bound loopback socket, for tests that need a live server (a browser, raw HTTP)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def served_app(make_app: Callable[[int], Any], ready_within_s: float = 120.0) -> Iterator[str]:
    """Run ``make_app(port)`` under uvicorn on 127.0.0.1 and yield its base URL once ``/readyz`` answers 200; stop it after.

    The socket is bound first so the port is known before the app is built (its config may carry the port)."""
    import httpx
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(make_app(port), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + ready_within_s
    try:
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline or not thread.is_alive():
                raise AssertionError("the server did not become ready")
            time.sleep(0.05)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
