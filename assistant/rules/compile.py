"""torch.compile (dynamo, inductor), torch.export and TorchScript failures."""

from __future__ import annotations

import re

from assistant.rules.registry import Example, rule
from assistant.rules.base import Context, error_fact, fix, hit
from assistant.types import Fact, RuleHit


def _user_code(ctx: Context) -> str | None:
    """Dynamo prints ``from user code:`` followed by the frames of the traced function."""
    m = ctx.search(r"from user code:\s*\n(?:.*\n)*?\s*File \"([^\"]+)\", line (\d+), in (\w+)\s*\n\s*(.+)")
    if not m:
        return None
    return f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)} in {m.group(3)}: `{m.group(4).strip()}`"


@rule(
    'compile.dynamo',
    category='compile_error',
    docs=("dynamo-errors", "inductor-backend-failures"),
    priority=311,
    outcomes=('compile.dynamo', 'compile.recompiles', 'compile.data_dependent'),
    examples=(),
)
def dynamo(ctx: Context) -> RuleHit | None:
    """Graph breaks under fullgraph, unsupported constructs, data-dependent guards, recompile limits."""
    m = ctx.search(r"torch\._dynamo\.exc\.(\w+)|Unsupported: ([^\n]+)|GuardOnDataDependentSymNode|Could not guard on data-dependent expression|(?:recompile_limit|cache_size_limit) \((\d+)\)|torch\._dynamo hit config\.\w+")
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
    if ctx.search(r"recompile_limit|cache_size_limit|hit config\.(?:recompile|cache_size)_limit"):
        cause = ("torch.compile recompiled the function too many times (a guard kept failing: new shapes, new Python values such as ints/strings used "
                 "as arguments, or changing attributes) and gave up on compiling it.")
        fixes = [
            fix("See what triggers the recompiles", "", "TORCH_LOGS=recompiles python train.py", "dynamo-errors"),
            fix("Mark varying dimensions dynamic / avoid Python scalars that change", "", "torch._dynamo.mark_dynamic(x, 0)\nmodel = torch.compile(model, dynamic=True)", "dynamo-errors"),
        ]
        return hit("compile.recompiles", "compile_error", "torch.compile recompile limit reached", cause, fixes, docs, found, 0.9)
    if ctx.search(r"GuardOnDataDependentSymNode|Could not guard on data-dependent expression|[Dd]ata-dependent"):
        cause = ("The traced code branches on, or sizes a tensor by, a value that depends on tensor data (e.g. `if x.sum() > 0`, `x[mask]`, `.item()`, `.nonzero()`), "
                 "which torch.compile/export cannot know at trace time.")
        fixes = [
            fix("Replace data-dependent control flow with tensor ops", "", "y = torch.where(x.sum() > 0, a(x), b(x))   # or torch.cond", "dynamo-errors"),
            fix("Or let dynamo break the graph there (drop fullgraph=True)", "", "model = torch.compile(model)  # without fullgraph=True", "dynamo-errors"),
        ]
        return hit("compile.data_dependent", "compile_error", "Data-dependent control flow under torch.compile", cause, fixes, docs, found, 0.9)
    detail = (reason.group(1).strip() if reason else "") or (expl.group(1).strip() if expl else "")
    fullgraph = bool(ctx.search(r"fullgraph|graph break", re.I))
    cause = (f"TorchDynamo could not trace the function ({kind}" + (f": {detail[:200]}" if detail else "") + ")"
             + (f" at {where}" if where else "") + ". "
             + ("With fullgraph=True any graph break is an error; without it, dynamo would fall back to Python for that part. " if fullgraph else "")
             + "Typical causes: calls into non-PyTorch libraries (numpy, PIL, custom C extensions), unsupported Python features, printing/logging tensors, or data-dependent Python control flow inside the compiled region.")
    fixes = [
        fix("List the graph breaks and their reasons", "", "TORCH_LOGS=graph_breaks python train.py\n# or: print(torch._dynamo.explain(model)(x))", "dynamo-errors"),
        fix("Move the unsupported call out of the compiled region", "Do pre/post-processing outside the compiled module, or exclude a helper with torch.compiler.disable.", "@torch.compiler.disable\ndef log_stats(t): ...", "dynamo-errors"),
        fix("Drop fullgraph=True if graph breaks are acceptable", "", "model = torch.compile(model)", "dynamo-errors"),
        fix("Confirm the model runs eagerly", "If it also fails without torch.compile, the bug is in the model, not the compiler.", "out = model(x)  # no torch.compile", "dynamo-errors"),
    ]
    return hit("compile.dynamo", "compile_error", f"torch.compile could not trace the model ({kind})", cause, fixes, docs, found, 0.9)


@rule(
    'compile.inductor',
    category='compile_error',
    docs=("inductor-backend-failures", "dynamo-errors"),
    priority=310,
    outcomes=('compile.backend', 'compile.cxx', 'compile.triton'),
    examples=(),
)
def inductor(ctx: Context) -> RuleHit | None:
    """Backend (inductor/triton/C++ toolchain) failures."""
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
            fix("Install the toolchain", "", "apt-get install -y build-essential python3-dev   # or conda install gxx_linux-64", "inductor-backend-failures"),
            fix("Or use a backend that needs no compiler, to unblock", "", "model = torch.compile(model, backend='aot_eager')", "inductor-backend-failures"),
        ]
        return hit("compile.cxx", "compile_error", "torch.compile: C++ compiler problem", cause, fixes, docs, found, 0.92)
    if ctx.search(r"TritonMissing|Cannot find a working triton installation"):
        cause = "Inductor needs Triton to generate GPU kernels, and no working Triton is installed (or the GPU is too old for it)."
        fixes = [fix("Install the Triton matching your torch (pip install triton), or compile with backend='aot_eager'", "", "pip install triton", "inductor-backend-failures")]
        return hit("compile.triton", "compile_error", "torch.compile: Triton missing", cause, fixes, docs, found, 0.92)
    inner = ctx.search(r"raised:\s*\n?\s*(\w+(?:Error|Exception)?: [^\n]+)")
    cause = ("The compiler backend (" + (backend.group(1) if backend else "inductor") + ") failed while compiling the captured graph"
             + (f": {inner.group(1)[:200]}" if inner else "") + ". This is often a bug in the backend for a particular op/shape, not in your code.")
    fixes = [
        fix("Bisect: try simpler backends", "If 'aot_eager' works and 'inductor' fails, the problem is in inductor's code generation.", "torch.compile(model, backend='eager')      # dynamo only\ntorch.compile(model, backend='aot_eager')  # + autograd tracing", "inductor-backend-failures"),
        fix("Produce a minimal repro for a bug report", "", "TORCHDYNAMO_REPRO_AFTER=aot python train.py", "inductor-backend-failures"),
        fix("Clear a stale compile cache", "", "rm -rf /tmp/torchinductor_$USER   # or set TORCHINDUCTOR_CACHE_DIR", "inductor-backend-failures"),
    ]
    return hit("compile.backend", "compile_error", "torch.compile backend failed", cause, fixes, docs, found, 0.9)


@rule(
    'compile.torchscript',
    category='compile_error',
    docs=("torchscript-errors", "dynamo-errors"),
    priority=312,
    outcomes=('compile.torchscript',),
    examples=(),
)
def torchscript(ctx: Context) -> RuleHit | None:
    """TorchScript scripting/tracing failures and torch.export/ONNX errors."""
    m = ctx.search(r"torch\.jit\.frontend\.\w+|NotSupportedError|is currently not supported in Torchscript|Tried to access nonexistent attribute or method|Expected a value of type '([^']+)' for argument '(\w+)'|torch\.jit\.Error|Could not export Python function call|Module '(\w+)' has no attribute '(\w+)'|torch\.onnx\.errors\.\w+|torch\._export|ScriptModule|TorchScript", re.I)
    if not m:
        return None
    if not ctx.search(r"jit|script|Torchscript|onnx|export", re.I):
        return None
    found = [error_fact(ctx)]
    cause = ("TorchScript/export compiles a static subset of Python: this code uses something outside it (an unsupported builtin or library call, a dynamic attribute, "
             "an argument whose type the compiler inferred wrongly — arguments default to Tensor unless annotated).")
    fixes = [
        fix("Annotate argument types and keep forward() to supported constructs", "", "def forward(self, x: torch.Tensor, n: int) -> torch.Tensor: ...", "torchscript-errors"),
        fix("Prefer torch.compile or torch.export for new code", "TorchScript is in maintenance mode.", "exported = torch.export.export(model, (x,))", "torchscript-errors"),
        fix("Exclude helpers from scripting", "", "@torch.jit.ignore\ndef debug_plot(self, t): ...", "torchscript-errors"),
    ]
    return hit("compile.torchscript", "compile_error", "TorchScript / export could not compile the code", cause, fixes, ("torchscript-errors", "dynamo-errors"), found, 0.85)
