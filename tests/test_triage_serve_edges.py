"""Issue 21, items 8 and 9: triage and serve edges a new user hit, each on a real run.

Triage runs as the real `torchhelp triage` command on real job folders written here (a Slurm job
cancelled at its time limit after progress lines, a Kubernetes job past its deadline, a job that raised).
Pages are opened in Debian's headless Chromium through Playwright; the server is a real
`torchhelp serve` process (uvicorn) on a loopback port.
"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT

CHROMIUM = Path("/usr/bin/chromium")
SLURM_VERDICT = "slurmstepd: error: *** JOB 4100 ON gpu-node-7 CANCELLED AT 2024-05-01T14:00:00 DUE TO TIME LIMIT ***"
K8S_VERDICT = "  Warning  DeadlineExceeded  2m  job-controller  Job was active longer than specified deadline"
SLURM_JOB = f"""SLURM_GPUS=8
2024-05-01 10:00:00 [rank0] starting training, world_size=8
2024-05-01 13:58:00 [rank0] epoch 3 step 4800/5000 loss 0.92
2024-05-01 13:59:00 [rank0] epoch 3 step 4900/5000 loss 0.91
{SLURM_VERDICT}
"""
K8S_JOB = f"""2024-05-03 08:00:00 epoch 1 step 100/5000 loss 2.31
2024-05-03 09:58:00 epoch 3 step 4800/5000 loss 0.92
2024-05-03 09:59:00 epoch 3 step 4900/5000 loss 0.91
{K8S_VERDICT}
"""
RAISED_JOB = """2024-05-02 09:00:00 starting
Traceback (most recent call last):
  File "/home/u/train.py", line 10, in <module>
    model.load_state_dict(sd)
  File "/opt/torch/nn/modules/module.py", line 2153, in load_state_dict
    raise RuntimeError('Error(s) in loading state_dict for Net:\\n\\t{}'.format("\\n\\t".join(error_msgs)))
RuntimeError: Error(s) in loading state_dict for Net:
	Missing key(s) in state_dict: "fc.weight", "fc.bias". Unexpected key(s) in state_dict: "module.fc.weight", "module.fc.bias".
2024-05-02 09:10:00 exit
"""
OK_JOB = "2024-05-04 10:00:00 start\n2024-05-04 11:00:00 training complete\n"
PREVIOUS_KEYS = {"job_id", "status", "group", "category", "first_failing_rank", "gpu_hours", "files", "title"}


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TORCHHELP_SERVE_TOKEN"}
    env.update(TORCHHELP_HOME=str(home), TORCHHELP_LLM="none", TORCHHELP_DENSE="0", COLUMNS="200", NO_COLOR="1", **extra)
    return env


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four job folders: Slurm time limit, Kubernetes deadline, a raised exception, a success."""
    root = tmp_path_factory.mktemp("edges") / "logs"
    for name, file, text in (("job-4100", "slurm-4100.out", SLURM_JOB), ("job-4200", "pod.log", K8S_JOB),
                             ("job-4300", "slurm-4300.out", RAISED_JOB), ("job-4400", "stdout.log", OK_JOB)):
        (root / name).mkdir(parents=True)
        (root / name / file).write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def run(logs: Path, th_home: Path) -> dict[str, Any]:
    """The real `torchhelp triage` on the folder: terminal text, JSONL rows, Markdown and HTML files."""
    out = logs.parent
    proc = subprocess.run(
        [sys.executable, "-m", "assistant", "triage", str(logs), "--jsonl", str(out / "t.jsonl"), "--markdown", str(out / "t.md"),
         "--html", str(out / "t.html"), "--top", "5"],
        capture_output=True, text=True, env=_env(th_home), timeout=120, cwd=ROOT,
    )
    assert proc.returncode in (0, 1), proc.stderr
    rows = [json.loads(line) for line in (out / "t.jsonl").read_text(encoding="utf-8").splitlines()]
    return {"terminal": proc.stdout, "rows": {r["job_id"]: r for r in rows}, "md": (out / "t.md").read_text(encoding="utf-8"),
            "html": out / "t.html"}


def _browser() -> Iterator[Any]:
    """Debian's Chromium through Playwright (as tests/test_serve_page.py): missing => skip, or fail when CI requires it."""
    required = bool(os.environ.get("TORCHHELP_REQUIRE_CHROMIUM"))
    if not CHROMIUM.exists():
        if required:
            pytest.fail("TORCHHELP_REQUIRE_CHROMIUM is set but /usr/bin/chromium is missing")
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


browser = pytest.fixture(scope="module")(_browser)


# --------------------------------------------------------------------------- 8a, 8b: the verdict and the reason


def test_time_limited_job_shows_the_schedulers_verdict(run: dict[str, Any], browser: Any) -> None:
    rows = run["rows"]
    for job_id in ("job-4100", "job-4200"):
        assert rows[job_id]["reason"] == "time_limit" and rows[job_id]["title"] == "Job stopped at its time limit", rows[job_id]
    terminal_errors = [ln.strip(" │") for ln in run["terminal"].splitlines() if ln.strip(" │").startswith("error:")]
    md_errors = re.findall(r"^\*\*error:\*\* `+ ?(.*?) ?`+$", run["md"], re.M)
    page = browser.new_page()
    page.goto(run["html"].as_uri())
    html_errors = [" ".join(t.split()) for t in page.locator("p.error code").all_text_contents()]
    page.close()
    for shown in (terminal_errors, md_errors, html_errors):
        assert not any("loss 0.9" in e for e in shown), shown  # never a progress line
    assert f"error: {SLURM_VERDICT}" in terminal_errors and SLURM_VERDICT in md_errors and SLURM_VERDICT in html_errors


def test_deadline_exceeded_job_alone_shows_the_verdict_not_a_progress_line(logs: Path) -> None:
    """Alone, the Kubernetes job is its own group: the engine, reading the lines before the verdict, picks a progress line."""
    from assistant.triage import triage
    from assistant.triage.render_html import to_html
    from assistant.triage.render_markdown import to_markdown
    from assistant.triage.render_terminal import error_line

    result = triage([logs / "job-4200"])
    (group,) = result.groups
    assert error_line(result, group) == K8S_VERDICT.strip()
    assert f"**error:** `{' '.join(K8S_VERDICT.split())}`" in to_markdown(result)
    assert f'<p class="error">error: <code>{" ".join(K8S_VERDICT.split())}</code></p>' in to_html(result)


def test_jsonl_rows_say_how_each_job_ended(run: dict[str, Any]) -> None:
    rows = run["rows"]
    assert all(set(r) == PREVIOUS_KEYS | {"reason"} for r in rows.values())
    assert rows["job-4300"]["reason"] == "exception" and rows["job-4300"]["status"] == "failed"
    assert rows["job-4400"]["status"] == "succeeded" and rows["job-4400"]["reason"] is None


# --------------------------------------------------------------------------- 8c: the contract lives in the repository


def test_readme_documents_every_jsonl_key_and_points_at_no_missing_file(run: dict[str, Any]) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "DESIGN.md" not in readme
    for target in re.findall(r"\]\(([^)#:\s]+)\)", readme):  # relative links
        assert (ROOT / target).exists(), f"README links to {target}, which the repository does not have"
    section = readme.split("### The JSONL contract", 1)[1].split("\n### ", 1)[0]
    documented = set(re.findall(r"^\| `(\w+)` \|", section, re.M))
    emitted = {k for r in run["rows"].values() for k in r}
    assert emitted <= documented and {"known", "regression"} <= documented
    from assistant.triage import model

    assert "DESIGN.md" not in Path(model.__file__).read_text(encoding="utf-8")


# --------------------------------------------------------------------------- 8d, 8e, 8f: times, fences, unwrapped code


def test_first_and_last_seen_show_date_and_minute(run: dict[str, Any], browser: Any) -> None:
    # The time-limit group: job-4100 from 2024-05-01 10:00, job-4200 until 2024-05-03 09:59; job-4300 on 2024-05-02.
    assert "2024-05-01 10:00" in run["terminal"] and "2024-05-02 09:00" in run["terminal"] and "(UTC)" in run["terminal"]
    assert re.search(r"\| 2024-05-01 10:00 \| 2024-05-03 09:\d\d \|", run["md"]), run["md"]
    assert "first seen (UTC) | last seen (UTC)" in run["md"]
    page = browser.new_page()
    page.goto(run["html"].as_uri())
    summaries = " ".join(page.locator("details.group > summary").all_text_contents())
    page.close()
    assert re.search(r"2024-05-01 10:00 UTC → 2024-05-03 09:\d\d UTC", summaries), summaries


def test_shell_code_sits_in_bash_fences() -> None:
    from assistant.triage.render_terminal import code_lang

    assert code_lang("#SBATCH --time=2-00:00:00\nsinfo -o '%P %l'    # limits\nsacct -j <jobid> -o JobID,State") == "bash"
    assert code_lang("pip install torch --index-url https://download.pytorch.org/whl/cu126") == "bash"
    assert code_lang("NCCL_DEBUG=INFO torchrun --nproc-per-node 8 train.py") == "bash"
    assert code_lang("state = torch.load(path, map_location='cpu')\nmodel.load_state_dict(state)") == "python"
    assert code_lang("#SBATCH --signal=USR1@120\nsignal.signal(signal.SIGUSR1, handler)") == "python"  # mixed: stays Python
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for lang, body in re.findall(r"^```(\w*)\n(.*?)^```$", readme, re.M | re.S):
        if lang == "python":
            assert code_lang(body) == "python", body
        if body.lstrip().startswith("$ "):
            assert lang == "console", body


def test_markdown_report_fences_shell_fixes_as_bash(run: dict[str, Any]) -> None:
    from assistant.triage.render_terminal import code_lang

    fences = re.findall(r"^ *(`{3,})(\w+)\n(.*?)^ *\1$", run["md"], re.M | re.S)
    fixes = [(lang, body) for _, lang, body in fences if lang != "text"]
    assert any(lang == "bash" and "sinfo" in body for lang, body in fixes), run["md"]
    for lang, body in fixes:
        assert lang == code_lang(body), (lang, body)


def test_terminal_panels_never_wrap_fix_code(run: dict[str, Any]) -> None:
    from rich.console import Console

    from assistant.triage import triage
    from assistant.triage.render_terminal import render_table

    result = triage([run["html"].parent / "logs" / "job-4300", run["html"].parent / "logs" / "job-4100"])
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    render_table(result, console, top=5)
    lines = [ln.strip("│ ").rstrip() for ln in console.export_text().splitlines()]
    checked = 0
    for g in result.groups:
        assert g.diagnosis is not None
        for fix in g.diagnosis.fixes[:2]:
            code = [c.strip() for c in (fix.code or "").splitlines() if c.strip()]
            for cur, nxt in zip(code, code[1:], strict=False):
                at = next(i for i, ln in enumerate(lines) if ln.startswith(cur[:30]))
                shown = lines[at]
                assert shown == cur or (shown.endswith("…") and cur.startswith(shown[:-1])), (shown, cur)  # whole, or cut with …
                assert lines[at + 1].startswith(nxt[:20]), (lines[at + 1], nxt)  # the next screen line is the next source line
                checked += 1
    assert checked >= 3


# --------------------------------------------------------------------------- 8g, 8h: the page at 390 px, code spans


def _boxes(page: Any, selector: str) -> list[dict[str, float]]:
    return page.eval_on_selector_all(selector, "els => els.map(e => { const r = e.getBoundingClientRect(); "
                                               "return {x: r.x, y: r.y, w: r.width, h: r.height}; })")


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def test_html_report_is_readable_at_390px(run: dict[str, Any], browser: Any) -> None:
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto(run["html"].as_uri())
    chart = _boxes(page, "svg.chart")[0]
    assert chart["x"] >= 0 and chart["x"] + chart["w"] <= 390
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390  # no sideways scrolling
    labels, bars, values = _boxes(page, "svg.chart text.label"), _boxes(page, "svg.chart rect.bar"), _boxes(page, "svg.chart text.value")
    assert len(labels) == len(bars) == len(values) >= 2
    for i, label in enumerate(labels):
        assert label["h"] >= 12, "label text shrank below a readable size"
        assert label["x"] >= chart["x"] and label["x"] + label["w"] <= chart["x"] + chart["w"], label
        assert values[i]["x"] + values[i]["w"] <= chart["x"] + chart["w"], values[i]
        for other in labels[i + 1:] + bars + values:
            assert not _overlap(label, other), (label, other)
        assert not _overlap(values[i], bars[i])
    sizes = page.eval_on_selector_all("svg.chart text.label", "els => els.map(e => parseFloat(getComputedStyle(e).fontSize))")
    assert min(sizes) >= 13
    page.close()


def test_group_titles_render_code_spans(run: dict[str, Any], browser: Any) -> None:
    from assistant.triage.render_html import _prose

    assert _prose("keys have an extra `<b>module.</b>` prefix") == "keys have an extra <code>&lt;b&gt;module.&lt;/b&gt;</code> prefix"
    page = browser.new_page()
    page.goto(run["html"].as_uri())
    titles = page.locator("details.group > summary .title")
    texts = titles.all_text_contents()
    page.close()
    raised = next(t for t in texts if "module." in t)
    assert "`" not in raised and "`" not in " ".join(texts)
    assert "<code>module.</code>" in run["html"].read_text(encoding="utf-8")


# --------------------------------------------------------------------------- 9: serve


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def served(th_home: Path, logs: Path) -> Iterator[str]:
    """A real `torchhelp serve` process on loopback (no token, no LLM) serving the folder's report at /triage/0."""
    import httpx

    pytest.importorskip("fastapi")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "assistant", "serve", "--port", str(port), "--triage-root", str(logs), "--log-level", "warning"],
                            env=_env(th_home), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline or proc.poll() is not None:
                pytest.fail(f"the server did not become ready: {proc.stderr.read() if proc.poll() is not None else 'timeout'}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


_URL = re.compile(r"""(?:https?:)?//[\w.-]+\.[a-z]{2,}[^\s"'<>)]*""", re.I)
_NAMESPACES = {"//www.w3.org/2000/svg", "http://www.w3.org/2000/svg"}  # an SVG namespace name: nothing is fetched


def test_served_pages_reference_no_external_url(served: str, browser: Any) -> None:
    import httpx

    assert httpx.get(f"{served}/docs").status_code == 404 and httpx.get(f"{served}/redoc").status_code == 404
    page = browser.new_page()
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    for path in ("/", "/triage/0"):
        response = page.goto(f"{served}{path}", wait_until="load")
        assert response is not None and response.ok, path
    page.close()
    bodies = {u: httpx.get(u).text for u in {*requested, f"{served}/", f"{served}/triage/0"}}
    assert any(u.endswith(".js") for u in bodies) and any(u.endswith(".css") for u in bodies)
    for u, body in bodies.items():
        external = [m for m in _URL.findall(body) if m not in _NAMESPACES and "127.0.0.1" not in m]
        assert not external, (u, external)
    assert all(u.startswith(served) for u in requested), requested


def test_page_title_renders_code_spans(served: str, browser: Any) -> None:
    page = browser.new_page()
    page.goto(f"{served}/", wait_until="load")
    page.fill("#error-text", RAISED_JOB)
    page.click("#submit")
    page.wait_for_selector("#result:not([hidden])", timeout=30_000)
    title = page.inner_text("#result-title")
    codes = page.locator("#result-title code").all_text_contents()
    page.close()
    assert "`" not in title and "module." in codes, (title, codes)


def test_serve_refusal_names_the_host(th_home: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "assistant", "serve", "--host", "0.0.0.0", "--port", "0"],
                          capture_output=True, text=True, env=_env(th_home), timeout=60, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert "[REDACTED]" not in proc.stderr
    assert "refusing to listen on 0.0.0.0 without a token, since anyone who can reach it could use the server" in proc.stderr
