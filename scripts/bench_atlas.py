"""The atlas matcher: load time, match latency on real error texts, pathological inputs, coverage.

    python scripts/bench_atlas.py [--atlas FILE ...] [--finders ac,words] [--rounds 5] [--out benchmarks/atlas.json]
    python scripts/bench_atlas.py --synthetic /tmp/synthetic_atlas.jsonl.gz [--size 22000]

The atlas is the packaged data (``assistant/atlas/data/*.jsonl.gz``) unless ``--atlas`` names files;
``--synthetic`` first writes a same-size stand-in made of real fragments of the installed torch (every
``raise`` message of its Python files, read with ``ast``, then message-like strings of its shared
libraries) and measures that.

* ``load_ms``: ``Atlas.load`` in this process, median of ``--rounds``: ``parse_build`` = the gzip JSONL
  parsed and indexed (what the first load on a machine does; it then writes the index cache),
  ``cached`` = from the index cache in ``$TORCHHELP_HOME/atlas`` (every later load), split into reading
  the index and building the finder; ``fresh_process`` = the same cached load in a new interpreter
  (import of the module timed apart).
* ``match_ms``: ``Atlas.match`` per text over every capture's stderr (eval/captured) and every dev report
  (eval/realworld/dev*.jsonl; never the test files). ``first_sight``: each template regex compiled on its
  first hit in that text (the regex caches emptied before each text, as in a one-shot CLI); ``warm``:
  compiled regexes kept (a server). p50/p90/p99/max per round, median over rounds.
* ``pathological_ms``: 1 MB without a newline, 1 MB of binary junk, 20,000 repeated CUDA assertion lines,
  100,000 ``[rank0]:`` lines; median of 3.
* ``ac_word_sweep``: the automaton's word length (each key's first N characters) side by side: building
  the automaton (what a cached load spends most on) against warm match latency.
* ``coverage``: captures whose final exception message (from ``failure.headline`` to the next traceback,
  C++ frame or log line) the atlas matches with a verified template; captures with CUDA assertion lines
  matched to a kernel-assert entry; dev reports with any verified match; the misses listed.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assistant.atlas import matcher as M  # noqa: E402

DEV = sorted((ROOT / "eval" / "realworld").glob("dev*.jsonl"))
CAPTURED = ROOT / "eval" / "captured"


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summary(rounds: list[list[float]]) -> dict:
    out = {}
    for name, fn in (("p50", lambda v: pct(v, 50)), ("p90", lambda v: pct(v, 90)), ("p99", lambda v: pct(v, 99)), ("max", max), ("mean", statistics.fmean)):
        out[name] = round(statistics.median(fn(r) for r in rounds), 3)
    out["n"] = len(rounds[0]) if rounds else 0
    out["rounds"] = len(rounds)
    return out


def ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


# ---------------------------------------------------------------------------------------------- texts


def captures() -> list[dict]:
    out = []
    for p in sorted(CAPTURED.rglob("*.json")):
        d = json.loads(p.read_text(encoding="utf-8"))
        out.append({"id": f"{p.parent.name}/{p.stem}", "stderr": d.get("stderr") or "", "headline": (d.get("failure") or {}).get("headline") or ""})
    return out


def dev_reports() -> list[dict]:
    out = []
    for p in DEV:
        for line in p.read_text(encoding="utf-8").splitlines():
            if line.strip():
                d = json.loads(line)
                out.append({"id": f"{p.stem}/{d.get('id')}", "text": d.get("error_text") or ""})
    return out


def pathological() -> dict[str, str]:
    rng = random.Random(0)
    words = ["tensor", "shape", "the", "of", "expected", "got", "size", "dim", "cuda", "float", "index", "0", "12", "[3, 4]", "error", "module", "weight"]
    no_newline = " ".join(rng.choice(words) for _ in range(170_000))[:1_000_000]
    junk = bytes(rng.getrandbits(8) for _ in range(1_000_000)).decode("latin-1")
    line = "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], thread: [{},0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.\n"
    asserts = "".join(line.format(i % 128) for i in range(20_000))
    ranks = "".join(f"[rank0]:   File \"/x/train.py\", line {i}, in step\n" for i in range(100_000))
    return {"1MB_no_newline": no_newline, "1MB_binary_junk": junk, "20k_cuda_assert_lines": asserts, "100k_rank_prefixed_lines": ranks}


# ---------------------------------------------------------------------------------------------- synthetic atlas


def _fragment_template(node: ast.expr) -> str | None:
    """A template from a raise's first argument: literal text kept, every formatted field an ⟦any⟧."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "⟦any⟧" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
        return re.sub(r"%[-#0 +]*\d*(?:\.\d+)?[sdifrgex]", "⟦any⟧", node.left.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" and isinstance(node.func.value, ast.Constant):
        return re.sub(r"\{[^{}]*\}", "⟦any⟧", str(node.func.value.value))
    return None


def synthetic_atlas(out: Path, size: int) -> int:
    """Real fragments of the installed torch, in the entry schema, ``size`` entries."""
    import torch

    root = Path(torch.__file__).parent
    entries: list[dict] = []
    for f in sorted(root.rglob("*.py")):
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                t = _fragment_template(node.exc.args[0])
                if t and t.strip():
                    rel = str(f.relative_to(root.parent))
                    entries.append({"id": f"python:{rel}:{node.lineno}", "template": t.strip(), "kind": "error", "source": "python", "file": rel, "line": node.lineno})
    seen = {e["template"] for e in entries}
    for lib in ("libtorch_cpu.so", "libc10.so", "libtorch_python.so"):
        p = root / "lib" / lib
        if not p.exists():
            continue
        for m in re.finditer(rb"[\x20-\x7e]{24,400}", p.read_bytes()):
            s = m.group().decode()
            if " " not in s or not re.search(r"[a-z]{3,} [a-z]{2,}", s) or s.count("%") > 3:
                continue
            t = re.sub(r"%[-#0 +]*\d*(?:\.\d+)?[sdifzlu]+", "⟦any⟧", s).strip() + " ⟦any⟧"
            if t not in seen:
                seen.add(t)
                entries.append({"id": f"binary:{lib}:{hashlib.sha1(t.encode()).hexdigest()[:12]}", "template": t, "kind": "error", "source": "binary", "file": None, "line": None})
    rng = random.Random(0)
    py = [e for e in entries if e["source"] == "python"]
    rest = [e for e in entries if e["source"] != "python"]
    chosen = py[:size] + rng.sample(rest, min(len(rest), max(0, size - len(py))))
    base = {"exc_type": None, "function": None, "op": None, "condition": None, "internal": False, "category": None, "category_source": None, "torch_version": torch.__version__, "commit": None}
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        for e in chosen:
            fh.write(json.dumps({**base, **e}, ensure_ascii=False) + "\n")
    return len(chosen)


# ---------------------------------------------------------------------------------------------- measurements


def bench_load(files: list[Path], finder: str, rounds: int, cache_dir: Path) -> dict:
    parse = []
    for _ in range(max(2, rounds // 2)):
        t0 = time.perf_counter()
        M.Atlas.load(files, finder=finder, cache=False)
        parse.append(ms(t0))
    M.Atlas.load(files, finder=finder, cache=cache_dir)  # writes the cache
    cached, read, build = [], [], []
    base = cache_dir / f"matcher-{M._fingerprint(sorted(files))}"
    for _ in range(rounds):
        t0 = time.perf_counter()
        a = M.Atlas.load(files, finder=finder, cache=cache_dir)
        cached.append(ms(t0))
        t0 = time.perf_counter()
        idx = M._read_index(base.with_suffix(".index"))
        read.append(ms(t0))
        t0 = time.perf_counter()
        M.Atlas(idx, M._Entries(path=base.with_suffix(".jsonl"), offsets=idx["offsets"]), finder=finder)
        build.append(ms(t0))
    code = (
        "import time,sys;t0=time.perf_counter();from assistant.atlas.matcher import Atlas;t1=time.perf_counter();"
        f"a=Atlas.load({[str(f) for f in files]!r},finder={finder!r},cache={str(cache_dir)!r});t2=time.perf_counter();"
        "print((t1-t0)*1e3,(t2-t1)*1e3)"
    )
    fresh_import, fresh_load = [], []
    for _ in range(rounds):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout.split()
        fresh_import.append(float(out[0]))
        fresh_load.append(float(out[1]))
    return {
        "templates": len(a),
        "entries": a.n_entries,
        "keys": len(a.keys),
        "parse_build_ms": round(statistics.median(parse), 1),
        "cached_ms": round(statistics.median(cached), 1),
        "cached_read_index_ms": round(statistics.median(read), 1),
        "cached_build_ms": round(statistics.median(build), 1),
        "fresh_process_load_ms": round(statistics.median(fresh_load), 1),
        "fresh_process_import_ms": round(statistics.median(fresh_import), 1),
    }


def bench_match(atlas: M.Atlas, texts: list[str], rounds: int) -> dict:
    first, warm = [], []
    for _ in range(rounds):
        r1, r2 = [], []
        for text in texts:
            atlas._compiled.clear()
            re.purge()
            t0 = time.perf_counter()
            atlas.match(text)
            r1.append(ms(t0))
        for text in texts:
            t0 = time.perf_counter()
            atlas.match(text)
            r2.append(ms(t0))
        first.append(r1)
        warm.append(r2)
    return {"first_sight": summary(first), "warm": summary(warm)}


def ac_word_sweep(files: list[Path], texts: list[str], rounds: int, cache_dir: Path, sizes: list[int]) -> dict:
    out = {}
    keep = M.AC_WORD
    try:
        for n in sizes:
            M.AC_WORD = n
            atlas = M.Atlas.load(files, finder="ac", cache=cache_dir)
            words = M._ac_words(atlas.keys)
            build = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                M._ACFinder(atlas.keys, words)
                build.append(ms(t0))
            atlas._finder = M._ACFinder(atlas.keys, words)
            warm = bench_match(atlas, texts, max(2, rounds // 2))["warm"]
            out[str(n)] = {"automaton_build_ms": round(statistics.median(build), 1), "words": len(words[0]), "match_warm_p50_ms": warm["p50"], "match_warm_p99_ms": warm["p99"]}
    finally:
        M.AC_WORD = keep
    return out


def bench_pathological(atlas: M.Atlas) -> dict:
    out = {}
    for name, text in pathological().items():
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            found = atlas.match(text)
            times.append(ms(t0))
        out[name] = {"ms": round(statistics.median(times), 1), "chars": len(text), "matches": len(found)}
    return out


def _strip_exc(headline: str) -> str:
    return re.sub(r"^[\w.]+(?:Error|Exception|Unsupported|Failed|Interrupt)\s*:\s*", "", headline.strip())


_BLOCK_END = re.compile(r"\n(?:Exception raised from |Traceback \(most recent|The above exception|During handling of|[WEIF]\d{4} \d\d:|\[[WEIF]\d{4} )")


def final_line_match(atlas: M.Atlas, stderr: str, headline: str) -> M.AtlasMatch | None:
    """The best verified match inside the capture's final exception message: from its first line
    (``failure.headline``, found in the normalised stderr) to the next traceback, C++ frame or log line.
    When the headline is not found there, the headline alone is matched."""
    msg = " ".join(_strip_exc(headline).split())
    t = M._Text(stderr)
    pos = t.flat.rfind(msg[:60]) if msg else -1
    if pos < 0:
        return next((m for m in atlas.match(headline) if m.verified), None)
    nxt = _BLOCK_END.search(t.norm, pos + len(msg[:60]))
    end = nxt.start() if nxt else len(t.norm)
    lo, hi = t.orig(pos), t.orig(end, end=True)
    for m in atlas.match(stderr, limit=50):
        if m.verified and m.span[0] < hi and m.span[1] > lo:
            return m
    return None


def coverage(atlas: M.Atlas, caps: list[dict], devs: list[dict]) -> dict:
    hit: list[str] = []
    miss: list[dict] = []
    by_source: dict[str, int] = {}
    by_kind: dict[str, int] = {}
    for c in caps:
        if not c["headline"]:
            continue
        m = final_line_match(atlas, c["stderr"], c["headline"])
        if m is None:
            keyonly = any(not x.verified for x in atlas.match(c["headline"]))
            miss.append({"id": c["id"], "headline": c["headline"][:200], "key_only": keyonly})
            continue
        hit.append(c["id"])
        src, kind = str(m.entry.get("source")), str(m.entry.get("kind"))
        by_source[src] = by_source.get(src, 0) + 1
        by_kind[kind] = by_kind.get(kind, 0) + 1
    dev_hit = sum(1 for d in devs if any(m.verified for m in atlas.match(d["text"])))
    asserts = [c for c in caps if "Assertion `" in c["stderr"]]
    assert_hit = sum(1 for c in asserts if any(m.verified and m.entry.get("kind") == "kernel_assert" and "Assertion" in m.matched for m in atlas.match(c["stderr"])))
    return {
        "captures": len(caps),
        "capture_final_line_verified": len(hit),
        "capture_final_line_by_source": by_source,
        "capture_final_line_by_kind": by_kind,
        "capture_final_line_misses": miss,
        "captures_with_kernel_assertion_lines": len(asserts),
        "kernel_assertion_lines_matched_to_a_kernel_assert_entry": assert_hit,
        "dev_reports": len(devs),
        "dev_reports_any_verified": dev_hit,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--atlas", nargs="*", type=Path)
    ap.add_argument("--synthetic", type=Path, help="write a same-size synthetic atlas of real torch fragments here and measure it")
    ap.add_argument("--size", type=int, default=22_000)
    ap.add_argument("--finders", default="ac,words")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "atlas.json")
    args = ap.parse_args()

    if args.synthetic:
        n = synthetic_atlas(args.synthetic, args.size)
        files = [args.synthetic]
        kind = f"synthetic ({n} entries of real torch fragments; the extracted atlas was not there yet)"
    else:
        files = sorted(args.atlas) if args.atlas else sorted(M.DATA_DIR.glob("*.jsonl.gz"))
        kind = "the extracted atlas"
        if not files:
            sys.exit("no atlas data: pass --atlas FILE or --synthetic PATH")
    caps, devs = captures(), dev_reports()
    texts = [c["stderr"] for c in caps if c["stderr"]] + [d["text"] for d in devs if d["text"]]
    result: dict = {
        "what": "atlas matcher (scripts/bench_atlas.py)",
        "atlas": {"kind": kind, "files": [str(f.relative_to(ROOT)) if f.is_relative_to(ROOT) else str(f) for f in files]},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg_at_start": list(os.getloadavg())},
        "texts": {"captures": len(caps), "dev_reports": len(devs), "total": len(texts), "chars_p50": int(pct([len(t) for t in texts], 50)), "chars_max": max(len(t) for t in texts)},
        "settings": {"AC_WORD": M.AC_WORD, "MAX_VERIFY": M.MAX_VERIFY, "MAX_TRIES": M.MAX_TRIES, "default_finder": M.DEFAULT_FINDER},
        "finders": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for finder in args.finders.split(","):
            print(f"[{finder}] load ...", file=sys.stderr)
            load = bench_load(files, finder, args.rounds, Path(tmp) / finder)
            atlas = M.Atlas.load(files, finder=finder, cache=Path(tmp) / finder)
            print(f"[{finder}] match ...", file=sys.stderr)
            match = bench_match(atlas, texts, args.rounds)
            print(f"[{finder}] pathological ...", file=sys.stderr)
            patho = bench_pathological(atlas)
            result["finders"][finder] = {"load_ms": load, "match_ms": match, "pathological_ms": patho}
            print(json.dumps({finder: {"load": load, "match": match}}, indent=1), file=sys.stderr)
        if "ac" in args.finders.split(","):
            print("[ac] word length sweep ...", file=sys.stderr)
            result["ac_word_sweep"] = ac_word_sweep(files, texts, args.rounds, Path(tmp) / "sweep", [8, 12, 16, 24, 32])
        atlas = M.Atlas.load(files, cache=Path(tmp) / M.DEFAULT_FINDER)
        result["coverage"] = coverage(atlas, caps, devs)
    result["machine"]["load_avg_at_end"] = list(os.getloadavg())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
