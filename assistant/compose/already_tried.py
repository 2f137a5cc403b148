"""Leave out of an answer the fixes the user says they already tried (read by :mod:`assistant.parse.tried`)."""

from __future__ import annotations

from dataclasses import replace

from assistant.parse.tried import about, already_tried
from assistant.types import Diagnosis, Fix

_SAID = {"learning_rate": "the learning rate", "batch_size": "the batch size", "workers": "the loader workers", "reinstall": "reinstalling",
         "driver": "the driver", "gradient_clipping": "gradient clipping", "empty_cache": "emptying the cache"}


def leave_out_tried(d: Diagnosis, text: str) -> Diagnosis:
    """``d`` without the fixes about what ``text`` says was already tried, in the answer and in every ranked cause
    (a list that would be left empty keeps its fixes), with a note saying what was left out."""
    topics = already_tried(text)
    if not topics:
        return d
    dropped: set[str] = set()

    def kept(fixes: tuple[Fix, ...]) -> tuple[Fix, ...]:
        hits = [about(topics, f"{f.title}\n{f.detail}\n{f.code or ''}") for f in fixes]
        out = tuple(f for f, hit in zip(fixes, hits, strict=True) if not hit)
        if not out:
            return fixes  # nothing else to offer: the user's attempt may have been incomplete
        dropped.update(t for hit in hits for t in hit)
        return out

    fixes = kept(d.fixes)
    hypotheses = tuple(replace(h, fixes=kept(h.fixes)) for h in d.hypotheses)
    if not dropped:
        return d
    said = ", ".join(_SAID.get(t, t) for t in sorted(dropped))
    note = f"Your text says you already tried changing {said}: fixes about it are left out."
    return replace(d, fixes=fixes, hypotheses=hypotheses, notes=(*d.notes, note))
