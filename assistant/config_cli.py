"""`torchhelp config`: the effective settings and where each came from (default, config.toml, environment, flag)."""

from __future__ import annotations

import json
from typing import Optional

import typer

from assistant.cli_options import llm_option


def register(app: typer.Typer) -> None:
    """Add the ``config`` command."""
    app.command("config")(config)


def config(
    json_out: bool = typer.Option(False, "--json", help="Print the settings as JSON."),
    llm: Optional[str] = llm_option(),
) -> None:
    """Print the effective settings and where each came from (default / config.toml / environment / flag); secrets are not shown."""
    from assistant.settings import load_settings_with_sources
    from assistant.settings_doc import settings_rows

    settings, sources = load_settings_with_sources(llm=llm)
    rows = settings_rows(settings, sources)
    config_file = settings.home / "config.toml"
    if json_out:
        print(json.dumps({"config_file": str(config_file), "config_file_exists": config_file.is_file(), "settings": rows}, indent=2, ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"config file: {config_file}{'' if config_file.is_file() else ' (none)'}", title_justify="left")
    for column in ("setting", "value", "from", "variable"):
        table.add_column(column, overflow="fold")
    for row in rows:
        value = "" if row["value"] is None else str(row["value"])
        table.add_row(row["name"], value, row["source"], row["env"] or "")
    Console(highlight=False).print(table)
