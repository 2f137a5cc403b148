"""The binary atlas extractor (assistant/atlas/extract_binary.py) against the installed torch libraries.

Real messages are produced by running torch in a subprocess; each must be matched by an extracted template whose
literal fragments appear in it. Noise (schemas, paths, symbols) must be filtered; holes must be typed. Synthetic ELF
images check the section reader, the file attribution rules and the cubin (kernel assert) scanner hermetically.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from assistant.atlas import extract_binary as xb

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "assistant" / "atlas" / "data"
_SPEC = importlib.util.find_spec("torch")
TORCH_LIB = Path(_SPEC.origin).parent / "lib" if _SPEC and _SPEC.origin else None
needs_libs = pytest.mark.skipif(TORCH_LIB is None or not (TORCH_LIB / "libtorch_cpu.so").exists(), reason="torch's shared libraries are not installed")

HOLE_RE = re.compile(r"\u27e6(\w+)\u27e7")
KINDS = {"int", "float", "shape", "dtype", "device", "name", "any"}
_HOLE_RX = {"int": r"-?\d+", "float": r"[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|nan|inf)"}
SCHEMA_KEYS = {"id", "template", "kind", "exc_type", "source", "file", "line", "function", "op", "condition", "internal", "category",
               "category_source", "torch_version", "commit"}


def template_regex(template: str) -> re.Pattern:
    """A template as a regular expression: literal parts verbatim, ⟦int⟧/⟦float⟧ as numbers, other holes as any text."""
    parts = HOLE_RE.split(template)
    rx = "".join(re.escape(p) if i % 2 == 0 else f"(?:{_HOLE_RX.get(p, '.*?')})" for i, p in enumerate(parts))
    return re.compile(rx, re.S)


def matching(entries: list[dict], message: str) -> list[dict]:
    return [e for e in entries if e["matchable"] and template_regex(e["template"]).search(message)]


@pytest.fixture(scope="module")
def entries() -> list[dict]:
    return xb.extract(TORCH_LIB, "test", "0" * 40)


@pytest.fixture(scope="module")
def real_messages() -> dict[str, str]:
    """First lines of real PyTorch errors, raised in a fresh interpreter."""
    code = r'''
import json, torch
cases = {
    "cdist": lambda: torch.cdist(torch.randn(3), torch.randn(3, 2)),
    "mm": lambda: torch.randn(2, 3) @ torch.randn(4, 5),
    "index_select": lambda: torch.index_select(torch.randn(3), 0, torch.tensor([0.5])),
    "bernoulli": lambda: torch.empty(3).bernoulli_(2.0),
    "multinomial": lambda: torch.multinomial(torch.tensor([-1.0, 1.0]), 1),
    "view": lambda: torch.randn(2, 3).t().view(6),
    "zeros": lambda: torch.zeros("a"),
}
out = {}
for name, fn in cases.items():
    try:
        fn()
    except Exception as exc:
        out[name] = str(exc).splitlines()[0]
print(json.dumps(out))
'''
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------- real libraries


@needs_libs
@pytest.mark.parametrize("case", ["cdist", "mm", "index_select", "bernoulli", "multinomial", "view", "zeros"])
def test_real_messages_are_found(entries, real_messages, case):
    message = real_messages[case]
    hits = matching(entries, message)
    assert hits, f"no binary template matches {message!r}"
    # the match is real wording of the message, not a generic fragment
    assert max(sum(len(p) for p in HOLE_RE.split(e["template"])[::2]) for e in hits) >= 30


@needs_libs
def test_cdist_entry_is_typed_attributed_and_named(entries):
    by_t = {e["template"]: e for e in entries}
    dtype = by_t.get("cdist only supports floating-point dtypes, X1 got: \u27e6dtype\u27e7")
    assert dtype is not None
    assert dtype["file"] == "aten/src/ATen/native/Distance.cpp" and dtype["file_confidence"] == "nearby" and dtype["line"] is None
    assert dtype["op"] == "aten::cdist"
    sel = next(e for e in entries if e["template"].startswith("index_select(): Expected dtype int32 or int64 for index"))
    assert sel["op"] == "aten::index_select"


@needs_libs
def test_entries_follow_the_schema(entries):
    assert len(entries) > 5000
    ids = set()
    for e in entries:
        assert SCHEMA_KEYS <= set(e), e
        assert e["source"] == "binary" and e["kind"] in {"error", "warning", "kernel_assert"}
        assert re.fullmatch(r"binary:lib[\w.]+\.so:[0-9a-f]{12}", e["id"]), e["id"]
        assert e["id"] not in ids
        ids.add(e["id"])
        assert e["file_confidence"] in {None, "nearby", "header", "exact"}
        assert (e["file"] is None) == (e["file_confidence"] is None)
        assert e["line"] is None or e["file_confidence"] == "exact"


@needs_libs
def test_noise_is_filtered(entries):
    raw = [s for _, s in xb.rodata_strings(xb.read_rodata(TORCH_LIB / "libtorch_cpu.so")[0])]
    # the library does hold schemas, paths and symbol names; none of them may become a template
    assert any(s.startswith("add.Tensor(Tensor self, Tensor other") for s in raw)
    assert any(s.endswith("aten/src/ATen/native/Distance.cpp") for s in raw)
    templates = [e["template"] for e in entries]
    for t in (e["template"] for e in entries if e["condition"] is None):  # a condition is code, schemas included
        assert not re.search(r"\)\s*->\s*(?:Tensor|\(|int|float|bool|Scalar|\w+\[\])", t), t
        assert not re.fullmatch(r"[\w./\u27e6\u27e7-]+\.(?:cpp|h|cu|cuh|cc|hpp)", t), t
        assert not re.match(r"_Z|N\d|St\d", t), t
        assert not t.startswith(("aten::", "prim::")) or " " in t, t
        assert " " in t.strip(), t
    assert not any(t.endswith(")|deprecated") for t in templates)


@needs_libs
def test_holes_are_typed(entries):
    kinds = [k for e in entries for k in HOLE_RE.findall(e["template"])]
    assert set(kinds) <= KINDS
    for k in ("int", "dtype", "device", "shape", "name", "float"):
        assert kinds.count(k) > 5, k
    assert not any(re.search(r"%[-+ #0]*\d*(?:l|ll|z)?[dsu]\b", e["template"]) for e in entries if not e["internal"] and e["condition"] is None)
    assert not any("{}" in e["template"] for e in entries)
    assert not any(re.search("(?:\u27e6\\w+\u27e7){2}", e["template"]) for e in entries)  # adjacent holes merge


@needs_libs
def test_internal_asserts_carry_condition_file_and_line(entries):
    internal = [e for e in entries if e["internal"]]
    assert len(internal) > 500
    for e in internal[:200]:
        assert e["exc_type"] == "RuntimeError" and e["file_confidence"] == "exact" and isinstance(e["line"], int)
        assert e["condition"] and e["template"].startswith(e["condition"] + " INTERNAL ASSERT FAILED at \"\u27e6any\u27e7" + e["file"])
    msg = 'start_dim <= ndim() INTERNAL ASSERT FAILED at "../aten/src/ATen/TensorIterator.cpp":842, please report a bug to PyTorch. '
    assert matching(internal, msg)


@needs_libs
def test_messages_written_in_headers_name_the_header(entries):
    e = next(e for e in entries if e["template"].startswith("pad should be at most half of effective kernel size"))
    assert e["file"] == "aten/src/ATen/native/Pool.h" and e["file_confidence"] == "header"


# ----------------------------------------------------------------------------------------------- unit level


@pytest.mark.parametrize(("literal", "template"), [
    ("%s(): argument '%s' (position %ld) must be %s, not %s",
     "\u27e6name\u27e7(): argument '\u27e6name\u27e7' (position \u27e6int\u27e7) must be \u27e6any\u27e7, not \u27e6any\u27e7"),
    ("{}() takes {} positional arguments but {} were given", "\u27e6name\u27e7() takes \u27e6int\u27e7 positional arguments but \u27e6int\u27e7 were given"),
    ("cdist only supports floating-point dtypes, X1 got: ", "cdist only supports floating-point dtypes, X1 got: \u27e6dtype\u27e7"),
    (", but got tensor on device: ", "\u27e6any\u27e7, but got tensor on device: \u27e6device\u27e7"),
    ("Expected input of size ", "Expected input of size \u27e6shape\u27e7"),
    ("probability is %.3f%%", "probability is \u27e6float\u27e7%"),
    ("slice step cannot be zero", "slice step cannot be zero"),
])
def test_to_template(literal, template):
    assert xb.to_template(literal) == template


@pytest.mark.parametrize(("literal", "kept"), [
    ("cdist only supports non-negative p values", True),
    ("mat1 and mat2 shapes cannot be multiplied (", True),
    (" but got size ", True),
    ("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", False),
    ("aten::index_select", False),
    ("/__w/pytorch/pytorch/aten/src/ATen/native/Distance.cpp", False),
    ("_ZN2at6native5cdistERKNS_6TensorE", False),
    ("N3c1015VariableVersion14VersionCounterE", False),
    ("%sprimitive,create%s,inner_product,%s,unsupported post-ops,%s:%d\n", False),
    ("addbmm(Scalar beta, Tensor input, Scalar alpha, Tensor batch1, Tensor batch2, *, Tensor out=None)|deprecated", False),
    ("\nClones the store and returns a new object that points to the same underlying\nstore. The returned store can be used\n", False),
])
def test_is_message(literal, kept):
    assert xb.is_message(literal) is kept


def test_norm_path():
    assert xb.norm_path("/__w/pytorch/pytorch/aten/src/ATen/native/Distance.cpp") == "aten/src/ATen/native/Distance.cpp"
    assert xb.norm_path("../c10/core/TensorImpl.h") == "c10/core/TensorImpl.h"
    assert xb.norm_path("/pytorch/torch/csrc/Module.cpp") == "torch/csrc/Module.cpp"


def _elf(sections: list[tuple[str, int, bytes]]) -> bytes:
    """A minimal little-endian ELF64 image holding the given (name, sh_type, bytes) sections."""
    names = b"\0.shstrtab\0" + b"".join(n.encode() + b"\0" for n, _, _ in sections)
    body = bytearray(b"\0" * 64)
    offsets = []
    for _, _, data in sections:
        while len(body) % 64:
            body.append(0)
        offsets.append(len(body))
        body += data
    str_off = len(body)
    body += names
    while len(body) % 8:
        body.append(0)
    shoff = len(body)
    headers = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, str_off, len(names), 0, 0, 1, 0)]
    pos = len(b"\0.shstrtab\0")
    for (name, typ, data), off in zip(sections, offsets, strict=True):
        headers.append(struct.pack("<IIQQQQIIQQ", pos, typ, 2, 0, off, len(data), 0, 0, 8, 0))
        pos += len(name) + 1
    body += b"".join(headers)
    ident = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    body[:64] = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(headers), 1)
    return bytes(body)


def _aligned(strings: list[str]) -> bytes:
    out = bytearray()
    for s in strings:
        out += s.encode() + b"\0"
        while len(out) % 8:
            out.append(0)
    return bytes(out)


def test_rodata_reader_and_attribution(tmp_path):
    first = "unit_a: the first check of unit A must be positive"
    rodata = _aligned([
        first,
        "/__w/pytorch/pytorch/aten/src/ATen/native/UnitA.cpp",
        "unit_a: another message of unit A, but got ",
        "unit_a: one more message of unit A is emitted here",
        "/__w/pytorch/pytorch/aten/src/ATen/native/Helper.h",
        "helper: a message written in the header, expected ",
        "helper: a second message of the header, but got ",
        "unit_a: a later message of unit A should stay with A",
        "x INTERNAL ASSERT FAILED at \"/__w/pytorch/pytorch/aten/src/ATen/native/UnitA.cpp\":12, please report a bug to PyTorch. ",
    ]) + b"\x01\x02\x03\x04\x05\x06\x07\x08\0" + b"short one: got\0"
    lib = tmp_path / "libfake.so"
    lib.write_bytes(_elf([(".text", 1, b"\x90" * 32), (".rodata", 1, rodata)]))
    data, off = xb.read_rodata(lib)
    assert data == rodata and off > 0
    attr = {s: f for _, s, f in xb._attributed_strings(data)}
    assert attr[first] == "aten/src/ATen/native/UnitA.cpp"  # the unit's first message precedes its __FILE__
    assert attr["unit_a: another message of unit A, but got "] == "aten/src/ATen/native/UnitA.cpp"
    # the literal just before a __FILE__ literal is taken for that file's first message
    assert attr["unit_a: one more message of unit A is emitted here"] == "aten/src/ATen/native/Helper.h"
    assert attr["helper: a message written in the header, expected "] == "aten/src/ATen/native/Helper.h"
    assert attr["unit_a: a later message of unit A should stay with A"] == "aten/src/ATen/native/UnitA.cpp"
    assert attr["short one: got"] is None  # after binary data: no path run


def test_kernel_asserts_from_a_cubin(tmp_path):
    strings = [
        "/pytorch/aten/src/ATen/native/cuda/Indexing.cu",
        "srcIndex < srcSelectDimSize",
        "indexSelectLargeIndex",
        "idx >= -size && idx < size && \"index_select(): index out of bounds\"",
        "FATAL: kernel `fmha_cutlassF_f16_aligned_64x64_rf_sm80` is for sm80-sm100, but was built for sm%d\n",
        "FATAL: kernel `fmha_cutlassF_f32_aligned_64x64_rf_sm80` is for sm80-sm100, but was built for sm%d\n",
    ]
    blob = b"".join(s.encode() + b"\0" for s in strings)
    cubin = tmp_path / "libtorch_cuda.1.sm_90.cubin"
    cubin.write_bytes(_elf([(".text.kernel", 1, b"a < b\0" * 4), (".nv.global.init", 1, blob)]))
    got = xb.extract_kernel_asserts([cubin], "libtorch_cuda.so", "t", "c")
    by_t = {e["template"]: e for e in got}
    e = by_t["\u27e6any\u27e7 Assertion `srcIndex < srcSelectDimSize` failed."]
    assert e["kind"] == "kernel_assert" and e["condition"] == "srcIndex < srcSelectDimSize"
    assert e["file"] == "aten/src/ATen/native/cuda/Indexing.cu"
    runtime = ("/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1422: indexSelectLargeIndex: block: [0,0,0], thread: [0,0,0] "
               "Assertion `srcIndex < srcSelectDimSize` failed.")
    assert template_regex(e["template"]).search(runtime)
    assert not any(t.startswith("\u27e6any\u27e7 Assertion `a < b`") for t in by_t)  # code sections are not read
    fatal = [t for t in by_t if t.startswith("FATAL: kernel")]
    assert fatal == ["FATAL: kernel `\u27e6name\u27e7` is for sm80-sm100, but was built for sm\u27e6int\u27e7\n\u27e6any\u27e7"]


# -------------------------------------------------------------------------------------------- shipped data


def _load(name: str) -> list[dict]:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


SOURCES = DATA.parent / "sources"


def test_shipped_atlas_holds_the_cpu_libraries_entries() -> None:
    rows = [r for r in _load("atlas.jsonl.gz") if r.get("source") == "binary" and r.get("torch_version") == "2.13.0+cpu"]
    assert len(rows) > 1000
    assert {r["lib"] for r in rows} == {"libc10.so", "libtorch_cpu.so", "libtorch_python.so"}
    for r in rows:  # the build drops empty fields
        assert {"id", "template", "kind", "source", "torch_version", "commit"} <= set(r)
        assert set(HOLE_RE.findall(r["template"])) <= KINDS


def test_cuda_source_file_is_shipped_for_the_build() -> None:
    """The CUDA libraries' entries were extracted on the GPU machine; the build merges them from this file."""
    rows = _load_path(SOURCES / "binary-cuda-2.11.jsonl.gz")
    assert len(rows) > 1000
    assert {r["lib"] for r in rows} == {"libc10_cuda.so", "libtorch_cuda.so", "libtorch_cuda_linalg.so"}
    assert {r["torch_version"] for r in rows} == {"2.11.0+cu130"}
    assert len({r["id"] for r in rows}) == len(rows) == len({r["template"] for r in rows})
    for r in rows:
        assert SCHEMA_KEYS <= set(r) and r["source"] == "binary"
        assert re.fullmatch(r"[0-9a-f]{40}", r["commit"])


def _load_path(path):  # type: ignore[no-untyped-def]
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_cuda_data_holds_kernel_asserts():
    rows = _load_path(SOURCES / "binary-cuda-2.11.jsonl.gz")
    kernel = [r for r in rows if r["kind"] == "kernel_assert"]
    conds = {r["condition"] for r in kernel}
    assert {"srcIndex < srcSelectDimSize", "t >= 0 && t < n_classes"} <= conds
    msg = ("/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], "
           "thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed.")
    assert matching(kernel, msg)
    assert any(r["template"].startswith("Expected all tensors to be on the same device") or "CUDA" in r["template"] for r in rows)
