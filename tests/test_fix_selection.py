"""Which further documented fixes join an answer: matched on the fix's words and on the words of the causes that
name it, from every retrieved document, never beside a rule's reading, never one the diagnosis rules out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import assistant.compose.documents as documents
from assistant.compose.documents import MAX_FIXES, related_fixes
from assistant.compose.verify import allowed_actions, unproposed_actions
from assistant.engine import Engine
from assistant.kb.remedies import parse_body
from assistant.settings import load_settings
from assistant.types import Diagnosis, Fix

ROOT = Path(__file__).resolve().parents[1]

# A document in our own format: the situation lives in the causes' words, the fixes say what to do.
_BODY = """
## Causes
### Workers each load the whole archive into memory {#workers-copy-archive}
Every worker process opens the archive and keeps its own copy, so resident memory grows with num_workers.
- check: watch resident memory per worker while the loader starts
- fixes: open-lazily
- cues: archive, workers, resident memory

### The sampler is rebuilt every epoch {#sampler-rebuilt}
A new sampler each epoch restarts the order.
- check: print the first indices of two epochs
- fixes: keep-sampler

## Fixes
### Open the file inside each worker, on first use {#open-lazily}
Keep only the path in __init__ and open it in __getitem__.

### Keep one sampler for the run {#keep-sampler}
Build it once and call its epoch setter.

### Time one batch {#time-batch}
- step: diagnose
Measure how long a single batch takes.
"""


@pytest.fixture()
def one_document(monkeypatch: pytest.MonkeyPatch) -> str:
    rem = parse_body("loader-memory-notes", _BODY)
    monkeypatch.setattr(documents, "remedies_of", lambda doc_id: rem if doc_id == "loader-memory-notes" else None)
    return "loader-memory-notes"


def _flat_idf(_: str) -> float:
    return 1.0


def test_a_fix_is_found_by_the_words_of_the_cause_that_names_it(one_document: str) -> None:
    # The user's words describe the situation (archive, workers, resident memory), not the remedy's wording.
    text = "resident memory climbs with every extra worker; each one reads the archive"
    fixes = related_fixes(text, [one_document], (), _flat_idf)
    assert fixes and fixes[0].title == "Open the file inside each worker, on first use"
    assert fixes[0].sources == (one_document,)


def test_diagnostic_steps_and_shown_fixes_are_not_offered_again(one_document: str) -> None:
    text = "time one batch of the archive workers resident memory sampler epoch"
    shown = (Fix("Open the file inside each worker, on first use", "", None, (one_document,)),)
    titles = [f.title for f in related_fixes(text, [one_document], shown, _flat_idf)]
    assert "Time one batch" not in titles
    assert "Open the file inside each worker, on first use" not in titles


def test_no_more_fixes_than_an_answer_lists(one_document: str) -> None:
    text = "archive workers resident memory sampler epoch order"
    full = tuple(Fix(f"shown {i}", "") for i in range(MAX_FIXES))
    assert related_fixes(text, [one_document], full, _flat_idf) == ()
    assert len(related_fixes(text, [one_document], full[:-1], _flat_idf)) == 1


def test_words_shared_by_chance_are_not_enough(one_document: str) -> None:
    assert related_fixes("the", [one_document], (), _flat_idf) == ()


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    home = tmp_path_factory.mktemp("home")
    return Engine(load_settings(env={"TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0"}, llm="none"))


def _dev_reports(part: str) -> list[dict]:
    return [json.loads(line) for line in (ROOT / "eval" / "realworld" / f"{part}.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


def test_answers_from_documents_cite_every_fix(engine: Engine) -> None:
    """Over real dev reports: the fixes an answer from the documents gains are cited among its sources, and some
    answers do gain fixes from documents other than the ones their leading cause cites."""
    gained = 0
    for row in _dev_reports("dev_fresh4"):
        d = engine.diagnose(row["error_text"], exclude_cases=(row["id"], row["source"]))
        if d.rule is not None or not d.hypotheses:
            continue
        ids = {s.id for s in d.sources}
        assert all(set(f.sources) <= ids for f in d.fixes), row["id"]
        lead = {f.title for f in d.hypotheses[0].fixes}
        lead_docs = {doc for f in d.hypotheses[0].fixes for doc in f.sources}
        gained += any(f.title not in lead and not set(f.sources) & lead_docs for f in d.fixes)
    assert gained >= 3


def test_a_rule_answer_keeps_exactly_its_own_fixes(engine: Engine) -> None:
    """Beside a rule's reading nothing is added: its fixes are the leading cause's."""
    seen = 0
    for row in _dev_reports("dev_fresh4")[:40]:
        d = engine.diagnose(row["error_text"], exclude_cases=(row["id"], row["source"]))
        if d.rule is not None and d.hypotheses:
            seen += 1
            assert d.fixes == d.hypotheses[0].fixes, row["id"]
    assert seen >= 10


def _det(fixes: tuple[Fix, ...]) -> Diagnosis:
    return Diagnosis("environment_error", "t", "s", "c", fixes, (), (), 0.5)


def test_the_verifier_allows_an_install_the_answer_itself_proposes_with_its_quoted_version() -> None:
    det = _det((Fix("Upgrade NumPy", "in the environment that reads the file", 'python -m pip install -U "numpy>=2"', ("d",)),))
    assert unproposed_actions([('python -m pip install -U "numpy>=2"', True)], det, [], ["d"]) == []
    # ... and no other package.
    assert unproposed_actions([("python -m pip install -U requests", True)], det, [], ["d"])


def test_an_install_found_only_inside_quotes_is_still_not_the_answers_own() -> None:
    # A fix quoting a string from the log (data, not a command) does not make that string an allowed action.
    det = _det((Fix("Rename the key", "the key was 'pip install evil-package'", "sd['pip install evil-package']", ("d",)),))
    assert not any(a.kind == "install" for a in allowed_actions(det))
