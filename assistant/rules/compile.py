"""Graph capture and compilation: torch.compile (dynamo, inductor), torch.export, ONNX export and TorchScript."""

from __future__ import annotations

import re

from assistant.rules.registry import Example, rule
from assistant.rules.base import Context, error_fact, fix, hit, with_location
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
    priority=306,
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
        fixes = [
            fix("Ask for an opset this PyTorch supports", "Lower `opset_version` (or the tool's opset option) until export works; "
                "only raise it again after upgrading torch.", "torch.onnx.export(model, args, 'model.onnx', opset_version=<lower version>)", "onnx-export-errors"),
            fix("Or upgrade PyTorch to a release whose exporter knows this opset", "", "python -m pip install --upgrade torch", "onnx-export-errors"),
        ]
        found = with_location(ctx, [error_fact(ctx), Fact("opset", f"requested opset {version}")])
        return hit("compile.onnx_opset_version", "compile_error", f"ONNX opset {version} not supported by this PyTorch", cause, fixes,
                   _ONNX_DOCS, found, 0.9, facts=Facts(numbers={"opset": version}))
    m = ctx.search(r"SymbolicValueError: ([^\n]+)|ONNX symbolic expected (a constant value|[^\n\"]+)")
    if m:
        what = (m.group(1) or f"ONNX symbolic expected {m.group(2)}").strip()
        cause = ("While translating an operator to ONNX, the exporter needed one of its arguments as a fixed value (a constant "
                 "or a known type), but in the traced graph that argument is computed at run time from tensors. "
                 f"The exporter reported: {what[:200]}.")
        fixes = [
            fix("Pass plain Python values where the operator expects constants", "Sizes, dims, scales and similar arguments "
                "should be ints/floats (or come from `.shape`), not results of tensor arithmetic.", None, "onnx-export-errors"),
            fix("Try the dynamo-based exporter", "It captures the graph with torch.export and handles many values the "
                "TorchScript-based exporter needs as constants.", "torch.onnx.export(model, args, 'model.onnx', dynamo=True)", "onnx-export-errors"),
        ]
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
        fixes = [
            fix("Make torch.export succeed on its own first", "Run torch.export.export on the same model and inputs; its error "
                "names the line to change (data-dependent branches, unsupported Python).",
                "ep = torch.export.export(model, args)\nonnx_program = torch.onnx.export(ep, dynamo=True)", "torch-export-errors"),
            fix("Or export with the TorchScript-based exporter", "`dynamo=False` uses tracing instead of torch.export; check "
                "that the model has no data-dependent control flow, which tracing freezes.",
                "torch.onnx.export(model, args, 'model.onnx', dynamo=False, opset_version=<opset your runtime supports>)", "onnx-export-errors"),
        ]
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
        fixes = [
            fix(f"Export with opset_version={need} or higher", "Check that the runtime that will execute the model "
                f"(onnxruntime, TensorRT, …) supports opset {need}.", f"torch.onnx.export(model, args, 'model.onnx', opset_version={need})", "onnx-export-errors"),
            fix(f"Or avoid `{name}` if the runtime is stuck at opset {opset}", "Rewrite that part with operators "
                "that exist in the older opset.", None, "onnx-export-errors"),
        ]
        return hit("compile.onnx_opset_too_low", "compile_error", f"`{name}` needs ONNX opset {need}", cause, fixes, _ONNX_DOCS,
                   found, 0.93, facts=Facts(names=(name,), numbers={"opset": opset, "required_opset": need}))
    cause = (f"The exporter has no ONNX translation (symbolic function) for `{name}` at opset {opset}, and no later opset "
             "is named: this operator cannot be exported as is by this exporter.")
    fixes = [
        fix("Try the dynamo-based exporter", "It covers operators the TorchScript-based exporter lacks.",
            "torch.onnx.export(model, args, 'model.onnx', dynamo=True)", "onnx-export-errors"),
        fix(f"Register a custom symbolic for `{name}`", "Map the operator to ONNX operators yourself "
            "(torch.onnx.register_custom_op_symbolic), or emit a custom-domain node your runtime implements.",
            f"def symbolic(g, *args):\n    return g.op('<onnx op>', *args)\ntorch.onnx.register_custom_op_symbolic('{name}', symbolic, {opset})", "onnx-export-errors"),
        fix(f"Or rewrite the model so `{name}` is not needed at export time", "Replace it with equivalent supported "
            "operators, or move it out of the exported forward (pre/post-processing).", None, "onnx-export-errors"),
        fix("Or upgrade PyTorch", "Each release's exporter translates more operators; one missing in an older release may be covered in a newer one.",
            "python -m pip install --upgrade torch", "onnx-export-errors"),
    ]
    return hit("compile.onnx_unsupported_op", "compile_error", f"No ONNX export for `{name}`", cause, fixes, _ONNX_DOCS, found, 0.9,
               facts=Facts(names=(name,), numbers={"opset": opset}))


# ---------------------------------------------------------------------------------------------
# torch.export
# ---------------------------------------------------------------------------------------------


def _exporting(ctx: Context) -> bool:
    """Whether the failure happened under torch.export (frames or the export epilogue)."""
    if any(re.search(r"[/\\]torch[/\\]_?export[/\\]", f.file) for f in ctx.failure.frames):
        return True
    return bool(re.search(r"occurred when calling torch\.export\.export|torch\.export\.export\(|draft_export|_export_to_torch_ir", ctx.failure.text))


@rule(
    "compile.export",
    category="compile_error",
    docs=_EXPORT_DOCS,
    priority=308,
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
    where = _raising_call(ctx) or _user_code(ctx)
    rng = ctx.search(r"(?<!\d)(\d+) not in range \[(\d+|-?inf), (\d+|inf)\]")
    if rng:
        value, low, high = rng.groups()
        cause = (f"An example input has size {value} in a dimension declared dynamic with range [{low}, {high}]: "
                 "torch.export checks the example inputs against every Dim's min/max before tracing.")
        fixes = [
            fix("Make the Dim range include the example input's size", "Or pass example inputs whose sizes lie inside the range.",
                f"batch = torch.export.Dim('batch', min=<= {value}, max=...)", "torch-export-errors"),
        ]
        found = with_location(ctx, [error_fact(ctx), Fact("shape", f"example size {value} outside [{low}, {high}]")])
        return hit("compile.export_dim_range", "compile_error", "Example input outside its Dim range", cause, fixes, _EXPORT_DOCS,
                   found, 0.9, facts=Facts(numbers={"size": float(value)}))
    if ctx.search(r"GuardOnDataDependentSymNode|Could not guard on data-dependent expression|Data-dependent|data dependent|Dynamic control flow is not supported"):
        expr = ctx.search(r"data-dependent expression ([^\n]{1,500}?) \(unhinted")
        cause = ("torch.export met a decision that depends on tensor values rather than shapes"
                 + (f" (`{expr.group(1)}`)" if expr else "") + (f" at {where}" if where else "")
                 + ". An exported program must work for all inputs, so a Python `if`, a size or an index computed from data "
                 "cannot be fixed at export time.")
        fixes = [
            fix("Express a value-dependent branch with torch.cond", "Both branches are captured and the choice is made at run time.",
                "out = torch.cond(pred, true_fn, false_fn, (x,))", "torch-export-errors"),
            fix("State what you know about data-dependent sizes with torch._check", "When a size comes from `.item()` or "
                "`nonzero()`, tell the exporter its bounds so it need not guard on them.",
                "n = t.item()\ntorch._check(n >= 0)\ntorch._check(n <= x.shape[0])", "torch-export-errors"),
            fix("List every such spot at once with draft_export", "", "ep = torch.export.draft_export(model, args)\nprint(ep._report)", "torch-export-errors"),
        ]
        found = with_location(ctx, [error_fact(ctx)] + ([Fact("location", f"user code: {where}")] if where else []))
        return hit("compile.export_data_dependent", "compile_error", "Data-dependent control flow under torch.export", cause, fixes,
                   _EXPORT_DOCS, found, 0.9, facts=Facts(names=(expr.group(1),) if expr else ()))
    m = ctx.search(r"torch\._dynamo\.exc\.(Unsupported|UserError): ([^\n]+)")
    if m:
        cause = (f"torch.export (strict mode traces with dynamo) could not capture the model: {m.group(2).strip()[:200]}"
                 + (f" at {where}" if where else "") + ".")
        fixes = [
            fix("Export in non-strict mode", "strict=False runs the Python code normally and only traces tensor operations.",
                "ep = torch.export.export(model, args, strict=False)", "torch-export-errors"),
            fix("Move the unsupported Python out of forward", "Keep logging, I/O and non-tensor libraries outside the exported module.", None, "torch-export-errors"),
        ]
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
            fix("Trace with an example of size 2 or more in that dimension", "The exported program still accepts size 1 at run time when the Dim range allows it.",
                "example = torch.randn(2, *x.shape[1:])", "torch-export-errors"),
            fix("Or let the tracer decide", "Dim.AUTO (export) or maybe_mark_dynamic (compile) accept a specialization instead of failing.",
                "dynamic_shapes = {'x': {0: torch.export.Dim.AUTO}}" if exporting else "torch._dynamo.maybe_mark_dynamic(x, 0)", "torch-export-errors"),
        ]
        return hit("compile.dynamic_size_one", "compile_error", f"Dynamic dimension traced with an example of size {size}", cause, fixes,
                   _EXPORT_DOCS, with_location(ctx, [error_fact(ctx)]), 0.9, facts=Facts(names=names, numbers={"specialized_to": float(size)}))
    cause = ("A dimension was declared dynamic" + (f" ({dims})" if dims else "")
             + ", but the traced code only works for one size of it" + (f" ({const.group(1)})" if const else "")
             + ": some operation (a hard-coded reshape/view, a constant-sized tensor combined with the input, a Python branch on the size) "
             "ties that size to a constant, which contradicts the dynamic declaration.")
    fixes = [
        fix("Find the operation that fixes the size", "The message (and TORCH_LOGS=\"+dynamic\") points at the line where the "
            "size was specialized; derive sizes there from the input (`x.shape[0]`, `-1`) instead of constants.", "TORCH_LOGS=\"+dynamic\" python script.py", "torch-export-errors"),
    ]
    if exporting:
        fixes.append(fix("Or declare the dimension static / automatic", "If the size really is fixed, drop it from dynamic_shapes; "
                         "Dim.AUTO lets export decide.", "dynamic_shapes = {'x': {0: torch.export.Dim.AUTO}}", "torch-export-errors"))
    else:
        fixes.append(fix("Or mark it dynamic less strictly", "maybe_mark_dynamic allows the compiler to specialize instead of failing.",
                         "torch._dynamo.maybe_mark_dynamic(x, 0)", "dynamo-errors"))
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
    priority=311,
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
        fixes = [
            fix("See what triggers the recompiles", "", "TORCH_LOGS=recompiles python train.py", "dynamo-errors"),
            fix("Make the changing input dynamic, or stop it from changing", "Mark varying sizes dynamic; pass changing Python "
                "numbers as tensors.", "torch._dynamo.mark_dynamic(x, 0)\nmodel = torch.compile(model, dynamic=True)", "dynamo-errors"),
            fix("Or raise the limit when each variant is legitimate", "A function called with a bounded set of shapes (e.g. one per parameter "
                "tensor in an optimizer step) needs one graph per shape; allow that many (the setting is named recompile_limit in newer releases).",
                "torch._dynamo.config.cache_size_limit = 64   # newer releases: torch._dynamo.config.recompile_limit", "dynamo-errors"),
        ]
        facts = Facts(names=(fn.group(1),) if fn else ())
        return hit("compile.recompiles", "compile_error", "torch.compile recompile limit reached", cause, fixes, docs, found, 0.9, facts=facts)
    if ctx.search(r"GuardOnDataDependentSymNode|Could not guard on data-dependent expression|[Dd]ata-dependent|Dynamic control flow is not supported"):
        cause = ("The compiled code takes a Python decision (a branch, a size or an index) from a value that depends on tensor data"
                 + (f" at {where}" if where else "")
                 + "; such values are unknown while tracing, so the graph cannot include that decision.")
        fixes = [
            fix("Keep the decision inside tensor ops", "torch.where computes both sides; torch.cond captures both branches.",
                "y = torch.where(cond, a, b)   # or torch.cond(pred, true_fn, false_fn, (x,))", "dynamo-errors"),
            fix("Or let dynamo break the graph there (drop fullgraph=True)", "", "model = torch.compile(model)  # without fullgraph=True", "dynamo-errors"),
        ]
        return hit("compile.data_dependent", "compile_error", "Data-dependent control flow under torch.compile", cause, fixes, docs, found, 0.9)
    detail = (reason.group(1).strip() if reason else "") or (expl.group(1).strip() if expl else "")
    fullgraph = bool(ctx.search(r"fullgraph|graph break", re.I))
    cause = (f"TorchDynamo could not trace the function ({kind}" + (f": {detail[:200]}" if detail else "") + ")"
             + (f" at {where}" if where else "") + ". "
             + ("With fullgraph=True any graph break is an error; without it, dynamo would fall back to Python for that part. " if fullgraph else "")
             + "The construct named above is outside what dynamo can put in a graph.")
    fixes = [
        fix("List the graph breaks and their reasons", "", "TORCH_LOGS=graph_breaks python train.py\n# or: print(torch._dynamo.explain(model)(x))", "dynamo-errors"),
        fix("Move the unsupported call out of the compiled region", "Do pre/post-processing outside the compiled module, or exclude a helper with torch.compiler.disable.", "@torch.compiler.disable\ndef helper(t): ...", "dynamo-errors"),
        fix("Drop fullgraph=True if graph breaks are acceptable", "", "model = torch.compile(model)", "dynamo-errors"),
        fix("Confirm the model runs eagerly", "If it also fails without torch.compile, the bug is in the model, not the compiler.", "out = model(x)  # no torch.compile", "dynamo-errors"),
    ]
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
    priority=309,
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
        fix(f"Upgrade PyTorch to a release whose torch.compile supports Python {version}" + (f" ({first} or newer)" if first else ""),
            "Check the installed version with python -c \"import torch; print(torch.__version__)\".",
            f'pip install -U "torch>={first}"' if first else "pip install -U torch", "torch-compile-python-version"),
        fix(f"Or use an older Python (Python {older} or earlier) with this PyTorch", "A fresh environment keeps the rest of the setup unchanged.",
            f"conda create -n py{older.replace('.', '')} python={older}", "torch-compile-python-version"),
        fix("Or run without torch.compile", "The model runs the same uncompiled, only slower; many projects have a compile option to switch off.",
            "# model = torch.compile(model)   # leave the model uncompiled", "torch-compile-python-version"),
    ]
    return hit("compile.python_unsupported", "compile_error", f"torch.compile not supported on Python {version} by this PyTorch", cause, fixes,
               ("torch-compile-python-version", "dynamo-errors"), [error_fact(ctx), Fact("python", f"Python {version} or newer")], 0.95,
               facts=Facts(names=(f"python{version}",), call="torch.compile"))


def _windows_unsupported(ctx: Context) -> RuleHit:
    """torch.compile refused to run on Windows: releases of the 2.0-2.4 era did not support it there."""
    cause = ("The installed PyTorch refuses torch.compile on Windows: releases of the 2.0 to 2.4 era did not support it there and raise at the "
             "first torch.compile call (directly or inside a library). Support came later, CPU first (from 2.5 on, with the MSVC "
             "compiler); compiled GPU kernels on Windows also need a Windows build of Triton. Nothing is wrong with the model itself.")
    fixes = [
        fix("Run without torch.compile", "The model gives the same results uncompiled, only slower; many projects have a compile option to switch off.",
            "# model = torch.compile(model)   # leave the model uncompiled on Windows", "torch-compile-python-version"),
        fix("Or run under Linux or WSL2", "torch.compile is fully supported there with the same PyTorch wheel.", None, "torch-compile-python-version"),
        fix("Or upgrade PyTorch to a release with Windows support for torch.compile", "CPU code generation needs the MSVC build tools; GPU code needs a Windows build of Triton.",
            'pip install -U "torch>=2.5"', "torch-compile-python-version"),
    ]
    return hit("compile.windows_unsupported", "compile_error", "torch.compile not supported on Windows by this PyTorch", cause, fixes,
               ("torch-compile-python-version", "dynamo-errors"), [error_fact(ctx)], 0.93, facts=Facts(names=("windows",), call="torch.compile"))


# ptxas (run by Triton for every kernel) rejecting the GPU's architecture: "ptxas fatal : Value 'sm_121a' is not defined for option
# 'gpu-name'" (also "ptxas-blackwell fatal"), or a description of --gpu-name=sm_... not being recognised.
_PTXAS_ARCH = (r"Value '(sm_\w+)' is not defined for option 'gpu-name'|--gpu-name[= ](sm_\w+)[^\n]{0,60}\bnot (?:recognized|recognised|defined|supported)"
               r"|'(sm_\w+)' is not a recognized processor")


@rule(
    "compile.inductor",
    category="compile_error",
    docs=("inductor-backend-failures", "dynamo-errors", "triton-ptxas-arch"),
    priority=310,
    outcomes=("compile.backend", "compile.cxx", "compile.triton", "compile.ptxas_arch"),
    examples=(
        Example("corpus/compile/ptxas_gpu_name_sm121a_gb10.txt", "compile.ptxas_arch"),
        Example("corpus/compile/ptxas_gpu_name_sm121a_triton.txt", "compile.ptxas_arch"),
        Example("corpus/compile/ptxas_gpu_name_sm120_inductor_log.txt", "compile.ptxas_arch"),
        Example("corpus/compile/ptxas_gpu_name_sm110a_thor.txt", "compile.ptxas_arch"),
        Example("corpus/compile/ptxas_gpu_name_sm89_prose.txt", "compile.ptxas_arch"),
        Example("realworld/dev/chattts-ui-inductor-no-cxx-windows-suppress", "compile.cxx"),
        Example("realworld/dev/marie-inductor-no-cxx-logger-warning", "compile.cxx"),
        Example("corpus/compile/inductor_backend_lowering.txt", "compile.backend"),
        Example("corpus/compile/inductor_triton_missing.txt", "compile.triton"),
        Example("corpus/compile/inductor_triton_missing_windows_old.txt", "compile.triton"),
    ),
)
def inductor(ctx: Context) -> RuleHit | None:
    """Backend (inductor/triton/C++ toolchain) failures."""
    arch = _ptxas_arch(ctx)
    if arch:
        return arch
    m = ctx.search(r"BackendCompilerFailed|InductorError|CppCompileError|InvalidCxxCompiler|No working C\+\+ compiler found|TritonMissing|Cannot find a working triton installation|Python\.h: No such file or directory|LoweringException")
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
        fixes = [
            fix("Install a working C++ compiler (and Python headers)", "Inductor calls the system C++ compiler at run time; on Windows that means MSVC build tools.",
                "apt-get install -y build-essential python3-dev   # or conda install gxx_linux-64", "inductor-backend-failures"),
            fix("Or use a backend that needs no compiler, to unblock", "", "model = torch.compile(model, backend='aot_eager')", "inductor-backend-failures"),
            fix("Or let compile errors fall back to eager execution", "Keeps the program running (uncompiled) while the toolchain is fixed.",
                "import torch._dynamo\ntorch._dynamo.config.suppress_errors = True", "inductor-backend-failures"),
        ]
        return hit("compile.cxx", "compile_error", "torch.compile: C++ compiler problem", cause, fixes, docs, found, 0.92)
    if ctx.search(r"TritonMissing|Cannot find a working triton installation"):
        old_gpu = ctx.search(r"(?:too old|CUDA capability|compute capability)[^\n]*")
        cause = ("Inductor generates GPU kernels with Triton, and no usable Triton was found"
                 + (f" ({old_gpu.group(0).strip()[:160]})" if old_gpu else " (not installed, or not working on this GPU)") + ".")
        fixes = [fix("Install the Triton matching your torch (pip install triton), or compile with backend='aot_eager'", "", "pip install triton", "inductor-backend-failures")]
        return hit("compile.triton", "compile_error", "torch.compile: Triton missing", cause, fixes, docs, found, 0.92)
    inner = ctx.search(r"raised:\s*\n?\s*(\w+(?:Error|Exception)?: [^\n]+)")
    cause = ("The compiler backend (" + (backend.group(1) if backend else "inductor") + ") failed while compiling the captured graph"
             + (f": {inner.group(1)[:200]}" if inner else "") + ". Unless the same code fails eagerly, this is a problem in the backend for a particular op or shape, not in your code.")
    fixes = [
        fix("Bisect: try simpler backends", "If 'aot_eager' works and 'inductor' fails, the problem is in inductor's code generation.", "torch.compile(model, backend='eager')      # dynamo only\ntorch.compile(model, backend='aot_eager')  # + autograd tracing", "inductor-backend-failures"),
        fix("Produce a minimal repro for a bug report", "", "TORCHDYNAMO_REPRO_AFTER=aot python train.py", "inductor-backend-failures"),
        fix("Clear a stale compile cache", "", "rm -rf /tmp/torchinductor_$USER   # or set TORCHINDUCTOR_CACHE_DIR", "inductor-backend-failures"),
    ]
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
        fix(f"Point Triton at a ptxas from a CUDA toolkit that knows {arch}", "Any CUDA toolkit recent enough for the GPU works; TRITON_PTXAS_PATH overrides the bundled copy.",
            f"/usr/local/cuda/bin/ptxas --help | grep -c {arch.rstrip('af')}   # non-zero: this ptxas knows the GPU\nexport TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas", "triton-ptxas-arch"),
        fix("Or upgrade PyTorch and Triton to releases that support this GPU", "Newer Triton releases bundle a newer ptxas; PyTorch wheels pull the Triton release they were built with.",
            "pip install -U torch triton   # or the nightly build for the newest GPUs", "triton-ptxas-arch"),
        fix("Meanwhile run without Triton kernels", "Eager mode needs no ptxas.", "model = torch.compile(model, backend='aot_eager')   # or leave the model uncompiled", "triton-ptxas-arch"),
    ]
    return hit("compile.ptxas_arch", "compile_error", f"Triton's ptxas does not know {arch}", cause, fixes, ("triton-ptxas-arch", "inductor-backend-failures"), found, 0.93,
               facts=Facts(names=(arch,), flags=frozenset({"bundled_ptxas"}) if bundled else frozenset()))


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
    priority=312,
    outcomes=("compile.torchscript", "compile.torchscript_builtin", "compile.torchscript_unknown_op", "compile.torchscript_op_on_load",
              "compile.torchscript_type_annotation", "compile.torchscript_attribute", "compile.torchscript_attribute_type",
              "compile.torchscript_arg_type", "compile.torchscript_default_type", "compile.torchscript_python_call"),
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
        Example("corpus/compile/ts_default_value_tensor.txt", "compile.torchscript_default_type"),
        Example("corpus/compile/ts_default_value_old.txt", "compile.torchscript_default_type"),
        Example("corpus/compile/ts_could_not_export_python_call_type.txt", "compile.torchscript_python_call"),
        Example("corpus/compile/ts_could_not_export_autograd_function.txt", "compile.torchscript_python_call"),
    ),
)
def torchscript(ctx: Context) -> RuleHit | None:
    """TorchScript scripting, saving and loading failures, read per message family."""
    site = _script_site(ctx)
    for reader in (_ts_python_call, _ts_unknown_op, _ts_type_annotation, _ts_builtin, _ts_attribute, _ts_default, _ts_arg_type):
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
    return [
        fix("Rewrite that line with constructs TorchScript supports", "Loops, typed locals, tensor ops and supported builtins "
            "compile; generators, arbitrary classes and most library calls do not.", None, "torchscript-errors"),
        fix("Keep Python-only code out of the scripted graph", "@torch.jit.ignore leaves a method in Python (not saved); "
            "@torch.jit.unused replaces it with an exception when scripted.", "@torch.jit.ignore\ndef helper(self, x): ...", "torchscript-errors"),
        fix("Or capture the model another way", "torch.jit.trace records operations for example inputs; torch.export is the maintained successor.",
            "ep = torch.export.export(model, (x,))", "torch-export-errors"),
    ]


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
    fixes = [
        fix(f"Replace or script `{name}`", "Script the helper too, or express it with tensor operations TorchScript knows"
            + ("; for a custom autograd.Function, register its kernel as a custom operator (torch.library) so the graph calls an op instead of Python." if autograd else "."),
            None, "torchscript-errors"),
    ]
    if autograd:
        # Libraries often ship a fused/memory-efficient autograd function next to a plain version of the same layer.
        fixes.append(fix("Switch that layer to its plain implementation while exporting", "A custom autograd function (a memory-efficient or fused "
                         "version of a layer) is not supported by tracing/scripting; if the library has a plain or exportable variant, disable the custom "
                         "one for the export (a config flag, an 'exportable'/'scriptable' mode), or keep that part out of the exported model.", None, "torchscript-errors"))
    fixes += [
        fix("Or export with torch.export", "It captures through Python helpers and supports custom ops registered with torch.library.",
            "ep = torch.export.export(model, (x,))", "torch-export-errors"),
    ]
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
        fixes = [
            fix("Load with the same (or newer) PyTorch that saved the model", "Compare torch.__version__ on both sides; "
                "re-export the model with the older release if the runtime cannot be upgraded.", "python -c 'import torch; print(torch.__version__)'", "torchscript-errors"),
        ]
        if custom:
            fixes.insert(0, fix(f"Load the library that defines `{op}` first", "", f"import {op.split('::')[0]}  # or torch.ops.load_library('lib.so')\nmodel = torch.jit.load(path)", "torchscript-errors"))
        return hit("compile.torchscript_op_on_load", "compile_error", f"Operator `{op}` missing when loading a TorchScript model", cause,
                   fixes, _TS_DOCS, found, 0.88, facts=facts)
    cause = (f"The scripted code calls something TorchScript resolves to `{op}`, which has no TorchScript schema"
             + (f" (at `{site}`)" if site else "") + ": the method or overload is not supported in TorchScript"
             + (f"; close matches it knows: {', '.join(suggestions[:3])}" if suggestions else "") + ".")
    fixes = [
        fix("Use a supported equivalent", "Rewrite the call with an operator or overload TorchScript knows"
            + (" (`.to(dtype)` converts types)" if op in ("aten::type", "aten::new") else "")
            + (", starting from the suggestions the message lists." if suggestions else "."), None, "torchscript-errors"),
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
    fixes = [
        fix(f"Spell `{name}` the way TorchScript expects", "Import typing names directly (`from typing import List`), "
            "annotate tensors as torch.Tensor, and use torch.jit.Final for constants.", "from typing import List, Optional\ndef f(x: torch.Tensor) -> List[torch.Tensor]: ...", "torchscript-errors"),
    ]
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
        fix(f"Replace `{name}(...)` with supported code", "Write the equivalent with a loop, indexing or tensor operations, "
            "or compute the value outside the scripted code and pass it in.", None, "torchscript-errors"),
        *_ts_common_fixes(site)[1:],
    ]
    return hit("compile.torchscript_builtin", "compile_error", f"Python builtin `{name}` not supported in TorchScript", cause, fixes,
               _TS_DOCS, _ts_found(ctx, site), 0.9, facts=Facts(call=name, names=(name,)))


def _ts_attribute(ctx: Context, site: str | None) -> RuleHit | None:
    m = _ts_search(ctx, r"Module '(\w+)' has no attribute '(\w+)'")
    n = _ts_search(ctx, r"Tried to access nonexistent attribute (?:or method )?'?(\w+)'?(?: of type '([^']+?)(?: \(of Python compilation unit[^']*\))?')?")
    if not (m or n):
        return None
    owner, attr = (m.group(1), m.group(2)) if m else (n.group(2) or "the object", n.group(1))
    conv = _ts_search(ctx, r"failed to convert Python type: '(\w+)'")
    if conv:
        cause = (f"`{owner}.{attr}` exists in Python, but its value (a `{conv.group(1)}` holding values TorchScript cannot type) "
                 "cannot be turned into a TorchScript attribute, so scripted methods cannot read it.")
        fixes = [
            fix(f"Store `{attr}` as a supported type", "Use tensors, numbers, strings or List/Dict of those; annotate the attribute "
                "at class level when its type cannot be inferred.", f"class {owner}(nn.Module):\n    {attr}: Dict[str, float]", "torchscript-errors"),
            fix("Or read the value in Python before scripting", "Copy the fields forward() needs into plain typed attributes in __init__.", None, "torchscript-errors"),
        ]
        return hit("compile.torchscript_attribute_type", "compile_error", f"`{attr}` has a type TorchScript cannot convert", cause, fixes,
                   _TS_DOCS, _ts_found(ctx, site), 0.88, facts=Facts(names=(owner, attr)))
    cause = (f"The scripted code reads `{attr}` on `{owner}`" + (f" (`{site}`)" if site else "")
             + ", but TorchScript finds no such attribute or method at compile time: it was never set in __init__ (or is set "
             "conditionally / later), it is a Python-only attribute, or the method does not exist in TorchScript's view of that type.")
    fixes = [
        fix(f"Define `{attr}` in __init__ with a supported type", "Every attribute a scripted method reads must exist when "
            "the module is scripted; give optional ones a typed default (Optional[...] = None).", None, "torchscript-errors"),
        fix("Or keep the code that needs it out of TorchScript", "", "@torch.jit.ignore\ndef helper(self, x): ...", "torchscript-errors"),
    ]
    return hit("compile.torchscript_attribute", "compile_error", f"TorchScript cannot find `{attr}`", cause, fixes, _TS_DOCS,
               _ts_found(ctx, site), 0.88, facts=Facts(names=(owner, attr)))


def _ts_default(ctx: Context, site: str | None) -> RuleHit | None:
    m = _ts_search(ctx, r"Expected a default value of type (\w+)(?: \(inferred\))? on parameter \"(\w+)\"")
    if not m:
        return None
    typ, param = m.groups()
    cause = (f"Parameter `{param}` has no type annotation, so TorchScript assumes it is a {typ}, but its default value is not one. "
             "Unannotated parameters are always taken to be Tensors in TorchScript.")
    fixes = [fix(f"Annotate `{param}` with its real type", "", f"def fn(x: torch.Tensor, {param}: float = ...) -> torch.Tensor: ...", "torchscript-errors")]
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
    fixes = [fix(f"Annotate `{arg}` with the type you pass", "Use Optional[...] when None is allowed.",
                 f"def {fn}(..., {arg}: {'Optional[torch.Tensor]' if got == 'NoneType' else got} ...): ...", "torchscript-errors")]
    if not inferred:
        fixes.append(fix("Or pass a value of the declared type", "", None, "torchscript-errors"))
    return hit("compile.torchscript_arg_type", "compile_error", f"`{fn}()` argument `{arg}`: expected {want}, got {got}", cause, fixes,
               _TS_DOCS, _ts_found(ctx, site), 0.9, facts=Facts(argument=arg, names=(fn, want, got)))
