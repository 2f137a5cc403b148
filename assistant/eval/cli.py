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


def _is_checkout(path: Path) -> bool:
    """A torchhelp repository: its pyproject names the project and eval/ sits beside the package."""
    pyproject = path / "pyproject.toml"
    if not (pyproject.is_file() and (path / "assistant").is_dir() and (path / "eval").is_dir()):
        return False
    try:
        return 'name = "torchhelp"' in pyproject.read_text(encoding="utf-8")
    except OSError:
        return False


def find_checkout() -> Path | None:
    """The checkout this command runs in (the working folder or one above it), else the one an
    editable install points at; None after a plain `pip install .`, where eval/ is not shipped."""
    from assistant.eval.cases import repo_root

    here = Path.cwd().resolve()
    for candidate in (here, *here.parents, repo_root()):
        if _is_checkout(candidate):
            return candidate
    return None


def output_dir(named: Path | None, option: str, write_results: bool, checkout: Path | None, sub: str) -> Path:
    """Where a run writes: the folder the user named, the checkout's eval/<sub> when asked
    (--write-results), else a cache folder under TORCHHELP_HOME, so that a run never overwrites
    tracked files or writes into site-packages by default."""
    if named is not None and write_results:
        raise EvalError(f"give {option} or --write-results, not both")
    if named is not None:
        return named
    if write_results:
        if checkout is None:
            raise EvalError(f"--write-results writes into a torchhelp checkout's eval/{sub}: run it inside a checkout, or name a folder with {option}")
        return checkout / "eval" / sub
    from assistant.settings import load_settings

    return load_settings().home / "eval" / sub


@eval_app.command("reproduce")
def reproduce_cmd(
    device: str = typer.Option("cpu", "--device", help="cpu | cuda | multi_gpu"),
    cases: Optional[str] = typer.Option(None, "--cases", help="Glob on case slugs, e.g. 'cuda-oom-*'; several globs separated by commas."),
    out: Optional[Path] = typer.Option(None, "--out", help="Capture folder (default: $TORCHHELP_HOME/eval/captured)."),
    write_results: bool = typer.Option(False, "--write-results", help="Write the captures into this checkout's eval/captured (replacing the committed ones)."),
    python: Optional[str] = typer.Option(None, "--python", help="Interpreter that runs the cases (default: this one)."),
    with_probes: bool = typer.Option(False, "--with-probes", help="Run cases under `torchhelp run` and store its probes."),
    investigate: bool = typer.Option(False, "--investigate", help="Run each case plain and under `torchhelp run --investigate --yes`; "
                                     "write the answers before/after the experiments and the time cost to <out>/investigate-<device>.json."),
    budget: Optional[float] = typer.Option(None, "--budget", help="With --investigate: the experiments' time budget per case (default: 3x its failing run)."),
) -> None:
    """Run every matching case in its own process and save what it printed."""
    from rich.console import Console

    from assistant.eval.cases import load_cases
    from assistant.eval.reproduce import reproduce

    console = Console(stderr=True)
    checkout = find_checkout()
    if checkout is None:
        raise EvalError("the failure corpus (eval/cases) ships with the torchhelp repository, not the installed package: "
                        "run `torchhelp eval reproduce` inside a checkout of the repository")
    selected = load_cases(checkout / "eval" / "cases", device=device, pattern=cases)
    if not selected:
        raise EvalError(f"no {device} cases match {cases or '*'}")
    if investigate:
        _investigate_cases(selected, output_dir(out, "--out", write_results, checkout, "results") / f"investigate-{device}.json", python, budget, console)
        return
    target = output_dir(out, "--out", write_results, checkout, "captured")
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


def _investigate_cases(selected, target: Path, python: str | None, budget: float | None, console) -> None:  # type: ignore[no-untyped-def]
    from assistant.eval.investigate_eval import investigate_cases

    def report(row: dict) -> None:
        verdict = "settled" if row["settled"] else ("no verdict" if row["applied"] else "no experiment")
        console.print(f"{row['slug']}: {row['before']['category']} -> {row['after']['category']} (expected {row['expected']}); "
                      f"fix {row['before']['fix_right']} -> {row['after']['fix_right']}; {verdict}; {row['time_ratio']}x", highlight=False)

    summary = investigate_cases(selected, target, python=python, budget_s=budget, on_row=report)
    console.print(json.dumps({k: v for k, v in summary.items() if k != "machine"}), highlight=False)
    console.print(f"written to {target}")


def _llm_choice(llm: str | None, backend_alias: str | None) -> str:
    """``--llm``, or its hidden old name ``--backend``; both given and different is refused. Default: none."""
    if llm is not None and backend_alias is not None and llm != backend_alias:
        raise EvalError(f"--llm {llm} and --backend {backend_alias} disagree (--backend is the old name of --llm; give one)")
    return llm or backend_alias or "none"


@eval_app.command("score")
def score_cmd(
    llm: Optional[str] = typer.Option(None, "--llm", help="Who writes the full engine's answer: none (default here) | local | openai, or several comma-separated (one row each)."),
    backend_alias: Optional[str] = typer.Option(None, "--backend", hidden=True, help="The old name of --llm."),
    cases: Optional[list[Path]] = typer.Option(None, "--cases", help="Score outside JSONL sets (error_text, category, fix_keywords) instead of the captures; repeat to combine files."),
    claims: Optional[list[Path]] = typer.Option(None, "--claims", help="Sidecar JSONL of {id, must_not_claim} labels for --cases: answers stating them count as contradicted."),
    captures: Optional[Path] = typer.Option(None, "--captures", help="Capture folder (default: eval/captured of the checkout you are in)."),
    variants: str = typer.Option(",".join(("full", "rules", "retrieval", "atlas", "lexical", "dense", "regex")), "--variants",
                                 help="Comma-separated: full, full-noatlas, rules, retrieval, atlas, lexical, dense, regex."),
    name: Optional[str] = typer.Option(None, "--name", help="Results name (default: captured / the case file's stem)."),
    results_dir: Optional[Path] = typer.Option(None, "--results-dir", help="Where results go (default: $TORCHHELP_HOME/eval/results)."),
    into_checkout: bool = typer.Option(False, "--write-results", help="Write results into this checkout's eval/results (the committed report)."),
    check: bool = typer.Option(False, "--check", help="Fail if the full engine drops below eval/thresholds.toml."),
    device: Optional[str] = typer.Option(None, "--device", help="Only captures of this device."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Score at most N items, categories in turn (for slow LLM backends)."),
) -> None:
    """Diagnose every capture (or outside case) and write metrics, per variant and per category."""
    backend = _llm_choice(llm, backend_alias)
    from rich.console import Console
    from rich.text import Text

    from assistant.eval.cases import load_outside_cases
    from assistant.eval.report import check_thresholds, describe_thresholds, load_thresholds, markdown_report, results_document, summary_table, write_results
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
    checkout = find_checkout()
    out_dir = output_dir(results_dir, "--results-dir", into_checkout, checkout, "results")
    if check and checkout is None:
        raise EvalError("--check compares with eval/thresholds.toml, which ships with the torchhelp repository: run it inside a checkout")
    if cases:
        from assistant.eval.cases import load_claims, with_claims

        labels = {k: v for path in (claims or []) for k, v in load_claims(path).items()}
        items = [item for path in cases for item in items_from_outside(with_claims(load_outside_cases(path), labels))]
        run_name = name or cases[0].stem
        description = f"Outside cases from {', '.join(str(p) for p in cases)} ({len(items)} items)."
    else:
        if captures is None and checkout is None:
            raise EvalError("no captures to score: outside a torchhelp checkout, point --captures at a checkout's eval/captured "
                            "(or at a folder `torchhelp eval reproduce --out` wrote), or score your own cases with --cases FILE.jsonl")
        folder = captures or checkout / "eval" / "captured"  # type: ignore[operator]
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
    from assistant.render.progress import index_progress

    retriever = get_retriever(settings.home, dense=settings.dense, encoder_kind=settings.encoder, progress=index_progress())
    scorer = Scorer(settings, set(retriever.docs))

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("scoring {task.description}"), BarColumn(), MofNCompleteColumn(), console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task(run_name, total=len(items) * len(chosen))
        reports = scorer.score(items, chosen, progress=lambda v, done, total: bar.update(task, completed=done, description=f"{run_name} [{v}]"))
    meta = {"description": description, "backend": backend, "dense": settings.dense, "encoder": settings.encoder, "knowledge_documents": len(retriever.docs)}
    doc = results_document(run_name, reports, meta)
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
    out = Console(highlight=False)  # stdout, at the terminal's width: rows wrap instead of running off the edge
    out.print(summary_table(doc, out.width))
    out.print(Text(f"results: {path}\nreport: {out_dir / 'REPORT.md'}", overflow="fold"))
    if check:
        thresholds = load_thresholds(checkout / "eval" / "thresholds.toml").get(run_name)  # type: ignore[operator]
        if thresholds is None:
            raise EvalError(f"no thresholds recorded for {run_name!r} in eval/thresholds.toml")
        variant = "full" if "full" in doc["variants"] else next(iter(doc["variants"]))
        problems = check_thresholds(doc, thresholds, variant)
        for p in problems:
            print(f"REGRESSION: {p}", file=sys.stderr)
        if problems:
            raise typer.Exit(1)
        print(f"thresholds met for {run_name}: " + describe_thresholds(thresholds))
