"""Which further documented fixes join an answer: matched on the fix's words and on the words of the causes that
name it, from every retrieved document; beside a rule's reading at most one, on a strong match, from the family's best
document; before the general steps of an answer that names no family when the match is strong; never one the diagnosis
rules out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import assistant.compose.documents as documents
from assistant.compose.documents import BESIDE_RULE_MIN_SCORE, LEAD_UNKNOWN_MIN_SCORE, MAX_FIXES, related_fixes, scored_related_fixes
from assistant.compose.verify import allowed_actions, unproposed_actions
from assistant.engine import Engine
from assistant.kb.remedies import parse_body
from assistant.settings import load_settings
from assistant.types import Diagnosis, Evidence, Fix, Passage

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

### Open {{path_arg|the archive}} lazily {#open-named}
Pass the path, not the opened object.

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


def test_beside_a_rule_at_most_one_strongly_matching_fix_joins(engine: Engine) -> None:
    """A rule's answer starts with exactly its leading cause's fixes; at most one more follows, and only one whose
    words and cause words match the user's text at least BESIDE_RULE_MIN_SCORE and that takes no value."""
    from assistant.compose.documents import _fix_words
    from assistant.kb.remedies import remedies_of

    seen = joined = 0
    idf = engine.usable_retriever().idf
    for row in _dev_reports("dev_fresh4") + _dev_reports("dev_fresh5"):
        d = engine.diagnose(row["error_text"], exclude_cases=(row["id"], row["source"]))
        if d.rule is None or not d.hypotheses:
            continue
        seen += 1
        lead = d.hypotheses[0].fixes
        assert d.fixes[: len(lead)] == lead, row["id"]
        extra = d.fixes[len(lead):]
        assert len(extra) <= 1, row["id"]
        if extra:
            joined += 1
            (doc,) = extra[0].sources
            entries = [e for e in _fix_words(remedies_of(doc)) if e.filled == extra[0]]
            assert entries and not entries[0].fix.params, row["id"]
            scored = scored_related_fixes(row["error_text"], [doc], lead, idf, limit=50, min_score=0.0, room=50)
            assert dict((f.title, sc) for sc, f in scored)[extra[0].title] >= BESIDE_RULE_MIN_SCORE, row["id"]
    assert seen >= 40
    assert 1 <= joined <= seen // 3  # it happens, and rarely


def test_beside_a_reading_a_fix_that_takes_a_value_is_left_out(one_document: str) -> None:
    text = "open the archive lazily: pass the path, not the opened object"
    assert "Open the archive lazily" in [f.title for f in related_fixes(text, [one_document], (), _flat_idf)]
    assert "Open the archive lazily" not in [f.title for f in related_fixes(text, [one_document], (), _flat_idf, beside_reading=True)]


_SIBLINGS = """
## Causes
### A saved tensor was rewritten {#saved-rewritten}
The graph kept a tensor that a later line rewrote.
- fixes: rewrite-sum, rewrite-activation
- cues: rewritten, saved tensor

### The step ran early {#step-early}
The weights moved before the gradient was taken.
- fixes: step-last

## Fixes
### Rewrite the sum into a new tensor {#rewrite-sum}
Assign the result to a new name.

### Build the activation without its in-place flag {#rewrite-activation}
The saved tensor then stays as the graph saved it.

### Step after every gradient {#step-last}
Call the optimizer once the saved tensor is no longer needed.
"""


def test_beside_a_reading_the_alternatives_it_chose_among_are_not_offered(monkeypatch: pytest.MonkeyPatch) -> None:
    # The reader chose the sum rewrite among the first cause's fixes; the activation variant is that choice's
    # alternative, not a further fix. Another cause's fix may still join.
    rem = parse_body("sibling-notes", _SIBLINGS)
    monkeypatch.setattr(documents, "remedies_of", lambda doc_id: rem if doc_id == "sibling-notes" else None)
    text = "the saved tensor was rewritten by the activation in place; the step comes after every gradient"
    shown = (Fix("Rewrite the sum into a new tensor", "", None, ("sibling-notes",)),)
    plain = [f.title for f in related_fixes(text, ["sibling-notes"], shown, _flat_idf)]
    assert "Build the activation without its in-place flag" in plain
    beside = [f.title for f in related_fixes(text, ["sibling-notes"], shown, _flat_idf, beside_reading=True)]
    assert "Build the activation without its in-place flag" not in beside
    assert "Step after every gradient" in beside


def test_room_can_be_counted_by_the_caller(one_document: str) -> None:
    text = "archive workers resident memory sampler epoch order path opened object lazily"
    full = tuple(Fix(f"shown {i}", "") for i in range(MAX_FIXES))
    assert related_fixes(text, [one_document], full, _flat_idf) == ()
    assert len(related_fixes(text, [one_document], full, _flat_idf, room=2)) == 2


def _passage(doc_id: str) -> Passage:
    return Passage(f"{doc_id}#fixes", doc_id, "notes", "Fixes", "", "dataloader_error", "", 1.0)


def test_an_unknown_answer_leads_with_a_strong_match_and_keeps_its_general_steps(engine: Engine, one_document: str) -> None:
    text = "Resident memory climbs with every extra worker, each one reads the whole archive, the machine swaps."
    failure = engine.parse(text)
    steps = (Fix("Start at the last frame in your own code", "", None, ("debugging-workflow",)),
             Fix("Make a minimal reproduction", "", None, ("debugging-workflow",)))
    unknown = Diagnosis("unknown", "Unrecognised failure", "s", "c", steps, (), (), 0.15, decision={"abstained": True})
    out = engine._with_related_fixes(unknown, failure, Evidence(), None, [one_document], [_passage(one_document)])
    assert out.fixes[0].title == "Open the file inside each worker, on first use"
    assert [f.title for f in out.fixes[1:3]] == [f.title for f in steps]
    idf = engine.usable_retriever().idf
    assert scored_related_fixes(text, [one_document], steps, idf)[0][0] >= LEAD_UNKNOWN_MIN_SCORE
    # A match below the lead score joins after the general steps; text sharing nothing adds nothing.
    weak_text = "the order restarts"
    weak_scores = scored_related_fixes(weak_text, [one_document], steps, idf)
    weak = engine._with_related_fixes(unknown, engine.parse(weak_text), Evidence(), None, [one_document], [_passage(one_document)])
    assert weak.fixes[: len(steps)] == steps
    assert len(weak.fixes) == len(steps) + len(weak_scores)
    assert all(score < LEAD_UNKNOWN_MIN_SCORE for score, _ in weak_scores)
    none = engine._with_related_fixes(unknown, engine.parse("nothing shared here"), Evidence(), None, [one_document], [_passage(one_document)])
    assert none.fixes == steps


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
