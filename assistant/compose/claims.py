"""What an LLM reply claims, checked against what the failure says.

Two kinds of claim can contradict the engine's reading of a failure while every structural check
passes (the reply is well formed, cites retrieved passages and keeps a value the rule read):

- numbers: a size (``4.00 GiB``), a shape (``[32, 512]``, ``8x30x30``) or a count or index
  (``index 17``, ``12 classes``) that appears nowhere in the failure, the evidence, the
  deterministic answer or the cited passages; sizes are compared as sizes (``23.6 GiB`` is
  ``23.60 GiB``; the shortfall and the memory in use that an OOM's numbers imply are known too),
  whole numbers exactly (and the products of the failure's own dimensions, and each one minus
  one: the last valid index);
- actions the diagnosis rules out: moving work to CUDA where CUDA is unavailable, moving the model
  to the CPU where a device mismatch is fixed by moving the data to the model, allocator settings
  (``expandable_segments``, ``PYTORCH_CUDA_ALLOC_CONF``) where fragmentation was ruled out or the
  failure is no OOM at all, in any field: code, a fix's prose or the cause.

Sizes are checked wherever they are stated (a fix may repeat one); other numbers only in the title
and the cause: a fix proposes new numbers (a batch size, a layer width), which is not a claim about
the failure. A sentence that tells what failed (``any .cuda() call fails``) or rules an action out
(``expandable_segments would not help``) is a description, not a proposal.

Every pattern here is linear on the 32,000-character replies the backends accept (bounded
quantifiers; receivers are read backwards over a bounded window in Python).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice

from assistant.types import Diagnosis, Evidence, Failure, Fix, Passage, RuleHit

_UNITS = {"b": 1, "byte": 1, "bytes": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
          "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40}
# Writers use GB for GiB and for 10^9 bytes alike: either reading may match.
_DECIMAL = {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_SIZE = re.compile(r"(?<![\w.])(\d{1,9}(?:\.\d{1,4})?)\s?(KiB|MiB|GiB|TiB|KB|MB|GB|TB|bytes)(?![\w])", re.I)
_SHAPE = re.compile(r"[\[(]\s{0,3}-?\d{1,9}(?:\s{0,3},\s{0,3}-?\d{1,9}){1,7}\s{0,3},?\s{0,3}[\])]")
_PRODUCT = re.compile(r"(?<![\w.])\d{1,9}(?:\s{0,2}[x×]\s{0,2}\d{1,9}){1,5}(?![\w.])")
_COUNT_BEFORE = re.compile(r"\b(?:index|indices|indexes|size|dim|dimension|rank|length|got|expected|of size|out of)\s{1,3}(?:of\s{1,3}|=\s{0,2}|:\s{0,2})?(-?\d{1,12})(?![\w.])", re.I)
_COUNT_AFTER = re.compile(r"(?<![\w.])(\d{1,12})\s{1,3}(?:classes|features|channels|elements|tokens|samples|items|labels|rows|columns|GPUs|ranks|dimensions|dims|layers|heads|workers|entries|embeddings)\b", re.I)
# Whole numbers only: the parts of 66.9 or 2.13.0, and digits inside a word (a temporary folder's
# "swoha8c6"), are not counts or indices; "8x2048" holds 8 and 2048.
_INTS = re.compile(r"(?:(?<![\w.])|(?<=\d[x×]))\d{1,15}(?!\.?\d)")
# A document's item number ("…batch size 1. 6. **Index tensor…"), at a line start or after a sentence: not a value.
_LIST_MARKER = re.compile(r"(?m)(?:^[ \t]{0,8}|(?<=[.!?:][ \t]))\d{1,3}[.)][ \t](?=\*\*|[A-Z`])")
_FREE_INTS = {-1, 0, 1}  # too common in prose to be a claim ("dimension 1", "index 0", "view(-1)")
_MAX_CLAIMS = 100  # a reply with more numbers than this is checked on its first ones (bounded work)
_MAX_DERIVED = 60  # the failure's dimensions whose pairwise products count as known


@dataclass(frozen=True)
class _Size:
    value: float  # bytes
    slack: float  # half a unit of the last digit written, in bytes


def _sizes(text: str) -> list[_Size]:
    """Every size written in ``text`` (each unit reading, when a unit is ambiguous)."""
    out = []
    for m in _SIZE.finditer(text):
        number, unit = m.group(1), m.group(2).lower()
        decimals = len(number.split(".")[1]) if "." in number else 0
        for scale in {_UNITS[unit], _DECIMAL.get(unit, _UNITS[unit])}:
            out.append(_Size(float(number) * scale, 0.5 * 10**-decimals * scale))
    return out


def _shown_size(text: str) -> str:
    """A size as written, for a reason line (digits, a dot and a unit only)."""
    m = _SIZE.match(text)
    return f"{m.group(1)} {m.group(2)}" if m else "a size"


@dataclass(frozen=True)
class Known:
    """The numbers a reply may state: read from the failure, the evidence, the answer and the cited passages."""

    ints: frozenset[int]
    sizes: tuple[_Size, ...]

    def int_known(self, n: int) -> bool:
        return n in _FREE_INTS or abs(n) in self.ints  # signs are read apart: "[-2, 1]" holds 2

    def size_known(self, s: _Size) -> bool:
        return any(abs(s.value - k.value) <= s.slack + k.slack + 0.001 * k.value for k in self.sizes)


def _fix_text(f: Fix) -> str:
    return f"{f.title}\n{f.detail}\n{f.code or ''}"


def diagnosis_text(d: Diagnosis) -> str:
    """Everything the deterministic answer says (its numbers are the engine's own)."""
    parts = [d.title, d.summary, d.cause, d.error or "", *(e.text for e in d.evidence), *(_fix_text(f) for f in d.fixes)]
    for h in d.hypotheses:
        parts += [h.cause, h.check, *(_fix_text(f) for f in h.fixes)]
    return "\n".join(parts)


def known_numbers(failure: Failure, evidence: Evidence, hit: RuleHit | None, det: Diagnosis, passages: Iterable[Passage]) -> Known:
    """The numbers a reply may state about this failure."""
    texts = [failure.text or "", failure.message or "", diagnosis_text(det), *(p.text for p in passages)]
    if not evidence.empty:
        texts.append(repr(evidence))  # probe values: shapes, devices, memory figures
    ints: set[int] = set()
    sizes: list[_Size] = []
    for t in texts:
        ints.update(int(x) for x in _INTS.findall(_LIST_MARKER.sub(" ", t)))
        sizes += _sizes(t)
    # The dimensions the failure states (shape lists and products in its message, the rule's shapes).
    dims = [int(x) for m in _SHAPE.finditer(failure.message or "") for x in re.findall(r"\d{1,12}", m.group(0))]
    dims += [int(x) for m in _PRODUCT.finditer(failure.message or "") for x in re.findall(r"\d{1,12}", m.group(0))]
    if hit is not None:
        f = hit.facts
        by_name = {k: float(v) for k, v in f.numbers.items()}
        sizes += [_Size(v, 0.0) for k, v in by_name.items() if k.endswith("bytes")]
        sizes += [_Size(v, 0.0) for v in _derived_sizes(by_name)]
        ints.update(int(v) for v in by_name.values() if v.is_integer())
        ints.update(n for shape in f.shapes for n in shape)
        dims += [n for shape in f.shapes for n in shape]
        dims += [int(v) for k, v in by_name.items() if v.is_integer() and not k.endswith("bytes")]
    # Arithmetic a careful writer shows: a flattened size (8 x 30 x 30 = 7200), the last valid index of a
    # size (n - 1). Only on the failure's own dimensions: sums of every number in a text would cover
    # almost any small number.
    base = sorted(set(dims))[:_MAX_DERIVED]
    for i, a in enumerate(base):
        ints.add(a - 1)  # the last valid index of a size (n + 1 is left out: it is the usual wrong index)
        for b in base[i:]:
            ints.add(a * b)
    for m in _SHAPE.finditer(failure.message or ""):
        ints.add(math.prod(int(x) for x in re.findall(r"\d{1,12}", m.group(0))))
    return Known(frozenset(ints), tuple(sizes))


def _derived_sizes(n: dict[str, float]) -> list[float]:
    """Sizes an OOM reading implies: the shortfall (requested - free), memory in use (capacity - free)
    and all the allocator reserves (allocated + cached)."""
    out = []
    if "requested_bytes" in n and "free_bytes" in n:
        out.append(abs(n["requested_bytes"] - n["free_bytes"]))
    if "capacity_bytes" in n and "free_bytes" in n:
        out.append(n["capacity_bytes"] - n["free_bytes"])
    if "allocated_bytes" in n and "reserved_unallocated_bytes" in n:
        out.append(n["allocated_bytes"] + n["reserved_unallocated_bytes"])
    return out


def _int_claims(text: str) -> list[int]:
    """Whole numbers the text states as shapes, products, counts or indices."""
    out: list[int] = []
    for rx in (_SHAPE, _PRODUCT):
        for m in rx.finditer(text):
            out += [int(x) for x in re.findall(r"-?\d{1,12}", m.group(0))]
    for rx in (_COUNT_BEFORE, _COUNT_AFTER):
        out += [int(m.group(1)) for m in rx.finditer(text)]
    return out[:_MAX_CLAIMS]


def unknown_number(claims: str, prose: str, known: Known) -> str | None:
    """The first number stated in ``claims`` (title, cause) or a size stated in ``prose`` (fixes) that the
    failure does not contain, described for a reason line; None when every one is known."""
    for m in list(_SIZE.finditer(claims + "\n" + prose))[:_MAX_CLAIMS]:
        readings = _sizes(m.group(0))
        if not any(known.size_known(s) for s in readings):
            return f"a size ({_shown_size(m.group(0))})"
    for n in _int_claims(claims):
        if not known.int_known(n):
            return f"a shape, count or index ({n})"
    return None


# -- actions the diagnosis rules out -------------------------------------------------------------

_ALLOCATOR = re.compile(r"expandable_segments|PYTORCH_(?:CUDA|HIP)_ALLOC_CONF|max_split_size_mb|garbage_collection_threshold"
                        r"|roundup_power2_divisions|_set_allocator_settings", re.I)
# A move of work to CUDA: .cuda(), .to("cuda"), .to(device="cuda"), torch.device("cuda"), device="cuda",
# map_location="cuda", or the words "move ... to the GPU".
_TO_CUDA = re.compile(
    r"\.\s{0,3}cuda\s{0,3}\(|\bto\s{0,3}\(\s{0,3}(?:device\s{0,3}=\s{0,3})?(?:torch\.device\s{0,3}\(\s{0,3})?['\"]cuda"
    r"|\b(?:device|map_location)\s{0,3}=\s{0,3}(?:torch\.device\s{0,3}\(\s{0,3})?['\"]cuda|\btorch\.device\s{0,3}\(\s{0,3}['\"]cuda"
    r"|\b(?:move|put|send|transfer)\b[^.\n]{0,60}?\bto\s{1,3}(?:the\s{1,3})?(?:GPU|CUDA)\b", re.I)
_TO_CPU = re.compile(r"\.\s{0,3}cpu\s{0,3}\(|\.\s{0,3}to\s{0,3}\(\s{0,3}(?:device\s{0,3}=\s{0,3})?(?:torch\.device\s{0,3}\(\s{0,3})?['\"]cpu", re.I)
_MODEL_NAME = re.compile(r"(?:model|net|module)", re.I)
_RECEIVER_WINDOW = 80
_MAX_MATCHES = 100  # mentions of one kind looked at per field: a reply that repeats one thousands of times costs no more
# A sentence or line with these tells what failed or rules the action out; it proposes nothing.
_DESCRIBES = re.compile(r"\b(?:fails?|failed|raises?|raised|crash(?:es|ed)?|not the (?:problem|cause)|(?:would|will|does|do) not help|won't help"
                        r"|doesn't help|cannot help|no setting|is not available|isn't available|unavailable)\b", re.I)
_GUARDED = re.compile(r"is_available\s{0,3}\(", re.I)
_SENTENCE_END = re.compile(r"[.!?](?=\s)|[;\n]")  # a dot inside `.cuda()` ends nothing
_NO_CUDA = re.compile(r"Torch not compiled with CUDA|is_available\(\) is False|no CUDA GPUs are available|Found no NVIDIA driver"
                      r"|CUDA driver version is insufficient|NVIDIA driver on your system is too old")


def _receiver(text: str, dot: int) -> str:
    """The dotted name just before ``text[dot]`` (``self.model`` in ``self.model.cpu()``), read backwards over a bounded window."""
    i = dot
    stop = max(0, dot - _RECEIVER_WINDOW)
    while i > stop and (text[i - 1].isalnum() or text[i - 1] in "_."):
        i -= 1
    return text[i:dot]


def _assigned(text: str, pos: int) -> str:
    """The name assigned on the line holding ``pos`` (``model`` in ``model = Net().cuda()``), if any."""
    start = text.rfind("\n", max(0, pos - _RECEIVER_WINDOW), pos) + 1
    head = text[max(start, pos - _RECEIVER_WINDOW):pos]
    return head.split("=", 1)[0].strip() if "=" in head else ""


def _sentence(text: str, pos: int) -> str:
    """The sentence or line around ``pos``, at most a few hundred characters."""
    lo = max(0, pos - 300)
    before = [m.end() for m in _SENTENCE_END.finditer(text, lo, pos)]
    start = before[-1] if before else lo
    end_m = _SENTENCE_END.search(text, pos, pos + 300)
    return text[start:end_m.start() if end_m else min(len(text), pos + 300)]


@dataclass(frozen=True)
class Proposals:
    """The device and allocator actions a piece of text proposes."""

    allocator: bool = False
    to_cuda: bool = False  # unguarded: not under torch.cuda.is_available()
    model_to_cpu: bool = False
    model_to: frozenset[str] = frozenset()  # devices the model is moved to ("cuda", "cpu")

    def __or__(self, other: Proposals) -> Proposals:
        return Proposals(self.allocator or other.allocator, self.to_cuda or other.to_cuda, self.model_to_cpu or other.model_to_cpu,
                         self.model_to | other.model_to)


def _is_model(text: str, m: re.Match[str]) -> bool:
    return bool(_MODEL_NAME.search(_receiver(text, m.start())) or _MODEL_NAME.search(_assigned(text, m.start())))


def proposals(text: str, code: bool) -> Proposals:
    """What ``text`` proposes; in prose, a sentence that describes the failure proposes nothing, and a
    move guarded by ``is_available()`` (on its line, or anywhere in a code field) is not a move to CUDA."""
    code_guarded = code and bool(_GUARDED.search(text))  # once per field: per match it would be quadratic

    def proposes(m: re.Match[str]) -> bool:
        return code or not _DESCRIBES.search(_sentence(text, m.start()))

    def guarded(m: re.Match[str]) -> bool:
        return code_guarded if code else bool(_GUARDED.search(_sentence(text, m.start())))

    allocator = any(proposes(m) for m in islice(_ALLOCATOR.finditer(text), _MAX_MATCHES))
    to_cuda, model_to, to_cpu = False, set(), False
    for m in islice(_TO_CUDA.finditer(text), _MAX_MATCHES):
        if proposes(m) and not guarded(m):
            to_cuda = True
            if _is_model(text, m):
                model_to.add("cuda")
    for m in islice(_TO_CPU.finditer(text), _MAX_MATCHES):
        if proposes(m) and _is_model(text, m):
            to_cpu = True
            model_to.add("cpu")
    return Proposals(allocator, to_cuda, to_cpu, frozenset(model_to))


def reply_proposals(texts: Sequence[tuple[str, bool]]) -> Proposals:
    """The union of what every (text, is_code) field proposes."""
    out = Proposals()
    for text, code in texts:
        out = out | proposals(text, code)
    return out


def diagnosis_proposals(det: Diagnosis) -> Proposals:
    """What the deterministic answer itself proposes, in its fixes and those of its ranked causes."""
    fixes = list(det.fixes) + [f for h in det.hypotheses for f in h.fixes]
    return reply_proposals([t for f in fixes for t in ((f"{f.title}\n{f.detail}", False), (f.code or "", True))])


def cuda_unavailable(failure: Failure, evidence: Evidence, hit: RuleHit | None, det: Diagnosis) -> bool:
    """Whether the probes, the verdict or the error itself say CUDA cannot be used here."""
    if evidence.env.get("cuda_available") is False or det.category == "cuda_unavailable":
        return True
    if hit is not None and hit.category == "cuda_unavailable":
        return True
    return bool(_NO_CUDA.search(failure.message or ""))


def ruled_out_action(said: Proposals, failure: Failure, evidence: Evidence, hit: RuleHit | None, det: Diagnosis) -> str | None:
    """Why a proposal contradicts the diagnosis (one reason a user can read), or None."""
    own = diagnosis_proposals(det)
    if said.allocator and not own.allocator:
        if hit is not None and "fragmentation_ruled_out" in hit.facts.flags:
            return "it recommends allocator settings (expandable_segments, PYTORCH_CUDA_ALLOC_CONF), but the allocator's numbers show fragmentation is not the problem"
        if det.category != "cuda_oom":
            return f"it recommends allocator settings (expandable_segments, PYTORCH_CUDA_ALLOC_CONF), but this failure is {det.category}, not a CUDA out-of-memory error"
    if said.to_cuda and not own.to_cuda and cuda_unavailable(failure, evidence, hit, det):
        return "it moves work to CUDA, but CUDA is not available in this environment"
    if said.model_to_cpu and not own.model_to_cpu and det.category == "device_mismatch":
        return "it moves the model to the CPU, but the diagnosis fixes this mismatch by moving the other tensors to the model's device"
    for name, devices in ((m.name, m.param_devices) for m in evidence.modules):
        on = {d.split(":")[0] for d in devices}
        for target in said.model_to:
            if on and on == {target}:
                return f"it moves the model to {target}, but the probes show `{name}` already has all parameters on {', '.join(devices)}"
    return None
