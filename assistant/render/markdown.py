"""Markdown rendering, for pasting into an issue or a chat."""

from __future__ import annotations

import re

from assistant.render.facts import facts_line
from assistant.render.experiments import markdown_lines as experiment_lines
from assistant.render.hypotheses import markdown_lines as hypothesis_lines
from assistant.render.outgoing import shown
from assistant.types import Diagnosis


def _fence(text: str, char: str = "`") -> str:
    """A code fence longer than any run of ``char`` inside ``text``: the block cannot be closed early."""
    longest = max((len(run) for run in re.findall(f"{re.escape(char)}+", text)), default=0)
    return char * max(3, longest + 1)


_SHELL_COMMANDS = (
    "accelerate apt apt-get cat cd chmod conda cp curl deepspeed df dmesg docker du echo env export find free git grep head "
    "htop kill kubectl ls make mkdir module mv nvidia-smi pip pip3 ps python python3 rm rsync sacct salloc sbatch scancel "
    "scontrol scp sinfo source squeue srun ssh sudo tail tar time top torchhelp torchrun ulimit uv watch wget which"
).split()
_SHELL_LINE = re.compile(
    r"^(?:\$\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:" + "|".join(map(re.escape, _SHELL_COMMANDS)) + r")(?=\s+[^=\s]|\s*$)"
)


def code_language(code: str) -> str:
    """The fence language for a fix's code: ``bash`` when every line (comments aside) is a shell command, else ``python``."""
    lines = [ln.strip() for ln in code.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return "bash" if lines and all(_SHELL_LINE.match(ln) for ln in lines) else "python"


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
    lines += experiment_lines(d, _fence)
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
                lines += ["", f"   {fence}{code_language(f.code)}", *("   " + ln for ln in f.code.splitlines()), f"   {fence}"]
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
