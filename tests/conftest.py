"""Shared fixtures: a hermetic TORCHHELP_HOME with the index built once per session, and the captures."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CAPTURED = ROOT / "eval" / "captured"
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def load_all_captures() -> list[dict]:
    out = []
    for p in sorted(CAPTURED.rglob("*.json")):
        data = json.loads(p.read_text(encoding="utf-8"))
        if data.get("matched_expectation"):
            out.append(data)
    return out


CAPTURES = load_all_captures()


@pytest.fixture(scope="session")
def th_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One TORCHHELP_HOME for the session; the dense index is built into it on first use."""
    home = tmp_path_factory.mktemp("torchhelp_home")
    os.environ["TORCHHELP_HOME"] = str(home)
    return home


@pytest.fixture(scope="session")
def settings(th_home: Path):
    from assistant.settings import load_settings

    return load_settings(env={"TORCHHELP_HOME": str(th_home)}, llm="none")


@pytest.fixture(scope="session")
def retriever(settings):
    from assistant.kb.retrieve import get_retriever

    return get_retriever(settings.home, dense=True)


def capture_ids(captures: list[dict]) -> list[str]:
    return [f"{c['device']}/{c['slug']}" for c in captures]
