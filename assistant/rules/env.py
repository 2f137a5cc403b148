"""The environment: missing modules, version/ABI mismatches, GPU architectures, files, disks, network."""

from __future__ import annotations

import re

from assistant.rules.registry import Example, rule
from assistant.rules.base import basic_facts as _found, Context, fix, hit
from assistant.types import Fact, RuleHit

# import name -> pip distribution, where they differ
_PIP_NAMES = {
    "cv2": "opencv-python", "PIL": "pillow", "sklearn": "scikit-learn", "yaml": "pyyaml", "skimage": "scikit-image",
    "attr": "attrs", "Crypto": "pycryptodome", "bs4": "beautifulsoup4", "dateutil": "python-dateutil", "google.protobuf": "protobuf",
    "tensorboardX": "tensorboardX", "apex": "apex (build from source)", "flash_attn": "flash-attn", "torch_geometric": "torch-geometric",
    "pytorch_lightning": "pytorch-lightning", "lightning": "lightning", "einops": "einops", "timm": "timm", "transformers": "transformers",
    "wandb": "wandb", "omegaconf": "omegaconf", "hydra": "hydra-core", "accelerate": "accelerate", "datasets": "datasets",
}



@rule(
    'env.arch_mismatch',
    category='environment_error',
    docs=("cuda-arch-mismatch", "library-version-mismatch"),
    priority=120,
    outcomes=('env.arch_mismatch',),
    examples=(),
)
def arch_mismatch(ctx: Context) -> RuleHit | None:
    """The installed wheel has no kernels for this GPU's compute capability."""
    m = ctx.search(r"with CUDA capability (sm_\d+) is not compatible with the current PyTorch installation")
    if not (m or ctx.search(r"no kernel image is available for execution on the device|CUDA_ERROR_NO_BINARY_FOR_GPU|cudaErrorNoKernelImageForDevice")):
        return None
    arch = m.group(1) if m else None
    supported = ctx.search(r"supports CUDA capabilities ([\w ]+?)(?:\.|\n|$)")
    found = _found(ctx, *( [Fact("gpu", f"GPU architecture {arch}; wheel supports {supported.group(1).strip()}")] if arch and supported else []))
    cause = ("The installed PyTorch (or an extension) contains no GPU code for this GPU's architecture" + (f" ({arch})" if arch else "")
             + ": the wheel was built for other compute capabilities — an old wheel on a new GPU (e.g. Hopper sm_90 / Blackwell sm_100+ with a wheel built before their support), "
             "or a wheel that dropped old architectures on an old GPU. A custom CUDA extension compiled without this architecture causes the same error.")
    fixes = [
        fix("Compare the GPU's capability with the wheel's architectures", "", "python -c \"import torch; print(torch.cuda.get_device_capability(), torch.cuda.get_arch_list(), torch.version.cuda)\"", "cuda-arch-mismatch"),
        fix("Install a wheel built for a CUDA version that supports this GPU", "Newer GPUs need newer CUDA wheels (see the selector on pytorch.org).", "pip install --upgrade torch --index-url https://download.pytorch.org/whl/cu128", "cuda-arch-mismatch"),
        fix("Rebuild custom extensions for this architecture", "", "TORCH_CUDA_ARCH_LIST=\"9.0\" pip install --no-build-isolation -e .", "cuda-arch-mismatch"),
    ]
    return hit("env.arch_mismatch", "environment_error", "PyTorch build does not support this GPU", cause, fixes, ("cuda-arch-mismatch", "library-version-mismatch"), found, 0.93)


@rule(
    'env.missing_module',
    category='environment_error',
    docs=("module-not-found", "library-version-mismatch"),
    priority=330,
    outcomes=('env.module_not_found', 'env.cannot_import_name', 'env.missing_attribute'),
    examples=(),
)
def missing_module(ctx: Context) -> RuleHit | None:
    """ModuleNotFoundError / ImportError, including version-skew ``cannot import name``."""
    m = ctx.search(r"No module named '([\w.]+)'")
    if m and ctx.exc_type in ("ModuleNotFoundError", "ImportError", ""):
        mod = m.group(1)
        top = mod.split(".")[0]
        if mod == "torch._C" or mod.startswith("torch._C"):
            cause = "Python imported the `torch` folder of a PyTorch source checkout (the current directory) instead of the installed package, which has no compiled torch._C there."
            fixes = [fix("Run from another directory (or build/install the checkout)", "", "cd ~ && python -c 'import torch; print(torch.__file__)'", "module-not-found")]
        elif top == "torch":
            cause = f"`{mod}` is not importable: PyTorch is not installed in the interpreter running the script" + (" (or this submodule does not exist in the installed version)" if "." in mod else "") + "."
            fixes = [
                fix("Check which interpreter runs and install torch into it", "", "python -c 'import sys; print(sys.executable)'\npython -m pip install torch", "module-not-found"),
            ]
        else:
            if top == "apex":
                cause = ("NVIDIA apex is not installed. Its mixed-precision part (apex.amp) is deprecated: PyTorch has native AMP in torch.amp "
                         "(autocast + GradScaler), so the usual fix is to drop apex rather than build it.")
                fixes = [fix("Replace apex.amp with torch.amp", "", "scaler = torch.amp.GradScaler('cuda')\nwith torch.autocast('cuda', dtype=torch.float16):\n    loss = criterion(model(x), y)\nscaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()", "module-not-found")]
                return hit("env.module_not_found", "environment_error", f"Module `{mod}` not found", cause, fixes, ("module-not-found", "gradscaler-misuse"), _found(ctx), 0.93)
            pip_name = _PIP_NAMES.get(mod) or _PIP_NAMES.get(top)
            local = bool(re.match(r"^(src|models?|utils?|data(sets?)?|config|lib|common|modules|nets?|networks?)$", top))
            cause = (f"Python cannot find the module `{mod}`. "
                     + (f"It looks like a module of your own project: the script is run from a directory where `{top}` is not importable (working directory / PYTHONPATH), or the project is not installed." if local
                        else "The package is not installed in this interpreter's environment" + (f" (its pip name is `{pip_name}`)" if pip_name and pip_name != top else "") + ", or the job runs a different Python than the one you installed into."))
            if local:
                fixes = [fix("Run from the project root or install the project", "", "cd /path/to/project && python -m train\n# or: pip install -e .   # or: export PYTHONPATH=$PWD", "module-not-found")]
            else:
                fixes = [fix("Install it into the interpreter that runs the job", "Use `python -m pip` so pip and python are the same environment.", f"python -m pip install {pip_name or top}", "module-not-found")]
        fixes.append(fix("Confirm the environment", "", "which python; python -m pip list | grep -i " + top, "module-not-found"))
        return hit("env.module_not_found", "environment_error", f"Module `{mod}` not found", cause, fixes, ("module-not-found", "library-version-mismatch"), _found(ctx), 0.93)
    m = ctx.search(r"cannot import name '(\w+)' from '([\w.]+)'")
    if m:
        cause = (f"`{m.group(2)}` exists but has no `{m.group(1)}`: the installed version is older or newer than the code expects (the name was added, moved or removed), "
                 "or a local file shadows the package.")
        fixes = [
            fix("Check the installed version against the project's requirements", "", f"python -m pip show {m.group(2).split('.')[0]}", "library-version-mismatch"),
            fix("Install the version the code was written for", "", f"python -m pip install '{m.group(2).split('.')[0]}==<version from requirements>'", "library-version-mismatch"),
        ]
        return hit("env.cannot_import_name", "environment_error", f"Cannot import `{m.group(1)}` from `{m.group(2)}`", cause, fixes, ("library-version-mismatch", "module-not-found"), _found(ctx), 0.9)
    m = ctx.search(r"module '([\w.]+)' has no attribute '(\w+)'")
    if m and m.group(1).split(".")[0] in ("torch", "torchvision", "torchaudio", "numpy", "transformers", "triton"):
        cause = f"`{m.group(1)}.{m.group(2)}` does not exist in the installed version of {m.group(1).split('.')[0]}: the code targets a different (usually newer) release."
        fixes = [fix("Upgrade to the version the code expects (or use the older API)", "", f"python -c \"import {m.group(1).split('.')[0]} as m; print(m.__version__)\"", "library-version-mismatch")]
        return hit("env.missing_attribute", "environment_error", f"`{m.group(1)}.{m.group(2)}` missing in this version", cause, fixes, ("library-version-mismatch",), _found(ctx), 0.88)
    return None


@rule(
    'env.binary_mismatch',
    category='environment_error',
    docs=("library-version-mismatch", "module-not-found"),
    priority=331,
    outcomes=('env.binary_mismatch',),
    examples=(),
)
def binary_mismatch(ctx: Context) -> RuleHit | None:
    """ABI and library mismatches: undefined symbols, torchvision ops, NumPy 2, missing shared libraries."""
    docs = ("library-version-mismatch", "module-not-found")
    cases = [
        (r"operator torchvision::(\w+) does not exist|No such operator torchvision::(\w+)", "torchvision does not match torch",
         "torchvision's compiled operators were built for a different torch release than the one installed; pip upgraded one without the other.",
         [fix("Install matching torch and torchvision releases together", "Each torchvision release pairs with one torch release.", "pip install torch==2.X.Y torchvision==0.Z.W  # a matching pair", "library-version-mismatch")]),
        (r"undefined symbol: (\S+)", "Binary extension built against another torch",
         "A compiled extension (yours or a package's: flash-attn, apex, torch-scatter, mmcv…) was built against a different PyTorch/CUDA version, so a symbol it needs does not exist in the installed libtorch.",
         [fix("Rebuild/reinstall the extension against the installed torch", "", "pip install --force-reinstall --no-build-isolation <extension>", "library-version-mismatch")]),
        (r"compiled with different CUDA major versions|PyTorch and torchvision were compiled with different CUDA", "torch and torchvision built for different CUDA versions",
         "torch and torchvision come from different CUDA builds.", [fix("Install both from the same wheel index", "", "pip install torch torchvision --index-url https://download.pytorch.org/whl/cu126", "library-version-mismatch")]),
        (r"compiled using NumPy 1\.x cannot be run in\s+NumPy 2|numpy\.core\.multiarray failed to import|_ARRAY_API not found|Numpy is not available", "NumPy ABI mismatch",
         "A compiled package was built against NumPy 1.x but NumPy 2 is installed (or NumPy is missing).",
         [fix("Pin NumPy below 2 or upgrade the package that was built for 1.x", "", "pip install 'numpy<2'", "library-version-mismatch")]),
        (r"(lib[\w.+-]+\.so[\d.]*): cannot open shared object file", "Shared library missing",
         "A shared library the package needs is not on the loader path (CUDA runtime/cuDNN libs of another version, or system libraries missing in a slim container).",
         [fix("Install the matching runtime or fix LD_LIBRARY_PATH", "", "ldconfig -p | grep <library>", "library-version-mismatch")]),
        (r"GLIBCX?X?_[\d.]+' not found|version `GLIBC", "System C/C++ library too old",
         "The binary wheel needs a newer glibc/libstdc++ than this system provides.",
         [fix("Use a newer base image / conda's libstdcxx, or a wheel built for older systems", "", None, "library-version-mismatch")]),
        (r"CUDA_HOME environment variable is not set|No such file or directory: '[^']*nvcc'|Ninja is required to load C\+\+ extensions|error: command '[^']*(?:gcc|g\+\+|nvcc)' failed", "Extension build toolchain missing",
         "Building a C++/CUDA extension needs the CUDA toolkit (nvcc, CUDA_HOME) and a compiler/ninja, which are not available here.",
         [fix("Install the toolkit matching torch.version.cuda and set CUDA_HOME", "", "export CUDA_HOME=/usr/local/cuda; pip install ninja", "library-version-mismatch")]),
    ]
    for pattern, title, cause, fixes in cases:
        m = ctx.search(pattern)
        if m:
            extra = [Fact("detail", m.group(0)[:200])]
            return hit("env.binary_mismatch", "environment_error", title, cause, fixes, docs, _found(ctx, *extra), 0.9)
    return None


@rule(
    'env.files_and_disk',
    category='environment_error',
    docs=("files-and-permissions",),
    priority=332,
    outcomes=('env.file_not_found', 'env.save_parent_missing', 'env.path_kind', 'env.permission', 'env.disk_full', 'env.too_many_files', 'env.network', 'env.illegal_instruction'),
    examples=(),
)
def files_and_disk(ctx: Context) -> RuleHit | None:
    """Files that are missing or unreadable, full disks, descriptor limits, no network for downloads."""
    docs = ("files-and-permissions",)
    m = ctx.search(r"\[Errno 2\] No such file or directory: '([^']+)'|FileNotFoundError: ([^\n]+)")
    if m and ctx.exc_type in ("FileNotFoundError", "OSError", "IOError", ""):
        path = m.group(1) or m.group(2)
        relative = not path.startswith(("/", "~")) and not re.match(r"^[A-Za-z]:[\\/]", path)
        cause = f"The file `{path}` does not exist" + (" relative to the current working directory — relative paths depend on where the job is started from, not where the script lives." if relative else " on this machine (a path from another machine/cluster, a dataset not downloaded or mounted, or a typo).")
        if re.search(r"\.(pt|pth|ckpt|bin|safetensors)$", path):
            cause += " It is a checkpoint: check the run that should have written it."
        saving = any(re.search(r"save|open\(.*['\"]w|makedirs|mkdir|write", fr.source or "") or (fr.function or "") in ("save", "_open_zipfile_writer") for fr in ctx.failure.frames)
        parent_missing = saving and "/" in path
        if parent_missing:
            cause = f"Writing `{path}` failed because its directory does not exist: torch.save/open do not create parent folders."
        fixes = [
            fix("Create the directory before saving", "", "os.makedirs(os.path.dirname(path), exist_ok=True)\ntorch.save(state, path)", "files-and-permissions")] if parent_missing else []
        fixes += [
            fix("Build paths from the script's location or a configurable root", "", "from pathlib import Path\nROOT = Path(__file__).resolve().parent\ndata = ROOT / 'data' / 'train.csv'", "files-and-permissions"),
            fix("Check the path on the machine that runs the job", "", f"ls -l '{path}'; pwd", "files-and-permissions"),
        ]
        return hit("env.file_not_found", "environment_error", f"File not found: {path}", cause, fixes, docs, _found(ctx, Fact("path", path)), 0.92)
    m = ctx.search(r"Parent directory (\S+) does not exist")
    if m:
        d = m.group(1).rstrip(".")
        cause = f"torch.save was asked to write into `{d}`, which does not exist: torch.save does not create folders (a run/experiment directory that was never made, or a typo in the output path)."
        fixes = [fix("Create the directory before saving", "", f"os.makedirs('{d}', exist_ok=True)\ntorch.save(state, path)", "files-and-permissions")]
        return hit("env.save_parent_missing", "environment_error", "Checkpoint directory does not exist", cause, fixes, docs, _found(ctx, Fact("path", d)), 0.93)
    m = ctx.search(r"\[Errno (20|21|17)\] (Not a directory|Is a directory|File exists): '([^']+)'")
    if m:
        code, what, path = m.groups()
        story = {"20": f"a path component of `{path}` is a file, not a directory (a file sits where a folder is expected)",
                 "21": f"`{path}` is a directory, but the code opens it as a file",
                 "17": f"`{path}` already exists (and is not a directory) where a directory is being created"}[code]
        cause = f"{what}: {story}. Typical in run/output directories created by an earlier run or a mistyped config path."
        fixes = [fix("Check what is on disk at that path and fix the path or remove the stale entry", "", f"ls -ld '{path}' '{path.rsplit('/', 1)[0] if '/' in path else '.'}'\nos.makedirs(run_dir, exist_ok=True)  # after removing a stale file of the same name", "files-and-permissions")]
        return hit("env.path_kind", "environment_error", f"{what}: {path}", cause, fixes, docs, _found(ctx, Fact("path", path)), 0.9)
    m = ctx.search(r"\[Errno 13\] Permission denied: '([^']+)'")
    if m:
        cause = f"The process may not read or write `{m.group(1)}`: a shared/read-only location, another user's cache directory, or a file created by a different user (e.g. root in a container)."
        fixes = [fix("Write to a directory you own; point caches there", "", "export TORCH_HOME=$HOME/.cache/torch HF_HOME=$HOME/.cache/huggingface", "files-and-permissions")]
        return hit("env.permission", "environment_error", f"Permission denied: {m.group(1)}", cause, fixes, docs, _found(ctx, Fact("path", m.group(1))), 0.92)
    if ctx.search(r"No space left on device|\[Errno 28\]|file write failed|PytorchStreamWriter failed writing"):
        shm = ctx.search(r"/dev/shm")
        cause = ("The disk (or /dev/shm) is full" + (" — here it is shared memory, used by DataLoader workers and NCCL" if shm else "") + ". Checkpoints, logs and caches "
                 "(torch compile caches, dataset caches) fill disks quickly during long runs; a checkpoint written while the disk fills is left truncated.")
        fixes = [
            fix("Free space and keep only the last N checkpoints", "", "df -h . /dev/shm /tmp", "files-and-permissions"),
            fix("Save atomically so a full disk cannot corrupt the previous checkpoint", "", "torch.save(state, tmp); os.replace(tmp, path)", "corrupt-checkpoint"),
        ]
        return hit("env.disk_full", "environment_error", "No space left on device", cause, fixes, ("files-and-permissions", "corrupt-checkpoint"), _found(ctx), 0.92)
    if ctx.search(r"\[Errno 24\] Too many open files"):
        cause = "The process hit its open-file limit (ulimit -n): many DataLoader workers, files opened without closing, or tensor sharing through file descriptors."
        fixes = [fix("Raise the limit or use the file_system sharing strategy", "", "ulimit -n 65536\n# torch.multiprocessing.set_sharing_strategy('file_system')", "files-and-permissions")]
        return hit("env.too_many_files", "environment_error", "Too many open files", cause, fixes, ("files-and-permissions", "dataloader-shared-memory"), _found(ctx), 0.88)
    if ctx.search(r"We couldn't connect to 'https?://huggingface\.co'|Failed to establish a new connection|Temporary failure in name resolution|urlopen error|Connection refused|Max retries exceeded with url|offline mode is enabled|LocalEntryNotFoundError"):
        cause = "The code tried to download something (pretrained weights, a tokenizer, a dataset) and the network is unreachable — typical on compute nodes without internet."
        fixes = [fix("Download once where there is network, then load from a local path/cache", "Set HF_HUB_OFFLINE=1 / TORCH_HOME to the pre-filled cache on the cluster.", "export HF_HUB_OFFLINE=1 HF_HOME=/shared/hf_cache", "files-and-permissions")]
        return hit("env.network", "environment_error", "No network for a download", cause, fixes, docs, _found(ctx), 0.85)
    if ctx.search(r"Illegal instruction"):
        cause = "The process executed a CPU instruction this processor lacks: a binary built for newer CPUs (AVX2/AVX-512) runs on an older one."
        fixes = [fix("Install builds for this CPU (or build from source without -march=native)", "", None, "library-version-mismatch")]
        return hit("env.illegal_instruction", "environment_error", "Illegal CPU instruction", cause, fixes, ("library-version-mismatch",), _found(ctx), 0.75)
    return None
