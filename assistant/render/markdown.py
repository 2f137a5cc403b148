"""Markdown rendering, for pasting into an issue or a chat."""

from __future__ import annotations

from assistant.render.facts import facts_line
from assistant.types import Diagnosis


def render_markdown(d: Diagnosis) -> str:
    """The diagnosis as GitHub-flavoured markdown."""
    lines = [f"## {d.title}", "", f"**Category:** `{d.category}` · **confidence:** {d.confidence:.0%} · **answered by:** {d.backend}", ""]
    if d.error:
        lines += ["```text", d.error, "```", ""]
    read = facts_line(d)
    if read:
        lines += [f"*Read from the error:* {read}", ""]
    lines += ["### Cause", "", d.cause, ""]
    if d.evidence:
        lines += ["### Evidence", ""]
        lines += [f"- *{e.kind}*: {e.text}" for e in d.evidence]
        lines.append("")
    if d.fixes:
        lines += ["### Fixes", ""]
        for i, f in enumerate(d.fixes, 1):
            cite = f" [{', '.join(f.sources)}]" if f.sources else ""
            lines.append(f"{i}. **{f.title}**{cite}" + (f" — {f.detail}" if f.detail else ""))
            if f.code:
                lines += ["", "   ```python", *("   " + ln for ln in f.code.splitlines()), "   ```"]
        lines.append("")
    if d.sources:
        lines += ["### Sources", ""]
        lines += [f"- `{s.id}` — {s.title} ({s.path}, score {s.score:.2f})" for s in d.sources]
        lines.append("")
    if d.notes:
        lines += ["### Notes", ""]
        lines += [f"- {n}" for n in d.notes]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
