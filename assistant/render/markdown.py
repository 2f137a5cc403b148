"""Markdown rendering, for pasting into an issue or a chat."""

from __future__ import annotations

import re

from assistant.render.facts import facts_line
from assistant.render.hypotheses import markdown_lines as hypothesis_lines
from assistant.render.outgoing import shown
from assistant.types import Diagnosis


def _fence(text: str, char: str = "`") -> str:
    """A code fence longer than any run of ``char`` inside ``text``: the block cannot be closed early."""
    longest = max((len(run) for run in re.findall(f"{re.escape(char)}+", text)), default=0)
    return char * max(3, longest + 1)


def render_markdown(d: Diagnosis) -> str:
    """The diagnosis as GitHub-flavoured markdown (untrusted strings sanitised: no escapes, no secrets)."""
    d = shown(d)
    lines = [f"## {d.title}", "", f"**Category:** `{d.category}` · **confidence:** {d.confidence:.0%} · **answered by:** {d.backend}", ""]
    if d.error:
        fence = _fence(d.error)
        lines += [f"{fence}text", d.error, fence, ""]
    read = facts_line(d)
    if read:
        lines += [f"*Read from the error:* {read}", ""]
    lines += ["### Cause", "", d.cause, ""]
    lines += hypothesis_lines(d, _fence)
    if d.evidence:
        lines += ["### Evidence", ""]
        lines += [f"- *{e.kind}*: {e.text}" for e in d.evidence]
        lines.append("")
    if d.fixes:
        lines += ["### Fixes", ""]
        for i, f in enumerate(d.fixes, 1):
            cite = f" [{', '.join(f.sources)}]" if f.sources else ""
            if f.from_team_runbook:
                cite += " *(team runbook)*"
            lines.append(f"{i}. **{f.title}**{cite}" + (f" — {f.detail}" if f.detail else ""))
            if f.code:
                fence = _fence(f.code)
                lines += ["", f"   {fence}python", *("   " + ln for ln in f.code.splitlines()), f"   {fence}"]
        lines.append("")
    if d.sources:
        lines += ["### Sources", ""]
        lines += [f"- `{s.id}` — {s.title} ({s.path}, score {s.score:.2f})" for s in d.sources]
        lines.append("")
    if d.similar:
        lines += ["### Similar resolved reports", ""]
        lines += [f"- {r.resolution or r.category} (similarity {r.similarity:.0%})" + (f" — {r.link}" if r.link else "") for r in d.similar]
        lines.append("")
    if d.notes:
        lines += ["### Notes", ""]
        lines += [f"- {n}" for n in d.notes]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
