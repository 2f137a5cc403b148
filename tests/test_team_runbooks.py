"""Team runbooks end to end (issue 21, item 7): ``torchhelp kb add`` a runbook, ``torchhelp ask`` a real failure it quotes.

The runbooks are written the way teams write them: a fix section of plain paragraphs each followed by a
fenced command (``bash`` with a ``# comment``, ``python``), a Slack ``#channel``, a long front-matter id.
The failures are real: the DataLoader timeout is a captured CPU run (eval/captured), and the shard
check is a team script run here (no built-in document or rule knows its message).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_CAPTURE = ROOT / "eval" / "captured" / "cpu" / "dataloader-timeout-slow-getitem.json"

NFS_ID = "user:ml-platform-dataloader-timeouts-on-the-shared-nfs-scratch-during-nightly-backups"
NFS_RUNBOOK = """---
title: DataLoader timeouts on the shared NFS scratch
id: ml-platform-dataloader-timeouts-on-the-shared-nfs-scratch-during-nightly-backups
---
# DataLoader timeouts on the shared NFS scratch

Between 01:00 and 03:00 the backup job saturates the scratch filer, and training jobs that read
small files from it stop with:

```text
RuntimeError: DataLoader timed out after 30 seconds
```

## Why it happens

Each `__getitem__` opens a file on `/scratch`; while the backup runs, one open can take longer than
the loader's `timeout`, and the main process gives up on the worker.

## What to do

First confirm the filer is the slow part:

```bash
# time one read from the scratch mount
time cat /scratch/$USER/dataset/shard-000.tar > /dev/null
```

Then read from the node-local copy and give the workers more time:

```python
loader = DataLoader(dataset, batch_size=64, num_workers=8, timeout=300, persistent_workers=True)
```

If it still times out, post the job id in #ml-platform-help on Slack.
"""

SHARDS_ID = "user:data-platform-webdataset-shard-manifest-mismatch-after-partial-rsync-to-scratch"
SHARDS_RUNBOOK = """---
title: Shard manifest mismatch after a partial sync
id: data-platform-webdataset-shard-manifest-mismatch-after-partial-rsync-to-scratch
---
# Shard manifest mismatch after a partial sync

`check_shards.py` refuses to start training when the scratch copy is incomplete; the job stops with
`RuntimeError: shard manifest lists 1024 shards but 1019 were found` and the scratch path.

## Cause

The nightly `rsync` to scratch was cut off by the maintenance window, so some `.tar` shards are missing.

## Fix

1. **Re-run the sync.** It copies only what is missing.

```bash
# resumes where the nightly job stopped
rsync -a --partial /datasets/imagenet/ /scratch/imagenet/
```

2. **Check the copy before you resubmit.**

```python
from check_shards import check_manifest
check_manifest("/scratch/imagenet")
```

3. **Still short?** Ask in #data-platform with the dataset name.
"""

CHECK_SHARDS = """import json, os, sys


def check_manifest(root):
    with open(os.path.join(root, "manifest.json")) as f:
        manifest = json.load(f)
    found = sorted(name for name in os.listdir(root) if name.endswith(".tar"))
    if len(found) != len(manifest["shards"]):
        raise RuntimeError(f"shard manifest lists {len(manifest['shards'])} shards but {len(found)} were found under {root}")


check_manifest(sys.argv[1])
"""

NFS_CODE = ("time cat /scratch/$USER/dataset/shard-000.tar > /dev/null",
            "loader = DataLoader(dataset, batch_size=64, num_workers=8, timeout=300, persistent_workers=True)")


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0", "TORCHHELP_LLM": "none", "NO_COLOR": "1", "COLUMNS": "80", **extra}


def torchhelp(home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess."""
    return subprocess.run([sys.executable, "-m", "assistant", *args], capture_output=True, text=True, env=_env(home, **extra), timeout=120, cwd=ROOT)


@pytest.fixture(scope="module")
def runbooks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("team-runbooks")
    (folder / "dataloader-timeouts-nfs.md").write_text(NFS_RUNBOOK, encoding="utf-8")
    (folder / "shard-manifest.md").write_text(SHARDS_RUNBOOK, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, runbooks: Path) -> Path:
    home = tmp_path_factory.mktemp("th-home")
    out = torchhelp(home, "kb", "add", str(runbooks))
    assert out.returncode == 0, out.stderr
    return home


@pytest.fixture(scope="module")
def timeout_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The captured DataLoader timeout (a real CPU run), as a log file."""
    stderr = json.loads(TIMEOUT_CAPTURE.read_text(encoding="utf-8"))["stderr"]
    assert "RuntimeError: DataLoader timed out after 3 seconds" in stderr
    log = tmp_path_factory.mktemp("logs") / "timeout.log"
    log.write_text(stderr, encoding="utf-8")
    return log


@pytest.fixture(scope="module")
def shards_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The team's shard check, run for real on a copy with a shard missing."""
    job = tmp_path_factory.mktemp("job")
    (job / "check_shards.py").write_text(CHECK_SHARDS, encoding="utf-8")
    shards = job / "shards"
    shards.mkdir()
    (shards / "manifest.json").write_text(json.dumps({"shards": [f"s{i}.tar" for i in range(4)]}), encoding="utf-8")
    for i in range(3):
        (shards / f"s{i}.tar").write_bytes(b"")
    run = subprocess.run([sys.executable, "check_shards.py", "shards"], capture_output=True, text=True, cwd=job, timeout=60)
    assert "shard manifest lists 4 shards but 3 were found" in run.stderr, run.stderr
    log = job / "shards.log"
    log.write_text(run.stderr, encoding="utf-8")
    return log


def _ask(home: Path, log: Path, fmt: str, *flags: str) -> str:
    out = torchhelp(home, "ask", "--format", fmt, *flags, str(log))
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def timeout_answers(home: Path, timeout_log: Path) -> dict[str, str]:
    return {fmt: _ask(home, timeout_log, fmt) for fmt in ("json", "terminal", "markdown")}


def test_code_blocks_appear_once_as_code_in_every_format(timeout_answers: dict[str, str]) -> None:
    fixes = json.loads(timeout_answers["json"])["fixes"]
    team = [f for f in fixes if f["sources"] == [NFS_ID]]
    assert [f["code"] for f in team[:2]] == ["# time one read from the scratch mount\n" + NFS_CODE[0], NFS_CODE[1]]
    for f in team:  # code is in `code` only, never flattened into the prose; the fence's language tag nowhere
        prose = f"{f['title']} {f['detail']}"
        assert "DataLoader(dataset" not in prose and "/dev/null" not in prose and "```" not in prose, f
        assert not re.search(r"\b(bash|python|text)\b", prose), f
    for fmt in ("terminal", "markdown"):
        text = timeout_answers[fmt]
        for line in NFS_CODE:
            assert text.count(line) == 1, (fmt, line, text)
        assert "# time one read from the scratch mount" in text  # a comment in the code is code, not a heading
        assert not re.search(r"(?m)^\s*(bash|python)\s*$", text) and " bash " not in text
    terminal = timeout_answers["terminal"].splitlines()
    code_lines = [ln for ln in terminal if any(c in ln for c in NFS_CODE)]
    assert all(ln.startswith(" " * 6) and ln.strip() in NFS_CODE for ln in code_lines), code_lines  # printed whole, as code
    markdown = timeout_answers["markdown"]
    assert re.search(r"```bash\n\s*# time one read from the scratch mount\n\s*" + re.escape(NFS_CODE[0]) + r"\n\s*```", markdown), markdown
    assert re.search(r"```python\n\s*" + re.escape(NFS_CODE[1]) + r"\n\s*```", markdown), markdown


def test_slack_channel_keeps_its_hash(timeout_answers: dict[str, str]) -> None:
    fixes = json.loads(timeout_answers["json"])["fixes"]
    assert any("#ml-platform-help" in f["detail"] or "#ml-platform-help" in f["title"] for f in fixes), fixes
    for fmt in ("terminal", "markdown"):
        assert "#ml-platform-help" in timeout_answers[fmt]
        assert re.search(r"(?<!#)ml-platform-help on Slack", timeout_answers[fmt]) is None


def test_built_in_fixes_follow_the_teams_where_built_in_documents_cover_the_error(timeout_answers: dict[str, str]) -> None:
    answer = json.loads(timeout_answers["json"])
    assert answer["rule"] is not None  # a rule reads the DataLoader timeout, and a built-in signature quotes it
    sources = [f["sources"] for f in answer["fixes"]]
    assert sources[:3] == [[NFS_ID]] * 3
    assert any(s and not s[0].startswith("user:") for s in sources[3:]), sources


def test_only_the_runbook_covers_the_teams_own_error_so_only_its_fixes_are_given(home: Path, shards_log: Path) -> None:
    answer = json.loads(_ask(home, shards_log, "json"))
    assert answer["rule"] is None and answer["title"] == "Shard manifest mismatch after a partial sync"
    fixes = answer["fixes"]
    assert [f["title"] for f in fixes] == ["Re-run the sync", "Check the copy before you resubmit", "Still short?"]
    assert all(f["sources"] == [SHARDS_ID] for f in fixes)  # no generic step appended after the team's
    assert fixes[0]["code"] == "# resumes where the nightly job stopped\nrsync -a --partial /datasets/imagenet/ /scratch/imagenet/"
    assert "#data-platform" in fixes[2]["detail"]
    terminal = _ask(home, shards_log, "terminal")
    fix_section = terminal.split("Fixes", 1)[1].split("Evidence", 1)[0]
    assert re.findall(r"(?m)^(\d+)\.", fix_section) == ["1", "2", "3"]


def _first_column(table_text: str) -> str:
    """The ``source`` column's text, its wrapped pieces joined (the column ends where ``title`` starts)."""
    lines = table_text.splitlines()
    header = next(i for i, ln in enumerate(lines) if re.match(r"\s*source\s+title\s+score", ln))
    start, end = lines[header].index("source"), lines[header].index("title")
    return "".join(ln[start:end].strip() for ln in lines[header + 1:])


def test_sources_table_and_brief_show_the_full_long_id(home: Path, shards_log: Path) -> None:
    terminal = _ask(home, shards_log, "terminal")
    assert SHARDS_ID in _first_column(terminal.split("Sources", 1)[1].split("note:", 1)[0])
    assert all(len(ln) <= 80 for ln in terminal.split("Sources", 1)[1].splitlines() if not ln.startswith("note"))
    brief = _ask(home, shards_log, "terminal", "--brief")
    assert SHARDS_ID in "".join(brief.split("sources:", 1)[1].split()), brief
    assert SHARDS_ID in {s["id"] for s in json.loads(_ask(home, shards_log, "json"))["sources"]}


def test_kb_list_shows_the_added_documents(home: Path, runbooks: Path) -> None:
    out = torchhelp(home, "kb", "list", "--json")
    assert out.returncode == 0, out.stderr
    docs = {d["id"]: d for d in json.loads(out.stdout)}
    assert set(docs) == {NFS_ID, SHARDS_ID}
    nfs = docs[NFS_ID]
    assert nfs["title"] == "DataLoader timeouts on the shared NFS scratch"
    assert nfs["path"] == str((runbooks / "dataloader-timeouts-nfs.md").resolve())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", nfs["added"]) and nfs["chunks"] >= 3
    table = torchhelp(home, "kb", "list", COLUMNS="200")
    assert table.returncode == 0 and NFS_ID in table.stdout and SHARDS_ID in table.stdout, table.stdout


def test_kb_remove_drops_the_runbook_and_it_is_no_longer_cited(tmp_path: Path, runbooks: Path, shards_log: Path) -> None:
    home = tmp_path / "home"
    assert torchhelp(home, "kb", "add", str(runbooks)).returncode == 0
    assert SHARDS_ID in _ask(home, shards_log, "json")
    unknown = torchhelp(home, "kb", "remove", "user:no-such-runbook")
    assert unknown.returncode != 0 and len(unknown.stderr.strip().splitlines()) == 1, unknown.stderr
    assert "no user document 'user:no-such-runbook'" in unknown.stderr and "Traceback" not in unknown.stderr
    removed = torchhelp(home, "kb", "remove", SHARDS_ID)
    assert removed.returncode == 0 and f"removed {SHARDS_ID}" in removed.stdout, removed.stderr
    answer = json.loads(_ask(home, shards_log, "json"))
    assert not any(s["id"].startswith("user:") for s in answer["sources"])
    assert not any(src.startswith("user:") for f in answer["fixes"] for src in f["sources"])
    listed = json.loads(torchhelp(home, "kb", "list", "--json").stdout)
    assert [d["id"] for d in listed] == [NFS_ID]
    by_path = torchhelp(home, "kb", "remove", str(runbooks / "dataloader-timeouts-nfs.md"))  # by the path it was added from
    assert by_path.returncode == 0, by_path.stderr
    assert json.loads(torchhelp(home, "kb", "list", "--json").stdout) == []


def test_kb_remove_embeds_nothing_again(tmp_path: Path, runbooks: Path) -> None:
    home = tmp_path / "home"
    added = torchhelp(home, "kb", "add", str(runbooks / "dataloader-timeouts-nfs.md"), str(runbooks / "shard-manifest.md"), TORCHHELP_DENSE="1")
    assert added.returncode == 0, added.stderr
    removed = torchhelp(home, "kb", "remove", NFS_ID, TORCHHELP_DENSE="1")
    assert removed.returncode == 0, removed.stderr
    assert "embedded 0 chunk(s)" in removed.stdout, removed.stdout  # the shipped and the other user chunks keep their vectors
