"""Issue 23, the doors: the watcher's webhook delivery, the state it keeps, and the server's sockets and hosts.

Every test runs the real thing: a loopback webhook receiver (http.server), a real ``torchhelp triage
--watch`` process sent real signals, a real uvicorn with real sockets.
"""

from __future__ import annotations

import json
import os
import pickle
import time
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
