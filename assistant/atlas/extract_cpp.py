"""Atlas entries from PyTorch's C++ and CUDA source text (a checkout, or the headers shipped in the wheel).

A lightweight reader, not a compiler: comments are blanked, string literals decoded, macro calls found by
name and their arguments split at top-level commas, scopes (namespaces, classes, functions, lambdas)
followed by brace matching. It reads:

- ``TORCH_CHECK`` and its ``_VALUE/_INDEX/_TYPE/_NOT_IMPLEMENTED/_LINALG/_WITH/_ARG/_EQ..`` forms,
  ``AT_ERROR``, ``C10_THROW_ERROR``, ``TORCH_INTERNAL_ASSERT`` (internal), ``AT_ASSERT(M)``,
  the 2018 forms (``AT_CHECK``, ``THArgCheck``, ``THError``, ``THAssert``, ``JIT_ASSERT``),
  ``throw std::runtime_error``/``TypeError``/``py::value_error``…, ``PyErr_SetString``/``PyErr_Format``;
- ``AT_DISPATCH_*`` dispatch errors (``"name" not implemented for 'Half'``);
- ``CUDA_KERNEL_ASSERT``/``_MSG``/``_PRINTF`` and ``assert`` in CUDA files (kind ``kernel_assert``: the
  template is the ``Assertion `cond` failed.`` line the user sees);
- ``TORCH_WARN``/``TORCH_WARN_ONCE``/``TORCH_WARN_DEPRECATION``/``AT_WARN``/``PyErr_WarnEx`` (kind ``warning``).

Calls inside ``#define`` bodies are read with the macro's parameters as holes, and wrapper macros whose body
raises (``THNN_CHECK_SHAPE``, ``C10D_NCCL_CHECK``…) are also expanded at each call site.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from assistant.atlas.extract_python import (
    MAX_CONDITION,
    Hole,
    Parts,
    has_text,
    hole_type_for_text,
    matchable,
    normalize,
    render,
)

CPP_EXTS = {".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".cu", ".cuh", ".mm", ".hip"}
CUDA_EXTS = {".cu", ".cuh"}
SKIP_DIR_NAMES = {"test", "tests", "third_party", "benchmarks", "benchmark", "googletest", "gtest", "experimental_test", "doc", "docs"}

CHECK_DEFAULT = (
    "Expected {cond} to be true, but got false.  (Could this error message be improved?  "
    "If so, please report an enhancement request to PyTorch.)"
)

# c10 error classes (C10_THROW_ERROR / TORCH_CHECK_WITH) -> the Python exception a user sees
C10_ERRORS = {
    "Error": "RuntimeError",
    "ErrorAlwaysShowCppStacktrace": "RuntimeError",
    "IndexError": "IndexError",
    "ValueError": "ValueError",
    "TypeError": "TypeError",
    "NotImplementedError": "NotImplementedError",
    "BufferError": "BufferError",
    "LinAlgError": "torch.linalg.LinAlgError",
    "OutOfMemoryError": "torch.OutOfMemoryError",
    "AcceleratorError": "torch.AcceleratorError",
    "EnforceFiniteError": "RuntimeError",
    "OnnxfiBackendSystemError": "RuntimeError",
    "DistError": "torch.distributed.DistError",
    "DistBackendError": "torch.distributed.DistBackendError",
    "DistStoreError": "torch.distributed.DistStoreError",
    "DistNetworkError": "torch.distributed.DistNetworkError",
    "DistQueueEmptyError": "torch.distributed.DistQueueEmptyError",
    "SyntaxError": "SyntaxError",
}
# `throw X(...)`: std exceptions (pybind11 translation), torch/csrc/Exceptions.h printf-style errors, py:: errors
THROW_TYPES = {
    "std::runtime_error": ("RuntimeError", "str"),
    "std::invalid_argument": ("ValueError", "str"),
    "std::domain_error": ("ValueError", "str"),
    "std::length_error": ("ValueError", "str"),
    "std::range_error": ("ValueError", "str"),
    "std::out_of_range": ("IndexError", "str"),
    "std::overflow_error": ("OverflowError", "str"),
    "std::logic_error": ("RuntimeError", "str"),
    "std::system_error": ("RuntimeError", "system_error"),
    "py::value_error": ("ValueError", "str"),
    "py::type_error": ("TypeError", "str"),
    "py::index_error": ("IndexError", "str"),
    "py::key_error": ("KeyError", "str"),
    "py::attribute_error": ("AttributeError", "str"),
    "py::buffer_error": ("BufferError", "str"),
    "py::import_error": ("ImportError", "str"),
    "pybind11::value_error": ("ValueError", "str"),
    "pybind11::type_error": ("TypeError", "str"),
    "pybind11::index_error": ("IndexError", "str"),
    "TypeError": ("TypeError", "printf"),
    "ValueError": ("ValueError", "printf"),
    "IndexError": ("IndexError", "printf"),
    "NotImplementedError": ("NotImplementedError", "printf"),
    "AttributeError": ("AttributeError", "printf"),
    "torch::TypeError": ("TypeError", "printf"),
    "torch::ValueError": ("ValueError", "printf"),
    "torch::IndexError": ("IndexError", "printf"),
    "torch::NotImplementedError": ("NotImplementedError", "printf"),
    "torch::AttributeError": ("AttributeError", "printf"),
    "c10::Error": ("RuntimeError", "c10error"),
    "c10::IndexError": ("IndexError", "c10error"),
    "c10::ValueError": ("ValueError", "c10error"),
    "c10::TypeError": ("TypeError", "c10error"),
    "c10::NotImplementedError": ("NotImplementedError", "c10error"),
}
PYEXC = {
    "PyExc_RuntimeError": "RuntimeError",
    "PyExc_TypeError": "TypeError",
    "PyExc_ValueError": "ValueError",
    "PyExc_IndexError": "IndexError",
    "PyExc_KeyError": "KeyError",
    "PyExc_AttributeError": "AttributeError",
    "PyExc_NotImplementedError": "NotImplementedError",
    "PyExc_ImportError": "ImportError",
    "PyExc_SystemError": "SystemError",
    "PyExc_OverflowError": "OverflowError",
    "PyExc_MemoryError": "MemoryError",
    "PyExc_BufferError": "BufferError",
    "PyExc_StopIteration": "StopIteration",
    "PyExc_UserWarning": "UserWarning",
    "PyExc_DeprecationWarning": "DeprecationWarning",
    "PyExc_FutureWarning": "FutureWarning",
    "PyExc_RuntimeWarning": "RuntimeWarning",
}


@dataclass(frozen=True)
class Spec:
    """How one macro or call reads: where the condition and message are, and what wraps the message."""

    kind: str = "error"  # error | warning | kernel_assert
    exc_type: str | None = "RuntimeError"
    cond: int | None = None  # index of the condition argument
    msg: int | None = 1  # index of the first message argument (None: no message)
    style: str = "str"  # str (c10::str pieces) | printf | single | assert | dispatch | check_op
    internal: bool = False
    default: str | None = None  # message when no message argument is given ("{cond}" filled in)
    prefix: str = ""
    suffix: str = ""
    exc_arg: int | None = None  # index of an argument naming the error class (C10_THROW_ERROR, PyErr_*)


def _check(exc: str | None) -> Spec:
    return Spec(exc_type=exc, cond=0, msg=1, default=CHECK_DEFAULT)


MODERN_SPECS: dict[str, Spec] = {
    "TORCH_CHECK": _check("RuntimeError"),
    "STD_TORCH_CHECK": _check("RuntimeError"),
    "TORCH_CHECK_IF_NOT_ON_CUDA": _check("RuntimeError"),
    "TORCH_CHECK_ALWAYS_SHOW_CPP_STACKTRACE": _check("RuntimeError"),
    "TORCH_CHECK_VALUE": _check("ValueError"),
    "TORCH_CHECK_INDEX": _check("IndexError"),
    "TORCH_CHECK_TYPE": _check("TypeError"),
    "TORCH_CHECK_NOT_IMPLEMENTED": _check("NotImplementedError"),
    "TORCH_CHECK_LINALG": _check("torch.linalg.LinAlgError"),
    "TORCH_CHECK_BUFFER": _check("BufferError"),
    "TORCH_CHECK_WITH": Spec(exc_arg=0, cond=1, msg=2, default=CHECK_DEFAULT),
    "TORCH_CHECK_WITH_MSG": Spec(exc_arg=0, cond=1, msg=3, default=CHECK_DEFAULT),
    "TORCH_CHECK_ARG": Spec(cond=0, msg=2, prefix="invalid argument {arg1}: "),
    "TORCH_CHECK_TENSOR_ALL": _check("RuntimeError"),
    "TORCH_CHECK_EQ": Spec(cond=None, msg=None, style="check_op", suffix="=="),
    "TORCH_CHECK_NE": Spec(cond=None, msg=None, style="check_op", suffix="!="),
    "TORCH_CHECK_LE": Spec(cond=None, msg=None, style="check_op", suffix="<="),
    "TORCH_CHECK_LT": Spec(cond=None, msg=None, style="check_op", suffix="<"),
    "TORCH_CHECK_GE": Spec(cond=None, msg=None, style="check_op", suffix=">="),
    "TORCH_CHECK_GT": Spec(cond=None, msg=None, style="check_op", suffix=">"),
    "TORCH_INTERNAL_ASSERT": Spec(
        cond=0, msg=1, internal=True, prefix='{cond} INTERNAL ASSERT FAILED at "⟦any⟧":⟦int⟧, please report a bug to PyTorch. ', default=""
    ),
    "AT_ASSERT": Spec(cond=0, msg=1, internal=True, prefix='{cond} INTERNAL ASSERT FAILED at "⟦any⟧":⟦int⟧, please report a bug to PyTorch. ', default=""),
    "AT_ASSERTM": Spec(cond=0, msg=1, internal=True, prefix='{cond} INTERNAL ASSERT FAILED at "⟦any⟧":⟦int⟧, please report a bug to PyTorch. ', default=""),
    "AT_CHECK": _check("RuntimeError"),
    "AT_ERROR": Spec(cond=None, msg=0),
    "C10_THROW_ERROR": Spec(exc_arg=0, msg=1),
    "C10_BUILD_ERROR": Spec(exc_arg=0, msg=1),
    "TORCH_WARN": Spec(kind="warning", exc_type="UserWarning", msg=0),
    "TORCH_WARN_ONCE": Spec(kind="warning", exc_type="UserWarning", msg=0),
    "TORCH_WARN_DEPRECATION": Spec(kind="warning", exc_type="DeprecationWarning", msg=0),
    "AT_WARN": Spec(kind="warning", exc_type="UserWarning", msg=0),
    "CUDA_KERNEL_ASSERT": Spec(kind="kernel_assert", exc_type=None, cond=0, msg=None, style="assert"),
    "CUDA_KERNEL_ASSERT2": Spec(kind="kernel_assert", exc_type=None, cond=0, msg=None, style="assert"),
    "CUDA_KERNEL_ASSERT_MSG": Spec(kind="kernel_assert", exc_type=None, cond=0, msg=1, style="assert_msg"),
    "CUDA_KERNEL_ASSERT_PRINTF": Spec(kind="kernel_assert", exc_type=None, cond=0, msg=1, style="assert_printf"),
    "PyErr_SetString": Spec(exc_arg=0, msg=1, style="single"),
    "PyErr_Format": Spec(exc_arg=0, msg=1, style="printf"),
    "PyErr_WarnEx": Spec(kind="warning", exc_arg=0, msg=1, style="single"),
    "THPUtils_setError": Spec(msg=0, style="printf"),
}

# The 2018 forms (ATen's Error.h, TH/THC, torch/csrc/assertions.h): messages end in " at <file>:<line>".
LEGACY_SPECS: dict[str, Spec] = {
    **{k: v for k, v in MODERN_SPECS.items() if k.startswith(("CUDA_KERNEL", "PyErr", "THPUtils", "TORCH_WARN"))},
    "AT_ERROR": Spec(cond=None, msg=0),
    "AT_WARN": Spec(kind="warning", exc_type="UserWarning", msg=0),
    "AT_CHECK": Spec(cond=0, msg=1),
    "AT_ASSERT": Spec(cond=0, msg=None, internal=True, default="{cond} ASSERT FAILED at ⟦any⟧:⟦int⟧, please report a bug to PyTorch."),
    "AT_ASSERTM": Spec(cond=0, msg=1, internal=True, prefix="{cond} ASSERT FAILED at ⟦any⟧:⟦int⟧, please report a bug to PyTorch. "),
    "THArgCheck": Spec(cond=0, msg=2, style="printf", prefix="invalid argument {arg1}: ", suffix=" at ⟦any⟧:⟦int⟧"),
    "THArgCheckWithCleanup": Spec(cond=0, msg=3, style="printf", prefix="invalid argument {arg2}: ", suffix=" at ⟦any⟧:⟦int⟧"),
    "THError": Spec(msg=0, style="printf", suffix=" at ⟦any⟧:⟦int⟧"),
    "THAssert": Spec(cond=0, msg=None, internal=True, default="Assertion `{cond}' failed.  at ⟦any⟧:⟦int⟧"),
    "THAssertMsg": Spec(cond=0, msg=1, style="printf", internal=True, prefix="Assertion `{cond}' failed. ", suffix=" at ⟦any⟧:⟦int⟧"),
    "TORCH_ASSERT": Spec(cond=0, msg=None, internal=True, default="⟦any⟧:⟦int⟧: ⟦name⟧: Assertion `{cond}` failed."),
    "JIT_ASSERT": Spec(cond=0, msg=None, internal=True, default="⟦any⟧:⟦int⟧: ⟦name⟧: Assertion `{cond}` failed."),
    "TORCH_ASSERTM": Spec(cond=0, msg=1, style="printf", internal=True, prefix="⟦any⟧:⟦int⟧: ⟦name⟧: Assertion `{cond}` failed: "),
    "JIT_ASSERTM": Spec(cond=0, msg=1, style="printf", internal=True, prefix="⟦any⟧:⟦int⟧: ⟦name⟧: Assertion `{cond}` failed: "),
    "TORCH_CHECK": _check("RuntimeError"),
}

DISPATCH_RE = re.compile(r"^AT_DISPATCH_(?!CASE)\w+$")
_IDENT = r"[A-Za-z_]\w*"
_KEYWORDS = {
    "if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignof", "alignas", "static_assert",
    "defined", "noexcept", "throw", "new", "delete", "operator", "__attribute__", "__declspec", "typeid", "else", "do", "try",
    "case", "using", "typedef", "template", "typename", "static_cast", "reinterpret_cast", "const_cast", "dynamic_cast",
}


# ---------------------------------------------------------------------------------------------------------------
# Lexing helpers
# ---------------------------------------------------------------------------------------------------------------


_MASK_RE = re.compile(
    r"//(?:[^\n\\]|\\.|\\\n)*"
    r"|/\*.*?(?:\*/|\Z)"
    r'|(?<![\w])(?:u8|[uUL])?R"(?P<d>[^()\\ \n]{0,16})\(.*?\)(?P=d)"'
    r'|(?<![\w])(?:u8|[uUL])?"(?:[^"\\\n]|\\.|\\\n)*"?'
    r"|(?<![\w])(?:u8|[uUL])?'(?:[^'\\\n]|\\.)*'?",
    re.S,
)
_NOT_NL = re.compile(r"[^\n]")


def mask(text: str) -> tuple[str, str]:
    """Return ``(clean, skeleton)``, both as long as ``text``: ``clean`` has comments blanked; ``skeleton`` has
    comments and the contents of string and character literals blanked too (quotes kept)."""
    clean: list[str] = []
    skel: list[str] = []
    pos = 0
    for m in _MASK_RE.finditer(text):
        if m.start() > pos:
            chunk = text[pos : m.start()]
            clean.append(chunk)
            skel.append(chunk)
        tok = m.group(0)
        if tok.startswith("/"):
            blank = _NOT_NL.sub(" ", tok)
            clean.append(blank)
            skel.append(blank)
        else:
            q = tok.index('"') if '"' in tok and not tok.lstrip("u8UL").startswith("'") else tok.index("'")
            clean.append(tok)
            inner = tok[q + 1 : -1] if len(tok) > q + 1 and tok[-1] == tok[q] else tok[q + 1 :]
            closing = tok[len(tok) - 1] if len(tok) > q + 1 and tok[-1] == tok[q] else ""
            skel.append(tok[: q + 1] + _NOT_NL.sub(" ", inner) + closing)
        pos = m.end()
    if pos < len(text):
        clean.append(text[pos:])
        skel.append(text[pos:])
    return "".join(clean), "".join(skel)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "?": "?", "e": "\x1b"}


def decode_literal(body: str) -> str:
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            d = body[i + 1]
            if d == "x":
                m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2 :])
                if m:
                    out.append(chr(int(m.group(0), 16)))
                    i += 2 + len(m.group(0))
                    continue
            if d in "01234567":
                m = re.match(r"[0-7]{1,3}", body[i + 1 :])
                assert m is not None
                out.append(chr(int(m.group(0), 8)))
                i += 1 + len(m.group(0))
                continue
            if d == "u" and re.match(r"[0-9a-fA-F]{4}", body[i + 2 : i + 6]):
                out.append(chr(int(body[i + 2 : i + 6], 16)))
                i += 6
                continue
            if d == "\n":  # line continuation inside a literal
                i += 2
                continue
            out.append(_ESCAPES.get(d, d))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


_LITERAL_RE = re.compile(r'(?:u8|u|U|L)?"((?:[^"\\\n]|\\.|\\\n)*)"|(?:u8|u|U|L)?R"([^()\\ ]{0,16})\((.*?)\)\2"', re.S)


def split_top(text: str, skel: str, sep: str = ",") -> list[tuple[int, int]]:
    """Split at top-level separators (outside (), [], {}); returns ``(start, end)`` spans."""
    spans = []
    depth = 0
    start = 0
    for i, c in enumerate(skel):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and skel.startswith(sep, i) and (sep != "+" or _is_binary_plus(skel, i)):
            spans.append((start, i))
            start = i + len(sep)
    spans.append((start, len(skel)))
    return spans


def _is_binary_plus(skel: str, i: int) -> bool:
    if skel[i + 1 : i + 2] in ("+", "=") or skel[i - 1 : i] == "+":
        return False
    before = skel[:i].rstrip()
    return bool(before) and before[-1] not in "(,=+-*/<>!&|?:"


def collapse_ws(text: str) -> str:
    """Whitespace as the preprocessor's ``#`` stringizing leaves it (runs become one space), strings kept."""
    out = []
    pending_space = False
    for m in re.finditer(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|\s+|[^\s"\']+|["\']', text, re.S):
        tok = m.group(0)
        if tok.isspace():
            pending_space = True
            continue
        if pending_space and out:
            out.append(" ")
        pending_space = False
        out.append(tok)
    return "".join(out).replace("\\\n", " ").strip()


# ---------------------------------------------------------------------------------------------------------------
# Scopes: namespaces, classes and functions by brace matching
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Scope:
    kind: str  # namespace | class | function | lambda | block | other
    name: str
    start: int
    end: int = -1
    header: str = ""


_FUNC_MACROS = re.compile(r"\b(TORCH_IMPL_FUNC|TORCH_META_FUNC2?|TORCH_PRECOMPUTE_META_FUNC2?|DEFINE_DISPATCH|REGISTER_\w+)\s*\(\s*(\w+)")


def _classify(header: str) -> tuple[str, str]:
    h = header.strip()
    if not h:
        return "block", ""
    m = re.search(r"(?:^|[\s)])(?:inline\s+)?namespace\b\s*([\w:]*)\s*$", h)
    if m:
        return "namespace", m.group(1)
    m = re.search(r"\b(?:class|struct|union)\s+(?:C10_API\s+|TORCH_API\s+|\w+_API\s+|alignas\([^)]*\)\s+|C10_\w+\s+)*(\w+)[^;()]*$", h)
    if m and "(" not in h[m.end(1) :].split(":")[0]:
        return "class", m.group(1)
    if re.match(r"^(?:enum)\b", h):
        return "other", ""
    if re.search(r"^(?:\}?\s*else\b|do$|try$)", h) or re.match(r"^(?:if|for|while|switch|catch)\b", h) or re.match(r"^(?:else\s+if)\b", h):
        return "block", h
    if h.endswith(("=", "return", ",", "(")) or re.search(r"=\s*$", h):
        return "other", ""
    m = _FUNC_MACROS.search(h)
    if m:
        return "function", m.group(2)
    m = re.search(r"\b((?:TH|THC|THNN|THCUNN|THD|THS|THCS|THP)\w*_)\s*\(\s*(\w+)\s*\)\s*\(", h)
    if m:  # TH generic functions: THTensor_(addmv)(...)
        return "function", f"{m.group(1)}({m.group(2)})"
    # lambda: [...](...) -> T mutable {  or  [&] {
    if re.search(r"\]\s*(\([^()]*(\([^()]*\)[^()]*)*\))?\s*(mutable)?\s*(->\s*[\w:<>,\s*&]+)?\s*$", h):
        return "lambda", ""
    m = re.search(r"((?:\w+::)*)operator\s*(\(\)|\[\]|<<|>>|[^\w\s(]{1,3})\s*\(", h)
    if m:
        return "function", f"{m.group(1)}operator{m.group(2)}"
    macro_like = None
    for m in re.finditer(r"(~?[A-Za-z_][\w]*(?:\s*::\s*~?[A-Za-z_]\w*)*)\s*(?:<[^<>()]*>)?\s*\(", h):
        name = re.sub(r"\s+", "", m.group(1))
        last = name.split("::")[-1]
        if last in _KEYWORDS or last.startswith("__"):
            continue
        before = h[: m.start()].rstrip()
        if before.endswith((",", ":")) and not before.endswith("::"):
            continue  # a member initialiser after the parameter list
        if re.match(r"^[A-Z][A-Z0-9_]*$", last):
            # macros (DECLARE_DISPATCH(...), C10_LAUNCH_BOUNDS_1(...)) may precede the name; SGD(...) may be it
            macro_like = macro_like or name
            continue
        return "function", name
    if macro_like:
        return "function", macro_like
    return "other", ""


def scopes(scope_skel: str) -> list[Scope]:
    """All brace scopes of a file, from a skeleton whose preprocessor lines are blanked."""
    out: list[Scope] = []
    stack: list[Scope] = []
    last_boundary = 0
    for m in re.finditer(r"[{};]", scope_skel):
        i = m.start()
        c = m.group(0)
        if c == "{":
            raw = scope_skel[max(last_boundary, i - 4000) : i]
            if raw.count("(") > raw.count(")"):
                # a brace initialiser inside an argument list (`const Tensor& mask = {}`): not a scope
                stack.append(Scope("inline", "", i))
                continue
            header = re.sub(r"\s+", " ", raw).strip()
            kind, name = _classify(header[-3000:])
            sc = Scope(kind, name, i, header=header[-300:])
            stack.append(sc)
            out.append(sc)
        elif c == "}" and stack:
            sc = stack.pop()
            sc.end = i
            if sc.kind == "inline":
                continue
        elif c == ";" and stack and stack[-1].kind == "inline":
            continue
        last_boundary = i + 1
    for sc in stack:
        sc.end = len(scope_skel)
    return out


_PRE_RE = re.compile(r"^[ \t]*#(?:[^\n\\]|\\[\s\S])*", re.M)


def preprocessor_spans(clean: str) -> tuple[list[tuple[int, int]], list[tuple[int, int, str, list[str]]]]:
    """The spans of preprocessor lines, and the ``#define NAME(params)`` among them."""
    spans = []
    defines = []
    for m in _PRE_RE.finditer(clean):
        spans.append((m.start(), m.end()))
        d = re.match(r"[ \t]*#\s*define\s+(\w+)(\(([^)]*)\))?", m.group(0))
        if d:
            params = [p.strip() for p in (d.group(3) or "").split(",") if p.strip()] if d.group(2) else []
            defines.append((m.start(), m.end(), d.group(1), params))
    return spans, defines


def blank_spans(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    out = []
    pos = 0
    for a, b in spans:
        out.append(text[pos:a])
        out.append(_NOT_NL.sub(" ", text[a:b]))
        pos = b
    out.append(text[pos:])
    return "".join(out)


# ---------------------------------------------------------------------------------------------------------------
# Message arguments -> parts
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class MsgContext:
    params: list[str] = field(default_factory=list)  # macro parameters (inside a #define body)
    resolve: Callable[[str], str | None] | None = None  # local string variables
    constants: dict[str, str] = field(default_factory=dict)  # #define NAME "literal" (object-like string macros)


def _literal_only(expr: str) -> str | None:
    """The decoded text when ``expr`` is only adjacent string literals, else None."""
    e = expr.strip()
    pos = 0
    out = []
    while pos < len(e):
        m = _LITERAL_RE.match(e, pos)
        if not m:
            return None
        out.append(decode_literal(m.group(1)) if m.group(1) is not None else m.group(3))
        pos = m.end()
        while pos < len(e) and e[pos].isspace():
            pos += 1
    return "".join(out) if out else None


def _cpp_hole(expr: str, ctx: MsgContext) -> Hole:
    e = expr.strip()
    if ctx.params and e in ctx.params:
        return Hole(hole_type_for_text(e.lower()))
    return Hole(hole_type_for_text(e))


def expr_parts(expr: str, ctx: MsgContext, depth: int = 0) -> Parts:
    """One ``c10::str`` argument (or a ``+`` concatenation) as parts."""
    e = expr.strip()
    if not e:
        return []
    lit = _literal_only(e)
    if lit is not None:
        return [lit]
    # literals mixed with stringized parameters or macros: "a" #X "b", "x" C10_STRINGIZE(y)
    if '"' in e and re.fullmatch(r'(\s*((?:u8|L)?"(?:[^"\\]|\\.)*"|#\s*\w+|C10_STRINGIZE\([^()]*\)|__FILE__|__func__|__FUNCTION__))+\s*', e, re.S):
        out: Parts = []
        for m in re.finditer(r'(?:u8|L)?"((?:[^"\\]|\\.)*)"|#\s*(\w+)|C10_STRINGIZE\(([^()]*)\)|(__FILE__|__func__|__FUNCTION__)', e, re.S):
            if m.group(1) is not None:
                out.append(decode_literal(m.group(1)))
            elif m.group(2) is not None:
                out.append(Hole("name"))
            else:
                out.append(Hole("any"))
        return out
    if e in ctx.constants:
        return [ctx.constants[e]]
    if re.fullmatch(r"'(?:[^'\\]|\\.[0-7]*)'", e):
        return [decode_literal(e[1:-1])]
    if re.fullmatch(r"-?\d+[uUlL]*", e):
        return [re.sub(r"[uUlL]+$", "", e)]
    if depth > 6:
        return [_cpp_hole(e, ctx)]
    _, skel = mask(e)
    # wrappers whose arguments are themselves message pieces
    m = re.match(r"^(?:::)?(?:c10::|at::|torch::)?(?:str|c10_str)\s*\(", e) or re.match(r"^(?:::)?std::string\s*\(", e) or re.match(r"^(?:::)?(?:c10::)?(?:std::)?string_view\s*\(", e)
    if m and skel.rstrip().endswith(")") and _matching_paren(skel, m.end() - 1) == len(skel.rstrip()) - 1:
        inner = e[m.end() : len(skel.rstrip()) - 1]
        return args_parts(inner, ctx, depth + 1)
    m = re.match(r"^(?:fmt::format|std::format|c10::format)\s*\(", e)
    if m and _matching_paren(skel, m.end() - 1) == len(skel.rstrip()) - 1:
        inner = e[m.end() : len(skel.rstrip()) - 1]
        return format_parts(inner, ctx, depth + 1)
    # concatenation with + (std::string("a") + x + "b")
    if "+" in skel:
        spans = split_top(e, skel, "+")
        if len(spans) > 1:
            pieces = [e[a:b] for a, b in spans]
            if any(_literal_only(p) is not None or "std::string" in p or "str(" in p for p in pieces):
                out = []
                for p in pieces:
                    out.extend(expr_parts(p, ctx, depth + 1))
                return out
    # parenthesised
    if e.startswith("(") and _matching_paren(skel, 0) == len(e) - 1:
        return expr_parts(e[1:-1], ctx, depth + 1)
    # a local string variable (or stringstream) built just before
    vm = re.fullmatch(r"(?:std::move\(\s*)?([A-Za-z_]\w*)(?:\s*\))?(?:\.str\(\))?(?:\.c_str\(\))?", e)
    if ctx.resolve is not None and vm:
        target = ctx.resolve(vm.group(1))
        if target is not None:
            sub = MsgContext(ctx.params, None, ctx.constants)
            return expr_parts(target, sub, depth + 1)
    # a conditional between two literals: keep it a hole
    return [_cpp_hole(e, ctx)]


def _matching_paren(skel: str, open_pos: int) -> int:
    depth = 0
    for i in range(open_pos, len(skel)):
        c = skel[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i
    return -1


def args_parts(args_text: str, ctx: MsgContext, depth: int = 0) -> Parts:
    _, skel = mask(args_text)
    out: Parts = []
    for a, b in split_top(args_text, skel):
        out.extend(expr_parts(args_text[a:b], ctx, depth))
    return out


def format_parts(args_text: str, ctx: MsgContext, depth: int = 0) -> Parts:
    """``fmt::format("…{}…", a, b)``."""
    _, skel = mask(args_text)
    spans = split_top(args_text, skel)
    fmt = _literal_only(args_text[spans[0][0] : spans[0][1]])
    args = [args_text[a:b] for a, b in spans[1:]]
    if fmt is None:
        return [Hole("any")]
    out: Parts = []
    k = 0
    for m in re.finditer(r"\{\{|\}\}|\{([^{}]*)\}|[^{}]+|[{}]", fmt):
        tok = m.group(0)
        if tok == "{{":
            out.append("{")
        elif tok == "}}":
            out.append("}")
        elif m.group(1) is not None:
            spec = m.group(1)
            idx = k
            if spec.split(":")[0].isdigit():
                idx = int(spec.split(":")[0])
            k += 1
            if ":" in spec and spec.rstrip()[-1:] in "dxXob":
                out.append(Hole("int"))
            elif ":" in spec and spec.rstrip()[-1:] in "fegFEG":
                out.append(Hole("float"))
            elif idx < len(args):
                out.extend(_arg_piece(args[idx], ctx, depth))
            else:
                out.append(Hole("any"))
        else:
            out.append(tok)
    return out


def _arg_piece(arg: str, ctx: MsgContext, depth: int) -> Parts:
    lit = _literal_only(arg)
    if lit is not None:
        return [lit]
    return [_cpp_hole(arg, ctx)]


_PRINTF_C = re.compile(r"%(\([^)]*\))?[-#0 +']*(\*|\d+)?(\.(\*|\d+))?(hh|h|ll|l|L|z|j|t|q|I64|I32)?([diouxXeEfFgGcrsaSRUAVp%])")


def printf_format_parts(fmt_parts: Parts, args: list[str], ctx: MsgContext) -> Parts:
    out: Parts = []
    k = 0
    for p in fmt_parts:
        if isinstance(p, Hole):
            out.append(p)
            continue
        pos = 0
        for m in _PRINTF_C.finditer(p):
            out.append(p[pos : m.start()])
            pos = m.end()
            conv = m.group(6)
            if conv == "%":
                out.append("%")
                continue
            arg = args[k] if k < len(args) else None
            k += 1 + (1 if m.group(2) == "*" else 0) + (1 if m.group(4) == "*" else 0)
            if conv in "diouxX":
                out.append(Hole("int"))
            elif conv in "eEfFgG":
                out.append(Hole("float"))
            elif arg is not None and _literal_only(arg) is not None:
                out.append(_literal_only(arg) or "")
            elif arg is not None and arg.strip() in ctx.constants:
                out.append(ctx.constants[arg.strip()])
            elif arg is not None:
                out.append(_cpp_hole(arg, ctx))
            else:
                out.append(Hole("any"))
        out.append(p[pos:])
    return out


# ---------------------------------------------------------------------------------------------------------------
# The file walk
# ---------------------------------------------------------------------------------------------------------------


# Files that define the raising macros themselves: their #define bodies are not wrappers.
_CORE_MACRO_FILES = (
    "c10/util/Exception.h",
    "torch/headeronly/util/Exception.h",
    "macros/Macros.h",
    "ATen/Dispatch.h",
    "ATen/Dispatch_v2.h",
    "core/Dispatch.h",
    "ATen/Error.h",
    "TH/THGeneral.h.in",
    "THC/THCGeneral.h.in",
    "csrc/assertions.h",
    "c10/util/logging_is_not_google_glog.h",
)
_ANY_KEYWORD = re.compile(r"(?i)check|assert|error|warn|throw|AT_DISPATCH")


@dataclass
class Wrapper:
    """A ``#define`` whose body raises: expanded again at each call site."""

    name: str
    params: list[str]
    body: str
    file: str


class CppExtractor:
    def __init__(self, *, legacy: bool = False, wrappers: dict[str, list[Wrapper]] | None = None, op_of: Callable[[str | None, str, str], str | None] | None = None):
        self.specs = LEGACY_SPECS if legacy else MODERN_SPECS
        self.legacy = legacy
        self.constants: dict[str, str] = {}
        self.wrappers = wrappers or {}
        self.op_of = op_of
        names = sorted(set(self.specs) | {"AT_DISPATCH_V2"}, key=len, reverse=True)
        throw_names = sorted(THROW_TYPES, key=len, reverse=True)
        self.call_re = re.compile(
            r"(?<![\w:.>])(?:(throw)\s+(" + "|".join(re.escape(t) for t in throw_names) + r"|(?:::)?(?:\w+::)*\w+(?:Error|Exception|_error))\s*[({]"
            r"|(" + "|".join(re.escape(n) for n in names) + r"|AT_DISPATCH_\w+|assert)\s*\()"
        )

    # -- collection of wrapper macros (first pass over every file) ---------------------------------------------
    def find_constants(self, text: str) -> dict[str, str]:
        """Object-like macros whose value is a string literal (``#define CUTORCH_DIM_WARNING "..."``)."""
        out = {}
        for m in re.finditer(r'^[ \t]*#\s*define\s+(\w+)[ \t]+((?:"(?:[^"\\\n]|\\.)*"[ \t]*)+)$', text, re.M):
            lit = _literal_only(m.group(2))
            if lit:
                out[m.group(1)] = lit
        return out

    def find_wrappers(self, text: str, rel: str) -> dict[str, Wrapper]:
        clean, _ = mask(text)
        _, defines = preprocessor_spans(clean)
        out = {}
        if rel.endswith(_CORE_MACRO_FILES):
            return out
        for start, end, name, params in defines:
            if not params or name in self.specs or name.startswith(("AT_DISPATCH", "THO_", "AT_PRIVATE", "_TORCH")):
                continue
            body = clean[start:end]
            body = re.sub(r"\\\n", " \n", body)
            m = re.match(r"[ \t]*#\s*define\s+\w+\([^)]*\)", body)
            if not m:
                continue
            inner = body[m.end() :]
            if self.call_re.search(inner) and any(re.search(rf"(?<![\w]){re.escape(p)}(?![\w])", inner) for p in params):
                out[name] = Wrapper(name, params, inner, rel)
        return out

    # -- extraction ---------------------------------------------------------------------------------------------
    def extract_text(self, text: str, rel: str, source: str) -> list[dict]:
        clean, skel = mask(text)
        pre, defines = preprocessor_spans(clean)
        scs = scopes(blank_spans(skel, pre))
        line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        is_cuda = Path(rel).suffix in CUDA_EXTS
        entries: list[dict] = []

        def line_of(pos: int) -> int:
            return bisect.bisect_right(line_starts, pos)

        def define_at(pos: int):
            for d in defines:
                if d[0] <= pos < d[1]:
                    return d
            return None

        for m in self.call_re.finditer(skel):
            pos = m.start()
            if m.group(1):
                name = m.group(2)
                open_pos = m.end() - 1
            else:
                name = m.group(3)
                open_pos = m.end() - 1
            if name == "assert" and not is_cuda:
                continue
            if re.search(r"#\s*define\s+$", skel[max(0, pos - 40) : pos]):
                continue  # the macro's own definition
            close = _matching_paren(skel, open_pos)
            if close < 0:
                continue
            d = define_at(pos)
            if d is not None and d[2] in ("TORCH_CHECK", "TORCH_INTERNAL_ASSERT") or d is not None and d[2] in self.specs:
                continue  # inside the definition of a known macro
            args_text = clean[open_pos + 1 : close]
            args_skel = skel[open_pos + 1 : close]
            if d is not None:
                args_text = args_text.replace("\\\n", " \n")
                args_skel = args_skel.replace("\\\n", " \n")
            spans = split_top(args_text, args_skel)
            args = [args_text[a:b] for a, b in spans]
            if len(args) == 1 and not args[0].strip():
                args = []
            ctx = MsgContext(params=d[3] if d else [], resolve=self._resolver(clean, skel, pos, scs), constants=self.constants)
            function = self._function_at(scs, pos, d)
            made = self._entries_for(name, bool(m.group(1)), args, ctx, skel, pos, scs, d)
            for e in made:
                e.update(file=rel, line=line_of(pos), function=function, source=source)
                if e.get("op") is None and self.op_of is not None:
                    e["op"] = self.op_of(function, e["template"], rel)
                entries.append(e)
        # wrapper macros used in this file: expand at the call site
        if self.wrappers:
            entries.extend(self._expand_wrappers(clean, skel, scs, defines, rel, source, line_of))
        return entries

    def _pick_wrapper(self, name: str, rel: str, local_defines: set[str]) -> Wrapper | None:
        """A file's own #define wins; otherwise only wrappers defined in headers apply."""
        cands = self.wrappers.get(name, [])
        if name in local_defines:
            own = [w for w in cands if w.file == rel]
            return own[0] if own else None
        shared = [w for w in cands if Path(w.file).suffix in (".h", ".hpp", ".cuh", ".in", ".hh")]
        if shared:
            return shared[0]
        # a source file's macros reach the generic files it #includes (TH's init.cpp -> generic/*.c)
        near = [w for w in cands if rel.startswith(str(Path(w.file).parent) + "/")]
        return near[0] if len(near) == 1 else None

    def _expand_wrappers(self, clean, skel, scs, defines, rel, source, line_of) -> list[dict]:
        out = []
        names = [n for n in self.wrappers if n in skel]
        if not names:
            return out
        local_defines = {d[2] for d in defines}
        rx = re.compile(r"(?<![\w:.])(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")\s*\(")
        for m in rx.finditer(skel):
            if re.search(r"#\s*define\s+$", skel[max(0, m.start() - 40) : m.start()]):
                continue
            w = self._pick_wrapper(m.group(1), rel, local_defines)
            if w is None:
                continue
            close = _matching_paren(skel, m.end() - 1)
            if close < 0:
                continue
            args_text = clean[m.end() : close].replace("\\\n", " \n")
            _, args_skel = mask(args_text)
            args = [args_text[a:b].strip() for a, b in split_top(args_text, args_skel)]
            body = _substitute(w, args)
            if body is None:
                continue
            sub = CppExtractor(legacy=self.legacy, op_of=None)
            sub.specs = self.specs
            sub.constants = self.constants
            for e in sub.extract_text(body, rel, source):
                e["line"] = line_of(m.start())
                e["function"] = self._function_at(scs, m.start(), None)
                e["via_macro"] = w.name
                if self.op_of is not None:
                    e["op"] = self.op_of(e["function"], e["template"], rel)
                out.append(e)
        return out

    def _function_at(self, scs: list[Scope], pos: int, define) -> str | None:
        if define is not None:
            return define[2]
        chain = [s for s in scs if s.start <= pos <= s.end]
        names = []
        func = None
        for s in chain:
            if s.kind == "namespace" and s.name:
                names.append(s.name)
            elif s.kind == "class" and s.name:
                names.append(s.name)
            elif s.kind == "function" and func is None:
                func = s.name
                names.append(s.name)
                break
        if func is None:
            return None
        # a qualified definition (Foo::bar) already carries its class
        return "::".join(names)

    def _resolver(self, clean: str, skel: str, pos: int, scs: list[Scope]):
        def resolve(var: str) -> str | None:
            lo = max(0, pos - 3000)
            window = skel[lo:pos]
            decl = None
            for m in re.finditer(rf"std::(?:o?stringstream|ostream)\s+{re.escape(var)}\s*;", window):
                decl = m
            if decl is not None:
                pieces = []
                for m in re.finditer(rf"(?<![\w.]){re.escape(var)}\s*<<", window[decl.end() :]):
                    start = lo + decl.end() + m.end()
                    end = skel.find(";", start)
                    if end < 0 or end > pos:
                        break
                    stmt_skel = skel[start:end]
                    stmt = clean[start:end]
                    pieces.extend(stmt[a:b] for a, b in split_top(stmt, stmt_skel, "<<"))
                return f"c10::str({', '.join(pieces)})" if pieces else None
            best = None
            for m in re.finditer(
                rf"(?:std::string|auto|const\s+std::string|const\s+auto|std::string_view|const\s+char\s*\*|static\s+const\s+char\s*\*|constexpr\s+(?:const\s+)?char\s*\*?|const\s+char|char)\s*&?\s*(?:const\s+)?\b{re.escape(var)}\b\s*(?:\[\s*\])?\s*=\s*",
                window,
            ):
                best = m
            if best is None:
                return None
            start = lo + best.end()
            end = skel.find(";", start)
            if end < 0 or end - start > 2000:
                return None
            return clean[start:end]

        return resolve

    def _cond(self, spec: Spec, args: list[str]) -> str | None:
        if spec.cond is None or spec.cond >= len(args):
            return None
        return collapse_ws(args[spec.cond].replace("\\\n", " "))[:MAX_CONDITION]

    def _if_condition(self, skel: str, pos: int, scs: list[Scope]) -> str | None:
        """The test of an ``if`` that the call sits directly under (braced or not)."""
        k = pos - 1
        while k >= 0 and skel[k].isspace():
            k -= 1
        # unbraced: `if (cond) CALL` / braced: `if (cond) { CALL`
        if k >= 0 and skel[k] == "{":
            k -= 1
            while k >= 0 and skel[k].isspace():
                k -= 1
        if k < 0 or skel[k] != ")":
            return None
        depth = 0
        j = k
        while j >= 0:
            if skel[j] == ")":
                depth += 1
            elif skel[j] == "(":
                depth -= 1
                if depth == 0:
                    break
            j -= 1
        if j < 0:
            return None
        before = skel[max(0, j - 20) : j]
        if not re.search(r"\bif\s*(?:constexpr\s*)?$|C10_UNLIKELY\s*$|if\s*\(\s*C10_UNLIKELY\s*$", before):
            return None
        return collapse_ws(skel[j + 1 : k])[:MAX_CONDITION] if '"' not in skel[j + 1 : k] else None

    def _entries_for(self, name: str, is_throw: bool, args: list[str], ctx: MsgContext, skel: str, pos: int, scs: list[Scope], define) -> list[dict]:
        if is_throw:
            # a class not in the table: an error type of PyTorch's own, surfacing as RuntimeError in Python
            exc_type, style = THROW_TYPES.get(name.lstrip(":"), ("RuntimeError", "str"))
            if style == "system_error" and args:
                lit = expr_parts(args[-1], ctx)
                parts = [*lit, ": ", Hole("any")]
            elif style == "c10error" and len(args) >= 2:
                parts = expr_parts(args[-1], ctx)
            elif style == "printf" and args:
                parts = printf_format_parts(expr_parts(args[0], ctx), args[1:], ctx)
            elif args:
                parts = expr_parts(args[0], ctx) if len(args) == 1 else args_parts(",".join(args), ctx)
            else:
                return []
            cond = self._if_condition(skel, pos, scs)
            return self._make(parts, "error", exc_type, cond, "failing" if cond else None, False)
        if name == "assert" or name.startswith("CUDA_KERNEL_ASSERT"):
            if not args:
                return []
            cond = collapse_ws(args[0].replace("\\\n", " "))
            if name == "CUDA_KERNEL_ASSERT_MSG" and len(args) > 1:
                text = _literal_only(args[1])
                parts: Parts = ["Assertion `", text if text is not None else Hole("any"), "` failed."]
            elif name == "CUDA_KERNEL_ASSERT_PRINTF" and len(args) > 1:
                fmt = expr_parts(args[1], ctx)
                parts = ["Assertion failed: `", *cond_parts(cond, ctx.params), "`: ", *printf_format_parts(fmt, args[2:], ctx)]
            else:
                parts = ["Assertion `", *cond_parts(cond, ctx.params), "` failed."]
            return self._make(parts, "kernel_assert", None, cond[:MAX_CONDITION], "required", False)
        if DISPATCH_RE.match(name) or name == "AT_DISPATCH_V2":
            if len(args) < 2 or name in ("AT_DISPATCH_SWITCH",) and define is not None:
                return []
            nm = args[1].strip()
            lit = _literal_only(nm)
            if self.legacy:
                label: Parts = [collapse_ws(nm)]
                exc = "RuntimeError"
                dtype_hole = Hole("name")
            else:
                label = ['"', lit if lit is not None else Hole("name"), '"']
                exc = "NotImplementedError"
                dtype_hole = Hole("dtype")
            parts = [*label, " not implemented for '", dtype_hole, "'"]
            cond = f"{name}({collapse_ws(args[0])})"[:MAX_CONDITION]
            return self._make(parts, "error", exc, cond, "required", False)
        spec = self.specs.get(name)
        if spec is None:
            return []
        exc_type = spec.exc_type
        if spec.exc_arg is not None:
            if spec.exc_arg >= len(args):
                return []
            kind_name = args[spec.exc_arg].replace("\\\n", " ").strip().split("::")[-1]
            if kind_name in ctx.params:
                kind_name = ""
            if name.startswith("PyErr"):
                exc_type = PYEXC.get(args[spec.exc_arg].strip(), args[spec.exc_arg].strip().replace("PyExc_", ""))
            else:
                exc_type = C10_ERRORS.get(kind_name, "RuntimeError" if kind_name.endswith("Error") else None)
        if spec.style == "check_op":
            if len(args) < 2:
                return []
            a, b = collapse_ws(args[0]), collapse_ws(args[1])
            parts = [f"Check failed: {a} {spec.suffix} {b} (", Hole("any"), " vs. ", Hole("any"), "). "]
            return self._make(parts, "error", "RuntimeError", f"{a} {spec.suffix} {b}", "required", False)
        cond = self._cond(spec, args)
        sense = "required" if cond is not None else None
        if cond is None or cond in ("false", "0"):
            ifc = self._if_condition(skel, pos, scs)
            if ifc:
                cond, sense = ifc, "failing"
            elif cond in ("false", "0"):
                cond, sense = None, None
        msg_args = args[spec.msg :] if spec.msg is not None and spec.msg < len(args) else []
        msg_args = [a for a in msg_args if a.strip() and a.strip() not in ("__VA_ARGS__", "##__VA_ARGS__")]
        cond_text = collapse_ws(args[spec.cond].replace("\\\n", " ")) if spec.cond is not None and spec.cond < len(args) else ""

        def fill(t: str) -> Parts:
            out: Parts = []
            for piece in re.split(r"(\{cond\}|\{arg\d\}|⟦\w+⟧)", t):
                if piece == "{cond}":
                    out.extend(cond_parts(cond_text, ctx.params))
                elif piece.startswith("{arg"):
                    k = int(piece[4:-1])
                    lit = args[k].strip() if k < len(args) else ""
                    out.append(lit if re.fullmatch(r"\d+", lit) else Hole("int"))
                elif piece.startswith("⟦"):
                    out.append(Hole(piece[1:-1]))
                else:
                    out.append(piece)
            return out

        if not msg_args:
            if spec.default is None:
                return []
            parts = fill(spec.default) if spec.default else fill(spec.prefix)
        else:
            if spec.style == "printf":
                body = printf_format_parts(expr_parts(msg_args[0], ctx), msg_args[1:], ctx)
            elif spec.style == "single":
                body = expr_parts(msg_args[0], ctx)
            else:
                body = []
                for a in msg_args:
                    body.extend(expr_parts(a, ctx))
            parts = [*fill(spec.prefix), *body, *fill(spec.suffix)]
            if not has_text(body) and not spec.internal:
                return []
        return self._make(parts, spec.kind, exc_type, cond, sense, spec.internal)

    def _make(self, parts: Parts, kind: str, exc_type, cond, sense, internal) -> list[dict]:
        parts = normalize(parts)
        if not has_text(parts):
            return []
        template = render(parts)
        return [
            {
                "template": template,
                "kind": kind,
                "exc_type": exc_type,
                "condition": cond,
                "condition_sense": sense if cond else None,
                "internal": internal or "INTERNAL ASSERT FAILED" in template,
                "op": None,
            }
        ]


def cond_parts(cond: str, params: list[str]) -> Parts:
    """A stringized condition: inside a ``#define`` body the macro's parameters become holes."""
    names = [p for p in params if p not in ("...",)]
    if not names:
        return [cond]
    out: Parts = []
    for piece in re.split(r"\b(" + "|".join(re.escape(p) for p in names) + r")\b", cond):
        out.append(Hole("any") if piece in names else piece)
    return out


def _substitute(w: Wrapper, args: list[str]) -> str | None:
    params = list(w.params)
    variadic = params and params[-1] in ("...",)
    named = params[:-1] if variadic else params
    if len(args) < len(named):
        return None
    mapping = dict(zip(named, args, strict=False))
    va = ", ".join(args[len(named) :]) if variadic else ""
    body = w.body

    def repl_str(m: re.Match) -> str:
        p = m.group(1)
        if p in mapping:
            return '"' + collapse_ws(mapping[p]).replace("\\", "\\\\").replace('"', '\\"') + '"'
        if p == "__VA_ARGS__":
            return '"' + va.replace('"', '\\"') + '"'
        return m.group(0)

    body = re.sub(r"(?<![#\w])#\s*(\w+)", repl_str, body)
    body = re.sub(r",\s*##\s*__VA_ARGS__", (", " + va) if va else "", body)
    body = body.replace("__VA_ARGS__", va)
    if mapping:
        body = re.sub(r"\b(" + "|".join(re.escape(p) for p in mapping) + r")\b(?!\s*##)", lambda m: mapping[m.group(1)], body)
    body = re.sub(r"\s*##\s*", "", body)
    return body


# ---------------------------------------------------------------------------------------------------------------
# Ops: function name / message prefix -> aten::op
# ---------------------------------------------------------------------------------------------------------------

_SUFFIXES = (
    "_out", "_outf", "_cpu", "_cuda", "_mps", "_xpu", "_impl", "_kernel", "_template", "_meta", "_stub", "_nocheck",
    "_check", "_checks", "_helper", "_sparse", "_mkldnn", "_quantized", "_symint", "_default", "_cpu_", "_cuda_",
    "_forward", "_inplace", "_", "_tensor", "_scalar", "_out_cpu", "_out_cuda", "_single", "_batched", "_shape_check",
    "_shape", "_args", "_inputs", "_input", "_common", "_generic", "_fallback", "_dense", "_mps_out",
)
_PREFIXES = ("check_", "_check_", "validate_", "_validate_", "checked_", "_", "native_", "cuda_", "cpu_")


_ATEN_NAMESPACES = {"at", "native", "meta", "internal", "cpu", "cuda", "mps", "sparse", "sparse_csr", "impl", "detail", "vec", "CPU_CAPABILITY", ""}


class OpIndex:
    """Known op names (``aten::cdist``…) and the rules that map a C++ function or a message to one."""

    def __init__(self, names: Iterable[str]):
        self.by_base: dict[str, str] = {}
        for full in names:
            ns, _, base = full.rpartition("::")
            base = base.split(".")[0]
            if not ns:
                ns = "aten"
            if base not in self.by_base or ns == "aten":
                self.by_base[base] = f"{ns}::{base}"

    def __len__(self) -> int:
        return len(self.by_base)

    def lookup_name(self, fname: str) -> str | None:
        if not fname:
            return None
        m = re.fullmatch(r"\w+_\((\w+)\)", fname)  # THTensor_(addmv)
        if m:
            fname = m.group(1)
        seen = set()
        frontier = [fname]
        for _ in range(3):
            nxt = []
            for f in frontier:
                if f in seen or not f:
                    continue
                seen.add(f)
                if f in self.by_base:
                    return self.by_base[f]
                for s in _SUFFIXES:
                    if f.endswith(s) and len(f) > len(s) + 2:
                        nxt.append(f[: -len(s)])
                for p in _PREFIXES:
                    if f.startswith(p) and len(f) > len(p) + 2:
                        nxt.append(f[len(p) :])
            frontier = nxt
        return None

    def __call__(self, function: str | None, template: str, rel: str) -> str | None:
        if function:
            quals = function.split("::")
            last = quals[-1]
            # only ATen's own functions name ops: a method or a c10::/torch:: helper does not
            aten_ns = all(q in _ATEN_NAMESPACES for q in quals[:-1])
            if re.match(r"^[A-Z][A-Z0-9_]+$", last) is None and aten_ns:
                snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", last).lower() if re.search(r"[a-z][A-Z]", last) else last
                op = self.lookup_name(last) or (self.lookup_name(snake) if snake != last else None)
                if op:
                    return op
        m = re.match(r"^\s*(?:torch\.|at::|aten::|torch\.nn\.functional\.|F\.)?([a-z_][a-z0-9_]*)(?:\(\)|\(|:|\s)", template)
        if m and (len(m.group(1)) >= 4 or "_" in m.group(1)) and m.group(1) in self.by_base:
            return self.by_base[m.group(1)]
        return None


def ops_from_yaml(root: Path) -> list[str]:
    """Op names from a checkout's ``native_functions.yaml`` (and the 2018 ``nn.yaml``/``Declarations.cwrap``)."""
    names = []
    for rel in ("aten/src/ATen/native/native_functions.yaml", "aten/src/ATen/nn.yaml"):
        p = root / rel
        if p.is_file():
            for m in re.finditer(r"^-\s*(?:func|name):\s*([\w.]+)\(", p.read_text(encoding="utf-8", errors="replace"), re.M):
                names.append("aten::" + m.group(1).split(".")[0])
    p = root / "aten/src/ATen/Declarations.cwrap"
    if p.is_file():
        text = p.read_text(encoding="utf-8", errors="replace")
        for m in re.finditer(r"^\s+(?:python_name|name):\s*(\w+)\s*$", text, re.M):
            names.append("aten::" + m.group(1))
    return names


# ---------------------------------------------------------------------------------------------------------------
# Whole trees
# ---------------------------------------------------------------------------------------------------------------


def iter_cpp_files(root: Path, subdirs: Iterable[str]) -> Iterator[Path]:
    for sub in subdirs:
        base = root / sub
        if not base.exists():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix not in CPP_EXTS or not path.is_file():
                continue
            rel = path.relative_to(root).parts
            if any(p in SKIP_DIR_NAMES for p in rel[:-1]):
                continue
            yield path


def is_legacy_tree(root: Path) -> bool:
    """The 2018-era sources (no ``c10/util/Exception.h``, messages with `` at file:line``)."""
    return not any((root / p).is_file() for p in ("c10/util/Exception.h", "include/c10/util/Exception.h"))


def extract_tree(
    root: str | Path,
    *,
    subdirs: Iterable[str],
    rel_prefix: str = "",
    source_of: Callable[[Path], str] | None = None,
    torch_version: str = "",
    commit: str = "",
    ops: OpIndex | None = None,
    legacy: bool | None = None,
    id_prefix: str | None = None,
) -> list[dict]:
    """Every entry of the C++/CUDA files under ``root/<subdirs>``; ``file`` is ``rel_prefix + path under root``."""
    root = Path(root)
    if legacy is None:
        legacy = is_legacy_tree(root)
    files = list(iter_cpp_files(root, subdirs))
    texts: dict[Path, str] = {}
    base = CppExtractor(legacy=legacy)
    wrappers: dict[str, list[Wrapper]] = {}
    constants: dict[str, str] = {}
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        texts[path] = text
        if "#" in text and "define" in text:
            for name, w in base.find_wrappers(text, rel_prefix + path.relative_to(root).as_posix()).items():
                wrappers.setdefault(name, []).append(w)
            for name, value in base.find_constants(text).items():
                constants.setdefault(name, value)
    ex = CppExtractor(legacy=legacy, wrappers=wrappers, op_of=ops)
    ex.constants = constants
    wrapper_re = re.compile(r"\b(" + "|".join(re.escape(w) for w in wrappers) + r")\b") if wrappers else None
    entries: list[dict] = []
    for path, text in texts.items():
        if not _ANY_KEYWORD.search(text) and not (wrapper_re and wrapper_re.search(text)):
            continue
        rel = rel_prefix + path.relative_to(root).as_posix()
        source = source_of(path) if source_of else ("cuda" if path.suffix in CUDA_EXTS else "cpp")
        entries.extend(ex.extract_text(text, rel, source))
    counts: dict[tuple[str, int], int] = {}
    for e in entries:
        key = (e["file"], e["line"])
        n = counts.get(key, 0)
        counts[key] = n + 1
        head = id_prefix or e["source"]
        e["id"] = f"{head}:{e['file']}:{e['line']}" + (f":{n}" if n else "")
        e["torch_version"] = torch_version
        e["commit"] = commit
        e["matchable"] = matchable(e["template"])
    extract_tree.wrappers = wrappers  # type: ignore[attr-defined]
    return entries
