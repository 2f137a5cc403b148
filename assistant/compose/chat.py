"""`torchhelp ask --chat`: follow-up questions about one diagnosis, with the same grounding rules.

With an LLM backend the conversation history is kept and every reply's [citations] must be
among the retrieved passages (a reply citing anything else is withheld). With no backend, each
question is answered from what the diagnosis and its family's knowledge actually cover: the fixes
not yet shown, why it failed (beyond the cause's first sentence), the checks, the sources, or a short
quote from a same-family section about the question's words; anything else gets one line saying
that it needs an LLM (see :mod:`assistant.compose.offline_chat`).
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

from assistant.backends.select import resolve_backend_name
from assistant.compose.offline_chat import LLM_SETUP, OfflineAnswer, Section, answer_offline, read_sections
from assistant.compose.prompts import chat_system_message
from assistant.errors import BackendError
from assistant.probes.redact import redact_text
from assistant.types import Diagnosis, Passage

_CITATION = re.compile(r"\[([a-z0-9][\w:.-]*)\]")
EXIT_WORDS = {"exit", "quit", "q", ":q", "bye"}
# Said once when a chat starts without an LLM: the knobs that turn on free-form answers (settings.py).
LLM_HINT = ("Without an LLM, answers come from the diagnosis and its knowledge (why, fixes, checks, sources, terms). "
            f"For free-form answers, {LLM_SETUP}.")


def check_citations(reply: str, allowed: set[str]) -> list[str]:
    """Citations in a free-text reply that are not among the allowed ids."""
    return sorted({c for c in _CITATION.findall(reply) if c not in allowed and not c.isdigit()})


class ChatSession:
    """One conversation about one diagnosis."""

    def __init__(self, diagnosis: Diagnosis, passages: list[Passage], settings, retriever=None) -> None:  # type: ignore[no-untyped-def]
        self.diagnosis = diagnosis
        self.passages = passages
        self.settings = settings
        self.retriever = retriever
        self.backend_name = resolve_backend_name(settings)
        self.history: list[dict[str, str]] = [chat_system_message(diagnosis, passages)]
        self._backend = None
        self._sections: dict[str, list[Section]] = {}
        self.last_offline: OfflineAnswer | None = None  # the structured form of the last answer, when the KB gave it

    @property
    def allowed(self) -> set[str]:
        return {p.doc_id for p in self.passages}

    def ask(self, question: str, on_token=None) -> str:  # type: ignore[no-untyped-def]
        """Answer one question; the exchange is kept in the history."""
        self.last_offline = None
        if self.backend_name != "none":
            try:
                answer = self._ask_llm(question, on_token)
                self.history += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
                return answer
            except BackendError as exc:
                note = f"(the '{self.backend_name}' backend gave no usable answer: {exc}; answering from the knowledge base)\n"
                return note + self._ask_kb(question)
        answer = self._ask_kb(question)
        self.history += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        return answer

    def _ask_llm(self, question: str, on_token) -> str:  # type: ignore[no-untyped-def]
        from assistant.backends.base import get_backend

        if self._backend is None:
            self._backend = get_backend(self.backend_name, self.settings)
        messages = self.history + [{"role": "user", "content": question}]
        if self._backend.remote:
            messages = [{"role": m["role"], "content": redact_text(m["content"])} for m in messages]
        # The reply is collected whole and checked before anyone sees a token: a streamed draft could
        # show a command the check would have refused.
        reply = self._backend.complete(messages, on_token=None, max_tokens=600)
        bad = check_citations(reply, self.allowed)
        if bad:
            raise BackendError(f"the reply cited sources that were not retrieved ({', '.join(bad)})")
        from assistant.compose.verify import screen_free_text

        risky = screen_free_text(reply, self.diagnosis, self.passages)
        if risky:
            raise BackendError(f"the reply was withheld: {risky}")
        if on_token is not None:
            on_token(reply)
        return reply

    def _ask_kb(self, question: str) -> str:
        """Answer from the diagnosis and its family's knowledge (no LLM); the passages retrieved for the
        question become citable for later turns."""
        if self.retriever is None:
            from assistant.kb.retrieve import get_retriever

            self.retriever = get_retriever(self.settings.home, dense=self.settings.dense, encoder_kind=self.settings.encoder)
        query = f"{question}\n{self.diagnosis.title}"
        hits = self.retriever.search(query, k=3, hint_docs=[s.id for s in self.diagnosis.sources[:2]])
        for p in hits:
            if p.doc_id not in self.allowed:
                self.passages.append(p)
        docs = self._candidate_docs(hits)
        sections = [s for doc_id, (title, path) in docs.items() for s in self._doc_sections(doc_id, title, path)]
        earlier = [m["content"] for m in self.history if m["role"] == "assistant"]
        answer = answer_offline(question, self.diagnosis, sections, {doc_id: path for doc_id, (_, path) in docs.items()},
                                idf=self.retriever.idf, earlier=earlier)
        self.last_offline = answer
        return answer.markdown()

    def _candidate_docs(self, hits: list[Passage]) -> dict[str, tuple[str, str]]:
        """Documents whose sections may answer, as id -> (title, path): those retrieved for the question,
        then the diagnosis' passages, then every other document of its failure family (ties in the
        ranking go to the earlier one; answer_offline keeps only the family's and team runbooks)."""
        docs: dict[str, tuple[str, str]] = {}
        for p in [*hits, *self.passages]:
            docs.setdefault(p.doc_id, (p.title, p.path))
        for info in self.retriever.docs.values():
            if info.category == self.diagnosis.category:
                docs.setdefault(info.id, (info.title, info.path))
        return docs

    def _doc_sections(self, doc_id: str, title: str, path: str) -> list[Section]:
        if doc_id not in self._sections:
            self._sections[doc_id] = read_sections(doc_id, title, path)
        return self._sections[doc_id]


def run_chat(diagnosis: Diagnosis, passages: list[Passage], settings, stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:  # type: ignore[no-untyped-def]
    """Read questions until EOF or 'exit'; print grounded answers."""
    from rich.console import Console

    from assistant.render.chat_answer import render_answer
    from assistant.render.safe_text import safe_text

    inp, out = stdin or sys.stdin, stdout or sys.stdout
    console = Console(file=out, highlight=False)
    session = ChatSession(diagnosis, list(passages), settings)
    print(f"\nFollow-up questions about this diagnosis (answered by: {session.backend_name}); 'exit' or Ctrl-D to stop.", file=out)
    if session.backend_name == "none":
        console.print(LLM_HINT, style="dim", markup=False)
    while True:
        print("you> ", end="", file=out, flush=True)
        line = inp.readline()
        if not line:
            print(file=out)
            return
        question = line.strip()
        if not question:
            continue
        if question.lower() in EXIT_WORDS:
            return
        llm = session.backend_name != "none"
        if llm:
            print("torchhelp> ", end="", file=out, flush=True)
        streamed: list[str] = []

        def sink(token: str, streamed: list[str] = streamed) -> None:  # bound now, not at call time
            streamed.append(token)
            print(safe_text(token), end="", file=out, flush=True)  # no ESC survives in any token, so none can join across two

        answer = session.ask(question, on_token=sink if llm else None)
        offline = session.last_offline
        if offline is not None and not llm:
            render_answer(offline.blocks, console, prefix="torchhelp> ")
        elif offline is not None:  # the LLM gave no usable answer: its note, then the knowledge-base answer
            note = answer.removesuffix(offline.markdown()).strip()
            print(("\n" if streamed else "") + safe_text(note), file=out)
            render_answer(offline.blocks, console)
        elif not streamed:
            print(safe_text(answer), end="", file=out)
        elif "".join(streamed) != answer:
            print("\n" + safe_text(answer), end="", file=out)  # the streamed text was withheld or replaced
        print(("" if offline is not None else "\n"), file=out, flush=True)
