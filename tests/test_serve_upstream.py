"""`torchhelp serve` with an upstream LLM that never finishes: concurrent requests still end in time.

A real server (uvicorn on loopback) has its openai backend pointed at a real scripted HTTP server
(tests/llm_servers.py) that either hangs or drips a valid answer one byte at a time. The dripping
upstream is what tells a total deadline from a per-read one: every read succeeds quickly, so only a
deadline on the whole answer ends the request in time. scripts/bench_serve_upstream.py measures the
same under sustained load for benchmarks/serve_upstream.json.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import httpx  # noqa: E402

from assistant.serve.config import ServeConfig  # noqa: E402
from conftest import CAPTURES  # noqa: E402
from llm_servers import MisbehavingServer  # noqa: E402
from test_serve import live  # noqa: E402

DEADLINE_S = 2.0  # TORCHHELP_LLM_TIMEOUT of the server under test
# Generous for 2 shared cores: the deterministic diagnosis, queueing for the engine threads, and one
# retry's backoff all fit; a per-read timeout against the drip (0.2 s a byte, ~150-byte answer) does not.
MARGIN_S = 8.0
FALLBACK = "Showing the deterministic diagnosis"


def _error_text(slug: str) -> str:
    return next(c["stderr"] for c in CAPTURES if c["slug"] == slug)


def _notes_of_stream(raw: str) -> list[str]:
    """The notes of the diagnosis in a streamed chat answer (its last chunk carries `torchhelp`)."""
    notes: list[str] = []
    for line in raw.splitlines():
        if line.startswith("data: {"):
            final = json.loads(line[6:]).get("torchhelp")
            notes = final["notes"] if final else notes
    return notes


@pytest.mark.parametrize(("mode", "delay"), [("timeout", 30.0), ("drip", 0.2)], ids=["hang", "drip"])
def test_failing_upstream_ends_in_deterministic_answers_within_the_deadline(th_home, mode: str, delay: float) -> None:
    texts = [_error_text("linear-after-conv-flatten"), _error_text("gather-dim-out-of-range")]
    requests = [
        ("/v1/diagnose", {"text": texts[0], "llm": "openai"}),
        ("/v1/diagnose", {"text": texts[1], "llm": "openai"}),
        ("/v1/diagnose", {"text": texts[0]}),  # the server's default backend is openai too
        ("/v1/chat/completions", {"model": "torchhelp:openai", "messages": [{"role": "user", "content": texts[1]}]}),
        ("/v1/chat/completions", {"model": "torchhelp:openai", "messages": [{"role": "user", "content": texts[0]}], "stream": True}),
    ]
    env = {"TORCHHELP_LLM_URL": "", "TORCHHELP_LLM_TIMEOUT": f"{DEADLINE_S:g}"}
    with MisbehavingServer(mode, delay=delay) as upstream:
        env["TORCHHELP_LLM_URL"] = upstream.url
        with live(ServeConfig(request_timeout_s=120), llm="openai", dense=False, env=env) as server:

            def send(path_body: tuple[str, dict]) -> tuple[httpx.Response, float]:
                path, body = path_body
                t0 = time.monotonic()
                # The client gives up past the bound, so a server without a total deadline fails fast, not in minutes.
                r = httpx.post(server.url + path, json=body, timeout=DEADLINE_S + MARGIN_S + 5)
                return r, time.monotonic() - t0

            with ThreadPoolExecutor(len(requests)) as pool:
                futures = [pool.submit(send, rb) for rb in requests]
                health: list[float] = []
                while not all(f.done() for f in futures):  # the server keeps answering while every LLM call hangs
                    t0 = time.monotonic()
                    assert httpx.get(server.url + "/healthz", timeout=10).status_code == 200
                    health.append(time.monotonic() - t0)
                    time.sleep(0.2)
                answers = [f.result() for f in futures]

    assert upstream.calls >= len(requests)  # every request did try the upstream
    assert health, "no /healthz probe ran while the LLM requests were pending"
    assert max(health) < 5.0, f"/healthz took {max(health):.2f} s during the fault"
    for (path, body), (r, elapsed) in zip(requests, answers, strict=True):
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
        assert elapsed < DEADLINE_S + MARGIN_S, f"{path} took {elapsed:.1f} s with a {DEADLINE_S:g} s LLM deadline ({mode})"
        if body.get("stream"):
            notes = _notes_of_stream(r.text)
            assert FALLBACK in r.text  # the streamed Markdown shows the note as well
        elif path == "/v1/diagnose":
            notes = r.json()["notes"]
        else:
            notes = r.json()["torchhelp"]["notes"]
            assert FALLBACK in r.json()["choices"][0]["message"]["content"]
        assert any(FALLBACK in n and "openai" in n for n in notes), (path, notes)
