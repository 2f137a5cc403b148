"""The OpenAI-compatible chat endpoint and `/v1/diagnose`: request/response models and the logic.

The API is stateless like OpenAI's: the conversation travels in ``messages``. The newest user
message that holds an error or a log (the engine's parser finds an exception, a kernel assertion, an
NCCL or signal line, or a known error signature; a question such as "why?" is not one) is
diagnosed. When it is the last user message, the reply is that diagnosis in Markdown. When later
user messages follow it, the last one is a follow-up: the earlier error is diagnosed again (same
engine, same answer) and the question is answered by :class:`~assistant.compose.chat.ChatSession`
with the grounding rules of ``ask --chat`` (citations only among retrieved passages; without an LLM,
straight from the knowledge base). With no error anywhere, a short reply asks for the traceback.

Everything here is synchronous and CPU-bound; the app runs it in worker threads. Nothing is sent
to the client before it is complete and verified: streamed replies are computed first, then cut into
chunks.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from assistant.backends.select import resolve_backend_name
from assistant.compose.chat import ChatSession
from assistant.errors import BackendError, InputError, KnowledgeError
from assistant.serve.config import BACKENDS
from assistant.types import Diagnosis, Evidence, Passage
from assistant.render.outgoing import shown

MODEL = "torchhelp"
MODEL_IDS = (MODEL, *(f"{MODEL}:{b}" for b in BACKENDS))
NO_ERROR_REPLY = (
    "I diagnose PyTorch failures from their error output, and I do not see one in this conversation yet.\n\n"
    "Paste the full traceback (from `Traceback (most recent call last):` down to the final `...Error: ...` line), "
    "or the last lines of the failing job's log, and I will tell you the cause in terms of your values, the fixes "
    "in order, and the documents they come from. Follow-up questions about that diagnosis are welcome afterwards."
)
HISTORY_TURNS = 8  # earlier follow-up messages replayed to an LLM (the diagnosis itself is in its system message)
HISTORY_CHARS = 2000  # per replayed message
STREAM_CHUNK_CHARS = 80
_QUESTION_START = re.compile(
    r"^(why|what|how|when|where|which|who|whose|can|could|should|would|will|is|are|was|were|do|does|did|"
    r"show|explain|tell|give|help|please|and|but|so|ok|okay|thanks|thank)\b", re.I)
MAX_QUESTION_CHARS = 300
MAX_CHAT_MESSAGES = 100  # messages in one chat request: beyond, 413 (a 1,000-message chat cost 26 CPU s)
MAX_CHAT_CHARS = 2_000_000  # characters of all its messages together: beyond, 413
ERROR_SCAN_MESSAGES = 16  # newest user messages searched for the error to diagnose (each search parses and retrieves)

Strict = ConfigDict(strict=True, extra="ignore")
NonNegInt = Annotated[int, Field(ge=0)]
Finite = Annotated[float, Field(allow_inf_nan=False)]
Number = int | Finite  # ints stay ints (they are printed: "values 0..99", not "0.0..99.0")
Scalar = str | int | Finite | bool | None
Value = Scalar | list[Scalar]  # what probe records hold in their free-form objects (e.g. an optimizer's lr per group)


# -- requests ---------------------------------------------------------------------------------------


class ContentPart(BaseModel):
    """One part of a message's content; only text parts are understood."""

    model_config = Strict
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    """A chat message: content as a string or OpenAI's list of text parts."""

    model_config = Strict
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[ContentPart] | None = None
    name: str | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content)


class StreamOptions(BaseModel):
    model_config = Strict
    include_usage: bool = False


class ChatRequest(BaseModel):
    """OpenAI's chat-completion request; unknown fields (penalties, tools, …) are accepted and ignored.

    ``temperature``, ``top_p`` and the token limits are validated and accepted: the engine answers
    deterministically, and a verified answer is never cut short (a cut would drop its citations).
    """

    model_config = Strict
    model: str = Field(min_length=1, max_length=200, description="`torchhelp`, or `torchhelp:<backend>` (none, local, openai)")
    messages: list[ChatMessage] = Field(min_length=1, max_length=10_000)  # MAX_CHAT_MESSAGES is enforced with a 413
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: Finite | None = Field(None, ge=0, le=2)
    top_p: Finite | None = Field(None, ge=0, le=1)
    max_tokens: int | None = Field(None, ge=1, le=1_000_000)
    max_completion_tokens: int | None = Field(None, ge=1, le=1_000_000)
    n: int | None = Field(None, ge=1, le=1, description="only one choice is produced")
    user: str | None = Field(None, max_length=256)


class TensorIn(BaseModel):
    model_config = Strict
    name: str
    frame: str = ""
    shape: list[NonNegInt] = Field(default_factory=list, max_length=64)
    dtype: str = "?"
    device: str = "?"
    requires_grad: bool = False
    is_leaf: bool = True
    grad_fn: str | None = None
    contiguous: bool = True
    nan_count: NonNegInt | None = None
    inf_count: NonNegInt | None = None
    min_value: Number | None = None
    max_value: Number | None = None


class ModuleIn(BaseModel):
    model_config = Strict
    name: str
    frame: str = ""
    type_name: str = "?"
    param_devices: list[str] = Field(default_factory=list, max_length=64)
    param_dtypes: list[str] = Field(default_factory=list, max_length=64)
    training: bool | None = None
    layers: list[dict[str, Value]] = Field(default_factory=list, max_length=1000)


class DeviceMemoryIn(BaseModel):
    model_config = Strict
    index: NonNegInt
    name: str = "?"
    total: NonNegInt | None = None
    free: NonNegInt | None = None
    allocated: NonNegInt = 0
    reserved: NonNegInt = 0
    peak_allocated: NonNegInt = 0
    reserved_unallocated: int = 0
    fragmentation_share_of_total: Finite | None = Field(None, ge=0, le=1)


class LiveTensorIn(BaseModel):
    model_config = Strict
    shape: list[NonNegInt] = Field(default_factory=list, max_length=64)
    dtype: str = "?"
    bytes: NonNegInt = 0
    requires_grad: bool = False
    device: str | None = None


class AllocationSiteIn(BaseModel):
    model_config = Strict
    site: str
    bytes: NonNegInt = 0
    blocks: NonNegInt = 0


class MemoryIn(BaseModel):
    model_config = Strict
    devices: list[DeviceMemoryIn] = Field(default_factory=list, max_length=64)
    largest_tensors: list[LiveTensorIn] = Field(default_factory=list, max_length=100)
    allocation_sites: list[AllocationSiteIn] = Field(default_factory=list, max_length=100)
    notes: list[str] = Field(default_factory=list, max_length=100)


class GpuIn(BaseModel):
    model_config = Strict
    name: str | None = None
    capability: str | None = None
    memory_total: NonNegInt | None = None


class EnvIn(BaseModel):
    """The environment facts `torchhelp run` attaches (the subset of `torchhelp env --json` the engine reads)."""

    model_config = Strict
    python: str | None = None
    torch: str | None = None
    cuda: str | None = None
    cudnn: str | int | None = None
    nccl: str | None = None
    driver: str | None = None
    gpus: list[GpuIn] = Field(default_factory=list, max_length=64)
    arch_list: list[str] = Field(default_factory=list, max_length=64)
    cuda_available: bool | None = None
    packages: dict[str, str] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list, max_length=100)
    torch_import_error: str | None = None


class RerunIn(BaseModel):
    """What a CUDA_LAUNCH_BLOCKING=1 re-run showed (as `torchhelp run --rerun-blocking` records it)."""

    model_config = Strict
    exit_code: int | None = None
    headline: str | None = None
    location: str | None = None
    innermost: str | None = None
    duration_s: Finite | None = None


class ProbeRecordIn(BaseModel):
    """The probe record `torchhelp run` writes at a crash (other fields of it, like argv, are ignored)."""

    model_config = Strict
    tensors: list[TensorIn] = Field(default_factory=list, max_length=1000)
    modules: list[ModuleIn] = Field(default_factory=list, max_length=200)
    memory: MemoryIn | None = None
    objects: list[dict[str, Value]] = Field(default_factory=list, max_length=200)
    notes: list[str] = Field(default_factory=list, max_length=200)


class EvidenceIn(ProbeRecordIn):
    """Live probe facts: the file ``torchhelp run --evidence-out`` writes (``{"exit_code", "record", ...}``),
    or its ``record`` alone, plus optional ``env`` and ``rerun``. No paths or URLs in it are ever opened."""

    record: ProbeRecordIn | None = None
    env: EnvIn | None = None
    rerun: RerunIn | None = None

    def to_evidence(self) -> Evidence:
        from assistant.probes.collect import evidence_from_record

        # exclude_unset: the facts exactly as the client's record holds them, no defaults added.
        record = (self.record or self).model_dump(exclude_unset=True, include=set(ProbeRecordIn.model_fields))
        env = self.env.model_dump(exclude_unset=True) if self.env else None
        rerun = self.rerun.model_dump(exclude_unset=True) if self.rerun else None
        return evidence_from_record(record, env=env, rerun=rerun)


class DiagnoseRequest(BaseModel):
    """`POST /v1/diagnose`: the text of an error or log, optional probe facts, optional backend."""

    model_config = ConfigDict(strict=True, extra="forbid")
    text: str = Field(min_length=1, description="A traceback, an error line or a log")
    evidence: EvidenceIn | None = None
    llm: Literal["none", "local", "openai"] | None = Field(None, description="The answer writer (default: the server's)")


# -- responses (for the OpenAPI document; handlers build plain dicts) -----------------------------------


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int
    message: AssistantMessage
    finish_reason: Literal["stop", "length"]
    logprobs: None = None


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    system_fingerprint: str | None = None
    torchhelp: dict[str, Any] | None = Field(None, description="Diagnosis.to_dict() of the diagnosed error; null when none was found")


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "torchhelp"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


# -- the logic ----------------------------------------------------------------------------------------


class ModelNotFound(InputError):
    """The request named a model this server does not serve."""


class ChatTooLarge(InputError):
    """A chat request with more messages or text than one request may carry (the server answers 413)."""


def check_chat_size(messages: Sequence[tuple[str, str]]) -> None:
    """Raise ChatTooLarge beyond MAX_CHAT_MESSAGES messages or MAX_CHAT_CHARS characters in all."""
    if len(messages) > MAX_CHAT_MESSAGES:
        raise ChatTooLarge(f"the chat has {len(messages)} messages; one request takes at most {MAX_CHAT_MESSAGES} "
                           "(send the error and the latest turns)")
    total = sum(len(text) for _, text in messages)
    if total > MAX_CHAT_CHARS:
        raise ChatTooLarge(f"the chat's messages hold {total:,} characters; one request takes at most {MAX_CHAT_CHARS:,}")


def backend_for_model(model: str) -> str | None:
    """The backend a model id asks for: None for plain ``torchhelp`` (the server's default)."""
    if model == MODEL:
        return None
    prefix, _, backend = model.partition(":")
    if prefix == MODEL and backend in BACKENDS:
        return backend
    raise ModelNotFound(f"unknown model {model!r}: use one of {', '.join(MODEL_IDS)}")


def read_input(text: str, window: int) -> tuple[str, tuple[str, ...]]:
    """Bound and decode the text exactly as ``torchhelp ask`` reads standard input.

    The same bytes give the same windowing, notes and InputError (empty or binary input) as the CLI.
    Lone surrogates (valid JSON escapes, invalid text) become replacement characters.
    """
    from assistant.parse.reader import read_stream

    data = text.encode("utf-8", errors="surrogatepass")
    inp = read_stream(io.BytesIO(data), window=window)
    return inp.text, inp.notes


class DiagnosisCache:
    """A bounded LRU of deterministic diagnoses, keyed by (digest of the text, notes, engine settings).

    Without an LLM a diagnosis is a pure function of the text and the settings, so the same error
    pasted again (a CI bot, a team hitting the same failure, and every follow-up of the stateless chat,
    which re-diagnoses the conversation's error each turn) costs a dictionary lookup instead of the
    engine. Diagnosis is frozen, so one object can be shared by concurrent requests.
    """

    def __init__(self, max_entries: int = 2048) -> None:
        self.max_entries = max_entries
        self._items: OrderedDict[tuple[Any, ...], Diagnosis] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> Diagnosis | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def resize(self, max_entries: int) -> None:
        """Keep at most ``max_entries`` (0 turns the cache off and empties it)."""
        with self._lock:
            self.max_entries = max_entries
            while len(self._items) > max_entries:
                self._items.popitem(last=False)

    def put(self, key: tuple[Any, ...], diagnosis: Diagnosis) -> None:
        with self._lock:
            self._items[key] = diagnosis
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)


DIAGNOSES = DiagnosisCache()


def cached_diagnosis(engine: Any, text: str, evidence: Evidence | None = None) -> Diagnosis | None:
    """The cached answer for ``text`` when there is one (cheap: callers may run it on the event loop)."""
    if evidence is not None or DIAGNOSES.max_entries == 0 or resolve_backend_name(engine.settings) != "none":
        return None
    body, notes = read_input(text, engine.settings.window_bytes)
    return DIAGNOSES.get(_cache_key(engine, body, notes))


def _cache_key(engine: Any, body: str, notes: Sequence[str]) -> tuple[Any, ...]:
    return (hashlib.blake2b(body.encode("utf-8", "surrogatepass"), digest_size=16).digest(), tuple(notes), engine.settings)


def diagnose_text(engine: Any, text: str, evidence: Evidence | None = None) -> Diagnosis:
    """The diagnosis `torchhelp ask --json` prints for the same text (plus probe facts when given).

    Deterministic answers (no LLM, no probe facts) are cached: see :class:`DiagnosisCache`.
    """
    body, notes = read_input(text, engine.settings.window_bytes)
    if evidence is not None or DIAGNOSES.max_entries == 0 or resolve_backend_name(engine.settings) != "none":
        return engine.diagnose(body, evidence=evidence, notes=notes)
    key = _cache_key(engine, body, notes)
    diagnosis = DIAGNOSES.get(key)
    if diagnosis is None:
        diagnosis = engine.diagnose(body, notes=notes)
        DIAGNOSES.put(key, diagnosis)
    return diagnosis


def llm_fell_back(engine: Any, diagnosis: Diagnosis) -> bool:
    """Whether an LLM was asked to write the answer but the deterministic one was served (see compose/llm.py)."""
    wanted = resolve_backend_name(engine.settings)
    return wanted != "none" and diagnosis.backend != wanted


def _retriever(engine: Any) -> Any:
    try:
        return engine.retriever()
    except KnowledgeError:
        if not engine.settings.dense:
            raise
        return engine.retriever(dense=False)  # as Engine.retrieve does: lexical when dense is unavailable


def _looks_like_question(text: str) -> bool:
    line = text.strip()
    if "\n" in line or len(line) > MAX_QUESTION_CHARS:
        return False
    return line.endswith("?") or bool(_QUESTION_START.match(line))


def holds_error(engine: Any, text: str) -> bool:
    """Whether a message carries an error or a log to diagnose (not a question about one)."""
    try:
        text, _ = read_input(text, engine.settings.window_bytes)  # bounded like the diagnosis will be
    except InputError:
        return False  # empty, or binary
    failure = engine.parse(text)
    if failure.exc_type or failure.cuda_asserts or failure.nccl_lines or failure.signal_lines:
        return True
    if _looks_like_question(text):
        return False
    if _retriever(engine).signature_hits(failure.search_text):
        return True  # a known error signature, e.g. a bare "CUDA out of memory. Tried to allocate ..." line
    hit = engine.match(failure).hit
    return hit is not None and hit.confidence >= 0.9


@dataclass(frozen=True)
class ChatOutcome:
    """What the chat endpoint answers: the verified Markdown, the diagnosis behind it, and how it was made."""

    content: str
    diagnosis: Diagnosis | None
    kind: Literal["diagnosis", "follow_up", "no_error"]
    fallback: bool = False  # an LLM answer was rejected or failed; the deterministic one is shown, with a note
    backend: str = "none"


class _ServerChatSession(ChatSession):
    """ChatSession that also remembers whether its LLM failed (the fallback metric counts it)."""

    fell_back = False

    def _ask_llm(self, question: str, on_token):
        try:
            return super()._ask_llm(question, on_token)
        except BackendError:
            self.fell_back = True
            raise


def follow_up_passages(engine: Any, diagnosis: Diagnosis) -> tuple[Any, list[Passage]]:
    """The passages a follow-up may cite: as `ask --chat` retrieves them (the diagnosis' sources included)."""
    retriever = _retriever(engine)
    ids = [s.id for s in diagnosis.sources]
    passages = retriever.search(f"{diagnosis.title}\n{diagnosis.cause}", k=engine.settings.top_k, must_include=ids)
    return retriever, passages


def _history(messages: Sequence[tuple[str, str]], error_at: int, question_at: int) -> list[dict[str, str]]:
    """Earlier follow-up turns between the diagnosed error and the question (client system prompts are not
    passed on: the grounding system message is ours)."""
    turns = [(role, text) for role, text in messages[error_at + 1 : question_at] if role in ("user", "assistant")]
    if turns and turns[0][0] == "assistant":
        turns = turns[1:]  # the reply to the error is the diagnosis, already in the system message
    return [{"role": role, "content": text[:HISTORY_CHARS]} for role, text in turns[-HISTORY_TURNS:]]


def answer_chat(engine: Any, messages: Sequence[tuple[str, str]]) -> ChatOutcome:
    """Answer a conversation given as (role, text) pairs, oldest first.

    Only the newest ERROR_SCAN_MESSAGES user messages are searched for the error (each search parses
    and retrieves), so the work per request is bounded by its size, never by its length in turns."""
    backend = resolve_backend_name(engine.settings)
    users = [i for i, (role, _) in enumerate(messages) if role == "user"]
    error_at = next((i for i in reversed(users[-ERROR_SCAN_MESSAGES:]) if holds_error(engine, messages[i][1])), None)
    if error_at is None:
        return ChatOutcome(NO_ERROR_REPLY, None, "no_error", backend=backend)
    diagnosis = diagnose_text(engine, messages[error_at][1])
    fell_back = llm_fell_back(engine, diagnosis)
    question_at = users[-1]
    if question_at == error_at:
        from assistant.render.markdown import render_markdown

        return ChatOutcome(render_markdown(diagnosis), diagnosis, "diagnosis", fell_back, backend)
    retriever, passages = follow_up_passages(engine, diagnosis)
    session = _ServerChatSession(diagnosis, list(passages), engine.settings, retriever)
    session.history.extend(_history(messages, error_at, question_at))
    answer = session.ask(messages[question_at][1].strip())
    return ChatOutcome(answer, diagnosis, "follow_up", fell_back or session.fell_back, backend)


def approx_tokens(text: str) -> int:
    """Approximate token count: characters / 4, rounded up (OpenAI's rule of thumb for English; no tokenizer is loaded)."""
    return math.ceil(len(text) / 4)


def usage(prompt: Sequence[tuple[str, str]], content: str) -> dict[str, int]:
    prompt_tokens = sum(approx_tokens(text) for _, text in prompt)
    completion_tokens = approx_tokens(content)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def completion_body(outcome: ChatOutcome, model: str, prompt: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The `chat.completion` object, with the diagnosis in ``torchhelp``."""
    return {
        "id": completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": outcome.content}, "finish_reason": "stop", "logprobs": None}],
        "usage": usage(prompt, outcome.content),
        "system_fingerprint": None,
        "torchhelp": shown(outcome.diagnosis).to_dict() if outcome.diagnosis is not None else None,
    }


def split_for_stream(text: str, size: int = STREAM_CHUNK_CHARS) -> list[str]:
    """Cut verified text into pieces of about ``size`` characters, at whitespace where possible; joined, they are the text."""
    pieces: list[str] = []
    rest = text
    while len(rest) > size:
        cut = max(rest.rfind(" ", 0, size), rest.rfind("\n", 0, size))
        cut = cut + 1 if cut > 0 else size
        pieces.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        pieces.append(rest)
    return pieces


def stream_chunks(outcome: ChatOutcome, model: str, prompt: Sequence[tuple[str, str]], include_usage: bool = False) -> Iterator[dict[str, Any]]:
    """`chat.completion.chunk` objects: the role, the content pieces, the final one (finish_reason, ``torchhelp``)."""
    base = {"id": completion_id(), "object": "chat.completion.chunk", "created": int(time.time()), "model": model, "system_fingerprint": None}

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra}

    yield chunk({"role": "assistant", "content": ""})
    for piece in split_for_stream(outcome.content):
        yield chunk({"content": piece})
    yield chunk({}, "stop", torchhelp=shown(outcome.diagnosis).to_dict() if outcome.diagnosis is not None else None)
    if include_usage:
        yield {**base, "choices": [], "usage": usage(prompt, outcome.content)}


def models_list(created: int) -> dict[str, Any]:
    """`GET /v1/models`."""
    return {"object": "list", "data": [{"id": m, "object": "model", "created": created, "owned_by": "torchhelp"} for m in MODEL_IDS]}
