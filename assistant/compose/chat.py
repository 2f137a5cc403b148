"""`torchhelp ask --chat`: follow-up questions about one diagnosis, with the same grounding rules.

With an LLM backend the conversation history is kept and every reply's [citations] must be
among the retrieved passages (a reply citing anything else is withheld). With no backend, each
question is answered from the knowledge base directly: the best passages for it, with their ids.
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

from assistant.backends.select import resolve_backend_name
from assistant.compose.prompts import chat_system_message
from assistant.errors import BackendError
from assistant.probes.redact import redact_text
from assistant.types import Diagnosis, Passage

_CITATION = re.compile(r"\[([a-z0-9][\w:.-]*)\]")
EXIT_WORDS = {"exit", "quit", "q", ":q", "bye"}


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

    @property
    def allowed(self) -> set[str]:
        return {p.doc_id for p in self.passages}

    def ask(self, question: str, on_token=None) -> str:  # type: ignore[no-untyped-def]
        """Answer one question; the exchange is kept in the history."""
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
        reply = self._backend.complete(messages, on_token=on_token, max_tokens=600)
        bad = check_citations(reply, self.allowed)
        if bad:
            raise BackendError(f"the reply cited sources that were not retrieved ({', '.join(bad)})")
        return reply

    def _ask_kb(self, question: str) -> str:
        if self.retriever is None:
            from assistant.kb.retrieve import get_retriever

            self.retriever = get_retriever(self.settings.home, dense=self.settings.dense, encoder_kind=self.settings.encoder)
        query = f"{question}\n{self.diagnosis.title}"
        hits = self.retriever.search(query, k=3, hint_docs=[s.id for s in self.diagnosis.sources[:2]])
        for p in hits:
            if p.doc_id not in self.allowed:
                self.passages.append(p)
        lines = []
        for p in hits:
            body = " ".join(p.text.split("\n", 1)[-1].split())
            lines.append(f"[{p.doc_id}] {p.title} — {p.section}: {body[:500]}{'…' if len(body) > 500 else ''}")
        return "\n\n".join(lines) if lines else "The knowledge base has nothing on that."


def run_chat(diagnosis: Diagnosis, passages: list[Passage], settings, stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:  # type: ignore[no-untyped-def]
    """Read questions until EOF or 'exit'; print grounded answers."""
    inp, out = stdin or sys.stdin, stdout or sys.stdout
    session = ChatSession(diagnosis, list(passages), settings)
    print(f"\nFollow-up questions about this diagnosis (answered by: {session.backend_name}); 'exit' or Ctrl-D to stop.", file=out)
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
        print("torchhelp> ", end="", file=out, flush=True)
        streamed: list[str] = []

        def sink(token: str, streamed: list[str] = streamed) -> None:  # bound now, not at call time
            streamed.append(token)
            print(token, end="", file=out, flush=True)

        answer = session.ask(question, on_token=sink)
        if not streamed:
            print(answer, end="", file=out)
        elif "".join(streamed) != answer:
            print("\n" + answer, end="", file=out)  # the streamed text was withheld or replaced
        print("\n", file=out, flush=True)
