"""Issue 23: every output door masks secrets, removes terminal controls and neutralises Slack markup,
and no text read from a log becomes code in a suggested fix.

Real runs only: job folders on disk, ``torchhelp triage`` and ``ask`` as subprocesses, the watcher posting
to a loopback webhook receiver, ``--watch`` on a pty, a real Python ``KeyError``, a real uvicorn server.
"""

from __future__ import annotations

import ast
import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import ROOT
from loopback_server import served_app
from pty_session import torchhelp_on_a_terminal
from webhook_receiver import Receiver

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# One secret of each kind the audit found leaking, written as a job would print them.
SECRETS = {
    "github": "ghp_Zq8xWv3LmN5pR7tY9uB2cD4eF6gH8iJ0kL1m",
    "aws": "AKIAQWERTYUIOPASDFGH",
    "slack": "xoxb-2048-4096-Zq8xWv3LmN5pR7tY",
    "stripe": "sk_live_51Hq8xWv3LmN5pR7tY9uB2cD4e",
    "stripe_restricted": "rk_live_51Hq8xWv3LmN5pR7tY9uB2cD4e",
    "npm": "npm_Zq8xWv3LmN5pR7tY9uB2cD4eF6gH8iJ0kL1m",
    "pwd": "Hunter2Pwd",
    "password": "Hunter2Password",
}
SLACK_MARKUP = ("<!channel>", "<!here>", "<@U123>", "<https://evil.example|https://good.example>")
OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
ESCAPES = (OSC52, "\x1b]0;owned\x07", "\x1b[2J", "\x1b[31m")
ERROR_LINE = ("RuntimeError: " + " ".join(SLACK_MARKUP) + f" upload failed {SECRETS['github']} {SECRETS['aws']} {SECRETS['slack']} {SECRETS['stripe']} "
              f"{SECRETS['stripe_restricted']} {SECRETS['npm']} pwd={SECRETS['pwd']} password={SECRETS['password']} "
              + "".join(ESCAPES) + "done")
FAILURE = ("Traceback (most recent call last):\n"
           '  File "/work/train.py", line 12, in <module>\n'
           "    upload(checkpoint)\n"
           f"{ERROR_LINE}\n")
# What a terminal would obey: ESC and the C1 controls (a one-byte CSI/OSC), and BEL.
TERMINAL_CONTROL = re.compile("[\x07\x1b\x9b\x9d]")
KEYERROR_PAYLOAD = '__import__("os").system("touch /tmp/th-owned")'


def leaks(text: str) -> list[str]:
    """The secrets and raw terminal controls found in ``text``."""
    found = [kind for kind, secret in SECRETS.items() if secret in text]
    if TERMINAL_CONTROL.search(text):
        found.append("terminal control")
    return found


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "TORCHHELP_HOME": str(tmp_path / "home"), "TORCHHELP_DENSE": "0", "TORCHHELP_LLM": "none",
            "PYTHONPATH": str(ROOT), "COLUMNS": "200"}


def job_folder(logs: Path, name: str) -> Path:
    """A settled job folder named ``name`` whose log ends in :data:`FAILURE`."""
    job = logs / name
    job.mkdir(parents=True)
    log = job / "stdout.log"
    log.write_text("epoch 1 step 50 loss 2.1\n" + FAILURE, encoding="utf-8")
    old = time.time() - 600
    os.utime(log, (old, old))
    return job


def torchhelp(args: list[str], env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "assistant", *args], input=stdin, capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120, check=False)


# -- (a) one sanitiser and masker behind every door ----------------------------------------------------------


# The modules that write what leaves torchhelp, and the names they must take from the one module.
DOORS = {
    "assistant/triage/webhook.py": "slack_text",
    "assistant/triage/model.py": "shown_value",
    "assistant/triage/watch.py": "shown_line",
    "assistant/triage/cli.py": "shown_line",
    "assistant/triage/render_terminal.py": "shown_text",  # HTML and Markdown format through its clean_text
    "assistant/render/terminal.py": "shown",
    "assistant/render/markdown.py": "shown",
    "assistant/serve/app.py": "shown",
    "assistant/cli.py": "shown",
}


@pytest.mark.parametrize("path", sorted(DOORS))
def test_every_door_imports_the_one_sanitiser(path: str) -> None:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "assistant.render.outgoing" for a in n.names}
    assert DOORS[path] in imported, f"{path} does not route its output through assistant.render.outgoing"
    for render in ("assistant/triage/render_html.py", "assistant/triage/render_markdown.py"):
        assert "from assistant.triage.render_terminal import clean_text" in (ROOT / render).read_text(encoding="utf-8")


def test_no_door_leaks_secrets_escapes_or_slack_markup(tmp_path: Path, env: dict[str, str]) -> None:
    logs = tmp_path / "logs"
    job_folder(logs, "job-1")
    out = tmp_path / "out"
    batch = torchhelp(["triage", str(logs), "--jsonl", str(out / "jobs.jsonl"), "--groups-json", str(out / "groups.json"),
                       "--markdown", str(out / "report.md"), "--html", str(out / "report.html")], env)
    assert batch.returncode in (0, 1), batch.stderr
    files = {p.name: p.read_text(encoding="utf-8") for p in out.iterdir()}
    assert set(files) == {"jobs.jsonl", "groups.json", "report.md", "report.html"}
    title = json.loads(files["jobs.jsonl"].splitlines()[0])["title"]
    assert "upload failed" in title and "[REDACTED]" in title, title  # the JSONL title is the error line, masked

    receiver = Receiver()
    try:
        code = ("import sys; from assistant.triage.watch import watch; "
                "watch([sys.argv[1]], once=True, settle_s=0, webhook=sys.argv[2], state_path=sys.argv[3], on_event=lambda e: print(e.text))")
        watched = subprocess.run([sys.executable, "-c", code, str(logs), receiver.url, str(tmp_path / "state.sqlite")],
                                 capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=False)
    finally:
        receiver.close()
    assert watched.returncode == 0, watched.stderr
    assert receiver.bodies, "the webhook got no message"
    posted = json.dumps(receiver.bodies, ensure_ascii=False)
    text = receiver.bodies[0]["text"]
    assert "&lt;!channel&gt;" in text and "<" not in text and ">" not in text  # Slack's escaping: shown, never obeyed

    asked = {fmt: torchhelp(["ask", "--format", fmt, "--no-dense", "--llm", "none"], env, stdin=FAILURE) for fmt in ("json", "markdown", "terminal")}
    outputs = {**files, "webhook": posted, "webhook text": text, "watch lines": watched.stdout,
               "triage terminal": batch.stdout + batch.stderr, **{f"ask {k}": v.stdout for k, v in asked.items()}}
    for door, shown in outputs.items():
        assert not leaks(shown), f"{door} leaks {leaks(shown)}"
    assert not [m for m in SLACK_MARKUP if m in text]  # only Slack reads the markup: its text has none left


def test_served_json_is_masked(env: dict[str, str], served: str) -> None:
    body = httpx.post(f"{served}/v1/diagnose", json={"text": FAILURE}, headers=AUTH, timeout=90).json()
    assert not leaks(json.dumps(body, ensure_ascii=False)), body


# -- (b) the watcher's terminal lines ----------------------------------------------------------------


def test_watch_on_a_terminal_prints_a_hostile_folder_name_as_text(tmp_path: Path, env: dict[str, str]) -> None:
    logs = tmp_path / "logs"
    job_folder(logs, f"job{OSC52}\x1b]2;title\x07\x1bc\x1b[2Jx")
    seen = b""
    args = ["triage", "--watch", "--interval", "0.2", "--settle", "0", "--state", str(tmp_path / "state.sqlite"), str(logs)]
    with torchhelp_on_a_terminal(args, env, columns=200) as (_pid, fd):
        deadline = time.time() + 90
        while time.time() < deadline and b"failed" not in seen:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    seen += os.read(fd, 65536)
                except OSError:
                    break
    assert b"failed" in seen, seen[-2000:]
    assert b"job]52;c;ZWNobyBwd25lZA==" in seen or b"job" in seen  # the name is shown, as text
    for obeyed in (b"\x1b]52", b"\x1b]2;", b"\x1bc", b"\x1b[2J", b"\x07"):
        assert obeyed not in seen, f"{obeyed!r} reached the terminal"


# -- (c) a KeyError's key never becomes code --------------------------------------------------------------


def keyerror_traceback(tmp_path: Path) -> str:
    """A real Python run whose KeyError key prints as a shell-running expression."""
    script = tmp_path / "train.py"
    script.write_text("class Key:\n    def __repr__(self):\n        return " + repr(KEYERROR_PAYLOAD) + "\n"
                      "config = {'lr': 0.1}\nvalue = config[Key()]\n", encoding="utf-8")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert f"KeyError: {KEYERROR_PAYLOAD}" in run.stderr
    return run.stderr


def code_of(fixes: list[dict[str, Any]], content: str = "") -> list[str]:
    """Everything a Copy button offers as code: each fix's code and each code fence of the answer (a ``text``
    fence quotes the error as the log printed it, and is labelled so)."""
    fences = re.findall(r"```([\w+-]*)\n(.*?)```", content, re.S)
    return [f["code"] for f in fixes if f.get("code")] + [body for lang, body in fences if lang != "text"]


def test_keyerror_key_is_never_fix_code_in_ask_json(tmp_path: Path, env: dict[str, str]) -> None:
    asked = torchhelp(["ask", "--format", "json", "--no-dense", "--llm", "none"], env, stdin=keyerror_traceback(tmp_path))
    d = json.loads(asked.stdout)
    assert d["rule"] == "python.key_error", d["rule"]
    codes = code_of(d["fixes"])
    assert codes and not [c for c in codes if "__import__" in c or "system(" in c], codes
    assert any("config" in c for c in codes)  # the validated container name still fills the fix


TOKEN = "hardening-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``create_app`` under a real uvicorn on a loopback port."""
    pytest.importorskip("uvicorn")
    from assistant.serve.app import create_app
    from assistant.serve.config import ServeConfig
    from assistant.settings import load_settings

    home = tmp_path_factory.mktemp("serve-home")
    settings = load_settings(env={**os.environ, "TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0"}, llm="none")
    config = ServeConfig(token=TOKEN, request_timeout_s=60)
    with served_app(lambda port: create_app(config.with_(port=port), settings=settings)) as url:
        yield url


def test_keyerror_key_is_never_copy_button_code_on_the_served_page(tmp_path: Path, served: str) -> None:
    text = keyerror_traceback(tmp_path)
    # What the page sends (see assistant/serve/static/app.js) and renders: fixes' code and the answer's fences get Copy buttons.
    reply = httpx.post(f"{served}/v1/chat/completions", headers=AUTH, timeout=90,
                       json={"model": "torchhelp", "messages": [{"role": "user", "content": text}], "stream": False}).json()
    diagnosis = reply["torchhelp"]
    assert diagnosis["rule"] == "python.key_error"
    codes = code_of(diagnosis["fixes"], reply["choices"][0]["message"]["content"])
    assert codes and not [c for c in codes if "__import__" in c or "system(" in c], codes
    api = httpx.post(f"{served}/v1/diagnose", json={"text": text}, headers=AUTH, timeout=90).json()
    assert not [c for c in code_of(api["fixes"]) if "__import__" in c], api["fixes"]
