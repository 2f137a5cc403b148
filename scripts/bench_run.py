#!/usr/bin/env python3
"""Overhead of `torchhelp run` on a program that does not fail.

A short CPU training loop (a small MLP, a few hundred steps) runs alternately plain and under
`torchhelp run`; the ratio of median wall times is reported. Writes benchmarks/run_overhead.json.

    python scripts/bench_run.py [--runs 7] [--steps 300]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TRAIN = textwrap.dedent(
    """
    import sys, torch, torch.nn as nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(512, 64), torch.randint(0, 10, (512,))
    for step in range(int(sys.argv[1])):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    print(f"final loss {loss.item():.4f}")
    """
)


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True)
    if res.returncode != 0:
        raise SystemExit(res.stderr.decode()[-2000:])
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "run_overhead.json")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "train.py"
        script.write_text(TRAIN)
        plain = [sys.executable, str(script), str(args.steps)]
        wrapped = [sys.executable, "-m", "assistant", "run", "--", *plain]
        timed(plain, env), timed(wrapped, env)  # warm caches
        a, b = [], []
        for _ in range(args.runs):
            a.append(timed(plain, env))
            b.append(timed(wrapped, env))
    result = {
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "steps": args.steps, "runs": args.runs,
        "plain_seconds": [round(x, 3) for x in a], "under_run_seconds": [round(x, 3) for x in b],
        "plain_median_s": round(statistics.median(a), 3), "under_run_median_s": round(statistics.median(b), 3),
        "ratio_of_medians": round(statistics.median(b) / statistics.median(a), 3),
        "median_of_pairwise_ratios": round(statistics.median(y / x for x, y in zip(a, b, strict=True)), 3),
        "extra_seconds_median": round(statistics.median(b) - statistics.median(a), 3),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("plain_median_s", "under_run_median_s", "ratio_of_medians", "extra_seconds_median")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
