"""Causes and fixes as data: the structured sections of a knowledge document.

A document's ``## Causes`` and ``## Fixes`` sections may hold ``###`` entries with an id::

    ## Causes
    ### The head was sized for another input resolution {#wrong-flatten-size}
    Why it happens, in general terms.
    - check: one thing the user can run or look at that confirms or rules it out
    - fixes: lazy-linear, dummy-pass
    - cues: resolution, image size, crop

    ## Fixes
    ### Let PyTorch infer in_features {#lazy-linear}
    Why this works. Values may be named: {{layer|fc}} is the reader's ``layer`` value, ``fc`` when none was read.
    ```python
    self.{{layer|fc}} = nn.LazyLinear({{out_features|num_classes}})
    ```

Readers (rules, probes) pick a fix by ``doc-id#fix-id`` and fill its named values with the user's
own; a fix whose values are not read is shown with its defaults. A cause's ``check`` takes the same
``{{name|default}}`` values, filled from the facts a reader wrote down (:func:`fact_values`,
:func:`filled_check`). The ``first-checks`` guide's ``## First checks`` section holds one entry per category
(id: the category with dashes): the check a hypothesis gets when no cause entry describes it. ``fixes:`` may name another
document's fix as ``other-doc#fix-id``. The knowledge test checks every reference and placeholder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from assistant.kb.documents import Document

if TYPE_CHECKING:
    from assistant.types import Facts, Failure, TensorSummary

_FRONT_MATTER = re.compile(r"\A---\s*\n.*?\n---\s*\n", re.S)
_ENTRY = re.compile(r"^###\s+(?P<title>.+?)\s*\{#(?P<id>[a-z0-9][a-z0-9-]*)\}\s*$", re.M)
_SECTION = re.compile(r"^##\s+(?P<name>[^#\n].*?)\s*$", re.M)
_FIELD = re.compile(r"^\s*[-*]\s*(?P<key>check|fixes|cues|applies)\s*:\s*(?P<value>.+?)\s*$", re.M | re.I)
FIX_STEPS = ("fix", "diagnose", "after")  # the order an answer lists them in, once its leading cause stands out
_FIX_STEP = re.compile(r"^\s*[-*]\s*step\s*:\s*(?P<value>[a-z]+)\s*$", re.M | re.I)
_CODE = re.compile(r"```(?P<lang>[\w+-]*)\n(?P<code>.*?)\n?```", re.S)
# The value names readers fill (documents may use others; these are the shared vocabulary).
VALUE_NAMES: dict[str, str] = {
    "layer": "the attribute name of the module that failed (fc, classifier, encoder.proj)",
    "layer_kind": "its class (Linear, Conv2d, Embedding, LSTM)",
    "in_features": "a Linear layer's in_features / a conv's in_channels as built",
    "out_features": "a Linear layer's out_features / a conv's out_channels",
    "got": "the size that actually arrived", "expected": "the size that was expected",
    "shape": "the offending tensor's shape", "other_shape": "the other operand's shape",
    "dim": "the dimension involved", "batch_size": "the batch size read from the shapes",
    "dtype": "the dtype that was found", "expected_dtype": "the dtype that was expected",
    "device": "the device that was found", "expected_device": "the device that was expected",
    "variable": "the variable on the failing line", "function": "the user's function that failed",
    "op": "the PyTorch op or API that raised", "argument": "the argument the message blames (index, target, mat2)", "key": "a state_dict or dict key", "prefix": "a key prefix (module., _orig_mod.)",
    "index": "the offending index value", "bound": "the size the index must stay below", "num_classes": "classes in the model's output",
    "requested": "memory asked for", "capacity": "the GPU's total memory", "free": "memory free on the GPU",
    "package": "a Python package name", "version": "a version that was found", "torch_version": "the installed torch version",
    "arch": "a GPU architecture (sm_90)", "gpu": "the GPU model", "env_var": "an environment variable", "path": "a file path", "shell_path": "a file path quoted for the shell (shlex.quote)",
    "rank": "a distributed rank", "world_size": "the number of ranks", "timeout": "a timeout value",
    "num_workers": "DataLoader workers", "lr": "the learning rate",
}
PLACEHOLDER = re.compile(r"\{\{\s*(?P<name>[a-z_][a-z0-9_]*)\s*(?:\|(?P<default>[^{}]*?))?\s*\}\}")


@dataclass(frozen=True)
class DocFix:
    """A remedy as written in a document: templates with named values, and the defaults for each."""

    doc_id: str
    id: str
    title: str
    detail: str
    code: str | None
    code_lang: str = "python"  # the code fence's language (bash, python, ...)
    step: str = "fix"  # ``- step: diagnose`` (finds the cause) or ``- step: after`` (follows the fix): listed after the fixes

    @property
    def ref(self) -> str:
        """``doc-id#fix-id``: how readers and causes name this fix."""
        return f"{self.doc_id}#{self.id}"

    @property
    def params(self) -> tuple[str, ...]:
        """The named values this fix can take, in order of first use."""
        text = f"{self.title}\n{self.detail}\n{self.code or ''}"
        return tuple(dict.fromkeys(m.group("name") for m in PLACEHOLDER.finditer(text)))


@dataclass(frozen=True)
class DocCause:
    """One cause of a failure family as a document states it, with its check and its fixes."""

    doc_id: str
    id: str
    title: str
    text: str
    check: str
    fix_refs: tuple[str, ...]
    cues: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.doc_id}#{self.id}"


@dataclass(frozen=True)
class Remedies:
    """A document's structured causes and fixes (empty tuples for documents written as prose only)."""

    doc_id: str
    causes: tuple[DocCause, ...]
    fixes: tuple[DocFix, ...]

    def fix(self, fix_id: str) -> DocFix | None:
        return next((f for f in self.fixes if f.id == fix_id), None)


def _section(body: str, name: str) -> str:
    """The text of ``## <name>`` (up to the next ``##`` heading), or ``""``."""
    heads = list(_SECTION.finditer(body))
    for i, m in enumerate(heads):
        if m.group("name").strip().lower() == name:
            end = heads[i + 1].start() if i + 1 < len(heads) else len(body)
            return body[m.end():end]
    return ""


def _entries(section: str) -> list[tuple[str, str, str]]:
    """(id, title, body) for each ``### title {#id}`` entry of a section."""
    marks = list(_ENTRY.finditer(section))
    out = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(section)
        out.append((m.group("id"), m.group("title").strip(), section[m.end():end].strip()))
    return out


def _split_list(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def parse_remedies(doc: Document) -> Remedies:
    """The structured causes and fixes of one document."""
    return parse_body(doc.id, doc.body)


def parse_body(doc_id: str, body_text: str) -> Remedies:
    """The structured causes and fixes of a document's body (its front matter is not needed)."""
    causes = []
    for cid, title, body in _entries(_section(body_text, "causes")):
        fields = {m.group("key").lower(): m.group("value") for m in _FIELD.finditer(body)}
        text = _FIELD.sub("", body).strip()
        refs = tuple(r if "#" in r else f"{doc_id}#{r}" for r in _split_list(fields.get("fixes", "")))
        causes.append(DocCause(doc_id, cid, title, " ".join(text.split()), fields.get("check", "").strip(), refs, _split_list(fields.get("cues", ""))))
    fixes = []
    for fid, title, body in _entries(_section(body_text, "fixes")):
        step = _FIX_STEP.search(body)
        body = _FIX_STEP.sub("", body)
        code_m = _CODE.search(body)
        code = code_m.group("code").rstrip() if code_m else None
        detail = _CODE.sub("", body).strip()
        lang = (code_m.group("lang") or "python") if code_m else "python"
        kind = step.group("value").lower() if step else "fix"
        fixes.append(DocFix(doc_id, fid, title, " ".join(detail.split()), code, lang, step=kind if kind in FIX_STEPS else "fix"))
    return Remedies(doc_id, tuple(causes), tuple(fixes))


def fill(template: str, values: Mapping[str, object]) -> str:
    """The template with each ``{{name|default}}`` replaced by the reader's value, else its default.

    A placeholder with neither a value nor a default keeps its name in angle brackets (``<name>``),
    so a generic fix still reads as an instruction.
    """

    def one(m: re.Match[str]) -> str:
        name = m.group("name")
        value = values.get(name)
        if value is not None and str(value) != "":
            return str(value)
        default = m.group("default")
        return default.strip() if default is not None else f"<{name}>"

    return PLACEHOLDER.sub(one, template)


def fill_code(template: str, values: Mapping[str, object], lang: str) -> str:
    """A fix's code filled like :func:`fill`, but only with values that are plainly data where they go.

    The values come from the user's text; one that is not a validated identifier, literal or shell word
    for its place (:func:`assistant.kb.code_values.code_values`) is treated as not read and its
    placeholder keeps its default, so no text read from a log is ever offered as code to run.
    """
    from assistant.kb.code_values import code_values

    return fill(template, code_values(template, values, lang))


def filled_fix(fx: DocFix, values: Mapping[str, object]):  # -> assistant.types.Fix
    """``fx`` as a :class:`~assistant.types.Fix` with the reader's ``values``: prose filled, code checked."""
    from assistant.types import Fix

    code = fill_code(fx.code, values, fx.code_lang) if fx.code else None
    return Fix(fill(fx.title, values), fill(fx.detail, values), code, (fx.doc_id,), step=fx.step)


FIRST_CHECKS_DOC = "first-checks"  # knowledge/general/first-checks.md: its "## First checks" entries, one per category
_CALL_ON_LINE = re.compile(r"(?<![\w.])(?:(?P<recv>[A-Za-z_][\w.]*)\.)?(?P<name>[A-Za-z_]\w*)\((?P<args>[^()]*)\)")
_NAME = re.compile(r"^[A-Za-z_]\w*$")
_SUBSCRIPTED = re.compile(r"(?<![\w.])(?P<base>[A-Za-z_]\w*)\s*\[")
_LINE_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?!\w*\()")
_ASSIGN = re.compile(r"^\s*(?P<lhs>[A-Za-z_]\w*)\s*(?:[-+*/@]?=)(?!=)")
# Modules and constants that stand where a variable would: never "the variable" of a check.
_NOT_VARIABLES = frozenset({"self", "cls", "super", "torch", "nn", "F", "np", "pd", "os", "sys", "math", "random", "time", "json", "dist",
                            "plt", "cv2", "transforms", "T", "optim", "logging", "None", "True", "False"})


def _variable_name(name: str | None) -> bool:
    return bool(name) and _NAME.match(name or "") is not None and name not in _NOT_VARIABLES and not (name or "").isupper()


def _line_variable(source: str) -> str | None:
    """The variable a failing line works on, read from its innermost calls: the receiver of a method call
    (``loss`` in ``loss.backward()``), else a call's first plain-name argument (``x`` in ``out = self.fc(x)``),
    else the container a line indexes (``batch`` in ``w = batch['mask'].sum()``), else the plain name the line assigns to."""
    for m in _CALL_ON_LINE.finditer(source):
        recv = m.group("recv")
        if _variable_name(recv):
            return recv
        first = m.group("args").split(",")[0].strip()
        if _variable_name(first):
            return first
    m2 = _ASSIGN.match(source)
    # What the line reads is on the right of its assignment: the indexed container there, not the name being assigned.
    for m3 in _SUBSCRIPTED.finditer(source[m2.end():] if m2 else source):
        if _variable_name(m3.group("base")):
            return m3.group("base")
    return m2.group("lhs") if m2 and _variable_name(m2.group("lhs")) else None


def _probed_variable(source: str, function: str | None, var: str | None, tensors: Sequence[TensorSummary]) -> str | None:
    """Of the names on the failing line, the one the probes saw as a tensor in that frame (``var`` when it is one)."""
    seen = {t.name for t in tensors if t.frame == function} or {t.name for t in tensors}
    if var in seen or not seen:
        return var
    return next((n for n in _LINE_NAME.findall(source) if n in seen and _variable_name(n)), var)


def fact_values(facts: Facts | None = None, failure: Failure | None = None, tensors: Sequence[TensorSummary] = ()) -> dict[str, object]:
    """The named values (:data:`VALUE_NAMES`) a reader's facts, the failure's own frames and the tensors the probes
    saw give: what checks are filled with, like fixes. Only values that were read; nothing is guessed."""
    out: dict[str, object] = {}
    frames = failure.user_frames if failure is not None else ()
    if frames:
        fr = frames[-1]
        if fr.function and fr.function != "<module>":
            out["function"] = fr.function
        var = _line_variable(fr.source) if fr.source else None
        if fr.source and tensors:
            var = _probed_variable(fr.source, fr.function, var, tensors)
        if var:
            out["variable"] = var
    if facts is None:
        return out
    for key, value in facts.numbers.items():
        if key in VALUE_NAMES and isinstance(value, (int, float)):
            out[key] = int(value) if float(value).is_integer() else value
    read = {"layer": facts.layer, "layer_kind": facts.layer_kind, "argument": facts.argument, "op": facts.call, "package": facts.package}
    out.update({k: v for k, v in read.items() if v})
    for name, shape in zip(("shape", "other_shape"), facts.shapes[:2], strict=False):
        out[name] = "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"
    out.update(dict(zip(("dtype", "expected_dtype"), facts.dtypes[:2], strict=False)))
    out.update(dict(zip(("device", "expected_device"), facts.devices[:2], strict=False)))
    if facts.names:
        out["key"] = facts.names[0]
    return out


def filled_check(check: str, values: Mapping[str, object]) -> str:
    """A cause's check with the reader's ``values``: like a fix's code, a value goes in only where it is plainly data
    (a name where a name goes), so nothing read from a log becomes a command to run."""
    return fill_code(check, values, "python") if check and "{{" in check else check


@lru_cache(maxsize=1)
def first_checks() -> dict[str, str]:
    """Category -> the general guide's first check for it (``## First checks`` entries, ids with dashes)."""
    from assistant.kb.documents import builtin_knowledge_dir

    path = _paths(builtin_knowledge_dir()).get(FIRST_CHECKS_DOC)
    if path is None:
        return {}
    body = path.read_text(encoding="utf-8")
    out = {}
    for eid, _title, text in _entries(_section(body, "first checks")):
        fields = {m.group("key").lower(): m.group("value") for m in _FIELD.finditer(text)}
        if fields.get("check"):
            out[eid.replace("-", "_")] = fields["check"].strip()
    return out


@lru_cache(maxsize=4096)
def _template_regex(template: str) -> re.Pattern[str]:
    """A regex that matches ``template`` with any value in each placeholder. Compiled once per title: the
    documents hold more fix titles than ``re``'s own cache keeps, so passing the pattern as a string recompiled
    most of them on every answer (and pushed other modules' patterns out of that cache)."""
    parts, last = [], 0
    for m in PLACEHOLDER.finditer(template):
        parts += [re.escape(template[last:m.start()]), ".+?"]
        last = m.end()
    return re.compile("".join(parts) + re.escape(template[last:]), re.S)


def cause_of_fix(fix_title: str, sources: tuple[str, ...]) -> DocCause | None:
    """The cause entry whose ``fixes:`` name the document fix shown as ``fix_title`` (filled or not), in the
    documents the fix cites: how a rule's chosen fix leads back to the cause (and its check) it remedies."""
    for doc_id in sources:
        rem = remedies_of(doc_id)
        if rem is None:
            continue
        for fx in rem.fixes:
            if fx.title == fix_title or _template_regex(fx.title).fullmatch(fix_title):
                for cause in rem.causes:
                    if fx.ref in cause.fix_refs:
                        return cause
    return None


@lru_cache(maxsize=4)
def _paths(root: Path) -> dict[str, Path]:
    return {p.stem: p for p in root.rglob("*.md") if p.name.lower() != "readme.md"}


@lru_cache(maxsize=1024)
def remedies_of(doc_id: str) -> Remedies | None:
    """The structured causes and fixes of one built-in document (read from disk once per process)."""
    from assistant.kb.documents import builtin_knowledge_dir

    root = builtin_knowledge_dir()
    path = _paths(root).get(doc_id)
    if path is None:
        return None
    # Only the body is needed: skipping the YAML front matter keeps `yaml` out of a cold `torchhelp ask`.
    text = path.read_text(encoding="utf-8")
    front = _FRONT_MATTER.match(text.lstrip("\ufeff"))
    return parse_body(doc_id, text.lstrip("\ufeff")[front.end():] if front else text)


def find_fix(ref: str) -> DocFix | None:
    """The fix ``doc-id#fix-id`` names, or None."""
    doc_id, _, fix_id = ref.partition("#")
    rem = remedies_of(doc_id)
    return rem.fix(fix_id) if rem is not None else None


def find_cause(ref: str) -> DocCause | None:
    """The cause ``doc-id#cause-id`` names, or None."""
    doc_id, _, cause_id = ref.partition("#")
    rem = remedies_of(doc_id)
    return next((c for c in rem.causes if c.id == cause_id), None) if rem is not None else None


def as_fix(ref: str, values: Mapping[str, object] | None = None):  # -> assistant.types.Fix | None
    """The fix ``ref`` names, filled with ``values`` (the reader's), citing its document; None when it does not exist."""
    fx = find_fix(ref)
    return filled_fix(fx, values or {}) if fx is not None else None
