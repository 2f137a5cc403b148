"""Chat without an LLM answers only what the diagnosis and its family's knowledge cover (issue 21, item 5).

Every case runs on a REAL diagnosis: ``diagnose()`` on captured failures (a CPU OOM, a CUDA OOM, a
shape mismatch), asked through :class:`~assistant.compose.chat.ChatSession` with real (lexical)
retrieval and no LLM, as `torchhelp ask --chat` and the served page do. The served page's placeholder
and the README's example questions are asked too, and the page itself is checked in a real browser
(the fixtures of tests/test_serve_page.py).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from assistant.compose.chat import ChatSession
from assistant.compose.offline_chat import MAX_QUOTE_LINES, OfflineAnswer
from assistant.sentences import split_first
from assistant.types import Diagnosis
from conftest import CAPTURED, ROOT
from test_serve_page import TOKEN, browser, open_page, server  # noqa: F401  (fixtures reused: the page in a real browser)

CAPTURES = {"cpu_oom": "cpu/cpu-oom-full-similarity-matrix", "cuda_oom": "cuda/cuda-oom-eval-without-no-grad",
            "shape": "cpu/linear-after-conv-flatten"}
NEEDS_LLM = "needs an LLM backend"
_NUMBERED = re.compile(r"^(\d+)\. ")


@pytest.fixture(scope="module")
def lexical_settings(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from assistant.settings import load_settings

    home = tmp_path_factory.mktemp("offline_answers_home")
    return load_settings(env={"TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0"}, llm="none")


@pytest.fixture(scope="module")
def retriever(lexical_settings):  # type: ignore[no-untyped-def]
    from assistant.kb.retrieve import get_retriever

    return get_retriever(lexical_settings.home, dense=False)


@pytest.fixture(scope="module")
def diagnoses(lexical_settings) -> dict[str, Diagnosis]:  # type: ignore[no-untyped-def]
    from assistant import diagnose

    return {name: diagnose(json.loads((CAPTURED / f"{path}.json").read_text(encoding="utf-8"))["stderr"], settings=lexical_settings)
            for name, path in CAPTURES.items()}


class Chat:
    """One offline chat about one real diagnosis: ask, and read the structured answer back."""

    def __init__(self, d: Diagnosis, settings: Any, retriever: Any) -> None:
        passages = retriever.search(f"{d.title}\n{d.cause}", k=5, must_include=[s.id for s in d.sources])
        self.session = ChatSession(d, list(passages), settings, retriever)

    def ask(self, question: str) -> OfflineAnswer:
        self.session.ask(question)
        assert self.session.last_offline is not None
        return self.session.last_offline


@pytest.fixture
def chat(diagnoses, lexical_settings, retriever):  # type: ignore[no-untyped-def]
    return lambda name: Chat(diagnoses[name], lexical_settings, retriever)


def texts(answer: OfflineAnswer, *kinds: str) -> list[str]:
    return [b.text for b in answer.blocks if not kinds or b.kind in kinds]


def quoted_lines(answer: OfflineAnswer) -> int:
    return sum(t.count("\n") + 1 for t in texts(answer, "markdown", "code"))


def is_honest_line(answer: OfflineAnswer) -> bool:
    """One line saying what the diagnosis covers and that the question needs an LLM, then its sources."""
    body = [b for b in answer.blocks if not b.text.startswith("Sources: ")]
    return len(body) == 1 and body[0].kind == "text" and NEEDS_LLM in body[0].text and "TORCHHELP_LLM_URL" in body[0].text


def numbers(answer: OfflineAnswer) -> list[int]:
    return [int(m.group(1)) for t in texts(answer, "heading") if (m := _NUMBERED.match(t))]


# --------------------------------------------------------------------------- the reported cases


def test_amp_on_a_cpu_oom_is_one_honest_line(chat) -> None:  # type: ignore[no-untyped-def]
    """The README's own example: the CPU OOM family says nothing about AMP, so nothing is pasted."""
    answer = chat("cpu_oom").ask("What if I use AMP?")
    assert is_honest_line(answer), answer.markdown()
    assert "shares a word" not in answer.markdown() and not texts(answer, "code", "markdown")
    assert '"why?"' in answer.markdown() and '"how do I fix it?"' in answer.markdown()  # what it can answer instead


def test_amp_on_a_cuda_oom_quotes_its_family_briefly(chat, retriever) -> None:  # type: ignore[no-untyped-def]
    answer = chat("cuda_oom").ask("What if I use AMP?")
    assert not is_honest_line(answer)
    quote = " ".join(texts(answer, "markdown", "code")).lower()
    assert "amp" in quote and "autocast" in quote
    assert 0 < quoted_lines(answer) <= MAX_QUOTE_LINES
    assert answer.cited and all(retriever.docs[c].category == "cuda_oom" for c in answer.cited)
    assert texts(answer, "heading")[0].startswith(f"[{answer.cited[0]}] ")  # quoted under its citation


@pytest.mark.parametrize("question", ["What if I use AMP?", "would flash attention help?", "what does mmap mean?",
                                      "how do I reduce memory?", "what is expandable_segments?"])
def test_cpu_oom_never_gets_another_familys_text(chat, retriever, question: str) -> None:  # type: ignore[no-untyped-def]
    answer = chat("cpu_oom").ask(question)
    heads = texts(answer, "heading")
    if heads and heads[0].startswith("["):  # a quote: from the CPU OOM family only
        assert retriever.docs[heads[0][1:].split("]")[0]].category == "cpu_oom", heads[0]
    else:
        assert is_honest_line(answer), answer.markdown()
    assert quoted_lines(answer) <= MAX_QUOTE_LINES, answer.markdown()  # never a dump of sections
    assert len(answer.markdown().splitlines()) < 20


def test_flash_attention_on_a_cpu_oom_needs_an_llm(chat) -> None:  # type: ignore[no-untyped-def]
    answer = chat("cpu_oom").ask("would flash attention help?")
    assert is_honest_line(answer), answer.markdown()
    assert "grows" not in answer.markdown()  # the memory-growth text the report got


def test_a_term_in_the_family_is_quoted_with_its_citation(chat) -> None:  # type: ignore[no-untyped-def]
    answer = chat("cpu_oom").ask("what does mmap mean?")
    assert "mmap" in " ".join(texts(answer, "markdown", "code"))
    assert answer.cited == ("cpu-oom",) and quoted_lines(answer) <= MAX_QUOTE_LINES
    shape = chat("shape").ask("what is LazyLinear")
    assert shape.cited == ("matmul-shape-mismatch",) and "LazyLinear" in " ".join(texts(shape, "markdown"))
    assert "register_forward_pre_hook" not in shape.markdown()  # the passage that answers, not the section's opening


@pytest.mark.parametrize("name", list(CAPTURES))
def test_why_gives_the_why_not_the_cause_again(chat, diagnoses, name: str) -> None:  # type: ignore[no-untyped-def]
    d = diagnoses[name]
    answer = chat(name).ask("why?")
    md = answer.markdown()
    first, rest = split_first(d.cause)
    assert d.cause not in md and first not in md  # the user has read the cause; "why?" gets the reasons
    if rest:
        assert rest in texts(answer, "text")
    for e in d.evidence:  # the values read from the user's error
        assert any(e.text in t for t in texts(answer, "text")), e.text
    lead = d.hypotheses[0]
    assert f"{lead.likelihood:.0%}" in md
    if lead.check:  # "Check: ..." under a ranking, "...; to confirm it: ..." for a single cause
        assert any(lead.check in t for t in texts(answer, "text")), lead.check
    if len(d.hypotheses) > 1:  # the other causes ranked, with their likelihoods
        assert all(f"{i}. {h.likelihood:.0%}: " in md for i, h in enumerate(d.hypotheses[1:], 2))
    assert not texts(answer, "code")


@pytest.mark.parametrize("name", ["cpu_oom", "cuda_oom"])
def test_fixes_are_one_list_and_what_else_shows_the_rest(chat, diagnoses, name: str) -> None:  # type: ignore[no-untyped-def]
    d = diagnoses[name]
    c = chat(name)
    first = c.ask("how do I fix it")
    assert numbers(first) == list(range(1, min(len(d.fixes), 5) + 1))  # one list, numbered 1..n
    shown = set(texts(first, "heading"))
    rounds = 0
    while True:
        more = c.ask("what else can I try?")
        if not numbers(more):
            break
        assert numbers(more) == list(range(1, len(numbers(more)) + 1))  # renumbered from 1, never merged
        titles = [_NUMBERED.sub("", t).split("  [")[0] for t in texts(more, "heading") if _NUMBERED.match(t)]
        assert not any(any(title in s for s in shown) for title in titles), titles  # only fixes not yet shown
        shown |= set(texts(more, "heading"))
        rounds += 1
        assert rounds < 5
    assert rounds >= 1 and "all shown already" in more.markdown() and "LLM" in more.markdown()


def test_checks_come_from_the_ranked_causes(chat, diagnoses) -> None:  # type: ignore[no-untyped-def]
    d = diagnoses["cpu_oom"]
    md = chat("cpu_oom").ask("how do I check?").markdown()
    positions = [md.index(f"Check: {h.check}") for h in d.hypotheses]
    assert positions == sorted(positions) and len(positions) == len(d.hypotheses) > 1


def test_sources_are_the_cited_documents(chat, diagnoses) -> None:  # type: ignore[no-untyped-def]
    d = diagnoses["cuda_oom"]
    answer = chat("cuda_oom").ask("sources?")
    assert answer.cited == tuple(s.id for s in d.sources)
    for s in d.sources:
        assert f"[{s.id}] {s.title} ({s.path})" in texts(answer, "text")


# --------------------------------------------------------------------------- the README and the page ask what it answers


def _placeholder_questions() -> list[str]:
    html = (ROOT / "assistant" / "serve" / "static" / "index.html").read_text(encoding="utf-8")
    placeholder = re.search(r'id="followup"[^>]*placeholder="([^"]+)"', html)
    assert placeholder, "the follow-up box has a placeholder"
    return re.findall(r"[^?]+\?", placeholder.group(1))


def _readme_questions() -> list[str]:
    line = re.search(r'Later questions \(([^)]*)\)', (ROOT / "README.md").read_text(encoding="utf-8"))
    assert line, "the README names example follow-up questions"
    return re.findall(r'"([^"]+)"', line.group(1))


@pytest.mark.parametrize("name", ["cpu_oom", "shape"])
def test_readme_and_placeholder_questions_are_answered_offline(chat, name: str) -> None:  # type: ignore[no-untyped-def]
    questions = [q.strip() for q in _placeholder_questions() + _readme_questions()]
    assert len(questions) >= 4
    for q in questions:
        answer = chat(name).ask(q)
        assert not is_honest_line(answer) and "lookup" not in answer.intents, (q, answer.markdown())


def test_served_page_placeholder_is_a_question_it_answers(server: str, browser: Any) -> None:  # noqa: F811
    """On the real page (real server, no LLM, real browser): the follow-up box suggests questions that
    get a real answer, not the line saying an LLM is needed."""
    from test_serve_page import LINEAR

    context, page, _ = open_page(browser, server)
    try:
        placeholder = page.get_attribute("#followup", "placeholder")
        assert placeholder and "AMP" not in placeholder
        page.fill("#error-text", LINEAR["stderr"])
        page.click("#submit")
        page.wait_for_selector("#token-box[open]")
        page.fill("#token", TOKEN)
        page.click("#token-save")
        page.wait_for_selector("#result:not([hidden])")
        questions = [q.strip() for q in re.findall(r"[^?]+\?", placeholder)]
        assert len(questions) >= 2
        for n, question in enumerate(questions):
            page.fill("#followup", question)
            page.click("#ask")
            reply = page.locator("#conversation li.assistant").nth(n)
            reply.wait_for()
            answer = reply.inner_text()
            assert "needs an LLM" not in answer and "Nothing in this diagnosis" not in answer, (question, answer)
    finally:
        context.close()

