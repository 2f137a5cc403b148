"""Cold `torchhelp ask` with the pinned typer against typer 0.29 (which imports pydantic adapters for every CLI
parameter), alternated in one run, as ratios to `import torch`. Writes benchmarks/typer_pin.json.

    python scripts/bench_typer.py [--runs 9]

typer 0.29.2 is installed into a temporary folder (pip, no dependencies: pydantic is already a dependency of ours)
and put first on the path for its runs; the environment's own typer is used for the others.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NEWER = "0.29.2"


def _time(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    res = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if res.returncode != 0:
        raise SystemExit(f"command failed: {' '.join(cmd)}\n{res.stderr.decode()[-2000:]}")
    return time.perf_counter() - start


def _version(env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-c", "import typer; print(typer.__version__)"], env=env, capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--file", type=Path, default=ROOT / "examples" / "linear_shape_mismatch.log")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "typer_pin.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-t", folder, f"typer=={NEWER}"], check=True)
        pinned = {**os.environ, "PYTHONPATH": str(ROOT)}
        newer = {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{ROOT}"}
        ask = [sys.executable, "-m", "assistant", "ask", "--json", str(args.file)]
        torch_import = [sys.executable, "-c", "import torch"]
        versions = {"pinned": _version(pinned), "newer": _version(newer)}
        for env in (pinned, newer):
            _time(ask, env)  # page cache and index, not timed
        _time(torch_import, pinned)
        runs: dict[str, list[float]] = {"pinned": [], "newer": [], "import_torch": []}
        for _ in range(args.runs):  # alternated, so a busy moment hits all three alike
            runs["pinned"].append(_time(ask, pinned))
            runs["newer"].append(_time(ask, newer))
            runs["import_torch"].append(_time(torch_import, pinned))
    torch_median = statistics.median(runs["import_torch"])
    result = {
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": sys.version.split()[0], "cpus": os.cpu_count()},
        "typer": versions,
        "seconds": {k: [round(x, 3) for x in v] for k, v in runs.items()},
        "ratio_of_medians": {k: round(statistics.median(runs[k]) / torch_median, 3) for k in ("pinned", "newer")},
        "target": "cold ask <= 0.3 x import torch",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result["typer"]), json.dumps(result["ratio_of_medians"]))


if __name__ == "__main__":
    main()
