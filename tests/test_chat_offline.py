"""`ask --chat` without an LLM (issue 11, item 10): follow-ups answered from the diagnosis and the
knowledge base as readable sections, never as flattened passages with stray code fences and cut text.

The section picker is tested on the real knowledge documents and a real captured failure; the chat
itself runs as a real `torchhelp ask --chat` on a real pseudo-terminal at 80 columns, lexical
retrieval only, no LLM configured.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st
from markdown_it import MarkdownIt

from assistant.compose.offline_chat import (
    Section, answer_offline, excerpts, markdown_blocks, question_intents, rank_sections, read_sections, split_sections,
)
from assistant.sentences import split_first
from conftest import ROOT
from pty_session import read_until, torchhelp_on_a_terminal

CAPTURE = ROOT / "eval" / "captured" / "cpu" / "linear-after-conv-flatten.json"
MATMUL = "knowledge/shapes/matmul-shape-mismatch.md"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_CITATION = re.compile(r"\[([a-z0-9][\w:.-]*)\]")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHHELP_") and k != "OPENAI_API_KEY"}  # no LLM configured
    return {**env, "TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0", "PYTHONPATH": str(ROOT), "COLUMNS": "80", "LINES": "50", "TERM": "xterm-256color"}


@pytest.fixture(scope="module")
def lexical_settings(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from assistant.settings import load_settings

    home = tmp_path_factory.mktemp("chat_offline_home")
    return load_settings(env={"TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0"}, llm="none")


@pytest.fixture(scope="module")
def linear_diagnosis(lexical_settings):  # type: ignore[no-untyped-def]
    from assistant import diagnose

    return diagnose(json.loads(CAPTURE.read_text(encoding="utf-8"))["stderr"], settings=lexical_settings)


def _fences(markdown: str) -> list[str]:
    """The fenced code blocks a CommonMark parser finds in the text (what a chat client would show as code)."""
    return [t.content.rstrip("\n") for t in MarkdownIt("commonmark").parse(markdown) if t.type == "fence"]


# --------------------------------------------------------------------------- what the question asks


@pytest.mark.parametrize("question,intents", [
    ("how do I fix it", {"fix"}),
    ("How can I fix this?", {"fix"}),
    ("any workaround?", {"fix"}),
    ("what should I do", {"fix"}),
    ("why", {"why"}),
    ("Why?", {"why"}),
    ("what caused this", {"why"}),
    ("what does this error mean", {"why"}),
    ("why did it fail and how do I fix it", {"fix", "why"}),
    ("what is LazyLinear", {"lookup"}),
    ("how do I print shapes per layer?", {"lookup"}),
    ("show me an example", {"lookup"}),
])
def test_question_intents(question: str, intents: set[str]) -> None:
    assert question_intents(question) == intents


# --------------------------------------------------------------------------- sections and blocks


def test_fences_split_blocks_never_through_one() -> None:
    text = (
        "Intro paragraph with `inline` code.\n\n"
        "1. **Hook every module**: register a pre-hook:\n"
        "   ```python\n"
        "   for name, m in model.named_modules():\n"
        "       m.register_forward_pre_hook(print)\n"
        "   ```\n"
        "2. Then run once.\n"
        "Use ```python``` inline (not a fence).\n"
        "~~~\n"
        "raw ``` inside a tilde fence\n"
        "~~~\n"
        "```bash\n"
        "python train.py   # never closed\n"
    )
    blocks = markdown_blocks(text)
    assert [b.kind for b in blocks] == ["markdown", "code", "markdown", "code", "code"]
    assert blocks[1].text == "for name, m in model.named_modules():\n    m.register_forward_pre_hook(print)"  # dedented by the fence's indent only
    assert blocks[2].text == "2. Then run once.\nUse ```python``` inline (not a fence)."
    assert blocks[3].text == "raw ``` inside a tilde fence"
    assert blocks[4].text == "python train.py   # never closed" and blocks[4].lang == "bash"  # an unclosed fence runs to the end


def test_headings_inside_code_do_not_start_sections() -> None:
    body = "Lead text.\n\n## Fixes\nDo this:\n```python\n# a comment, not a heading\nx = 1\n```\n\n## Example\nSee above.\n"
    sections = split_sections("d", "Doc", body)
    assert [s.heading for s in sections] == ["overview", "Fixes", "Example"]
    assert "# a comment, not a heading\nx = 1" in sections[1].body
    rst = split_sections("user:r", "R", "Intro\n\nSetup\n=====\nInstall it.\n\nUsage\n-----\nRun it.\n", ".rst")
    assert [(s.heading, s.body) for s in rst] == [("overview", "Intro"), ("Setup", "Install it."), ("Usage", "Run it.")]


def _builtin_docs() -> list[Path]:
    return sorted(p for p in (ROOT / "knowledge").rglob("*.md") if p.name.lower() != "readme.md")


def test_every_knowledge_section_keeps_its_code_whole() -> None:
    """Over the whole built-in knowledge base: every code line of a document is in exactly the code
    block it was written in, and the blocks, written back as Markdown, parse to the same code blocks."""
    from assistant.compose.offline_chat import OfflineAnswer

    checked = 0
    for path in _builtin_docs():
        sections = read_sections("x", "X", str(path))
        assert sections, path
        written = _fences(path.read_text(encoding="utf-8"))
        ours = [b.text for s in sections for b in markdown_blocks(s.body) if b.kind == "code"]
        assert ours == [w.strip("\n") for w in written if w.strip()], path
        for s in sections:
            blocks = markdown_blocks(s.body)
            assert all("```" not in b.text for b in blocks if b.kind == "markdown"), (path, s.heading)
            md = OfflineAnswer(tuple(blocks), (), frozenset()).markdown()
            assert _fences(md) == [b.text for b in blocks if b.kind == "code"], (path, s.heading)
            checked += 1
    assert checked > 300


_LINES = st.sampled_from(["```python", "```", "````", "~~~", "   ```", "   ```python", "text with `code`", "- item", "", "## heading",
                          "x = 1  # comment", "    indented", "Use ```x``` inline", "~~~~", "```bash", "end."])


@hsettings(max_examples=300, deadline=None)
@given(st.lists(_LINES, max_size=25))
def test_blocks_written_back_parse_to_the_same_code(lines: list[str]) -> None:
    """Whatever the fences, the answer's Markdown is well formed: a CommonMark parser finds exactly our code blocks."""
    from assistant.compose.offline_chat import OfflineAnswer

    blocks = markdown_blocks("\n".join(lines))
    md = OfflineAnswer(tuple(blocks), (), frozenset()).markdown()
    assert _fences(md) == [b.text for b in blocks if b.kind == "code"]


def test_rank_sections_by_overlap_with_the_question() -> None:
    sections = read_sections("matmul-shape-mismatch", "Matrix multiply shape mismatch", MATMUL)
    assert {"Symptoms", "Causes", "Fixes", "Example"} <= {s.heading for s in sections}
    best = rank_sections("what is LazyLinear", sections)[0]
    assert "lazylinear" in best.body.lower()
    assert rank_sections("show me an example", sections)[0].heading == "Example"  # a word in the heading counts more
    assert rank_sections("how do I print shapes per layer?", sections)[0].heading == "Fixes"
    assert rank_sections("what is the weather on mars", sections) == []
    assert rank_sections("please tell me", sections) == []  # words about asking, not a topic


# --------------------------------------------------------------------------- answers


def test_fix_question_gives_every_fix_whole(linear_diagnosis) -> None:  # type: ignore[no-untyped-def]
    d = linear_diagnosis
    answer = answer_offline("how do I fix it", d, [])
    codes = [b.text for b in answer.blocks if b.kind == "code"]
    assert codes == [f.code.strip("\n") for f in d.fixes if f.code]
    texts = [b.text for b in answer.blocks]
    for f in d.fixes:
        assert any(f.title in t for t in texts) and (not f.detail or f.detail in texts)
    assert set(answer.cited) == {c for f in d.fixes for c in f.sources} | {s.id for s in d.sources}
    assert _fences(answer.markdown()) == codes


def test_why_question_gives_cause_and_evidence(linear_diagnosis) -> None:  # type: ignore[no-untyped-def]
    d = linear_diagnosis
    answer = answer_offline("why?", d, [])
    texts = [b.text for b in answer.blocks]
    first, rest = split_first(d.cause)
    assert rest in texts and not any(first in t for t in texts)  # the why past the cause's first sentence, never the cause again (issue 21)
    assert all(any(e.text in t for t in texts) for e in d.evidence)
    assert set(answer.cited) == {s.id for s in d.sources}
    md = answer.markdown()
    assert not md.startswith("## ") and set(_CITATION.findall(md)) == {s.id for s in d.sources}


def test_other_question_gives_the_closest_section_whole(linear_diagnosis) -> None:  # type: ignore[no-untyped-def]
    sections = read_sections("matmul-shape-mismatch", "Matrix multiply shape mismatch", MATMUL)
    answer = answer_offline("what is LazyLinear", linear_diagnosis, sections)
    fixes = next(s for s in sections if s.heading == "Fixes")
    assert answer.blocks[0].kind == "heading" and answer.blocks[0].text.startswith("[matmul-shape-mismatch]")
    shown = [b for b in answer.blocks[1:] if b.kind in ("markdown", "code")]
    whole = markdown_blocks(fixes.body)
    flat_body = " ".join(fixes.body.split())
    assert shown and "lazylinear" in shown[0].text.lower()  # the passage that answers, quoted briefly (issue 21)
    assert sum(b.text.count("\n") + 1 for b in shown) <= 6
    assert all(" ".join(b.text.split()) in flat_body for b in shown)  # whole paragraphs and code blocks, never cut ones
    if sum(len(b.text) for b in shown) < sum(len(b.text) for b in whole):  # a long section stops at a boundary and says so
        assert any("section goes on" in b.text for b in answer.blocks)
    assert "matmul-shape-mismatch" in answer.cited
    nothing = answer_offline("what is the weather on mars", linear_diagnosis, sections)
    assert "Nothing" in nothing.blocks[0].text and nothing.cited == tuple(s.id for s in linear_diagnosis.sources)


def test_long_sections_stop_at_a_block_boundary(linear_diagnosis) -> None:  # type: ignore[no-untyped-def]
    from assistant.compose.offline_chat import MAX_SECTION_CHARS

    paragraph = "Keep the batch axis. " * 40  # ~840 characters, one paragraph
    body = "\n\n".join([paragraph.strip()] * 12) + "\n```python\nx = torch.flatten(x, 1)\n```\n"
    answer = answer_offline("batch axis", linear_diagnosis, [Section("user:notes", "Notes", "Flattening", body)], {"user:notes": "/tmp/notes.md"})
    shown = [b for b in answer.blocks if b.kind == "markdown"]
    assert all(b.text == paragraph.strip() for b in shown)  # whole paragraphs, never a cut one
    assert 0 < len(shown) < 12 and sum(len(b.text) for b in shown) <= MAX_SECTION_CHARS + len(paragraph)
    assert any("section goes on" in b.text and "/tmp/notes.md" in b.text for b in answer.blocks)


# --------------------------------------------------------------------------- the real thing on a terminal


def _chat_on_a_terminal(home: Path, log: Path, questions: list[str], end: bytes) -> tuple[str, int]:
    """Run `torchhelp ask --chat LOG` on a real 80-column pseudo-terminal, type the questions, then `end`."""
    out = bytearray()
    with torchhelp_on_a_terminal(["ask", "--chat", str(log)], _env(home), columns=80) as (pid, fd):
        for n, question in enumerate(questions, 1):
            read_until(fd, out, lambda o, n=n: o.count(b"you> ") >= n, 120)
            assert out.count(b"you> ") >= n, out.decode(errors="replace")[-3000:]
            os.write(fd, question.encode() + b"\n")
        read_until(fd, out, lambda o: o.count(b"you> ") > len(questions), 120)
        os.write(fd, end)
        alive = read_until(fd, out, lambda o: False, 30)
        assert not alive, "the chat did not end on " + repr(end)
        _, status = os.waitpid(pid, 0)
        return _ANSI.sub("", out.decode(errors="replace")).replace("\r\n", "\n"), os.waitstatus_to_exitcode(status)


def _answers(transcript: str) -> dict[str, str]:
    """Each question's answer: the text between its `you> QUESTION` line and the next prompt."""
    chat = transcript.split("Follow-up questions", 1)[1]
    parts = chat.split("you> ")[1:]
    return {p.split("\n", 1)[0].strip(): p.split("\n", 1)[1] if "\n" in p else "" for p in parts}


def _flat(text: str) -> str:
    """Rendered text as words: Markdown emphasis and inline-code marks dropped, whitespace folded."""
    return " ".join(text.replace("**", "").replace("`", "").split())


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_chat_on_a_real_terminal_without_an_llm(tmp_path: Path) -> None:
    log = tmp_path / "linear.log"
    log.write_text(json.loads(CAPTURE.read_text(encoding="utf-8"))["stderr"], encoding="utf-8")
    diag = json.loads(subprocess.run([sys.executable, "-m", "assistant", "ask", "--json", str(log)], capture_output=True, text=True,
                                     env=_env(tmp_path), timeout=240, check=True).stdout)
    questions = ["how do I fix it", "why", "what is LazyLinear"]
    transcript, code = _chat_on_a_terminal(tmp_path, log, questions, b"quit\n")
    assert code == 0, transcript[-3000:]
    answers = _answers(transcript)
    chat = transcript.split("Follow-up questions", 1)[1]

    assert "```" not in chat  # no stray fences
    assert "…" not in chat  # nothing cut with an ellipsis
    assert chat.count("TORCHHELP_LLM_URL") == 1  # the LLM hint, once
    assert all(line.startswith("    ") for line in chat.splitlines() if len(line) > 80)  # prose wraps at 80; only code overflows

    fix = answers["how do I fix it"]
    lines = [ln.rstrip() for ln in fix.splitlines()]
    for f in diag["fixes"]:
        assert _flat(f["title"]) in _flat(fix)
        for code_line in (f["code"] or "").splitlines():  # the code in full: every line whole, on one line
            assert any(ln.endswith(code_line) and ln[: len(ln) - len(code_line)].strip() == "" for ln in lines), code_line
    assert "[matmul-shape-mismatch]" in fix

    why = answers["why"]
    first, rest = split_first(diag["cause"])
    assert _flat(rest) in _flat(why) and _flat(first) not in _flat(why)  # the why, never the cause again (issue 21)
    assert all(_flat(e["text"]) in _flat(why) for e in diag["evidence"])

    what = answers["what is LazyLinear"]
    assert "[matmul-shape-mismatch]" in what
    fixes = next(s for s in read_sections("matmul-shape-mismatch", "", MATMUL) if s.heading == "Fixes")
    item = next(p.blocks[0] for p in excerpts(fixes) if "LazyLinear" in p.blocks[0].text)  # the passage that answers, whole (issue 21)
    for line in item.text.splitlines():
        assert _flat(re.sub(r"^\s*(\d+\.|-|#+)\s+", "", line)) in _flat(what), line
    assert "register_forward_pre_hook" not in what  # nothing else of the section


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_chat_ends_on_ctrl_d(tmp_path: Path) -> None:
    log = tmp_path / "linear.log"
    log.write_text(json.loads(CAPTURE.read_text(encoding="utf-8"))["stderr"], encoding="utf-8")
    transcript, code = _chat_on_a_terminal(tmp_path, log, ["any workaround?"], b"\x04")
    assert code == 0, transcript[-3000:]
    assert "```" not in transcript and "nn.LazyLinear(10)" in transcript


def test_llm_path_kept_and_its_failure_falls_back_to_sections(lexical_settings, linear_diagnosis) -> None:  # type: ignore[no-untyped-def]
    """With an LLM (a real loopback server) its reply is printed as before; a reply citing a document that
    was not retrieved is withheld and the question is answered from the knowledge base, as sections."""
    import io

    from assistant.compose.chat import run_chat
    from assistant.kb.retrieve import get_retriever
    from llm_servers import MisbehavingServer

    d = linear_diagnosis
    retriever = get_retriever(lexical_settings.home, dense=False)
    passages = retriever.search(f"{d.title}\n{d.cause}", k=5, must_include=[s.id for s in d.sources])
    with MisbehavingServer("ok", "Use nn.LazyLinear(10) so in_features is inferred [matmul-shape-mismatch].") as server:
        out = io.StringIO()
        run_chat(d, passages, lexical_settings.with_overrides(llm="openai", llm_url=server.url), stdin=io.StringIO("how do I fix it\nexit\n"), stdout=out)
    text = out.getvalue()
    assert "torchhelp> Use nn.LazyLinear(10) so in_features is inferred [matmul-shape-mismatch]." in text
    assert "TORCHHELP_LLM_URL" not in text  # the hint is for chats without an LLM
    with MisbehavingServer("ok", "See [totally-made-up] for details.") as server:
        out = io.StringIO()
        run_chat(d, passages, lexical_settings.with_overrides(llm="openai", llm_url=server.url), stdin=io.StringIO("how do I fix it\n"), stdout=out)
    text = out.getvalue()
    assert "not retrieved" in text and "totally-made-up" in text  # the note says why
    assert "```" not in text and "self.classifier = nn.LazyLinear(10)" in text  # then the fixes, whole


_SGR = re.compile(rb"\x1b\[[0-9;]*m")  # rich's own styling: the only escapes the chat may write


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_hostile_runbook_is_shown_not_obeyed(tmp_path: Path) -> None:
    """A team runbook (`kb add`) with terminal escapes, answered on a real terminal: its text is shown, the
    escapes are not written (clipboard OSC 52, hyperlink OSC 8, C1 CSI, screen reset, erase)."""
    runbook = tmp_path / "zorblax.md"
    runbook.write_text(
        "# Zorblax checkpoint runbook\n\n## Restoring zorblax shards\n"
        "Run the zorblax restore \x1b]52;c;cm0gLXJmIH4K\x07 before training.\n"
        "Then \x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\ here, \x9b31m red \x1bc and [the wiki](http://wiki.example/zorblax).\n\n"
        "```python\nrestore_zorblax()  \x1b[2J\n```\n",
        encoding="utf-8",
    )
    subprocess.run([sys.executable, "-m", "assistant", "kb", "add", str(runbook)], env=_env(tmp_path), check=True, capture_output=True, timeout=240)
    log = tmp_path / "linear.log"
    log.write_text(json.loads(CAPTURE.read_text(encoding="utf-8"))["stderr"], encoding="utf-8")
    out = bytearray()
    with torchhelp_on_a_terminal(["ask", "--chat", str(log)], _env(tmp_path)) as (pid, fd):
        read_until(fd, out, lambda o: b"you> " in o, 120)
        mark = len(out)
        os.write(fd, b"how do I restore zorblax shards?\n")
        read_until(fd, out, lambda o: o.count(b"you> ") >= 2, 120)
        os.write(fd, b"\x04")
        read_until(fd, out, lambda o: False, 30)
    answer = bytes(out[mark:])
    bare = _SGR.sub(b"", answer)
    assert b"\x1b" not in bare and b"\x07" not in bare and "\x9b" not in bare.decode(errors="replace"), bare
    text = " ".join(bare.decode(errors="replace").split())
    assert "[user:zorblax]" in text and "Run the zorblax restore before training." in text
    assert "restore_zorblax()" in text and "the wiki (http://wiki.example/zorblax)" in text  # a link is shown as text
