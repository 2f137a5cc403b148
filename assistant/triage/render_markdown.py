"""Triage as GitHub-flavoured Markdown, for a ticket: summary, groups table, then each top group in full.

Text from logs (titles, headlines, locations, templates, job ids) is escaped as inline Markdown, so
a log line cannot open a link, an image, raw HTML or a table cell. Excerpts and code go in fenced
blocks whose fence is longer than any run of backticks inside them, so no excerpt can close its
fence early; their content stays byte for byte what the log said (minus control characters).
Engine prose (cause, fix details) is Markdown by design and is passed through, cleaned.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from assistant.triage.model import Group, TriageResult
from assistant.triage.render_terminal import clean_text, code_lang, error_line, fmt_hours, fmt_minute, fmt_time, hours_known, unreadable_notes

# Backslash-escaping any ASCII punctuation is valid CommonMark; these are the ones that can start
# markup inline (emphasis, code, links, images, raw HTML, entities, strikethrough, table cells).
_INLINE = re.compile(r"([\\`*_\[\]<>|~&!#])")
_BACKTICKS = re.compile(r"`+")


def md_inline(text: str | None, *, limit: int | None = None) -> str:
    """Untrusted text as one line of inert inline Markdown."""
    return _INLINE.sub(r"\\\1", clean_text(text, oneline=True, limit=limit))


def md_code_span(text: str | None, *, limit: int | None = None, cell: bool = False) -> str:
    """Untrusted text as an inline code span, its delimiter longer than any backtick run inside.

    In a table ``cell``, ``|`` is escaped even inside the span: GFM splits cells before it parses spans.
    """
    body = clean_text(text, oneline=True, limit=limit)
    if not body:
        return ""
    ticks = "`" * (max((len(m) for m in _BACKTICKS.findall(body)), default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    if cell:
        body = body.replace("|", "\\|")
    return f"{ticks}{pad}{body}{pad}{ticks}"


def md_fence(text: str, lang: str = "text", indent: str = "") -> list[str]:
    """A fenced block holding ``text`` verbatim: the fence is at least one backtick longer than any run inside."""
    body = clean_text(text).rstrip("\n")
    fence = "`" * max(3, max((len(m) for m in _BACKTICKS.findall(body)), default=0) + 1)
    return [f"{indent}{fence}{lang}", *(f"{indent}{ln}" for ln in body.splitlines()), f"{indent}{fence}"]


def to_markdown(result: TriageResult, *, top: int = 10, generated_at: datetime | None = None) -> str:
    """The triage result as a Markdown ticket: summary, table of all groups, the top ``top`` groups in detail."""
    when = (generated_at or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    failed = len(result.failed)
    total_hours = sum(g.gpu_hours for g in result.groups)
    lines = ["# torchhelp triage report", ""]
    lines.append(
        f"**{len(result.jobs)}** jobs read · **{failed}** failed · **{len(result.jobs) - failed}** succeeded · "
        f"**{len(result.groups)}** groups · **{fmt_hours(total_hours)}** GPU hours lost · generated {when}"
    )
    unreadable = unreadable_notes(result)
    if unreadable:
        lines.append(f"\n{len(unreadable)} unreadable file{'s' if len(unreadable) != 1 else ''} noted.")
    lines.append("")
    if result.notes:
        lines += ["**Notes**", ""]
        lines += [f"- {md_inline(n, limit=400)}" for n in result.notes]
        lines.append("")

    if not result.groups:
        lines += ["No failed jobs.", ""]
        return "\n".join(lines).rstrip() + "\n"

    lines += ["## Groups", "", "| # | GPU h | jobs | category | title | first seen (UTC) | last seen (UTC) | example jobs |", "|---:|---:|---:|---|---|---|---|---|"]
    for rank, g in enumerate(result.groups, 1):
        examples = ", ".join(md_code_span(j, limit=80, cell=True) for j in g.job_ids[:3]) + (f" +{len(g.job_ids) - 3}" if len(g.job_ids) > 3 else "")
        title = md_inline(g.title, limit=160) or "(untitled)"
        if rank <= top:
            title = f"[{title}](#{_anchor(rank)})"
        title += f" · group {md_code_span(g.group_id, cell=True)}"
        title += "".join(f" — {md_inline(line, limit=240)}" for line in _known_lines(result, g))
        lines.append(
            f"| {rank} | {fmt_hours(g.gpu_hours, hours_known(result, g))} | {len(g.job_ids)} | {md_code_span(g.category, cell=True)} | {title} "
            f"| {fmt_minute(g.first_seen)} | {fmt_minute(g.last_seen)} | {examples} |"
        )
    lines.append("")

    for rank, g in enumerate(result.groups[: max(top, 0)], 1):
        lines += _group_section(result, g, rank)
    rest = len(result.groups) - max(top, 0)
    if rest > 0:
        lines += [f"*{rest} more group{'s' if rest != 1 else ''} in the table above are not detailed here.*", ""]
    return "\n".join(lines).rstrip() + "\n"


def _known_lines(result: TriageResult, g: Group) -> list[str]:
    """``REGRESSION: ...``, ``known: <note> (resolved <date>)`` and the runbook, for a resolved group."""
    from assistant.triage.known import known_text, regression_text

    k = result.known.get(g.group_id)
    if k is None:
        return []
    lines = [regression_text(k)] if k.regression else []
    return [*lines, known_text(k), f"runbook {k.runbook}"]


def _anchor(rank: int) -> str:
    # GitHub slugs headings itself; an explicit <a id> would be raw HTML, so the heading text is
    # chosen to slug predictably: "Group 3" -> "group-3".
    return f"group-{rank}"


def _group_section(result: TriageResult, g: Group, rank: int) -> list[str]:
    """One group: facts line, diagnosis (cause, fixes with code, sources), example jobs, excerpt."""
    d = g.diagnosis
    lines = [f"## Group {rank}", "", f"**{md_inline(g.title, limit=200) or '(untitled)'}**", ""]
    facts = [
        f"**category** {md_code_span(g.category)}",
        f"**jobs** {len(g.job_ids)}",
        f"**GPU hours** {fmt_hours(g.gpu_hours, hours_known(result, g))}",
        f"**seen** {fmt_time(g.first_seen)} → {fmt_time(g.last_seen)}",
        f"**group** {md_code_span(g.group_id)}",
    ]
    lines += [" · ".join(facts), ""]
    k = result.known.get(g.group_id)
    if k is not None:
        from assistant.triage.known import known_text, regression_text

        if k.regression:
            jobs = ", ".join(md_code_span(j, limit=80) for j in k.regression_jobs[:10])
            lines += [f"**{md_inline(regression_text(k))}**: {jobs}", ""]
        lines += [f"**{md_inline(known_text(k), limit=600)}** · runbook {md_code_span(k.runbook)} "
                  f"({md_code_span(k.runbook_path)}), resolved by {md_inline(k.by)}", ""]
    error = error_line(result, g)
    if error:
        lines += [f"**error:** {md_code_span(error, limit=400)}", ""]
    location = g.location or (d.location if d is not None else None)
    if location:
        lines += [f"**location:** {md_code_span(location, limit=300)}", ""]
    if g.template:
        lines += [f"**template:** {md_code_span(g.template, limit=300)}", ""]

    if d is None:
        lines += ["*No diagnosis for this group (the engine was not run).*", ""]
    else:
        lines += ["### Diagnosis", "", f"*{md_inline(d.title)}* ({md_code_span(d.category)}, confidence {d.confidence:.0%}, answered by {md_inline(d.backend)})", ""]
        lines += [clean_text(d.cause).strip(), ""]
        if d.fixes:
            lines += ["#### Fixes", ""]
            for i, f in enumerate(d.fixes, 1):
                cite = f" [{', '.join(md_inline(s) for s in f.sources)}]" if f.sources else ""
                detail = f" — {clean_text(f.detail, oneline=True)}" if f.detail else ""
                lines.append(f"{i}. **{clean_text(f.title, oneline=True)}**{cite}{detail}")
                if f.code:
                    lines += ["", *md_fence(f.code, code_lang(f.code), indent="   ")]
            lines.append("")
        if d.sources:
            lines += ["#### Sources", ""]
            lines += [f"- {md_code_span(s.id)} — {md_inline(s.title)} ({md_code_span(s.path)}, score {s.score:.2f})" for s in d.sources]
            lines.append("")

    lines += ["### Example jobs", ""]
    by_id = {j.job_id: j for j in result.jobs}
    shown = g.job_ids[:10]
    for job_id in shown:
        j = by_id.get(job_id)
        extra = []
        if j is not None:
            if j.first_failing_rank is not None:
                extra.append(f"first failing rank {j.first_failing_rank}")
            if j.gpu_hours is not None:
                extra.append(f"{fmt_hours(j.gpu_hours)} GPU h")
            if j.files:
                extra.append("files " + ", ".join(md_code_span(f, limit=120) for f in j.files[:4]) + (" …" if len(j.files) > 4 else ""))
        rep = " (representative)" if job_id == g.representative else ""
        lines.append(f"- {md_code_span(job_id, limit=120)}{rep}" + (f" — {'; '.join(extra)}" if extra else ""))
    if len(g.job_ids) > len(shown):
        lines.append(f"- … and {len(g.job_ids) - len(shown)} more")
    lines.append("")

    if g.excerpt.strip():
        lines += [f"### Log excerpt ({md_code_span(g.representative, limit=120)})", "", *md_fence(g.excerpt), ""]
    return lines
