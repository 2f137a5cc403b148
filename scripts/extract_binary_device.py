"""Binary atlas entries of the CUDA libraries, run on the GPU machine (the CPU machine has no CUDA build of torch).

    python3 scripts/extract_binary_device.py OUT_DIR [--arch sm_90] [--cuobjdump-timeout 150]

Writes ``OUT_DIR/binary-cuda-<major.minor>.jsonl.gz``: the entries of ``libc10_cuda.so``, ``libtorch_cuda.so`` and
``libtorch_cuda_linalg.so`` whose templates the CPU libraries of the same install don't hold (host ``.rodata``
literals), plus the CUDA kernel assertions read from one architecture's cubins (``cuobjdump -xelf``). Also writes
``device_log.txt`` (versions, GPU, counts, timings) and ``cubin_strings_sample.txt`` (raw strings of a few cubins,
for checking the kernel-assert filter). Python's standard library and torch (for its version) only.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assistant.atlas.extract_binary import CUDA_LIBS, cubin_literals, extract, extract_kernel_asserts  # noqa: E402


def _run(cmd: list[str], timeout: float) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"<{cmd[0]} failed: {exc}>"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--cuobjdump-timeout", type=float, default=150.0)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    log: list[str] = []

    def say(msg: str) -> None:
        print(msg, flush=True)
        log.append(msg)

    t0 = time.time()
    import torch

    version, commit = torch.__version__, torch.version.git_version or ""
    lib_dir = Path(torch.__file__).parent / "lib"
    say(f"torch {version} commit {commit} cuda {torch.version.cuda} python {sys.version.split()[0]}")
    say("nvidia-smi: " + _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv"], 30).strip().replace("\n", " | "))
    say("libs: " + ", ".join(f"{p.name} {p.stat().st_size >> 20} MiB" for p in sorted(lib_dir.glob("lib*.so*"))))

    entries = extract(lib_dir, version, commit, libs=CUDA_LIBS)
    say(f"host .rodata entries of the CUDA libs (templates not in the CPU libs): {len(entries)} in {time.time() - t0:.1f}s")
    for lib in CUDA_LIBS:
        say(f"  {lib}: {sum(e['lib'] == lib for e in entries)}")

    # kernel assertions: the cubins of one architecture
    t1 = time.time()
    cuda_lib = lib_dir / "libtorch_cuda.so"
    kernel: list[dict] = []
    cuobjdump = shutil.which("cuobjdump") or next((str(p) for p in Path("/usr/local/cuda/bin").glob("cuobjdump")), None)
    if cuda_lib.exists() and cuobjdump:
        listing = _run([cuobjdump, "-lelf", str(cuda_lib)], 60)
        names = re.findall(r"ELF file\s+\d+:\s+(\S+)", listing)
        archs = sorted({m for n in names for m in re.findall(r"sm_\d+a?", n)})
        arch = a.arch if a.arch in archs else (archs[-1] if archs else a.arch)
        say(f"cuobjdump: {len(names)} cubins, archs {archs}; extracting {arch}")
        work = Path(tempfile.mkdtemp(prefix="cubins"))
        try:
            subprocess.run([cuobjdump, "-xelf", arch, str(cuda_lib)], cwd=work, capture_output=True, timeout=a.cuobjdump_timeout)
        except subprocess.TimeoutExpired:
            say(f"cuobjdump -xelf stopped after {a.cuobjdump_timeout}s; reading what it wrote")
        cubins = sorted(work.glob("*.cubin"))
        say(f"  {len(cubins)} cubins written in {time.time() - t1:.1f}s")
        skip = {e["template"] for e in entries}
        kernel = extract_kernel_asserts(cubins, "libtorch_cuda.so", version, commit, skip=skip)
        say(f"  kernel_assert entries: {len(kernel)} ({sum(e['condition'] is not None for e in kernel)} conditions) in {time.time() - t1:.1f}s")
        with open(a.out / "cubin_strings_sample.txt", "w", encoding="utf-8") as f:
            for c in cubins[:: max(1, len(cubins) // 40)][:40]:
                f.write(f"== {c.name}\n")
                for s in cubin_literals(c.read_bytes())[:200]:
                    f.write(repr(s)[:300] + "\n")
        shutil.rmtree(work, ignore_errors=True)
    else:
        say(f"no kernel asserts: libtorch_cuda.so present={cuda_lib.exists()} cuobjdump={cuobjdump}")

    major_minor = ".".join(version.split("+")[0].split(".")[:2])
    path = a.out / f"binary-cuda-{major_minor}.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=9) as f:
        for e in entries + kernel:
            f.write(json.dumps(e, ensure_ascii=False) + "\n")
    say(f"wrote {len(entries) + len(kernel)} entries to {path.name} ({os.path.getsize(path)} bytes) in {time.time() - t0:.1f}s total")
    (a.out / "device_log.txt").write_text("\n".join(log) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
