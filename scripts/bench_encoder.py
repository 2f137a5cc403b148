"""Query encoders side by side: latency, warm diagnose with every query embedded, retrieval quality, build time.

    python scripts/bench_encoder.py [--out benchmarks/encoder.json] [--variants static,numpy] [--rounds 3]

Everything is measured in one process on one frozen copy of knowledge/ (others may be adding
documents meanwhile), variants alternating text by text so that a noisy machine slows them alike:

* ``query_embed_ms``: the encoder alone (its query cache bypassed) on the exact query strings
  retrieval embeds (``build_query(failure, rule hit)``, first 700 characters) for the real dev texts;
  static also ``first_sight`` = in a fresh process, words not in the index computed on demand;
* ``diagnose_ms``: warm ``Engine.diagnose()`` with ``dense_policy=always`` (every query embedded),
  second pass over the texts, query caches emptied (and the static encoder's in-process word memo
  reset to what a fresh process would load) so no query is answered from a cache; ``lexical-only``
  (dense off) is the floor; ``diagnose_cached_ms`` is the same pass with the caches left warm;
* ``quality``: ``torchhelp eval score`` metrics on the dev sets only (eval/realworld/dev*.jsonl):
  ``retrieval``/``dense``/``lexical`` variants and ``full`` with every query embedded;
* ``index_build_s``: a full index build into an empty home (static: with the distilled table
  already on disk, and the one-time distillation of the table timed apart).

Per round p50/p99 are computed, and the median over rounds is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEV = [ROOT / "eval" / "realworld" / n for n in ("dev.jsonl", "dev_fresh.jsonl", "dev_fresh2.jsonl")]


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summary(rounds: list[list[float]]) -> dict:
    """Median over rounds of each round's p50 / p90 / p99 / mean (ms)."""
    out = {}
    for name, fn in (("p50", lambda v: pct(v, 50)), ("p90", lambda v: pct(v, 90)), ("p99", lambda v: pct(v, 99)), ("mean", statistics.fmean)):
        out[name] = round(statistics.median(fn(r) for r in rounds), 3)
    out["n"] = len(rounds[0]) if rounds else 0
    out["rounds"] = len(rounds)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "encoder.json")
    ap.add_argument("--variants", default="static,numpy", help="encoders to compare (static, numpy, sentence-transformers)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="only the first N dev texts (a quick look)")
    ap.add_argument("--skip-distill", action="store_true", help="do not time the one-time distillation of the static table")
    args = ap.parse_args()
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]

    work = Path(tempfile.mkdtemp(prefix="bench-encoder-"))
    # One frozen copy of the knowledge for every variant.
    snapshot = work / "knowledge"
    shutil.copytree(ROOT / "knowledge", snapshot)
    from assistant.kb import documents, index

    documents.builtin_knowledge_dir = lambda: snapshot  # type: ignore[assignment]
    index.builtin_knowledge_dir = lambda: snapshot  # type: ignore[assignment]

    # The static encoder gets a private cache holding only the distilled table (so the build computes
    # its words, as on a new machine whose table is ready); the table itself is distilled once if needed.
    from assistant.kb import static

    shared_cache = static.cache_dir()
    private_cache = work / "encoder-cache"
    distill_s = None
    if "static" in variants:
        probe = static.StaticMiniLM()  # builds the shared table if this machine has none yet
        key_dir = private_cache / probe._dir.name  # type: ignore[union-attr]
        key_dir.mkdir(parents=True)
        os.symlink(probe._dir / "table.npy", key_dir / "table.npy")  # type: ignore[operator]
        if not args.skip_distill:
            started = time.perf_counter()
            probe._build_table()
            distill_s = round(time.perf_counter() - started, 2)
        del probe
    os.environ["TORCHHELP_ENCODER_CACHE"] = str(private_cache)

    from assistant.engine import Engine, build_query
    from assistant.eval.cases import load_outside_cases
    from assistant.eval.score import Scorer, items_from_outside
    from assistant.kb.encoder import get_encoder
    from assistant.kb.index import build
    from assistant.kb.retrieve import get_retriever
    from assistant.settings import load_settings

    items = [it for p in DEV for it in items_from_outside(load_outside_cases(p))]
    if args.limit:
        items = items[: args.limit]
    texts = [it.text for it in items]

    homes = {v: work / f"home-{v}" for v in variants}
    engines: dict[str, Engine] = {}
    result: dict = {
        "what": "query encoders side by side (scripts/bench_encoder.py)",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg_at_start": os.getloadavg()},
        "texts": len(texts), "dev_sets": [p.name for p in DEV], "variants": {},
    }
    for v in variants:
        started = time.perf_counter()
        manifest = build(homes[v], dense=True, encoder_kind=v)
        entry = result["variants"].setdefault(v, {})
        entry["index_build_s"] = round(time.perf_counter() - started, 2)
        entry["chunks"], entry["documents"], entry["manifest_encoder"] = manifest["chunks"], manifest["documents"], manifest["encoder"]
        engines[v] = Engine(load_settings(env={"TORCHHELP_HOME": str(homes[v])}, llm="none", encoder=v, dense_policy="always"))
        get_retriever(homes[v], dense=True, encoder_kind=v).index.faiss_index()
        print(f"{v}: index built in {entry['index_build_s']} s ({manifest['chunks']} chunks)", file=sys.stderr)
    if distill_s is not None:
        result["variants"]["static"]["table_distill_s_once_per_machine"] = distill_s
    lexical = Engine(load_settings(env={"TORCHHELP_HOME": str(homes[variants[0]])}, llm="none", encoder=variants[0], dense=False))

    # The exact strings retrieval embeds.
    eng0 = engines[variants[0]]
    queries = []
    for t in texts:
        f = eng0.parse(eng0.read(t))
        queries.append(build_query(f, eng0.match(f).hit)[:700])
    from tokenizers import Tokenizer

    from assistant.kb.encoder import MAX_TOKENS, model_dir

    tok = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    tok.enable_truncation(max_length=MAX_TOKENS)
    tok.no_padding()  # tokenizer.json pads to 128 by default
    lengths = [min(len(tok.encode(q).ids), MAX_TOKENS) for q in queries]
    result["query_tokens"] = {"p50": pct(lengths, 50), "p90": pct(lengths, 90), "max": max(lengths)}

    encoders = {v: get_encoder(v) for v in variants}

    from assistant.kb import retrieve as retrieve_module

    def no_query_caches(v: str) -> None:
        """Empty the encoder's query LRU and any per-retriever cache of dense scores."""
        encoders[v].clear()
        for r in retrieve_module._CACHE.values():
            cache = getattr(r, "_dense_cache", None)
            if cache is not None:
                cache.clear()

    def reset(v: str) -> None:
        """No query answered from a cache; the static word memo back to what a fresh process loads."""
        no_query_caches(v)
        inner = encoders[v].inner
        if hasattr(inner, "forget_words"):
            inner.forget_words(keep_stored=True)

    # 1. Query embedding alone (the LRU bypassed), variants alternating query by query.
    embed: dict[str, list[list[float]]] = {v: [] for v in variants}
    first: list[list[float]] = []
    for r in range(args.rounds):
        for v in variants:
            reset(v)
            embed[v].append([])
        if "static" in variants:
            first.append([])
        for q in queries:
            for v in variants:
                inner = encoders[v].inner
                if v == "static":  # first sight: as a fresh process would meet it
                    t0 = time.perf_counter()
                    inner.encode([q])
                    first[-1].append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                inner.encode([q])
                embed[v][-1].append((time.perf_counter() - t0) * 1000)
        print(f"embedding round {r + 1}/{args.rounds} done", file=sys.stderr)
    for v in variants:
        result["variants"][v]["query_embed_ms"] = summary(embed[v])
    if "static" in variants:
        result["variants"]["static"]["query_embed_ms_first_sight"] = summary(first)
        result["variants"]["static"]["query_embed_ms"]["note"] = "words already met (in the index or earlier queries)"

    # 2. Warm diagnose, every query embedded: pass 1 warms everything, then measured passes alternate variants.
    for t in texts:
        for e in (*engines.values(), lexical):
            e.diagnose(t)
    diag: dict[str, list[list[float]]] = {v: [] for v in (*variants, "lexical-only")}
    cached: dict[str, list[list[float]]] = {v: [] for v in variants}
    for r in range(args.rounds):
        for v in variants:
            reset(v)
        for k in diag:
            diag[k].append([])
        for t in texts:
            for v in variants:
                no_query_caches(v)  # every query embedded (the static word memo keeps what this pass met: a server's state)
                t0 = time.perf_counter()
                engines[v].diagnose(t)
                diag[v][-1].append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            lexical.diagnose(t)
            diag["lexical-only"][-1].append((time.perf_counter() - t0) * 1000)
        for k in cached:
            cached[k].append([])
        for t in texts:
            for v in variants:
                t0 = time.perf_counter()
                engines[v].diagnose(t)
                cached[v][-1].append((time.perf_counter() - t0) * 1000)
        print(f"diagnose round {r + 1}/{args.rounds} done", file=sys.stderr)
    for v in variants:
        result["variants"][v]["diagnose_ms"] = summary(diag[v])
        result["variants"][v]["diagnose_cached_ms"] = summary(cached[v])
    result["lexical_only_diagnose_ms"] = summary(diag["lexical-only"])

    # 3. Quality on the dev sets (the eval's own scorer), same documents for every variant.
    for v in variants:
        reset(v)
        settings = engines[v].settings
        scorer = Scorer(settings, set(get_retriever(settings.home, dense=True, encoder_kind=v).docs))
        reports = scorer.score(items, ["retrieval", "dense", "lexical", "full"])
        quality = {}
        for name, rep in reports.items():
            m = rep.metrics()
            quality[name] = {k: m.get(k) for k in ("category_accuracy", "remedy_hit", "must_mention_recall", "wrong_guess_rate") if k in m}
        result["variants"][v]["quality"] = quality
        print(f"{v}: quality {json.dumps({k: q['category_accuracy'] for k, q in quality.items()})}", file=sys.stderr)

    # 4. Agreement with the first variant (usually static vs numpy): the same top document?
    if len(variants) > 1:
        ref = variants[-1]
        rr = get_retriever(homes[ref], dense=True, encoder_kind=ref)
        for v in variants[:-1]:
            rv = get_retriever(homes[v], dense=True, encoder_kind=v)
            same_dense = same_hybrid = 0
            for t in texts:
                f = eng0.parse(eng0.read(t))
                q = build_query(f, None)
                a = rv.search(q, k=1, mode="dense")
                b = rr.search(q, k=1, mode="dense")
                same_dense += bool(a and b and a[0].doc_id == b[0].doc_id)
                a = rv.search(q, k=1, signature_text=f.search_text)
                b = rr.search(q, k=1, signature_text=f.search_text)
                same_hybrid += bool(a and b and a[0].doc_id == b[0].doc_id)
            result["variants"][v][f"top1_doc_agreement_with_{ref}"] = {"dense": round(same_dense / len(texts), 4), "hybrid": round(same_hybrid / len(texts), 4)}

    # Ratios (same run).
    if "static" in variants and "numpy" in variants:
        s, n = result["variants"]["static"], result["variants"]["numpy"]
        result["ratios_numpy_over_static"] = {
            "query_embed_p50": round(n["query_embed_ms"]["p50"] / s["query_embed_ms"]["p50"], 1),
            "query_embed_p99": round(n["query_embed_ms"]["p99"] / s["query_embed_ms"]["p99"], 1),
            "diagnose_p50": round(n["diagnose_ms"]["p50"] / s["diagnose_ms"]["p50"], 2),
            "diagnose_p99": round(n["diagnose_ms"]["p99"] / s["diagnose_ms"]["p99"], 2),
            "index_build": round(n["index_build_s"] / s["index_build_s"], 2),
        }
    result["machine"]["load_avg_at_end"] = os.getloadavg()
    result["shared_encoder_cache"] = str(shared_cache)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
