"""Triage as ONE self-contained HTML page: summary, a bar chart of GPU hours, expandable groups.

The page loads nothing: CSS and a little JS are inline, the chart is inline SVG, and a
Content-Security-Policy meta forbids every fetch (``default-src 'none'``). The inline script and
style are allowed by their SHA-256 hashes rather than ``'unsafe-inline'``, so even if some log text
slipped through unescaped, an injected ``<script>`` or ``onerror=`` would not run.

Everything that came from a log (titles, headlines, excerpts, job ids, paths, templates) is cleaned
of control characters and passed through :func:`html.escape`; nothing is inserted as markup.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

from assistant.triage.model import Group, Known, TriageResult
from assistant.triage.render_terminal import clean_text, code_lang, error_line, fmt_bytes, fmt_hours, fmt_time, hours_known, unreadable_notes

_MAX_JOB_ROWS = 300  # per group; a cluster-wide failure can hold thousands of jobs

_CSS = """
:root { color-scheme: light dark; --fg:#1d2430; --muted:#5d6778; --bg:#fff; --card:#f5f7fa; --line:#d9dee7; --bar:#d9534f; --accent:#2f6fd0; --code:#eef1f5; }
@media (prefers-color-scheme: dark) { :root { --fg:#e3e7ee; --muted:#9aa4b5; --bg:#14171c; --card:#1c2027; --line:#2e3440; --bar:#e0645f; --accent:#79a8f0; --code:#232832; } }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1100px; padding: 24px; font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; } h3 { font-size: 15px; margin: 18px 0 6px; } h4 { font-size: 14px; margin: 12px 0 4px; }
.muted { color: var(--muted); }
.totals { display: flex; flex-wrap: wrap; gap: 8px 24px; margin: 12px 0; padding: 12px 16px; background: var(--card); border: 1px solid var(--line); border-radius: 8px; }
.totals div { display: flex; flex-direction: column; } .totals dt { color: var(--muted); font-size: 12px; } .totals dd { margin: 0; font-size: 18px; font-weight: 600; }
svg.chart { width: 100%; display: block; overflow: visible; }
svg.chart text { font: 13px system-ui, sans-serif; fill: var(--fg); }
svg.chart tspan.code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
svg.chart .value { fill: var(--muted); }
svg.chart rect.bar { fill: var(--bar); } svg.chart a:hover rect.bar, svg.chart a:focus rect.bar { opacity: .8; }
svg.chart rect.track { fill: var(--card); } svg.chart rect.hit { fill: transparent; }
details.group { border: 1px solid var(--line); border-radius: 8px; margin: 8px 0; background: var(--bg); }
details.group > summary { cursor: pointer; padding: 10px 14px; list-style-position: outside; margin-left: 14px; }
details.group[open] > summary { border-bottom: 1px solid var(--line); background: var(--card); }
summary .rank { font-weight: 700; } summary .title { font-weight: 600; }
.cat { display: inline-block; padding: 0 6px; border-radius: 4px; background: var(--code); font: 12px ui-monospace, monospace; }
.body { padding: 4px 16px 14px; }
pre, code { font: 12.5px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
code { background: var(--code); padding: 1px 4px; border-radius: 3px; word-break: break-word; }
pre { background: var(--code); padding: 10px 12px; border-radius: 6px; overflow-x: auto; white-space: pre; }
pre code { background: none; padding: 0; }
pre.excerpt { max-height: 420px; overflow: auto; }
table.jobs { border-collapse: collapse; width: 100%; font-size: 13px; }
table.jobs th, table.jobs td { text-align: left; border-bottom: 1px solid var(--line); padding: 3px 8px; vertical-align: top; }
.controls button { font: inherit; margin-right: 6px; padding: 3px 10px; border: 1px solid var(--line); border-radius: 6px; background: var(--card); color: var(--fg); cursor: pointer; }
.cite { color: var(--muted); font-size: 12px; }
.gid { font-size: 11.5px; }
.badge { display: inline-block; padding: 0 6px; border-radius: 4px; font-size: 12px; font-weight: 700; }
.badge.known { background: #2e7d32; color: #fff; } .badge.regression { background: #c62828; color: #fff; }
p.known { color: #2e7d32; } p.regression { color: #c62828; font-weight: 600; }
form.resolve { display: flex; gap: 6px; align-items: center; margin: 8px 0; }
form.resolve input[type=text] { flex: 1; font: inherit; padding: 3px 6px; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); color: var(--fg); }
form.resolve button { font: inherit; padding: 3px 10px; border: 1px solid var(--line); border-radius: 6px; background: var(--card); color: var(--fg); cursor: pointer; }
.table-wrap { overflow-x: auto; }
@media (max-width: 640px) {
  body { padding: 12px; }
  .totals { gap: 6px 16px; padding: 10px 12px; } .totals dd { font-size: 16px; }
  details.group > summary { padding: 8px 10px; margin-left: 10px; }
  .body { padding: 4px 10px 12px; }
  form.resolve { flex-wrap: wrap; }
}
"""

_JS = """
(function () {
  "use strict";
  function openGroup(id) {
    var d = document.getElementById(id);
    if (d && d.tagName === "DETAILS") { d.open = true; }
    return d;
  }
  document.querySelectorAll("svg.chart a").forEach(function (a) {
    a.addEventListener("click", function () { openGroup((a.getAttribute("href") || "").slice(1)); });
  });
  function setAll(open) { document.querySelectorAll("details.group").forEach(function (d) { d.open = open; }); }
  var expand = document.getElementById("expand-all"), collapse = document.getElementById("collapse-all");
  if (expand) { expand.addEventListener("click", function () { setAll(true); }); }
  if (collapse) { collapse.addEventListener("click", function () { setAll(false); }); }
  function fromHash() { if (location.hash.length > 1) { var d = openGroup(location.hash.slice(1)); if (d) { d.scrollIntoView(); } } }
  window.addEventListener("hashchange", fromHash);
  fromHash();
})();
"""


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


# No fetch of any kind: only this page's own style and script, identified by hash. A page served with
# resolve buttons (``torchhelp serve``) may also post its forms back to the server that served it.
_CSP_BASE = (
    f"default-src 'none'; script-src '{_sha256(_JS)}'; style-src '{_sha256(_CSS)}'; "
    "img-src 'none'; font-src 'none'; connect-src 'none'; media-src 'none'; object-src 'none'; "
    "frame-src 'none'; worker-src 'none'; manifest-src 'none'; base-uri 'none'; "
)
_CSP = _CSP_BASE + "form-action 'none'"
CSP_WITH_FORMS = _CSP_BASE + "form-action 'self'"
_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def _t(text: str | None, *, oneline: bool = False, limit: int | None = None) -> str:
    """Untrusted text, cleaned and html-escaped (quotes too, so it is safe in attributes)."""
    return escape(clean_text(text, oneline=oneline, limit=limit), quote=True)


def _spans(text: str) -> list[tuple[str, bool]]:
    """Cleaned text cut into (piece, is_code) at its Markdown `code spans` (an unpaired backtick stays text)."""
    parts = _CODE_SPAN.split(text)  # even indexes: text between spans; odd: a span's content
    return [(p, i % 2 == 1) for i, p in enumerate(parts) if p]


def _prose(text: str | None, *, oneline: bool = False, limit: int | None = None) -> str:
    """Engine prose or a title: cleaned, escaped, its `code spans` shown as <code> (their content escaped too)."""
    return "".join(f"<code>{escape(p, quote=True)}</code>" if code else escape(p, quote=True)
                   for p, code in _spans(clean_text(text, oneline=oneline, limit=limit)))


def _svg_label(text: str) -> str:
    """A chart label as SVG text content: escaped, its `code spans` in a monospace <tspan> without the backticks."""
    return "".join(f'<tspan class="code">{escape(p, quote=True)}</tspan>' if code else escape(p, quote=True) for p, code in _spans(text))


@dataclass(frozen=True)
class ResolveForm:
    """Where a served report posts its "Resolve" buttons, and the anti-forgery token they carry."""

    action: str
    csrf: str


def to_html(result: TriageResult, *, generated_at: datetime | None = None, resolve: ResolveForm | None = None) -> str:
    """The triage result as one self-contained HTML page (no network loads, CSP-enforced).

    With ``resolve`` (the page ``torchhelp serve`` serves), each group gets a note field and a
    Resolve button posting to ``resolve.action``; the CSP then allows forms to post to the page's own origin.
    """
    when = (generated_at or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    failed = len(result.failed)
    groups = result.groups
    total_hours = sum(g.gpu_hours for g in groups)
    out: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head>',
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP_WITH_FORMS if resolve else _CSP, quote=True)}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>torchhelp triage — {failed} failed jobs in {len(groups)} groups</title>",
        f"<style>{_CSS}</style>",
        "</head><body>",
        "<header>",
        "<h1>torchhelp triage</h1>",
        f'<p class="muted">Generated <time id="generated">{escape(when)}</time></p>',
        '<dl class="totals" id="totals">',
    ]
    totals = [
        ("jobs read", str(len(result.jobs))),
        ("failed", str(failed)),
        ("succeeded", str(len(result.jobs) - failed)),
        ("groups", str(len(groups))),
        ("GPU hours lost", fmt_hours(total_hours)),
    ]
    if result.bytes_read:
        totals.append(("data read", fmt_bytes(result.bytes_read)))
    if result.elapsed_s:
        totals.append(("triage time", f"{result.elapsed_s:.1f} s"))
    unreadable = unreadable_notes(result)
    if unreadable:
        totals.append(("unreadable files", str(len(unreadable))))
    out += [f"<div><dt>{escape(k)}</dt><dd>{escape(v)}</dd></div>" for k, v in totals]
    out.append("</dl>")
    notes = list(result.notes) + [f"{j.job_id}: {n}" for j in result.jobs for n in j.notes]
    if notes:
        out.append(f'<details class="notes"><summary>{len(notes)} note{"s" if len(notes) != 1 else ""} (unreadable files, truncation, assumptions)</summary><ul>')
        out += [f"<li>{_t(n, oneline=True, limit=500)}</li>" for n in notes[:500]]
        if len(notes) > 500:
            out.append(f"<li>… and {len(notes) - 500} more</li>")
        out.append("</ul></details>")
    out.append("</header>")

    if not groups:
        out += ["<main><p>No failed jobs.</p></main>"]
    else:
        out += ["<main>", "<h2>GPU hours lost per group</h2>", _chart(result), "<h2>Groups</h2>"]
        out.append('<p class="controls"><button type="button" id="expand-all">Expand all</button><button type="button" id="collapse-all">Collapse all</button></p>')
        for rank, g in enumerate(groups, 1):
            out.append(_group(result, g, rank, resolve))
        out.append("</main>")
    out += [f"<script>{_JS}</script>", "</body></html>"]
    return "\n".join(out) + "\n"


def _known_html(k: Known | None) -> list[str]:
    """The regression and known lines of a resolved group, citing its runbook."""
    if k is None:
        return []
    from assistant.triage.known import known_text, regression_text

    out = []
    if k.regression:
        jobs = ", ".join(f"<code>{_t(j)}</code>" for j in k.regression_jobs[:20])
        out.append(f'<p class="regression">{_t(regression_text(k))}: {jobs}</p>')
    out.append(f'<p class="known">{_t(known_text(k), oneline=True, limit=2100)} · runbook <code class="runbook">{_t(k.runbook)}</code> '
               f'<span class="cite">{_t(k.runbook_path)} · resolved by {_t(k.by)}</span></p>')
    return out


# The chart's geometry: a row per group, its label on one line and its bar under it, in percent of the
# page's width (no viewBox: text keeps its 13 px on a phone instead of shrinking with the drawing).
_ROW_H, _LABEL_Y, _BAR_Y, _BAR_H = 46, 15, 22, 14
_BAR_MAX_PCT = 76.0  # the rest of the row holds the value after the longest bar
_LABEL_CHARS = 44  # fits 390 px (a phone) at 13 px; the full title is the bar's tooltip and the group below


def _chart(result: TriageResult) -> str:
    """Inline SVG, one labelled bar per group in rank order, each linked to its group; readable from 390 px up."""
    groups = result.groups
    top = max((g.gpu_hours for g in groups), default=0.0)
    height = _ROW_H * len(groups) + 4
    parts = [
        f'<svg class="chart" id="chart" width="100%" height="{height}" role="img" '
        f'aria-label="GPU hours lost per group" xmlns="http://www.w3.org/2000/svg">'
    ]
    for rank, g in enumerate(groups, 1):
        y = 2 + (rank - 1) * _ROW_H
        known = hours_known(result, g)
        pct = 0.0 if top <= 0 or g.gpu_hours <= 0 else max(0.4, _BAR_MAX_PCT * g.gpu_hours / top)  # a tiny loss stays visible
        label = f"#{rank} {clean_text(g.title, oneline=True) or '(untitled)'}"
        short = clean_text(label, limit=_LABEL_CHARS)
        value = f"{fmt_hours(g.gpu_hours)} h" if known else "unknown"
        full = f"{''.join(p for p, _ in _spans(label))} — {g.category} — {len(g.job_ids)} jobs — {value}"
        parts.append(
            f'<a href="#group-{rank}" class="bar-link" data-rank="{rank}">'
            f"<title>{_t(full)}</title>"
            f'<rect class="hit" x="0" y="{y}" width="100%" height="{_ROW_H}"></rect>'  # the whole row is the link
            f'<text x="0" y="{y + _LABEL_Y}" class="label">{_svg_label(short)}</text>'
            f'<rect class="track" x="0" y="{y + _BAR_Y}" width="{_BAR_MAX_PCT}%" height="{_BAR_H}" rx="3"></rect>'
            f'<rect class="bar" data-rank="{rank}" data-hours="{g.gpu_hours:.4f}" x="0" y="{y + _BAR_Y}" width="{pct:.2f}%" height="{_BAR_H}" rx="3"></rect>'
            f'<text x="{pct:.2f}%" dx="6" y="{y + _BAR_Y + _BAR_H - 2}" class="value">{escape(value)}</text>'
            "</a>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _group(result: TriageResult, g: Group, rank: int, resolve: ResolveForm | None = None) -> str:
    """One ``<details>``: summary line, then known/regression, diagnosis, jobs and the example excerpt."""
    d = g.diagnosis
    known = hours_known(result, g)
    k = result.known.get(g.group_id)
    badge = ""
    if k is not None:
        badge = ' <span class="badge regression">REGRESSION</span>' if k.regression else ' <span class="badge known">known</span>'
    out = [
        f'<details class="group" id="group-{rank}" data-group="{_t(g.group_id)}">',
        f'<summary><span class="rank">#{rank}</span> <span class="title">{_prose(g.title, oneline=True, limit=300) or "(untitled)"}</span> '
        f'<span class="cat">{_t(g.category)}</span>{badge} <span class="muted">· {len(g.job_ids)} job{"s" if len(g.job_ids) != 1 else ""} '
        f'· {escape(fmt_hours(g.gpu_hours, known))} GPU h · {escape(fmt_time(g.first_seen))} → {escape(fmt_time(g.last_seen))}'
        f' · <code class="gid">{_t(g.group_id)}</code></span></summary>',
        '<div class="body">',
    ]
    out += _known_html(k)
    if resolve is not None:
        out.append(
            f'<form class="resolve" method="post" action="{escape(resolve.action, quote=True)}">'
            f'<input type="hidden" name="group" value="{_t(g.group_id)}"><input type="hidden" name="csrf" value="{escape(resolve.csrf, quote=True)}">'
            f'<input type="text" name="note" required maxlength="2000" placeholder="What fixed it?" aria-label="note for {_t(g.group_id)}">'
            f'<button type="submit" class="resolve-button">Resolve</button></form>'
        )
    error = error_line(result, g)
    if error:
        out.append(f'<p class="error">error: <code>{_t(error, oneline=True, limit=600)}</code></p>')
    location = g.location or (d.location if d is not None else None)
    if location:
        out.append(f'<p class="location">location: <code>{_t(location, oneline=True, limit=400)}</code></p>')
    if g.template:
        out.append(f'<p class="template muted">template: <code>{_t(g.template, oneline=True, limit=600)}</code></p>')

    if d is None:
        out.append('<section class="diagnosis"><p><em>No diagnosis for this group (the engine was not run).</em></p></section>')
    else:
        out.append('<section class="diagnosis">')
        out.append(f'<h3>Diagnosis: {_prose(d.title, oneline=True)}</h3>')
        out.append(f'<p class="muted"><span class="cat">{_t(d.category)}</span> · confidence {d.confidence:.0%} · answered by {_t(d.backend)}</p>')
        out += [f'<p class="cause">{_prose(p)}</p>' for p in clean_text(d.cause).strip().split("\n\n") if p.strip()]
        if d.fixes:
            out.append('<h4>Fixes</h4><ol class="fixes">')
            for f in d.fixes:
                cite = f' <span class="cite">[{", ".join(_t(s) for s in f.sources)}]</span>' if f.sources else ""
                detail = f" — {_prose(f.detail)}" if f.detail else ""
                code = f'<pre><code class="language-{code_lang(f.code)}">{_t(f.code.rstrip())}</code></pre>' if f.code else ""
                out.append(f"<li><strong>{_prose(f.title)}</strong>{cite}{detail}{code}</li>")
            out.append("</ol>")
        if d.sources:
            out.append('<h4>Sources</h4><ul class="sources">')
            out += [f"<li><code>{_t(s.id)}</code> {_t(s.title)} — <code>{_t(s.path)}</code> <span class=\"cite\">score {s.score:.2f}</span></li>" for s in d.sources]
            out.append("</ul>")
        out.append("</section>")

    out.append(f"<h3>Jobs ({len(g.job_ids)})</h3>")
    out.append('<div class="table-wrap"><table class="jobs"><thead><tr><th>job</th><th>first failing rank</th><th>GPU h</th><th>start</th><th>end</th><th>files</th></tr></thead><tbody>')
    by_id = {j.job_id: j for j in result.jobs}
    for job_id in g.job_ids[:_MAX_JOB_ROWS]:
        j = by_id.get(job_id)
        rep = ' <span class="cite">(representative)</span>' if job_id == g.representative else ""
        if j is None:
            out.append(f"<tr><td><code>{_t(job_id)}</code>{rep}</td><td colspan=\"5\" class=\"muted\">no report</td></tr>")
            continue
        rank_cell = "—" if j.first_failing_rank is None else str(j.first_failing_rank)
        files = "<br>".join(f"<code>{_t(f, oneline=True, limit=200)}</code>" for f in j.files[:6]) + (f"<br>… {len(j.files) - 6} more" if len(j.files) > 6 else "")
        out.append(
            f"<tr><td><code>{_t(job_id)}</code>{rep}</td><td>{rank_cell}</td><td>{escape(fmt_hours(j.gpu_hours))}</td>"
            f"<td>{escape(fmt_time(j.start))}</td><td>{escape(fmt_time(j.end))}</td><td>{files}</td></tr>"
        )
    out.append("</tbody></table></div>")
    if len(g.job_ids) > _MAX_JOB_ROWS:
        out.append(f'<p class="muted">… and {len(g.job_ids) - _MAX_JOB_ROWS} more jobs (see the JSONL).</p>')

    if g.excerpt.strip():
        out.append(f"<h3>Log excerpt <span class=\"muted\">({_t(g.representative)})</span></h3>")
        out.append(f'<pre class="excerpt">{_t(g.excerpt.rstrip())}</pre>')
    out += ["</div>", "</details>"]
    return "\n".join(out)
