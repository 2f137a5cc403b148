"""`torchhelp eval reproduce|score`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from assistant.errors import EvalError

eval_app = typer.Typer(no_args_is_help=True, help="Reproduce real failures and score the diagnoses.")


def register(app: typer.Typer) -> None:
    from assistant.eval.triage_cli import register as register_triage

    register_triage(eval_app)
    app.add_typer(eval_app, name="eval")


@eval_app.command("reproduce")
def reproduce_cmd(
    device: str = typer.Option("cpu", "--device", help="cpu | cuda | multi_gpu"),
    cases: Optional[str] = typer.Option(None, "--cases", help="Glob on case slugs, e.g. 'cuda-oom-*'."),
    out: Optional[Path] = typer.Option(None, "--out", help="Capture folder (default eval/captured)."),
    python: Optional[str] = typer.Option(None, "--python", help="Interpreter that runs the cases (default: this one)."),
    with_probes: bool = typer.Option(False, "--with-probes", help="Run cases under `torchhelp run` and store its probes."),
) -> None:
    """Run every matching case in its own process and save what it printed."""
    from rich.console import Console

    from assistant.eval.cases import load_cases, repo_root
    from assistant.eval.reproduce import reproduce

    console = Console(stderr=True)
    selected = load_cases(device=device, pattern=cases)
    if not selected:
        raise EvalError(f"no {device} cases match {cases or '*'}")
    target = out or repo_root() / "eval" / "captured"
    bad: list[str] = []

    def report(result) -> None:  # type: ignore[no-untyped-def]
        ok = result.matched()
        status = "[green]ok[/]" if ok else "[bold red]DID NOT FAIL AS EXPECTED[/]"
        console.print(f"{status} {result.case.slug}  exit={result.exit_code}{' (timeout)' if result.timed_out else ''}  {result.duration_s:.1f}s")
        if not ok:
            bad.append(result.case.slug)
            tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            for line in tail:
                console.print(f"    [red]{line[:200]}[/]", markup=True, highlight=False)

    results = reproduce(selected, target, python=python, on_result=report, with_probes=with_probes)
    console.print(f"{len(results) - len(bad)}/{len(results)} {device} cases failed as expected; captures in {target / device}")
    if bad:
        console.print(f"[bold red]{len(bad)} case(s) did not reproduce:[/] {', '.join(bad)}")
        raise typer.Exit(1)


@eval_app.command("score")
def score_cmd(
    backend: str = typer.Option("none", "--backend", help="Who writes the full engine's answer: none | local | openai, or several comma-separated (one row each)."),
    cases: Optional[list[Path]] = typer.Option(None, "--cases", help="Score outside JSONL sets (error_text, category, fix_keywords) instead of the captures; repeat to combine files."),
    captures: Optional[Path] = typer.Option(None, "--captures", help="Capture folder (default eval/captured)."),
    variants: str = typer.Option(",".join(("full", "rules", "retrieval", "lexical", "dense", "regex")), "--variants", help="Comma-separated: full, rules, retrieval, lexical, dense, regex."),
    name: Optional[str] = typer.Option(None, "--name", help="Results name (default: captured / the case file's stem)."),
    results_dir: Optional[Path] = typer.Option(None, "--results-dir", help="Where results go (default eval/results)."),
    check: bool = typer.Option(False, "--check", help="Fail if the full engine drops below eval/thresholds.toml."),
    device: Optional[str] = typer.Option(None, "--device", help="Only captures of this device."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Score at most N items, categories in turn (for slow LLM backends)."),
) -> None:
    """Diagnose every capture (or outside case) and write metrics, per variant and per category."""
    from rich.console import Console

    from assistant.eval.cases import load_outside_cases, repo_root
    from assistant.eval.report import check_thresholds, load_thresholds, markdown_report, results_document, write_results
    from assistant.eval.reproduce import load_captures
    from assistant.eval.score import VARIANTS, Scorer, items_from_captures, items_from_outside
    from assistant.kb.retrieve import get_retriever
    from assistant.settings import load_settings

    console = Console(stderr=True)
    chosen = [v.strip() for v in variants.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        raise EvalError(f"unknown variant(s): {', '.join(unknown)}")
    backends = [b.strip() for b in backend.split(",") if b.strip()] or ["none"]
    if "full" in chosen:
        at = chosen.index("full")
        chosen[at:at + 1] = ["full" if b == "none" else f"full+{b}" for b in backends]
    if cases:
        items = [item for path in cases for item in items_from_outside(load_outside_cases(path))]
        run_name = name or cases[0].stem
        description = f"Outside cases from {', '.join(str(p) for p in cases)} ({len(items)} items)."
    else:
        folder = captures or repo_root() / "eval" / "captured"
        caps = [c for c in load_captures(folder) if device is None or c.get("device") == device]
        if not caps:
            raise EvalError(f"no captures under {folder}; run `torchhelp eval reproduce` first")
        unmatched = [c["slug"] for c in caps if not c.get("matched_expectation")]
        if unmatched:
            console.print(f"[yellow]warning: {len(unmatched)} capture(s) did not fail as expected and are scored anyway: {', '.join(unmatched)}[/]")
        items = items_from_captures(caps)
        run_name = name or ("captured" if device is None else f"captured-{device}")
        by_device = {d: sum(1 for c in caps if c.get("device") == d) for d in sorted({c.get("device") for c in caps})}
        description = f"Captured real failures ({', '.join(f'{n} {d}' for d, n in by_device.items())})."
    if limit is not None:
        from assistant.eval.score import stratified

        items = stratified(items, limit)
        run_name = name or f"{run_name}-{backend.replace(',', '-')}-sample{limit}"
        description += f" Stratified sample of {len(items)}."
    settings = load_settings()
    from assistant.cli import index_progress

    retriever = get_retriever(settings.home, dense=settings.dense, encoder_kind=settings.encoder, progress=index_progress())
    scorer = Scorer(settings, set(retriever.docs))

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("scoring {task.description}"), BarColumn(), MofNCompleteColumn(), console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task(run_name, total=len(items) * len(chosen))
        reports = scorer.score(items, chosen, progress=lambda v, done, total: bar.update(task, completed=done, description=f"{run_name} [{v}]"))
    meta = {"description": description, "backend": backend, "dense": settings.dense, "encoder": settings.encoder, "knowledge_documents": len(retriever.docs)}
    doc = results_document(run_name, reports, meta)
    out_dir = results_dir or repo_root() / "eval" / "results"
    path = write_results(out_dir, run_name, doc)
    all_docs = {}
    for p in sorted(out_dir.glob("*.json")):
        try:
            d = json.loads(p.read_text())
            if "variants" in d:
                all_docs[d["name"]] = d
        except ValueError:
            continue
    (out_dir / "REPORT.md").write_text(markdown_report(all_docs), encoding="utf-8")
    for v, body in doc["variants"].items():
        o = body["overall"]
        print(f"{run_name:>12} {v:>12}: accuracy {o['category_accuracy']:.3f}  remedy hit {o['remedy_hit']}  mention recall {o['must_mention_recall']:.3f}  "
              f"citations {o['citation_validity']:.3f}  wrong-guess {o['wrong_guess_rate']}  p50 {o['latency_ms_p50']:.1f} ms  p95 {o['latency_ms_p95']:.1f} ms")
    print(f"results: {path}; report: {out_dir / 'REPORT.md'}")
    if check:
        thresholds = load_thresholds(repo_root() / "eval" / "thresholds.toml").get(run_name)
        if thresholds is None:
            raise EvalError(f"no thresholds recorded for {run_name!r} in eval/thresholds.toml")
        variant = "full" if "full" in doc["variants"] else next(iter(doc["variants"]))
        problems = check_thresholds(doc, thresholds, variant)
        for p in problems:
            print(f"REGRESSION: {p}", file=sys.stderr)
        if problems:
            raise typer.Exit(1)
        print(f"thresholds met for {run_name}: " + ", ".join(f"{k} >= {v}" for k, v in thresholds.items()))
