"""The team memory of fixes, end to end: resolve -> known -> regression.

Real job folders (failure texts captured from real PyTorch programs, eval/captured/cpu) written to
tmp folders, the real CLI, a real SQLite state, a real loopback webhook receiver (an HTTP server on
127.0.0.1), and for the Resolve button a real uvicorn driven by Debian's Chromium through Playwright.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from assistant.cli import main
from test_triage_watch import write_job
from webhook_receiver import Receiver
from loopback_server import served_app

ROOT = Path(__file__).resolve().parents[1]
CPU = ROOT / "eval" / "captured" / "cpu"
CHROMIUM = Path("/usr/bin/chromium")
NOTE = "classifier is nn.LazyLinear since PR #412"


def stderr_of(slug: str) -> str:
    return json.loads((CPU / f"{slug}.json").read_text())["stderr"]


def job(logs: Path, name: str, slug: str, day: datetime) -> Path:
    """A Slurm-style job folder: 2 GPUs, an hour of progress lines, then the captured failure."""
    folder = logs / name
    folder.mkdir(parents=True, exist_ok=True)
    stamp = day.strftime("%Y-%m-%d %H:%M:%S")
    end = datetime.fromtimestamp(day.timestamp() + 3600, UTC).strftime("%Y-%m-%d %H:%M:%S")
    (folder / "slurm.out").write_text(f"SLURM_GPUS=2\n{stamp} start\n{end} epoch 1 done\n" + stderr_of(slug), encoding="utf-8")
    return folder


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    home = tmp_path / "home"
    monkeypatch.setenv("TORCHHELP_HOME", str(home))
    monkeypatch.setenv("TORCHHELP_DENSE", "0")
    monkeypatch.setenv("TORCHHELP_LLM", "none")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("USER", "alice")
    logs = tmp_path / "logs"
    logs.mkdir()
    return {"home": home, "logs": logs, "out": tmp_path / "out", "state": home / "triage" / "state.sqlite"}


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([*args])
    out, err = capsys.readouterr()
    return code, out, err


def jsonl(path: Path) -> dict[str, dict[str, Any]]:
    return {row["job_id"]: row for row in map(json.loads, path.read_text().splitlines())}


def test_resolve_known_regression_loop_on_the_cli(env: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    logs, out = env["logs"], env["out"]
    may = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    job(logs, "job-101", "linear-after-conv-flatten", may)
    job(logs, "job-102", "linear-after-conv-flatten", datetime(2024, 5, 2, 10, 0, tzinfo=UTC))
    job(logs, "job-201", "conv-grayscale-input-rgb-model", may)
    job(logs, "job-301", "config-key-renamed-keyerror", may)

    code, text, _ = run_cli(capsys, "triage", str(logs), "--jsonl", str(out / "1.jsonl"), "--top", "0")
    assert code == 0
    rows = jsonl(out / "1.jsonl")
    linear = rows["job-101"]["group"]
    assert linear.startswith("shape_mismatch-") and rows["job-102"]["group"] == linear
    assert linear in text  # the id is shown in the table
    assert "known" not in rows["job-101"]

    # clear one-line errors: empty note, unknown group, ambiguous prefix (two shape_mismatch groups)
    for args, message in [(("--note", "  "), "empty note"), (("--note", "x"), "unknown group 'nope'")]:
        code, _, err = run_cli(capsys, "triage", "resolve", "nope" if "x" in args else linear, *args)
        assert code == 2 and err.startswith("torchhelp: error: ") and message in err and err.count("\n") == 1
    code, _, err = run_cli(capsys, "triage", "resolve", "shape", "--note", "x")
    assert code == 2 and "ambiguous group prefix 'shape'" in err and linear in err

    # resolve by a unique prefix of the digest; the groups remembered by the last triage are used
    digest = linear.split("-", 1)[1]
    code, text, _ = run_cli(capsys, "triage", "resolve", digest[:5], "--note", NOTE)
    assert code == 0, text
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert f"resolved {linear} (shape_mismatch) by alice on {today}: {NOTE}" in text
    runbook = next((env["home"] / "user_docs").glob("triage-resolved-*.md"))
    body = runbook.read_text()
    assert "template: 'RuntimeError: mat1 and mat2 shapes cannot be multiplied" in body and "location: 'repro.py:forward:" in body
    assert "signatures:" in body and f"note: '{NOTE}'" in body and "resolved_by: alice" in body
    with sqlite3.connect(env["state"]) as db:
        assert db.execute("SELECT group_id, note, resolved_by FROM resolutions").fetchall() == [(linear, NOTE, "alice")]

    # a later run: old jobs are known (ended before the resolution); a job ending after it is a regression
    job(logs, "job-103", "linear-after-conv-flatten", datetime.fromtimestamp(time.time() + 60, UTC))
    code, text, _ = run_cli(capsys, "triage", str(logs), "--jsonl", str(out / "2.jsonl"), "--markdown", str(out / "r.md"),
                            "--html", str(out / "r.html"), "--top", "1")
    assert code == 0
    rows = jsonl(out / "2.jsonl")
    doc_id = f"user:{runbook.stem.replace('_', '-')}"
    for j in ("job-101", "job-102", "job-103"):
        assert rows[j]["known"]["note"] == NOTE and rows[j]["known"]["resolved"] == today and rows[j]["known"]["runbook"] == doc_id
    assert [rows[j]["regression"] for j in ("job-101", "job-102", "job-103")] == [False, False, True]
    assert "known" not in rows["job-201"] and "regression" not in rows["job-301"]
    assert f"known: {NOTE} (resolved {today})" in text and "REGRESSION: 1 job ended after" in text and doc_id in text
    md = (out / "r.md").read_text()
    assert f"known: {NOTE} (resolved {today})".replace("#", "\\#") in md and "REGRESSION: 1 job ended after" in md and doc_id in md
    html = (out / "r.html").read_text()
    assert 'class="badge regression">REGRESSION<' in html and f"known: {NOTE} (resolved {today})" in html
    assert f'<code class="runbook">{doc_id}</code>' in html and f'<code class="gid">{linear}</code>' in html
    assert doc_id in json.dumps([g["diagnosis"]["sources"] for g in json.loads(_groups_json(capsys, logs, out))])  # the engine cites it too

    # --regression-after moves the cutoff: job-102 (ended 2024-05-02 11:00) now counts too
    code, _, _ = run_cli(capsys, "triage", str(logs), "--jsonl", str(out / "3.jsonl"), "--regression-after", "2024-05-02", "-q")
    rows = jsonl(out / "3.jsonl")
    assert [rows[j]["regression"] for j in ("job-101", "job-102", "job-103")] == [False, True, True]
    code, _, err = run_cli(capsys, "triage", str(logs), "--regression-after", "someday", "-q")
    assert code == 2 and "not a date: 'someday'" in err


def _groups_json(capsys: pytest.CaptureFixture[str], logs: Path, out: Path) -> str:
    assert main(["triage", str(logs), "--groups-json", str(out / "g.json"), "-q"]) == 0
    capsys.readouterr()
    return (out / "g.json").read_text()


def test_watch_sends_a_regression_once_to_a_loopback_webhook(env: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    from assistant.triage.watch import watch

    logs, state = env["logs"], env["home"] / "watch.sqlite"
    failure = stderr_of("linear-after-conv-flatten")
    receiver = Receiver()
    try:
        write_job(logs, "job-1", failure)  # progress lines dated May 2024
        watch([logs], once=True, state_path=state, webhook=receiver.url, settle_s=5.0, notify_every=1, on_event=lambda e: None)
        assert [b["torchhelp"]["event"] for b in receiver.bodies] == ["new_group"]
        assert main(["triage", "resolve", "shape", "--root", str(logs), "--note", NOTE, "--by", "bob"]) == 0
        capsys.readouterr()

        # one job from before the resolution (known, no regression) and one after it (a regression)
        write_job(logs, "job-2", failure)
        later = datetime.fromtimestamp(time.time() + 120, UTC).strftime("%Y-%m-%d %H:%M:%S")
        write_job(logs, "job-33", f"{later} | INFO | resumed after the fix\n" + failure)
        events: list[Any] = []
        watch([logs], once=True, state_path=state, webhook=receiver.url, settle_s=5.0, notify_every=1, on_event=events.append)
        bodies = [b["torchhelp"] for b in receiver.bodies[1:]]
        assert [b["event"] for b in bodies] == ["group_grew", "group_grew", "regression"]
        assert all(b["known"]["note"] == NOTE and b["known"]["resolved_by"] == "bob" for b in bodies)
        regression = receiver.bodies[-1]
        assert regression["text"].startswith("REGRESSION in failure group ") and regression["torchhelp"]["regression_job"] == "job-33"
        assert f"by bob: {NOTE} (runbook user:triage-resolved-" in regression["text"]
        assert "regression" in [e.kind for e in events]

        # another job after the fix: the regression was announced already (no second message)
        write_job(logs, "job-444", f"{later} | INFO | again\n" + failure)
        watch([logs], once=True, state_path=state, webhook=receiver.url, settle_s=5.0, notify_every=1, on_event=lambda e: None)
        assert [b["torchhelp"]["event"] for b in receiver.bodies[4:]] == ["group_grew"]
    finally:
        receiver.close()


# -- the Resolve button of the served report -----------------------------------------------------


@pytest.fixture
def served(env: dict[str, Path]) -> Iterator[str]:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")

    from assistant.serve.app import create_app
    from assistant.serve.config import ServeConfig
    from assistant.settings import load_settings

    may = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    job(env["logs"], "job-101", "linear-after-conv-flatten", may)
    job(env["logs"], "job-301", "config-key-renamed-keyerror", may)
    settings = load_settings(env={**os.environ}, llm="none")
    config = ServeConfig(request_timeout_s=60, triage_roots=(str(env["logs"]),))
    with served_app(lambda port: create_app(config.with_(port=port), settings=settings)) as url:
        yield url


def test_resolve_button_on_the_served_report_in_chromium(env: dict[str, Path], served: str) -> None:
    import httpx

    if not CHROMIUM.exists():
        if os.environ.get("TORCHHELP_REQUIRE_CHROMIUM"):
            pytest.fail("TORCHHELP_REQUIRE_CHROMIUM is set but /usr/bin/chromium is missing")
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium")
    sync_api = pytest.importorskip("playwright.sync_api")

    # a forged form (no anti-forgery token) is refused
    forged = httpx.post(f"{served}/triage/0/resolve", data={"group": "shape", "note": "x", "csrf": "guess"}, timeout=30)
    assert forged.status_code == 400 and "stale" in forged.json()["error"]["message"]
    assert httpx.get(f"{served}/triage/7", timeout=30).status_code == 400

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(f"{served}/triage/0")
            group = page.locator("details.group", has_text="Linear layer expects")
            group_id = group.get_attribute("data-group")
            assert group_id and group_id.startswith("shape_mismatch-")
            assert page.locator(".badge.known").count() == 0
            group.locator("summary").click()
            group.locator("input[name=note]").fill(NOTE)
            with page.expect_navigation():
                group.locator("button.resolve-button").click()
            assert page.url.endswith(f"/triage/0?resolved={group_id}")
            resolved = page.locator("details.group", has_text="Linear layer expects")
            assert resolved.locator(".badge.known").count() == 1
            resolved.locator("summary").click()
            today = datetime.now(UTC).strftime("%Y-%m-%d")
            assert f"known: {NOTE} (resolved {today})" in resolved.locator("p.known").inner_text()
            assert page.locator("details.group", has_text="KeyError").locator(".badge").count() == 0
            assert errors == []  # the CSP let the form post and the page script run
        finally:
            browser.close()
    with sqlite3.connect(env["state"]) as db:
        assert db.execute("SELECT group_id, note FROM resolutions").fetchall() == [(group_id, NOTE)]
    assert (env["home"] / "user_docs" / f"triage-resolved-{group_id}.md").is_file()
