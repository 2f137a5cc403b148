"""One sentence splitter for every place that shows "the first sentence" of a cause or a document.

A sentence ends at ``.``, ``!`` or ``?`` (with any closing quote or bracket after it) followed by
whitespace and the start of a new sentence: a capital, a digit, a backtick, a quote or an opening
bracket. It does not end

- after an abbreviation that never closes a sentence (``e.g.``, ``i.e.``, ``vs.``, ``cf.``, ``approx.``);
  ``etc.`` closes one only when a capital follows,
- inside brackets or a backtick code span (``(e.g. `module.x` vs `x`)`` stays whole),
- inside a number, a version or a file name (``2.1.0``, ``model.pt``, ``torch.load``): no space follows the dot.

Every step is linear in the text's length: causes can come from an LLM's reply (up to 32,000
characters), and a quadratic step there cost seconds per call on a reply of dots or brackets.
"""

from __future__ import annotations

import re

# Abbreviations after which a capital, a backtick or a bracket continues the same sentence.
_NEVER_ENDS = re.compile(r"(?:^|[\s(\[/])(?:e\.g|i\.e|vs|cf|approx|incl|resp|viz|w\.r\.t|a\.k\.a|esp|fig|eq)\.$", re.I)
_ETC = re.compile(r"(?:^|[\s(\[/,])etc\.$", re.I)
# A run of end punctuation is tried from its first character only (the lookbehind): tried from every
# character of a long run of dots, the pattern rescanned the rest of the run each time (quadratic).
_BOUNDARY = re.compile(r"(?<![.!?])[.!?]+[\"')\]`]*(?=\s+[A-Z0-9`'\"(\[])")
_OPENERS = {"(": ")", "[": "]"}
_CLOSERS = "\"')]`"
# Enough characters before a full stop to hold the longest abbreviation and the separator before it.
_ABBREVIATION_WINDOW = 12


def _enclosed(text: str) -> list[tuple[int, int]]:
    """The spans of matched brackets and backtick code spans (an unmatched bracket encloses nothing)."""
    spans = [(m.start(), m.end()) for m in re.finditer(r"`[^`]*`", text)]
    in_code = [False] * (len(text) + 1)
    for start, end in spans:  # code spans do not overlap: each character is marked once
        for i in range(start, end):
            in_code[i] = True
    stack: list[tuple[str, int]] = []
    # Where each kind of opener sits in the stack, so a closer finds its opener without scanning the
    # stack (a closer after thousands of unmatched openers of the other kind scanned them all).
    where: dict[str, list[int]] = {opener: [] for opener in _OPENERS}
    for i, ch in enumerate(text):
        if in_code[i]:
            continue
        if ch in _OPENERS:
            where[ch].append(len(stack))
            stack.append((ch, i))
        elif ch in (")", "]"):
            opener = "(" if ch == ")" else "["
            if not where[opener]:
                continue  # closers without an opener are ignored
            # Pop back to the matching opener: it and everything opened after it are closed.
            depth = where[opener][-1]
            spans.append((stack[depth][1], i + 1))
            del stack[depth:]
            for positions in where.values():
                while positions and positions[-1] >= depth:
                    positions.pop()
    return spans


def _inside_counts(spans: list[tuple[int, int]], length: int) -> list[int]:
    """For each offset ``i``, how many spans strictly enclose it (``start < i < stop``)."""
    delta = [0] * (length + 2)
    for start, stop in spans:
        if stop - start >= 2:
            delta[start + 1] += 1
            delta[stop] -= 1
    counts, running = [], 0
    for step in delta[: length + 1]:
        running += step
        counts.append(running)
    return counts


def _ends_sentence(text: str, end: int, inside: list[int]) -> bool:
    """Whether the punctuation run that stops at ``end`` (the whitespace after it) closes a sentence."""
    if inside[end]:
        return False
    stop = end
    while stop > 0 and text[stop - 1] in _CLOSERS:
        stop -= 1
    # Only the last few characters can hold an abbreviation: a bounded window, not the whole text
    # before every boundary. A cut window starts with a character that cannot start a match.
    start = max(0, stop - _ABBREVIATION_WINDOW)
    before = ("x" if start else "") + text[start:stop]
    if _NEVER_ENDS.search(before):
        return False
    return not (_ETC.search(before) and not text[end:end + 2].lstrip()[:1].isupper())


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` with its whitespace collapsed; [] for blank text."""
    clean = " ".join(text.split())
    inside = _inside_counts(_enclosed(clean), len(clean))
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(clean):
        if _ends_sentence(clean, m.end(), inside):
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
