"""Every knowledge document is well formed: front matter, structured causes and fixes, references, placeholders."""

from __future__ import annotations

import re

import pytest

from assistant.kb.documents import chunk_document, load_builtin, readable
from assistant.kb.remedies import PLACEHOLDER, fill, parse_remedies
from assistant.types import CATEGORIES

DOCS = load_builtin()
BY_ID = {d.id: d for d in DOCS}
REMEDIES = {d.id: parse_remedies(d) for d in DOCS}
# Links to a particular report's thread never belong in a document (knowledge is generic, in our own words).
_THREAD_LINK = re.compile(r"https?://(?:www\.)?(?:github\.com/[^/\s]+/[^/\s]+/(?:issues|pull|discussions)/\d+|discuss\.pytorch\.org/t/|stackoverflow\.com/(?:questions|q|a)/)")


@pytest.mark.parametrize("doc", DOCS, ids=[d.id for d in DOCS])
def test_document_is_well_formed(doc) -> None:  # type: ignore[no-untyped-def]
    assert doc.category in CATEGORIES or doc.category == "guide", f"{doc.id}: unknown category {doc.category}"
    assert doc.path.endswith(f"{doc.id}.md"), f"{doc.id}: the file name must be the id"
    assert not _THREAD_LINK.search(doc.body), f"{doc.id}: links to a report thread"
    rem = REMEDIES[doc.id]
    fix_ids = [f.id for f in rem.fixes]
    cause_ids = [c.id for c in rem.causes]
    assert len(set(fix_ids)) == len(fix_ids), f"{doc.id}: duplicate fix ids"
    assert len(set(cause_ids)) == len(cause_ids), f"{doc.id}: duplicate cause ids"
    for cause in rem.causes:
        assert cause.check, f"{cause.ref}: a cause needs a check"
        assert cause.text, f"{cause.ref}: a cause needs a sentence saying what goes wrong"
        for ref in cause.fix_refs:
            target_doc, _, fix_id = ref.partition("#")
            assert target_doc in REMEDIES, f"{cause.ref}: fix {ref} names an unknown document"
            assert REMEDIES[target_doc].fix(fix_id) is not None, f"{cause.ref}: fix {ref} does not exist"
    for fx in rem.fixes:
        assert fx.title, f"{fx.ref}: a fix needs a title"
        for text in (fx.title, fx.detail, fx.code or ""):
            # Every opening double brace starts a well-formed placeholder (a stray one would be shown to the user);
            # a closing "}}" alone is ordinary code (a nested dict literal).
            assert "{{" not in PLACEHOLDER.sub("", text), f"{fx.ref}: malformed placeholder"


def test_structured_documents_never_show_markup() -> None:
    """Chunks (what retrieval shows) carry no entry ids or placeholder braces."""
    for doc in DOCS:
        for chunk in chunk_document(doc):
            assert "{#" not in chunk.text and "{{" not in chunk.text, chunk.id


def test_fill_uses_values_then_defaults_then_names() -> None:
    template = "self.{{layer|fc}} = nn.Linear({{got}}, {{ out_features | num_classes }})"
    assert fill(template, {"layer": "classifier", "got": 2048}) == "self.classifier = nn.Linear(2048, num_classes)"
    assert fill(template, {}) == "self.fc = nn.Linear(<got>, num_classes)"
    assert readable(template) == "self.fc = nn.Linear(<got>, num_classes)"


def test_every_differential_cause_and_fix_is_documented() -> None:
    """The differential tables hold wiring only: each cause's words, check and fixes are a document's entries."""
    from assistant.differential.families import FAMILIES
    from assistant.kb.remedies import find_cause, find_fix

    for category, family in FAMILIES.items():
        for alt in family.alternatives:
            cause = find_cause(alt.ref)
            assert cause is not None, f"{category}/{alt.id}: no cause {alt.ref}"
            assert all(find_fix(ref) is not None for ref in cause.fix_refs), f"{category}/{alt.id}: a fix of {alt.ref} is missing"
