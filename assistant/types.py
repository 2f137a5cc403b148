"""The data objects that flow through the engine.

All are frozen dataclasses: a stage produces them, later stages read them, nobody mutates them.
Only :class:`Diagnosis` leaves the engine; everything else is internal vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from collections.abc import Mapping

# Documents the user added (``torchhelp kb add``) have ids with this prefix; built-in ids never do.
USER_DOC_PREFIX = "user:"

CATEGORIES: tuple[str, ...] = (
    "cuda_oom",
    "cpu_oom",
    "shape_mismatch",
    "dtype_mismatch",
    "device_mismatch",
    "inplace_autograd",
    "backward_twice",
    "no_grad_fn",
    "nan_inf",
    "device_side_assert",
    "illegal_memory_access",
    "cudnn_error",
    "cublas_error",
    "nccl_error",
    "ddp_error",
    "dataloader_error",
    "state_dict_loading",
    "cuda_unavailable",
    "compile_error",
    "amp_error",
    "index_error",
    "multiprocessing_error",
    "serialization_error",
    "environment_error",
    "python_error",
    "hardware_error",
    "unknown",
)


@dataclass(frozen=True)
class Frame:
    """One stack frame as printed in a traceback."""

    file: str
    line: int | None = None
    function: str | None = None
    source: str | None = None
    is_user: bool = True

    def location(self) -> str:
        """``file:line in function`` for display."""
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where} in {self.function}" if self.function else where


@dataclass(frozen=True)
class ExceptionRecord:
    """One exception of a chain: its type, full message and the frames that led to it."""

    exc_type: str | None
    message: str
    frames: tuple[Frame, ...] = ()
    link: str | None = None  # how it relates to the previous record: "context" | "cause" | "embedded"


@dataclass(frozen=True)
class CudaAssert:
    """A CUDA kernel assertion line (``Loss.cu:250: kernel: ... Assertion `t >= 0` failed.``)."""

    source_file: str
    line: int
    kernel: str
    condition: str
    count: int = 1


@dataclass(frozen=True)
class Failure:
    """What the parser read from the user's text.

    ``exc_type``/``message``/``frames`` describe the *effective* failure: when an error was
    re-raised by a wrapper (a DataLoader worker, a spawned process) it is the original one, and
    ``wrapper`` names the wrapper. ``chain`` keeps every record in the order Python printed them.
    """

    exc_type: str | None
    message: str
    frames: tuple[Frame, ...] = ()
    chain: tuple[ExceptionRecord, ...] = ()
    wrapper: str | None = None
    rank: int | None = None
    cuda_asserts: tuple[CudaAssert, ...] = ()
    nccl_lines: tuple[str, ...] = ()
    signal_lines: tuple[str, ...] = ()
    text: str = ""
    notes: tuple[str, ...] = ()

    @property
    def headline(self) -> str:
        """``Type: first line of message`` — what a human would quote."""
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        return f"{self.exc_type}: {first}" if self.exc_type else first

    @property
    def user_frames(self) -> tuple[Frame, ...]:
        """Frames in the user's own code (not the standard library or site-packages)."""
        return tuple(f for f in self.frames if f.is_user)

    @property
    def search_text(self) -> str:
        """Every message in the chain plus assertion and NCCL lines: what rules and retrieval read."""
        # The exception type is part of the text: "BackendCompilerFailed" or "OutOfMemoryError" carry meaning.
        parts = [f"{r.exc_type}: {r.message}" if r.exc_type else r.message for r in self.chain if r.message or r.exc_type]
        own = f"{self.exc_type}: {self.message}" if self.exc_type else self.message
        if own not in parts:
            parts.append(own)
        parts.extend(f"{a.source_file}:{a.line} {a.kernel} Assertion `{a.condition}` failed." for a in self.cuda_asserts)
        parts.extend(self.nccl_lines)
        parts.extend(self.signal_lines)
        return "\n".join(p for p in parts if p)


@dataclass(frozen=True)
class TensorSummary:
    """A tensor seen by a probe: never its values, only their description."""

    name: str
    frame: str
    shape: tuple[int, ...]
    dtype: str
    device: str
    requires_grad: bool = False
    is_leaf: bool = True
    grad_fn: str | None = None
    contiguous: bool = True
    nan_count: int | None = None
    inf_count: int | None = None
    min_value: float | None = None
    max_value: float | None = None
    library: bool = False  # read in a torch/library frame (its names are torch's, not the user's)


@dataclass(frozen=True)
class ModuleSummary:
    """An ``nn.Module`` seen by a probe."""

    name: str
    frame: str
    type_name: str
    param_devices: tuple[str, ...] = ()
    param_dtypes: tuple[str, ...] = ()
    training: bool | None = None
    layers: tuple[Mapping[str, Any], ...] = ()  # e.g. {"name": "fc", "type": "Linear", "in_features": 8192}


@dataclass(frozen=True)
class Evidence:
    """Live facts gathered by probes (``torchhelp run``); empty for pasted text."""

    env: Mapping[str, Any] = field(default_factory=dict)
    tensors: tuple[TensorSummary, ...] = ()
    modules: tuple[ModuleSummary, ...] = ()
    memory: Mapping[str, Any] | None = None
    objects: tuple[Mapping[str, Any], ...] = ()  # optimizers, data loaders, …
    rerun: Mapping[str, Any] | None = None  # result of a CUDA_LAUNCH_BLOCKING=1 rerun
    notes: tuple[str, ...] = ()  # what the probes could not collect
    source: Mapping[str, Any] | None = None  # in-place sites and backward calls read from the user's files (probes/source.py)
    # What `run --investigate` re-ran: rules read these verdicts as facts (an experiment outranks a guess from the numbers).
    experiments: tuple[ExperimentResult, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.env or self.tensors or self.modules or self.memory or self.objects or self.rerun or self.source or self.experiments)

    def experiment_values(self, experiment_id: str) -> Mapping[str, Any] | None:
        """What the named experiment found, as values (None when it did not run or found nothing)."""
        return next((e.values for e in self.experiments if e.id == experiment_id and e.values), None)

    def ruled_out_by_experiment(self, hypothesis: str) -> ExperimentResult | None:
        """The experiment that ruled this hypothesis out, if one did."""
        return next((e for e in self.experiments if hypothesis in e.ruled_out), None)


@dataclass(frozen=True)
class Fix:
    """One remedy: a title, what to do and why, optional code, and the documents that back it."""

    title: str
    detail: str
    code: str | None = None
    sources: tuple[str, ...] = ()
    # What the step does: "fix" removes the cause; "diagnose" finds it (print, localise, measure); "after" is needed
    # once the cause is removed but removes nothing itself (restart a process whose CUDA context an error spoiled).
    step: str = "fix"

    @property
    def diagnostic(self) -> bool:
        """A step that finds the cause rather than one that removes it."""
        return self.step == "diagnose"

    @property
    def from_team_runbook(self) -> bool:
        """True when every document behind this fix is one the user added (``torchhelp kb add``)."""
        return bool(self.sources) and all(s.startswith(USER_DOC_PREFIX) for s in self.sources)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"title": self.title, "detail": self.detail, "code": self.code, "sources": list(self.sources)}
        if self.step != "fix":
            out["step"] = self.step
        return out


@dataclass(frozen=True)
class Fact:
    """A fact read from the error text or a probe, shown as evidence."""

    kind: str
    text: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "text": self.text}


@dataclass(frozen=True)
class Facts:
    """Structured values a rule read from the failure (and probes), for the stages after it.

    Evidence refinement, verification and rendering read these fields; nobody re-reads a rule's
    prose. Every field is optional: a rule fills what its message carries.
    """

    shapes: tuple[tuple[int, ...], ...] = ()  # operand shapes in the order the message gives them
    numbers: Mapping[str, float] = field(default_factory=dict)  # named values: "requested_bytes", "in_features", "index", …
    layer: str | None = None  # attribute name of the failing module call (`fc`, `encoder.proj`)
    layer_kind: str | None = None  # Linear, Conv, Embedding, …
    devices: tuple[str, ...] = ()  # devices the message names (cpu, cuda:0, meta)
    dtypes: tuple[str, ...] = ()  # dtypes the message names (float32, int64, Half)
    argument: str | None = None  # the argument the message blames (`index`, `target`, `mat2`)
    call: str | None = None  # a call on the user's failing line that the evidence implicates, e.g. "torch.arange"
    names: tuple[str, ...] = ()  # other names the message lists (missing keys, modules, operators)
    package: str | None = None  # the installed package the failure points at (`transformers`, `deepspeed`)
    flags: frozenset[str] = frozenset()  # conclusions later stages may rely on, e.g. "fragmentation_ruled_out"

    def number(self, key: str) -> float | None:
        """A named number, or None when the rule did not read it."""
        value = self.numbers.get(key)
        return None if value is None else value

    def to_dict(self) -> dict[str, Any]:
        """Only the fields that carry something (for JSON and debugging)."""
        out: dict[str, Any] = {}
        for name in ("shapes", "numbers", "layer", "layer_kind", "devices", "dtypes", "argument", "call", "names", "package"):
            value = getattr(self, name)
            if value:
                out[name] = [list(s) for s in value] if name == "shapes" else (dict(value) if name == "numbers" else (list(value) if isinstance(value, tuple) else value))
        if self.flags:
            out["flags"] = sorted(self.flags)
        return out


@dataclass(frozen=True)
class RuleHit:
    """What a rule concluded: category, a cause specific to the facts, ordered fixes, documents.

    ``rule`` is the outcome id (one per branch that writes a cause); ``rule_id`` the registered
    rule that produced it. ``evidence`` is what the user is shown as read from the failure;
    ``facts`` the same values, typed, for later stages. ``conjecture`` is a sentence inferred from
    the text alone that live probes may confirm or replace: refinement drops it when it has
    measured the thing directly, instead of editing the cause.
    """

    rule: str
    category: str
    title: str
    cause: str
    fixes: tuple[Fix, ...]
    evidence: tuple[Fact, ...] = ()
    doc_ids: tuple[str, ...] = ()
    confidence: float = 0.9
    query_hint: str = ""  # extra words for retrieval (e.g. the family name)
    facts: Facts = field(default_factory=lambda: Facts())
    conjecture: str = ""
    rule_id: str = ""

    @property
    def full_cause(self) -> str:
        """The cause as shown: the rule's sentences, then its conjecture when one is left."""
        return f"{self.cause} {self.conjecture}".strip() if self.conjecture else self.cause


@dataclass(frozen=True)
class Passage:
    """A retrieved chunk of a knowledge document."""

    id: str  # "<doc_id>#<section-slug>"
    doc_id: str
    title: str
    section: str
    path: str
    category: str
    text: str
    score: float
    lexical: float = 0.0
    dense: float = 0.0


@dataclass(frozen=True)
class Source:
    """A document cited by a diagnosis."""

    id: str
    title: str
    path: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "path": self.path, "score": round(self.score, 4)}


@dataclass(frozen=True)
class Hypothesis:
    """One candidate cause in a differential diagnosis, with how likely it is and how to tell.

    ``supports`` and ``weakens`` quote the facts (from the error, the report's own words, or probes)
    that move it; ``check`` is one thing the user can run or look at to confirm or rule it out.
    ``guess`` marks a hypothesis whose specifics are not read from the facts.
    """

    id: str
    cause: str
    likelihood: float
    check: str
    fixes: tuple[Fix, ...] = ()
    supports: tuple[str, ...] = ()
    weakens: tuple[str, ...] = ()
    guess: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "cause": self.cause, "likelihood": round(float(self.likelihood), 3), "check": self.check,
            "fixes": [f.to_dict() for f in self.fixes], "supports": list(self.supports), "weakens": list(self.weakens), "guess": self.guess,
        }


@dataclass(frozen=True)
class SimilarReport:
    """A resolved real report close to this one: what it was, what fixed it, where it was discussed."""

    id: str
    category: str
    similarity: float
    resolution: str
    link: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "category": self.category, "similarity": round(float(self.similarity), 3), "resolution": self.resolution, "link": self.link}


@dataclass(frozen=True)
class ExperimentResult:
    """One experiment of ``torchhelp run --investigate``: the change, what the re-run did, what it settled.

    ``outcome`` is "passed" (it exited 0 or ran well past the point where the original failed), "same"
    (the same failure), "other" (a different failure, named in ``failure``), "stopped" (the budget or a
    signal ended it before it showed anything) or "not_run" (with the reason in ``finding``).
    ``verified`` and ``ruled_out`` are hypothesis ids; ``command`` repeats the experiment.
    """

    id: str
    title: str
    change: str
    question: str
    outcome: str
    command: str
    finding: str = ""
    failure: str = ""
    verified: tuple[str, ...] = ()
    ruled_out: tuple[str, ...] = ()
    duration_s: float = 0.0
    values: Mapping[str, Any] = field(default_factory=dict)  # the finding as values (op, offending value and range, real location)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "title": self.title, "change": self.change, "question": self.question, "outcome": self.outcome,
            "command": self.command, "finding": self.finding, "failure": self.failure, "verified": list(self.verified),
            "ruled_out": list(self.ruled_out), "duration_s": round(float(self.duration_s), 2), "values": dict(self.values),
        }


@dataclass(frozen=True)
class Diagnosis:
    """The one object that leaves the engine. ``to_dict()`` is the public JSON contract."""

    category: str
    title: str
    summary: str
    cause: str
    fixes: tuple[Fix, ...]
    evidence: tuple[Fact, ...]
    sources: tuple[Source, ...]
    confidence: float
    backend: str = "none"
    rule: str | None = None
    notes: tuple[str, ...] = ()
    error: str = ""  # the failure's headline, for display
    location: str | None = None  # the innermost user frame
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    facts: Facts = field(default_factory=lambda: Facts())  # the typed values the rule read (empty without a rule)
    # Ranked causes, most likely first; ``cause`` and ``fixes`` above are the leading one's. Empty for an unknown failure.
    hypotheses: tuple[Hypothesis, ...] = ()
    similar: tuple[SimilarReport, ...] = ()  # close resolved reports, closest first
    # How the category was decided: the sources behind it and the other categories weighed, with likelihoods.
    decision: Mapping[str, Any] = field(default_factory=dict)
    # The PyTorch check that raised the message (from the error atlas): op, where it is checked, the condition, the values read.
    raised_by: Mapping[str, Any] = field(default_factory=dict)
    # What `torchhelp run --investigate` re-ran and what each re-run settled (empty everywhere else).
    experiments: tuple[ExperimentResult, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON document printed by ``torchhelp ask --json`` (stable field names)."""
        return {
            "category": self.category,
            "title": self.title,
            "summary": self.summary,
            "cause": self.cause,
            "fixes": [f.to_dict() for f in self.fixes],
            "evidence": [e.to_dict() for e in self.evidence],
            "sources": [s.to_dict() for s in self.sources],
            "confidence": round(float(self.confidence), 3),
            "backend": self.backend,
            "rule": self.rule,
            "notes": list(self.notes),
            "error": self.error,
            "location": self.location,
            "facts": self.facts.to_dict(),
            "hypotheses": [h.to_dict() for h in self.hypotheses],
            "similar_reports": [r.to_dict() for r in self.similar],
            "decision": dict(self.decision),
            "raised_by": dict(self.raised_by),
            "experiments": [e.to_dict() for e in self.experiments],
        }
