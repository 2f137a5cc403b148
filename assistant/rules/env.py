"""The environment: missing modules, version/ABI mismatches, GPU architectures, files, disks, network."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

from assistant.parse.messages import NOT_FOUND_CODES, os_error_path
from assistant.rules.dispatch import RUNTIME, TORCH_OP, family_of_type
from assistant.rules.registry import Example, rule
from assistant.rules.base import basic_facts as _found, Context, hit, lazy_re, remedy
from assistant.types import Fact, Facts, Fix, RuleHit

# import name -> pip distribution, where they differ
_PIP_NAMES = {
    "cv2": "opencv-python", "PIL": "pillow", "sklearn": "scikit-learn", "yaml": "pyyaml", "skimage": "scikit-image",
    "attr": "attrs", "Crypto": "pycryptodome", "bs4": "beautifulsoup4", "dateutil": "python-dateutil", "google.protobuf": "protobuf",
    "flash_attn": "flash-attn", "torch_geometric": "torch-geometric", "pytorch_lightning": "pytorch-lightning", "hydra": "hydra-core",
}
# First path components that usually name a project's own package, not something on PyPI.
_LOCAL_PACKAGE = lazy_re(r"^(src|models?|utils?|data(sets?)?|config|lib|common|modules|nets?|networks?|tools|core)$")
_LIBS = ("torch", "torchvision", "torchaudio", "numpy", "transformers", "triton")


# First CUDA release whose toolkit targets each architecture: a wheel built with an older CUDA has no kernels for it.
_MIN_CUDA = {"sm_80": "11.0", "sm_86": "11.1", "sm_87": "11.4", "sm_89": "11.8", "sm_90": "11.8", "sm_100": "12.8", "sm_120": "12.8"}
# GPU names users write -> architecture (only generations that older wheels commonly lack).
_GPU_ARCH = ((r"RTX\s?30[5-9]0|RTX\s?A[2-6]000|\bA40\b|\bA10G?\b", "sm_86"), (r"\bA100\b|\bA30\b", "sm_80"), (r"RTX\s?40[5-9]0|\bL4\b|\bL40S?\b", "sm_89"),
             (r"\bH100\b|\bH200\b|\bGH200\b", "sm_90"), (r"RTX\s?50[5-9]0", "sm_120"))


def _named_gpu(ctx: Context) -> tuple[str, str] | None:
    """(GPU name as written, architecture) when the report names a recent GPU."""
    for pattern, arch in _GPU_ARCH:
        m = ctx.search(pattern, re.I)
        if m:
            return m.group(0), arch
    return None


@rule(
    'env.arch_mismatch',
    category='environment_error',
    docs=("cuda-arch-mismatch", "library-version-mismatch"),
    reads=(*TORCH_OP, "Warning"),
    priority=14,
    outcomes=('env.arch_mismatch', 'env.no_kernel_image'),
    examples=(
        Example("corpus/env/arch_sm120_not_compatible.txt", "env.arch_mismatch"),
        Example("corpus/env/arch_a100_old_wheel_no_kernel_image.txt", "env.arch_mismatch"),
        Example("corpus/env/no_kernel_image_comfyui.txt", "env.no_kernel_image"),
        Example("realworld/dev/umt-no-kernel-image-3090", "env.no_kernel_image"),
        Example("realworld/dev/gailpytorch-sm86-not-compatible", "env.arch_mismatch"),
    ),
)
def arch_mismatch(ctx: Context) -> RuleHit | None:
    """The installed wheel (or an extension) has no kernels for this GPU's compute capability."""
    if not any(w in ctx.text for w in ("CUDA capability", "kernel image", "NO_BINARY_FOR_GPU", "NoKernelImageForDevice")):
        return None  # a cheap guard: the pattern below backtracks over every position of a long text
    m = ctx.search(r"(?<![^\n])[^\S\n]*(?:(\S[^\n]*?) )?with CUDA capability (sm_\d+) is not compatible with the current PyTorch installation")
    if not (m or ctx.search(r"no kernel image is available for execution on the device|CUDA_ERROR_NO_BINARY_FOR_GPU|cudaErrorNoKernelImageForDevice")):
        return None
    docs = ("cuda-arch-mismatch", "library-version-mismatch")
    if m:
        gpu, arch = (m.group(1) or "").strip() or None, m.group(2)
        supported = ctx.search(r"supports CUDA capabilities ([\w ]+?)(?:\.|\n|$)")
        archs = supported.group(1).split() if supported else []
        newer = bool(archs) and int(arch[3:]) > max(int(a[3:]) for a in archs if a[3:].isdigit())
        cause = (f"The GPU{' (' + gpu + ')' if gpu else ''} has compute capability {arch}, and the installed PyTorch build contains kernels only for "
                 + (" ".join(archs) if archs else "other architectures") + ": "
                 + ("the wheel predates this GPU generation (built for a CUDA version that does not target it)." if newer else
                    "this build does not include this GPU's architecture (dropped from or never in the wheel's list)."))
        need = _MIN_CUDA.get(arch)
        fixes = [
            remedy("cuda-arch-mismatch#build-targeting-arch", arch=arch, min_cuda=need) if need
            else remedy("cuda-arch-mismatch#build-targeting-arch-any", arch=arch),
            remedy("cuda-arch-mismatch#compare-capability-arch-list"),
        ]
        found = _found(ctx, Fact("gpu", f"GPU architecture {arch}" + (f"; build supports {' '.join(archs)}" if archs else "")))
        return hit("env.arch_mismatch", "environment_error", f"PyTorch build does not support {arch}", cause, fixes, docs, found, 0.93,
                   facts=Facts(names=(arch, *archs)))
    cause = ("A CUDA kernel was launched that has no compiled version for this GPU's architecture. Either the installed PyTorch "
             "build does not target this GPU, or a compiled extension (a package with its own CUDA code) was built for other "
             "architectures; the traceback's last library frame tells which.")
    named = _named_gpu(ctx)
    fixes = [
        remedy("cuda-arch-mismatch#check-torch-arch-support"),
        remedy("cuda-arch-mismatch#rebuild-extension-for-arch"),
    ]
    if named:
        gpu, arch = named
        need = _MIN_CUDA[arch]
        cause += (f" The report names a {gpu} ({arch}); PyTorch builds made with a CUDA release older than {need} carry no kernels for it, "
                  "so an older PyTorch (or one installed for an older CUDA) fails this way on it.")
        fixes.insert(0, remedy("cuda-arch-mismatch#upgrade-build-min-cuda", min_cuda=need, arch=arch))
        return hit("env.no_kernel_image", "environment_error", f"No GPU kernel for the {gpu} ({arch})", cause, fixes, docs, _found(ctx, Fact("gpu", f"{gpu}: {arch}")), 0.9,
                   facts=Facts(names=(arch,)))
    return hit("env.no_kernel_image", "environment_error", "No GPU kernel for this architecture", cause, fixes, docs, _found(ctx), 0.88)


@rule(
    'env.missing_module',
    category='environment_error',
    docs=("module-not-found", "library-version-mismatch", "pickle-numpy-version"),
    reads=("ImportError", "AttributeError", "RuntimeError", "text"),
    priority=65,
    also=('serialization_error',),
    outcomes=('env.module_not_found', 'env.numpy2_pickle', 'env.local_module_not_found', 'env.torch_not_installed', 'env.torch_submodule_missing',
              'env.torch_source_tree', 'env.apex_missing', 'env.cannot_import_name', 'env.missing_attribute'),
    examples=(
        Example("corpus/env/module_not_found_cv2_captured.txt", "env.module_not_found"),
        Example("corpus/env/module_not_found_onnxscript_captured.txt", "env.module_not_found"),
        Example("corpus/env/module_not_found_local_package_captured.txt", "env.local_module_not_found"),
        Example("corpus/io/numpy_core_pickle_load_captured.txt", "env.numpy2_pickle"),
        Example("corpus/io/numpy_core_np_load_captured.txt", "env.numpy2_pickle"),
        Example("corpus/env/module_not_found_torch_captured.txt", "env.torch_not_installed"),
        Example("corpus/env/torch_six_removed.txt", "env.torch_submodule_missing"),
        Example("corpus/env/torch_six_removed_slak.txt", "env.torch_submodule_missing"),
        Example("corpus/env/torch_c_source_checkout.txt", "env.torch_source_tree"),
        Example("corpus/env/torch_c_source_checkout_ipython.txt", "env.torch_source_tree"),
        Example("captured/cpu/missing-apex-amp-import", "env.apex_missing"),
        Example("corpus/env/cannot_import_name_torch_utils.txt", "env.cannot_import_name"),
        Example("corpus/env/cannot_import_name_dataloader_old.txt", "env.cannot_import_name"),
        Example("corpus/env/torch_no_attribute_compiler.txt", "env.missing_attribute"),
        Example("corpus/env/module_attribute_library_captured.txt", "env.missing_attribute"),
    ),
)
def missing_module(ctx: Context) -> RuleHit | None:
    """ModuleNotFoundError / ImportError, including version-skew ``cannot import name``."""
    # A library's lazy import (transformers) re-raises an import error as a RuntimeError that quotes it below its own
    # line; any other RuntimeError is not an import failure.
    wrapped = ctx.exc_type == "RuntimeError" and bool(ctx.search(r"Failed to import [\w.]+ because of the following error"))
    if family_of_type(ctx.exc_type) == RUNTIME and not wrapped:
        return None
    m = ctx.search(r"No module named '([\w.]+)'")
    if m and (ctx.exc_type in ("ModuleNotFoundError", "ImportError", "") or wrapped):
        return _module_not_found(ctx, m.group(1))
    m = ctx.search(r"cannot import name '(\w+)'(?: from '([\w.]+)')?")
    if m:
        name, module = m.group(1), m.group(2) or _import_source(ctx, m.group(1))
        where = f"`{module}`" if module else "the module it is imported from"
        top = module.split(".")[0] if module else None
        cause = (f"{where} exists but has no `{name}`: the installed version of {('`' + top + '`') if top else 'that package'} is older or newer "
                 "than the code expects (the name was added, moved or removed between releases), or a local file shadows the package.")
        fixes = [
            remedy("library-version-mismatch#pip-show-installed", package=top),
            remedy("library-version-mismatch#install-required-version", package=top),
            remedy("library-version-mismatch#update-importing-code", module=module),
        ]
        importer = _private_torch_importer(ctx, module)
        if importer:
            # A private torch module (torch._six): the library importing it predates the installed torch.
            cause = (f"`{module}` is a private torch module that no longer has `{name}` in the installed torch; `{importer}` imports it, "
                     f"so the installed `{importer}` release is older than this torch and relied on an internal name that was removed.")
            fixes = [remedy("library-version-mismatch#upgrade-library-importing-private", package=importer),
                     remedy("library-version-mismatch#install-pinned-torch")]
        return hit("env.cannot_import_name", "environment_error", f"Cannot import `{name}`" + (f" from `{module}`" if module else ""), cause, fixes,
                   ("library-version-mismatch", "module-not-found"), _found(ctx), 0.9, facts=Facts(names=tuple(x for x in (name, module) if x)))
    # Python quotes both names; a library's lazy module loader (transformers, diffusers) raises the same error without quotes.
    m = ctx.search(r"module '([\w.]+)' has no attribute '(\w+)'") or ctx.search(r"\bmodule ([A-Za-z_][\w.]*) has no attribute (\w+)")
    if m and _is_installed_library(m.group(1).split(".")[0]):
        mod, attr = m.groups()
        top = mod.split(".")[0]
        cause = f"`{mod}.{attr}` does not exist in the installed version of {top}: the code targets a different release, usually a newer one."
        fixes = [remedy("library-version-mismatch#install-expected-lib-version", package=top),
                 remedy("library-version-mismatch#update-project-code")]
        return hit("env.missing_attribute", "environment_error", f"`{mod}.{attr}` missing in this version", cause, fixes, ("library-version-mismatch",),
                   _found(ctx), 0.88, facts=Facts(names=(mod, attr)))
    return None


def _is_installed_library(top_level: str) -> bool:
    """torch and its companions, or any third-party library the class atlas was read from (not the user's own module)."""
    from assistant.atlas.classes import is_library_package

    return top_level in _LIBS or is_library_package(top_level)


def _private_torch_importer(ctx: Context, module: str | None) -> str | None:
    """The third-party package that imports a private torch module (``torch._six``): its site-packages frame, or the
    package named in the user's own import statement; None when the module is public or no other package is named."""
    if not module or not module.startswith("torch._"):
        return None
    for fr in reversed(ctx.failure.frames):
        m = re.search(r"-packages[/\\]([A-Za-z_]\w*)[/\\]", fr.file)
        if m and m.group(1) != "torch":
            return m.group(1)
    if any(fr.file for fr in ctx.failure.frames):
        return None  # a traceback with no third-party frame: the private import is in the project's own code
    names = [m.group(1) or m.group(2) for m in re.finditer(r"(?m)(?:^|[`>]|\s)(?:from\s+([A-Za-z_]\w*)[\w.]*\s+import\b|import\s+([A-Za-z_]\w*))",
                                                          ctx.failure.text)]
    names = [n for n in names if n not in ("torch", "torchvision", "torchaudio") and n not in _STDLIB_LIKE]
    return names[-1] if names else None


_STDLIB_LIKE = frozenset({"os", "sys", "re", "math", "time", "json", "typing", "collections", "numpy", "np", "the", "a", "it", "this"})


def _import_source(ctx: Context, name: str) -> str | None:
    """The module of ``from X import name`` on a traceback source line (old messages omit it)."""
    for fr in reversed(ctx.failure.frames):
        m = re.match(r"\s*from\s+([\w.]+)\s+import\s+.*\b" + re.escape(name) + r"\b", fr.source or "")
        if m:
            return m.group(1)
    m = re.search(r"from\s+([\w.]+)\s+import\s+[^\n]*\b" + re.escape(name) + r"\b", ctx.failure.text)
    return m.group(1) if m else None


def _module_not_found(ctx: Context, mod: str) -> RuleHit:
    """``No module named 'x'``: which kind of module decides the answer."""
    top = mod.split(".")[0]
    docs = ("module-not-found", "library-version-mismatch")
    facts = Facts(names=(mod,))
    check = remedy("module-not-found#check-interpreter", package=top)
    if mod.startswith("torch._C"):
        cause = ("Python imported a `torch` folder that has no compiled extension: the current directory (or PYTHONPATH) holds a "
                 "PyTorch source checkout or an unpacked wheel, and it shadows the installed package.")
        fixes = [remedy("module-not-found#run-outside-source-tree")]
        return hit("env.torch_source_tree", "environment_error", "A local `torch` folder shadows the installed PyTorch", cause, fixes, docs, _found(ctx), 0.93, facts=facts)
    if mod.startswith("numpy._core"):
        return _numpy2_pickle(ctx, mod)
    if mod == "torch":
        cause = "PyTorch is not installed in the interpreter that runs this script (a different Python, virtualenv or conda environment than the one torch was installed into)."
        fixes = [remedy("module-not-found#install-torch-same-interpreter"), check]
        return hit("env.torch_not_installed", "environment_error", "PyTorch is not installed in this interpreter", cause, fixes, docs, _found(ctx), 0.93, facts=facts)
    if top == "torch":
        cause = (f"The installed PyTorch has no module `{mod}`: it was removed, renamed or not yet added in this release, so code (yours or "
                 "a library's, see the importing frame) written for another PyTorch version fails to import it.")
        fixes = [
            remedy("library-version-mismatch#update-importing-code", module=mod),
            remedy("library-version-mismatch#install-pinned-torch"),
        ]
        return hit("env.torch_submodule_missing", "environment_error", f"`{mod}` does not exist in this PyTorch", cause, fixes, ("library-version-mismatch", "module-not-found"),
                   _found(ctx), 0.9, facts=facts)
    if top == "apex":
        cause = ("NVIDIA apex is not installed. Its mixed-precision part (apex.amp) is superseded by PyTorch's own torch.amp "
                 "(autocast + GradScaler), so the usual fix is to drop apex rather than build it.")
        fixes = [remedy("module-not-found#apex-to-torch-amp"), check]
        return hit("env.apex_missing", "environment_error", f"Module `{mod}` not found", cause, fixes, ("module-not-found", "gradscaler-misuse"), _found(ctx), 0.93, facts=facts)
    if _LOCAL_PACKAGE.match(top):
        cause = (f"Python cannot find `{mod}`, which looks like a package of the project itself: the script runs from a directory "
                 f"where `{top}` is not importable (working directory or PYTHONPATH), or the project is not installed.")
        fixes = [remedy("module-not-found#run-from-project-root")]
        return hit("env.local_module_not_found", "environment_error", f"Project module `{mod}` not found", cause, fixes, docs, _found(ctx), 0.9, facts=facts)
    pip_name = _PIP_NAMES.get(mod) or _PIP_NAMES.get(top)
    cause = (f"The package providing `{mod}` is not installed in this interpreter's environment"
             + (f" (its pip name is `{pip_name}`)" if pip_name and pip_name != top else "") + ", or the job runs a different Python than the one it was installed into.")
    fixes = [remedy("module-not-found#install-into-interpreter", package=pip_name or top), check]
    return hit("env.module_not_found", "environment_error", f"Module `{mod}` not found", cause, fixes, docs, _found(ctx), 0.93,
               facts=Facts(names=(mod, pip_name) if pip_name else (mod,)))


_CACHE_WORDS = lazy_re(r"\bcache\b|\.cache\b|fresh install|(another|older|other) (host|machine)")
_LABELS = lazy_re(r"\blabels?\b")
_LOAD_OR_READ = lazy_re(r"\b(?:load|read)")


def _mentions_cache(text: str) -> bool:
    """Words of a cached or copied file, or labels loaded from disk on one line. The labels-then-load pair is tested line by
    line with two searches: one pattern with `.*` between them re-scans the line from every 'label' (quadratic)."""
    if _CACHE_WORDS.search(text):
        return True
    for line in text.splitlines():
        label = _LABELS.search(line)
        if label and _LOAD_OR_READ.search(line, label.end()):
            return True
    return False


def _numpy2_pickle(ctx: Context, mod: str) -> RuleHit:
    """``No module named 'numpy._core...'``: NumPy 1.x unpickling what NumPy 2 wrote (NumPy itself is installed)."""
    cause = (f"A pickled file written under NumPy 2 is being read under NumPy 1.x: NumPy 2 stores arrays by the path `numpy._core`, "
             f"which older NumPy (before 1.26) does not have, so loading it fails with `{mod}` missing even though NumPy is installed. "
             "The file is a pickle, a `np.load(allow_pickle=True)` object array, a checkpoint holding NumPy values, or a library's cache of preprocessed data.")
    recreate = remedy("pickle-numpy-version#recreate-file")
    upgrade = remedy("pickle-numpy-version#upgrade-numpy")
    fixes = [recreate, upgrade] if _mentions_cache(ctx.failure.text) else [upgrade, recreate]
    return hit("env.numpy2_pickle", "serialization_error", f"`{mod}` missing: a NumPy 2 pickle read by NumPy 1.x", cause,
               [*fixes, remedy("pickle-numpy-version#save-portable")], ("pickle-numpy-version", "numpy2-binary-compat"), _found(ctx), 0.88,
               facts=Facts(names=(mod,)))


def _torchvision_ops(m: re.Match[str]) -> tuple[str, str, list[Fix]]:
    op = next(g for g in m.groups() if g)
    return (f"torchvision's `{op}` operator is missing",
            f"torchvision's compiled operators (here `torchvision::{op}`) did not load: the installed torchvision was built for a different "
            "torch release (or CUDA build) than the installed torch, typically after one of them was upgraded alone.",
            [remedy("library-version-mismatch#matching-torch-torchvision"), remedy("torchvision-custom-ops#build-torchvision-source")])


# PyTorch's own native libraries: a problem with one of them is not a third-party extension's.
_TORCH_NAMESPACES = ("2at", "3c10", "5torch", "6caffe2")  # how at::, c10::, torch:: and caffe2:: appear in a mangled C++ name
_TORCH_OWN_LIB = re.compile(r"^lib(?:torch|c10|caffe2|shm)\w*\.")


def _undefined_symbol(m: re.Match[str]) -> tuple[str, str, list[Fix]]:
    lib = m.group(1) or m.group(2)
    path = lib.replace("\\", "/") if lib else ""
    name = path.rsplit("/", 1)[-1] if lib else None
    fixes = [remedy("library-version-mismatch#rebuild-against-installed-torch"),
             remedy("library-version-mismatch#import-torch-first")]
    # The installed package: its folder under site-packages, or the bare module file named alone
    # (`<module>.cpython-310-x86_64-linux-gnu.so`); a module built in the project's own tree is rebuilt, not reinstalled.
    folder = re.search(r"-packages/([\w.-]+)/", path)
    module = folder.group(1) if folder else name.split(".")[0] if name and "/" not in path else None
    if module and module not in ("torch", "_C") and not _TORCH_OWN_LIB.match(name or ""):
        fixes.insert(0, remedy("library-version-mismatch#reinstall-named-package-for-torch", package=module))
    symbol = m.group(3)
    # A flash-attn module missing a libtorch symbol that takes a std::string (new-ABI `__cxx11`, or old-ABI `Ss`): the wheel's C++11 ABI
    # flag differs from torch's, so the wheel matching torch, CUDA and ABI is the fix.
    if "flash_attn" in path and any(ns in symbol for ns in _TORCH_NAMESPACES) and re.search(r"__cxx11|Ss(?:[A-Z_]|$)", symbol):
        fixes.insert(0, remedy("flash-attn-import-error#reinstall-matching-wheel"))
    if symbol.startswith("nccl"):
        # An NCCL entry point: the NCCL library loaded is not the one torch was built against.
        return ("Another NCCL library is loaded than the one torch was built with",
                f"The loaded libraries do not export `{symbol[:80]}`, an NCCL function that the installed torch calls: the NCCL library the loader "
                "found first is older than (or of another CUDA major than) the one this torch was built against. Typical causes are NVIDIA "
                "packages for two CUDA majors installed side by side (nvidia-*-cu11 next to nvidia-*-cu12), another package pinning a different "
                "nvidia-nccl wheel, or a system or conda NCCL on LD_LIBRARY_PATH.",
                [remedy("library-version-mismatch#single-matching-nccl"), remedy("library-version-mismatch#clean-reinstall")])
    own = folder.group(1) == "torch" if folder else bool(name and _TORCH_OWN_LIB.match(name))
    # Plain string tests, not a lazy pattern: a run of word characters made that pattern quadratic under finditer.
    if own and symbol.startswith("_Z") and any(ns in symbol for ns in _TORCH_NAMESPACES):
        # One of torch's own libraries misses a symbol of torch itself: the torch files come from two different builds.
        return ("torch's own libraries come from two different builds",
                f"`{name}`, part of the installed torch, needs `{symbol[:80]}`, a symbol of torch itself that the other torch library loaded "
                "does not export: the files of two torch builds are mixed, typically two torch packages installed into one environment "
                "(a nightly and a release, a conda and a pip copy, or one pulled in by another package) or an upgrade that left files of the old version.",
                [remedy("library-version-mismatch#clean-reinstall"), remedy("library-version-mismatch#reinstall-torch-and-extensions-together")])
    return ("Compiled module built against another library version",
            (f"`{name}` " if name else "A compiled module ") + f"needs the symbol `{m.group(3)[:80]}`, which the loaded libraries do not export: "
            "it was compiled against a different PyTorch (or CUDA) version than the one now installed, or a library it depends on was loaded "
            "in another version first.",
            fixes)


def _torchvision_cuda(m: re.Match[str]) -> tuple[str, str, list[Fix]]:
    versions = re.search(r"PyTorch has CUDA Version=([\d.]+) and torchvision has CUDA\s+Version=([\d.]+)", m.string)
    return ("torch and torchvision built for different CUDA versions",
            "torch and torchvision come from different CUDA builds" + (f" (torch {versions.group(1)}, torchvision {versions.group(2)})" if versions else "")
            + ": they were installed from different wheel indexes or one was upgraded alone.",
            [remedy("library-version-mismatch#same-wheel-index")])


def _numpy_abi(m: re.Match[str]) -> tuple[str, str, list[Fix]]:
    two = "NumPy 2" in m.group(0) or "_ARRAY_API" in m.group(0)
    cause = ("A compiled package (PyTorch itself when older than 2.3, or another extension) was built against NumPy 1.x while NumPy 2 is installed."
             if two else "PyTorch cannot use NumPy here: NumPy is missing, or its installed version does not match the one PyTorch was built against.")
    if m.group(0).startswith("Could not infer dtype"):
        # A NumPy scalar of a numeric type is always convertible while torch's NumPy bridge works.
        cause = (f"torch did not recognise `{m.group(0).rsplit(' ', 1)[-1]}`, a NumPy scalar type it always converts while its NumPy support works: "
                 "that support failed to initialise, because the installed NumPy (usually 2.x) is not the major version this torch was built against "
                 "(torch 2.2 and older were built for NumPy 1.x).")
    return ("NumPy binary mismatch", cause, [remedy("library-version-mismatch#pin-numpy-below-2")])


def _shared_library(m: re.Match[str]) -> tuple[str, str, list[Fix]]:
    lib = m.group(1)
    cuda = bool(re.match(r"lib(cudnn|cudart|cublas|cufft|curand|cusparse|nvrtc|nccl|cuda)", lib))
    # libcudart.so.10.1 names the CUDA release the importing binary was built for.
    version = re.match(r"libcudart\.so\.(\d+\.\d+)", lib)
    fixes = [remedy("library-version-mismatch#install-runtime-loader-path", library=lib.split(".")[0])]
    if re.match(r"libcuda\.so", lib):
        # The driver's own library: no pip or conda package provides it.
        wsl = re.search(r"\bWSL2?\b|/usr/lib/wsl", m.string)
        cause = (f"The dynamic loader cannot find `{lib}`, the NVIDIA driver's own library (no PyTorch, CUDA or cuDNN package ships it): the "
                 "driver is not installed or not passed into this container, or its folder is not on the loader's path"
                 + (" (on WSL2 the Windows driver provides it under /usr/lib/wsl/lib)" if wsl else " (on WSL2 it lives under /usr/lib/wsl/lib)")
                 + ", or only the versioned libcuda.so.1 exists without the plain name that cuDNN opens.")
        return (f"Shared library `{lib}` not found", cause, [remedy("library-version-mismatch#driver-library-on-loader-path")])
    cause = (f"The dynamic loader cannot find `{lib}`, which a compiled module needs: "
             + ("a CUDA/cuDNN runtime library of the version this build expects is not installed or not on the loader path (for pip wheels it ships in the nvidia-* packages of the same environment)." if cuda
                else "the library is not installed on this system, or not on the loader path."))
    if _TORCH_OWN_LIB.match(lib):
        # One of torch's own libraries: the package asking for it was built for a torch release that shipped a library of that name.
        companion = re.search(r"\b(torchaudio|torchvision|torchtext|torchdata)\b", m.string)
        cause = (f"`{lib}` is one of PyTorch's own libraries. A package compiled for another torch release"
                 + (f" (here `{companion.group(1)}`)" if companion else "") + " looks for a library file that the installed torch does not ship "
                 "(the names of these files changed between releases), typically after another install replaced torch; or the torch installation is incomplete.")
        fixes = ([remedy("library-version-mismatch#companion-version-for-torch", package=companion.group(1))] if companion else []) + [
            remedy("library-version-mismatch#reinstall-torch-and-extensions-together"), remedy("library-version-mismatch#clean-reinstall")]
    if version:
        ver = version.group(1)
        # The innermost import statement quoted in the traceback is the one that loads the binary.
        importers = re.findall(r"^[ \t]*(?:import|from) ([\w.]+)", m.string, re.M)
        importer = importers[-1] if importers else None
        what = f"`{importer}`" if importer else "the package being imported"
        cause += (f" The binary of {what} was built against CUDA {ver}; the CUDA runtime installed (or visible) here is another version, "
                  "so either that runtime must be provided or the package replaced by a build made for the installed CUDA.")
        fixes = [
            remedy("library-version-mismatch#provide-cuda-runtime", version=ver),
            remedy("library-version-mismatch#reinstall-for-installed-cuda", module=importer) if importer
            else remedy("library-version-mismatch#reinstall-imported-for-installed-cuda"),
        ]
    return (f"Shared library `{lib}` not found", cause, fixes)


def _windows_dll(m: re.Match[str]) -> tuple[str, str, list[Fix]]:
    dll_path = m.group(1) or m.group(2) or ""
    dll = dll_path.replace("\\", "/").rsplit("/", 1)[-1] or None
    gpu = bool(dll and re.search(r"nvrtc|cudnn|cublas|cufft|curand|cusparse|cudart|nccl|caffe2_nvrtc|hip|rocm", dll, re.I))
    cause = ("Windows could not load " + (f"`{dll}`" if dll else "a DLL of the installed package") + " or a DLL it depends on: "
             + ("it is part of the GPU build and needs the GPU runtime's own DLLs (CUDA, or ROCm/HIP for AMD builds), whose bin folder must be on PATH; "
                if gpu else "")
             + "a system dependency is missing (the Microsoft Visual C++ Redistributable, the OpenMP runtime), the folder holding it is not on PATH, or the "
             "installation is incomplete or mixes files of two versions.")
    fixes = [
        remedy("library-version-mismatch#dll-dependencies-gpu" if gpu else "library-version-mismatch#dll-dependencies"),
        remedy("library-version-mismatch#clean-reinstall"),
    ]
    if "[WinError 1114]" in m.group(0):
        # Error 1114: the DLL was found, but its initialisation routine failed (a runtime it needs, or this release on this machine).
        cause = ("Windows found " + (f"`{dll}`" if dll else "a DLL of the installed package") + " but its initialisation routine failed: the Microsoft "
                 "Visual C++ Redistributable is missing or older than the build needs, another copy of a runtime DLL it uses is loaded first, "
                 "or this torch release fails to start on this machine.")
        fixes.append(remedy("library-version-mismatch#previous-torch-release"))
    return ("Windows cannot load a DLL" + (f" (`{dll}`)" if dll else ""), cause, fixes)


def _glibc(m: re.Match[str]) -> tuple[str, str, list[Fix]]:
    return ("System C/C++ runtime too old",
            f"A compiled module needs `{m.group(1)}`, which the C/C++ runtime found first does not provide: the system's (or an older environment's) "
            "libstdc++/glibc is older than the one the binary was built against.",
            [remedy("library-version-mismatch#newer-runtime-library")])


def _toolchain(m: re.Match[str]) -> tuple[str, str, list[Fix]]:
    return ("Extension build toolchain missing",
            "Building a C++/CUDA extension needs the CUDA toolkit (nvcc, found through CUDA_HOME) and a C++ compiler/ninja; "
            "the build could not find them" + (" (CUDA_HOME is not set and no toolkit was found)." if "CUDA_HOME" in m.group(0) else "."),
            [remedy("library-version-mismatch#install-cuda-toolkit-home")])


# A wheel index page for one torch release named in an install command (`-f https://<host>/whl/torch-1.13.0+cu117.html`).
_TORCH_WHEEL_INDEX = lazy_re(r"(?:-f|--find-links|--extra-index-url|--index-url)[= ]\s*\S*?\btorch-(\d+\.\d+(?:\.\d+)?)(?:\+\w+)?(?:\.html)?")
_INSTALLED_PACKAGE = lazy_re(r"-packages/([\w.-]+)/")


_BINARY_ROWS: tuple[tuple[str, str, Callable[[re.Match[str]], tuple[str, str, list[Fix]]]], ...] = (
    (r"operator torchvision::(\w+) does not exist|No such operator torchvision::(\w+)", "env.torchvision_ops", _torchvision_ops),
    # The colon is sometimes dropped when the message is retyped; then only an identifier-like symbol (camelCase or mangled) counts.
    # The space after the library's colon is missing in some loaders' (and retyped) messages: `..._ext.so:undefined symbol: ...`.
    (r"(?:ImportError: ([^\n:]+\.(?:so|pyd)[\w.]*): ?|([^\s:'\"`]+\.(?:so|pyd)[\w.]*): ?)?undefined symbol(?::|(?= (?:_Z|[a-z]+[A-Z])))\s*(\S+)",
     "env.undefined_symbol", _undefined_symbol),
    (r"compiled with different CUDA (?:major )?versions", "env.torchvision_cuda", _torchvision_cuda),
    (r"compiled using NumPy 1\.x cannot be run in\s+NumPy 2|numpy\.core\.multiarray failed to import|_ARRAY_API not found|Numpy is not available"
     r"|Could not infer dtype of numpy\.(?:float|int|uint|bool|complex)\d*\b", "env.numpy_abi", _numpy_abi),
    (r"(lib[\w.+-]+\.so[\d.]*): cannot open shared object file", "env.shared_library", _shared_library),
    # Also the error's own words without the WinError code, as report titles and retyped messages give it ("error loading fbgemm.dll").
    (r"\[WinError (?:12[67]|1114)\][^\n]*?(?:Error loading \\?\"(.+?\.dll)\\?\"|(?=\n)|$)|\b[Ee]rror loading \\?[\"'`]?([^\s\"'`]*?\w\.dll)\b",
     "env.windows_dll", _windows_dll),
    (r"`?((?:GLIBCXX|GLIBC|CXXABI)_[\d.]+)'? not found", "env.glibc", _glibc),
    (r"CUDA_HOME environment variable is not set|No such file or directory: '[^']*nvcc'|Ninja is required to load C\+\+ extensions|error: command '[^']*(?:gcc|g\+\+|nvcc)' failed", "env.build_toolchain", _toolchain),
)


@rule(
    'env.binary_mismatch',
    category='environment_error',
    docs=("library-version-mismatch", "module-not-found"),
    reads=("ImportError", "OSError", "RuntimeError", "text"),
    priority=66,
    outcomes=tuple(outcome for _, outcome, _ in _BINARY_ROWS),
    examples=(
        Example("realworld/dev/deepsort-old-no-such-operator-nms", "env.torchvision_ops"),
        Example("realworld/dev/hallo-torchvision-nms-meta-registration", "env.torchvision_ops"),
        Example("realworld/dev/extcpp-undefined-symbol-parseschema", "env.undefined_symbol"),
        Example("realworld/dev/pytorch-2056-old-undefined-symbol-nvrtc", "env.undefined_symbol"),
        Example("realworld/dev/pytorch-8036-undefined-thpvariableclass-import-order", "env.undefined_symbol"),
        Example("corpus/env/torchvision_cuda_major_mismatch.txt", "env.torchvision_cuda"),
        Example("corpus/env/torchvision_cuda_major_mismatch_12.txt", "env.torchvision_cuda"),
        Example("corpus/env/numpy2_abi_import_torch.txt", "env.numpy_abi"),
        Example("corpus/env/numpy_not_available.txt", "env.numpy_abi"),
        Example("corpus/env/libcudnn_so_missing.txt", "env.shared_library"),
        Example("corpus/env/libcudnn_so9_lib64.txt", "env.shared_library"),
        Example("realworld/dev/extremenet-import-torch-libcudart9", "env.shared_library"),
        Example("realworld/dev/zluda-caffe2-nvrtc-rocm-path", "env.windows_dll"),
        Example("corpus/env/windows_dll_fbgemm_pytorch.txt", "env.windows_dll"),
        Example("corpus/env/windows_dll_shm_qdiffusion.txt", "env.windows_dll"),
        Example("corpus/env/windows_dll_cudnn_chatglm.txt", "env.windows_dll"),
        Example("corpus/env/glibcxx_not_found.txt", "env.glibc"),
        Example("corpus/env/glibcxx_old_conda.txt", "env.glibc"),
        Example("corpus/env/cuda_home_not_set.txt", "env.build_toolchain"),
        Example("corpus/env/cuda_home_not_set_old.txt", "env.build_toolchain"),
    ),
)
def binary_mismatch(ctx: Context) -> RuleHit | None:
    """ABI and library mismatches: undefined symbols, torchvision ops, NumPy 2, missing shared libraries, toolchains."""
    docs = ("library-version-mismatch", "module-not-found")
    for pattern, outcome, explain in _BINARY_ROWS:
        m = ctx.search(pattern)
        if m:
            title, cause, fixes = explain(m)
            index = _TORCH_WHEEL_INDEX.search(ctx.failure.text) if outcome == "env.undefined_symbol" else None
            if index:
                # The wheel came from an index page built for one torch release: it loads only if that torch is the one installed.
                cause += (f" The install command took the wheel from an index built for torch {index.group(1)}; if the torch actually "
                          "installed is another release, its symbols differ from the ones the wheel was compiled against.")
                package = _INSTALLED_PACKAGE.search(m.group(0))
                fixes.insert(0, remedy("library-version-mismatch#wheel-index-for-installed-torch", version=index.group(1),
                                       package=package.group(1) if package and package.group(1) != "torch" else None))
            detail = next((g for g in reversed(m.groups()) if g), m.group(0))
            return hit(outcome, "environment_error", title, cause, fixes, docs, _found(ctx, Fact("detail", m.group(0)[:200])), 0.9,
                       facts=Facts(names=(detail[:120],)))
    return None


@rule(
    'env.files_and_disk',
    category='environment_error',
    docs=("files-and-permissions", "download-failures"),
    reads=("OSError", "RuntimeError", "text"),
    priority=67,
    outcomes=('env.file_not_found', 'env.save_parent_missing', 'env.path_kind', 'env.permission', 'env.disk_full', 'env.ssl_certificate', 'env.network', 'env.illegal_instruction'),
    examples=(
        Example("captured/cpu/dataset-relative-path-not-found", "env.file_not_found"),
        Example("captured/cpu/torch-save-missing-checkpoint-dir", "env.save_parent_missing"),
        Example("corpus/env/write_into_missing_dir_captured.txt", "env.save_parent_missing"),
        Example("captured/cpu/checkpoint-dir-is-a-file", "env.path_kind"),
        Example("corpus/env/permission_denied_cache.txt", "env.permission"),
        Example("corpus/env/permission_denied_hf_cache.txt", "env.permission"),
        Example("corpus/env/disk_full_torch_save.txt", "env.disk_full"),
        Example("corpus/env/disk_full_dolly.txt", "env.disk_full"),
        Example("corpus/env/ssl_self_signed_pretrained_download.txt", "env.ssl_certificate"),
        Example("corpus/env/network_name_resolution_facenet.txt", "env.network"),
        Example("corpus/env/network_huggingface_offline.txt", "env.network"),
        Example("corpus/env/network_unreachable_hf_hub.txt", "env.network"),
        Example("corpus/env/illegal_instruction_kaiming.txt", "env.illegal_instruction"),
    ),
)
def files_and_disk(ctx: Context) -> RuleHit | None:
    """Files that are missing or unreadable, full disks, no network for downloads, CPU instruction sets."""
    docs: tuple[str, ...] = ("files-and-permissions",)
    missing = os_error_path(ctx.text, NOT_FOUND_CODES)
    if ctx.exc_type in ("FileNotFoundError", "OSError", "IOError", "") and (missing or ctx.search(r"FileNotFoundError: ")):
        return _file_not_found(ctx, missing.path if missing else _bare_path(ctx.message))
    m = ctx.search(r"Parent directory (\S+) does not exist")
    if m:
        return _parent_missing(ctx, m.group(1).rstrip("."), None)
    kind = os_error_path(ctx.text, frozenset({"Errno 20", "Errno 21", "Errno 17"}))
    if kind:
        what, path = kind.what, kind.path
        story = {"Errno 20": f"a component of `{path}` is a file, not a directory (a file sits where a folder is expected)",
                 "Errno 21": f"`{path}` is a directory, but the code opens it as a file",
                 "Errno 17": f"`{path}` already exists (and is not a directory) where a directory is being created"}[kind.code]
        cause = f"{what}: {story}. Typical of output directories left by an earlier run, or a path in the config that names the wrong level."
        fixes = [remedy("files-and-permissions#inspect-path-on-disk", path=path, directory=path.rsplit("/", 1)[0] if "/" in path else None)]
        return hit("env.path_kind", "environment_error", f"{what}: {path}", cause, fixes, docs, _found(ctx, Fact("path", path)), 0.9, facts=Facts(names=(path,)))
    denied = os_error_path(ctx.text, frozenset({"Errno 13"}))
    if denied:
        path = denied.path
        cache = bool(re.search(r"[/\\]\.cache\b|cache", path, re.I))
        cause = (f"The process may not write or read `{path}`"
                 + (": it is a cache location (under a home directory the job's user does not own, or a read-only root in a container)." if cache else
                    ": a read-only or shared location, or a file created by another user (e.g. root in a container)."))
        fixes = [remedy("files-and-permissions#own-cache-dir") if cache else remedy("files-and-permissions#own-output-path", path=path)]
        return hit("env.permission", "environment_error", f"Permission denied: {path}", cause, fixes, docs, _found(ctx, Fact("path", path)), 0.92, facts=Facts(names=(path,)))
    if ctx.search(r"No space left on device|\[Errno 28\]|file write failed|PytorchStreamWriter failed writing"):
        shm = ctx.search(r"/dev/shm")
        saving = any("serialization.py" in f.file for f in ctx.failure.frames) or bool(ctx.search(r"PytorchStreamWriter"))
        cause = ("The disk" + (" holding /dev/shm (shared memory, used by DataLoader workers and NCCL)" if shm else "") + " is full"
                 + (": torch.save ran out of space while writing a checkpoint, so that file is incomplete." if saving else ": a write failed for lack of space.")
                 + " Checkpoints, logs and caches accumulate during long runs.")
        fixes = [
            remedy("files-and-permissions#free-disk-space"),
            remedy("corrupt-checkpoint#atomic-save"),
        ]
        return hit("env.disk_full", "environment_error", "No space left on device", cause, fixes, ("files-and-permissions", "corrupt-checkpoint"), _found(ctx), 0.92)
    if ctx.search(r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        # The host answered but its TLS chain was not trusted: not a missing network, so the offline advice does not apply.
        cause = ("A download (pretrained weights, a dataset) reached its host, but Python could not verify the HTTPS certificate chain: "
                 "a proxy or firewall re-signing traffic with its own root certificate, or a missing or outdated CA bundle.")
        fixes = [remedy("download-failures#trust-local-ca-bundle"), remedy("download-failures#download-file-manually")]
        return hit("env.ssl_certificate", "environment_error", "SSL certificate verification failed during a download", cause, fixes,
                   ("download-failures",), _found(ctx), 0.85)
    if ctx.search(r"We couldn't connect to 'https?://huggingface\.co'|Failed to establish a new connection|Temporary failure in name resolution|urlopen error|Connection refused|Max retries exceeded with url|offline mode is enabled|LocalEntryNotFoundError"):
        hf = bool(ctx.search(r"huggingface|hf_hub|LocalEntryNotFoundError"))
        host = ctx.search(r"host='([\w.-]+)'|https?://([\w.-]+)")
        cause = ("The code tried to download something (pretrained weights, a tokenizer, a dataset) and the host could not be reached: "
                 "no network or DNS on this machine (typical of compute nodes), or a proxy/firewall in the way.")
        fixes = [remedy("files-and-permissions#offline-hf-cache" if hf else "files-and-permissions#offline-torch-cache")]
        return hit("env.network", "environment_error", "No network for a download", cause, fixes, docs, _found(ctx), 0.85,
                   facts=Facts(names=(host.group(1) or host.group(2),) if host else ()))
    if ctx.search(r"(?i)\billegal instruction\b"):
        docs = ("illegal-instruction-cpu", "library-version-mismatch")
        # Which family of processor the user names decides the first remedy: NumPy's OpenBLAS misdetects some ARM boards'
        # cores (Jetson), other ARM boards get torch wheels built for newer cores, x86 machines lack AVX2/AVX-512.
        if ctx.search(r"(?i)jetson|\bl4t\b|jetpack|openblas|\bxavier\b|\btx2\b"):
            cause = ("On this ARM board NumPy's bundled OpenBLAS misdetects the processor core and runs kernels it does not implement; "
                     "anything importing NumPy (torch included) then dies with SIGILL.")
            fixes = [remedy("illegal-instruction-cpu#openblas-coretype-armv8"), remedy("illegal-instruction-cpu#other-torch-wheel")]
        elif ctx.search(r"(?i)raspberry|\bcortex|aarch64|arm64|\barmv8"):
            cause = "The installed torch wheel was compiled with ARM instruction-set features this processor core lacks."
            fixes = [remedy("illegal-instruction-cpu#other-torch-wheel"), remedy("illegal-instruction-cpu#openblas-coretype-armv8")]
        else:
            cause = "The process executed a CPU instruction this processor lacks: a binary built for newer CPUs (AVX2/AVX-512) runs on an older or virtualised one."
            fixes = [remedy("library-version-mismatch#cpu-compatible-build"), remedy("illegal-instruction-cpu#other-torch-wheel")]
        return hit("env.illegal_instruction", "environment_error", "Illegal CPU instruction", cause, fixes, docs, _found(ctx), 0.75)
    return None


def _bare_path(message: str) -> str | None:
    """A FileNotFoundError message that is nothing but a path (``raise FileNotFoundError(path)``); None for prose."""
    text = message.strip().strip("'\"")
    # Plain string tests, not a pattern: a path has a separator or a dot and no space or quote (linear on any text).
    one_token = bool(text) and not any(c.isspace() or c in "'\"" for c in text)
    return text if one_token and any(c in "/\\." for c in text) and not text.endswith(".") else None


def _file_not_found(ctx: Context, path: str | None) -> RuleHit:
    """A missing file: reading it, or writing into a directory that does not exist; ``path`` None when the message names none."""
    if path is None:
        cause = (f"A file or directory the code needs does not exist ({ctx.message.strip() or 'the message names no path'}): "
                 "a path relative to another working directory, a dataset not downloaded or mounted, or a typo.")
        fixes = [remedy("files-and-permissions#check-path-on-host"), remedy("files-and-permissions#paths-from-script-location")]
        return hit("env.file_not_found", "environment_error", "File not found", cause, fixes, ("files-and-permissions",), _found(ctx), 0.85)
    writing = any(re.search(r"save|open\([^)]*['\"][wa]b?['\"]|makedirs|mkdir|write", fr.source or "") or (fr.function or "") in ("save", "_open_zipfile_writer")
                  for fr in ctx.failure.frames)
    if writing and re.search(r"[/\\]", path):
        return _parent_missing(ctx, re.split(r"[/\\][^/\\]*$", path)[0], path)
    relative = not path.startswith(("/", "~")) and not re.match(r"^[A-Za-z]:[\\/]", path)
    cause = f"The file `{path}` does not exist" + (
        " relative to the current working directory: relative paths depend on where the job is started from, not where the script lives." if relative
        else " on this machine (a path from another machine, a dataset not downloaded or mounted, or a typo).")
    if re.search(r"\.(pt|pth|ckpt|bin|safetensors)$", path):
        cause += " It is a checkpoint: check the run that should have written it."
    fixes = [
        remedy("files-and-permissions#check-path-on-host", shell_path=shlex.quote(path)),
        remedy("files-and-permissions#paths-from-script-location"),
    ]
    return hit("env.file_not_found", "environment_error", f"File not found: {path}", cause, fixes, ("files-and-permissions",),
               _found(ctx, Fact("path", path)), 0.92, facts=Facts(names=(path,)))


def _parent_missing(ctx: Context, directory: str, path: str | None) -> RuleHit:
    """Writing a file into a directory that was never created."""
    cause = (f"Writing {('`' + path + '`') if path else 'the file'} failed because the directory `{directory}` does not exist: "
             "torch.save and open() do not create parent folders (an output/run directory that was never made, or a typo in the path).")
    fixes = [remedy("files-and-permissions#create-output-dir", directory=directory)]
    return hit("env.save_parent_missing", "environment_error", "Output directory does not exist", cause, fixes, ("files-and-permissions",),
               _found(ctx, Fact("path", directory)), 0.93, facts=Facts(names=tuple(x for x in (directory, path) if x)))


# Words that are dictionary keys of ordinary training code, never an architecture's model_type.
_NOT_MODEL_TYPE = frozenset({"model", "models", "state_dict", "model_state_dict", "config", "weights", "params", "module", "base", "name",
                             "type", "model_type", "image", "images", "label", "labels", "input_ids", "text", "train", "test", "val"})


@rule(
    'env.unknown_model_type',
    category='environment_error',
    docs=("hf-remote-code-architecture",),
    reads=("KeyError", "text"),
    priority=70,
    examples=(Example("corpus/env/keyerror_model_type_mergekit.txt", "env.unknown_model_type"),),
)
def unknown_model_type(ctx: Context) -> RuleHit | None:
    """A bare KeyError whose key is the architecture the user loads: a config registry that predates that model type."""
    m = ctx.search(r"KeyError: ['\"]([a-z][a-z0-9_-]{2,30})['\"]")
    if not m:
        return None
    key = m.group(1)
    if key in _NOT_MODEL_TYPE or ctx.search(rf"\[\s*['\"]{re.escape(key)}['\"]\s*\]"):
        return None  # a key of the user's own dict (indexed with ['key'] in the quoted code)
    registry = ctx.search(r"configuration_auto|CONFIG_MAPPING|model_type")
    named = ctx.search(rf"\b{re.escape(key)}\b[\w.-]*(?:\s+[\w.-]+){{0,2}}?\s+(?:models?|checkpoints?|weights)\b", re.I)
    if not (registry or named):
        return None
    cause = (f"The missing key `{key}` is the type of the model being loaded: the installed library looks the architecture up by its "
             "`model_type` in a registry that has no such entry, because that release predates support for this architecture.")
    fixes = [remedy("hf-remote-code-architecture#upgrade-transformers")]
    return hit("env.unknown_model_type", "environment_error", f"Model type '{key}' unknown to the installed transformers", cause, fixes,
               ("hf-remote-code-architecture",), _found(ctx, Fact("key", f"model type '{key}'")), 0.85, facts=Facts(names=(key,)))
