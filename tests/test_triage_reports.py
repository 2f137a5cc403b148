"""Triage reports: the terminal table, Markdown and the self-contained HTML page (in a real Chromium).

The result is built by hand from real captured failures diagnosed by the real engine, plus one
hostile group whose title and excerpt carry rich markup, HTML, a Markdown fence and terminal escape
sequences: every renderer must show them as inert text.
"""

from __future__ import annotations

import io
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from assistant import diagnose
from assistant.triage.model import FAILED, SUCCEEDED, Group, JobReport, TriageResult
from assistant.triage.render_html import to_html
from assistant.triage.render_markdown import md_inline, to_markdown
from assistant.triage.render_terminal import clean_text, make_progress, progress_hook, render_table
from conftest import CAPTURES

CPU = [c for c in CAPTURES if c["device"] == "cpu"][:3]
DAY = 1_795_000_000.0  # 2026-11-19 UTC
HOSTILE = "[bold red]x[/] <script>alert(1)</script> <img src=x onerror=\"window.__pwned=1\"> | ``` \x1b]52;c;SGVsbG8=\x07 \x1b[31mred\x1b[0m"
HOSTILE_TITLE = "Bad [bold red]x[/] | <script>alert(1)</script> in loss"
CHROMIUM = Path("/usr/bin/chromium")


def _tail(text: str, n: int = 14) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


@pytest.fixture(scope="module")
def result(settings) -> TriageResult:  # type: ignore[no-untyped-def]
    """Four groups (hours, hours, hostile small hours, unknown hours), two succeeded jobs, notes."""
    assert len(CPU) == 3, "need three matched CPU captures"
    fast = settings.with_overrides(dense=False)
    hostile_text = f'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    step()\nRuntimeError: loss went bad {HOSTILE}\n'
    texts = [CPU[0]["stderr"], CPU[1]["stderr"], hostile_text, CPU[2]["stderr"]]
    diags = [diagnose(t, settings=fast) for t in texts]
    # (job ids, GPUs, hours each (None = unknown), title, excerpt)
    plan = [
        (("job-0001", "job-0002", "job-0003", "job-0004"), 8, 2.0, diags[0].title, _tail(texts[0])),
        (("job-0010", "job-0011"), 4, 1.25, diags[1].title, _tail(texts[1])),
        (("job-0020|x",), 1, 0.5, HOSTILE_TITLE, _tail(texts[2])),
        (("job-0030",), None, None, diags[3].title, _tail(texts[3])),
    ]
    jobs: list[JobReport] = []
    groups: list[Group] = []
    group_of: dict[str, str] = {}
    for gi, ((ids, gpus, hours, title, excerpt), d, text) in enumerate(zip(plan, diags, texts, strict=True)):
        gid = f"g{gi:02d}-{d.category}"
        for k, job_id in enumerate(ids):
            start = None if hours is None else DAY + gi * 86_400 + k * 3_600
            jobs.append(JobReport(
                job_id=job_id, files=("slurm-1.out", f"rank_{k}.log"), status=FAILED, category=d.category, title=title,
                rule=d.rule, reason="exception", headline=d.error, failure_text=text, location=d.location,
                first_failing_rank=k if gpus and gpus > 1 else None, ranks_seen=gpus or 1, gpus=gpus,
                start=start, end=None if start is None else start + 3_600 * hours, gpu_hours=None if hours is None else gpus * hours,
                size_bytes=10_000 + k,
            ))
            group_of[job_id] = gid
        starts = [j.start for j in jobs if j.job_id in ids and j.start is not None]
        groups.append(Group(
            group_id=gid, category=d.category, title=title, template=f"<*> {d.category} template <*>", location=d.location,
            job_ids=ids, gpu_hours=0.0 if hours is None else len(ids) * gpus * hours,
            first_seen=min(starts, default=None), last_seen=max(starts, default=None),
            representative=ids[0], excerpt=excerpt + (f"\n{HOSTILE}" if gi == 2 else ""), diagnosis=d,
        ))
    jobs.append(JobReport(job_id="job-0100", files=("stdout.log",), status=SUCCEEDED, gpus=2, start=DAY, end=DAY + 600, gpu_hours=2 / 6, size_bytes=500))
    jobs.append(JobReport(job_id="job-0101", files=("stdout.log", "rank_3.log.gz"), status=SUCCEEDED, size_bytes=70,
                          notes=("rank_3.log.gz: unreadable (gzip CRC check failed); skipped",)))
    return TriageResult(
        jobs=tuple(sorted(jobs, key=lambda j: j.job_id)), groups=tuple(groups), group_of=group_of,
        notes=("job-0100/stdout.log: 2.1 GB, read the first and last 64 MB",), elapsed_s=1.5, bytes_read=2_345_678,
    )


def _flat(text: str) -> str:
    """Rendered text without whitespace and box drawing, so wrapped paragraphs can be searched."""
    return re.sub(r"[\s│╭╮╰╯─━┃╶╴]+", "", text)


# --- helpers ---------------------------------------------------------------------------------------


def test_clean_text_removes_escape_sequences_and_controls() -> None:
    assert clean_text("a\x1b]52;c;SGVsbG8=\x07b") == "ab"
    assert clean_text("\x1b[1;31mred\x1b[0m\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\") == "redlink"
    assert clean_text("x\u202eevil\u2066y\x00\x08z\x9b2J") == "xevilyz"
    assert clean_text("a\r\nb\rc") == "a\nb\nc"
    assert clean_text("  a \n\t b ", oneline=True) == "a b"
    assert clean_text("abcdef", limit=4) == "abc…"
    # An unterminated OSC loses only its introducer: nothing after it is eaten (issue 12, defect 2).
    assert clean_text("\x1b]0;title\nnext line") == "0;title\nnext line"


# --- terminal --------------------------------------------------------------------------------------


@pytest.mark.parametrize("width", [80, 120])
def test_terminal_table_fits_and_says_everything(result: TriageResult, width: int) -> None:
    from rich.console import Console

    console = Console(width=width, record=True, file=io.StringIO(), force_terminal=True, color_system="truecolor")
    render_table(result, console, top=5)
    plain = console.export_text()
    for line in plain.splitlines():
        assert len(line) <= width, f"line wider than {width}: {line!r}"
    assert "4 failure groups, ranked by GPU hours lost" in plain
    assert "10 jobs read · 8 failed · 2 succeeded · 4 groups · 74.5 GPU h lost" in plain
    assert "64.0" in plain and "10.0" in plain and "0.50" in plain  # per-group GPU hours
    assert "—" in plain  # the group with unknown hours is listed, as unknown
    assert "1 unreadable file noted" in plain
    assert "note: job-0100/stdout.log: 2.1 GB" in plain
    assert "2026-11-19" in plain  # first seen as a date
    for job_id in ("job-0001", "job-0002", "job-0003", "job-0010", "job-0020", "job-0030"):
        assert job_id in plain
    assert "job-0004" not in plain.split("jobs read")[0]  # only three example ids per group
    flat = _flat(plain)
    for g in result.groups:
        d = g.diagnosis
        assert d is not None
        assert _flat(clean_text(d.cause).split("\n\n")[0]) in flat, "cause paragraph shown"
        for f in d.fixes[:2]:
            assert _flat(clean_text(f.title, oneline=True)) in flat
            if f.code:
                first_code_line = next(ln for ln in f.code.splitlines() if ln.strip())
                # A line wider than the panel is cut with "…" (by design, the full code is in the other reports): its start is shown.
                assert _flat(first_code_line)[:30] in flat
        for s in d.sources:
            assert s.id in flat
    if width >= 110:
        assert "category" in plain and "first seen" in plain and "last seen" in plain
    assert result.groups[0].diagnosis.category in plain  # type: ignore[union-attr]


def test_terminal_output_is_inert(result: TriageResult) -> None:
    from rich.console import Console

    sink = io.StringIO()
    console = Console(width=100, record=True, file=sink, force_terminal=True, color_system="truecolor")
    render_table(result, console, top=5)
    raw = sink.getvalue()  # exactly what a terminal would receive
    plain = console.export_text()
    # Markup came out literally: had rich parsed it, "[bold red]" would have vanished.
    assert "[bold red]x[/]" in plain
    assert "<script>alert(1)</script>" in _flat(plain) or "<script>alert(1)</script>" in plain
    for bad in ("\x1b]", "\x07", "52;c;", "SGVsbG8="):
        assert bad not in raw, f"{bad!r} reached the terminal"
    assert "\x1b[31mred" not in raw


def test_progress_counts_jobs_and_megabytes(result: TriageResult) -> None:
    from rich.console import Console

    console = Console(width=100, record=True, file=io.StringIO(), force_terminal=True)
    progress = make_progress(console)
    with progress:
        task = progress.add_task("reading jobs", total=len(result.jobs), bytes=0)
        hook = progress_hook(progress, task)
        for job in result.jobs:
            hook(job)
    t = progress.tasks[0]
    assert t.completed == len(result.jobs) and t.finished
    assert t.fields["bytes"] == sum(j.size_bytes for j in result.jobs)
    text = console.export_text()
    assert "reading jobs" in text and f"{len(result.jobs)}/{len(result.jobs)}" in text and "MB" in text


def test_terminal_rows_cap(result: TriageResult) -> None:
    from rich.console import Console

    console = Console(width=80, record=True, file=io.StringIO())
    render_table(result, console, top=0, rows=2)
    plain = console.export_text()
    assert "job-0010" in plain and "job-0020" not in plain and "2 more groups not shown" in plain
    assert "╭" not in plain  # top=0: no diagnosis panels


def test_terminal_without_failures() -> None:
    from rich.console import Console

    console = Console(width=80, record=True, file=io.StringIO())
    render_table(TriageResult(jobs=(JobReport(job_id="a", files=("x.log",), status=SUCCEEDED),), groups=()), console)
    plain = console.export_text()
    assert "No failed jobs." in plain and "1 jobs read · 0 failed · 1 succeeded" in plain


# --- markdown --------------------------------------------------------------------------------------


def _md_html(md: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").render(md)


def test_markdown_has_summary_table_and_diagnoses(result: TriageResult) -> None:
    md = to_markdown(result, top=10)
    assert md.startswith("# torchhelp triage report\n")
    assert "**10** jobs read · **8** failed · **2** succeeded · **4** groups · **74.5** GPU hours lost" in md
    assert "| # | GPU h | jobs | category | title | first seen (UTC) | last seen (UTC) | example jobs |" in md
    for rank, g in enumerate(result.groups, 1):
        d = g.diagnosis
        assert d is not None
        assert f"## Group {rank}" in md
        assert md_inline(g.title) in md
        assert clean_text(d.cause).strip() in md
        for f in d.fixes:
            if f.code:
                assert f.code.strip().splitlines()[0] in md
        for s in d.sources:
            assert f"`{s.id}`" in md and s.path in md
        assert f"`{g.representative}`" in md
    html = _md_html(md)
    # One table, one row per group, each with eight cells even though a title holds a "|".
    rows = re.findall(r"<tr>(.*?)</tr>", html, re.S)[1:]
    assert len(rows) == len(result.groups)
    assert all(r.count("<td") == 8 for r in rows)
    fenced = html.count('<code class="language-python">') + html.count('<code class="language-bash">')  # shell fixes are fenced as bash
    assert fenced == sum(1 for g in result.groups for f in g.diagnosis.fixes if f.code)  # type: ignore[union-attr]


def test_markdown_excerpts_are_inert(result: TriageResult) -> None:
    md = to_markdown(result)
    assert "\x1b" not in md and "\x07" not in md and "52;c;" not in md
    html = _md_html(md)
    # The hostile lines never became HTML, links or emphasis, and the ``` inside did not end its fence.
    assert "<script>" not in html and "<img" not in html
    blocks = re.findall(r'<pre><code class="language-text">(.*?)</code></pre>', html, re.S)
    assert len(blocks) == len(result.groups)
    hostile_block = blocks[2]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in hostile_block and "[bold red]x[/]" in hostile_block and "```" in hostile_block
    assert "red" in hostile_block and "\x1b" not in hostile_block
    # The hostile title in the table and the heading is literal text too.
    assert "[bold red]x[/] | &lt;script&gt;alert(1)&lt;/script&gt; in loss" in html


def test_markdown_top_limits_detail(result: TriageResult) -> None:
    md = to_markdown(result, top=1)
    assert "## Group 1" in md and "## Group 2" not in md
    assert "3 more groups in the table above are not detailed here." in md


# --- html (static) ---------------------------------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_bodies: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.script_bodies.append(data)


def test_html_is_self_contained_and_escaped(result: TriageResult) -> None:
    page = to_html(result)
    parser = _Tags()
    parser.feed(page)
    names = [t for t, _ in parser.tags]
    assert names.count("script") == 1 and "img" not in names and "link" not in names and "iframe" not in names
    for tag, attrs in parser.tags:
        assert "src" not in attrs, tag
        href = attrs.get("href")
        assert href is None or href.startswith("#"), (tag, href)
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
    assert "url(" not in page and "@import" not in page
    csp = next(a["content"] for t, a in parser.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert csp is not None and "default-src 'none'" in csp and "unsafe-inline" not in csp
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\x1b" not in page and "\x07" not in page and "52;c;" not in page
    assert names.count("details") == len(result.groups) + 1  # the groups, and the notes
    assert page.count('class="bar"') == len(result.groups)
    assert "job-0101: rank_3.log.gz: unreadable" in page


# --- html in a real Chromium -----------------------------------------------------------------------


def test_html_in_headless_chromium(result: TriageResult, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        if os.environ.get("TORCHHELP_REQUIRE_CHROMIUM"):  # CI installs it: a missing browser must fail there, not skip
            pytest.fail("TORCHHELP_REQUIRE_CHROMIUM is set but /usr/bin/chromium is missing")
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    page_file = tmp_path / "report.html"
    page_file.write_text(to_html(result), encoding="utf-8")
    url = page_file.as_uri()

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            requests: list[str] = []
            failed: list[str] = []
            errors: list[str] = []
            dialogs: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.on("requestfailed", lambda r: failed.append(f"{r.url} {r.failure}"))
            page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(url, wait_until="load")

            # The inline style applied under the CSP (its hash matched) and the summary is there.
            assert page.evaluate("getComputedStyle(document.body).maxWidth") == "1100px"
            totals = page.inner_text("#totals")
            assert "jobs read" in totals and "10" in totals and "GPU hours lost" in totals
            assert page.inner_text("#generated").endswith("UTC")

            # The chart: one bar per group; a bar has width exactly when its group lost GPU hours.
            bars = page.locator("svg.chart rect.bar")
            assert bars.count() == len(result.groups)
            widths = [bars.nth(i).evaluate("el => el.getBoundingClientRect().width") for i in range(bars.count())]
            for g, w in zip(result.groups, widths, strict=True):
                assert (w > 0) == (g.gpu_hours > 0), (g.title, w)
            assert widths[0] >= widths[1] >= widths[2] > 0 and widths[3] == 0
            labels = page.locator("svg.chart text.label").all_text_contents()  # SVG text has no innerText
            assert len(labels) == len(result.groups) and labels[0].startswith("#1 ")
            assert page.locator("svg.chart text.value").all_text_contents()[3] == "unknown"

            # Clicking a group's summary expands it and its diagnosis becomes visible.
            first = page.locator("#group-1")
            cause = first.locator("p.cause").first
            assert first.get_attribute("open") is None and not cause.is_visible()
            first.locator("summary").click()
            assert first.get_attribute("open") is not None
            assert cause.is_visible()
            expected = clean_text(result.groups[0].diagnosis.cause).split("\n\n")[0].strip()  # type: ignore[union-attr]
            assert " ".join(cause.inner_text().split()) == " ".join(expected.replace("`", "").split())
            assert first.locator("pre.excerpt").is_visible()
            assert first.locator("ol.fixes pre code").first.is_visible()

            # The inline script runs (CSP hash matched): a bar opens its group, "Expand all" opens every group.
            page.locator('svg.chart a[data-rank="2"]').click()
            assert page.locator("#group-2").get_attribute("open") is not None
            page.click("#expand-all")
            assert page.locator("details.group[open]").count() == len(result.groups)

            # The hostile excerpt is shown as text and ran nothing.
            hostile = page.locator("#group-3 pre.excerpt").inner_text()
            assert "<script>alert(1)</script>" in hostile and "[bold red]x[/]" in hostile and "```" in hostile
            assert page.evaluate("window.__pwned") is None
            assert "Bad [bold red]x[/] | <script>alert(1)</script> in loss" in page.inner_text("#group-3 summary")

            assert requests == [url], f"unexpected requests: {requests}"
            assert not failed, failed
            assert not errors, errors
            assert not dialogs, dialogs
        finally:
            browser.close()


# --- against the lead's real pipeline, once it lands ----------------------------------------------


def test_reports_render_a_built_result(result: TriageResult) -> None:
    import assistant.triage.api as api
    built = api.build_result(list(result.jobs))
    from rich.console import Console

    console = Console(width=80, record=True, file=io.StringIO())
    render_table(built, console)
    assert all(len(ln) <= 80 for ln in console.export_text().splitlines())
    assert to_markdown(built).startswith("# torchhelp triage report")
    page = to_html(built)
    assert page.count('class="bar"') == len(built.groups) and "<script>alert(1)</script>" not in page
