"""Graph capture and compilation: torch.compile (dynamo, inductor), torch.export, ONNX export and TorchScript."""

from __future__ import annotations

import re

from assistant.rules.registry import Example, rule
from assistant.rules.base import Context, error_fact, hit, remedy, with_location
from assistant.types import Fact, Facts, RuleHit

_EXPORT_DOCS = ("torch-export-errors", "dynamo-errors")
_ONNX_DOCS = ("onnx-export-errors", "torch-export-errors")
_TS_DOCS = ("torchscript-errors", "torch-export-errors")


def _user_code(ctx: Context) -> str | None:
    """Dynamo prints ``from user code:`` followed by the frames of the traced function; the last one outside torch is the user's."""
    block = re.search(r"from user code:\s*\n((?:[ \t]+[^\n]*\n?|\n)+)", ctx.failure.text)
    if not block:
        return None
    frames = re.findall(r"File \"([^\"]+)\", line (\d+), in (\w+)\s*\n\s*(.+)", block.group(1))
    mine = [f for f in frames if not re.search(r"[/\\](?:site|dist)-packages[/\\]|[/\\]torch[/\\]", f[0])] or frames
    if not mine:
        return None
    path, line, func, code = mine[-1]
    return f"{path.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line} in {func}: `{code.strip()}`"


def _raising_call(ctx: Context) -> str | None:
    """torch.export names the user line that triggered a guard: ``The following call raised this error:``."""
    m = re.search(r"The following call raised this error:\s*\n\s*File \"([^\"]+)\", line (\d+), in (\w+)\s*\n\s*(.+)", ctx.failure.text)
    if not m:
        return None
    return f"{m.group(1).replace(chr(92), '/').rsplit('/', 1)[-1]}:{m.group(2)} in {m.group(3)}: `{m.group(4).strip()}`"


def _script_site(ctx: Context) -> str | None:
    """The source line TorchScript marks with ``~~~ <--- HERE`` (the first, innermost one)."""
    m = re.search(r"\n((?=[^\n]*\S)[^\n]*)\n[ \t]*~+[ \t]*<--- HERE", ctx.failure.text)
    if not m:
        return None
    line = m.group(1).strip()
    return line if not set(line) <= {"~"} else None


# ---------------------------------------------------------------------------------------------
# ONNX export
# ---------------------------------------------------------------------------------------------


@rule(
    "compile.onnx",
    category="compile_error",
    docs=_ONNX_DOCS,
    reads=("CompileError", "RuntimeError", "ValueError", "text", "other"),
    priority=58,
    outcomes=("compile.onnx_opset_too_low", "compile.onnx_unsupported_op", "compile.onnx_opset_version",
              "compile.onnx_symbolic_value", "compile.onnx_dynamo_export"),
    examples=(
        Example("corpus/compile/onnx_unsupported_op_added_in_later_opset.txt", "compile.onnx_opset_too_low"),
        Example("corpus/compile/onnx_unsupported_op_fake_quantize.txt", "compile.onnx_opset_too_low"),
        Example("corpus/compile/onnx_unsupported_op_old_round.txt", "compile.onnx_opset_too_low"),
        Example("corpus/compile/onnx_tril_opset13_torchscript_exporter_captured.txt", "compile.onnx_opset_too_low"),
        Example("corpus/compile/onnx_fft2_no_symbolic_captured.txt", "compile.onnx_unsupported_op"),
        Example("corpus/compile/onnx_unsupported_op_no_symbolic.txt", "compile.onnx_unsupported_op"),
        Example("corpus/compile/onnx_unsupported_op_randint.txt", "compile.onnx_unsupported_op"),
        Example("corpus/compile/onnx_unsupported_op_old_request.txt", "compile.onnx_unsupported_op"),
        Example("corpus/compile/onnx_unsupported_opset_version.txt", "compile.onnx_opset_version"),
        Example("corpus/compile/onnx_unsupported_opset_version_yolov5.txt", "compile.onnx_opset_version"),
        Example("corpus/compile/onnx_symbolic_value_error.txt", "compile.onnx_symbolic_value"),
        Example("corpus/compile/onnx_symbolic_constant_old.txt", "compile.onnx_symbolic_value"),
        Example("corpus/compile/onnx_dynamo_torch_export_step1.txt", "compile.onnx_dynamo_export"),
        Example("corpus/compile/onnx_dynamo_torch_export_keyerror.txt", "compile.onnx_dynamo_export"),
        Example("corpus/compile/onnx_dynamo_export_exporter_error.txt", "compile.onnx_dynamo_export"),
    ),
)
def onnx(ctx: Context) -> RuleHit | None:
    """torch.onnx.export failures: operators without a symbolic, opset numbers, symbolic values, the dynamo exporter."""
    m = ctx.search(r"Exporting the operator '?([\w:.]+)'? to ONNX opset version (\d+) is not supported")
    if m:
        return _onnx_operator(ctx, m.group(1), int(m.group(2)))
    m = ctx.search(r"Unsupported ONNX opset version: (\d+)")
    if m:
        version = int(m.group(1))
        cause = (f"The ONNX exporter of the installed PyTorch does not know opset {version}: each release supports opsets up to a "
                 "maximum, and the requested one is newer than that (or the exporter path in use supports fewer opsets).")
        fixes = [remedy("onnx-export-errors#lower-opset"), remedy("onnx-export-errors#upgrade-torch-for-opset")]
        found = with_location(ctx, [error_fact(ctx), Fact("opset", f"requested opset {version}")])
        return hit("compile.onnx_opset_version", "compile_error", f"ONNX opset {version} not supported by this PyTorch", cause, fixes,
                   _ONNX_DOCS, found, 0.9, facts=Facts(numbers={"opset": version}))
    m = ctx.search(r"SymbolicValueError: ([^\n]+)|ONNX symbolic expected (a constant value|[^\n\"]+)")
    if m:
        what = (m.group(1) or f"ONNX symbolic expected {m.group(2)}").strip()
        cause = ("While translating an operator to ONNX, the exporter needed one of its arguments as a fixed value (a constant "
                 "or a known type), but in the traced graph that argument is computed at run time from tensors. "
                 f"The exporter reported: {what[:200]}.")
        fixes = [remedy("onnx-export-errors#plain-python-constants"), remedy("onnx-export-errors#dynamo-exporter-constants")]
        return hit("compile.onnx_symbolic_value", "compile_error", "ONNX exporter needed a constant value", cause, fixes,
                   _ONNX_DOCS, with_location(ctx, [error_fact(ctx)]), 0.85, facts=Facts(names=(what[:120],)))
    m = ctx.search(r"Failed to export the model with torch\.export|TorchExportError|OnnxExporterError|Failed to export the model to ONNX")
    if m:
        summary = re.search(r"## Exception summary\s*\n+\s*(<class '[^']+'>: [^\n]+)", ctx.failure.text)
        step1 = bool(ctx.search(r"Failed to export the model with torch\.export|TorchExportError"))
        cause = ("The dynamo-based ONNX exporter failed" + (" at its first step, capturing the model with torch.export" if step1 else "")
                 + ": the model contains code torch.export cannot capture, or the exporter met an operator it cannot translate."
                 + (f" The underlying error was {summary.group(1)[:200]}." if summary else
                    " The real error is the one the report or the traceback above it names, not the wrapper message."))
        fixes = [remedy("torch-export-errors#export-alone-first"), remedy("onnx-export-errors#torchscript-exporter")]
        found = [error_fact(ctx)] + ([Fact("detail", f"underlying error: {summary.group(1)[:200]}")] if summary else [])
        return hit("compile.onnx_dynamo_export", "compile_error", "Dynamo-based ONNX export failed", cause, fixes,
                   _ONNX_DOCS, with_location(ctx, found), 0.85, facts=Facts(names=(summary.group(1)[:120],) if summary else ()))
    return None


def _onnx_operator(ctx: Context, op: str, opset: int) -> RuleHit:
    """An operator the exporter cannot translate at the requested opset."""
    added = ctx.search(r"Support for this operator was added in version (\d+)")
    name = op if "::" in op else f"aten::{op}"
    found = with_location(ctx, [error_fact(ctx), Fact("operator", f"{name} at opset {opset}")])
    if added:
        need = int(added.group(1))
        cause = (f"`{name}` has an ONNX translation only from opset {need} on, and the export asked for opset {opset}. "
                 "The operator itself is fine; the target opset is too old for it.")
        fixes = [remedy("onnx-export-errors#raise-opset", required_opset=need),
                 remedy("onnx-export-errors#avoid-op-old-opset", op=name, opset=opset)]
        return hit("compile.onnx_opset_too_low", "compile_error", f"`{name}` needs ONNX opset {need}", cause, fixes, _ONNX_DOCS,
                   found, 0.93, facts=Facts(names=(name,), numbers={"opset": opset, "required_opset": need}))
    cause = (f"The exporter has no ONNX translation (symbolic function) for `{name}` at opset {opset}, and no later opset "
             "is named: this operator cannot be exported as is by this exporter.")
    fixes = [
        remedy("onnx-export-errors#dynamo-exporter-operators"),
        remedy("onnx-export-errors#custom-symbolic", op=name, opset=opset),
        remedy("onnx-export-errors#rewrite-without-op", op=name),
        remedy("onnx-export-errors#upgrade-torch-operators"),
    ]
    return hit("compile.onnx_unsupported_op", "compile_error", f"No ONNX export for `{name}`", cause, fixes, _ONNX_DOCS, found, 0.9,
               facts=Facts(names=(name,), numbers={"opset": opset}))


# ---------------------------------------------------------------------------------------------
# torch.export
# ---------------------------------------------------------------------------------------------


# torch.export's own validation of the dynamic_shapes argument against the example inputs (torch/export/dynamic_shapes.py).
_DYNAMIC_SHAPES_SPEC = (r"`dynamic_shapes` is specified as a dict, its top-level keys|structure of `inputs` and `dynamic_shapes`"
                        r"|Expected dynamic shape spec .{0,200}to have the same length")


def _exporting(ctx: Context) -> bool:
    """Whether the failure happened under torch.export (frames or the export epilogue)."""
    if any(re.search(r"[/\\]torch[/\\]_?export[/\\]", f.file) for f in ctx.failure.frames):
        return True
    return bool(re.search(r"occurred when calling torch\.export\.export|torch\.export\.export\(|draft_export|_export_to_torch_ir", ctx.failure.text))


@rule(
    "compile.export",
    category="compile_error",
    docs=_EXPORT_DOCS,
    reads=("CompileError", "RuntimeError", "text"),
    priority=59,
    outcomes=("compile.export_data_dependent", "compile.dynamic_constraint", "compile.dynamic_size_one", "compile.export_dim_range", "compile.export_unsupported"),
    examples=(
        Example("corpus/compile/export_data_dependent_branch_captured.txt", "compile.export_data_dependent"),
        Example("corpus/compile/export_constraints_violated_dim_captured.txt", "compile.dynamic_constraint"),
        Example("corpus/compile/compile_mark_dynamic_specialized.txt", "compile.dynamic_constraint"),
        Example("corpus/compile/export_dim_example_size_one_captured.txt", "compile.dynamic_size_one"),
        Example("corpus/compile/export_dim_range_captured.txt", "compile.export_dim_range"),
        Example("corpus/compile/export_strict_dynamic_branch_captured.txt", "compile.export_data_dependent"),
        Example("corpus/compile/export_strict_unsupported_context_manager_captured.txt", "compile.export_unsupported"),
    ),
)
def export(ctx: Context) -> RuleHit | None:
    """torch.export failures: data-dependent guards, dynamic-shape constraints, Dim ranges, untraceable code."""
    m = ctx.search(r"Constraints violated \((.*?)\)!")
    if m or ctx.search(r"ConstraintViolationError: (?!\d+ not in range)"):
        return _constraint(ctx, m.group(1) if m else None)
    if not _exporting(ctx):
        return None
    if ctx.search(_DYNAMIC_SHAPES_SPEC):
        return None  # the dynamic_shapes argument does not line up with the inputs: that document answers, before any tracing
    where = _raising_call(ctx) or _user_code(ctx)
    rng = ctx.search(r"(?<!\d)(\d+) not in range \[(\d+|-?inf), (\d+|inf)\]")
    if rng:
        value, low, high = rng.groups()
        cause = (f"An example input has size {value} in a dimension declared dynamic with range [{low}, {high}]: "
                 "torch.export checks the example inputs against every Dim's min/max before tracing.")
        fixes = [remedy("torch-export-errors#widen-dim-range", got=value)]
        found = with_location(ctx, [error_fact(ctx), Fact("shape", f"example size {value} outside [{low}, {high}]")])
        return hit("compile.export_dim_range", "compile_error", "Example input outside its Dim range", cause, fixes, _EXPORT_DOCS,
                   found, 0.9, facts=Facts(numbers={"size": float(value)}))
    if ctx.search(r"GuardOnDataDependentSymNode|Could not guard on data-dependent expression|Data-dependent|data dependent|Dynamic control flow is not supported"):
        expr = ctx.search(r"data-dependent expression ([^\n]{1,500}?) \(unhinted")
        cause = ("torch.export met a decision that depends on tensor values rather than shapes"
                 + (f" (`{expr.group(1)}`)" if expr else "") + (f" at {where}" if where else "")
                 + ". An exported program must work for all inputs, so a Python `if`, a size or an index computed from data "
                 "cannot be fixed at export time.")
        fixes = [remedy("torch-export-errors#torch-cond"), remedy("torch-export-errors#torch-check-bounds"), remedy("torch-export-errors#draft-export")]
        found = with_location(ctx, [error_fact(ctx)] + ([Fact("location", f"user code: {where}")] if where else []))
        return hit("compile.export_data_dependent", "compile_error", "Data-dependent control flow under torch.export", cause, fixes,
                   _EXPORT_DOCS, found, 0.9, facts=Facts(names=(expr.group(1),) if expr else ()))
    m = ctx.search(r"torch\._dynamo\.exc\.(Unsupported|UserError): ([^\n]+)")
    if m:
        cause = (f"torch.export (strict mode traces with dynamo) could not capture the model: {m.group(2).strip()[:200]}"
                 + (f" at {where}" if where else "") + ".")
        fixes = [remedy("torch-export-errors#non-strict"), remedy("torch-export-errors#move-python-out")]
        return hit("compile.export_unsupported", "compile_error", "torch.export could not trace the model", cause, fixes, _EXPORT_DOCS,
                   with_location(ctx, [error_fact(ctx)]), 0.85, facts=Facts(names=(m.group(2).strip()[:120],)))
    return None


def _constraint(ctx: Context, dims: str | None) -> RuleHit:
    """A dimension declared dynamic that the traced code forces to one value."""
    const = ctx.search(r"specialized it to be a constant \((\d+)\)")
    exporting = _exporting(ctx)
    names = tuple(d.strip() for d in re.split(r",\s*(?![^\[]{0,300}\])", dims)) if dims else ()
    if const and const.group(1) in ("0", "1"):
        size = const.group(1)
        cause = ("A dimension was declared dynamic" + (f" ({dims})" if dims else "") + f", but the example input has size {size} there. "
                 "Sizes 0 and 1 are special-cased when tracing (broadcasting behaves differently), so the tracer specializes them "
                 "instead of treating them as a symbol, which contradicts the dynamic declaration.")
        fixes = [
            remedy("torch-export-errors#example-size-two"),
            remedy("torch-export-errors#let-tracer-decide-export") if exporting else remedy("torch-export-errors#let-tracer-decide-compile"),
        ]
        return hit("compile.dynamic_size_one", "compile_error", f"Dynamic dimension traced with an example of size {size}", cause, fixes,
                   _EXPORT_DOCS, with_location(ctx, [error_fact(ctx)]), 0.9, facts=Facts(names=names, numbers={"specialized_to": float(size)}))
    cause = ("A dimension was declared dynamic" + (f" ({dims})" if dims else "")
             + ", but the traced code only works for one size of it" + (f" ({const.group(1)})" if const else "")
             + ": some operation (a hard-coded reshape/view, a constant-sized tensor combined with the input, a Python branch on the size) "
             "ties that size to a constant, which contradicts the dynamic declaration.")
    fixes = [remedy("torch-export-errors#find-specializing-op")]
    if exporting:
        fixes.append(remedy("torch-export-errors#declare-static-or-auto"))
    else:
        fixes.append(remedy("dynamo-errors#maybe-mark-dynamic"))
    found = with_location(ctx, [error_fact(ctx)])
    return hit("compile.dynamic_constraint", "compile_error", "Dynamic dimension was specialized to a constant", cause, fixes,
               _EXPORT_DOCS if exporting else ("dynamo-errors", "torch-export-errors"), found, 0.88,
               facts=Facts(names=names, numbers={"specialized_to": float(const.group(1))} if const else {}))


# ---------------------------------------------------------------------------------------------
# torch.compile
# ---------------------------------------------------------------------------------------------


@rule(
    "compile.dynamo",
    category="compile_error",
    docs=("dynamo-errors", "inductor-backend-failures"),
    reads=("CompileError", "RuntimeError", "text"),
    priority=62,
    outcomes=("compile.dynamo", "compile.recompiles", "compile.data_dependent"),
    examples=(
        Example("captured/cpu/compile-fullgraph-print-in-forward", "compile.dynamo"),
        Example("captured/cpu/compile-fullgraph-train-step-backward", "compile.dynamo"),
        Example("realworld/dev/pytorch-133965-dynamo-unsupported-abc", "compile.dynamo"),
        Example("realworld/dev/dion-dynamo-recompile-limit-fullgraph", "compile.recompiles"),
        Example("realworld/dev/heavyball-dynamo-cache-limit-exceeded", "compile.recompiles"),
        Example("corpus/compile/cache_size_limit_old_torchdynamo_resnet.txt", "compile.recompiles"),
        Example("corpus/compile/cache_size_limit_unsupported_reached.txt", "compile.recompiles"),
        Example("captured/cpu/compile-early-exit-branch-fullgraph", "compile.data_dependent"),
        Example("captured/cuda/compile-fullgraph-data-dependent-branch", "compile.data_dependent"),
        Example("corpus/compile/dynamo_dynamic_control_flow_torch_cond.txt", "compile.data_dependent"),
        Example("corpus/compile/dynamo_dynamic_control_flow_functorch_cond.txt", "compile.data_dependent"),
    ),
)
def dynamo(ctx: Context) -> RuleHit | None:
    """Graph breaks under fullgraph, unsupported constructs, data-dependent guards, recompile limits."""
    m = ctx.search(r"torch\._dynamo\.exc\.(\w+)|Unsupported: ([^\n]+)|GuardOnDataDependentSymNode|Dynamic control flow is not supported|Could not guard on data-dependent expression|(?:recompile_limit|cache_size_limit) \((\d+)\)|torch(?:\._)?dynamo hit config\.\w+|CacheLimitExceeded|RecompileLimitExceeded|FailOnRecompileLimitHit")
    if not m and not (ctx.exc_type in ("Unsupported", "UserError", "InternalTorchDynamoError", "TorchRuntimeError", "ObservedException") and "torch._dynamo" in (ctx.failure.exc_type or "")):
        return None
    if ctx.search(r"BackendCompilerFailed|InductorError|CppCompileError|InvalidCxxCompiler|TritonMissing|Cannot find a working triton"):
        return None  # the inductor rule explains backend failures
    if ctx.search(r"Cannot access data pointer of Tensor \(e\.g\. FakeTensor"):
        return None  # a custom kernel reached by the tracer: that document answers, whichever dynamo error wraps it
    if ctx.search(_DYNAMIC_SHAPES_SPEC):
        return None  # export's dynamic_shapes argument does not line up with the inputs (raised as a UserError): that document answers
    kind = (m.group(1) if m and m.group(1) else ctx.exc_type) or "Unsupported"
    where = _user_code(ctx)
    found = [error_fact(ctx)]
    if where:
        found.append(Fact("location", f"traced user code: {where}"))
    docs = ("dynamo-errors", "inductor-backend-failures")
    reason = ctx.search(r"(?:Unsupported|UserError):\s*([^\n]+)")
    expl = ctx.search(r"Explanation:\s*([^\n]+)")
    if ctx.search(r"recompile_limit|cache_size_limit|hit config\.(?:recompile|cache_size)_limit|CacheLimitExceeded|RecompileLimitExceeded|FailOnRecompileLimitHit"):
        fn = ctx.search(r"function: '(\w+)'")
        last = ctx.search(r"last reason: ([^\n]+)")
        cause = ("torch.compile recompiled " + (f"`{fn.group(1)}`" if fn else "the function") + " as many times as its limit allows and stopped compiling it: "
                 "a guard keeps failing between calls" + (f" (last reason: {last.group(1).strip()[:160]})" if last else "")
                 + ", so every new value of that input (a size, a Python number, an attribute) needs a new graph.")
        fixes = [remedy("dynamo-errors#log-recompiles"), remedy("dynamo-errors#dynamic-or-stable-input"), remedy("dynamo-errors#raise-recompile-limit")]
        facts = Facts(names=(fn.group(1),) if fn else ())
        return hit("compile.recompiles", "compile_error", "torch.compile recompile limit reached", cause, fixes, docs, found, 0.9, facts=facts)
    if ctx.search(r"GuardOnDataDependentSymNode|Could not guard on data-dependent expression|[Dd]ata-dependent|Dynamic control flow is not supported"):
        cause = ("The compiled code takes a Python decision (a branch, a size or an index) from a value that depends on tensor data"
                 + (f" at {where}" if where else "")
                 + "; such values are unknown while tracing, so the graph cannot include that decision.")
        fixes = [remedy("dynamo-errors#decision-in-tensor-ops"), remedy("dynamo-errors#allow-graph-break")]
        return hit("compile.data_dependent", "compile_error", "Data-dependent control flow under torch.compile", cause, fixes, docs, found, 0.9)
    detail = (reason.group(1).strip() if reason else "") or (expl.group(1).strip() if expl else "")
    fullgraph = bool(ctx.search(r"fullgraph|graph break", re.I))
    cause = (f"TorchDynamo could not trace the function ({kind}" + (f": {detail[:200]}" if detail else "") + ")"
             + (f" at {where}" if where else "") + ". "
             + ("With fullgraph=True any graph break is an error; without it, dynamo would fall back to Python for that part. " if fullgraph else "")
             + "The construct named above is outside what dynamo can put in a graph.")
    fixes = [remedy("dynamo-errors#list-graph-breaks"), remedy("dynamo-errors#compiler-disable"), remedy("dynamo-errors#drop-fullgraph"),
             remedy("dynamo-errors#run-eagerly")]
    return hit("compile.dynamo", "compile_error", f"torch.compile could not trace the model ({kind})", cause, fixes, docs, found, 0.9,
               facts=Facts(names=(kind,)))


# torch.compile refusing the interpreter: 2.0 said "Python 3.11+ not yet supported for torch.compile", 2.2-2.5 "Dynamo is not
# supported on Python 3.12+" (3.13+ later).
_PY_UNSUPPORTED = r"Dynamo is not supported on Python (3\.\d+)\+|Python (3\.\d+)\+ (?:is )?not yet supported for torch\.compile|torch\.compile is not supported on Python (3\.\d+)"
_WINDOWS_UNSUPPORTED = r"Windows not yet supported for torch\.compile"
# The first release whose torch.compile accepts each Python (PyTorch issues #104918, #120233, #144048, #169875).
_FIRST_TORCH_FOR_PYTHON = {"3.11": "2.1", "3.12": "2.4", "3.13": "2.6", "3.14": "2.10"}


@rule(
    "compile.python_version",
    category="compile_error",
    docs=("torch-compile-python-version", "dynamo-errors"),
    reads=("CompileError", "RuntimeError", "text"),
    priority=60,
    outcomes=("compile.python_unsupported", "compile.windows_unsupported"),
    examples=(
        Example("corpus/compile/dynamo_windows_audioldm2.txt", "compile.windows_unsupported"),
        Example("corpus/compile/dynamo_windows_openvino_webui.txt", "compile.windows_unsupported"),
        Example("corpus/compile/dynamo_windows_alpaca_lora.txt", "compile.windows_unsupported"),
        Example("corpus/compile/dynamo_python312_chattts.txt", "compile.python_unsupported"),
        Example("corpus/compile/dynamo_python312_chattts_windows.txt", "compile.python_unsupported"),
        Example("corpus/compile/dynamo_python312_diffusers_pytest.txt", "compile.python_unsupported"),
        Example("corpus/compile/dynamo_python311_torch201.txt", "compile.python_unsupported"),
    ),
)
def python_version(ctx: Context) -> RuleHit | None:
    """torch.compile refused to run because the installed PyTorch predates support for this Python version (or for Windows)."""
    m = ctx.search(_PY_UNSUPPORTED) or re.search(_PY_UNSUPPORTED, ctx.failure.text)
    if not m:
        if ctx.search(_WINDOWS_UNSUPPORTED) or re.search(_WINDOWS_UNSUPPORTED, ctx.failure.text):
            return _windows_unsupported(ctx)
        return None
    version = next(g for g in m.groups() if g)
    first = _FIRST_TORCH_FOR_PYTHON.get(version)
    older = f"3.{int(version.split('.')[1]) - 1}"
    cause = (f"torch.compile (its Dynamo front end) refuses to run on Python {version} and newer in the installed PyTorch: each PyTorch release "
             "supports torch.compile only on the Python versions that existed when it was built, because Dynamo reads and rewrites "
             "Python bytecode, whose format changes with every Python version. The interpreter is newer than this PyTorch's torch.compile. "
             "Nothing is wrong with the model; code that calls torch.compile (directly or inside a library) stops at that call.")
    fixes = [
        remedy("torch-compile-python-version#upgrade-torch-for-python", version=version, min_torch=first) if first else
        remedy("torch-compile-python-version#upgrade-torch-for-python-latest", version=version),
        remedy("torch-compile-python-version#older-python", older_python=older, older_python_tag=older.replace(".", "")),
        remedy("torch-compile-python-version#run-uncompiled"),
    ]
    return hit("compile.python_unsupported", "compile_error", f"torch.compile not supported on Python {version} by this PyTorch", cause, fixes,
               ("torch-compile-python-version", "dynamo-errors"), [error_fact(ctx), Fact("python", f"Python {version} or newer")], 0.95,
               facts=Facts(names=(f"python{version}",), call="torch.compile"))


# Dynamo refusing an FSDP1 module that exposes flattened parameters: the older assertion, or the later graph-break type.
_FSDP_FLAT = r"Dynamo only supports FSDP with use_orig_params=True|FSDP with use_orig_params=False"


@rule(
    "compile.fsdp_flat_params",
    category="compile_error",
    docs=("compile-ddp-fsdp", "dynamo-errors"),
    reads=("AssertionError", "RuntimeError", "CompileError", "text"),
    priority=60,
    outcomes=("compile.fsdp_flat_params",),
    examples=(Example("corpus/compile/dynamo_fsdp_flat_params_trainer.txt", "compile.fsdp_flat_params"),),
)
def fsdp_flat_params(ctx: Context) -> RuleHit | None:
    """torch.compile over an FSDP1 module built with use_orig_params=False (the FSDP1 default)."""
    if not (ctx.search(_FSDP_FLAT) or re.search(_FSDP_FLAT, ctx.failure.text)):
        return None
    cause = ("torch.compile met a module wrapped by FSDP (version 1) with use_orig_params=False, its default: such a wrapper replaces the "
             "parameters with flattened ones that Dynamo cannot trace. A framework that wraps the model itself (a trainer with its fsdp and "
             "torch_compile options) builds the wrapper with whatever value its own FSDP settings give.")
    fixes = [remedy("compile-ddp-fsdp#fsdp-use-orig-params"), remedy("compile-ddp-fsdp#fsdp2")]
    return hit("compile.fsdp_flat_params", "compile_error", "torch.compile needs FSDP with use_orig_params=True", cause, fixes,
               ("compile-ddp-fsdp", "dynamo-errors"), [error_fact(ctx)], 0.93, facts=Facts(names=("use_orig_params",), call="torch.compile"))


def _windows_unsupported(ctx: Context) -> RuleHit:
    """torch.compile refused to run on Windows: releases of the 2.0-2.4 era did not support it there."""
    cause = ("The installed PyTorch refuses torch.compile on Windows: releases of the 2.0 to 2.4 era did not support it there and raise at the "
             "first torch.compile call (directly or inside a library). Support came later, CPU first (from 2.5 on, with the MSVC "
             "compiler); compiled GPU kernels on Windows also need a Windows build of Triton. Nothing is wrong with the model itself.")
    fixes = [remedy("torch-compile-python-version#run-uncompiled-windows"), remedy("torch-compile-python-version#linux-or-wsl"),
             remedy("torch-compile-python-version#upgrade-torch-windows")]
    return hit("compile.windows_unsupported", "compile_error", "torch.compile not supported on Windows by this PyTorch", cause, fixes,
               ("torch-compile-python-version", "dynamo-errors"), [error_fact(ctx)], 0.93, facts=Facts(names=("windows",), call="torch.compile"))


# ptxas (run by Triton for every kernel) rejecting the GPU's architecture: "ptxas fatal : Value 'sm_121a' is not defined for option
# 'gpu-name'" (also "ptxas-blackwell fatal"), or a description of --gpu-name=sm_... not being recognised.
_PTXAS_ARCH = (r"Value '(sm_\w+)' is not defined for option 'gpu-name'|--gpu-name[= ](sm_\w+)[^\n]{0,60}\bnot (?:recognized|recognised|defined|supported)"
               r"|'(sm_\w+)' is not a recognized processor")


@rule(
    "compile.inductor",
    category="compile_error",
    docs=("inductor-backend-failures", "dynamo-errors", "triton-ptxas-arch", "cuda-ptx-unsupported-toolchain", "triton-version-mismatch"),
    reads=("CompileError", "RuntimeError", "text"),
    priority=61,
    also=("environment_error",),
    outcomes=("compile.backend", "compile.cxx", "compile.triton", "compile.ptxas_arch", "compile.triton_driver_image", "compile.triton_version"),
    examples=(
        Example("corpus/compile/ptxas_gpu_name_sm121a_gb10.txt", "compile.ptxas_arch"),
        Example("corpus/compile/ptxas_gpu_name_sm121a_triton.txt", "compile.ptxas_arch"),
        Example("corpus/compile/ptxas_gpu_name_sm120_inductor_log.txt", "compile.ptxas_arch"),
        Example("corpus/compile/ptxas_gpu_name_sm110a_thor.txt", "compile.ptxas_arch"),
        Example("corpus/compile/ptxas_gpu_name_sm89_prose.txt", "compile.ptxas_arch"),
        Example("corpus/compile/triton_kernel_image_invalid_inductor.txt", "compile.triton_driver_image"),
        Example("realworld/dev/chattts-ui-inductor-no-cxx-windows-suppress", "compile.cxx"),
        Example("realworld/dev/marie-inductor-no-cxx-logger-warning", "compile.cxx"),
        Example("corpus/compile/inductor_backend_lowering.txt", "compile.backend"),
        Example("corpus/compile/inductor_triton_missing.txt", "compile.triton"),
        Example("corpus/compile/inductor_triton_missing_windows_old.txt", "compile.triton"),
        Example("corpus/compile/triton_newer_than_torch_launch_enter_hook.txt", "compile.triton_version"),
    ),
)
def inductor(ctx: Context) -> RuleHit | None:
    """Backend (inductor/triton/C++ toolchain) failures."""
    arch = _ptxas_arch(ctx)
    if arch:
        return arch
    image = _triton_driver_image(ctx)
    if image:
        return image
    if ctx.search(r"Failed to find C compiler\. Please specify via CC|libcuda\.so cannot found|cannot find -lcuda\b"):
        return None  # Triton could not build its host-side launcher (compiler, libcuda): that document answers, whatever wraps it
    m = ctx.search(r"BackendCompilerFailed|InductorError|CppCompileError|InvalidCxxCompiler|No working C\+\+ compiler found|TritonMissing|Cannot find a working triton installation|Python\.h: No such file or directory|LoweringException|GPUTooOldForTriton")
    if not m:
        return None
    found = [error_fact(ctx)]
    backend = ctx.search(r"backend='(\w+)' raised")
    if backend:
        found.append(Fact("backend", f"backend: {backend.group(1)}"))
    docs = ("inductor-backend-failures", "dynamo-errors")
    if ctx.search(r"InvalidCxxCompiler|No working C\+\+ compiler found|CppCompileError|Python\.h: No such file"):
        missing_headers = bool(ctx.search(r"Python\.h: No such file"))
        cause = ("Inductor generates C++ for CPU code and needs a working C++ compiler"
                 + (" plus the Python development headers (Python.h is missing)" if missing_headers else "") + "; the compile step failed on this machine.")
        fixes = [remedy("inductor-backend-failures#install-cxx-compiler"), remedy("inductor-backend-failures#aot-eager-backend"),
                 remedy("inductor-backend-failures#suppress-errors")]
        return hit("compile.cxx", "compile_error", "torch.compile: C++ compiler problem", cause, fixes, docs, found, 0.92)
    # Triton's own check names the GPU and its capability (below 7.0): a GPU Triton cannot generate code for.
    too_old = ctx.search(r"too old to be supported by the triton GPU compiler|Triton only supports devices of CUDA Capability|GPUTooOldForTriton")
    if too_old or ctx.search(r"TritonMissing|Cannot find a working triton installation"):
        old_gpu = ctx.search(r"(?:too old|CUDA capability|compute capability)[^\n]*")
        cause = ("Inductor generates GPU kernels with Triton, and no usable Triton was found"
                 + (f" ({old_gpu.group(0).strip()[:160]})" if old_gpu else " (not installed, or not working on this GPU)") + ".")
        fixes = [remedy("inductor-backend-failures#install-triton")]
        if too_old:
            cause = ("Inductor generates GPU kernels with Triton, which only targets GPUs of compute capability 7.0 and newer; this GPU is older"
                     + (f" ({old_gpu.group(0).strip()[:160]})" if old_gpu else "") + ", so torch.compile's default backend cannot run on it.")
            fixes = [remedy("triton-version-mismatch#cpu-or-aot-eager")]
        return hit("compile.triton", "compile_error", "torch.compile: Triton missing" if not too_old else "torch.compile: GPU too old for Triton",
                   cause, fixes, docs + (("triton-version-mismatch",) if too_old else ()), found, 0.92)
    # Inductor reaching for a Triton internal that the installed Triton does not have: the two packages are from different release pairs.
    skew = ctx.search(r"(?:AttributeError|ImportError): (?:type object 'CompiledKernel' has no attribute '\w+'|cannot import name '\w+' from 'triton[\w.]*'|module 'triton[\w.]*' has no attribute '\w+')")
    if skew:
        cause = (f"Inductor's generated code uses a Triton internal that the installed Triton does not provide ({skew.group(0)[:160]}): "
                 "torch and Triton come from different release pairs, usually after Triton was upgraded or downgraded on its own.")
        fixes = [remedy("triton-version-mismatch#reinstall-paired-triton"), remedy("inductor-backend-failures#aot-eager-backend")]
        return hit("compile.triton_version", "environment_error", "torch and Triton versions do not match", cause, fixes,
                   ("triton-version-mismatch", "inductor-backend-failures"), found, 0.9)
    inner = ctx.search(r"raised:\s*\n?\s*(\w+(?:Error|Exception)?: [^\n]+)")
    cause = ("The compiler backend (" + (backend.group(1) if backend else "inductor") + ") failed while compiling the captured graph"
             + (f": {inner.group(1)[:200]}" if inner else "") + ". Unless the same code fails eagerly, this is a problem in the backend for a particular op or shape, not in your code.")
    fixes = [remedy("inductor-backend-failures#bisect-backends"), remedy("inductor-backend-failures#minimal-repro"),
             remedy("inductor-backend-failures#clear-compile-cache")]
    return hit("compile.backend", "compile_error", "torch.compile backend failed", cause, fixes, docs, found, 0.9,
               facts=Facts(names=(backend.group(1),) if backend else ()))


# ---------------------------------------------------------------------------------------------
# TorchScript
# ---------------------------------------------------------------------------------------------


def _ptxas_arch(ctx: Context) -> RuleHit | None:
    """Triton's ptxas does not know the GPU architecture it was asked to compile for."""
    m = ctx.search(_PTXAS_ARCH) or re.search(_PTXAS_ARCH, ctx.failure.text)
    if not m:
        return None
    arch = next(g for g in m.groups() if g)
    # The repro command names the ptxas that ran; the path's start is found by hand (a leading \S* would be quadratic).
    text = ctx.failure.text
    bundled = re.search(r"triton[/\\]backends[/\\]nvidia[/\\]bin[/\\]ptxas[\w-]*", text)
    found = [error_fact(ctx), Fact("architecture", f"ptxas was asked for {arch}")]
    if bundled:
        start = max(text.rfind(c, 0, bundled.start()) for c in " \t\n'\"`") + 1
        found.append(Fact("ptxas", f"the ptxas used is the one bundled with Triton: {text[start:bundled.end()][-200:]}"))
    cause = (f"Triton turns each generated kernel into PTX and runs ptxas to assemble it for this GPU ({arch}), but that ptxas does not know "
             f"{arch}: it is older than the GPU architecture. "
             + ("It is the copy bundled with the installed Triton" if bundled else "Triton uses the ptxas bundled with it unless TRITON_PTXAS_PATH points elsewhere")
             + ", and Triton releases ship a ptxas from the CUDA toolkit of their time, so a GPU generation released later is rejected. "
             "Eager PyTorch does not run ptxas, which is why the same model works without torch.compile (and why compiled runs fall back or fail).")
    fixes = [
        remedy("triton-ptxas-arch#triton-ptxas-path", arch=arch, arch_base=arch.rstrip("af")),
        remedy("triton-ptxas-arch#upgrade-torch-triton"),
        remedy("triton-ptxas-arch#no-triton-kernels"),
    ]
    return hit("compile.ptxas_arch", "compile_error", f"Triton's ptxas does not know {arch}", cause, fixes, ("triton-ptxas-arch", "inductor-backend-failures"), found, 0.93,
               facts=Facts(names=(arch,), flags=frozenset({"bundled_ptxas"}) if bundled else frozenset()))


# The driver refusing a kernel Triton built: its bundled ptxas targets a newer CUDA than the driver can load.
_TRITON_IMAGE = (r"Triton Error \[CUDA\]: (device kernel image is invalid|the provided PTX was compiled with an unsupported toolchain[^\n]*)"
                 r"|CUDA_ERROR_(?:INVALID_IMAGE|UNSUPPORTED_PTX_VERSION)")


def _triton_driver_image(ctx: Context) -> RuleHit | None:
    """A kernel Triton compiled cannot be loaded by the driver (driver older than the toolkit of Triton's ptxas)."""
    m = ctx.search(_TRITON_IMAGE) or re.search(_TRITON_IMAGE, ctx.failure.text)
    if not m or not (m.group(1) or re.search(r"triton|inductor", ctx.failure.text, re.I)):
        return None
    what = (m.group(1) or m.group(0)).strip()
    cause = (f"Triton compiled the kernel, but the NVIDIA driver refused to load it ({what}). Triton assembles kernels with the ptxas "
             "bundled in its wheel, which belongs to a recent CUDA toolkit; a driver older than that toolkit cannot load what it produces. "
             "Eager PyTorch uses precompiled kernels that the driver accepts, which is why the same code runs without torch.compile.")
    fixes = [
        remedy("cuda-ptx-unsupported-toolchain#update-driver"),
        remedy("cuda-ptx-unsupported-toolchain#triton-ptxas-path"),
        remedy("cuda-ptx-unsupported-toolchain#compare-driver-ptxas"),
        remedy("triton-ptxas-arch#no-triton-kernels"),
    ]
    return hit("compile.triton_driver_image", "compile_error", "The driver cannot load Triton's kernel", cause, fixes,
               ("cuda-ptx-unsupported-toolchain", "triton-ptxas-arch", "inductor-backend-failures"), [error_fact(ctx)], 0.86,
               facts=Facts(names=("triton",)))


def _loading_script(ctx: Context) -> bool:
    """Whether a TorchScript error comes from loading a serialized model (torch.jit.load, libtorch, mobile)."""
    if any(re.search(r"jit[/\\]_serialization\.py", f.file) for f in ctx.failure.frames):
        return True
    return bool(re.search(r"torch\.jit\.load|import_ir_module|code/__torch__|_load_for_lite_interpreter|torch::jit::load", ctx.failure.text))


def _ts_search(ctx: Context, pattern: str) -> re.Match[str] | None:
    """TorchScript messages are specific enough to be read from the whole pasted text, where a
    message that follows a bare ``File ...`` line (pasted without its exception type) also lives."""
    return ctx.search(pattern) or re.search(pattern, ctx.failure.text)


@rule(
    "compile.torchscript",
    category="compile_error",
    docs=_TS_DOCS,
    reads=("CompileError", "RuntimeError", "text"),
    priority=63,
    outcomes=("compile.torchscript", "compile.torchscript_builtin", "compile.torchscript_unknown_op", "compile.torchscript_op_on_load",
              "compile.torchscript_type_annotation", "compile.torchscript_attribute", "compile.torchscript_attribute_type",
              "compile.torchscript_arg_type", "compile.torchscript_default_type", "compile.torchscript_python_call",
              "compile.torchscript_overload_tensor_arg"),
    examples=(
        Example("corpus/compile/ts_unsupported_node_yield_captured.txt", "compile.torchscript"),
        Example("corpus/compile/ts_python_builtin_next.txt", "compile.torchscript_builtin"),
        Example("corpus/compile/ts_python_builtin_next_captured.txt", "compile.torchscript_builtin"),
        Example("corpus/compile/ts_python_builtin_open_captured.txt", "compile.torchscript_builtin"),
        Example("corpus/compile/ts_python_builtin_method.txt", "compile.torchscript_builtin"),
        Example("corpus/compile/ts_unknown_builtin_op_type.txt", "compile.torchscript_unknown_op"),
        Example("corpus/compile/ts_unknown_builtin_op_jit_load.txt", "compile.torchscript_op_on_load"),
        Example("corpus/compile/ts_unknown_builtin_op_android.txt", "compile.torchscript_op_on_load"),
        Example("corpus/compile/ts_unknown_type_constructor_typing.txt", "compile.torchscript_type_annotation"),
        Example("corpus/compile/ts_unknown_type_constructor_final.txt", "compile.torchscript_type_annotation"),
        Example("corpus/compile/ts_unknown_type_name.txt", "compile.torchscript_type_annotation"),
        Example("corpus/compile/ts_module_no_attribute_captured.txt", "compile.torchscript_attribute"),
        Example("corpus/compile/ts_nonexistent_attribute_conv.txt", "compile.torchscript_attribute"),
        Example("corpus/compile/ts_nonexistent_attribute_class.txt", "compile.torchscript_attribute"),
        Example("corpus/compile/ts_module_attribute_unconvertible_captured.txt", "compile.torchscript_attribute_type"),
        Example("corpus/compile/ts_expected_value_type_int_captured.txt", "compile.torchscript_arg_type"),
        Example("corpus/compile/ts_expected_value_type_none.txt", "compile.torchscript_arg_type"),
        Example("corpus/compile/ts_expected_value_type_old.txt", "compile.torchscript_arg_type"),
        Example("corpus/compile/ts_default_value_captured.txt", "compile.torchscript_default_type"),
        Example("corpus/compile/ts_overload_unannotated_dim_captured.txt", "compile.torchscript_overload_tensor_arg"),
        Example("corpus/compile/ts_default_value_tensor.txt", "compile.torchscript_default_type"),
        Example("corpus/compile/ts_default_value_old.txt", "compile.torchscript_default_type"),
        Example("corpus/compile/ts_could_not_export_python_call_type.txt", "compile.torchscript_python_call"),
        Example("corpus/compile/ts_could_not_export_autograd_function.txt", "compile.torchscript_python_call"),
    ),
)
def torchscript(ctx: Context) -> RuleHit | None:
    """TorchScript scripting, saving and loading failures, read per message family."""
    site = _script_site(ctx)
    for reader in (_ts_python_call, _ts_unknown_op, _ts_type_annotation, _ts_builtin, _ts_attribute, _ts_default, _ts_arg_type, _ts_overload_arg):
        found = reader(ctx, site)
        if found is not None:
            return found
    m = ctx.search(r"torch\.jit\.frontend\.(\w+): ([^\n]+)|NotSupportedError: ([^\n]+)|UnsupportedNodeError: ([^\n]+)")
    if not m:
        return None
    what = (m.group(2) or m.group(3) or m.group(4) or "").strip().rstrip(":")
    cause = (f"torch.jit.script compiles a typed subset of Python, and this code uses a construct outside it ({what[:160]})"
             + (f" at `{site}`" if site else "") + ".")
    fixes = _ts_common_fixes(site)
    return hit("compile.torchscript", "compile_error", "TorchScript cannot compile this Python construct", cause, fixes, _TS_DOCS,
               _ts_found(ctx, site), 0.85)


def _ts_found(ctx: Context, site: str | None, *extra: Fact) -> list[Fact]:
    return with_location(ctx, [error_fact(ctx), *extra] + ([Fact("location", f"scripted source: `{site}`")] if site else []))


def _ts_common_fixes(site: str | None) -> list:
    return [remedy("torchscript-errors#supported-constructs"), remedy("torchscript-errors#jit-ignore"), remedy("torch-export-errors#capture-another-way")]


def _ts_python_call(ctx: Context, site: str | None) -> RuleHit | None:
    m = _ts_search(ctx, r"Could not export Python function call '([\w.]+)'")
    if not m:
        return None
    name = m.group(1)
    autograd = bool(re.search(r"(?:Function|Fn|Func)$", name)) or "apply" in (site or "")
    cause = (f"The scripted/traced module still calls the Python function `{name}`, which TorchScript cannot save: a serialized "
             "model may only contain TorchScript code. "
             + ("It looks like a custom torch.autograd.Function, which TorchScript cannot compile." if autograd else
                "It is a plain Python call that was left in (a helper not scripted, or a builtin with no TorchScript equivalent)."))
    fixes = [remedy("torchscript-errors#replace-or-script-autograd" if autograd else "torchscript-errors#replace-or-script-call", function=name)]
    if autograd:
        # Libraries often ship a fused/memory-efficient autograd function next to a plain version of the same layer.
        fixes.append(remedy("torchscript-errors#plain-layer-for-export"))
    fixes += [remedy("torch-export-errors#export-through-helpers")]
    return hit("compile.torchscript_python_call", "compile_error", f"Python call `{name}` left in a TorchScript module", cause, fixes,
               _TS_DOCS, _ts_found(ctx, site), 0.88, facts=Facts(call=name, names=(name,)))


def _ts_unknown_op(ctx: Context, site: str | None) -> RuleHit | None:
    m = _ts_search(ctx, r"Unknown builtin op: ([\w:.]+?)\.?(?:\s|$)")
    if not m:
        return None
    op = m.group(1)
    suggestions = re.findall(r"^[ \t]+(\w+::\w+)[ \t]*$", ctx.failure.text, re.M)
    found = _ts_found(ctx, site, Fact("operator", op))
    facts = Facts(names=(op, *suggestions[:3]))
    if _loading_script(ctx):
        custom = not op.startswith("aten::")
        cause = (f"The serialized TorchScript model calls `{op}`, which this runtime does not have. "
                 + (f"`{op.split('::')[0]}` is an extension's operator namespace: its library must be imported/loaded before the model."
                    if custom else "The model was saved by a newer PyTorch than the one loading it (or the runtime is a reduced mobile/C++ build without that operator)."))
        fixes = [remedy("torchscript-errors#same-torch-to-load")]
        if custom:
            fixes.insert(0, remedy("torchscript-errors#load-op-library", op=op, namespace=op.split("::")[0]))
        return hit("compile.torchscript_op_on_load", "compile_error", f"Operator `{op}` missing when loading a TorchScript model", cause,
                   fixes, _TS_DOCS, found, 0.88, facts=facts)
    cause = (f"The scripted code calls something TorchScript resolves to `{op}`, which has no TorchScript schema"
             + (f" (at `{site}`)" if site else "") + ": the method or overload is not supported in TorchScript"
             + (f"; close matches it knows: {', '.join(suggestions[:3])}" if suggestions else "") + ".")
    variant = ("-to-dtype" if op in ("aten::type", "aten::new") else "") + ("-suggested" if suggestions else "")
    fixes = [
        remedy(f"torchscript-errors#supported-equivalent{variant}"),
        *_ts_common_fixes(site)[1:],
    ]
    return hit("compile.torchscript_unknown_op", "compile_error", f"`{op}` is not available in TorchScript", cause, fixes, _TS_DOCS,
               found, 0.88, facts=facts)


def _ts_type_annotation(ctx: Context, site: str | None) -> RuleHit | None:
    m = _ts_search(ctx, r"Unknown type constructor ([\w.]+)|Unknown type name '([^']+)'")
    if not m:
        return None
    name = m.group(1) or m.group(2)
    cause = (f"TorchScript cannot resolve the type annotation `{name}`" + (f" in `{site}`" if site else "")
             + ": it only understands a fixed set of annotation spellings (torch.Tensor, int, float, bool, str, and "
             "List/Dict/Tuple/Optional imported by name from typing), and this one is not among them.")
    fixes = [remedy("torchscript-errors#spell-type-annotation", type_name=name)]
    return hit("compile.torchscript_type_annotation", "compile_error", f"TorchScript does not know the type `{name}`", cause, fixes,
               _TS_DOCS, _ts_found(ctx, site), 0.88, facts=Facts(names=(name,)))


def _ts_builtin(ctx: Context, site: str | None) -> RuleHit | None:
    m = _ts_search(ctx, r"Python builtin <built-in (?:function|method) (\w+)[^>]*> is currently not supported in Torchscript")
    if not m:
        return None
    name = m.group(1)
    cause = (f"The scripted code calls the Python builtin `{name}`" + (f" (`{site}`)" if site else "")
             + ", which TorchScript does not implement: scripting only accepts the builtins it has its own version of.")
    fixes = [
        remedy("torchscript-errors#replace-builtin", function=name),
        *_ts_common_fixes(site)[1:],
    ]
    return hit("compile.torchscript_builtin", "compile_error", f"Python builtin `{name}` not supported in TorchScript", cause, fixes,
               _TS_DOCS, _ts_found(ctx, site), 0.9, facts=Facts(call=name, names=(name,)))


def _ts_attribute(ctx: Context, site: str | None) -> RuleHit | None:
    m = _ts_search(ctx, r"Module '(\w+)' has no attribute '(\w+)'")
    n = _ts_search(ctx, r"Tried to access nonexistent attribute (?:or method )?'?(\w+)'?(?: of type '([^']+?)(?: \(of Python compilation unit[^']*\))?')?")
    if m:
        owner_name, attr = m.group(1), m.group(2)
    elif n:
        owner_name, attr = n.group(2), n.group(1)
    else:
        return None
    owner = owner_name or "the object"
    conv = _ts_search(ctx, r"failed to convert Python type: '(\w+)'")
    if conv:
        cause = (f"`{owner}.{attr}` exists in Python, but its value (a `{conv.group(1)}` holding values TorchScript cannot type) "
                 "cannot be turned into a TorchScript attribute, so scripted methods cannot read it.")
        fixes = [remedy("torchscript-errors#supported-attribute-type", attribute=attr, module_class=owner_name),
                 remedy("torchscript-errors#read-value-before-scripting")]
        return hit("compile.torchscript_attribute_type", "compile_error", f"`{attr}` has a type TorchScript cannot convert", cause, fixes,
                   _TS_DOCS, _ts_found(ctx, site), 0.88, facts=Facts(names=(owner, attr)))
    cause = (f"The scripted code reads `{attr}` on `{owner}`" + (f" (`{site}`)" if site else "")
             + ", but TorchScript finds no such attribute or method at compile time: it was never set in __init__ (or is set "
             "conditionally / later), it is a Python-only attribute, or the method does not exist in TorchScript's view of that type.")
    fixes = [remedy("torchscript-errors#define-attribute-in-init", attribute=attr), remedy("torchscript-errors#ignore-helper")]
    return hit("compile.torchscript_attribute", "compile_error", f"TorchScript cannot find `{attr}`", cause, fixes, _TS_DOCS,
               _ts_found(ctx, site), 0.88, facts=Facts(names=(owner, attr)))


def _ts_default(ctx: Context, site: str | None) -> RuleHit | None:
    m = _ts_search(ctx, r"Expected a default value of type (\w+)(?: \(inferred\))? on parameter \"(\w+)\"")
    if not m:
        return None
    typ, param = m.groups()
    cause = (f"Parameter `{param}` has no type annotation, so TorchScript assumes it is a {typ}, but its default value is not one. "
             "Unannotated parameters are always taken to be Tensors in TorchScript.")
    fixes = [remedy("torchscript-errors#annotate-default-param", argument=param)]
    return hit("compile.torchscript_default_type", "compile_error", f"Unannotated parameter `{param}` assumed to be a {typ}", cause, fixes,
               _TS_DOCS, _ts_found(ctx, site), 0.9, facts=Facts(argument=param, names=(param,)))


def _ts_arg_type(ctx: Context, site: str | None) -> RuleHit | None:
    m = _ts_search(ctx, r"(?<!\w)(\w+)\(\) Expected a value of type '([^']+)' for argument '(\w+)' but instead found type '([^']+)'")
    if not m:
        return None
    fn, want, arg, got = m.groups()
    inferred = "(inferred)" in want or bool(_ts_search(ctx, r"because it was not annotated"))
    cause = (f"The scripted `{fn}` was called with a {got} for argument `{arg}`, whose TorchScript type is {want.replace(' (inferred)', '')}"
             + (" only because the parameter has no annotation: TorchScript assumes unannotated parameters are Tensors." if inferred else "."))
    fixes = [remedy("torchscript-errors#annotate-optional-arg" if got == "NoneType" else "torchscript-errors#annotate-arg-type",
                    function=fn, argument=arg, got_type=got)]
    if not inferred:
        fixes.append(remedy("torchscript-errors#pass-declared-type"))
    return hit("compile.torchscript_arg_type", "compile_error", f"`{fn}()` argument `{arg}`: expected {want}, got {got}", cause, fixes,
               _TS_DOCS, _ts_found(ctx, site), 0.9, facts=Facts(argument=arg, names=(fn, want, got)))


def _ts_overload_arg(ctx: Context, site: str | None) -> RuleHit | None:
    """No overload of a call accepts an argument TorchScript typed as Tensor (an unannotated parameter, usually)."""
    if not _ts_search(ctx, r"Arguments for call are not valid"):
        return None
    # A variant that wanted a non-tensor value where a Tensor came: the parameter the user meant as an int, list, float...
    m = _ts_search(ctx, r"Expected a value of type '((?:(?!Tensor)[^'])+)' for argument '(?!self')(\w+)' but instead found type 'Tensor( \(inferred\))?'")
    if not m:
        return None
    want, arg = m.group(1), m.group(2)
    plain = re.sub(r"^Optional\[(.*)\]$", r"\1", want)
    if plain == "List[int]" and _ts_search(ctx, r"int\[1\]\?? " + re.escape(arg) + r"\b"):
        plain = "int"  # int[1] in the schema: a single int is accepted too (what a dim argument usually is)
    inferred = bool(m.group(3)) or bool(_ts_search(ctx, r"to be of type 'Tensor' because it was not annotated"))
    func = re.search(r"def (\w+)\(([^)]*)\)", ctx.failure.text)
    param = bool(func and re.search(r"(?<![\w:])" + re.escape(arg) + r"\b(?!\s*:)", func.group(2)))
    cause = (f"TorchScript typed the value passed as `{arg}` as a Tensor, and no variant of the call accepts a Tensor there (they expect {plain})"
             + (f" at `{site}`" if site else "") + ". "
             + ("The value is a parameter without a type annotation, and TorchScript assumes every unannotated parameter is a Tensor, "
                "even one the code always passes an int, float, bool or list to." if inferred or param else
                "Unannotated parameters are assumed to be Tensors, so a parameter meant as an int, float, bool or list must be annotated; "
                "a value computed as a tensor must be converted (`.item()`, `.tolist()`) first."))
    fixes = [remedy("torchscript-errors#annotate-overload-arg", function=func.group(1) if func else None, argument=arg, want_type=plain)]
    if not (inferred or param):
        fixes.append(remedy("torchscript-errors#pass-declared-type"))
    return hit("compile.torchscript_overload_tensor_arg", "compile_error", f"No overload accepts a Tensor for `{arg}` (expected {plain})", cause,
               fixes, _TS_DOCS, _ts_found(ctx, site), 0.88, facts=Facts(argument=arg, names=(arg, plain)))
