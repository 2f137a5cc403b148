"""The `torchhelp` command line. Thin: parse flags, call the engine, render, map errors to exit codes.

Errors from the engine (TorchhelpError) become one line on stderr and their exit code; anything
unexpected becomes one line too (set TORCHHELP_DEBUG=1 to see the traceback). Never a traceback
by default.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn, Optional

# One BLAS thread: our matrices are small, and OpenBLAS threads on 2-core machines cost more than they
# save (measured: 4x slower index builds). Must be set before NumPy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import typer

from assistant.cli_options import llm_option
from assistant.errors import InputError, TorchhelpError
from assistant.render.progress import index_progress

# `-h` as well as `--help`: click hands the root's help option names down to every subcommand and group.
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, context_settings=HELP_OPTIONS,
                  help="torchhelp: diagnose PyTorch failures — the cause, the fix, and the sources.")
kb_app = typer.Typer(no_args_is_help=True, help="Manage the knowledge base and its retrieval index.")
app.add_typer(kb_app, name="kb")


def _print_version(value: bool) -> None:
    if value:
        from assistant import __version__

        print(f"torchhelp {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version, help="Print torchhelp's version and exit."),
) -> None:
    """Options that come before the command."""


def _hide_flag_types() -> None:
    """Help shows no type for flags: typer's rich help labels them ``<bool>``, but a flag takes no value."""
    from typer import core

    option = getattr(core, "TyperOption", None)
    original = getattr(option, "display_type_rich", None)
    if option is None or original is None or getattr(original, "torchhelp_patched", False):
        return  # an older typer (no type column) or already patched

    def display_type_rich(self, ctx):
        if getattr(self, "is_flag", False) and not getattr(self, "count", False):
            return None
        return original(self, ctx)

    display_type_rich.torchhelp_patched = True  # type: ignore[attr-defined]
    option.display_type_rich = display_type_rich


_hide_flag_types()


def _settings(**overrides):
    from assistant.settings import load_settings

    return load_settings(**overrides)


def _read_input(path: Optional[str], window: int):
    from assistant.parse.reader import read_path, read_stream

    if path is None or path == "-":
        if sys.stdin is None:  # started with stdin closed (`torchhelp ask <&-`)
            raise InputError("standard input is closed: pass a log file, or pipe the log in")
        if path is None and sys.stdin.isatty():
            print("Paste the error or traceback, then press Ctrl-D (Ctrl-Z Enter on Windows):", file=sys.stderr)
        return read_stream(sys.stdin.buffer, window=window)
    return read_path(path, window=window)


def _read_job_folder(path: str):
    """A job's folder (per-rank files, attempts) read by triage's per-job pass: its failure, first failing rank and notes."""
    from assistant.triage.extract import extract_job
    from assistant.triage.jobs import job_of_folder
    from assistant.triage.model import FAILED

    report = extract_job(job_of_folder(path))
    if report.status != FAILED or not (report.failure_text or report.headline):
        raise InputError(f"no failure found in the logs under {path} (triage reads this job as succeeded)")
    return report


ASK_FORMATS = ("terminal", "markdown", "json")


def _ask_format(fmt: Optional[str], json_out: bool, brief: bool) -> str:
    """The one output format; --json is an alias of --format json and contradictions are refused."""
    if fmt is not None and fmt not in ASK_FORMATS:
        raise InputError(f"unknown format {fmt!r} (use terminal, markdown or json)")
    if json_out and fmt not in (None, "json"):
        raise InputError(f"--json conflicts with --format {fmt} (--json is short for --format json; pick one)")
    chosen = "json" if json_out else (fmt or "terminal")
    if brief and chosen != "terminal":
        raise InputError(f"--brief applies to the terminal format only, not --format {chosen}")
    return chosen


@app.command()
def ask(
    file: Optional[str] = typer.Argument(None, help="Log or traceback file, or a job's folder of logs; '-' or nothing reads standard input."),
    json_out: bool = typer.Option(False, "--json", help="Same as --format json: print Diagnosis.to_dict() as JSON."),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help="terminal (default) | markdown | json"),
    brief: bool = typer.Option(False, "--brief", help="Terminal only: at most 20 lines (title, cause, top 2 fixes with their code, sources, and the note when a requested LLM was not used)."),
    llm: Optional[str] = llm_option(),
    offline: bool = typer.Option(False, "--offline", help="Forbid remote LLM backends."),
    no_dense: bool = typer.Option(False, "--no-dense", help="Lexical retrieval only (no embedding model)."),
    chat: bool = typer.Option(False, "--chat", help="After the diagnosis, ask follow-up questions."),
) -> None:
    """Diagnose a pasted PyTorch error, log or traceback."""
    from assistant.engine import default_engine

    fmt = _ask_format(fmt, json_out, brief)  # before any work: a bad combination fails at once
    settings = _settings(offline=offline or None, dense=False if no_dense else None, llm=llm)
    engine = default_engine(settings)
    job = _read_job_folder(file) if file not in (None, "-") and Path(file).is_dir() else None
    inp = _read_input(file, settings.window_bytes) if job is None else None
    if settings.dense:
        from assistant.kb.retrieve import get_retriever

        try:
            get_retriever(settings.home, dense=True, encoder_kind=settings.encoder, progress=index_progress())  # builds with a progress bar
        except TorchhelpError:
            pass  # diagnose() falls back to lexical retrieval and says so
    if job is not None:
        diagnosis = engine.diagnose(job.failure_text or job.headline, notes=job.notes, failing_rank=job.first_failing_rank)
    elif inp is not None:
        diagnosis = engine.diagnose(inp.text, notes=inp.notes)
    if fmt == "json":
        import json

        from assistant.render.outgoing import shown

        print(json.dumps(shown(diagnosis).to_dict(), indent=2, ensure_ascii=False))
    elif fmt == "markdown":
        from assistant.render.markdown import render_markdown

        sys.stdout.write(render_markdown(diagnosis))
    elif fmt == "terminal":
        from rich.console import Console

        from assistant.render.terminal import render_brief, render_terminal

        (render_brief if brief else render_terminal)(diagnosis, Console())
    if chat:
        from assistant.compose.chat import run_chat
        from assistant.kb.retrieve import get_retriever

        retriever = get_retriever(settings.home, dense=settings.dense, encoder_kind=settings.encoder)
        ids = [s.id for s in diagnosis.sources]
        passages = retriever.search(f"{diagnosis.title}\n{diagnosis.cause}", k=settings.top_k, must_include=ids)
        run_chat(diagnosis, passages, settings)
    skip_teardown()  # everything is printed; nothing is left open


@kb_app.command("build")
def kb_build(no_dense: bool = typer.Option(False, "--no-dense", help="Skip embeddings (lexical index only).")) -> None:
    """(Re)build the retrieval index now."""
    from assistant.kb.index import build
    from assistant.kb.retrieve import clear_cache

    settings = _settings()
    manifest = build(settings.home, dense=not no_dense, encoder_kind=settings.encoder, progress=index_progress())
    clear_cache()
    print(f"indexed {manifest['documents']} documents ({manifest['chunks']} chunks) into {manifest.get('index_dir', settings.home / 'index')} "
          f"in {manifest['build_seconds']} s; dense={manifest['dense']}, model={manifest['model']}, hash={manifest['knowledge_hash']}")


@kb_app.command("search")
def kb_search(
    query: str = typer.Argument(..., help="Words or an error message."),
    k: int = typer.Option(5, "-k", help="How many passages."),
    mode: str = typer.Option("hybrid", "--mode", help="hybrid | lexical | dense"),
    json_out: bool = typer.Option(False, "--json", help="Print the passages as JSON."),
) -> None:
    """Search the knowledge base."""
    from assistant.kb.retrieve import get_retriever

    if mode not in ("hybrid", "lexical", "dense"):
        raise InputError(f"unknown mode {mode!r} (use hybrid, lexical or dense)")
    if not query.strip():
        raise InputError("empty query")
    settings = _settings()
    retriever = get_retriever(settings.home, dense=mode != "lexical", encoder_kind=settings.encoder, progress=index_progress())
    passages = retriever.search(query, k=k, mode=mode)  # type: ignore[arg-type]
    from assistant.atlas import atlas_for
    from assistant.atlas.search import search_atlas

    atlas = atlas_for(settings.home) if settings.atlas else None
    checks = search_atlas(atlas, query, k=k) if atlas is not None else []
    if json_out:
        import json
        from dataclasses import asdict

        print(json.dumps({"passages": [asdict(p) for p in passages], "atlas": checks}, indent=2, ensure_ascii=False))
        return
    if not passages and not checks:
        print("no matching passages")
        return
    from rich.console import Console

    from assistant.kb.display import atlas_table, passages_table

    console = Console(highlight=False)
    if passages:
        console.print(passages_table(passages))  # fits the terminal's width; wraps, never cuts
    if checks:
        console.print(atlas_table(checks))


@kb_app.command("atlas")
def kb_atlas(
    checkout: Optional[Path] = typer.Option(None, "--from", help="A PyTorch source checkout (a work tree or a bare .git) to read."),
    torch_package: Optional[Path] = typer.Option(None, "--torch-package", help="A torch package folder (default: the installed torch, if any)."),
    no_package: bool = typer.Option(False, "--no-package", help="Read only the checkout, not the installed torch."),
) -> None:
    """Rebuild the error atlas for your own PyTorch (from its checkout and/or its installed package); used from then on."""
    from assistant.atlas import atlas_for, user_atlas_dir
    from assistant.atlas.build import build, installed_torch_dir

    settings = _settings()
    package = None if no_package else (torch_package or installed_torch_dir())
    if checkout is not None and not checkout.exists():
        raise InputError(f"no such checkout: {checkout}")
    if package is None and checkout is None:
        raise InputError("nothing to read: give --from <pytorch checkout>, or install torch, or --torch-package <dir>")
    out = user_atlas_dir(settings.home)
    out.mkdir(parents=True, exist_ok=True)
    manifest = build(checkout, package=package, out=out)
    atlas_for.cache_clear()
    versions = ", ".join(f"torch {v}: {n}" for v, n in manifest["templates_per_version"].items())
    print(f"{manifest['templates']} message templates ({versions}) -> {out}")


@kb_app.command("add")
def kb_add(paths: list[Path] = typer.Argument(..., help="Markdown, reStructuredText or text files (or folders of them).")) -> None:
    """Add your own documents to the knowledge base (copied into TORCHHELP_HOME, then indexed)."""
    from assistant.kb.index import add_user_documents, ensure_index
    from assistant.kb.retrieve import clear_cache

    settings = _settings()
    added = add_user_documents(settings.home, list(paths))
    clear_cache()
    manifest = ensure_index(settings.home, dense=settings.dense, encoder_kind=settings.encoder, progress=index_progress()).manifest
    # Only new or changed chunks are embedded; the others keep their vectors (see kb.index._vectors).
    embedded = f"; embedded {manifest['embedded']} new chunk(s), reused {manifest['reused']}" if manifest.get("dense") and "embedded" in manifest else ""
    print(f"added {len(added)} document(s); the index now holds {manifest['documents']} documents ({manifest['chunks']} chunks){embedded}")
    for p in added:
        print(f"  {p}")


@kb_app.command("list")
def kb_list(json_out: bool = typer.Option(False, "--json", help="Print the documents as JSON.")) -> None:
    """List the documents you added (id, title, path, when added, chunks)."""
    from assistant.kb.user_docs import list_user_documents

    docs = list_user_documents(_settings().home)
    if json_out:
        import json

        print(json.dumps([d.to_dict() for d in docs], indent=2, ensure_ascii=False))
        return
    if not docs:
        print("no documents added yet (add your team's runbooks with `torchhelp kb add FILE.md`)")
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    table = Table(box=None, header_style="dim", pad_edge=False)
    # Ids and paths are printed whole (`kb remove` takes either): folded where they must, the id on one line where it fits.
    table.add_column("id", overflow="fold", min_width=min(max(len(d.id) for d in docs), console.width // 2))
    table.add_column("title", overflow="fold")
    table.add_column("path", overflow="fold")
    table.add_column("added", no_wrap=True)
    table.add_column("chunks", justify="right")
    for d in docs:
        table.add_row(Text(d.id), Text(d.title), Text(d.path), d.added.replace("T", " ").removesuffix("Z") + " UTC", str(d.chunks))
    console.print(table)


@kb_app.command("remove")
def kb_remove(document: str = typer.Argument(..., help="A document's id (as `kb list` shows it) or the path it was added from.")) -> None:
    """Remove a document you added; its chunks leave the index (nothing else is embedded again)."""
    from assistant.kb.index import ensure_index
    from assistant.kb.retrieve import clear_cache
    from assistant.kb.user_docs import remove_user_document

    settings = _settings()
    removed = remove_user_document(settings.home, document)
    clear_cache()
    manifest = ensure_index(settings.home, dense=settings.dense, encoder_kind=settings.encoder, progress=index_progress()).manifest
    embedded = f"; embedded {manifest['embedded']} chunk(s), reused {manifest['reused']}" if manifest.get("dense") and "embedded" in manifest else ""
    print(f"removed {removed.id} ({removed.path}); the index now holds {manifest['documents']} documents ({manifest['chunks']} chunks){embedded}")


def _register_optional_commands() -> None:
    """Commands that live in their own modules (eval; run and env; triage; serve; config), kept out of this file."""
    from assistant import config_cli, runner_cli
    from assistant.eval import cli as eval_cli
    from assistant.serve import cli as serve_cli
    from assistant.triage import cli as triage_cli

    eval_cli.register(app)
    runner_cli.register(app)
    triage_cli.register(app)
    serve_cli.register(app)
    config_cli.register(app)


def _click_exceptions() -> tuple[tuple[type[BaseException], ...], ...]:
    """(usage errors, exits, aborts) as typer raises them: recent typer vendors its own click
    (typer._click) whose classes are not click's, older typer raises click's own."""
    import importlib

    errors: list[type[BaseException]] = []
    exits: list[type[BaseException]] = [typer.Exit]
    aborts: list[type[BaseException]] = [typer.Abort]
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for found, attr in ((errors, "ClickException"), (exits, "Exit"), (aborts, "Abort")):
            if hasattr(module, attr):
                found.append(getattr(module, attr))
    return tuple(errors), tuple(exits), tuple(aborts)


def _shown(exc: BaseException) -> str:
    """An exception's message for the terminal: it may quote untrusted input (a path, an HTTP body)."""
    from assistant.render.outgoing import shown_text

    return shown_text(exc)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app and turn every failure into one line and an exit code."""
    click_error, click_exit, click_abort = _click_exceptions()
    _register_optional_commands()
    from assistant.triage.cli import route_argv

    argv = route_argv(list(sys.argv[1:] if argv is None else argv))
    try:
        result = app(args=argv, standalone_mode=False, prog_name="torchhelp")
        return int(result or 0)
    except click_exit as exc:
        return exc.exit_code  # type: ignore[attr-defined]
    except click_error as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            # `torchhelp` or `torchhelp kb` alone: asking for help, not a mistake. (typer's rich help is
            # printed while the error is built; plain click carries it as the message.)
            text = exc.format_message()  # type: ignore[attr-defined]
            if text.strip():
                print(text)
            return 0
        exc.show()  # type: ignore[attr-defined]
        return exc.exit_code  # type: ignore[attr-defined]
    except click_abort:
        print("torchhelp: aborted", file=sys.stderr)
        return 130
    except TorchhelpError as exc:
        print(f"torchhelp: error: {_shown(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("torchhelp: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the edge: never show the user our traceback
        if os.environ.get("TORCHHELP_DEBUG"):
            raise
        print(f"torchhelp: internal error: {type(exc).__name__}: {_shown(exc)} (set TORCHHELP_DEBUG=1 for details)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


_TEARDOWN_SKIPPABLE = False  # set by a command whose work is all written and closed when it returns (ask)


def skip_teardown() -> None:
    """Mark this run as one whose process may end without the interpreter freeing its heap."""
    global _TEARDOWN_SKIPPABLE
    _TEARDOWN_SKIPPABLE = True


def leave(code: int) -> NoReturn:
    """End the process with ``code``. After ``ask``, the loaded atlas and index (hundreds of thousands of small
    objects) would be freed one by one at interpreter shutdown, about 0.12 s of a 0.5 s cold ask on 2 cores
    (benchmarks/ask.json): the exit handlers run and the output is flushed, then the process ends at once."""
    if _TEARDOWN_SKIPPABLE:
        import atexit

        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe or stream: nothing more can be written to it anyway
                pass
        os._exit(code)
    sys.exit(code)


def console_main() -> None:
    """Console-script wrapper: exit with main()'s code."""
    leave(main())
