"""`torchhelp run` and `torchhelp env`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from assistant.cli_options import llm_option


def register(app: typer.Typer) -> None:
    app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(run)
    app.command()(env)


def run(
    ctx: typer.Context,
    report: Optional[Path] = typer.Option(None, "--report", help="Also write the Diagnosis JSON here (same contract as ask --json)."),
    rerun_blocking: bool = typer.Option(False, "--rerun-blocking", help="On an asynchronous CUDA error, re-run once with CUDA_LAUNCH_BLOCKING=1 to find the real operation."),
    memory_history: bool = typer.Option(False, "--memory-history", help="Record CUDA allocation stacks from the start and summarise the top sites at an OOM."),
    evidence_out: Optional[Path] = typer.Option(None, "--evidence-out", help="Write the raw probe record here (used by `eval reproduce --with-probes`)."),
    no_diagnose: bool = typer.Option(False, "--no-diagnose", help="Only collect evidence; print no diagnosis."),
    investigate: bool = typer.Option(False, "--investigate", help="On failure, re-run the command once per experiment (one change each: "
                                     "CUDA_LAUNCH_BLOCKING, host-side index checks, expandable segments, anomaly detection, num_workers=0, "
                                     "no torch.compile...) and report what each verified or ruled out. Asks first at a terminal; --yes elsewhere."),
    budget: Optional[float] = typer.Option(None, "--budget", min=1.0, help="Seconds all the experiments may take together (default: 3x the failing run)."),
    experiment: list[str] = typer.Option([], "--experiment", help="Run this experiment (repeatable; implies --investigate). "
                                         "Ids: launch_blocking, guard_index, expandable_segments, memory_history, nonfinite, anomaly, ddp_detail, "
                                         "nccl_debug, compile_eager, dataloader_main, cudnn_off."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Allow --investigate to re-run the command without asking."),
    report_before: Optional[Path] = typer.Option(None, "--report-before", hidden=True, help="Also write the diagnosis as it was before the experiments (eval)."),
    llm: Optional[str] = llm_option(),
) -> None:
    """Run a command (after `--`); if it fails, diagnose it with live probes. The exit status is preserved (same code, or death by the same signal)."""
    from assistant.run_signals import die_like
    from assistant.runner import InvestigateOptions, run as run_command
    from assistant.settings import load_settings

    argv = list(ctx.args)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if experiment:
        from assistant.investigate.catalogue import by_id

        for name in experiment:
            by_id(name)  # an unknown id is refused before the command starts
    options = InvestigateOptions(enabled=investigate or bool(experiment), budget_s=budget, only=tuple(experiment), assume_yes=yes, report_before=report_before)
    code = run_command(argv, report=report, rerun_blocking=rerun_blocking, memory_history=memory_history,
                       evidence_out=evidence_out, diagnose_failures=not no_diagnose, settings=load_settings(llm=llm), investigate=options)
    # A child killed by a signal: end by that signal too, so the shell sees the same status.
    raise typer.Exit(die_like(code))


def env(json_out: bool = typer.Option(False, "--json", help="Print the report as JSON.")) -> None:
    """Environment report (Python, torch, CUDA, driver, GPUs, relevant variables); works even when torch cannot import."""
    from assistant import __version__
    from assistant.probes.env import collect_environment, format_environment

    # torchhelp's own version first: a bug report needs it as much as torch's.
    report = {"torchhelp": __version__, **collect_environment()}
    if json_out:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(f"torchhelp     {__version__}\n{format_environment(report)}")
