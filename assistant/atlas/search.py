"""Finding atlas entries by words (``torchhelp kb search``): the exact check when the query is a message, else the
templates that share the query's rarer words."""

from __future__ import annotations

import math
from collections import Counter

from assistant.atlas.matcher import Atlas
from assistant.kb.lexical import tokenize


def search_atlas(atlas: Atlas, query: str, k: int = 5) -> list[dict]:
    """Up to ``k`` entries: verified matches of the query first, then templates ranked by shared words (idf-weighted)."""
    found: list[dict] = []
    seen: set[str] = set()
    for m in atlas.match(query, limit=k):
        if m.verified and m.id not in seen:
            found.append({**m.entry, "score": 1.0, "matched": True})
            seen.add(m.id)
    words = set(tokenize(query))
    if len(found) >= k or not words:
        return found[:k]
    templates = [atlas.template(t) for t in range(len(atlas))]
    tokens = [set(tokenize(t)) for t in templates]
    df = Counter(w for ts in tokens for w in ts & words)
    idf = {w: math.log(1 + len(templates) / (1 + df[w])) for w in words}
    total = sum(idf.values()) or 1.0
    scored = sorted(((sum(idf[w] for w in ts & words) / total, t) for t, ts in enumerate(tokens) if ts & words), reverse=True)
    for score, tid in scored:
        entry = atlas.entries_of(tid)[0]
        if entry.get("id") in seen:
            continue
        found.append({**entry, "score": round(score, 3), "matched": False})
        seen.add(str(entry.get("id")))
        if len(found) >= k:
            break
    return found
