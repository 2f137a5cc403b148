"""Which exception family a failure belongs to: the first step of matching (as friendly-traceback does).

Rules are readers of a family: each declares the families it reads (``@rule(..., reads=(...))``) and
:func:`assistant.rules.match` tries, for a failure, only the rules that read its family, in the
family's own priority order. The families are coarse and fixed; :data:`FAMILIES` maps every exception
type met in the real texts (rule examples, captures, dev reports: ``scripts/dump_rule_answers.py``)
to one of them:

``RuntimeError``
    ``RuntimeError`` and what torch raises as its subclasses or in its place: ``OutOfMemoryError``
    (``torch.`` and ``torch.cuda.``), ``AcceleratorError``, ``LinAlgError``, the distributed errors
    (``DistError``, ``DistBackendError`` — also printed as ``c10::DistBackendError`` —, ``DistNetworkError``,
    ``DistStoreError``), NCCL's result codes when they head a line (``ncclUnhandledCudaError: ...``), the
    launchers' reports of a failed child (``ChildFailedError``, ``ProcessRaisedException``,
    ``ProcessExitedException``), torchrun's rendezvous errors and Python's own ``RecursionError``.
``ValueError``
    ``ValueError`` and its subclasses (``UnicodeDecodeError``, ``JSONDecodeError``).
``TypeError``, ``AttributeError`` (+ torch's old ``ModuleAttributeError``), ``KeyError``, ``IndexError``,
``NotImplementedError``, ``AssertionError``
    The builtin of that name.
``ImportError``
    ``ImportError`` and ``ModuleNotFoundError``.
``OSError``
    ``OSError`` and its aliases and subclasses (``IOError``, ``EnvironmentError``, ``FileNotFoundError``,
    ``PermissionError``, ``NotADirectoryError``, connection errors, ...), and library errors that are
    ``OSError`` subclasses (``urllib``'s ``URLError``, Hugging Face's ``LocalEntryNotFoundError``).
``PickleError``
    A file or stream that cannot be (de)serialized: ``UnpicklingError``, ``PicklingError``, ``EOFError``
    and safetensors' ``SafetensorError``.
``MemoryError``
    Python's ``MemoryError`` and numpy's ``_ArrayMemoryError`` (host memory, not the GPU's).
``ArithmeticError``
    ``FloatingPointError`` (anomaly detection, ``np.seterr``), ``ZeroDivisionError``, ``OverflowError``.
``NameError``
    ``NameError`` and ``UnboundLocalError``.
``CompileError``
    What the compilers and exporters raise: every type under ``torch._dynamo``, ``torch._inductor``,
    ``torch.export``/``torch._export``, ``torch.onnx``, ``torch.jit``, ``torch.fx.experimental.symbolic_shapes``,
    ``triton`` (and the old ``torchdynamo`` package), and their well-known short names
    (``BackendCompilerFailed``, ``Unsupported``, ``TorchRuntimeError``, ``InductorError``, ``PTXASError``, ...).
    Dynamo's exceptions subclass ``RuntimeError`` but are their own family: they are read by the compile rules.
``Interrupt``
    The process was told to stop: ``KeyboardInterrupt`` (Ctrl+C), ``SystemExit``, torchrun's ``SignalException``.
``Warning``
    A warning line (``UserWarning: ...``), not an exception.
``text``
    No exception type at all: a bare message, prose, CUDA kernel-assertion, NCCL or signal lines only.
``other``
    Any type not mapped above (``SyntaxError``, ``StopIteration``, ``CalledProcessError``, a library's own
    ``Exception`` subclass, a word the parser took for a type).

A type is looked up by its last dotted (or ``::``) component, so ``torch.cuda.OutOfMemoryError`` and
``OutOfMemoryError`` are one; module prefixes are consulted only for the compile family.

:data:`ANY` is not a family: a rule that reads ``("any",)`` reads every failure whatever its type (a
scheduler's verdict, a native crash's signal line, a symptom told in prose) and is tried after the
rules of the failure's own family.
"""

from __future__ import annotations

from assistant.types import Failure

RUNTIME = "RuntimeError"
TEXT = "text"
OTHER = "other"
ANY = "any"

# Exception type (its last component) -> family. Types absent here fall to ``other`` (or ``text`` when there is none).
FAMILIES: dict[str, str] = {
    # RuntimeError and torch's RuntimeError-like types
    **dict.fromkeys((
        "RuntimeError", "OutOfMemoryError", "AcceleratorError", "CudaError", "LinAlgError", "RecursionError",
        "DistError", "DistBackendError", "DistNetworkError", "DistStoreError", "ChildFailedError",
        "ProcessRaisedException", "ProcessExitedException", "ProcessException", "RendezvousError", "RendezvousTimeoutError",
    ), RUNTIME),
    **dict.fromkeys(("ValueError", "UnicodeDecodeError", "UnicodeEncodeError", "UnicodeError", "JSONDecodeError"), "ValueError"),
    "TypeError": "TypeError",
    **dict.fromkeys(("AttributeError", "ModuleAttributeError"), "AttributeError"),
    "KeyError": "KeyError",
    "IndexError": "IndexError",
    **dict.fromkeys(("ImportError", "ModuleNotFoundError"), "ImportError"),
    **dict.fromkeys((
        "OSError", "IOError", "EnvironmentError", "FileNotFoundError", "FileExistsError", "PermissionError",
        "NotADirectoryError", "IsADirectoryError", "BlockingIOError", "TimeoutError", "InterruptedError",
        "ConnectionError", "ConnectionResetError", "ConnectionRefusedError", "ConnectionAbortedError", "BrokenPipeError",
        "URLError", "HTTPError", "LocalEntryNotFoundError",
    ), "OSError"),
    **dict.fromkeys(("UnpicklingError", "PicklingError", "PickleError", "EOFError", "SafetensorError"), "PickleError"),
    "NotImplementedError": "NotImplementedError",
    "AssertionError": "AssertionError",
    **dict.fromkeys(("MemoryError", "_ArrayMemoryError"), "MemoryError"),
    **dict.fromkeys(("ArithmeticError", "FloatingPointError", "ZeroDivisionError", "OverflowError"), "ArithmeticError"),
    **dict.fromkeys(("NameError", "UnboundLocalError"), "NameError"),
    # compile / export / TorchScript / Triton, by short name (the module prefixes are below)
    **dict.fromkeys((
        "BackendCompilerFailed", "Unsupported", "TorchRuntimeError", "InternalTorchDynamoError", "InductorError",
        "LoweringException", "InvalidCxxCompiler", "CppCompileError", "TritonMissing", "NoTritonConfigsError",
        "PTXASError", "FailOnRecompileLimitHit", "RecompileLimitExceeded", "CacheLimitExceeded", "TorchExportError",
        "OnnxExporterError", "UnsupportedOperatorError", "SymbolicValueError", "ConstraintViolationError",
        "GuardOnDataDependentSymNode", "UnsupportedNodeError", "FrontendError", "NotSupportedError", "ObservedException",
    ), "CompileError"),
    **dict.fromkeys(("KeyboardInterrupt", "SystemExit", "SignalException"), "Interrupt"),
}

# Module prefixes whose every exception type is a compile-family one (``torch._dynamo.exc.UserError``).
_COMPILE_PREFIXES = (
    "torch._dynamo.", "torch._inductor.", "torch.export.", "torch._export.", "torch.onnx.", "torch.jit.",
    "torch.fx.experimental.symbolic_shapes.", "triton.", "torchdynamo.",
)

# Families whose type says nothing about the message: after their own readers, the text readers read it.
_READ_AS_TEXT = frozenset({OTHER, "Warning"})

#: What a torch operator's error reaches the user as: a ``RuntimeError`` (or a subclass such as
#: ``OutOfMemoryError``), the compiler's wrapping of it (dynamo's ``TorchRuntimeError: Failed running
#: call_function ...``, ``InductorError: OutOfMemoryError: ...`` carry the eager message), or the bare
#: pasted line. Rules that read operator messages (shapes, dtypes, devices, CUDA, autograd) read these.
TORCH_OP: tuple[str, ...] = (RUNTIME, "CompileError", TEXT)

#: Every family a rule may declare it reads (besides :data:`ANY`).
FAMILY_NAMES: tuple[str, ...] = tuple(dict.fromkeys((*FAMILIES.values(), "Warning", TEXT, OTHER)))


def family_of_type(exc_type: str | None) -> str:
    """The family of one exception type name (``None`` or empty: :data:`TEXT`)."""
    name = (exc_type or "").strip()
    if not name:
        return TEXT
    if name.startswith(_COMPILE_PREFIXES):
        return "CompileError"
    short = name.split("::")[-1].rsplit(".", 1)[-1]
    found = FAMILIES.get(short)
    if found:
        return found
    if short.endswith("Warning"):
        return "Warning"
    if short.startswith("nccl") and short[4:5].isupper():
        return RUNTIME  # ncclUnhandledCudaError, ncclSystemError: NCCL's result code, as a DistBackendError's message prints it
    return OTHER


def family(failure: Failure) -> str:
    """The family of the failure's effective exception (``Failure.exc_type``: the original error of a wrapped one)."""
    return family_of_type(failure.exc_type)


def families(failure: Failure) -> tuple[str, ...]:
    """The families whose rules are tried for ``failure``, in order.

    1. The family of the effective exception (``Failure.exc_type``). For a re-raised error (a DataLoader
       worker's, a spawned process's) that is the original error, not the wrapper the chain starts
       with: the original is what the user has to fix, and its message is what the rules recognise.
    2. The families of the chain's other exceptions, in the order Python printed them (the wrapper
       itself, ``ProcessRaisedException``; the other links of a ``During handling ...`` chain), for
       a message the effective exception's readers did not take. Records without a type add nothing:
       they are part of the typed failure, not a failure told in words.
    3. :data:`TEXT` when a type tells nothing about the message (:data:`OTHER`: a library's own exception
       that re-raises a torch message; ``Warning``): the message is then read as a bare one would be.

    The rules that read :data:`ANY` come after all of these (see :func:`assistant.rules.match`).
    """
    out = [family(failure)]
    for record in failure.chain:
        if record.exc_type:
            fam = family_of_type(record.exc_type)
            if fam not in out:
                out.append(fam)
    if TEXT not in out and any(f in _READ_AS_TEXT for f in out):
        out.append(TEXT)
    return tuple(out)
