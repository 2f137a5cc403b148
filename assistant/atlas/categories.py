"""Hand-written category rules for the frequent message families of the atlas.

One table, read top to bottom; the first rule that fires names the category (``category_source: "hand"``).
A rule looks at the template text (``text``, a regular expression), the exception type (``exc``), the entry
kind (``kind``) and the source file (``file``, a regular expression on the path; ``not_text``/``not_file`` veto a
rule). Entries no rule names keep
``category: null``: the calibrated decision fills those in. The order matters: specific families (memory,
kernel assertions, missing packages, NCCL, autograd, the compile stack's files) come before the broad ones
(layouts, indices, devices, dtypes, shapes). A message raised inside the compile stack is a compile failure
whatever words it uses; the category is what the user must fix, not the words the message happens to contain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from assistant.types import CATEGORIES


_DEFAULT_CHECK = re.compile(r"Expected .* to be true, but got false\..*", re.S)


@dataclass(frozen=True)
class Rule:
    category: str
    text: str | None = None  # regex over the template
    exc: tuple[str, ...] = ()  # exception type (last dotted part) must be one of these
    kind: str | None = None
    file: str | None = None  # regex over the file path
    not_text: str | None = None  # the rule does not fire when this matches
    not_file: str | None = None  # the rule does not fire for entries raised in these files

    def fires(self, entry: dict) -> bool:
        # A check without a message says only "Expected <condition> to be true": the condition's words
        # (sizes, dtypes) do not make a family, so only the file and exception-type rules can name it.
        template = _DEFAULT_CHECK.sub("", entry.get("template") or "")
        if self.kind is not None and entry.get("kind") != self.kind:
            return False
        if self.exc and (entry.get("exc_type") or "").split(".")[-1] not in self.exc:
            return False
        if self.file is not None and not re.search(self.file, entry.get("file") or ""):
            return False
        if self.not_file is not None and re.search(self.not_file, entry.get("file") or ""):
            return False
        if self.text is not None and not re.search(self.text, template):
            return False
        if self.not_text is not None and re.search(self.not_text, template):
            return False
        return True


# The compile stack: torch.compile (Dynamo, Inductor, AOTAutograd, fake tensors and their symbolic shapes),
# export, ONNX (torch.onnx and the ONNX library's own schema checks), TorchScript, FX, lazy tensors.
_COMPILE_FILES = (r"(^|/)(torch/(_dynamo|_inductor|export|_export|onnx|jit|fx|_higher_order_ops|_functorch/_aot_autograd"
                  r"|_subclasses/(fake|meta_utils|functional_tensor)|utils/_sympy|compiler|_guards|_lazy)"
                  r"|csrc/(jit|dynamo|inductor|lazy|onnx)|third_party/onnx)(/|\.py|_)")
_DIST_FILES = r"(^|/)(torch/(distributed|nn/parallel)|csrc/distributed|lib/(c10d|THD))/"
# accelerators a build can lack ("Torch not compiled with CUDA enabled", "compiled without XPU support")
_ACCEL = r"(CUDA|XPU|MPS|MTIA|ROCm|HIP|GPU)"

RULES: tuple[Rule, ...] = (
    # memory
    Rule("cuda_oom", r"CUDA out of memory|out of memory.*(GPU|CUDA|device)|Tried to allocate|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|HIP out of memory"),
    Rule("cuda_oom", exc=("OutOfMemoryError",)),
    Rule("cpu_oom", r"DefaultCPUAllocator|can't allocate memory|not enough memory|Cannot allocate memory|std::bad_alloc"),
    # CUDA kernels and libraries
    Rule("device_side_assert", kind="kernel_assert"),
    Rule("device_side_assert", r"device-side assert"),
    Rule("illegal_memory_access", r"illegal memory access|misaligned address|an illegal instruction"),
    Rule("cudnn_error", r"(?i)\bcudnn"),
    Rule("cublas_error", r"(?i)\bcublas|CUBLAS_STATUS"),
    Rule("cuda_unavailable", r"not compiled with CUDA|Torch not compiled with|no CUDA GPUs are available|Found no NVIDIA driver|CUDA driver (version|initialization)|NVIDIA driver on your system is too old|CUDA is not available|invalid device ordinal|without ATen_cuda library|Cannot initialize CUDA without"
         rf"|(compiled|built) without {_ACCEL}\b|not (compiled|built) with {_ACCEL}\b|[Nn]o (available )?{_ACCEL}? ?devices? (were |was |is |are )?(found|available|detected)"),
    # a missing package or a platform that lacks a feature is the environment's, wherever it is raised
    Rule("environment_error", exc=("ImportError", "ModuleNotFoundError")),
    Rule("environment_error", r"[Nn]o module named|is not installed|[Pp]lease install|pip install|requires (having )?(the )?[\w.-]+ (package|installed)|[Ii]nstall [\w.-]+ to use"
         r"|(Your|This|The) (CPU|GPU|system|platform|machine|processor|kernel on this machine|OS|operating system|hardware|device) does(n't| not) (appear to )?support"
         r"|not supported on this (platform|system|machine|CPU|OS)"),
    # data loading (before multiprocessing: a DataLoader worker out of shared memory is the DataLoader's family)
    Rule("dataloader_error", r"DataLoader|[Dd]ataLoader worker|[Dd]ataloader|num_workers|collate|[Ss]ampler|IterableDataset|prefetch_factor|worker_init_fn|persistent_workers|pin_memory_device|(encountered|error|exception) in (a )?worker\b",
         not_file=f"{_COMPILE_FILES}|{_DIST_FILES}"),
    Rule("multiprocessing_error", r"Cannot re-initialize CUDA in forked subprocess|start method|forked subprocess|torch\.multiprocessing|shared memory|share_memory|file_descriptor|spawn",
         not_text=r"[Dd]evice limit|per block|out of resource|[Tt]riton|[Kk]ernel"),
    # distributed
    Rule("nccl_error", r"(?i)\bnccl"),
    # the words of torch.compile and export name the compile stack even where distributed code raises them
    Rule("compile_error", r"torch\.compile|[Dd]ynamo|[Ii]nductor|torch\.export|graph breaks?\b|fullgraph"),
    Rule("ddp_error", file=_DIST_FILES),
    # autograd (before the compile stack: these texts mean the same wherever they are raised)
    Rule("inplace_autograd", r"modified by an inplace operation|in-place operation|inplace operation|leaf Variable that requires grad|view of a leaf Variable|is a view and (its base|is being)|version counter|was modified by an inplace"),
    Rule("backward_twice", r"backward through the graph a second time|have already been freed|retain_graph=True|saved tensors after they have already been freed|Specify retain_graph"),
    Rule("no_grad_fn", r"does not require grad and does not have a grad_fn|does not have a grad_fn|grad can be implicitly created only for (real )?scalar outputs|appears to not have been used in the graph|One of the differentiated Tensors|\.grad attribute of a Tensor that is not a leaf"),
    Rule("amp_error", file=r"(^|/)torch/(amp|cuda/amp|cpu/amp)/"),
    Rule("nan_inf", r"\bnan\b|\bNaN\b|non-finite|nonfinite|\binf\b|\bInf\b|infinite values|detect_anomaly|isfinite|(matrix|matrices|input|U|A|B) (is|are|was) (exactly )?singular|singular (matrix|matrices|U)\b|not positive[- ]definite|(failed|did not|could not) (to )?converge"),
    # torch.compile, export, ONNX, TorchScript, FX: a message raised inside the compile stack is a compile failure
    # whatever words it uses (collectives, autocast, requires_grad)
    Rule("compile_error", file=_COMPILE_FILES),
    Rule("compile_error", exc=("Unsupported", "BackendCompilerFailed", "TorchRuntimeError", "InternalTorchDynamoError", "UserError", "GuardOnDataDependentSymNode", "SymbolicValueError", "OnnxExporterError", "FrontendError", "NotSupportedError")),
    Rule("ddp_error", r"DistributedDataParallel|\bDDP\b|find_unused_parameters|[Pp]rocess ?[Gg]roup|\b[Gg]loo\b|c10d|[Rr]endezvous|init_process_group|torch\.distributed|FullyShardedDataParallel|\bFSDP\b|DeviceMesh|device_mesh|DTensor|collective|all_reduce|allreduce|all_gather|reduce_scatter|broadcast_object|world_size|TCPStore|MASTER_ADDR|MASTER_PORT"),
    Rule("no_grad_fn", r"does not require grad|requires_grad"),
    Rule("amp_error", r"autocast|GradScaler|unscale_\(\)|torch\.(cuda\.)?amp\b|\bAMP\b|unscale"),
    Rule("compile_error", r"torch\.compile|[Dd]ynamo|[Ii]nductor|TorchScript|torch\.jit|torch\.export|\bONNX\b|\bonnx\b|graph breaks?\b|fullgraph|full graph|[Tt]riton|aot_autograd|FakeTensor|fake tensor|data-dependent|GuardOnDataDependent|symbolic shape|SymInt|scripting|\bscript(ed)?\b"),
    # data loading by file
    Rule("dataloader_error", file=r"(^|/)torch/utils/data/"),
    # saving and loading
    Rule("state_dict_loading", r"state_dict|Missing key|Unexpected key|size mismatch for|load_state_dict|strict=False"),
    Rule("serialization_error", r"[Uu]npickl|pickle|torch\.load|torch\.save|weights_only|[Ss]erializ|zip archive|PytorchStreamReader|PytorchStreamWriter|magic number|map_location|storage.*(load|saved)|failed finding central directory|safetensors"),
    Rule("serialization_error", file=r"(^|/)(torch/(serialization|_weights_only_unpickler)\.py|caffe2/serialize/)"),
    # arguments that exclude each other: a call mistake, whatever the arguments are about (sizes, indices)
    Rule("python_error", r"\bpass only one\b|only one of .{0,60}\b(can|should|may|must) be|mutually exclusive|must (either )?be both .{0,40}\bor\b|(must|should) be both (set|provided|specified|given|passed)|cannot be (specified|set|passed|used|given) together|are not supported together|not supported together",
         not_text=r"\b(size|output_size|output_ratio|scale_factor)\b"),
    # tensors: layout, index, device, dtype, shape
    Rule("dtype_mismatch", r"(?<!memory )\blayouts?\b|to be strided\b|be a (dense|strided) tensor|\bstrided (result |input |output )?tensor",
         not_text=r"channels_(last|first)|memory.format|physical layout|multiplicand|\bNHWC\b|\bNCHW\b"),
    Rule("dtype_mismatch", r"not implemented for '⟦(dtype|name)⟧'|not implemented for '(Half|BFloat16|Float|Double|Long|Int|Bool|Byte|Char|Short|Complex\w*|ComplexFloat|ComplexDouble)'"
         r"|only supports? (floating[- ]point|integral|integer|complex|boolean|bool|float|signed|unsigned)( \w+)? (types?|dtypes?|tensors?|inputs?)"),
    Rule("index_error", exc=("IndexError",)),
    Rule("index_error", r"[Ii]ndex.{0,40}out of (range|bounds)|out of bounds|[Dd]imension out of range|index_select|index_add|index_copy|index_fill|index_put|\bgather\b|scatter|[Ii]ndices|[Ii]ndexing|[Ii]ndex tensor|masked_(fill|select|scatter)|embedding.*(index|range)"),
    Rule("device_mismatch", r"same device|different devices?|devices? mismatch|on the same device|⟦device⟧|must be an? (CUDA|CPU|cuda|cpu|MPS|XPU) tensor|to be on (the )?(same )?(CPU|CUDA|GPU|device|cpu|cuda)|[Ee]xpected device|is on (CPU|GPU|cuda|cpu)|cuda:0|is not on the (GPU|CPU)|(CPU|CUDA) tensors?|on device|[Ee]xpected all tensors"),
    Rule("dtype_mismatch", r"\bdtypes?\b|[Ss]calar ?[Tt]ype|⟦dtype⟧|not implemented for '|floating[- ]point|[Ii]ntegral (type|tensor)|[Ee]xpected object of scalar type|(Float|Double|Half|BFloat16|Long|Int|Bool|Byte|Complex\w*)Tensor|torch\.(float|int|long|bool|half|bfloat16|complex)\d*\b|\bcomplex\b|\b[Qq]uantized\b|\b(u?int(8|16|32|64)|float(16|32|64)|bfloat16|float8_\w+|qu?int\d+\w*)\b(?! (range|limit|max))"),
    # a Python type check on an argument (`hidden_size should be of type int`): the argument's name is no shape
    Rule("python_error", r"(should|must) be (of type|an instance of|a subclass of)\b|(should|must) be an? (int|integer|bool|boolean|string|str|float|callable|dict|dictionary)\b(?! tensor)"),
    Rule("shape_mismatch", r"\bshapes?\b|[Ss]izes?\b|⟦shape⟧|[Dd]imensions?|\bdims?\b|\bndim|mat1 and mat2|broadcast|number of elements|\bnumel|[Ss]tride|view size|reshape|invalid for input of size|expand|\d-?D\b|⟦int⟧D\b|must match|mismatch|[Ll]ength|\brank\b|batch"),
    # environment and plain Python mistakes
    Rule("environment_error", r"not compiled with|was not compiled|compiled without|built without|[Rr]ebuild|is not installed|please install|pip install|No module named|library not found|not found in compile time|requires .{0,40}version|version .{0,40}(is )?required|[Uu]nsupported (platform|version|architecture)|not supported on this platform|MKL|MAGMA|LAPACK|[Ll]apack|OpenMP|sm_\d+|compute capability|CUDA capability"),
    Rule("python_error", r"optimizer got an empty parameter list|has no attribute|missing \w+ required|got an unexpected keyword|takes \w+ positional|cannot assign .{0,80} as (a )?(parameter|child module|buffer)|must be (a |an )?(Tensor|tuple|list|callable|Module|dict|str|int|bool)|not callable|__init__\(\) (call|was not called)|object is not iterable|argument '⟦name⟧' must be"),
    Rule("python_error", exc=("AttributeError", "NameError")),
)


def classify(entry: dict) -> str | None:
    """The hand category of an atlas entry, or None when no rule names it.

    Internal assertions (a PyTorch bug, not the user's) get none: their text is a condition, not a family.
    """
    if entry.get("internal"):
        return None
    for rule in RULES:
        if rule.fires(entry):
            return rule.category
    return None


def check_rules() -> None:
    """Every category a rule names is in the taxonomy (assistant.types.CATEGORIES)."""
    unknown = {r.category for r in RULES} - set(CATEGORIES)
    if unknown:
        raise ValueError(f"categories not in the taxonomy: {sorted(unknown)}")


check_rules()
