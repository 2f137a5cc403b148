"""Benchmark `torchhelp triage` against the naive baseline; writes benchmarks/triage.json.

    python scripts/bench_triage.py                       # 320-job corpus, 1 GB log, 200 MB gz log
    python scripts/bench_triage.py --big-mb 64 --gz-mb 16 --runs 1   # a quick look
    python scripts/bench_triage.py --generator v2 --seed 102 --jobs-count 6000 --big-mb 0 --gz-mb 0 --out benchmarks/triage_v2.json

- Corpus: a generated triage corpus (``--corpus DIR`` reuses one). ``triage()`` and
  ``naive_triage()`` each run ``--runs`` times, every run in a fresh Python process so imports
  count, alternating the two; the median wall time gives MB/s (bytes on disk) and jobs/s, and
  the ratio triage / naive (issue 20 targets at most 1.5). ``triage`` runs as shipped (one worker process per
  CPU for a folder of 200 jobs or more), ``triage_1proc`` in one process; the naive script is one process.
- Big log: one job holding one log of ``--big-mb`` MB (tqdm progress noise, then a real
  traceback at the end), triaged in a child process whose peak RSS (``ru_maxrss`` from
  ``os.wait4``, the child forked from a small launcher so the bench's own memory does not leak
  into the number) is recorded (target < 300 MB); then the same with a gzipped log of ``--gz-mb``
  MB of text. The naive script is measured the same way for comparison.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

_TRIAGE = """
import json, sys
from assistant.triage import triage
rows = triage([sys.argv[1]], diagnose_groups=sys.argv[2] == "1", jobs=int(sys.argv[3]) if len(sys.argv) > 3 else 0).jsonl_rows()
failed = [r for r in rows if r["status"] == "failed"]
print(json.dumps({"jobs": len(rows), "failed": len(failed), "first": rows[0] if rows else None}))
"""
_NAIVE = """
import json, sys
from pathlib import Path
from assistant.eval.triage_baseline import naive_triage
rows = naive_triage([Path(sys.argv[1])])
failed = [r for r in rows if r["status"] == "failed"]
print(json.dumps({"jobs": len(rows), "failed": len(failed), "first": rows[0] if rows else None}))
"""


# A small launcher process starts each measured child: Linux carries the parent's peak RSS into a
# forked child's ru_maxrss, so the child must be forked from a process that is itself small.
_LAUNCHER = """
import json, os, subprocess, sys, tempfile, time
with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c"] + sys.argv[1:], stdout=out, stderr=err)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    out.seek(0)
    err.seek(0)
    print(json.dumps({"seconds": seconds, "rc": os.waitstatus_to_exitcode(status), "maxrss_kb": usage.ru_maxrss,
                      "stdout": out.read().decode(errors="replace")[-20000:], "stderr": err.read().decode(errors="replace")[-800:]}))
"""


def run_child_rss(code: str, *args: str) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter (imports count): wall seconds, its peak RSS (MB, ``ru_maxrss`` via ``os.wait4``), its JSON answer."""
    launched = subprocess.run([sys.executable, "-c", _LAUNCHER, code, *args], cwd=ROOT, capture_output=True, text=True, check=False)
    try:
        res = json.loads(launched.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"seconds": None, "peak_rss_mb": None, "returncode": launched.returncode, "answer": {}, "stderr_tail": launched.stderr[-800:]}
    answer: dict[str, Any] = {}
    if res["rc"] == 0:
        try:
            answer = json.loads(res["stdout"].strip().splitlines()[-1])
        except (ValueError, IndexError):
            answer = {}
    return {"seconds": round(res["seconds"], 3), "peak_rss_mb": round(res["maxrss_kb"] / 1024, 1), "returncode": res["rc"],
            "answer": answer, "stderr_tail": res["stderr"] if res["rc"] else ""}


def corpus_bytes(logs: Path) -> int:
    return sum(p.stat().st_size for p in logs.rglob("*") if p.is_file())


def write_big_log(path: Path, mb: int, *, gz: bool = False) -> int:
    """One job's log: a start stamp, ``mb`` MB of tqdm noise, a real CUDA OOM traceback; returns bytes on disk."""
    sys.path.insert(0, str(ROOT))
    import random
    from datetime import datetime

    from assistant.eval.triage_corpus import _Clock, _retime, _tqdm, load_sources

    rng = random.Random(0)
    src = next(s for s in load_sources(ROOT) if s.id == "captured/cuda/cuda-oom-fragmentation")
    head = ("SLURM_JOB_ID=9000001\nSLURM_NNODES=1\nSLURM_GPUS_ON_NODE=1\n"
            "2024-05-01 12:00:03,123 INFO train: starting training\n")
    chunk = "\n".join(_tqdm(rng, f"Epoch {e}", 1000, parts=20) for e in range(1, 200)) + "\n"
    chunk_b = chunk.encode()
    total = mb * 1024 * 1024
    failure = _retime(src.text, _Clock(datetime(2024, 5, 1, 19, 41, 8)))  # the capture's own stamps, moved after the noise
    tail = "2024-05-01 19:41:07,450 INFO train: epoch 412 step 901112 loss 1.2345\n" + failure + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = (lambda p: gzip.open(p, "wb", compresslevel=1)) if gz else (lambda p: open(p, "wb"))
    with opener(path) as fh:  # type: ignore[operator]
        fh.write(head.encode())
        written = 0
        while written < total:
            fh.write(chunk_b)
            written += len(chunk_b)
        fh.write(tail.encode())
    return path.stat().st_size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, help="reuse a generated corpus (folder with logs/)")
    ap.add_argument("--jobs-count", type=int, default=320)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--big-noise-mb", type=int, default=20, help="noise logs inside the corpus (v1)")
    ap.add_argument("--generator", choices=("v1", "v2"), default="v1",
                    help="v2: the corpus written from scenarios, not from our rules (eval/triage/v2); use a seed other than its dev (100) and test (101)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--big-mb", type=int, default=1024, help="size of the single big log (0: skip)")
    ap.add_argument("--gz-mb", type=int, default=200, help="text size of the gzipped big log (0: skip)")
    ap.add_argument("--no-diagnose", action="store_true", help="triage without diagnosing each group")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "triage.json")
    args = ap.parse_args(argv)
    diagnose = "0" if args.no_diagnose else "1"

    with tempfile.TemporaryDirectory(prefix="bench-triage-") as tmp:
        tmpdir = Path(tmp)
        if args.corpus:
            logs = args.corpus / "logs"
            corpus_info: dict[str, Any] = {"path": str(args.corpus), "generated": False}
        elif args.generator == "v2":
            sys.path.insert(0, str(ROOT))
            from assistant.eval.triage_corpus_v2 import generate as generate_v2

            t0 = time.perf_counter()
            logs = generate_v2(tmpdir / "corpus", n_jobs=args.jobs_count, seed=args.seed)
            corpus_info = {"generated": True, "generator": "v2", "jobs": args.jobs_count, "seed": args.seed,
                           "generate_s": round(time.perf_counter() - t0, 3)}
        else:
            sys.path.insert(0, str(ROOT))
            from assistant.eval.triage_corpus import generate

            t0 = time.perf_counter()
            logs = generate(tmpdir / "corpus", n_jobs=args.jobs_count, seed=args.seed, big_noise_mb=args.big_noise_mb)
            corpus_info = {"generated": True, "jobs": args.jobs_count, "seed": args.seed, "big_noise_mb": args.big_noise_mb,
                           "generate_s": round(time.perf_counter() - t0, 3)}
        size = corpus_bytes(logs)
        corpus_info["bytes"] = size
        # "triage" is the default (one worker process per CPU for a large folder); "triage_1proc" the same in one process.
        times: dict[str, list[float]] = {"triage": [], "triage_1proc": [], "naive": []}
        answers: dict[str, Any] = {}
        for i in range(args.runs):
            order = ("triage", "naive", "triage_1proc") if i % 2 == 0 else ("triage_1proc", "naive", "triage")
            for who in order:
                code, extra = {"triage": (_TRIAGE, (str(logs), diagnose, "0")), "triage_1proc": (_TRIAGE, (str(logs), diagnose, "1")),
                               "naive": (_NAIVE, (str(logs),))}[who]
                res = run_child_rss(code, *extra)
                print(f"run {i + 1}/{args.runs} {who}: {res['seconds']:.2f} s, rc {res['returncode']}", file=sys.stderr)
                if res["returncode"] != 0:
                    answers[who] = {"error": res["stderr_tail"]}
                    continue
                times[who].append(res["seconds"])
                answers[who] = res["answer"]
        jobs = answers.get("naive", {}).get("jobs") or args.jobs_count

        def summary(who: str) -> dict[str, Any] | None:
            if not times[who]:
                return {"error": answers.get(who, {}).get("error", "did not run")}
            med = statistics.median(times[who])
            return {"median_s": round(med, 3), "runs_s": times[who], "mb_per_s": round(size / 1e6 / med, 2),
                    "jobs_per_s": round(jobs / med, 1), "failed_found": answers.get(who, {}).get("failed")}

        doc: dict[str, Any] = {
            "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
            "diagnose_groups": diagnose == "1",
            "env": {k: os.environ[k] for k in ("TORCHHELP_DENSE", "TORCHHELP_LLM") if k in os.environ},
            "corpus": corpus_info,
            "runs": args.runs,
            "triage": summary("triage"),
            "triage_1proc": summary("triage_1proc"),
            "naive": summary("naive"),
            "targets": {"triage_over_naive_max": 1.5, "peak_rss_mb_max": 300},
        }
        if times["triage"] and times["naive"]:
            doc["ratio_triage_over_naive"] = round(statistics.median(times["triage"]) / statistics.median(times["naive"]), 2)
        if times["triage_1proc"] and times["naive"]:
            doc["ratio_triage_1proc_over_naive"] = round(statistics.median(times["triage_1proc"]) / statistics.median(times["naive"]), 2)

        for key, mb, gz in (("big_log", args.big_mb, False), ("big_gz", args.gz_mb, True)):
            if mb <= 0:
                continue
            job_logs = tmpdir / key / "logs"
            path = job_logs / "job-big" / ("slurm-9000001.out.gz" if gz else "slurm-9000001.out")
            t0 = time.perf_counter()
            on_disk = write_big_log(path, mb, gz=gz)
            print(f"{key}: wrote {on_disk / 1e6:.1f} MB ({mb} MB of text) in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            entry: dict[str, Any] = {"text_mb": mb, "bytes_on_disk": on_disk}
            for who, code, extra in (("triage", _TRIAGE, (str(job_logs), diagnose)), ("naive", _NAIVE, (str(job_logs),))):
                res = run_child_rss(code, *extra)
                first = (res["answer"] or {}).get("first") or {}
                entry[who] = {"seconds": res["seconds"], "peak_rss_mb": res["peak_rss_mb"], "returncode": res["returncode"],
                              "mb_per_s": round(mb * 1.048576 / res["seconds"], 2) if res["seconds"] else None,
                              "status": first.get("status"), "category": first.get("category"), "gpu_hours": first.get("gpu_hours"),
                              **({"error": res["stderr_tail"]} if res["returncode"] else {})}
                print(f"{key} {who}: {res['seconds']:.1f} s, peak RSS {res['peak_rss_mb']} MB", file=sys.stderr)
            doc[key] = entry
            path.unlink()

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: doc.get(k) for k in ("triage", "triage_1proc", "naive", "ratio_triage_over_naive", "ratio_triage_1proc_over_naive")}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
