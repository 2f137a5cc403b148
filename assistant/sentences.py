"""One sentence splitter for every place that shows "the first sentence" of a cause or a document.

A sentence ends at ``.``, ``!`` or ``?`` (with any closing quote or bracket after it) followed by
whitespace and the start of a new sentence: a capital, a digit, a backtick, a quote or an opening
bracket. It does not end

- after an abbreviation that never closes a sentence (``e.g.``, ``i.e.``, ``vs.``, ``cf.``, ``approx.``);
  ``etc.`` closes one only when a capital follows,
- inside brackets or a backtick code span (``(e.g. `module.x` vs `x`)`` stays whole),
- inside a number, a version or a file name (``2.1.0``, ``model.pt``, ``torch.load``): no space follows the dot.
"""

from __future__ import annotations

import re

# Abbreviations after which a capital, a backtick or a bracket continues the same sentence.
_NEVER_ENDS = re.compile(r"(?:^|[\s(\[/])(?:e\.g|i\.e|vs|cf|approx|incl|resp|viz|w\.r\.t|a\.k\.a|esp|fig|eq)\.$", re.I)
_ETC = re.compile(r"(?:^|[\s(\[/,])etc\.$", re.I)
_BOUNDARY = re.compile(r"[.!?]+[\"')\]`]*(?=\s+[A-Z0-9`'\"(\[])")
_OPENERS = {"(": ")", "[": "]"}


def _enclosed(text: str) -> list[tuple[int, int]]:
    """The spans of matched brackets and backtick code spans (an unmatched bracket encloses nothing)."""
    spans = [(m.start(), m.end()) for m in re.finditer(r"`[^`]*`", text)]
    in_code = [False] * (len(text) + 1)
    for start, end in spans:
        for i in range(start, end):
            in_code[i] = True
    stack: list[tuple[str, int]] = []
    for i, ch in enumerate(text):
        if in_code[i]:
            continue
        if ch in _OPENERS:
            stack.append((ch, i))
        elif ch in (")", "]"):
            # Pop back to the matching opener; closers without one are ignored.
            for depth in range(len(stack) - 1, -1, -1):
                if _OPENERS[stack[depth][0]] == ch:
                    spans.append((stack[depth][1], i + 1))
                    del stack[depth:]
                    break
    return spans


def _ends_sentence(text: str, end: int, spans: list[tuple[int, int]]) -> bool:
    """Whether the punctuation run that stops at ``end`` (the whitespace after it) closes a sentence."""
    if any(start < end < stop for start, stop in spans):
        return False
    before = text[:end].rstrip("\"')]`")
    if _NEVER_ENDS.search(before):
        return False
    return not (_ETC.search(before) and not text[end:].lstrip()[:1].isupper())


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` with its whitespace collapsed; [] for blank text."""
    clean = " ".join(text.split())
    spans = _enclosed(clean)
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(clean):
        if _ends_sentence(clean, m.end(), spans):
            out.append(clean[start:m.end()].strip())
            start = m.end()
    tail = clean[start:].strip()
    return [*out, tail] if tail else out


def split_first(text: str) -> tuple[str, str]:
    """The first sentence and the rest (``''`` when there is one sentence)."""
    sentences = split_sentences(text)
    if not sentences:
        return "", ""
    return sentences[0], " ".join(sentences[1:])


def first_sentence(text: str) -> str:
    """The first sentence of ``text``."""
    return split_first(text)[0]


def first_sentences(text: str, n: int) -> str:
    """The first ``n`` sentences of ``text``, joined by single spaces."""
    return " ".join(split_sentences(text)[:n])
