"""Draw a reproducible, stratified sample of categorised atlas entries for a hand review, and summarise reviews.

    python scripts/review_atlas_sample.py sample --seed 20261127 --out eval/atlas/sample-20261127.jsonl
    python scripts/review_atlas_sample.py sample --seed 20261128 --exclude eval/atlas/review.jsonl --out ...
    python scripts/review_atlas_sample.py report eval/atlas/review.jsonl --out eval/atlas/review.md

``sample``: only entries that have a category; the strata are the ``category_source`` values ("hand",
"decision"), each given a share of the sample proportional to its count (largest remainder), and drawn
with ``random.Random(seed).sample`` from the stratum's entries sorted by id, so the draw depends only on the
atlas content and the seed, never on the file order. ``--exclude`` drops ids already reviewed (a later
round is then a fresh sample). The sample is written as JSONL (the fields a reviewer reads) and printed.

``report``: reads review rows (``id, template, category, category_source, reviewer_category, agree, reason,
round``) and writes the agreement overall, per category_source and per atlas category, and the
disagreements, for each round.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ATLAS = ROOT / "assistant" / "atlas" / "data" / "atlas.jsonl.gz"
FIELDS = ("id", "template", "kind", "exc_type", "source", "file", "line", "function", "op", "condition",
          "internal", "category", "category_source", "category_likelihood", "torch_version")


def load(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def allocate(counts: dict[str, int], n: int) -> dict[str, int]:
    """Share ``n`` between strata in proportion to their counts (largest remainder; ties by name)."""
    total = sum(counts.values())
    exact = {k: n * c / total for k, c in counts.items()}
    share = {k: int(v) for k, v in exact.items()}
    left = n - sum(share.values())
    for k in sorted(exact, key=lambda k: (-(exact[k] - share[k]), k))[:left]:
        share[k] += 1
    return share


def draw(entries: list[dict], n: int, seed: int, exclude: set[str] = frozenset()) -> list[dict]:
    strata: dict[str, list[dict]] = defaultdict(list)
    for e in entries:
        if e.get("category") and e["id"] not in exclude:
            strata[e.get("category_source") or "none"].append(e)
    share = allocate({k: len(v) for k, v in strata.items()}, n)
    rng = random.Random(seed)
    picked: list[dict] = []
    for name in sorted(strata):
        pool = sorted(strata[name], key=lambda e: e["id"])
        picked += rng.sample(pool, share[name])
    return [{k: e.get(k) for k in FIELDS} for e in picked]


def cmd_sample(args) -> int:
    entries = load(args.atlas)
    exclude: set[str] = set()
    for path in args.exclude:
        with open(path, encoding="utf-8") as fh:
            exclude |= {json.loads(line)["id"] for line in fh if line.strip()}
    rows = draw(entries, args.n, args.seed, exclude)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    by_source = Counter(r["category_source"] for r in rows)
    print(f"# seed {args.seed}: {len(rows)} entries {dict(sorted(by_source.items()))} from {args.atlas}", file=sys.stderr)
    for i, r in enumerate(rows, 1):
        print(f"[{i}] {r['id']}\n    {r['category_source']}: {r['category']}  exc={r['exc_type']} kind={r['kind']} op={r['op']}\n"
              f"    file={r['file']}:{r['line']} cond={r['condition']!r}\n    {r['template'][:400]!r}")
    return 0


def _rate(rows: list[dict]) -> str:
    n = len(rows)
    a = sum(1 for r in rows if r["agree"])
    return f"{a}/{n} = {a / n:.3f}" if n else "0/0"


def cmd_report(args) -> int:
    rows = []
    for path in args.reviews:
        with open(path, encoding="utf-8") as fh:
            rows += [json.loads(line) for line in fh if line.strip()]
    out: list[str] = []
    for rnd in sorted({r.get("round", 1) for r in rows}):
        rr = [r for r in rows if r.get("round", 1) == rnd]
        out.append(f"### Round {rnd} (seed {rr[0].get('seed')})\n")
        out.append(f"- overall: {_rate(rr)}")
        for src in sorted({r['category_source'] for r in rr}):
            out.append(f"- {src}: {_rate([r for r in rr if r['category_source'] == src])}")
        out.append("\n| atlas category | n | agree | rate |\n|---|---:|---:|---:|")
        by_cat: dict[str, list[dict]] = defaultdict(list)
        for r in rr:
            by_cat[r["category"]].append(r)
        for cat, cr in sorted(by_cat.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            a = sum(1 for r in cr if r["agree"])
            out.append(f"| {cat} | {len(cr)} | {a} | {a / len(cr):.2f} |")
        dis = [r for r in rr if not r["agree"]]
        out.append(f"\nDisagreements ({len(dis)}):\n")
        out.append("| id | source | atlas | reviewer | reason | template |\n|---|---|---|---|---|---|")
        for r in dis:
            t = r["template"][:120].replace("|", "\\|").replace("\n", " ")
            out.append(f"| `{r['id']}` | {r['category_source']} | {r['category']} | {r['reviewer_category']} | {r.get('reason') or ''} | {t} |")
        out.append("")
    text = "\n".join(out) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample", help="draw the stratified sample")
    s.add_argument("--seed", type=int, default=20261127)
    s.add_argument("--n", type=int, default=200)
    s.add_argument("--atlas", type=Path, default=ATLAS)
    s.add_argument("--exclude", type=Path, action="append", default=[], help="review JSONL whose ids are left out")
    s.add_argument("--out", type=Path, default=None)
    s.set_defaults(fn=cmd_sample)
    r = sub.add_parser("report", help="agreement tables from review JSONL files")
    r.add_argument("reviews", type=Path, nargs="+")
    r.add_argument("--out", type=Path, default=None)
    r.set_defaults(fn=cmd_report)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    raise SystemExit(main())
