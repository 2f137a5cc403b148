"""Team runbooks (``torchhelp kb add``) that quote the failure's error text drive the diagnosis.

The errors come from real runs: an in-place write into an expanded tensor is run here with torch
(no built-in rule knows it), and the CUDA OOM is a captured H100 failure (a rule knows it; the team's
runbook overrides its first fix).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from assistant import diagnose
from assistant.kb.runbooks import error_fragments, match_runbooks, normalise
from assistant.kb.documents import read_user_doc
from assistant.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
OOM_CAPTURE = ROOT / "eval" / "captured" / "cuda" / "cuda-oom-eval-without-no-grad.json"

OVERLAP_RUNBOOK = """---
title: Writing into an expanded tensor
---
# Writing into an expanded tensor

Seen in the augmentation pipeline after an upgrade:

> RuntimeError: unsupported operation: more than one element of the written-to tensor refers to a single memory location

## Cause

An expanded (broadcast) tensor maps many positions onto one storage element, so an in-place write
into it has no single meaning. Here the mask helper returned such a view.

## Fix

1. **Materialise the view before writing.** Call `.clone()` on the expanded tensor first.

```python
mask = mask.expand(batch, -1).clone()
mask.add_(1)
```

2. **Use the out-of-place op.** Write `x = x + y` instead of `x.add_(y)`.
"""

OOM_RUNBOOK = """# GPU memory on the shared cluster

When a job stops with `CUDA out of memory. Tried to allocate 2.00 GiB`, do not shrink the batch first.

## What to do

1. **Resubmit on the large-memory partition.** The small cards are oversubscribed.

```bash
sbatch --partition=gpu-large --gres=gpu:1 train.sbatch
```
"""

UNRELATED_RUNBOOK = """# NCCL timeouts on the shared cluster

Jobs that print `Watchdog caught collective operation timeout: WorkNCCL` need the IB fabric checked.

## Fix

1. **Open a ticket with the fabric team.** Include the job id.
"""


@pytest.fixture(scope="module")
def overlap_error() -> str:
    """The real message of an in-place write into an expanded tensor, from this machine's torch."""
    snippet = "import torch\nx = torch.zeros(1).expand(4)\nx.add_(1)\n"
    run = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=120)
    assert "written-to tensor" in run.stderr, run.stderr[-2000:]
    return run.stderr


@pytest.fixture(scope="module")
def oom_error() -> str:
    return json.loads(OOM_CAPTURE.read_text(encoding="utf-8"))["stderr"]


def _home_with(tmp_path: Path, **docs: str) -> Path:
    from assistant.kb.index import add_user_documents

    home = tmp_path / "home"
    paths = []
    for name, text in docs.items():
        p = tmp_path / f"{name.replace('_', '-')}.md"
        p.write_text(text, encoding="utf-8")
        paths.append(p)
    add_user_documents(home, paths)
    return home


def _settings(home: Path):  # type: ignore[no-untyped-def]
    return load_settings(env={"TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0"}, llm="none")


def test_numbers_are_masked_so_a_runbook_matches_other_sizes(tmp_path: Path, oom_error: str) -> None:
    p = tmp_path / "oom.md"
    p.write_text(OOM_RUNBOOK, encoding="utf-8")
    assert "2.00 GiB" in OOM_RUNBOOK and "128.00 MiB" in oom_error  # different sizes on each side
    found = match_runbooks(oom_error, [("user:oom", str(p))])
    assert [m.doc_id for m in found] == ["user:oom"]
    assert normalise(found[0].fragment) in normalise(oom_error)


def test_short_or_unrelated_fragments_do_not_match(tmp_path: Path, overlap_error: str) -> None:
    p = tmp_path / "short.md"
    p.write_text("# Notes\n\nWe see `RuntimeError` and `CUDA error` a lot.\n\n" + UNRELATED_RUNBOOK, encoding="utf-8")
    assert all(len(normalise(f)) >= 16 for f in error_fragments(read_user_doc(p)))
    assert match_runbooks(overlap_error, [("user:short", str(p))]) == []


def test_runbook_for_an_error_no_rule_knows_leads_the_answer(tmp_path: Path, overlap_error: str) -> None:
    bare = diagnose(overlap_error, settings=_settings(tmp_path / "bare"))
    assert bare.rule is None  # no rule reads this message: the case the runbook is for
    home = _home_with(tmp_path, expanded_tensor_writes=OVERLAP_RUNBOOK, nccl=UNRELATED_RUNBOOK)
    d = diagnose(overlap_error, settings=_settings(home))
    assert d.title == "Writing into an expanded tensor"
    assert d.sources[0].id == "user:expanded-tensor-writes"
    assert "user:nccl" not in {s.id for s in d.sources[:1]}
    assert [f.title for f in d.fixes[:2]] == ["Materialise the view before writing", "Use the out-of-place op"]
    assert all(f.from_team_runbook for f in d.fixes[:2])
    assert "mask.expand(batch, -1).clone()" in (d.fixes[0].code or "")
    assert "storage element" in d.cause  # the runbook's own cause section
    assert not any(f.from_team_runbook for f in d.fixes[2:])  # generic steps keep their own citations


def test_runbook_overrides_a_built_in_fix_but_not_the_category(tmp_path: Path, oom_error: str) -> None:
    bare = diagnose(oom_error, settings=_settings(tmp_path / "bare"))
    home = _home_with(tmp_path, cluster_oom=OOM_RUNBOOK)
    d = diagnose(oom_error, settings=_settings(home))
    assert d.category == bare.category == "cuda_oom" and d.rule == bare.rule
    assert d.fixes[0].title == "Resubmit on the large-memory partition"
    assert d.fixes[0].sources == ("user:cluster-oom",) and d.fixes[0].from_team_runbook
    assert "sbatch --partition=gpu-large" in (d.fixes[0].code or "")
    assert d.fixes[1].title == bare.fixes[0].title  # the built-in advice follows
    assert d.sources[0].id == "user:cluster-oom"
    assert any(e.kind == "runbook" for e in d.evidence)


def test_runbook_that_does_not_quote_the_error_changes_nothing(tmp_path: Path, oom_error: str) -> None:
    bare = diagnose(oom_error, settings=_settings(tmp_path / "bare"))
    d = diagnose(oom_error, settings=_settings(_home_with(tmp_path, nccl=UNRELATED_RUNBOOK)))
    assert [f.title for f in d.fixes] == [f.title for f in bare.fixes]
    assert not any(f.from_team_runbook for f in d.fixes)


def test_terminal_and_markdown_mark_team_fixes(tmp_path: Path, overlap_error: str) -> None:
    home = _home_with(tmp_path, expanded_tensor_writes=OVERLAP_RUNBOOK)
    log = tmp_path / "overlap.log"
    log.write_text(overlap_error, encoding="utf-8")
    env = {**os.environ, "TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0", "TORCHHELP_LLM": "none", "COLUMNS": "80", "NO_COLOR": "1"}
    for fmt, marker in (("terminal", "team runbook"), ("markdown", "*(team runbook)*")):
        out = subprocess.run([sys.executable, "-m", "assistant", "ask", "--format", fmt, str(log)], capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr
        first_fix = next(ln for ln in out.stdout.splitlines() if "Materialise the view before writing" in ln)
        assert marker in first_fix, out.stdout
        # Prose wraps at the width; code lines (indented six or more) are printed whole and may run past it.
        assert all(len(ln) <= 80 or ln.startswith(" " * 6) for ln in out.stdout.splitlines()) or fmt == "markdown"
