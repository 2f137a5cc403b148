"""The PyTorch error atlas: every message PyTorch can raise, traced to the check that raised it.

- ``extract_python``, ``extract_cpp`` and ``extract_binary`` read PyTorch's Python sources, C++/CUDA
  sources (a checkout or the wheel's headers) and shared libraries into entries: one message template
  with typed holes per check, with its exception type, file, line, function, op, condition and category;
- ``categories`` holds the hand-written category rules; ``build`` merges, de-duplicates and writes
  ``data/atlas.jsonl.gz`` and ``data/manifest.json`` (``scripts/build_atlas.py``, ``torchhelp kb atlas``);
- ``matcher`` compiles the templates into one Aho-Corasick finder and reads a message's values;
- ``origin`` (this module) loads the atlas in use and turns a match into the answer's "raised by".
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assistant.atlas.matcher import Atlas, AtlasMatch


_LABEL = re.compile(r"[A-Za-z_][\w.]{0,30}")


def user_atlas_dir(home: Path) -> Path:
    """Where ``torchhelp kb atlas`` writes an atlas rebuilt for the user's own PyTorch."""
    return home / "atlas" / "data"


@lru_cache(maxsize=4)
def atlas_for(home: Path) -> Atlas | None:
    """The atlas in use for this home: the user's rebuilt one when there is one, else the shipped one (None when neither exists)."""
    from assistant.atlas.matcher import DATA_DIR, Atlas

    user = sorted(user_atlas_dir(home).glob("*.jsonl.gz"))
    files = user or sorted(DATA_DIR.glob("*.jsonl.gz"))
    if not files:
        return None
    return Atlas.load(files, cache=home / "atlas")


def origin_of(atlas: Atlas, text: str, full_text: str = "") -> AtlasMatch | None:
    """The check that raised the failure: the best verified match of an error or kernel assertion (warnings never).

    A Python raise leaves its frame in a traceback: when the text has a traceback that does not show a
    Python entry's file, a match whose entry is C++ (or whose file is shown) is preferred, even if it covers
    fewer characters (the same message is often raised both by an eager C++ kernel and a compiler's Python).
    """
    found = [m for m in atlas.match(text, limit=8) if m.verified and m.entry.get("kind") in ("error", "kernel_assert")]
    if not found:
        return None
    traceback = "Traceback (most recent call last)" in full_text

    def hidden(m: AtlasMatch) -> bool:
        f = m.entry.get("file")
        return traceback and m.entry.get("source") == "python" and isinstance(f, str) and f not in full_text.replace("\\", "/")

    shown = [m for m in found if not hidden(m)]
    if shown:
        return shown[0]
    # No candidate's file is in the traceback: Dynamo and torch.load re-raise without the raising frame, but a
    # library may also raise the same words itself. The best match stands, marked as not seen in the traceback.
    return replace(found[0], frame_shown=False)


def _hole_words(m: AtlasMatch) -> list[str]:
    if m.entry.get("internal"):
        return []  # an internal assertion's holes are its own source location, not the user's values
    out = []
    for v in m.values:
        if v.kind == "any" and (len(v.text) > 24 or "/" in v.text or "\\" in v.text):
            continue  # a free-text hole is shown only when it is a short value
        label = (v.context or "").strip()
        # The word before the hole names the value only when it is a name (``index 10``); otherwise the value alone.
        out.append(f"{label} {v.text}" if _LABEL.fullmatch(label) else v.text)
    return out


def raised_by(m: AtlasMatch) -> dict[str, Any]:
    """What the answer says about the check: the op, where it is checked, the condition in words with the user's values."""
    e = m.entry
    where = e.get("file")
    if where and e.get("line") and e.get("file_confidence", "exact") == "exact":
        where = f"{where}:{e['line']}"
    condition = e.get("condition")
    words = ""
    if condition:
        sense = e.get("condition_sense", "required")
        words = f"`{condition}` must hold" if sense == "required" else f"raised when `{condition}`"
    values = _hole_words(m)
    if values:
        words = (words + "; " if words else "") + "yours: " + ", ".join(values[:4])
    return {
        "seen_in_traceback": m.frame_shown is not False, "op": e.get("op"), "where": where, "function": e.get("function"), "check": words or None, "exc_type": e.get("exc_type"),
        "internal": bool(e.get("internal")), "kind": e.get("kind"), "category": e.get("category"), "template": m.template,
        "entry": e.get("id"), "torch_version": e.get("torch_version"), "source": e.get("source"),
        "values": [{"kind": v.kind, "text": v.text} for v in m.values],
    }


def raised_by_line(info: dict[str, Any]) -> str:
    """One line for the evidence: "torch.cdist, checked in aten/src/ATen/native/Distance.cpp: `...` must hold; yours: X1 3, X2 4"."""
    head = info.get("op") or info.get("function") or "PyTorch"
    parts = [str(head) if info.get("seen_in_traceback", True) else f"probably {head} (its frame is not in your traceback)"]
    if info.get("where"):
        parts.append(f"checked in {info['where']}")
    line = ", ".join(parts)
    if info.get("check"):
        line += f": {info['check']}"
    if info.get("internal"):
        line += " (an internal assertion: a bug in PyTorch or a library built against it, not in your code; report it upstream)"
    return line
