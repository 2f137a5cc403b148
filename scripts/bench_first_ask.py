"""The first `torchhelp ask` after an install (issue 21), side by side with `python -c "import torch"`.

Creating a fresh virtual environment per run is too slow here, so each run uses the installed package
with a fresh ``TORCHHELP_HOME`` *and* a fresh encoder cache (``TORCHHELP_ENCODER_CACHE``): nothing a
previous run built is there, as on a machine that has just run ``pip install``. Variants, alternated
run by run, medians of ``--repeats`` (default 3):

* ``first_ask``: ``torchhelp ask`` on the README's bundled example (examples/linear_shape_mismatch.log);
* ``first_kb_search``: ``torchhelp kb search`` (always embeds its query: the static encoder computes the
  table rows it needs on demand from the shipped mean, loading the transformer once);
* ``import_torch``: ``python -c "import torch"``;
* ``second_ask``: the same ask again in the home the first one used (reported for scale).

Also recorded: whether the first ask wrote an index under the home (it should not), the shipped
index's size, and the CPU count (the target is <= 5 s on 2 cores). Writes benchmarks/first_ask.json.
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
EXAMPLE = ROOT / "examples" / "linear_shape_mismatch.log"
OUT = ROOT / "benchmarks" / "first_ask.json"


def _torchhelp() -> list[str]:
    exe = shutil.which("torchhelp")
    return [exe] if exe else [sys.executable, "-m", "assistant"]


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, timeout=600)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed, done


def _fresh_env(scratch: Path, name: str) -> dict[str, str]:
    home, cache = scratch / f"{name}-home", scratch / f"{name}-encoder"
    for p in (home, cache):
        shutil.rmtree(p, ignore_errors=True)
    return {**os.environ, "TORCHHELP_HOME": str(home), "TORCHHELP_ENCODER_CACHE": str(cache), "TORCHHELP_LLM": "none", "COLUMNS": "80"}


def run(repeats: int) -> dict:
    """Alternate the variants ``repeats`` times; return the medians and every sample."""
    th = _torchhelp()
    variants = {
        "first_ask": th + ["ask", str(EXAMPLE)],
        "first_kb_search": th + ["kb", "search", "mat1 and mat2 shapes cannot be multiplied"],
        "import_torch": [sys.executable, "-c", "import torch"],
    }
    samples: dict[str, list[float]] = {k: [] for k in [*variants, "second_ask"]}
    wrote_index: list[bool] = []
    with tempfile.TemporaryDirectory(prefix="th-first-ask-") as tmp:
        scratch = Path(tmp)
        for _ in range(repeats):
            for name, cmd in variants.items():
                env = _fresh_env(scratch, name)
                elapsed, _done = _timed(cmd, env)
                samples[name].append(elapsed)
                if name == "first_ask":
                    wrote_index.append((Path(env["TORCHHELP_HOME"]) / "index").exists())
                    samples["second_ask"].append(_timed(cmd, env)[0])
    from assistant.kb import shipped

    data_files = [p for p in shipped.DATA_DIR.rglob("*") if p.is_file()]
    manifest = shipped.read_manifest() or {}
    return {
        "what": "first `torchhelp ask` on the README example after an install (fresh TORCHHELP_HOME and fresh encoder cache, installed package) "
                "vs `python -c 'import torch'`; medians of alternated runs, seconds",
        "cpus": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(), "repeats": repeats,
        "median_s": {k: round(statistics.median(v), 3) for k, v in samples.items()},
        "samples_s": {k: [round(x, 3) for x in v] for k, v in samples.items()},
        "first_ask_wrote_an_index": any(wrote_index),
        "target_s": 5.0,
        "before": "before the shipped index (commit b8c97a0), the same first ask in a fresh home and fresh encoder cache took 38.5 s "
                  "(one run, same 2-core machine): the static encoder's table distilled, then 1,138 chunks embedded",
        "shipped_index": {"documents": manifest.get("documents"), "chunks": manifest.get("chunks"), "vectors": "float32 (FAISS IndexFlatIP)",
                          "bytes": sum(p.stat().st_size for p in data_files), "files": {p.relative_to(shipped.DATA_DIR).as_posix(): p.stat().st_size for p in sorted(data_files)}},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    result = run(args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["median_s"]), "wrote an index:", result["first_ask_wrote_an_index"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
