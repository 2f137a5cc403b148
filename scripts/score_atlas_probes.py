"""Score torchhelp on ``eval/atlas/probes.jsonl`` with and without the error atlas.

    python scripts/score_atlas_probes.py [--probes eval/atlas/probes.jsonl] [--out eval/atlas/probes-results.json]

Runs ``assistant.diagnose`` on each probe's ``error_text`` twice: with the atlas (the default settings) and without
it (``diagnose(text, atlas=False)``), with ``TORCHHELP_HOME`` set (to a private folder unless it is already set, so
that nothing of a user's config or index is read; the knowledge index is built there on first use). For each run:
category accuracy against the hand label, share answered "unknown", share where a rule answered
(``d.rule is not None``), share whose answer names the check that raised the message (``bool(d.raised_by)``) and
mean confidence, and, of the answers that name a check, how often the named atlas entry's own category equals the
label; per item: id, label, category/confidence/rule/raised_by (entry, template, entry category) with and without
the atlas. Writes
``eval/atlas/probes-results.json`` and prints a short table and the items whose answers differ.

The labels were written before torchhelp was run on the probes (see ``scripts/build_atlas_probes.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBES = ROOT / "eval" / "atlas" / "probes.jsonl"
OUT = ROOT / "eval" / "atlas" / "probes-results.json"
RUNS = {"atlas": {}, "no_atlas": {"atlas": False}}


def summarise(rows: list[dict], run: str) -> dict:
    n = len(rows)
    share = lambda k: round(sum(1 for r in rows if k(r)) / n, 4) if n else 0.0  # noqa: E731
    return {
        "n": n,
        "accuracy": share(lambda r: r[run]["category"] == r["label"]),
        "correct": sum(1 for r in rows if r[run]["category"] == r["label"]),
        "unknown": share(lambda r: r[run]["category"] == "unknown"),
        "rule_answered": share(lambda r: r[run]["rule"] is not None),
        "names_check": share(lambda r: r[run]["raised_by"]),
        "mean_confidence": round(sum(r[run]["confidence"] for r in rows) / n, 4) if n else 0.0,
        # Of the answers that name a check: how often the matched atlas entry's own category equals the label,
        # and how often it has none (an open entry).
        "named_entry_category_correct": sum(1 for r in rows if r[run]["raised_by"] and r[run]["raised_by_category"] == r["label"]),
        "named_entry_without_category": sum(1 for r in rows if r[run]["raised_by"] and not r[run]["raised_by_category"]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--probes", type=Path, default=PROBES)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    os.environ.setdefault("TORCHHELP_HOME", str(Path(tempfile.gettempdir()) / "torchhelp-atlas-probes-home"))
    sys.path.insert(0, str(ROOT))
    from assistant import diagnose

    probes = [json.loads(line) for line in args.probes.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows, backends, t0 = [], set(), time.perf_counter()
    for p in probes:
        row = {"id": p["id"], "label": p["category"]}
        for run, overrides in RUNS.items():
            d = diagnose(p["error_text"], **overrides)
            backends.add(d.backend)
            row[run] = {"category": d.category, "confidence": round(float(d.confidence), 3), "rule": d.rule,
                        "raised_by": bool(d.raised_by),
                        # the atlas entry the answer names, and that entry's own category (from the atlas build)
                        "raised_by_entry": (d.raised_by or {}).get("entry"),
                        "raised_by_template": (d.raised_by or {}).get("template"),
                        "raised_by_category": (d.raised_by or {}).get("category")}
        rows.append(row)
    elapsed = time.perf_counter() - t0

    summary = {run: summarise(rows, run) for run in RUNS}
    no_rule_either = [r["id"] for r in rows if r["atlas"]["rule"] is None and r["no_atlas"]["rule"] is None]
    no_rule_rows = [r for r in rows if r["id"] in set(no_rule_either)]
    no_rule_subset = {run: summarise(no_rule_rows, run) for run in RUNS} if no_rule_rows else {}
    # Counterfactual, not what torchhelp answers: the named atlas entry's own category where it has one, else the answer.
    entry_first = sum(1 for r in rows if (r["atlas"]["raised_by_category"] or r["atlas"]["category"]) == r["label"])
    category_differs = [r["id"] for r in rows if r["atlas"]["category"] != r["no_atlas"]["category"]]
    answer_differs = [r["id"] for r in rows
                      if (r["atlas"]["category"], r["atlas"]["rule"], r["atlas"]["confidence"])
                      != (r["no_atlas"]["category"], r["no_atlas"]["rule"], r["no_atlas"]["confidence"])]
    flips = {
        "fixed_by_atlas": [r["id"] for r in rows if r["atlas"]["category"] == r["label"] != r["no_atlas"]["category"]],
        "broken_by_atlas": [r["id"] for r in rows if r["no_atlas"]["category"] == r["label"] != r["atlas"]["category"]],
    }
    result = {
        "probes": str(args.probes.relative_to(ROOT) if args.probes.is_relative_to(ROOT) else args.probes),
        "torchhelp_home": os.environ["TORCHHELP_HOME"],
        "backends": sorted(backends),
        "seconds": round(elapsed, 1),
        "runs": summary,
        "no_rule_in_either_run": {"count": len(no_rule_either), "ids": no_rule_either, "runs": no_rule_subset},
        "rule_ids": dict(sorted(Counter(r["no_atlas"]["rule"] for r in rows if r["no_atlas"]["rule"]).items())),
        "counterfactual_entry_category_first": {"correct": entry_first, "n": len(rows),
                                                "accuracy": round(entry_first / len(rows), 4) if rows else 0.0},
        "category_differs": category_differs,
        "answer_differs": answer_differs,
        **flips,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")

    print(f"{len(rows)} probes, backend(s) {', '.join(sorted(backends))}, {elapsed:.0f} s")
    print(f"{'run':10s} {'accuracy':>14s} {'unknown':>8s} {'rule':>6s} {'names check':>12s} {'mean conf':>10s}")
    for run, s in summary.items():
        print(f"{run:10s} {s['correct']:>4d}/{s['n']:<3d} {s['accuracy']:>5.3f} {s['unknown']:>8.3f} "
              f"{s['rule_answered']:>6.3f} {s['names_check']:>12.3f} {s['mean_confidence']:>10.3f}")
    print(f"no rule in either run: {len(no_rule_either)}/{len(rows)}"
          + "".join(f"; {run} correct {s['correct']}/{s['n']}, unknown {s['unknown']:.3f}" for run, s in no_rule_subset.items()))
    print(f"counterfactual (atlas entry's own category where it has one, else the answer): {entry_first}/{len(rows)}")
    named = sum(1 for r in rows if r["atlas"]["raised_by"])
    print(f"atlas entry named: {named}; its own category equals the label in "
          f"{summary['atlas']['named_entry_category_correct']}, has no category in {summary['atlas']['named_entry_without_category']}")
    print(f"category differs ({len(category_differs)}):")
    for r in rows:
        if r["id"] in category_differs:
            print(f"  {r['id']:30s} label {r['label']:18s} atlas {r['atlas']['category']:18s} "
                  f"no_atlas {r['no_atlas']['category']}")
    print(f"fixed by atlas: {len(flips['fixed_by_atlas'])}, broken by atlas: {len(flips['broken_by_atlas'])}")
    print(f"wrote {result['probes'].replace('probes.jsonl', 'probes-results.json') if args.out == OUT else args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
