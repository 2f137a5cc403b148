"""The atlas matcher on real messages: produced here by failing torch calls in a subprocess (plain, and
rewrapped by a DataLoader worker, ``torch.multiprocessing.spawn``, a ``torch.compile`` backend, the C++
``Exception raised from`` frames and ``[rank0]:`` prefixes), CUDA kernel assertion lines from the GPU
captures, and every capture under eval/captured when the extracted atlas ships.

Two atlases: ``small`` is built here (the produced messages with their values turned into typed holes,
among a few hundred distractor templates read with ``ast`` from the installed torch's own ``raise``
statements), so the matcher's mechanics are tested whatever the data; ``shipped`` is the packaged atlas
(assistant/atlas/data), whose tests are skipped until it exists.
"""

from __future__ import annotations

import ast
import gzip
import json
import os
import random
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from assistant.atlas.matcher import DATA_DIR, Atlas, AtlasMatch, canonical_template, template_key, values_as_facts
from assistant.types import Facts

ROOT = Path(__file__).resolve().parents[1]
CAPTURED = ROOT / "eval" / "captured"
SHIPPED = sorted(DATA_DIR.glob("*.jsonl.gz"))
torch = pytest.importorskip("torch")

# Failing calls whose values the tests know; each also has a rewrapped form below.
PRODUCE = textwrap.dedent(
    '''
    import json, os, sys, traceback
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, Dataset

    def cat(): torch.cat([torch.zeros(2, 3), torch.zeros(2, 4)])
    def mm(): torch.zeros(4, 5) @ torch.zeros(6, 7)
    def index(): torch.zeros(3, 5)[0, 7]
    def view(): torch.zeros(6).view(4, 2)
    def dtype(): torch.zeros(2, 2, dtype=torch.float64) @ torch.zeros(2, 2)
    def embed(): F.embedding(torch.tensor([9]), torch.zeros(4, 3))
    def ce(): F.cross_entropy(torch.zeros(4, 3), torch.zeros(3, dtype=torch.long))
    def meta(): torch.zeros(2, device="meta") + torch.zeros(2).index_select(0, torch.tensor([0, 1], device="meta"))

    class Bad(Dataset):
        def __len__(self): return 4
        def __getitem__(self, i): return torch.cat([torch.zeros(2, 3), torch.zeros(2, 4)])

    def loader(): next(iter(DataLoader(Bad(), num_workers=1)))
    def worker(rank): torch.zeros(4, 5) @ torch.zeros(6, 7)
    def spawn():
        import torch.multiprocessing as mp
        mp.spawn(worker, nprocs=1)
    def compiled():
        def broken(gm, example_inputs):
            torch.zeros(6).view(4, 2)
            return gm
        torch.compile(lambda x: x + 1, backend=broken)(torch.zeros(3))

    if __name__ == "__main__":
        names = sys.argv[1].split(",")
        out = {}
        for name in names:
            try:
                globals()[name]()
            except BaseException as exc:
                out[name] = {"type": type(exc).__name__, "message": str(exc), "traceback": traceback.format_exc()}
        json.dump(out, sys.stdout)
    '''
)
PLAIN = ("cat", "mm", "index", "view", "dtype", "embed", "ce", "meta")


def _run(tmp: Path, names: tuple[str, ...], env: dict[str, str] | None = None) -> dict:
    script = tmp / "produce.py"
    script.write_text(PRODUCE, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script), ",".join(names)], capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})}, cwd=tmp
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert set(out) == set(names), (sorted(out), proc.stderr[-2000:])
    return out


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("produce")
    out = _run(tmp, PLAIN + ("loader", "spawn", "compiled"))
    cpp = _run(tmp, ("mm", "index"), env={"TORCH_SHOW_CPP_STACKTRACES": "1", "TORCH_DISABLE_ADDR2LINE": "1"})
    out["mm_cpp"], out["index_cpp"] = cpp["mm"], cpp["index"]
    return out


# ---------------------------------------------------------------------------------------------- the small atlas

_DT = r"(?:torch\.(?:cuda\.)?)?(?:float64|float32|float16|bfloat16|int64|int32|double|float|half|long|Float|Double|Half|BFloat16|Long|Int|Bool)(?:Tensor)?"


def templatize(message: str) -> str:
    """A produced message as an atlas template: shapes, devices, dtypes and integers become holes."""
    t = re.sub(r"torch\.Size\(\[[\d, ]*\]\)|\[[\d, ]*\]|\b\d+(?:x\d+)+\b", "⟦shape⟧", message)
    t = re.sub(r"\b(?:cuda:\d+|cuda|cpu|meta)\b", "⟦device⟧", t)
    t = re.sub(rf"(?<![\w.]){_DT}\b", "⟦dtype⟧", t)
    return re.sub(r"(?<![\w⟦])-?\d+(?![\w⟧])", "⟦int⟧", t)


def _raise_templates(limit: int = 600) -> list[dict]:
    """Distractors: the installed torch's own raise messages (f-string fields as ⟦any⟧)."""
    root = Path(torch.__file__).parent
    out: list[dict] = []
    for rel in ("nn/functional.py", "nn/modules/module.py", "utils/data/dataloader.py", "serialization.py", "functional.py", "_tensor.py", "nn/modules/conv.py"):
        tree = ast.parse((root / rel).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                arg = node.exc.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    t = arg.value
                elif isinstance(arg, ast.JoinedStr):
                    t = "".join(v.value if isinstance(v, ast.Constant) else "⟦any⟧" for v in arg.values)
                else:
                    continue
                out.append({"id": f"python:torch/{rel}:{node.lineno}", "template": t, "kind": "error", "source": "python", "file": f"torch/{rel}", "line": node.lineno})
    return out[:limit]


def _small_entries(produced: dict) -> list[dict]:
    entries = _raise_templates()
    for name in PLAIN:
        msg = produced[name]["message"].strip()
        tpl = templatize(msg)
        entries.append({"id": f"test:{name}", "template": tpl, "kind": "error", "exc_type": produced[name]["type"], "source": "cpp", "op": f"torch.{name}"})
        # a decoy: the same message cut short, which also verifies but covers less
        lits = [f for f in re.split(r"⟦\w+⟧", tpl) if f.strip()]
        if len(lits) > 1 and len(lits[0].strip()) >= 12:
            entries.append({"id": f"test:{name}:decoy", "template": lits[0] + "⟦any⟧", "kind": "error", "source": "binary"})
    for p in sorted((CAPTURED / "cuda").glob("cuda-assert-*.json")):
        for a in json.loads(p.read_text(encoding="utf-8"))["failure"]["cuda_asserts"]:
            entries.append({"id": f"test:assert:{p.stem}", "template": f"Assertion `{a['condition']}` failed.", "kind": "kernel_assert", "source": "cuda", "file": a["source_file"], "line": a["line"]})
    return entries


@pytest.fixture(scope="module")
def small(produced: dict) -> Atlas:
    return Atlas.from_entries(_small_entries(produced))


def _best(atlas: Atlas, text: str, prefix: str = "test:") -> AtlasMatch:
    found = [m for m in atlas.match(text, limit=50) if m.verified and m.id.startswith(prefix) and not m.id.endswith(":decoy")]
    assert found, [(m.id, m.verified) for m in atlas.match(text)]
    return found[0]


# ---------------------------------------------------------------------------------------------- plain messages and values


def test_templatize_gives_matchable_templates(produced: dict) -> None:
    for name in PLAIN:
        tpl = templatize(produced[name]["message"])
        assert template_key(tpl), tpl


@pytest.mark.parametrize("name", PLAIN)
def test_plain_traceback_matches_its_entry(small: Atlas, produced: dict, name: str) -> None:
    tb = produced[name]["traceback"]
    found = small.match(tb)
    assert found and found[0].verified and found[0].id == f"test:{name}", [(m.id, m.verified, m.coverage) for m in found]
    m = found[0]
    assert m.share == 1.0
    start, end = m.span
    assert tb[start:end] == produced[name]["message"].strip()  # the span is the message in the original text
    decoys = [x for x in found if x.id == f"test:{name}:decoy"]
    assert all(d.coverage < m.coverage for d in decoys)  # the shorter template ranks below


def test_values_are_typed(small: Atlas, produced: dict) -> None:
    mm = _best(small, produced["mm"]["traceback"])
    assert [v.value for v in mm.values] == [(4, 5), (6, 7)] and {v.kind for v in mm.values} == {"shape"}
    cat = _best(small, produced["cat"]["traceback"])
    assert [v.value for v in cat.values] == [0, 3, 4, 1] and all(isinstance(v.value, int) for v in cat.values)
    view = _best(small, produced["view"]["traceback"])
    assert [(v.kind, v.value) for v in view.values] == [("shape", (4, 2)), ("int", 6)]
    dt = _best(small, produced["dtype"]["traceback"])
    assert [v.value for v in dt.values if v.kind == "dtype"] == ["float64", "float32"]
    meta = _best(small, produced["meta"]["traceback"])
    assert [v.value for v in meta.values if v.kind == "device"] == ["cpu", "meta"]
    ce = _best(small, produced["ce"]["traceback"])
    assert [v.value for v in ce.values] == [4, 3]


def test_values_as_facts(small: Atlas, produced: dict) -> None:
    facts = values_as_facts(_best(small, produced["mm"]["traceback"]))
    assert isinstance(facts, Facts) and facts.shapes == ((4, 5), (6, 7)) and facts.call == "torch.mm"
    facts = values_as_facts(_best(small, produced["cat"]["traceback"]))
    assert facts.numbers == {"dimension": 0, "size": 3, "size_2": 4, "number": 1}
    facts = values_as_facts(_best(small, produced["index"]["traceback"]))
    assert facts.numbers == {"index": 7, "dimension": 1, "size": 5}
    facts = values_as_facts(_best(small, produced["dtype"]["traceback"]))
    assert facts.dtypes == ("float64", "float32")
    facts = values_as_facts(_best(small, produced["meta"]["traceback"]))
    assert facts.devices == ("cpu", "meta")
    facts = values_as_facts(_best(small, produced["view"]["traceback"]))
    assert facts.shapes == ((4, 2),) and facts.numbers == {"size": 6}


# ---------------------------------------------------------------------------------------------- rewrapped


def _same_reading(atlas: Atlas, plain: str, wrapped: str) -> AtlasMatch:
    want = _best(atlas, plain)
    got = [m for m in atlas.match(wrapped, limit=50) if m.verified and m.id == want.id]
    assert got, [(m.id, m.verified) for m in atlas.match(wrapped)]
    assert [v.value for v in got[0].values] == [v.value for v in want.values]
    return got[0]


def test_dataloader_worker_reraise(small: Atlas, produced: dict) -> None:
    text = produced["loader"]["traceback"]
    assert "DataLoader worker process 0" in text and "Original Traceback" in text
    m = _same_reading(small, produced["cat"]["message"], text)
    assert m.span[0] > text.index("Original Traceback")


def test_spawned_process_error(small: Atlas, produced: dict) -> None:
    text = produced["spawn"]["traceback"]
    assert "-- Process 0 terminated with the following error:" in text
    _same_reading(small, produced["mm"]["message"], text)


def test_compile_backend_failure(small: Atlas, produced: dict) -> None:
    text = produced["compiled"]["traceback"]
    assert produced["compiled"]["type"] == "BackendCompilerFailed" and "backend='broken' raised:" in text
    _same_reading(small, produced["view"]["message"], text)


@pytest.mark.parametrize("name", ["mm", "index"])
def test_cpp_frames_after_the_message(small: Atlas, produced: dict, name: str) -> None:
    text = produced[f"{name}_cpp"]["traceback"]
    assert "Exception raised from" in text
    m = _same_reading(small, produced[name]["message"], text)
    assert "Exception raised from" not in m.matched


def test_rank_prefixes_and_line_wraps(small: Atlas, produced: dict) -> None:
    tb = produced["cat"]["traceback"]
    ranked = "".join(f"[rank{r}]: {line}\n" for line in tb.splitlines() for r in (0,)) + "[rank1]: (other rank output)\n"
    _same_reading(small, tb, ranked)
    msg = produced["cat"]["message"]
    cut = msg.index(" ", len(msg) // 2)
    wrapped = "[rank0]: RuntimeError: " + msg[:cut] + "\n[rank0]:     " + msg[cut + 1 :].replace(" ", "  ") + "\n"
    m = _same_reading(small, tb, wrapped)
    assert wrapped[m.span[0] : m.span[1]].startswith(msg[:20])
    ansi = "\x1b[31mRuntimeError\x1b[0m: " + msg + "\r\n"
    _same_reading(small, tb, ansi)
    flat = " ".join(tb.split())  # a report whose newlines were lost
    _same_reading(small, tb, flat)


def test_cuda_kernel_assertion_lines() -> None:
    """The assertion line of a real GPU capture, repeated once per failing thread, read as one match."""
    paths = sorted((CAPTURED / "cuda").glob("cuda-assert-*.json"))
    assert paths
    for p in paths:
        cap = json.loads(p.read_text(encoding="utf-8"))
        cond = cap["failure"]["cuda_asserts"][0]["condition"]
        atlas = Atlas.from_entries([{"id": "assert", "template": f"Assertion `{cond}` failed.", "kind": "kernel_assert", "source": "cuda"}])
        found = atlas.match(cap["stderr"])
        assert found and found[0].verified, p.name
        s, e = found[0].span
        line = cap["stderr"][cap["stderr"].rfind("\n", 0, s) + 1 : cap["stderr"].find("\n", e)]
        assert re.search(r"\.cu:\d+: \w+: block: \[[\d,]+\], thread: \[[\d,]+\] Assertion", line), line
        assert found[0].count == cap["stderr"].count(f"Assertion `{cond}` failed.")  # one match, every line counted
        # a decoy with more literal text than the condition: the final error line and the one after it
        lines = cap["stderr"].splitlines()
        at = max(i for i, line in enumerate(lines) if cap["failure"]["headline"] in line)
        decoy = " ".join(lines[at : at + 2]) + " ⟦any⟧"
        both = Atlas.from_entries(
            [
                {"id": "assert", "template": f"Assertion `{cond}` failed.", "kind": "kernel_assert", "source": "cuda"},
                {"id": "decoy", "template": decoy, "kind": "error", "source": "binary"},
            ]
        ).match(cap["stderr"])
        assert [m.id for m in both if m.verified] == ["assert", "decoy"] and both[1].coverage > both[0].coverage  # the assertion line ranks above the CUDA error it caused


# ---------------------------------------------------------------------------------------------- nothing to find, pathological inputs

NOT_PYTORCH = [
    "thread 'main' panicked at 'called `Option::unwrap()` on a `None` value', src/main.rs:4:5\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
    "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\nnpm ERR! Found: react@18.2.0\n",
    'Traceback (most recent call last):\n  File "app.py", line 3, in <module>\n    settings["port"]\nKeyError: \'port\'\n',
    "The quick brown fox jumps over the lazy dog. " * 40,
    "",
]


@pytest.mark.parametrize("text", NOT_PYTORCH)
def test_no_pytorch_message_no_match(small: Atlas, text: str) -> None:
    assert small.match(text) == []


def _pathological() -> dict[str, str]:
    rng = random.Random(7)
    words = ["tensor", "shape", "expected", "got", "size", "dimension", "cuda", "float", "index", "of", "the", "[3, 4]", "Expected size", "mat1 and mat2"]
    return {
        "1MB one line": " ".join(rng.choice(words) for _ in range(150_000))[:1_000_000],
        "1MB binary junk": bytes(rng.getrandbits(8) for _ in range(1_000_000)).decode("latin-1"),
        "1MB unicode and holes": "".join(rng.choice("⟦⟧ int\t\r\x1b[0m█é中") for _ in range(1_000_000)),
        "keys that never complete": ("Sizes of tensors must match except in dimension " + "9" * 5000 + " ") * 150,
        "20k assertion lines": "x.cu:1: k: block: [0,0,0], thread: [1,0,0] Assertion `a < b` failed.\n" * 20_000,
        "many short lines": "[rank0]: a\n" * 100_000,
    }


def test_pathological_inputs_stay_fast(small: Atlas) -> None:
    for name, text in _pathological().items():
        t0 = time.perf_counter()
        small.match(text)
        took = time.perf_counter() - t0
        assert took < 1.0, f"{name}: {took:.2f}s"


# ---------------------------------------------------------------------------------------------- loading


def test_load_cache_roundtrip(tmp_path: Path, produced: dict) -> None:
    entries = _small_entries(produced)
    data = tmp_path / "atlas.jsonl.gz"
    with gzip.open(data, "wt", encoding="utf-8") as fh:
        for e in entries:
            fh.write(json.dumps(e, ensure_ascii=False) + "\n")
    first = Atlas.load([data], cache=tmp_path / "cache")
    assert list((tmp_path / "cache").glob("*.index")) and list((tmp_path / "cache").glob("*.jsonl"))
    second = Atlas.load([data], cache=tmp_path / "cache")  # from the cache
    third = Atlas.load([data], cache=False)
    words = Atlas.load([data], cache=tmp_path / "cache", finder="words")
    for name in ("mm", "loader", "compiled"):
        text = produced[name]["traceback"]
        want = [m.to_dict() for m in first.match(text)]
        assert want and want == [m.to_dict() for m in second.match(text)] == [m.to_dict() for m in third.match(text)] == [m.to_dict() for m in words.match(text)]
    for f in (tmp_path / "cache").glob("*.index"):
        f.write_bytes(b"not a pickle")
    assert len(Atlas.load([data], cache=tmp_path / "cache")) == len(first)  # a broken cache is rebuilt


def test_unmatchable_and_duplicate_templates() -> None:
    entries = [
        {"id": "a", "template": "short ⟦int⟧", "kind": "error", "source": "python"},  # no 12-character fragment
        {"id": "b", "template": "too generic", "matchable": False, "kind": "error", "source": "python"},
        {"id": "c", "template": "expected a long enough  fragment, got ⟦int⟧", "kind": "error", "source": "binary"},
        {"id": "d", "template": "expected a long enough fragment,\n got ⟦int⟧", "kind": "error", "source": "python"},
    ]
    atlas = Atlas.from_entries(entries)
    assert len(atlas) == 1 and canonical_template(entries[2]["template"]) == canonical_template(entries[3]["template"])
    m = atlas.best("boom: expected a long enough fragment, got 12")
    assert m is not None and m.id == "d" and [e["id"] for e in m.also] == ["c"] and m.values[0].value == 12


def test_relaxed_reading_when_a_hole_is_not_of_its_type() -> None:
    atlas = Atlas.from_entries([{"id": "w", "template": "widget failure while calling `⟦name⟧` in stage ⟦int⟧", "kind": "error", "source": "header"}])
    m = atlas.best("RuntimeError: widget failure while calling `make(handle)` in stage 3")
    assert m is not None and m.verified and m.relaxed and [v.value for v in m.values] == ["make(handle)", 3]
    strict = atlas.best("RuntimeError: widget failure while calling `make` in stage 3")
    assert strict is not None and strict.verified and not strict.relaxed


def test_leading_any_hole_on_a_wrapped_message() -> None:
    atlas = Atlas.from_entries(
        [{"id": "x", "template": "⟦any⟧ is the wrong size for the frobnicator: got ⟦int⟧ widgets where the frobnicator takes ⟦int⟧", "kind": "error", "source": "python"}]
    )
    for text in (
        "ValueError: input is the wrong size for the frobnicator: got 7 widgets where the frobnicator takes 4\n",
        "ValueError: input is the wrong size for the frobnicator: got 7 widgets\n    where the frobnicator takes 4\n",
        "[rank0]: ValueError: input is the wrong size for the frobnicator:\n[rank0]: got 7 widgets where the frobnicator takes 4\n",
    ):
        m = atlas.best(text)
        assert m is not None and m.verified and [v.value for v in m.values] == ["input", 7, 4], text
    # the key is the second fragment, and the first one is on the line before it
    atlas = Atlas.from_entries([{"id": "y", "template": "⟦any⟧ bad frob: ⟦int⟧ widgets exceed the maximum frobnicator capacity", "kind": "error", "source": "python"}])
    m = atlas.best("RuntimeError: stage two bad frob:\n  9 widgets exceed the maximum frobnicator capacity\n")
    assert m is not None and m.verified and [v.value for v in m.values] == ["stage two", 9]


def test_any_holes_typed_when_that_is_all_they_hold() -> None:
    atlas = Atlas.from_entries([{"id": "f", "template": "the frobnicator got ⟦any⟧ items of shape ⟦any⟧ on ⟦any⟧ as ⟦any⟧ for ⟦any⟧", "kind": "error", "source": "binary"}])
    m = atlas.best("the frobnicator got 12 items of shape [3, 4] on cuda:1 as torch.float16 for some reason")
    assert m is not None and [v.value for v in m.values] == [12, (3, 4), "cuda:1", "torch.float16", "some reason"]
    facts = values_as_facts(m)
    assert facts.numbers == {"got": 12} and facts.shapes == ((3, 4),) and facts.devices == ("cuda:1",) and facts.dtypes == ("float16",)


def test_the_raise_site_the_traceback_shows_comes_first() -> None:
    tpl = "the frobnicator refused input of size ⟦int⟧"
    atlas = Atlas.from_entries(
        [
            {"id": "py", "template": tpl, "kind": "error", "source": "python", "file": "torch/frob/core.py", "line": 10},
            {"id": "bin", "template": tpl, "kind": "error", "source": "binary", "file": None},
        ]
    )
    shown = 'Traceback (most recent call last):\n  File "/x/site-packages/torch/frob/core.py", line 10, in f\n    raise\nRuntimeError: the frobnicator refused input of size 3\n'
    m = atlas.best(shown)
    assert m is not None and m.id == "py" and m.frame_shown is True and [e["id"] for e in m.also] == ["bin"]
    hidden = 'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    f()\nRuntimeError: the frobnicator refused input of size 3\n'
    m = atlas.best(hidden)
    assert m is not None and m.id == "bin" and m.also[0]["id"] == "py"
    assert atlas.best("the frobnicator refused input of size 3").id == "py"  # no traceback: the stored order


# ---------------------------------------------------------------------------------------------- the shipped atlas

needs_data = pytest.mark.skipif(not SHIPPED, reason="the extracted atlas (assistant/atlas/data) is not there yet")


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Atlas:
    return Atlas.load(cache=tmp_path_factory.mktemp("atlas_cache"))


@needs_data
def test_shipped_rewrapped_messages_read_the_same(shipped: Atlas, produced: dict) -> None:
    for plain, wrapped in (("cat", "loader"), ("mm", "spawn"), ("view", "compiled"), ("mm", "mm_cpp"), ("index", "index_cpp")):
        want = next((m for m in shipped.match(produced[plain]["message"]) if m.verified), None)
        if want is None:
            continue  # this wording is not in the data: nothing to compare
        got = [m for m in shipped.match(produced[wrapped]["traceback"], limit=50) if m.verified and m.id == want.id]
        assert got and [v.value for v in got[0].values] == [v.value for v in want.values], wrapped


@needs_data
def test_shipped_atlas_matches_most_captured_final_lines(shipped: Atlas) -> None:
    hit, total = 0, 0
    for p in sorted(CAPTURED.rglob("*.json")):
        cap = json.loads(p.read_text(encoding="utf-8"))
        if not cap.get("stderr"):
            continue
        total += 1
        hit += any(m.verified for m in shipped.match(cap["stderr"]))
    assert total and hit / total >= 0.6, (hit, total)


@needs_data
@pytest.mark.parametrize("text", NOT_PYTORCH[:3])
def test_shipped_atlas_no_match_on_other_tools(shipped: Atlas, text: str) -> None:
    assert not [m for m in shipped.match(text) if m.verified and m.share >= 0.5]


# ---------------------------------------------------------------------------------------------- on a GPU (pytest -m gpu)

GPU_FAILURES = {
    "index": "torch.zeros(5, device='cuda')[torch.tensor([7], device='cuda')]",
    "embedding": "torch.nn.functional.embedding(torch.tensor([9], device='cuda'), torch.zeros(4, 3, device='cuda'))",
    "nll": "torch.nn.functional.cross_entropy(torch.zeros(4, 3, device='cuda'), torch.tensor([0, 1, 2, 5], device='cuda'))",
}


@pytest.mark.gpu
@needs_data
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", sorted(GPU_FAILURES))
def test_gpu_kernel_assertion_matches_its_entry(shipped: Atlas, name: str, tmp_path: Path) -> None:
    """A live device-side assertion: its assertion line matches a kernel-assert entry, ranked first."""
    code = f"import torch\n{GPU_FAILURES[name]}\ntorch.cuda.synchronize()\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, "CUDA_LAUNCH_BLOCKING": "1"})
    out_dir = os.environ.get("TORCHHELP_GPU_OUT")
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / f"atlas-assert-{name}.stderr.txt").write_text(proc.stderr, encoding="utf-8")
    assert proc.returncode != 0 and "Assertion `" in proc.stderr, proc.stderr[-2000:]
    found = shipped.match(proc.stderr)
    assert found and found[0].verified and found[0].entry.get("kind") == "kernel_assert", [(m.id, m.verified, m.template[:80]) for m in found[:5]]
    assert "Assertion" in found[0].matched and found[0].count >= 1
