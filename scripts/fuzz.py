"""A long fuzzing run over diagnose(), the parser, the renderers and triage's reader.

    python scripts/fuzz.py --count 1000000            # or --seconds 600 for a time budget
    python scripts/fuzz.py --count 20000 --seconds 600 --out benchmarks/fuzz.json

The inputs come from the same vocabulary as tests/test_fuzz.py (real PyTorch error lines, the
fragments that make patterns backtrack, escapes, NULs, lone surrogates, arbitrary characters and
bytes, in long runs). Each input is timed in CPU seconds of this thread and charged at least one
1 MiB analysis window; a crash is any exception other than the InputError that refuses empty or
binary input. The run first sweeps every regular expression of the rules, the parser and triage
with adversarial lines. Figures go to a JSON file (default benchmarks/fuzz.json).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from adversarial_inputs import adversarial_texts, collect_patterns  # noqa: E402
from fuzz_strategies import charged_mb, random_bytes, random_text  # noqa: E402

from assistant.engine import Engine  # noqa: E402
from assistant.errors import InputError  # noqa: E402
from assistant.settings import load_settings  # noqa: E402


def sweep_patterns(size: int) -> dict:
    """Every literal pattern on its adversarial lines: inputs tried and the worst CPU seconds per MB."""
    worst: list[tuple[float, str, str]] = []
    tried = 0
    patterns = collect_patterns()
    for pattern in patterns:
        rx = pattern.compiled()
        if rx is None:
            continue
        for family, text in adversarial_texts(pattern, size):
            t = time.thread_time()
            for _ in rx.finditer(text):
                pass
            worst.append(((time.thread_time() - t) / (len(text) / 1e6), pattern.where, family))
            tried += 1
    worst.sort(reverse=True)
    return {"patterns": len(patterns), "inputs": tried, "chars_per_input": size,
            "worst_s_per_mb": round(worst[0][0], 2) if worst else 0.0,
            "slowest": [{"s_per_mb": round(s, 2), "pattern": w, "family": f} for s, w, f in worst[:5]]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=1_000_000, help="inputs to try (default 1,000,000)")
    ap.add_argument("--seconds", type=float, default=None, help="stop after this many seconds, whatever the count")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pattern-size", type=int, default=8000, help="characters per adversarial line in the pattern sweep (0: skip it)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "fuzz.json"))
    args = ap.parse_args(argv)

    home = tempfile.mkdtemp(prefix="torchhelp-fuzz-")
    engine = Engine(load_settings(env={"TORCHHELP_HOME": home}, llm="none").with_overrides(dense=False))
    engine.diagnose("RuntimeError: warm-up")  # build the lexical index and compile the patterns first

    started = time.perf_counter()
    sweep = sweep_patterns(args.pattern_size) if args.pattern_size else None
    rng = random.Random(args.seed)
    tried: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    crashes: list[dict] = []
    per_mb: dict[str, list[float]] = defaultdict(list)
    slowest: list[tuple[float, int, str, str]] = []
    from assistant.parse.traceback import parse_failure
    from assistant.render.markdown import render_markdown
    from assistant.render.terminal import render_terminal
    from assistant.triage.reading import read_file
    from rich.console import Console

    scratch = Path(home) / "logs"
    scratch.mkdir()
    fuzz_started = time.perf_counter()
    n = 0
    while n < args.count and (args.seconds is None or time.perf_counter() - fuzz_started < args.seconds):
        n += 1
        door = rng.choices(("diagnose-text", "diagnose-bytes", "parse", "render", "triage-reader"), weights=(4, 2, 3, 1, 1))[0]
        strategy, data = random_bytes(rng) if door in ("diagnose-bytes", "triage-reader") else random_text(rng)
        key = f"{door}/{strategy}"
        tried[key] += 1
        t = time.thread_time()
        try:
            if door in ("diagnose-text", "diagnose-bytes"):
                engine.diagnose(data)
            elif door == "parse":
                parse_failure(data)  # type: ignore[arg-type]
            elif door == "render":
                d = engine.diagnose(data)
                render_terminal(d, Console(file=io.StringIO(), force_terminal=True, width=80))
                render_markdown(d)
            else:
                path = scratch / ("r.log.gz" if rng.random() < 0.3 else "r.log")
                path.write_bytes(gzip.compress(data, 1) if path.suffix == ".gz" else data)  # type: ignore[arg-type]
                read_file(str(path), 0)
        except InputError:
            refused[key] += 1
        except Exception as exc:  # noqa: BLE001 - a crash is what we are looking for
            crashes.append({"door": door, "strategy": strategy, "error": f"{type(exc).__name__}: {exc}"[:300],
                            "input_head": repr(data[:200]), "size": len(data), "where": traceback.format_exc().splitlines()[-3][:200]})
        cost = (time.thread_time() - t) / charged_mb(data)
        per_mb[door].append(cost)
        slowest.append((cost, len(data), key, repr(data[:60])))
        if len(slowest) > 200:
            slowest = sorted(slowest, reverse=True)[:10]
        if n % 1000 == 0:
            print(f"{n:,} inputs, {len(crashes)} crashes, {time.perf_counter() - fuzz_started:.0f} s", file=sys.stderr, flush=True)

    every = [c for costs in per_mb.values() for c in costs]
    slowest = sorted(slowest, reverse=True)[:10]
    report = {
        "what": "scripts/fuzz.py: random inputs through diagnose() (str and bytes), the parser, the renderers and triage's reader",
        "inputs": n,
        "requested_count": args.count,
        "seconds": round(time.perf_counter() - fuzz_started, 1),
        "seed": args.seed,
        "crashes": len(crashes),
        "crash_examples": crashes[:20],
        "inputs_by_door_and_strategy": dict(sorted(tried.items())),
        "refused_with_input_error": dict(sorted(refused.items())),
        "time_per_mb": {
            "unit": "CPU seconds of the calling thread per MB, an input under 1 MiB charged as 1 MiB",
            "max": round(max(every), 4) if every else None,
            "median": round(statistics.median(every), 4) if every else None,
            "over_1s_per_mb": sum(c > 1.0 for c in every),
            "by_door": {k: {"max": round(max(v), 4), "median": round(statistics.median(v), 4)} for k, v in sorted(per_mb.items())},
        },
        "slowest_inputs": [{"s_per_mb": round(c, 4), "chars_or_bytes": size, "door/strategy": key, "head": head} for c, size, key, head in slowest],
        "pattern_sweep": sweep,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "total_seconds": round(time.perf_counter() - started, 1),
    }
    Path(args.out).write_text(json.dumps(report, indent=2, ensure_ascii=True) + "\n", encoding="utf-8")
    print(json.dumps({k: report[k] for k in ("inputs", "crashes", "seconds")} | {"time_per_mb": report["time_per_mb"]["max"]}), flush=True)
    return 1 if crashes else 0


if __name__ == "__main__":
    raise SystemExit(main())
