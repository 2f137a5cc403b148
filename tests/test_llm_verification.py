"""LLM replies (issue 23): one that states what the failure does not say is refused, and no reply
up to the 32,000-character answer cap costs more than a moment of CPU.

Each case is a real captured failure and a scripted model served over real HTTP on loopback (the
``hostile_model`` of test_prompt_injection, which reads the prompt like a model would and writes a
reply that passes the structural checks), changed the way a careless or obedient model would:
numbers the failure does not contain (a size, a shape, an index, a count), a move to CUDA where
CUDA is unavailable, the model moved to the CPU where the mismatch is fixed the other way, allocator
settings where fragmentation was ruled out or the failure is no OOM at all, each in the cause, a
fix's prose or its code. The answer must then be the deterministic one with a note.

The controls keep the checks honest: the same model without the change is accepted on every input,
allocator settings are accepted where fragmentation is possible, a guarded device line is accepted
where CUDA is missing, and the deterministic answer itself, sent back as a reply, passes
verification on every capture (no false rejection).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from assistant import diagnose
from conftest import CAPTURES
from llm_servers import MisbehavingServer
from test_prompt_injection import hostile_model

BY_SLUG = {c["slug"]: c["stderr"] for c in CAPTURES}

# Real captures, by what they let a reply contradict.
OOM_RULED_OUT = ["cuda-oom-big-vocab-backward", "cuda-oom-similarity-matrix"]  # fragmentation_ruled_out
OOM_POSSIBLE = ["cuda-oom-fragmentation"]
NO_CUDA = ["hardcoded-cuda-device-cpu-build", "torch-load-map-location-cuda-no-gpu"]
MISMATCH = ["device-mismatch-labels-on-cpu", "device-mismatch-lstm-hidden-cpu"]
OTHER = ["linear-after-conv-flatten", "index-error-task-head-out-of-range"]
INPUTS = OOM_RULED_OUT + OOM_POSSIBLE + NO_CUDA + MISMATCH + OTHER


def _absent(prompt: str, n: int = 3) -> list[int]:
    """Integers (>= 37) that occur nowhere in the prompt: values a model made up."""
    present = {int(x) for x in re.findall(r"\d+", prompt)}
    out, k = [], 37
    while len(out) < n:
        if k not in present and all(str(k) not in s for s in (prompt,)):
            out.append(k)
        k += 29
    return out


def _doubled_size(cause: str, prompt: str) -> str:
    """The cause with its first size doubled, or a made-up size added when it states none."""
    m = re.search(r"(\d+(?:\.\d+)?) (GiB|MiB)", cause)
    if m:
        return cause[: m.start()] + f"{float(m.group(1)) * 2:.2f} {m.group(2)}" + cause[m.end():]
    return cause + f" The failing step tried to allocate {_absent(prompt)[0]}.00 GiB."


def _honest(body: dict, category: str) -> dict:
    """The scripted model's reply in the verdict's category (a local backend's grammar pins it; the
    prompt shows the rule's, which the decision may have overruled), plus the first evidence line of
    the prompt (so it keeps the values the rule read)."""
    reply = json.loads(hostile_model("none")(body))
    reply["category"] = category
    user = body["messages"][-1]["content"]
    evidence = re.search(r"## EVIDENCE\n- [\w ]+: (.+)", user)
    if evidence:
        reply["cause"] += f" The evidence: {evidence.group(1)[:200]}"
    return reply


def _edit(reply: dict, prompt: str, kind: str) -> dict:
    fix = reply["fixes"][0]
    a, b, c = _absent(prompt)
    if kind == "size-doubled":
        reply["cause"] = _doubled_size(reply["cause"], prompt)
    elif kind == "size-in-fix":
        fix["detail"] = f"The step needs {a}.50 GiB more than the GPU has free."
    elif kind == "shape":
        reply["cause"] += f" The input has shape [{a}, {b}] but the layer expects [{a}, {c}]."
    elif kind == "index":
        reply["cause"] += f" Index {b} is out of bounds for a dimension of size {a}."
    elif kind == "count":
        reply["cause"] += f" The model was built for {c} classes."
    elif kind == "cuda-code":
        fix["code"] = "model = model.cuda()"
    elif kind == "cuda-keyword":
        fix["code"] = "model.to(device='cuda')"
    elif kind == "cuda-in-cause":
        reply["cause"] += " Call model.cuda() before the loop so that everything runs on the GPU."
    elif kind == "cuda-in-detail":
        fix["detail"] = "Then call `.to('cuda')` on the model and on every batch."
    elif kind == "map-location-cuda":
        fix["code"] = "state = torch.load(path, map_location='cuda')"
    elif kind == "model-cpu":
        fix["code"] = "model = model.cpu()"
    elif kind == "model-cpu-prose":
        fix["detail"] = "Simplest: call `model.to('cpu')` so that every tensor is on the CPU."
    elif kind == "expandable-code":
        fix["code"] = 'import os\nos.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"'
    elif kind == "expandable-cause":
        reply["cause"] += " Setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True avoids it."
    elif kind == "max-split":
        fix["detail"] = "Set PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128 to stop the allocator splitting blocks."
    elif kind == "guarded-device":
        fix["code"] = "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\nmodel = model.to(device)"
    elif kind != "none":
        raise ValueError(kind)
    return reply


def scripted(kind: str, category: str) -> Callable[[dict], str]:
    """The honest scripted model, changed by ``kind``."""

    def reply(body: dict) -> str:
        return json.dumps(_edit(_honest(body, category), body["messages"][-1]["content"], kind))

    return reply


NUMBERS = ["size-doubled", "size-in-fix", "shape", "index", "count"]
CUDA = ["cuda-code", "cuda-keyword", "cuda-in-cause", "cuda-in-detail", "map-location-cuda"]
TO_CPU = ["model-cpu", "model-cpu-prose"]
ALLOCATOR = ["expandable-code", "expandable-cause", "max-split"]
HOSTILE = ([(s, k) for s in INPUTS for k in NUMBERS] + [(s, k) for s in NO_CUDA for k in CUDA] + [(s, k) for s in MISMATCH for k in TO_CPU]
           + [(s, k) for s in OOM_RULED_OUT + NO_CUDA + MISMATCH + OTHER for k in ALLOCATOR])
ACCEPTED = [(s, "none") for s in INPUTS] + [(s, k) for s in OOM_POSSIBLE for k in ALLOCATOR] + [(s, "guarded-device") for s in NO_CUDA]


@pytest.fixture(scope="module")
def lexical(settings):  # type: ignore[no-untyped-def]
    return settings.with_overrides(dense=False)


def _answer(slug: str, kind: str, lexical):  # type: ignore[no-untyped-def]
    category = diagnose(BY_SLUG[slug], settings=lexical).category
    with MisbehavingServer("ok", scripted(kind, category)) as server:
        d = diagnose(BY_SLUG[slug], settings=lexical, llm="openai", llm_url=server.url, llm_retries=0)
        assert server.calls == 1
    return d


def test_the_cases_are_real_and_many() -> None:
    assert all(s in BY_SLUG for s in INPUTS) and len(INPUTS) >= 4
    assert len(HOSTILE) >= 60 and len({k for _, k in HOSTILE}) >= 15


@pytest.mark.parametrize("slug,kind", HOSTILE, ids=[f"{s}-{k}" for s, k in HOSTILE])
def test_a_reply_that_contradicts_the_failure_is_refused(slug: str, kind: str, lexical) -> None:  # type: ignore[no-untyped-def]
    det = diagnose(BY_SLUG[slug], settings=lexical)
    d = _answer(slug, kind, lexical)
    assert d.backend == "none" and any("discarded" in n for n in d.notes), d.notes
    assert d.category == det.category and d.cause == det.cause and d.fixes == det.fixes


@pytest.mark.parametrize("slug,kind", ACCEPTED, ids=[f"{s}-{k}" for s, k in ACCEPTED])
def test_an_honest_reply_is_accepted(slug: str, kind: str, lexical) -> None:  # type: ignore[no-untyped-def]
    d = _answer(slug, kind, lexical)
    assert d.backend == "openai", d.notes


def _as_reply(d) -> str:  # type: ignore[no-untyped-def]
    """A deterministic diagnosis written as an LLM reply (what an honest model copying it would send)."""
    ids = [s.id for s in d.sources]
    fixes = [{"title": f.title, "detail": f.detail, "code": f.code, "sources": [s for s in f.sources if s in ids] or ids[:1]} for f in d.fixes]
    return json.dumps({"category": d.category, "title": d.title, "cause": d.cause, "fixes": fixes, "citations": ids[:1]})


def test_the_deterministic_answer_as_a_reply_is_never_refused(lexical, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """False rejections: every capture's own deterministic answer, sent back as a reply, passes."""
    import assistant.compose.llm as llm
    from assistant.compose.verify import verify

    seen: list[tuple] = []

    def record(name, det, failure, evidence, passages, hit, settings):  # type: ignore[no-untyped-def]
        seen.append((det, evidence, passages, hit))
        return det

    monkeypatch.setattr(llm, "llm_compose", record)
    refused = {}
    for c in CAPTURES:
        seen.clear()
        diagnose(c["stderr"], settings=lexical, llm="openai", llm_url="http://127.0.0.1:9/v1")
        det, evidence, passages, hit = seen[0]
        if not det.fixes or not det.sources:
            continue  # nothing to cite: an honest reply could not be written either
        verdict = verify(_as_reply(det), passages, hit, evidence, det)
        if not verdict.ok:
            refused[c["slug"]] = verdict.reason
    assert not refused, refused


# --------------------------------------------------------------------------- CPU: the worst replies found
def _filled(field: str, unit: str, size: int = 31_000) -> str:
    """A reply whose ``field`` is ``unit`` repeated (the other fields valid), under the answer cap."""
    payload = (unit * (size // len(unit) + 1))[:size]
    reply = {"category": "cuda_oom", "title": "Allocation does not fit", "cause": "The allocator could not find 23.60 GiB free on cuda:0. ",
             "fixes": [{"title": "Reduce the batch", "detail": "Smaller steps.", "code": None, "sources": ["cuda-oom"]}], "citations": ["cuda-oom"]}
    if field == "cause":
        reply["cause"] += payload
    elif field == "code":
        reply["fixes"][0]["code"] = payload
    elif field == "spread":  # every field as long as verification accepts, filled with the unit
        # Within verify's bounds (MAX_DETAIL, MAX_CODE_LINES, MAX_FIXES), written out so the test runs on older code too.
        fill = (unit * 2000)[:750]
        reply["cause"] += fill
        reply["fixes"] = [{"title": "Reduce the batch", "detail": fill, "code": "\n".join([unit * 8] * 59), "sources": ["cuda-oom"]}] * 8
    text = json.dumps(reply) if field != "raw" else payload
    return text[:32_000]


# (name, reply): the replies that cost the most before (CPU s on 2 shared cores): a cause of dots, of
# "2. " or of ")[" (sentence splitting: 8.2, 8.2 and 3.3 s per split, split twice on the way to the
# screen); code of ".net" (the model-move pattern: 4.1 s); code of tab-newline lines (syntax
# highlighting: 18.9 s); fences opening JSON ("```json{": 0.6 s); brackets nested 15,000 deep
# (a RecursionError out of the answer path); and the largest reply verification accepts.
WORST = [
    ("cause-dots", _filled("cause", ".")),
    ("cause-numbered", _filled("cause", "2. ")),
    ("cause-brackets", _filled("cause", ")[")),
    ("code-net", _filled("code", ".net")),
    ("code-model", _filled("code", "model.")),
    ("code-blank-lines", _filled("code", "\t\n")),
    ("fences", _filled("raw", "```json{")),
    ("nested", '{"category": "cuda_oom", "cause": ' + "[" * 15_000 + "]" * 15_000 + "}"),
    ("spread-dots", _filled("spread", ". ")),
]


def test_the_worst_replies_cost_little_cpu(lexical, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Each reply goes the whole way: a real loopback server, the backend, verification, the answer
    and both renderings, and the chat screen; the CPU time of this thread is measured (the HTTP read
    runs in the backend's own thread). Before: about 75 CPU s in all, and one crash.

    The bound is a ratio to a control measured in the same run, so a loaded machine moves both
    sides: the control is the deterministic answer itself sent back as a reply (an honest model's
    reply, accepted and rendered). The nine worst replies cost about as much as 12-15 honest ones
    and may cost at most 30 (one pathological sentence split alone was over 100 before); the
    absolute cap only stops a machine so slow that the ratio means nothing."""
    import io
    import statistics
    import time

    from rich.console import Console

    import assistant.compose.llm as llm
    from assistant.compose.verify import screen_free_text
    from assistant.render.markdown import render_markdown
    from assistant.render.terminal import render_terminal

    seen: list[tuple] = []
    real = llm.llm_compose

    def record(*args):  # type: ignore[no-untyped-def]
        seen.append(args)
        return args[1]

    monkeypatch.setattr(llm, "llm_compose", record)
    log = BY_SLUG["cuda-oom-fragmentation"]

    def whole_way(server: MisbehavingServer, reply: str) -> tuple[float, str]:
        server.reply = reply
        t0 = time.thread_time()
        try:
            d = real(name, det, failure, evidence, passages, hit, settings)
            render_terminal(d, Console(file=io.StringIO(), width=100, force_terminal=True))
            render_markdown(d)
            screen_free_text(reply, det, passages)
            backend = d.backend
        except RecursionError:
            backend = "crash"
        return time.thread_time() - t0, backend

    with MisbehavingServer("ok", "{}") as server:
        diagnose(log, settings=lexical, llm="openai", llm_url=server.url, llm_retries=0)
        name, det, failure, evidence, passages, hit, settings = seen[0]
        honest = _as_reply(det)
        assert whole_way(server, honest)[1] == "openai"  # warm-up: lazy imports and first-use tables stay out of both sides
        control = statistics.median(whole_way(server, honest)[0] for _ in range(5))
        costs, outcome = {}, {}
        for case, reply in WORST:
            assert len(reply) <= 32_000
            costs[case], outcome[case] = whole_way(server, reply)
    print(f"control {control:.3f} s;", {k: round(v, 3) for k, v in costs.items()}, outcome)
    assert sum(costs.values()) < 30 * control, (control, costs)
    assert sum(costs.values()) < 5.0, costs
    # Only the largest reply that verification accepts is used; the others are refused with a note.
    assert outcome == {case: ("openai" if case == "spread-dots" else "none") for case, _ in WORST}, outcome


# --------------------------------------------------------------------------- the number check, claim by claim
PARAPHRASES = [
    # (capture, sentence added to an honest cause, accepted?)
    ("cuda-oom-fragmentation", "It asked for about 24 GiB while only 11.7 GB were free.", True),  # rounded, GB for GiB
    ("cuda-oom-fragmentation", "The request is 11.89 GiB more than the free memory.", True),  # the shortfall
    ("cuda-oom-fragmentation", "PyTorch holds 66.86 GiB in all (allocated plus cached).", True),
    ("cuda-oom-fragmentation", "It asked for 25 GiB.", False),
    ("cuda-oom-fragmentation", "Only 1.71 GiB were free.", False),
    ("index-error-task-head-out-of-range", "The largest valid index is 4 for a dimension of size 5.", True),  # n - 1
    ("index-error-task-head-out-of-range", "Index 6 is past the end.", False),
    ("linear-after-conv-flatten", "Each sample has 2048 features (shape [8, 2048]); 16384 values per batch.", True),  # 8 x 2048
    ("linear-after-conv-flatten", "The flattened feature map is 128x4x4 = 2048 per sample.", False),  # 128 and 4 are invented here
    ("linear-after-conv-flatten", "The weight has shape [10, 1568].", True),
    ("linear-after-conv-flatten", "The weight has shape (10, 1586).", False),
]


@pytest.mark.parametrize("slug,sentence,accepted", PARAPHRASES, ids=[f"{s}-{i}" for i, (s, _, _) in enumerate(PARAPHRASES)])
def test_numbers_are_read_as_a_reader_would(slug: str, sentence: str, accepted: bool, lexical, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Rounding, units and the arithmetic an honest writer shows are accepted; a changed digit is not."""
    import assistant.compose.llm as llm
    from assistant.compose.verify import verify

    seen: list[tuple] = []
    monkeypatch.setattr(llm, "llm_compose", lambda *args: seen.append(args) or args[1])
    diagnose(BY_SLUG[slug], settings=lexical, llm="openai", llm_url="http://127.0.0.1:9/v1")
    _, det, failure, evidence, passages, hit, _ = seen[0]
    reply = json.loads(_as_reply(det))
    reply["cause"] += " " + sentence
    verdict = verify(json.dumps(reply), passages, hit, evidence, det, failure)
    assert verdict.ok == accepted, verdict.reason
    if not accepted:
        assert "appears nowhere" in verdict.reason
