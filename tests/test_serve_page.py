"""The web page at `/` of `torchhelp serve`: a REAL headless Chromium against a REAL uvicorn server.

The server is `create_app(...)` under uvicorn on a free loopback port, with a token and a 1 MiB body
limit, no LLM. The browser is Debian's `/usr/bin/chromium` driven by Playwright. Error texts are real
captures (`eval/captured/**.json` `stderr`). One test feeds the page a crafted reply (through
Playwright's request routing) whose every field carries markup, to prove the page renders server
text as inert text.

Every test also checks: no console errors or page errors, no failed requests, no HTTP error
responses beyond the ones the step provokes, and no request to another origin.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import httpx  # noqa: E402

from conftest import CAPTURES, ROOT  # noqa: E402
from loopback_server import served_app  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
STATIC = ROOT / "assistant" / "serve" / "static"
TOKEN = "page-test-token-3b7d91c4"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LIMIT = 1 << 20  # the server's body limit here: a 1.5 MB paste (under the page's own 4 MB cap) gets a real 413
PAGE_CAP = 4 * 1024 * 1024  # MAX_BYTES in app.js
CSP = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'"
CITATION = re.compile(r"\[([a-z0-9][\w:.-]*)\]")


def capture(slug: str) -> dict[str, Any]:
    return next(c for c in CAPTURES if c["slug"] == slug)


LINEAR = capture("linear-after-conv-flatten")  # shape_mismatch
GATHER = capture("gather-dim-out-of-range")  # index_error


def knowledge_ids() -> set[str]:
    """Every knowledge document id (front matter `id:`)."""
    ids = set()
    for path in (ROOT / "knowledge").rglob("*.md"):
        m = re.search(r"^id:\s*(\S+)\s*$", path.read_text(encoding="utf-8"), re.M)
        if m:
            ids.add(m.group(1).strip("'\""))
    return ids


# --------------------------------------------------------------------------- the server and the browser


@pytest.fixture(scope="module")
def server(th_home: Path) -> Iterator[str]:
    """`create_app` under a real uvicorn on a pre-bound loopback socket; yields the base URL."""
    from assistant.serve.app import create_app
    from assistant.serve.config import ServeConfig
    from assistant.settings import load_settings

    settings = load_settings(env={**os.environ, "TORCHHELP_HOME": str(th_home)}, llm="none")
    config = ServeConfig(token=TOKEN, max_body_bytes=LIMIT, request_timeout_s=60)
    with served_app(lambda port: create_app(config.with_(port=port), settings=settings), ready_within_s=180) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium through Playwright; missing => skip, or fail when CI requires it."""
    required = bool(os.environ.get("TORCHHELP_REQUIRE_CHROMIUM"))
    if not CHROMIUM.exists():
        if required:  # CI installs it: a missing browser must fail there, not skip
            pytest.fail("TORCHHELP_REQUIRE_CHROMIUM is set but /usr/bin/chromium is missing")
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if required:
            pytest.fail("TORCHHELP_REQUIRE_CHROMIUM is set but playwright is not installed")
        pytest.skip("playwright is not installed")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


class Watch:
    """Everything the page does that a test must see: requests, failures, console, page errors."""

    def __init__(self, page: Any, origin: str) -> None:
        self.origin = origin
        self.requests: list[str] = []
        self.chat_bodies: list[dict[str, Any]] = []
        self.failed: list[str] = []
        self.bad: list[str] = []
        self.console: list[str] = []
        page.on("request", self._request)
        page.on("requestfailed", lambda r: self.failed.append(f"{r.url} {r.failure}"))
        page.on("response", lambda r: self.bad.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}") if m.type in ("error", "warning", "assert") else None)
        page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))

    def _request(self, request: Any) -> None:
        self.requests.append(request.url)
        if request.url.endswith("/v1/chat/completions") and request.method == "POST":
            self.chat_bodies.append(json.loads(request.post_data or "{}"))

    def take_expected(self, status: int) -> None:
        """The step provoked exactly one HTTP `status` from the chat route (and Chromium's console line for it)."""
        assert self.bad == [f"{status} {self.origin}/v1/chat/completions"], self.bad
        assert len(self.console) == 1 and f"status of {status}" in self.console[0], self.console
        self.bad.clear()
        self.console.clear()

    def assert_clean(self) -> None:
        foreign = [u for u in self.requests if not u.startswith(self.origin + "/")]
        assert not foreign, f"requests to other origins: {foreign}"
        assert not self.failed, f"failed requests: {self.failed}"
        assert not self.bad, f"HTTP errors: {self.bad}"
        assert not self.console, f"console errors: {self.console}"


def open_page(browser: Any, url: str, width: int = 1280) -> tuple[Any, Any, Watch]:
    context = browser.new_context(viewport={"width": width, "height": 900}, permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    page.set_default_timeout(90_000)  # a cold diagnosis on a loaded 2-core CI box can take seconds
    watch = Watch(page, url)
    page.goto(f"{url}/", wait_until="load")
    return context, page, watch


def status_text(page: Any) -> str:
    return page.inner_text("#status")


def no_horizontal_scroll(page: Any) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth"))


# --------------------------------------------------------------------------- the tests


def test_static_files_are_public_and_csp_is_strict(server: str) -> None:
    page = httpx.get(f"{server}/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert f'content="{CSP}"' in html
    # No inline script or style (the CSP forbids them) and nothing from another origin.
    assert re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html) is None and "<style" not in html and " style=" not in html
    assert not re.search(r"""(?:src|href)=["'](?:https?:)?//""", html)
    for name in ("app.js", "style.css", "favicon.svg"):
        asset = httpx.get(f"{server}/static/{name}")  # no token: the page must load before one is entered
        assert asset.status_code == 200, name
        assert asset.content == (STATIC / name).read_bytes(), name


def test_paste_diagnose_copy_and_follow_up(server: str, browser: Any) -> None:
    text = LINEAR["stderr"]
    expected = httpx.post(f"{server}/v1/diagnose", json={"text": text}, headers=AUTH, timeout=90).json()
    assert expected["category"] == LINEAR["category"] == "shape_mismatch"
    assert expected["sources"], "the diagnosis must cite a source"
    context, page, watch = open_page(browser, server)
    try:
        assert page.get_attribute('meta[http-equiv="Content-Security-Policy"]', "content") == CSP
        assert page.evaluate("getComputedStyle(document.body).maxWidth") == "1024px"  # style.css applied under the CSP
        for field in ("#token", "#error-text", "#file-input", "#followup"):  # every control has a label
            assert page.locator(f'label[for="{field[1:]}"]').count() == 1, field

        # Without a token: the server says 401 and the page asks for one.
        page.fill("#error-text", text)
        page.click("#submit")
        page.wait_for_selector("#token-box[open]")
        assert "access token" in status_text(page)
        assert page.evaluate("document.activeElement.id") == "token"
        watch.take_expected(401)

        # Entering the token resumes the request; the token lives in sessionStorage only.
        page.fill("#token", TOKEN)
        page.click("#token-save")
        page.wait_for_selector("#result:not([hidden])")
        assert page.evaluate("sessionStorage.getItem('torchhelp.token')") == TOKEN
        assert page.evaluate("localStorage.length") == 0
        assert watch.chat_bodies[-1] == {"model": "torchhelp", "messages": [{"role": "user", "content": text}], "stream": False}

        # The diagnosis as the API gives it.
        assert page.inner_text("#result-category") == "shape_mismatch"
        assert page.inner_text("#result-title") == expected["title"]
        # The page rounds as JavaScript's Math.round does (halves up), not as Python's round (halves to even): 0.885 → 89%.
        assert page.inner_text("#result-confidence") == f"{math.floor(expected['confidence'] * 100 + 0.5)}%"
        assert page.inner_text("#result-error") == expected["error"]
        shown_ids = page.locator("#result-sources li.source").evaluate_all("els => els.map(e => e.dataset.sourceId)")
        assert shown_ids == [s["id"] for s in expected["sources"]] and shown_ids
        assert shown_ids[0] in page.inner_text("#result-sources") and expected["sources"][0]["path"] in page.inner_text("#result-sources")
        assert page.locator("#result-fixes > li").count() == len(expected["fixes"]) > 0
        assert page.locator("#result-evidence > li").count() == len(expected["evidence"])
        assert "Diagnosed: shape_mismatch" in status_text(page)

        # Copy the first fix's code: the button says so and the clipboard holds exactly that code.
        first = next(i for i, f in enumerate(expected["fixes"]) if f["code"])
        button = page.locator("#result-fixes > li").nth(first).locator("button.copy")
        assert button.get_attribute("aria-label")
        button.click()
        page.wait_for_function("b => b.textContent === 'Copied'", arg=button.element_handle())
        assert page.evaluate("navigator.clipboard.readText()") == expected["fixes"][first]["code"]

        # A follow-up: the whole conversation goes back (the API is stateless), the reply is shown.
        page.fill("#followup", "why?")
        page.click("#ask")
        reply = page.locator("#conversation li.assistant").first
        reply.wait_for()
        sent = watch.chat_bodies[-1]["messages"]
        assert [m["role"] for m in sent] == ["user", "assistant", "user"]
        assert sent[0]["content"] == text and sent[2]["content"] == "why?" and sent[1]["content"].strip()
        answer = reply.inner_text()
        assert len(answer) > 40, answer
        cited = set(CITATION.findall(answer))
        assert cited and cited <= knowledge_ids(), cited
        assert page.locator("#conversation li.user").inner_text().endswith("why?")
        assert page.input_value("#followup") == ""
        assert status_text(page) == "Answered."

        # Readable from a phone to a desktop: nothing wider than the viewport.
        assert no_horizontal_scroll(page)
        page.set_viewport_size({"width": 360, "height": 740})
        assert no_horizontal_scroll(page)
        assert page.locator("#submit").bounding_box()["width"] > 0
        watch.assert_clean()
    finally:
        context.close()


def test_file_input_drop_size_cap_binary_and_413(server: str, browser: Any, tmp_path: Path) -> None:
    context, page, watch = open_page(browser, server, width=360)
    try:
        page.evaluate("t => sessionStorage.setItem('torchhelp.token', t)", TOKEN)

        # The file input reads a log as text.
        log = tmp_path / "train.log"
        log.write_text(GATHER["stderr"], encoding="utf-8")
        page.set_input_files("#file-input", str(log))
        page.wait_for_function("t => document.getElementById('error-text').value === t", arg=GATHER["stderr"])
        assert "Loaded train.log" in status_text(page)

        # Dropping a file anywhere on the drop zone does the same.
        page.fill("#error-text", "")
        transfer = page.evaluate_handle(
            "t => { const dt = new DataTransfer(); dt.items.add(new File([t], 'rank0.log', {type: 'text/plain'})); return dt; }", LINEAR["stderr"])
        page.dispatch_event("#drop-zone", "drop", {"dataTransfer": transfer})
        page.wait_for_function("t => document.getElementById('error-text').value === t", arg=LINEAR["stderr"])
        assert "Loaded rank0.log" in status_text(page)

        # A log over the page's cap: only its tail is read (where the traceback is), with a clear message.
        lines = [ln for c in CAPTURES for ln in c["stderr"].splitlines() if ln.strip()]
        filler, size = [], 0
        while size < PAGE_CAP + (1 << 20):
            for ln in lines:
                filler.append(ln)
                size += len(ln) + 1
        big = ("\n".join(filler) + "\n" + GATHER["stderr"]).encode()
        page.set_input_files("#file-input", {"name": "huge.log", "mimeType": "text/plain", "buffer": big})
        page.wait_for_function("() => document.getElementById('status').textContent.includes('huge.log')")
        assert "only its last 4.0 MB were read" in status_text(page)
        value = page.input_value("#error-text")
        assert value.endswith(GATHER["stderr"]) and len(value.encode()) <= PAGE_CAP + 4  # + a replacement character where the cut split one

        # A compressed log is refused as not text.
        page.set_input_files("#file-input", {"name": "train.log.gz", "mimeType": "application/gzip", "buffer": gzip.compress(GATHER["stderr"].encode() * 50)})
        page.wait_for_function("() => document.getElementById('status').textContent.includes('train.log.gz')")
        assert "does not look like a text log" in status_text(page)

        # Pasting more than the page sends is refused before any request.
        requests_before = len(watch.requests)
        page.evaluate("n => { document.getElementById('error-text').value = 'x'.repeat(n); }", PAGE_CAP + 10)
        page.click("#submit")
        assert "this page sends at most 4.0 MB" in status_text(page)
        assert len(watch.requests) == requests_before

        # 1.5 MB of real log lines: under the page's cap, over this server's 1 MiB body limit -> a real 413.
        paste = "\n".join(filler)[: 3 * LIMIT // 2] + "\n" + GATHER["stderr"]
        page.evaluate("t => { document.getElementById('error-text').value = t; }", paste)
        page.click("#submit")
        page.wait_for_function("() => document.getElementById('status').textContent.startsWith('Too large')")
        watch.take_expected(413)
        assert page.is_hidden("#result")

        # The same page then diagnoses a normal paste (Ctrl+Enter submits).
        page.evaluate("() => { document.getElementById('error-text').value = ''; }")  # fill() over 1.5 MB is slow
        page.fill("#error-text", GATHER["stderr"])
        page.press("#error-text", "Control+Enter")
        page.wait_for_selector("#result:not([hidden])")
        assert page.inner_text("#result-category") == GATHER["category"]
        assert no_horizontal_scroll(page)  # 360 px wide with a diagnosis on screen

        # Start over clears everything.
        page.click("#clear")
        assert page.is_hidden("#result") and page.is_hidden("#chat") and page.input_value("#error-text") == ""
        watch.assert_clean()
    finally:
        context.close()


HOSTILE = '<img src="/pwned.png" onerror="window.__pwned=1"><script>window.__pwned=2</script>'


def test_server_text_is_rendered_as_text_and_network_errors_are_reported(server: str, browser: Any) -> None:
    """A crafted reply whose every field carries markup: the page shows it literally, runs nothing, loads nothing."""
    diagnosis = {
        "category": f"shape_mismatch{HOSTILE}", "title": f"Title {HOSTILE}", "summary": "", "cause": f"Cause `code` {HOSTILE}",
        "fixes": [{"title": f"Fix {HOSTILE}", "detail": f"detail {HOSTILE}", "code": f"x = 1  # {HOSTILE}", "sources": [f"doc{HOSTILE}"]}],
        "evidence": [{"kind": f"k{HOSTILE}", "text": f"t {HOSTILE}"}],
        "sources": [{"id": f"id{HOSTILE}", "title": f"T {HOSTILE}", "path": f"p/{HOSTILE}.md", "score": 1.0}],
        "confidence": 0.5, "backend": "none", "rule": None, "notes": [f"note {HOSTILE}"], "error": f"RuntimeError: {HOSTILE}",
        "location": f"a.py:1 {HOSTILE}", "facts": {},
    }
    content = f"## Heading {HOSTILE}\n\n**bold** {HOSTILE} [link](javascript:alert(1))\n\n- item {HOSTILE}\n\n```python\nprint('{HOSTILE}')\n```\n"
    reply = {"id": "chatcmpl-0", "object": "chat.completion", "created": 0, "model": "torchhelp",
             "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}], "torchhelp": diagnosis}
    context, page, watch = open_page(browser, server)
    try:
        mode = {"abort": False}

        def handle(route: Any) -> None:
            if mode["abort"]:
                route.abort()
            else:
                route.fulfill(status=200, content_type="application/json", body=json.dumps(reply))

        page.route("**/v1/chat/completions", handle)
        page.fill("#error-text", LINEAR["stderr"])
        page.click("#submit")
        page.wait_for_selector("#result:not([hidden])")
        page.fill("#followup", "why?")
        page.click("#ask")
        page.locator("#conversation li.assistant").wait_for()
        for sel in ("#result", "#conversation"):
            assert page.locator(f"{sel} img, {sel} script, {sel} a, {sel} [onerror]").count() == 0, sel
        assert HOSTILE in page.inner_text("#result-title") and HOSTILE in page.inner_text("#result-fixes pre")
        assert HOSTILE in page.inner_text("#result-sources") and HOSTILE in page.inner_text("#result-evidence")
        answer = page.locator("#conversation li.assistant")
        assert answer.locator("h4").inner_text() == f"Heading {HOSTILE}"
        assert answer.locator("strong").inner_text() == "bold"
        assert "link (javascript:alert(1))" in answer.inner_text()
        assert answer.locator("pre code").inner_text() == f"print('{HOSTILE}')"
        assert page.evaluate("window.__pwned") is None
        assert not any("pwned" in u for u in watch.requests)

        # A network failure is reported in the status line, and the question is kept to resend.
        mode["abort"] = True
        page.fill("#followup", "and now?")
        page.click("#ask")
        page.wait_for_function("() => document.getElementById('status').textContent.includes('network error')")
        assert page.input_value("#followup") == "and now?" and page.locator("#conversation li.user").count() == 1
        assert len(watch.failed) == 1 and watch.failed[0].startswith(f"{server}/v1/chat/completions")
        watch.failed.clear()
        watch.console = [c for c in watch.console if "net::ERR_FAILED" not in c]
        watch.assert_clean()
    finally:
        context.close()
