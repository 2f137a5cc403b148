"""Issue 23, the doors: the watcher's webhook delivery, the state it keeps, and the server's sockets and hosts.

Every test runs the real thing: a loopback webhook receiver (http.server), a real ``torchhelp triage
--watch`` process sent real signals, a real uvicorn with real sockets.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from conftest import CAPTURED

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SHAPE = json.loads((CAPTURED / "cpu" / "linear-after-conv-flatten.json").read_text())["stderr"]
OOM = json.loads((CAPTURED / "cuda" / "cuda-oom-fragmentation.json").read_text())["stderr"]
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("TORCHHELP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TORCHHELP_DENSE", "0")
    monkeypatch.setenv("TORCHHELP_LLM", "none")
    logs = tmp_path / "logs"
    logs.mkdir()
    return {"logs": logs, "state": tmp_path / "state" / "state.sqlite", "tmp": tmp_path}


def write_job(logs: Path, job_id: str, failure: str) -> Path:
    """A settled job folder (backdated ten minutes) ending in ``failure``."""
    job = logs / job_id
    job.mkdir(exist_ok=True)
    path = job / "stdout.log"
    path.write_text("epoch 1 step 50 loss 2.3\n" + failure, encoding="utf-8")
    t = time.time() - 600
    os.utime(path, (t, t))
    return path


def run_once(env: dict[str, Path], **kw: Any) -> tuple[Any, list[Any]]:
    from assistant.triage.watch import watch

    events: list[Any] = []
    kw.setdefault("settle_s", 5.0)
    kw.setdefault("on_event", events.append)
    kw.setdefault("diagnose_groups", False)
    summary = watch([env["logs"]], once=True, state_path=env["state"], **kw)
    return summary, events


# -- (b) no pickle in the state ------------------------------------------------------------------------


class _Payload:
    """Unpickling this creates ``target`` (what a planted state file would do with code execution)."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.target), "w"))


@pytest.mark.parametrize("key", ["grouper", "grouper_json"])
def test_a_state_holding_a_pickle_is_refused_and_never_unpickled(env: dict[str, Path], key: str) -> None:
    from assistant.errors import TriageError
    from assistant.triage.state import TriageState

    target = env["tmp"] / "pwned"
    with TriageState(env["state"]) as state, state.transaction():
        state.put_blob(key, pickle.dumps({"drain": pickle.dumps(_Payload(target)), "groups": _Payload(target)}))
    write_job(env["logs"], "job-a1", SHAPE)
    with pytest.raises(TriageError, match="start fresh"):
        run_once(env)
    assert not target.exists(), "the pickle in the state was unpickled"
    TriageState(env["state"]).close()  # the refusal released the state's lock


def test_grouper_file_is_json_and_a_pickled_one_is_refused(tmp_path: Path) -> None:
    from assistant.errors import TriageError
    from assistant.triage.grouping import Grouper, group_reports
    from assistant.triage.model import JobReport

    reports = [JobReport(job_id=f"j{i}", files=(), status="failed", headline=f"RuntimeError: size mismatch {i} vs {i + 3}",
                         reason="exception", category="shape_mismatch") for i in range(4)]
    assigned, grouper = group_reports(reports)
    path = tmp_path / "grouper.json"
    grouper.save(path)
    data = json.loads(path.read_text())  # plain JSON: clusters with their id, template tokens and size
    assert {"id", "tokens", "size"} <= set(data["clusters"][0])
    again = Grouper.load(path)
    extra = JobReport(job_id="j9", files=(), status="failed", headline="RuntimeError: size mismatch 9 vs 12", reason="exception",
                      category="shape_mismatch")
    assert again.key(extra) == grouper.key(extra) == assigned["j0"]

    target = tmp_path / "pwned"
    path.write_bytes(pickle.dumps(_Payload(target)))
    with pytest.raises(TriageError, match="pickle"):
        Grouper.load(path)
    assert not target.exists()


# -- (a) the webhook: refusals, redirects, caps, a dripping receiver, signals ----------------------------


class Receiver:
    """A loopback webhook: ``script`` holds (status, headers) answers given before plain 200s; every path is recorded."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.script: list[tuple[int, dict[str, str]]] = []
        self.always: tuple[int, dict[str, str]] | None = None
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.lock:
                    receiver.paths.append(self.path)
                    status, headers = receiver.script.pop(0) if receiver.script else (receiver.always or (200, {}))
                    if status == 200:
                        receiver.bodies.append(json.loads(raw))
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", "4")
                self.end_headers()
                self.wfile.write(b"ok!!" if status == 200 else b"nope")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = self.base + "/hooks/T0/B0/secret"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def groups(self) -> list[str]:
        return [b["torchhelp"]["group"] for b in self.bodies]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


class DripReceiver:
    """A webhook that reads the request, then drips its answer's headers one byte every 0.2 s, forever."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"
        self.got_request = threading.Event()
        self.closed = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                self.got_request.set()
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                while not self.closed:
                    conn.sendall(b"a")
                    time.sleep(0.2)
            except OSError:
                return

    def close(self) -> None:
        self.closed = True
        self.sock.close()


def pending_rows(state: Path) -> list[tuple[str, int]]:
    """(group, attempts) of the messages still in the outbox, read straight from the SQLite file."""
    with sqlite3.connect(state) as db:
        rows = db.execute("SELECT payload, attempts FROM pending ORDER BY id").fetchall()
    return [(json.loads(p)["torchhelp"]["group"], a) for p, a in rows]


@pytest.mark.parametrize("refusal", [(400, {}), (404, {}), (307, {"Location": "/stolen"}), (301, {"Location": "http://example.invalid/x"})])
def test_a_refused_or_redirected_message_is_dropped_and_the_next_goes_out(env: dict[str, Path], receiver: Receiver,
                                                                         refusal: tuple[int, dict[str, str]]) -> None:
    write_job(env["logs"], "job-a1", SHAPE)
    write_job(env["logs"], "job-b1", OOM)
    receiver.script = [refusal]
    summary, events = run_once(env, webhook=receiver.url)
    assert summary.new_groups == 2 and summary.messages_sent == 1 and summary.pending == 0 and summary.dropped == 1
    assert len(receiver.groups()) == 1, "the message after the refused one was delivered in the same poll"
    assert "/stolen" not in receiver.paths, "a redirect was followed"
    dropped = [e for e in events if e.kind == "send_dropped"]
    assert len(dropped) == 1 and str(refusal[0]) in dropped[0].text
    if refusal[0] in (301, 307):
        assert "redirect" in dropped[0].text and "not followed" in dropped[0].text
    # a restart sends nothing again
    summary, _ = run_once(env, webhook=receiver.url)
    assert summary.messages_sent == 0 and len(receiver.bodies) == 1


def test_transient_failures_keep_order_and_a_message_is_dropped_after_the_cap(env: dict[str, Path], receiver: Receiver) -> None:
    from assistant.triage.webhook import MAX_DELIVERY_ROUNDS

    write_job(env["logs"], "job-a1", SHAPE)
    write_job(env["logs"], "job-b1", OOM)
    receiver.always = (503, {"Retry-After": "0"})
    summary, events = run_once(env, webhook=receiver.url)
    assert summary.pending == 2 and summary.messages_sent == 0 and summary.dropped == 0
    first, second = [g for g, _ in pending_rows(env["state"])]
    assert pending_rows(env["state"]) == [(first, 1), (second, 0)], "the round stopped at the first transient failure"
    for _ in range(MAX_DELIVERY_ROUNDS - 2):  # the receiver stays down: the first message fails poll after poll
        run_once(env, webhook=receiver.url)
    assert pending_rows(env["state"]) == [(first, MAX_DELIVERY_ROUNDS - 1), (second, 0)]
    receiver.always = None
    receiver.script = [(503, {"Retry-After": "0"})] * 4  # one more failed round for the first message: the cap
    summary, events = run_once(env, webhook=receiver.url)
    assert summary.dropped == 1 and summary.messages_sent == 1 and summary.pending == 0
    assert receiver.groups() == [second]
    assert any(e.kind == "send_dropped" and f"after {MAX_DELIVERY_ROUNDS} polls" in e.text for e in events)


def test_408_and_429_are_retried_not_dropped(receiver: Receiver) -> None:
    from assistant.triage.webhook import post

    receiver.script = [(408, {}), (429, {"Retry-After": "0"})]
    d = post(receiver.url, {"text": "x"}, backoff_s=0.01)
    assert d.ok and d.attempts == 3


def test_a_dripping_receiver_cannot_hold_a_delivery_past_its_deadline() -> None:
    from assistant.triage.webhook import post

    drip = DripReceiver()
    try:
        t0 = time.monotonic()
        d = post(drip.url, {"text": "x"}, deadline_s=1.5, timeout_s=1.0, backoff_s=0.1)
        took = time.monotonic() - t0
    finally:
        drip.close()
    assert not d.ok and not d.permanent and "deadline" in d.error
    assert took < 2.5, f"one delivery took {took:.1f} s past a 1.5 s deadline"


def _watch_process(env: dict[str, Path], url: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "assistant", "triage", "--watch", str(env["logs"]), "--webhook", url, "--state", str(env["state"]),
           "--settle", "5", "--interval", "30", "--llm", "none"]
    return subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signals_end_the_watcher_within_2s_mid_delivery_and_the_message_stays(env: dict[str, Path], signum: int) -> None:
    write_job(env["logs"], "job-a1", SHAPE)
    drip = DripReceiver()
    proc = _watch_process(env, drip.url)
    try:
        assert drip.got_request.wait(60), "the watcher never posted"
        time.sleep(0.5)  # well inside the dripping answer
        t0 = time.monotonic()
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=10)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        drip.close()
    text = " ".join(out.decode("utf-8", "replace").split())  # rich wraps lines at the terminal width
    assert took < 2.0, f"the watcher took {took:.1f} s to stop on {signal.Signals(signum).name}:\n{text}"
    assert "stopped by" in text and "kept for the next run" in text, text
    assert len(pending_rows(env["state"])) == 1, "the undelivered message left the outbox"
