"""Atlas extraction on real PyTorch sources: the installed wheel's Python files and headers, the 2018 checkout.

Every PyTorch snippet is read from disk here (never retyped): the expectations are derived from the source
itself (its literals, its conditions, its function names), so the tests hold across torch versions. The few
hand-written C++/Python snippets at the end use invented messages to pin down parsing corner cases.
"""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from assistant.atlas import extract_cpp, extract_python
from assistant.atlas.categories import RULES, classify
from assistant.types import CATEGORIES

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.find_spec("torch")
TORCH = Path(list(_spec.submodule_search_locations)[0]) if _spec and _spec.submodule_search_locations else None
INCLUDE = TORCH / "include" if TORCH else None
MIRROR = Path("/work/.mirror/eellison+pytorch/repo/.git")
HOLE = re.compile(r"⟦(\w+)⟧")
# the package files the Python tests read (every __init__.py is read too, for public names)
PY_FILES = ("nn/", "optim/", "utils/data/", "functional.py", "cuda/amp/", "_refs/__init__.py", "_dynamo/symbolic_convert.py")

needs_torch = pytest.mark.skipif(TORCH is None, reason="torch is not installed")
needs_headers = pytest.mark.skipif(INCLUDE is None or not (INCLUDE / "c10" / "util" / "Exception.h").is_file(), reason="torch headers not installed")
needs_mirror = pytest.mark.skipif(not MIRROR.is_dir() or shutil.which("git") is None, reason="2018 checkout absent")


def fragments(template: str) -> list[str]:
    return [f for f in HOLE.split(template) if f and f not in extract_python.HOLE_TYPES]


@pytest.fixture(scope="module")
def package_entries() -> list[dict]:
    assert TORCH is not None
    return extract_python.extract(TORCH, torch_version="test", commit="test", only=PY_FILES)


def walk_raises(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return tree, parents


# ---------------------------------------------------------------------------------------------------------------
# Python: the installed wheel
# ---------------------------------------------------------------------------------------------------------------


@needs_torch
def test_python_fstring_raises_keep_literals_and_typed_holes(package_entries):
    """Every `raise X(f"...")` of torch/nn/functional.py: literals in order, one hole per field (merged when adjacent)."""
    rel = "torch/nn/functional.py"
    by_line = {}
    for e in package_entries:
        if e["file"] == rel:
            by_line.setdefault(e["line"], []).append(e)
    tree, _ = walk_raises(TORCH / "nn" / "functional.py")
    checked = 0
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args and isinstance(node.exc.args[0], ast.JoinedStr)):
            continue
        js = node.exc.args[0]
        if not all(isinstance(v, ast.Constant) or (isinstance(v, ast.FormattedValue) and isinstance(v.value, (ast.Name, ast.Attribute, ast.Call))) for v in js.values):
            continue
        got = by_line.get(node.lineno)
        assert got, f"no entry for {rel}:{node.lineno}"
        e = got[0]
        assert e["exc_type"] == node.exc.func.id if isinstance(node.exc.func, ast.Name) else True
        literals = [v.value for v in js.values if isinstance(v, ast.Constant) and v.value]
        assert fragments(e["template"]) == literals or "".join(fragments(e["template"])) == "".join(literals)
        n_fields = sum(1 for v in js.values if isinstance(v, ast.FormattedValue))
        assert 1 <= len(HOLE.findall(e["template"])) <= n_fields
        assert e["kind"] == "error" and e["source"] == "python" and e["internal"] is False
        assert e["op"].startswith("torch.nn.functional.")
        top = e["function"].split(".")[0]
        # the op is the function itself, or for a private helper with one public caller, that caller
        assert e["op"].endswith(top) or (top.startswith("_") and "._" not in e["op"])
        checked += 1
    assert checked >= 20


@needs_torch
def test_python_condition_is_the_enclosing_if_test(package_entries):
    rel = "torch/nn/functional.py"
    tree, parents = walk_raises(TORCH / "nn" / "functional.py")
    by_line = {e["line"]: e for e in package_entries if e["file"] == rel}
    checked = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.lineno in by_line:
            parent = parents[id(node)]
            if isinstance(parent, ast.If) and node in parent.body:
                assert by_line[node.lineno]["condition"] == ast.unparse(parent.test)
                assert by_line[node.lineno]["condition_sense"] == "failing"
                checked += 1
            elif not isinstance(parent, ast.If):
                assert by_line[node.lineno]["condition"] is None
    assert checked >= 20


@needs_torch
def test_python_format_messages(package_entries):
    """`"...".format(...)` raises: no format field is left, every literal piece kept."""
    by_key = {(e["file"], e["line"]): e for e in package_entries}
    seen = 0
    for path in sorted((TORCH / "nn").rglob("*.py")) + sorted((TORCH / "optim").rglob("*.py")) + sorted((TORCH / "utils" / "data").rglob("*.py")):
        rel = "torch/" + path.relative_to(TORCH).as_posix()
        tree, _ = walk_raises(path)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args):
                continue
            arg = node.exc.args[0]
            if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "format" and isinstance(arg.func.value, ast.Constant):
                e = by_key[(rel, node.lineno)]
                assert "{}" not in e["template"] and "{0}" not in e["template"]
                for lit in re.split(r"\{[^{}]*\}", arg.func.value.value):
                    assert lit in e["template"]
                seen += 1
    assert seen >= 1


@needs_mirror
def test_python_percent_messages_2018(tmp_path):
    """The 2018 sources still use `"..." % (...)`: no conversion is left, every literal piece kept."""
    grep = subprocess.run(["git", "--git-dir", str(MIRROR), "grep", "-l", "-E", r"raise .*%", "HEAD", "--", "torch/*.py"], capture_output=True, text=True).stdout
    rels = [line.split(":", 1)[1] for line in grep.splitlines() if ":" in line]
    pkg = tmp_path / "torch"
    for rel in rels:
        dest = tmp_path / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(git_show(rel))
    by_key = {(e["file"], e["line"]): e for e in extract_python.extract(pkg, torch_version="0.5.0a0", commit="c")}
    seen = 0
    for rel in rels:
        for node in ast.walk(ast.parse((tmp_path / rel).read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                arg = node.exc.args[0]
                if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Mod) and isinstance(arg.left, ast.Constant) and isinstance(arg.left.value, str):
                    e = by_key[(rel, node.lineno)]
                    assert not re.search(r"%[sdrf]", e["template"]), e
                    for lit in re.split(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrfgeix]", arg.left.value):
                        assert lit.replace("%%", "%") in e["template"]
                    seen += 1
    assert seen >= 3


@needs_torch
def test_python_message_variable_resolved(package_entries):
    """`msg = "..."` (or an f-string) assigned once before `raise X(msg)` in the same function: its text is the template."""
    rel = "torch/_refs/__init__.py"
    by_key = {(e["file"], e["line"]): e for e in package_entries}
    tree = ast.parse((TORCH / "_refs" / "__init__.py").read_text(encoding="utf-8"))
    checked = 0
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        assigns: dict[str, list] = {}
        for st in ast.walk(fn):
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                assigns.setdefault(st.targets[0].id, []).append(st)
            elif isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name):
                assigns.setdefault(st.target.id, []).append(st)
        for st in ast.walk(fn):
            if isinstance(st, ast.Raise) and isinstance(st.exc, ast.Call) and st.exc.args and isinstance(st.exc.args[0], ast.Name):
                a = assigns.get(st.exc.args[0].id, [])
                if len(a) == 1 and isinstance(a[0], ast.Assign) and a[0].lineno < st.lineno:
                    value = a[0].value
                    e = by_key[(rel, st.lineno)]
                    if isinstance(value, ast.Constant):
                        assert e["template"] == value.value
                    elif isinstance(value, ast.JoinedStr):
                        lits = [v.value for v in value.values if isinstance(v, ast.Constant)]
                        assert "".join(fragments(e["template"])) == "".join(lits)
                    else:
                        continue
                    checked += 1
    assert checked >= 5


@needs_torch
def test_python_public_ops(package_entries):
    """Public names come from the package's re-exports (torch.cdist, torch.utils.data.DataLoader.__init__)."""
    ops = {(e["file"], e["function"]): e["op"] for e in package_entries}
    assert ops.get(("torch/functional.py", "cdist")) == "torch.cdist"
    assert ops.get(("torch/utils/data/dataloader.py", "DataLoader.__init__")) == "torch.utils.data.DataLoader.__init__"
    conv = {op for (f, fn), op in ops.items() if f == "torch/nn/modules/conv.py" and fn and fn.startswith("Conv")}
    assert conv and all(op.startswith("torch.nn.Conv") for op in conv)


@needs_torch
def test_python_warnings_and_checks(package_entries):
    """warnings.warn(..., FutureWarning) is a warning of that type; torch._check(cond, lambda: msg) keeps cond as required."""
    warn_types = set()
    for path in [TORCH / "nn" / "modules" / "module.py", TORCH / "optim" / "lr_scheduler.py"]:
        rel = "torch/" + path.relative_to(TORCH).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        by_line = {e["line"]: e for e in package_entries if e["file"] == rel}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "warnings.warn" and len(node.args) >= 2 and isinstance(node.args[1], ast.Name):
                e = by_line[node.lineno]
                assert e["kind"] == "warning" and e["exc_type"] == node.args[1].id
                warn_types.add(e["exc_type"])
    assert warn_types
    path = TORCH / "_refs" / "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    by_line = {e["line"]: e for e in package_entries if e["file"] == "torch/_refs/__init__.py"}
    checked = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch._check" and len(node.args) == 2 and isinstance(node.args[1], ast.Lambda):
            body = node.args[1].body
            if isinstance(body, (ast.Constant, ast.JoinedStr)):
                e = by_line[node.lineno]
                assert e["condition"] == ast.unparse(node.args[0]) and e["condition_sense"] == "required"
                assert e["exc_type"] == "RuntimeError"
                checked += 1
    assert checked >= 3


@needs_torch
def test_python_graph_breaks(package_entries):
    """Dynamo's unimplemented(gb_type=..., explanation=...) calls read as Unsupported with the gb_type first."""
    gbs = [e for e in package_entries if e["exc_type"] == "Unsupported" and e["file"].startswith("torch/_dynamo/")]
    assert len(gbs) >= 20
    path = TORCH / "_dynamo" / "symbolic_convert.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    by_line = {e["line"]: e for e in gbs if e["file"] == "torch/_dynamo/symbolic_convert.py"}
    checked = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "unimplemented":
            kw = {k.arg: k.value for k in node.keywords}
            if isinstance(kw.get("gb_type"), ast.Constant):
                e = by_line[node.lineno]
                assert e["template"].startswith(kw["gb_type"].value + "\n  Explanation: ")
                checked += 1
    assert checked >= 5


# ---------------------------------------------------------------------------------------------------------------
# C++: the wheel's headers
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def header_entries() -> list[dict]:
    return extract_cpp.extract_tree(INCLUDE, subdirs=("ATen", "c10", "torch"), rel_prefix="torch/include/", source_of=lambda _p: "header", legacy=False)


def _macro_calls(text: str, name: str):
    """(line, args) of every call of ``name`` in a header, read with the module's own splitter."""
    clean, skel = extract_cpp.mask(text)
    for m in re.finditer(rf"(?<![\w:]){name}\s*\(", skel):
        if re.search(r"#\s*define\s+$", skel[max(0, m.start() - 40) : m.start()]):
            continue
        close = extract_cpp._matching_paren(skel, m.end() - 1)
        args_text = clean[m.end() : close]
        _, args_skel = extract_cpp.mask(args_text)
        yield text.count("\n", 0, m.start()) + 1, [args_text[a:b] for a, b in extract_cpp.split_top(args_text, args_skel)]


@needs_headers
def test_header_torch_check_literals_and_conditions(header_entries):
    """TORCH_CHECK in ATen/native headers: the condition is the first argument, each literal message part a fragment."""
    by_key = {}
    for e in header_entries:
        by_key.setdefault((e["file"], e["line"]), []).append(e)
    checked = 0
    for path in sorted((INCLUDE / "ATen" / "native").glob("*.h")):
        rel = "torch/include/" + path.relative_to(INCLUDE).as_posix()
        text = path.read_text(encoding="utf-8")
        for line, args in _macro_calls(text, "TORCH_CHECK"):
            lits = [extract_cpp._literal_only(a) for a in args[1:]]
            if len(args) < 2 or not any(lits) or "#" in "".join(args) or (rel, line) not in by_key:
                continue
            e = by_key[(rel, line)][0]
            if args[0].strip() not in ("false", "0"):
                assert e["condition"] == extract_cpp.collapse_ws(args[0])[: extract_python.MAX_CONDITION]
                assert e["condition_sense"] == "required"
            assert e["exc_type"] == "RuntimeError" and e["kind"] == "error" and not e["internal"]
            joined = "".join(fragments(e["template"]))
            for lit in lits:
                if lit:
                    assert lit in joined or lit.strip() in joined
            checked += 1
    assert checked >= 50


@needs_headers
def test_header_check_forms_exception_types(header_entries):
    want = {"TORCH_CHECK_VALUE": "ValueError", "TORCH_CHECK_INDEX": "IndexError", "TORCH_CHECK_TYPE": "TypeError", "TORCH_CHECK_NOT_IMPLEMENTED": "NotImplementedError"}
    by_key = {(e["file"], e["line"]): e for e in header_entries}
    found = set()
    for path in sorted(INCLUDE.rglob("*.h")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "TORCH_CHECK_" not in text:
            continue
        rel = "torch/include/" + path.relative_to(INCLUDE).as_posix()
        for name, exc in want.items():
            for line, _args in _macro_calls(text, name):
                e = by_key.get((rel, line))
                if e is not None and not e.get("via_macro"):
                    assert e["exc_type"] == exc, (rel, line, e)
                    found.add(name)
    assert found == set(want)


@needs_headers
def test_header_internal_assert_and_holes(header_entries):
    internal = [e for e in header_entries if e["internal"]]
    assert len(internal) > 100
    for e in internal[:200]:
        assert e["condition"] is None or e["template"].startswith(e["condition"][:20]) or e["condition"] in ("false", "0") or "⟦" in e["template"][:40]
    # hole types from c10::str pieces: .sizes() -> shape, .dim() -> int, scalar_type() -> dtype, device() -> device
    by_key = {(e["file"], e["line"]): e for e in header_entries if not e.get("via_macro")}
    kinds = set()
    for path in sorted((INCLUDE / "ATen" / "native").glob("*.h")):
        rel = "torch/include/" + path.relative_to(INCLUDE).as_posix()
        for line, args in _macro_calls(path.read_text(encoding="utf-8"), "TORCH_CHECK"):
            for a in args[1:]:
                a = a.strip()
                for suffix, hole in ((".sizes()", "shape"), (".dim()", "int"), (".scalar_type()", "dtype"), (".device()", "device")):
                    if a.endswith(suffix) and (rel, line) in by_key:
                        assert f"⟦{hole}⟧" in by_key[(rel, line)]["template"] or "⟦any⟧" in by_key[(rel, line)]["template"]
                        kinds.add(hole)
    assert kinds >= {"shape", "int", "dtype"}


@needs_headers
def test_header_dispatch_kernel_assert_warn_and_macros(header_entries):
    disp = [e for e in header_entries if e["condition"] and e["condition"].startswith("AT_DISPATCH")]
    assert disp and all(e["exc_type"] == "NotImplementedError" and e["template"].endswith("⟦dtype⟧'") for e in disp)
    asserts = [e for e in header_entries if e["kind"] == "kernel_assert"]
    assert asserts
    for e in asserts:
        if e["template"].startswith("Assertion `"):
            assert e["template"].endswith("` failed.") and e["exc_type"] is None
    warns = [e for e in header_entries if e["kind"] == "warning"]
    assert warns and {e["exc_type"] for e in warns} >= {"UserWarning"}
    # TORCH_CHECK inside a #define body: the macro is the function, its stringized parameter a ⟦name⟧ hole
    path = INCLUDE / "ATen" / "native" / "transformers" / "cuda" / "mem_eff_attention" / "gemm_kernel_utils.h"
    if path.is_file():
        rel = "torch/include/" + path.relative_to(INCLUDE).as_posix()
        text = path.read_text(encoding="utf-8")
        macro = re.search(r"#define (\w+)\((\w+)\)[^\n]*\\\n\s*TORCH_CHECK\(", text)
        assert macro
        mine = [e for e in header_entries if e["file"] == rel and e["function"] == macro.group(1)]
        assert mine and any(e["template"].startswith("⟦name⟧") for e in mine)
        assert all(macro.group(2) not in e["template"] for e in mine)  # the parameter never leaks into a template


@needs_torch
def test_op_index_from_schemas():
    import torch

    ops = extract_cpp.OpIndex(s.name for s in torch._C._jit_get_all_schemas())
    assert ops("at::native::cdist_impl", "x", "f.h") == "aten::cdist"
    assert ops("at::native::check_max_pool1d", "x", "f.h") == "aten::max_pool1d"
    assert ops("at::native::Foo::set", "x", "f.h") is None  # a method's name is not an op
    assert ops(None, "index_select(): something", "f.h") == "aten::index_select"


# ---------------------------------------------------------------------------------------------------------------
# The 2018 checkout
# ---------------------------------------------------------------------------------------------------------------


def git_show(path: str) -> str:
    return subprocess.run(["git", "--git-dir", str(MIRROR), "show", f"HEAD:{path}"], check=True, capture_output=True, text=True).stdout


@needs_mirror
def test_2018_aten_native_checks_and_dispatch():
    rel = "aten/src/ATen/native/TensorShape.cpp"
    text = git_show(rel)
    ex = extract_cpp.CppExtractor(legacy=True)
    entries = ex.extract_text(text, rel, "cpp")
    by_line = {}
    for e in entries:
        by_line.setdefault(e["line"], []).append(e)
    checked = 0
    for line, args in _macro_calls(text, "AT_CHECK"):
        lits = [extract_cpp._literal_only(a) for a in args[1:]]
        if not any(lits):
            continue
        e = by_line[line][0]
        assert e["condition"] == extract_cpp.collapse_ws(args[0]) and e["exc_type"] == "RuntimeError"
        for lit in lits:
            if lit:
                assert lit in e["template"]
        checked += 1
    assert checked >= 5
    assert all(e["function"] and e["function"].startswith("at::native::") for e in entries if e["line"] > 40)


@needs_mirror
def test_2018_th_argcheck_and_kernel_assert():
    rel = "aten/src/THC/generic/THCTensor.cpp"
    text = git_show(rel)
    entries = extract_cpp.CppExtractor(legacy=True).extract_text(text, rel, "cpp")
    by_line = {e["line"]: e for e in entries}
    checked = 0
    for line, args in _macro_calls(text, "THArgCheck"):
        fmt = extract_cpp._literal_only(args[2]) if len(args) > 2 else None
        if fmt and "%" not in fmt:
            e = by_line[line]
            assert e["template"].endswith(fmt + " at ⟦any⟧:⟦int⟧")
            assert e["template"].startswith(f"invalid argument {args[1].strip()}: ")
            assert e["condition"] == extract_cpp.collapse_ws(args[0])
            checked += 1
    assert checked >= 5
    rel = "aten/src/THCUNN/ClassNLLCriterion.cu"
    text = git_show(rel)
    entries = extract_cpp.CppExtractor(legacy=True).extract_text(text, rel, "cuda")
    asserts = [e for e in entries if e["kind"] == "kernel_assert"]
    conds = [extract_cpp.collapse_ws(args[0]) for _, args in _macro_calls(text, "assert")]
    assert asserts and {e["condition"] for e in asserts} == set(conds)
    assert all(e["template"] == f"Assertion `{e['condition']}` failed." for e in asserts)


@needs_mirror
def test_2018_wrapper_macros_expand_at_call_sites():
    init = git_show("aten/src/THNN/init.cpp")
    ex = extract_cpp.CppExtractor(legacy=True)
    wrappers = ex.find_wrappers(init, "aten/src/THNN/init.cpp")
    assert "THNN_CHECK_DIM_SIZE" in wrappers
    rel = "aten/src/THNN/generic/SpatialConvolutionMM.c"
    text = git_show(rel)
    ex2 = extract_cpp.CppExtractor(legacy=True, wrappers={k: [v] for k, v in wrappers.items()})
    entries = [e for e in ex2.extract_text(text, rel, "cpp") if e.get("via_macro") == "THNN_CHECK_DIM_SIZE"]
    assert entries
    calls = list(_macro_calls(text, "THNN_CHECK_DIM_SIZE"))
    assert {e["line"] for e in entries} == {line for line, _ in calls}
    for e in entries:  # the tensor's name from the call site is in the message (it was #T in the macro)
        args = dict(calls)[e["line"]]
        assert args[0].strip() in e["template"] and e["function"].startswith("THNN_(")


# ---------------------------------------------------------------------------------------------------------------
# Parsing corner cases (invented messages)
# ---------------------------------------------------------------------------------------------------------------

_CPP = r'''
namespace at { namespace native {
Tensor frobnicate_cpu(const Tensor& self, int64_t k) {
  TORCH_CHECK(self.dim() == 2,
      "frobnicate expects a 2-D input "
      "but got ", self.dim(), "-D with sizes ", self.sizes(), " on ", self.device());
  std::ostringstream ss;
  ss << "wobble k=" << k << " not allowed for dtype " << self.scalar_type();
  TORCH_CHECK(false, ss.str());
  std::string err = c10::str("quux failed for ", k, " elements");
  if (k > 3) {
    TORCH_CHECK_INDEX(false, err);
  }
  auto f = [&](int x) { TORCH_WARN_ONCE("lambda warning text here ", x); };
  C10_THROW_ERROR(LinAlgError, c10::str("matrix is singular at ", k));
  TORCH_CHECK(k >= 0);
  return self;
}
#define CHECK_GIZMO(t) TORCH_CHECK(t.is_gizmo(), #t " must be a gizmo tensor")
}}
'''


def test_cpp_parsing_corner_cases():
    ex = extract_cpp.CppExtractor(op_of=extract_cpp.OpIndex(["aten::frobnicate"]))
    got = ex.extract_text(_CPP, "aten/src/ATen/native/Frob.cpp", "cpp")
    t = {e["template"]: e for e in got}
    assert "frobnicate expects a 2-D input but got ⟦int⟧-D with sizes ⟦shape⟧ on ⟦device⟧" in t
    e = t["frobnicate expects a 2-D input but got ⟦int⟧-D with sizes ⟦shape⟧ on ⟦device⟧"]
    assert e["condition"] == "self.dim() == 2" and e["function"] == "at::native::frobnicate_cpu" and e["op"] == "aten::frobnicate" and e["line"] == 4
    assert "wobble k=⟦int⟧ not allowed for dtype ⟦dtype⟧" in t
    q = t["quux failed for ⟦int⟧ elements"]
    assert q["exc_type"] == "IndexError" and q["condition"] == "k > 3" and q["condition_sense"] == "failing"
    w = t["lambda warning text here ⟦any⟧"]
    assert w["kind"] == "warning" and w["function"] == "at::native::frobnicate_cpu"
    assert t["matrix is singular at ⟦int⟧"]["exc_type"] == "torch.linalg.LinAlgError"
    default = [x for x in got if x["condition"] == "k >= 0"][0]
    assert default["template"].startswith("Expected k >= 0 to be true, but got false.")
    g = t["⟦name⟧ must be a gizmo tensor"]
    assert g["function"] == "CHECK_GIZMO"


def test_cpp_mask_and_literals():
    text = 'x = "a // not a comment \\" still"; // real comment "q"\n/* block "z" */ y = \'"\';'
    clean, skel = extract_cpp.mask(text)
    assert len(clean) == len(text) == len(skel)
    assert "real comment" not in clean and "block" not in clean and "not a comment" in clean and "not a comment" not in skel
    assert extract_cpp._literal_only('"ab\\n" "c\\x41"') == "ab\ncA"
    assert extract_cpp.collapse_ws("a  <\n   b &&  \"x  y\"") == 'a < b && "x  y"'


_PY = '''
import warnings
class Frob:
    def run(self, x, k):
        if x.dim() != 2:
            raise ValueError(f"run wants a matrix, got {x.dim()} dims and shape {x.shape} dtype {x.dtype}")
        msg = "k must be positive"
        if k < 0:
            msg += f", got {k}"
        else:
            raise KeyError("no such frob key")
        raise RuntimeError(msg)

def helper(name):
    err = ValueError("the helper %s failed after %d tries" % (name, 3))
    raise err

def warn_it(n, what):
    warnings.warn("thing {} is deprecated".format(what), FutureWarning)
    assert n > 0, "n must be positive here"
'''


def test_python_parsing_corner_cases(tmp_path):
    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .frob import Frob\n")
    (pkg / "frob.py").write_text(_PY)
    got = extract_python.extract(pkg, torch_version="t", commit="c")
    t = {e["template"]: e for e in got}
    e = t["run wants a matrix, got ⟦int⟧ dims and shape ⟦shape⟧ dtype ⟦dtype⟧"]
    assert e["exc_type"] == "ValueError" and e["condition"] == "x.dim() != 2" and e["op"] == "torch.Frob.run" and e["function"] == "Frob.run"
    assert "k must be positive⟦any⟧" in t  # the += in a branch is optional text
    assert t["'no such frob key'"]["condition"] == "not (k < 0)"
    assert t["the helper ⟦name⟧ failed after ⟦int⟧ tries"]["exc_type"] == "ValueError"
    w = t["thing ⟦any⟧ is deprecated"]
    assert w["kind"] == "warning" and w["exc_type"] == "FutureWarning" and w["op"] == "torch.frob.warn_it"
    a = t["n must be positive here"]
    assert a["exc_type"] == "AssertionError" and a["condition"] == "n > 0" and a["condition_sense"] == "required"


def test_templates_merge_holes_and_matchable():
    H = extract_python.Hole
    assert extract_python.render(["a", H("int"), H("int"), "b"]) == "a⟦int⟧b"
    assert extract_python.render(["a", H("int"), H("shape"), "b"]) == "a⟦any⟧b"
    assert extract_python.matchable("short ⟦int⟧ text") is False
    assert extract_python.matchable("a fragment long enough ⟦int⟧") is True


def test_category_rules_use_the_taxonomy():
    assert {r.category for r in RULES} <= set(CATEGORIES)
    assert classify({"template": "Assertion `t >= 0` failed.", "kind": "kernel_assert"}) == "device_side_assert"
    assert classify({"template": "x ⟦any⟧ INTERNAL ASSERT FAILED", "internal": True}) is None
    assert classify({"template": "Expected a.size(0) == b.size(0) to be true, but got false.  (Could ...)", "kind": "error", "file": "aten/x.h"}) is None
    assert classify({"template": "frob failed", "kind": "error", "file": "torch/utils/data/sampler.py"}) == "dataloader_error"
    assert classify({"template": "frob failed", "kind": "error", "exc_type": "IndexError"}) == "index_error"


# ---------------------------------------------------------------------------------------------------------------
# End to end: the build script on a small checkout
# ---------------------------------------------------------------------------------------------------------------


@needs_headers
def test_build_script_end_to_end(tmp_path):
    ck = tmp_path / "pytorch"
    native = ck / "aten" / "src" / "ATen" / "native"
    native.mkdir(parents=True)
    src = INCLUDE / "ATen" / "native" / "ConvUtils.h"
    shutil.copy(src, native / "ConvUtils.h")
    shutil.copy(src, native / "ConvUtilsCopy.h")  # identical templates: de-duplicated into `also`
    (ck / "torch" / "nn").mkdir(parents=True)
    (ck / "torch" / "__init__.py").write_text("")
    (ck / "torch" / "nn" / "__init__.py").write_text("")
    shutil.copy(TORCH / "nn" / "functional.py", ck / "torch" / "nn" / "functional.py")
    (ck / "version.txt").write_text("9.9.9\n")
    out = tmp_path / "data"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_atlas.py"), str(ck), "--no-package", "--commit", "abc123", "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in gzip.open(out / "atlas.jsonl.gz", "rt", encoding="utf-8")]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["templates"] == len(rows) > 50
    assert set(manifest["per_source"]) == {"cpp", "python"}
    assert manifest["templates_per_version"] == {"9.9.9": len(rows)}
    assert manifest["sources"]["cpp@checkout"]["commit"] == "abc123"
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids))
    assert all(r["torch_version"] == "9.9.9" and r["commit"] == "abc123" for r in rows)
    dup = [r for r in rows if r["source"] == "cpp" and r.get("also")]
    assert dup and all(a["file"].endswith("ConvUtilsCopy.h") for r in dup for a in r["also"])
    cats = [r for r in rows if r["category"]]
    assert cats and all(r["category_source"] == "hand" and r["category"] in CATEGORIES for r in cats)
    assert all(r["category_source"] is None for r in rows if not r["category"])
    required = {"id", "template", "kind", "exc_type", "source", "file", "line", "function", "op", "condition", "internal", "category", "category_source", "torch_version", "commit"}
    assert all(required <= set(r) for r in rows)
