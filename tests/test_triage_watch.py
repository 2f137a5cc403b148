"""Watch mode end to end: real job folders written over time, a real loopback webhook receiver.

Every poll is ``watch(once=True)`` with the state in a temporary file, so a "restart" is simply
the next call. Failure texts are real captures from eval/captured/.
"""

from __future__ import annotations

import json
import os
import signal
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
TORCHRUN = json.loads((CAPTURED / "multi_gpu" / "nccl-allreduce-bincount-shape-mismatch.json").read_text())["stderr"]


# -- a real HTTP receiver ----------------------------------------------------------------------


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("TORCHHELP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TORCHHELP_DENSE", "0")
    monkeypatch.setenv("TORCHHELP_LLM", "none")
    logs = tmp_path / "logs"
    logs.mkdir()
    return {"logs": logs, "state": tmp_path / "state" / "state.sqlite"}


def write_job(logs: Path, job_id: str, failure: str | None, *, age_s: float = 600.0, name: str = "stdout.log") -> Path:
    """A job folder: some training progress, then the failure (or a clean end). ``age_s`` backdates
    the files so they count as settled (0 = being written right now)."""
    job = logs / job_id
    job.mkdir(exist_ok=True)
    lines = [f"2024-05-0{1 + len(job_id) % 8} 10:00:0{i} | INFO | epoch 1 step {i * 50} loss {2.3 - i * 0.1:.2f}" for i in range(6)]
    text = "\n".join(lines) + "\n" + (failure if failure is not None else "Training finished: best val acc 0.912, saved checkpoint\n")
    path = job / name
    path.write_text(text, encoding="utf-8")
    if age_s:
        backdate(path, age_s)
    return path


def backdate(path: Path, age_s: float) -> None:
    t = time.time() - age_s
    os.utime(path, (t, t))


def run_once(env: dict[str, Path], **kw: Any) -> tuple[Any, list[Any]]:
    from assistant.triage.watch import watch

    events: list[Any] = []
    kw.setdefault("settle_s", 5.0)
    kw.setdefault("notify_every", 2)
    kw.setdefault("on_event", events.append)
    summary = watch([env["logs"]], once=True, state_path=env["state"], **kw)
    return summary, events


# -- end to end ----------------------------------------------------------------------------------


def test_new_group_growth_and_restart(env: dict[str, Path], receiver: Receiver) -> None:
    logs = env["logs"]
    write_job(logs, "job-a1", SHAPE)
    write_job(logs, "job-ok1", None)
    summary, events = run_once(env, webhook=receiver.url)
    assert summary.jobs_reported == 2 and summary.new_groups == 1 and summary.messages_sent == 1
    assert [e[0] for e in receiver.events()] == ["new_group"]
    first = receiver.bodies[0]
    assert first["text"].startswith("New failure group") and "job-a1" in first["text"]
    fields = first["torchhelp"]
    assert fields["category"] == "shape_mismatch" and fields["job_ids"] == ["job-a1"] and fields["job_count"] == 1
    assert set(fields) >= {"event", "group", "category", "title", "job_count", "gpu_hours", "job_ids", "diagnosis"}
    assert fields["diagnosis"] and fields["diagnosis"]["cause"], "a new group carries the engine's diagnosis"
    assert events[-1].kind == "stopped"
    shape_group = fields["group"]

    # the same failure twice more (other numbers would not matter): the group grows by notify_every=2
    write_job(logs, "job-a2", SHAPE)
    write_job(logs, "job-a3", SHAPE)
    write_job(logs, "job-b1", OOM)
    summary, _ = run_once(env, webhook=receiver.url)
    assert summary.jobs_reported == 3
    # jobs are triaged in id order and messages leave in the order they were queued
    oom_group = receiver.bodies[2]["torchhelp"]["group"]
    assert receiver.events()[1:] == [("group_grew", shape_group, 3), ("new_group", oom_group, 1)]
    grew = next(b["torchhelp"] for b in receiver.bodies if b["torchhelp"]["event"] == "group_grew")
    assert grew["job_ids"] == ["job-a1", "job-a2", "job-a3"] and grew["new_job_ids"] == ["job-a2", "job-a3"]
    oom = next(b["torchhelp"] for b in receiver.bodies if b["torchhelp"]["event"] == "new_group" and b["torchhelp"]["group"] != shape_group)
    assert oom["category"] == "cuda_oom" and oom["group"] != shape_group

    # restart with the same state: nothing is triaged or sent again, group ids are kept
    sent = len(receiver.bodies)
    summary, events = run_once(env, webhook=receiver.url)
    assert summary.jobs_reported == 0 and summary.messages_sent == 0 and len(receiver.bodies) == sent
    # one more shape job after the restart joins the persisted group (no message: 4 - 3 < 2)
    write_job(logs, "job-a4", SHAPE)
    summary, events = run_once(env, webhook=receiver.url)
    job_events = [e for e in events if e.kind == "job"]
    assert [(e.job_id, e.group) for e in job_events] == [("job-a4", shape_group)]
    assert len(receiver.bodies) == sent


def test_job_still_being_written_waits_until_settled(env: dict[str, Path], receiver: Receiver) -> None:
    logs = env["logs"]
    path = write_job(logs, "job-live", None, age_s=0)  # progress so far, no end yet
    settle = 0.6
    summary, _ = run_once(env, webhook=receiver.url, settle_s=settle)
    assert summary.jobs_reported == 0
    time.sleep(settle / 2)
    with path.open("a", encoding="utf-8") as fh:  # still writing: the settle clock restarts
        fh.write(SHAPE)
    summary, _ = run_once(env, webhook=receiver.url, settle_s=settle)
    assert summary.jobs_reported == 0 and receiver.bodies == []
    time.sleep(settle + 0.1)
    summary, events = run_once(env, webhook=receiver.url, settle_s=settle)
    assert summary.jobs_reported == 1
    assert [e.group for e in events if e.kind == "job"][0] is not None  # triaged with the failure it ended on
    assert [e[0] for e in receiver.events()] == ["new_group"]


def test_terminal_marker_finishes_a_job_before_settle_time(env: dict[str, Path]) -> None:
    from assistant.triage.watch import TERMINAL_MARKERS

    assert TERMINAL_MARKERS.search(TORCHRUN), "torchrun's failure summary is a terminal marker"
    logs = env["logs"]
    done = write_job(logs, "job-torchrun", TORCHRUN, age_s=0)
    quiet = write_job(logs, "job-quiet", None, age_s=0)
    backdate(done, 3)  # quiet for longer than the marker grace, far less than settle_s
    backdate(quiet, 3)
    summary, events = run_once(env, settle_s=300)
    assert [e.job_id for e in events if e.kind == "job"] == ["job-torchrun"]
    assert summary.jobs_reported == 1


def test_webhook_retries_500_then_delivers(env: dict[str, Path], receiver: Receiver) -> None:
    write_job(env["logs"], "job-a1", SHAPE)
    receiver.script = [500, 500]
    summary, events = run_once(env, webhook=receiver.url, diagnose_groups=False)
    assert receiver.requests == 3 and len(receiver.bodies) == 1
    assert summary.messages_sent == 1 and summary.pending == 0
    assert [e.kind for e in events].count("sent") == 1


def test_unreachable_webhook_keeps_the_message_for_later(env: dict[str, Path], receiver: Receiver) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/hook"
    write_job(env["logs"], "job-a1", SHAPE)
    summary, events = run_once(env, webhook=dead, diagnose_groups=False)
    assert summary.jobs_reported == 1 and summary.messages_sent == 0 and summary.pending == 1
    assert any(e.kind == "send_failed" for e in events)
    # next run (receiver fixed): the kept message goes out, nothing is triaged twice
    summary, _ = run_once(env, webhook=receiver.url, diagnose_groups=False)
    assert summary.jobs_reported == 0 and summary.messages_sent == 1 and summary.pending == 0
    assert receiver.events()[0][0] == "new_group"


def test_keyboard_interrupt_stops_cleanly_and_commits(env: dict[str, Path], receiver: Receiver) -> None:
    write_job(env["logs"], "job-a1", SHAPE)
    write_job(env["logs"], "job-a2", SHAPE)
    seen: list[Any] = []

    def on_event(event: Any) -> None:
        seen.append(event)
        if event.kind == "job":
            raise KeyboardInterrupt  # Ctrl-C right after the first job was committed

    summary, _ = run_once(env, webhook=receiver.url, on_event=on_event, diagnose_groups=False)
    assert summary.stopped_by == "interrupt" and summary.jobs_reported == 1
    assert seen[-1].kind == "stopped" and "Ctrl-C" in seen[-1].text
    assert receiver.bodies == []  # interrupted before delivery: the message waits in the outbox
    summary, events = run_once(env, webhook=receiver.url, diagnose_groups=False)
    assert [e.job_id for e in events if e.kind == "job"] == ["job-a2"]
    assert [e[0] for e in receiver.events()] == ["new_group"]  # delivered once, and only once


def test_sigterm_and_stop_event_end_the_loop(env: dict[str, Path]) -> None:
    from assistant.triage.watch import watch

    write_job(env["logs"], "job-a1", SHAPE)
    write_job(env["logs"], "job-a2", None)
    previous = signal.getsignal(signal.SIGTERM)

    def on_event(event: Any) -> None:
        if event.kind == "job":
            os.kill(os.getpid(), signal.SIGTERM)

    t0 = time.monotonic()
    summary = watch([env["logs"]], interval_s=30, settle_s=5, state_path=env["state"], on_event=on_event, diagnose_groups=False)
    assert summary.stopped_by == "sigterm" and time.monotonic() - t0 < 20
    assert signal.getsignal(signal.SIGTERM) == previous  # our handler is gone again

    stop = threading.Event()
    write_job(env["logs"], "job-a3", OOM)
    summary = watch([env["logs"]], interval_s=30, settle_s=5, state_path=env["state"], stop=stop,
                    on_event=lambda e: stop.set() if e.kind == "job" else None, diagnose_groups=False)
    assert summary.stopped_by == "stop" and summary.jobs_reported == 1


def test_a_reported_job_that_changes_is_triaged_again_and_moves_group(env: dict[str, Path]) -> None:
    from assistant.triage.state import TriageState

    logs = env["logs"]
    write_job(logs, "job-r1", SHAPE)
    write_job(logs, "job-r2", SHAPE)
    _, events = run_once(env, diagnose_groups=False)
    shape_group = [e.group for e in events if e.kind == "job"][0]
    # job-r1 is requeued and its log now ends in another failure
    path = write_job(logs, "job-r1", OOM, age_s=0)
    summary, events = run_once(env, diagnose_groups=False)
    assert summary.jobs_reported == 0  # changed just now: not settled yet
    backdate(path, 600)
    summary, events = run_once(env, diagnose_groups=False)
    moved = [e for e in events if e.kind == "job"]
    assert [e.job_id for e in moved] == ["job-r1"] and moved[0].group != shape_group
    with TriageState(env["state"]) as state:
        counts = {g.group_id: g.job_count for g in state.groups()}
        assert counts == {shape_group: 1, moved[0].group: 1}
        assert state.jobs_in_group(shape_group) == ["job-r2"]


def test_second_watcher_on_the_same_state_is_refused(env: dict[str, Path]) -> None:
    from assistant.errors import TriageError
    from assistant.triage.state import TriageState

    with TriageState(env["state"]):
        with pytest.raises(TriageError, match="another watcher"):
            TriageState(env["state"])
    TriageState(env["state"]).close()  # released on close


def test_default_state_lives_under_torchhelp_home(env: dict[str, Path]) -> None:
    from assistant.triage.state import default_state_path

    assert default_state_path() == Path(os.environ["TORCHHELP_HOME"]) / "triage" / "state.sqlite"


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    from assistant.errors import TriageError
    from assistant.triage.watch import watch

    with pytest.raises(TriageError):
        watch([tmp_path / "nope"], once=True, state_path=tmp_path / "s.sqlite")


def test_empty_directory_is_fine(env: dict[str, Path]) -> None:
    summary, events = run_once(env)
    assert summary.jobs_reported == 0 and events[-1].kind == "stopped"


# -- post() on its own ---------------------------------------------------------------------------


def test_post_does_not_retry_other_4xx_and_retries_429(receiver: Receiver) -> None:
    from assistant.triage.webhook import post

    receiver.script = [404]
    d = post(receiver.url, {"text": "x"}, backoff_s=0.01)
    assert not d.ok and d.permanent and d.status == 404 and d.attempts == 1 and receiver.requests == 1
    receiver.script = [429, 503]
    d = post(receiver.url, {"text": "y"}, backoff_s=0.01)
    assert d.ok and d.attempts == 3 and receiver.bodies == [{"text": "y"}]


def test_post_gives_up_after_retries_without_raising() -> None:
    import httpx

    from assistant.triage.webhook import post

    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise httpx.ConnectError("refused", request=request)

    waits: list[float] = []
    d = post("http://hooks.invalid/x", {"text": "z"}, retries=3, backoff_s=0.5,
             transport=httpx.MockTransport(handler), sleep=waits.append)
    assert not d.ok and not d.permanent and d.attempts == 4 and len(calls) == 4
    assert waits == [0.5, 1.0, 2.0]


def test_retry_after_is_capped() -> None:
    import httpx

    from assistant.triage.webhook import MAX_RETRY_AFTER_S, post

    d = post("http://hooks.invalid/x", {"text": "z"}, sleep=lambda s: None,
             transport=httpx.MockTransport(lambda r: httpx.Response(429, headers={"Retry-After": str(MAX_RETRY_AFTER_S * 10)})))
    assert not d.ok and d.attempts == 1 and "next poll" in d.error


def test_message_shape() -> None:
    from assistant.triage.webhook import message

    m = message("group_grew", group="g7", category="cuda_oom", title="CUDA out of memory", job_count=12,
                gpu_hours=3.14159, job_ids=[f"j{i}" for i in range(12)], new_job_ids=["j10", "j11"],
                diagnosis_title="CUDA OOM", diagnosis_cause="The activations do not fit.")
    assert "grew to 12 jobs" in m["text"] and "The activations do not fit." in m["text"]
    assert m["torchhelp"]["gpu_hours"] == 3.1416 and m["torchhelp"]["diagnosis"] == {"title": "CUDA OOM", "cause": "The activations do not fit."}
    json.dumps(m)
