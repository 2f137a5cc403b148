"""Fixes read from a retrieved piece of a document's Fixes section: a piece that begins mid-item is not a fix."""

from __future__ import annotations

import re

from conftest import ROOT

from assistant.compose.deterministic import extract_fixes


def _fixes_section(doc: str) -> str:
    text = (ROOT / "knowledge" / doc).read_text(encoding="utf-8")
    m = re.search(r"^## Fixes\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, doc
    return m.group(1)


def test_a_piece_cut_mid_item_gives_no_garbled_fix() -> None:
    section = _fixes_section("env/files-and-permissions.md")
    items = [m.start() for m in re.finditer(r"^\s*(?:\d+\.|[-*])\s", section, re.M)]
    assert len(items) >= 2
    first_item = section[items[0]:items[1]]
    cut = first_item[len(first_item) // 2:]  # what a chunk boundary leaves: the tail of an item, mid-sentence
    cut = cut[cut.index(" ") + 1:] if not cut[:1].isupper() else "x" + cut
    assert not cut.lstrip()[:1].isupper()
    assert extract_fixes(cut) == []


def test_whole_items_are_read_as_fixes() -> None:
    fixes = extract_fixes(_fixes_section("env/files-and-permissions.md"))
    assert len(fixes) >= 2 and all(f.title and not f.title[:1].islower() for f in fixes)
