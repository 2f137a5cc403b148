"""Hygiene the next engineer trips on (issue 21): undeclared imports, import circles, settings drift.

Everything here reads the source with ``ast`` (nothing is imported to be inspected), so it is fast.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "assistant"

# Packages whose modules run on the default `ask` path: what they import at module level must be a core
# dependency, not an extra (a fresh `pip install torchhelp` would fail to import them otherwise).
CORE_PACKAGES = ("assistant.backends", "assistant.compose", "assistant.decide", "assistant.differential", "assistant.kb", "assistant.parse",
                 "assistant.render", "assistant.rules", "assistant.engine", "assistant.settings", "assistant.cli", "assistant.pipeline")


def _norm(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    return _norm(re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0])


def _declared() -> tuple[set[str], set[str]]:
    """(core dependencies, every dependency including the extras) from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = {_requirement_name(r) for r in project["dependencies"]}
    extras = {_requirement_name(r) for reqs in project.get("optional-dependencies", {}).values() for r in reqs}
    return core, core | extras


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, tuple[Path, ast.Module]]:
    return {_module_name(p): (p, ast.parse(p.read_text(encoding="utf-8"), filename=str(p))) for p in sorted(PACKAGE.rglob("*.py"))}


def _third_party_imports(module: ast.Module, *, top_level_only: bool) -> set[str]:
    """Top-level names of absolute imports that are neither the standard library nor ``assistant``."""
    nodes = module.body if top_level_only else ast.walk(module)
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("assistant", "__future__")}


def test_every_third_party_import_is_a_declared_dependency() -> None:
    """`pydantic` was imported on the answer path but declared nowhere (it came in through typer by luck)."""
    _, declared = _declared()
    distributions = packages_distributions()
    missing: dict[str, list[str]] = {}
    for name, (_, tree) in _sources().items():
        for top in _third_party_imports(tree, top_level_only=False):
            dists = {_norm(d) for d in distributions.get(top, [])}
            if not dists:
                pytest.fail(f"{name} imports {top!r}, which no installed distribution provides (install the test extra)")
            if not dists & declared:
                missing.setdefault(f"{top} ({', '.join(sorted(dists))})", []).append(name)
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_the_answer_path_imports_only_core_dependencies_at_module_level() -> None:
    core, _ = _declared()
    distributions = packages_distributions()
    wrong = {}
    for name, (_, tree) in _sources().items():
        if not name.startswith(CORE_PACKAGES):
            continue
        for top in _third_party_imports(tree, top_level_only=True):
            dists = {_norm(d) for d in distributions.get(top, [])}
            if not dists & core:
                wrong.setdefault(top, []).append(name)
    assert not wrong, f"imported at module level on the answer path but only in an extra (import it where it is used, or make it core): {wrong}"


# --------------------------------------------------------------------------- import circles

def _imported_modules(tree: ast.Module, known: set[str], *, deferred: bool) -> set[str]:
    """The ``assistant`` modules a module imports: at module level, or anywhere (``deferred``: imports inside functions too).

    ``from pkg import name`` counts as importing ``pkg.name`` when that is a module, else ``pkg``. Imports under
    ``if TYPE_CHECKING:`` never run and are left out.
    """

    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    def walk(body: list[ast.stmt]) -> list[ast.AST]:
        out: list[ast.AST] = []
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                out.extend(walk(node.orelse))
                continue
            if deferred:
                out.extend(ast.walk(node))
            elif isinstance(node, ast.If | ast.Try | ast.With):
                out.append(node)
                for field_name in ("body", "orelse", "finalbody"):
                    out.extend(walk(getattr(node, field_name, [])))
                for handler in getattr(node, "handlers", []):
                    out.extend(walk(handler.body))
            else:
                out.append(node)
        return out

    found: set[str | None] = set()
    for node in walk(tree.body):
        if isinstance(node, ast.Import):
            found.update(owner(a.name) for a in node.names if a.name.startswith("assistant"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("assistant"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else owner(node.module))
    return {m for m in found if m is not None}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _graph(*, deferred: bool) -> dict[str, set[str]]:
    sources = _sources()
    known = set(sources)
    return {name: _imported_modules(tree, known, deferred=deferred) - {name} for name, (_, tree) in sources.items()}


# Circles closed only by an import inside a function (deferred): known, not yet broken. Do not add to this list;
# break a new circle by moving the shared piece to a small module both sides import.
KNOWN_DEFERRED_CIRCLES = [
    ["assistant.compose.deterministic", "assistant.compose.documents"],
    ["assistant.kb.encoder", "assistant.kb.static"],
    ["assistant.kb.index", "assistant.kb.shipped"],
    ["assistant.rules", "assistant.rules.registry"],
    ["assistant.triage.known", "assistant.triage.render_terminal"],
]


def test_cycle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_module_level_imports_have_no_circle() -> None:
    cycles = _cycles(_graph(deferred=False))
    assert not cycles, f"import circles among module-level imports: {cycles}"


def test_no_new_circle_hides_behind_a_deferred_import() -> None:
    """backends/base <-> its implementations, cli <-> eval/cli and differential/families <-> families_more were circles
    kept alive by an import inside a function; each shared piece now lives in a small module both sides import."""
    cycles = _cycles(_graph(deferred=True))
    new = [c for c in cycles if c not in KNOWN_DEFERRED_CIRCLES]
    assert not new, f"new import circles (counting imports inside functions): {new}"
    for named in (["assistant.backends.base", "assistant.backends.local_llamacpp", "assistant.backends.openai_http"],
                  ["assistant.cli", "assistant.eval.cli"], ["assistant.differential.families", "assistant.differential.families_more"]):
        assert not any(set(named) <= set(c) for c in cycles), named


# --------------------------------------------------------------------------- no token path that nothing listens to

def test_the_answer_path_takes_no_token_sink_and_promises_no_draft() -> None:
    """`on_token` went through four layers and was never called while `ask` printed "drafting with the LLM…":
    removed. Only a verified answer is ever shown, so there is nothing to stream to a door."""
    import inspect

    from assistant import pipeline
    from assistant.backends import select
    from assistant.compose import llm
    from assistant.engine import Engine

    for fn in (pipeline.diagnose, Engine.diagnose, Engine.verify, select.maybe_llm_compose, llm.llm_compose):
        assert "on_token" not in inspect.signature(fn).parameters, fn.__qualname__
    assert "drafting" not in (PACKAGE / "cli.py").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- one LLM option, one list of settings

def _commands():  # type: ignore[no-untyped-def]
    import typer.main

    from assistant.cli import _register_optional_commands, app

    _register_optional_commands()
    root = typer.main.get_command(app)
    return root.commands  # type: ignore[attr-defined]


def test_every_command_that_can_use_an_llm_takes_llm() -> None:
    commands = _commands()
    for path in (("ask",), ("run",), ("triage",), ("eval", "score")):
        command = commands[path[0]]
        for part in path[1:]:
            command = command.commands[part]
        opts = {o for p in command.params for o in getattr(p, "opts", [])}
        assert "--llm" in opts, path
    score = commands["eval"].commands["score"]
    hidden = {o: p.hidden for p in score.params for o in getattr(p, "opts", [])}
    assert hidden["--backend"] and not hidden["--llm"]  # the old name still works, out of sight


def test_run_and_triage_pass_llm_to_the_engine(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`--llm` means what it means in `ask`: the backend that writes the (verified) answer."""
    import assistant.runner
    import assistant.triage.api
    from assistant.cli import main

    monkeypatch.setenv("TORCHHELP_HOME", str(tmp_path))
    monkeypatch.delenv("TORCHHELP_LLM", raising=False)
    seen: dict[str, object] = {}

    def fake_run(argv, **kwargs):  # type: ignore[no-untyped-def]
        seen["run"] = kwargs["settings"].llm
        return 0

    def fake_triage(paths, **kwargs):  # type: ignore[no-untyped-def]
        seen["triage"] = kwargs["engine_obj"].settings.llm
        raise SystemExit(0)

    monkeypatch.setattr(assistant.runner, "run", fake_run)
    monkeypatch.setattr(assistant.triage.api, "triage", fake_triage)
    assert main(["run", "--llm", "none", "--", "true"]) == 0
    with pytest.raises(SystemExit):
        main(["triage", "--llm", "local", "--quiet", str(tmp_path)])
    assert seen == {"run": "none", "triage": "local"}


def test_eval_score_llm_and_its_old_name() -> None:
    from assistant.errors import EvalError
    from assistant.eval.cli import _llm_choice

    assert _llm_choice(None, None) == "none"
    assert _llm_choice("local", None) == _llm_choice(None, "local") == _llm_choice("local", "local") == "local"
    with pytest.raises(EvalError):
        _llm_choice("local", "openai")


def test_readme_lists_every_variable_from_the_settings_module() -> None:
    from assistant.settings_doc import environment_table, readme_section

    section = readme_section((ROOT / "README.md").read_text(encoding="utf-8"))
    assert section is not None, "README.md lost its settings-table markers"
    assert section == environment_table(), "README's settings table is stale: run `python scripts/settings_table.py --write`"


def _mentions(folder: Path, pattern: str = r"\bTORCHHELP_[A-Z0-9_]+") -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        if path.name in ("test_hygiene.py",) or path.relative_to(ROOT).as_posix() in ("assistant/settings.py", "assistant/settings_doc.py"):
            continue
        for name in re.findall(pattern, path.read_text(encoding="utf-8", errors="replace")):
            found.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    return found


def test_every_variable_is_listed_once_and_read_somewhere() -> None:
    """One list (assistant.settings.ENVIRONMENT): every TORCHHELP_* name the code, tests and scripts use is on it,
    and every name on it is read (TORCHHELP_BACKEND was set by a benchmark and read nowhere: removed)."""
    from assistant.settings import _ENV, ENVIRONMENT

    names = [v.name for v in ENVIRONMENT]
    assert len(names) == len(set(names))
    used = {**_mentions(ROOT / "scripts"), **_mentions(ROOT / "tests"), **_mentions(PACKAGE)}
    unlisted = sorted(set(used) - set(names))
    assert not unlisted, f"TORCHHELP_* variables used but not in assistant.settings.ENVIRONMENT: {unlisted}"
    in_package, in_tests = _mentions(PACKAGE), _mentions(ROOT / "tests")
    for v in ENVIRONMENT:
        if v.name == "OPENAI_API_KEY" or v.name in _ENV or v.name == "TORCHHELP_HOME":
            continue  # read by load_settings itself
        where = in_tests if v.audience == "test" else in_package
        assert v.name in where, f"{v.name} is listed but read nowhere"


def test_config_says_where_each_setting_came_from(monkeypatch, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    from assistant.cli import main

    (tmp_path / "config.toml").write_text('top_k = 7\nllm_api_key = "sk-secret-123"\n', encoding="utf-8")
    for var in ("TORCHHELP_LLM", "TORCHHELP_DENSE", "TORCHHELP_TOP_K", "TORCHHELP_LLM_API_KEY", "OPENAI_API_KEY", "TORCHHELP_ENCODER", "TORCHHELP_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TORCHHELP_HOME", str(tmp_path))
    monkeypatch.setenv("TORCHHELP_DENSE", "0")
    assert main(["config", "--json", "--llm", "none"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)
    rows = {r["name"]: r for r in doc["settings"]}
    assert (rows["home"]["source"], rows["home"]["value"]) == ("environment", str(tmp_path))
    assert (rows["top_k"]["source"], rows["top_k"]["value"]) == ("config.toml", 7)
    assert (rows["dense"]["source"], rows["dense"]["value"]) == ("environment", False)
    assert (rows["llm"]["source"], rows["llm"]["value"]) == ("flag", "none")
    assert (rows["encoder"]["source"], rows["encoder"]["env"]) == ("default", "TORCHHELP_ENCODER")
    assert "sk-secret-123" not in out and rows["llm_api_key"]["value"] == "(set, hidden)"
    assert main(["config"]) == 0
    shown = capsys.readouterr().out
    assert "config.toml" in shown and "TORCHHELP_DENSE" in shown and "sk-secret" not in shown
