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
from pathlib import Path
from typing import Any

import pytest

from conftest import CAPTURED
from webhook_receiver import Receiver

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


# -- (c) serve: unfinished connections, chat size, Host and Origin --------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, subprocess.Popen[bytes]]]:
    """A real tokenless `torchhelp serve` on loopback: 1 s read deadline, at most 40 connections."""
    home = tmp_path_factory.mktemp("serve-home")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "TORCHHELP_SERVE_TOKEN"}
    env.update(TORCHHELP_HOME=str(home), TORCHHELP_LLM="none", TORCHHELP_DENSE="0", PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "assistant", "serve", "--port", str(port), "--read-timeout-s", "1",
                             "--max-connections", "40", "--no-access-log", "--log-level", "warning"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if _status(port, "GET", "/healthz") == 200:
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the server did not start")
    yield url, port, proc
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


def _request(port: int, method: str, path: str, *, headers: dict[str, str] | None = None, body: bytes = b"",
             timeout: float = 30.0) -> tuple[int, bytes]:
    """One raw HTTP/1.1 request with exactly these headers (Host included): (status, body)."""
    heads = {"Host": f"127.0.0.1:{port}", "Connection": "close", **(headers or {})}
    if body or method == "POST":
        heads["Content-Length"] = str(len(body))
    raw = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in heads.items()) + "\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw.encode("latin-1") + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), rest


def _status(port: int, method: str, path: str, **kw: Any) -> int | None:
    try:
        return _request(port, method, path, timeout=2.0, **kw)[0]
    except (OSError, IndexError, ValueError):
        return None


def _closed_within(sock: socket.socket, seconds: float) -> bytes | None:
    """What the server sent before closing the socket, or None when it was still open after ``seconds``."""
    sock.settimeout(0.1)
    got = b""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            return got
        if not chunk:
            return got
        got += chunk
    return None


def test_connections_that_never_finish_are_closed_and_the_server_keeps_answering(server: tuple[str, int, Any]) -> None:
    _, port, proc = server
    fds_before = len(os.listdir(f"/proc/{proc.pid}/fd"))
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(30)]
    dripping = [socket.create_connection(("127.0.0.1", port)) for _ in range(30)]
    for s in dripping:
        s.sendall(b"POST /v1/diagnose HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    stop = threading.Event()

    def drip() -> None:
        while not stop.wait(0.2):
            for s in dripping:
                try:
                    s.sendall(b"a")
                except OSError:
                    pass

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    try:
        t0 = time.monotonic()
        assert _status(port, "GET", "/healthz") in (200, 503), "the server stopped answering under 60 open sockets"
        assert time.monotonic() - t0 < 2.0
        time.sleep(max(0.0, 0.75 - (time.monotonic() - t0)))  # refused ones are closed 0.5 s after their 503; the rest wait 1 s
        fds_during = len(os.listdir(f"/proc/{proc.pid}/fd"))
        assert fds_during - fds_before <= 45, f"{fds_during - fds_before} descriptors held for 60 sockets (limit 40)"
        outcomes = [_closed_within(s, 3.0) for s in silent + dripping]  # read deadline 1 s
        still_open = sum(o is None for o in outcomes)
        assert still_open == 0, f"{still_open} of 60 unfinished connections were still open 3 s after a 1 s read deadline"
        statuses = {o.split(b" ", 2)[1] for o in outcomes if o}
        assert statuses <= {b"408", b"503"}, statuses
        assert b"408" in statuses, "a request that had begun was not told it timed out"
        assert _status(port, "GET", "/healthz") == 200
        assert time.monotonic() - t0 < 6.0
    finally:
        stop.set()
        for s in silent + dripping:
            s.close()


def test_a_slow_body_is_cut_at_the_read_deadline(server: tuple[str, int, Any]) -> None:
    _, port, _ = server
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST /v1/diagnose HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"te")
        t0 = time.monotonic()
        assert _closed_within(s, 4.0) is not None, "a body that never finishes kept its connection"
        assert time.monotonic() - t0 < 3.0


def test_a_huge_chat_is_refused_with_413_at_once(server: tuple[str, int, Any]) -> None:
    from assistant.serve.openai_chat import MAX_CHAT_MESSAGES

    _, port, _ = server
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"hello number {i}"} for i in range(1000)]
    body = json.dumps({"model": "torchhelp", "messages": messages}).encode()
    t0 = time.monotonic()
    status, answer = _request(port, "POST", "/v1/chat/completions", headers={"Content-Type": "application/json"}, body=body)
    assert status == 413 and json.loads(answer)["error"]["code"] == "chat_too_large"
    assert str(MAX_CHAT_MESSAGES) in json.loads(answer)["error"]["message"]
    assert time.monotonic() - t0 < 2.0


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "10.0.0.7", "127.0.0.1.nip.io"])
def test_a_foreign_host_is_refused_on_a_tokenless_server(server: tuple[str, int, Any], host: str) -> None:
    _, port, _ = server
    status, answer = _request(port, "GET", "/healthz", headers={"Host": host})
    assert status == 403 and json.loads(answer)["error"]["code"] == "host_not_allowed"
    status, _ = _request(port, "POST", "/v1/triage", headers={"Host": host, "Content-Type": "multipart/form-data; boundary=x"},
                         body=b"--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.log\"\r\n\r\nboom\r\n--x--\r\n")
    assert status == 403


@pytest.mark.parametrize("headers", [{"Origin": "http://evil.example"}, {"Origin": "null"},
                                     {"Origin": "http://127.0.0.1:1"}, {"Sec-Fetch-Site": "cross-site"},
                                     {"Sec-Fetch-Site": "same-site"}])
def test_a_cross_origin_upload_is_refused_on_a_tokenless_server(server: tuple[str, int, Any], headers: dict[str, str]) -> None:
    _, port, _ = server
    form = b"--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"job-1.log\"\r\n\r\nRuntimeError: boom\r\n--x--\r\n"
    status, answer = _request(port, "POST", "/v1/triage", headers={"Content-Type": "multipart/form-data; boundary=x", **headers},
                              body=form)
    assert status == 403 and json.loads(answer)["error"]["code"] == "cross_origin"


def test_loopback_hosts_and_same_origin_requests_pass(server: tuple[str, int, Any]) -> None:
    _, port, _ = server
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}"):
        assert _request(port, "GET", "/healthz", headers={"Host": host})[0] == 200, host
    # the server's own page posting (same origin): past the guard, refused only by the chat cap
    messages = [{"role": "user", "content": "x"}] * 101
    status, _ = _request(port, "POST", "/v1/chat/completions", body=json.dumps({"model": "torchhelp", "messages": messages}).encode(),
                         headers={"Content-Type": "application/json", "Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin"})
    assert status == 413
    # the page's own Resolve form (Referrer-Policy no-referrer: Chromium sends Origin: null, Sec-Fetch-Site same-origin)
    status, _ = _request(port, "POST", "/v1/chat/completions", body=json.dumps({"model": "torchhelp", "messages": messages}).encode(),
                         headers={"Content-Type": "application/json", "Origin": "null", "Sec-Fetch-Site": "same-origin"})
    assert status == 413


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_long_chat_costs_no_more_than_a_short_one(server: tuple[str, int, Any]) -> None:
    """Per-request work is bounded: 100 messages of 8 KB logs cost about what 32 do (only the newest user
    messages are searched for the error; every one of them was before, 11 CPU s for 1,000)."""
    from assistant.serve.openai_chat import ERROR_SCAN_MESSAGES, MAX_CHAT_MESSAGES

    _, port, proc = server
    end = time.monotonic() + 120
    while _status(port, "GET", "/readyz") != 200:
        assert time.monotonic() < end, "the engine did not load"
        time.sleep(0.2)

    def cost(n: int) -> float:
        log = "\n".join(f"epoch {{i}} step {j} loss 2.{j} lr 0.001 grad_norm 1.{j} NCCL INFO ring {j}" for j in range(110))
        chat = [{"role": "user" if i % 2 == 0 else "assistant", "content": log.replace("{i}", str(i))} for i in range(n)]
        body = json.dumps({"model": "torchhelp", "messages": chat}).encode()
        spent = []
        for _ in range(2):
            before = _cpu_s(proc.pid)
            status, _ = _request(port, "POST", "/v1/chat/completions", headers={"Content-Type": "application/json"}, body=body)
            spent.append(_cpu_s(proc.pid) - before)
            assert status == 200
        return min(spent)

    short, long = cost(2 * ERROR_SCAN_MESSAGES), cost(MAX_CHAT_MESSAGES)
    assert long < 1.8 * short + 0.05, f"{MAX_CHAT_MESSAGES} messages cost {long:.2f} CPU s, {2 * ERROR_SCAN_MESSAGES} cost {short:.2f}"
