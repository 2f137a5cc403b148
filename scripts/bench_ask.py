#!/usr/bin/env python3
"""Benchmark `torchhelp ask`: cold CLI wall time vs `import torch`, and warm in-process latency.

Cold: a fresh process runs `torchhelp ask FILE --json` (index already built, as for any user after
the first run), alternated with `python -c "import torch"` so both see the same machine load; the
ratio of medians is reported (target <= 0.3).

Warm: `diagnose()` in one process over 150 real reports the engine was never tuned on (the frozen test
split's texts, first 150 by id), no LLM. The first pass loads everything and is not timed; the second
pass is timed with the query caches emptied before every call, so no timing comes from a cache
(targets: p50 <= 5 ms, p99 <= 50 ms). Per-stage medians say where the time goes. Writes benchmarks/ask.json.

    python scripts/bench_ask.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _time_cmd(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    res = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if res.returncode != 0:
        raise SystemExit(f"command failed: {' '.join(cmd)}\n{res.stderr.decode()[-2000:]}")
    return elapsed


def _percentile(values: list[float], pct: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * pct / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="cold runs of each command")
    parser.add_argument("--texts", type=int, default=150, help="real unseen texts for the warm measurement")
    parser.add_argument("--file", type=Path, default=ROOT / "examples" / "linear_shape_mismatch.log")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "ask.json")
    args = parser.parse_args()

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ask = [sys.executable, "-m", "assistant", "ask", "--json", str(args.file)]
    torch_import = [sys.executable, "-c", "import torch"]
    # An installed wheel has its bytecode compiled by pip; a checkout may run with PYTHONDONTWRITEBYTECODE set.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "assistant")], check=False, stdout=subprocess.DEVNULL)
    _time_cmd(ask, env)  # builds the index if needed; not timed
    _time_cmd(torch_import, env)  # warm the page cache for both
    cold_ask, cold_torch = [], []
    for _ in range(args.runs):
        cold_ask.append(_time_cmd(ask, env))
        cold_torch.append(_time_cmd(torch_import, env))
    ratio = statistics.median(cold_ask) / statistics.median(cold_torch)
    ratios = [a / t for a, t in zip(cold_ask, cold_torch, strict=True)]

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from assistant import diagnose
    from assistant.engine import default_engine
    from assistant.kb.encoder import get_encoder
    from assistant.settings import load_settings

    rows = [json.loads(line) for name in ("test.jsonl", "test_fresh.jsonl", "test_fresh2.jsonl")
            for line in (ROOT / "eval" / "realworld" / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = [r["error_text"] for r in sorted(rows, key=lambda r: r["id"])][: args.texts]
    settings = load_settings(llm="none")
    for text in texts:  # first pass: loads the index, the encoder, the rules and the documents
        diagnose(text, settings=settings)
    retriever = default_engine(settings).retriever()
    encoder = get_encoder(settings.encoder)
    warm: list[float] = []
    stages: dict[str, list[float]] = {}
    for text in texts:
        retriever._dense_cache.clear()  # no timing may come from a cached query vector
        encoder.clear()
        start = time.perf_counter()
        d = diagnose(text, settings=settings)
        warm.append((time.perf_counter() - start) * 1000)
        for k, v in d.timings_ms.items():
            stages.setdefault(k, []).append(v)

    result = {
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
        "cold": {
            "runs": args.runs,
            "ask_seconds": [round(x, 3) for x in cold_ask],
            "import_torch_seconds": [round(x, 3) for x in cold_torch],
            "ask_median_s": round(statistics.median(cold_ask), 3),
            "import_torch_median_s": round(statistics.median(cold_torch), 3),
            "ratio_of_medians": round(ratio, 3),
            "median_of_pairwise_ratios": round(statistics.median(ratios), 3),
            "target": "<= 0.3",
        },
        "warm": {
            "texts": len(texts),
            "inputs": "frozen test split texts (never tuned on), second pass in one process, query caches emptied before each call",
            "encoder": settings.encoder,
            "p50_ms": round(_percentile(warm, 50), 2),
            "p99_ms": round(_percentile(warm, 99), 2),
            "max_ms": round(max(warm), 2),
            "stage_p50_ms": {k: round(_percentile(v, 50), 2) for k, v in stages.items()},
            "stage_p99_ms": {k: round(_percentile(v, 99), 2) for k, v in stages.items()},
            "target": "p50 <= 5 ms, p99 <= 50 ms",
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"cold_ratio": result["cold"]["ratio_of_medians"], "warm_p50_ms": result["warm"]["p50_ms"], "warm_p99_ms": result["warm"]["p99_ms"],
                      "stage_p50_ms": result["warm"]["stage_p50_ms"], "stage_p99_ms": result["warm"]["stage_p99_ms"]}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
