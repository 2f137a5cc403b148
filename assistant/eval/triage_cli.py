"""`torchhelp eval triage`: generate (or reuse) a triage corpus, run triage and the naive baseline, score both.

Hooked into the eval app with ``register(eval_app)`` (``assistant/eval/cli.py``).
"""

from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path
from typing import Any, Optional

import typer

from assistant.errors import EvalError

# Headline measures, in table order: (key, label, higher is better).
MEASURES: tuple[tuple[str, str, bool], ...] = (
    ("detection_precision", "detection precision", True),
    ("detection_recall", "detection recall", True),
    ("detection_f1", "detection F1", True),
    ("category_accuracy", "category accuracy", True),
    ("pairwise_f1", "grouping pairwise F1", True),
    ("ari", "grouping ARI", True),
    ("first_rank_accuracy", "first failing rank", True),
    ("top5_gpu_hours", "top-5 groups by GPU hours", True),
    ("gpu_hours_median_rel_error", "GPU hours median rel. error", False),
)


def register(eval_app: typer.Typer) -> None:
    """Add ``triage`` to the ``torchhelp eval`` app."""
    eval_app.command("triage")(triage_cmd)


def default_dir() -> Path:
    from assistant.eval.cases import repo_root

    return repo_root() / "eval" / "triage"


def run_ours(logs: Path) -> tuple[list[dict[str, Any]] | None, float, str | None]:
    """(rows, seconds, why not) of ``torchhelp triage`` over ``logs``; rows is None when triage cannot run."""
    try:
        from assistant.triage import triage  # type: ignore[attr-defined]
    except ImportError as exc:
        return None, 0.0, f"assistant.triage.triage is not available ({exc})"
    start = time.perf_counter()
    result = triage([logs])
    return list(result.jsonl_rows()), time.perf_counter() - start, None


def run_naive(logs: Path) -> tuple[list[dict[str, Any]], float]:
    from assistant.eval.triage_baseline import naive_triage

    start = time.perf_counter()
    rows = naive_triage([logs])
    return rows, time.perf_counter() - start


def check_floors(headline: dict[str, Any], thresholds: dict[str, Any], who: str = "triage") -> list[str]:
    """Problems as readable lines: a ``[floors]`` measure below its floor, a ``[ceilings]`` one above."""
    problems = []
    for key, floor in thresholds.get("floors", {}).items():
        value = headline.get(key)
        if value is None or value < floor:
            problems.append(f"{who}: {key} = {value} is below the floor {floor}")
    for key, ceiling in thresholds.get("ceilings", {}).items():
        value = headline.get(key)
        if value is None or value > ceiling:
            problems.append(f"{who}: {key} = {value} is above the ceiling {ceiling}")
    return problems


def _fmt(value: Any) -> str:
    return "—" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def triage_cmd(
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Use this generated corpus (a folder with logs/ and truth.jsonl) instead of generating one."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where to generate the corpus (default eval/triage/corpus)."),
    jobs_count: int = typer.Option(320, "--jobs-count", help="Jobs to generate."),
    seed: int = typer.Option(0, "--seed", help="Generator seed (same seed, same corpus)."),
    big_noise_mb: int = typer.Option(20, "--big-noise-mb", help="Size of the two progress-noise logs in MB (0: small)."),
    results: Optional[Path] = typer.Option(None, "--results", help="Results file (default eval/triage/results.json)."),
    check: bool = typer.Option(False, "--check", help="Exit 1 when triage is below a floor of eval/triage/thresholds.toml."),
    thresholds: Optional[Path] = typer.Option(None, "--thresholds", help="Thresholds file (default eval/triage/thresholds.toml)."),
    generator: str = typer.Option("v1", "--generator", help="Corpus generator: v1 (assistant.eval.triage_corpus) or v2 (assistant.eval.triage_corpus_v2, truth from scenarios; seeds 100 dev, 101 frozen test)."),
) -> None:
    """Score `torchhelp triage` and the naive baseline on a triage corpus with ground truth."""
    from rich.console import Console
    from rich.table import Table

    from assistant.eval.triage_corpus import generate, load_truth
    from assistant.eval.triage_score import headline, score

    console = Console(stderr=True)
    if corpus is not None:
        logs, truth_path = corpus / "logs", corpus / "truth.jsonl"
        if not logs.is_dir() or not truth_path.is_file():
            raise EvalError(f"{corpus} is not a generated triage corpus (it needs logs/ and truth.jsonl)")
        source = {"corpus": str(corpus), "generated": False}
    else:
        target = out or default_dir() / "corpus"
        start = time.perf_counter()
        if generator == "v2":
            from assistant.eval.triage_corpus_v2 import generate as generate_v2

            logs = generate_v2(target, n_jobs=jobs_count, seed=seed)
        elif generator == "v1":
            logs = generate(target, n_jobs=jobs_count, seed=seed, big_noise_mb=big_noise_mb)
        else:
            raise EvalError(f"unknown generator {generator!r} (v1 or v2)")
        truth_path = target / "truth.jsonl"
        source = {"corpus": str(target), "generated": True, "seed": seed, "jobs": jobs_count, "big_noise_mb": big_noise_mb,
                  "generator": generator, "generate_s": round(time.perf_counter() - start, 3)}
        console.print(f"generated {jobs_count} jobs in {source['generate_s']} s under {target}")
    truth = load_truth(truth_path)
    size = sum(p.stat().st_size for p in logs.rglob("*") if p.is_file())

    ours_rows, ours_s, why_not = run_ours(logs)
    if why_not:
        console.print(f"[yellow]warning: {why_not}; scoring the naive baseline only[/]")
    naive_rows, naive_s = run_naive(logs)
    ours = score(ours_rows, truth) if ours_rows is not None else None
    naive = score(naive_rows, truth)

    table = Table(title=f"triage on {len(truth)} jobs ({sum(r['status'] == 'failed' for r in truth)} failed, {size / 1e6:.1f} MB)")
    table.add_column("measure")
    table.add_column("torchhelp triage", justify="right")
    table.add_column("naive baseline", justify="right")
    ours_head = headline(ours) if ours else {}
    naive_head = headline(naive)
    for key, label, _ in MEASURES:
        table.add_row(label, _fmt(ours_head.get(key)), _fmt(naive_head.get(key)))
    table.add_row("seconds", _fmt(round(ours_s, 3)) if ours else "—", _fmt(round(naive_s, 3)))
    table.add_row("MB/s", _fmt(round(size / 1e6 / ours_s, 2)) if ours and ours_s else "—", _fmt(round(size / 1e6 / naive_s, 2)) if naive_s else "—")
    Console().print(table)

    doc = {
        "source": source,
        "jobs": len(truth),
        "bytes": size,
        "ours": ours,
        "naive": naive,
        "headline": {"ours": ours_head or None, "naive": naive_head},
        "seconds": {"ours": round(ours_s, 3) if ours else None, "naive": round(naive_s, 3)},
        "ours_unavailable": why_not,
    }
    path = results or default_dir() / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    console.print(f"results: {path}")

    if check:
        tpath = thresholds or default_dir() / "thresholds.toml"
        if not tpath.is_file():
            raise EvalError(f"no thresholds file at {tpath}")
        floors = tomllib.loads(tpath.read_text(encoding="utf-8"))
        problems = [why_not] if why_not else check_floors(ours_head, floors)
        for p in problems:
            console.print(f"[bold red]{p}[/]")
        if problems:
            raise typer.Exit(1)
        console.print("[green]every triage measure meets its floor[/]")
