"""Time `torchhelp kb add` of one document (incremental: only its chunks are embedded) against a
full rebuild of the same index (`torchhelp kb build`, what `kb add` used to cost), median of N,
each a fresh CLI process, with the dense index. Writes benchmarks/kb_add.json.

    python scripts/bench_kb_add.py [--repeat 3] [--out benchmarks/kb_add.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNBOOK = """# Scratch cluster runbook

## Quota exceeded on /scratch

Jobs that die with `OSError: [Errno 122] Disk quota exceeded` while writing checkpoints have filled
their /scratch allocation. Delete old checkpoints under /scratch/$USER/ckpt or move them to /project.

## Out of memory on the shared nodes

`torch.OutOfMemoryError: CUDA out of memory` on gpu17-gpu24 usually means another job holds the
card: run `nvidia-smi` first, then request an exclusive node with `--exclusive`.

## NCCL timeouts after maintenance

After the fabric maintenance window, `NCCL WARN NET/IB` timeouts mean the job started on a drained
node; resubmit with `--exclude` naming that node.
"""


def _cli(args: list[str], home: Path) -> float:
    env = {**os.environ, "TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "1", "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "assistant", *args], capture_output=True, text=True, env=env, timeout=1800)
    elapsed = time.perf_counter() - started
    if res.returncode != 0:
        raise SystemExit(f"torchhelp {' '.join(args)} failed: {res.stderr.strip()}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "kb_add.json")
    ns = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-kb-add-"))
    try:
        doc = work / "scratch-runbook.md"
        doc.write_text(RUNBOOK)
        base = work / "base"
        first_build = _cli(["kb", "build"], base)  # the dense index every run starts from
        incremental, rebuild = [], []
        manifest: dict = {}
        for i in range(ns.repeat):
            home = work / f"home{i}"
            shutil.copytree(base, home)
            incremental.append(_cli(["kb", "add", str(doc)], home))  # embeds the new chunks only
            manifest = json.loads((home / "index" / "manifest.json").read_text())
            rebuild.append(_cli(["kb", "build"], home))  # every chunk embedded again
        result = {
            "what": "torchhelp kb add of one document: incremental (new chunks embedded, the rest reused) vs a full rebuild (kb build)",
            "repeat": ns.repeat,
            "documents": manifest.get("documents"), "chunks": manifest.get("chunks"),
            "chunks_embedded_incremental": manifest.get("embedded"), "chunks_reused_incremental": manifest.get("reused"),
            "incremental_s": [round(t, 2) for t in incremental], "rebuild_s": [round(t, 2) for t in rebuild],
            "incremental_median_s": round(statistics.median(incremental), 2), "rebuild_median_s": round(statistics.median(rebuild), 2),
            "speedup": round(statistics.median(rebuild) / statistics.median(incremental), 1),
            "first_build_s": round(first_build, 2),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                        "load_average_at_end": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None},
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
