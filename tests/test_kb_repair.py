"""The index repairs itself (issue 12, defect 10): damaged files are found by the manifest's
checksums and rebuilt with a note, concurrent first builds wait for one build, and a home that
cannot be written moves the index elsewhere instead of failing.

Most tests index a small copy of the knowledge (two memory documents) so a dense build takes
seconds; the ones that run the CLI do so in real subprocesses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT

CAPTURE = json.loads((ROOT / "eval" / "captured" / "cpu" / "cpu-oom-full-similarity-matrix.json").read_text())
# Runs the real CLI with the builtin knowledge pointed at a small folder (argv[1]).
CLI_WITH_KNOWLEDGE = (
    "import sys; from pathlib import Path; from assistant.kb import documents, index; k = Path(sys.argv[1]); "
    "documents.builtin_knowledge_dir = index.builtin_knowledge_dir = lambda: k; "
    "from assistant.cli import main; sys.exit(main(sys.argv[2:]))"
)
# Loads (building if needed) the index and prints what it got, for the concurrency test.
LOAD_AND_REPORT = (
    "import json, sys, time; from pathlib import Path; from assistant.kb import documents, index; k = Path(sys.argv[1]); "
    "documents.builtin_knowledge_dir = index.builtin_knowledge_dir = lambda: k; go = Path(sys.argv[3])\n"
    "while not go.exists(): time.sleep(0.005)\n"
    "li = index.ensure_index(Path(sys.argv[2]), dense=False)\n"
    "print(json.dumps({'build_id': li.manifest.get('build_id'), 'chunks': len(li.chunks)}))"
)
DAMAGES = ("truncate", "garbage", "delete")
FILES = ("chunks.json", "docs.json", "vectors.faiss", "lexical.json", "manifest.json")


@pytest.fixture(scope="module")
def knowledge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("knowledge") / "knowledge"
    (root / "memory").mkdir(parents=True)
    for name in ("cuda-oom.md", "cpu-oom.md"):  # two documents: a dense build takes seconds
        shutil.copyfile(ROOT / "knowledge" / "memory" / name, root / "memory" / name)
    return root


@pytest.fixture()
def small_kb(knowledge: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from assistant.kb import documents, index

    monkeypatch.setattr(index, "builtin_knowledge_dir", lambda: knowledge)
    monkeypatch.setattr(documents, "builtin_knowledge_dir", lambda: knowledge)
    return knowledge


@pytest.fixture(scope="module")
def dense_home(knowledge: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with a dense index of the small knowledge, built once and copied by each test."""
    from assistant.kb import documents, index

    saved = index.builtin_knowledge_dir, documents.builtin_knowledge_dir
    index.builtin_knowledge_dir = documents.builtin_knowledge_dir = lambda: knowledge  # type: ignore[assignment]
    try:
        home = tmp_path_factory.mktemp("dense") / "home"
        index.ensure_index(home, dense=True)
    finally:
        index.builtin_knowledge_dir, documents.builtin_knowledge_dir = saved  # type: ignore[assignment]
    return home


def _damage(path: Path, how: str) -> None:
    if how == "delete":
        path.unlink()
    elif how == "truncate":
        path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 3)])
    else:  # same size, different bytes: only the checksum can tell
        size = path.stat().st_size
        path.write_bytes((b"\x00garbage\xff" * (size // 9 + 1))[:size])


def _copy_home(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _env(home: Path, dense: bool) -> dict[str, str]:
    return {**os.environ, "TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "1" if dense else "0", "PYTHONPATH": str(ROOT), "TORCHHELP_LLM": "none"}


def test_manifest_records_a_checksum_per_file(small_kb: Path, dense_home: Path) -> None:
    manifest = json.loads((dense_home / "index" / "manifest.json").read_text())
    assert set(manifest["files"]) == {"chunks.json", "docs.json", "vectors.faiss", "lexical.json"}
    for name, record in manifest["files"].items():
        assert record["size"] == (dense_home / "index" / name).stat().st_size
        assert isinstance(record["crc32"], int)


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("name", FILES)
def test_damaged_file_is_rebuilt_with_a_note(name: str, how: str, small_kb: Path, dense_home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from assistant.kb.index import ensure_index
    from assistant.kb.retrieve import Retriever

    home = _copy_home(dense_home, tmp_path / "home")
    before = json.loads((home / "index" / "manifest.json").read_text()).get("build_id", "unknown")
    _damage(home / "index" / name, how)
    dense = name in ("vectors.faiss", "manifest.json")  # the others are checked the same way with or without vectors
    with caplog.at_level("WARNING", logger="assistant.kb.index"):
        loaded = ensure_index(home, dense=dense)
    assert loaded.manifest["build_id"] != before  # rebuilt
    if name == "manifest.json" and how == "delete":
        assert loaded.notes == ()  # no manifest reads as "never built": a plain first build
    else:
        assert len(loaded.notes) == 1 and "damaged" in loaded.notes[0], loaded.notes
        assert any("damaged" in r.getMessage() for r in caplog.records)
    hits = Retriever(loaded).search("CUDA out of memory tried to allocate", k=3, mode="hybrid")
    assert hits and hits[0].doc_id.startswith("cuda-oom")
    assert ensure_index(home, dense=dense).notes == ()  # repaired for good: the next load is quiet


@pytest.mark.parametrize("name", ["chunks.json", "vectors.faiss"])
def test_ask_after_damage_works_with_a_note(name: str, knowledge: Path, dense_home: Path, tmp_path: Path) -> None:
    home = _copy_home(dense_home, tmp_path / "home")
    _damage(home / "index" / name, "garbage")
    log = tmp_path / "error.log"
    log.write_text(CAPTURE["stderr"])
    res = subprocess.run([sys.executable, "-c", CLI_WITH_KNOWLEDGE, str(knowledge), "ask", "--json", str(log)],
                         capture_output=True, text=True, timeout=300, env=_env(home, dense=True))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["category"] == CAPTURE["category"]
    notes = [line for line in res.stderr.splitlines() if "damaged" in line]
    assert len(notes) == 1 and name in notes[0], res.stderr
    assert "internal error" not in res.stderr


def test_index_folder_replaced_by_a_file_is_rebuilt(small_kb: Path, tmp_path: Path) -> None:
    from assistant.kb.index import ensure_index

    home = tmp_path / "home"
    home.mkdir()
    (home / "index").write_text("not a folder")
    loaded = ensure_index(home, dense=False)
    assert loaded.chunks and (home / "index").is_dir()


def test_concurrent_first_builds_wait_for_one(knowledge: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", LOAD_AND_REPORT, str(knowledge), str(home), str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(home, dense=False)) for _ in range(10)]
    time.sleep(1.0)  # let every interpreter start and wait at the line
    go.touch()
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), [err for _, err in results if err]
    reports = [json.loads(out) for out, _ in results]
    assert len({r["build_id"] for r in reports}) == 1  # one build, everybody loaded it
    assert all(r["build_id"] and r["chunks"] > 0 for r in reports)
    assert sorted(p.name for p in home.iterdir()) == ["index", "index.lock"]  # no stray temp folders


def test_unwritable_home_falls_back_to_a_temp_home(small_kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.kb.index import ensure_index

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    home = blocker / "home"  # a file where a folder is expected: nothing can be created under it
    first = ensure_index(home, dense=False)
    assert first.chunks and len(first.notes) == 1 and "not writable" in first.notes[0]
    assert str(tmp_path / "tmp") in first.notes[0]
    again = ensure_index(home, dense=False)
    assert again.manifest["build_id"] == first.manifest["build_id"]  # the temp home is kept: built once


def test_no_writable_folder_at_all_gives_a_lexical_index_in_memory(small_kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from assistant.kb.index import ensure_index
    from assistant.kb.retrieve import Retriever

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("TMPDIR", str(blocker))
    monkeypatch.setattr(tempfile, "tempdir", str(blocker))
    loaded = ensure_index(blocker / "home", dense=True)
    assert not loaded.has_dense and loaded.manifest["in_memory"]
    assert any("in memory" in n for n in loaded.notes)
    assert Retriever(loaded).search("out of memory", k=1, mode="lexical")


def test_ask_with_an_unwritable_home_works_with_a_note(knowledge: Path, tmp_path: Path) -> None:
    """Knowledge the shipped index does not cover must be built: in the temp folder, with a note
    (with the shipped knowledge nothing is written at all: tests/test_shipped_index.py)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    log = tmp_path / "error.log"
    log.write_text(CAPTURE["stderr"])
    env = {**_env(blocker / "home", dense=False), "TMPDIR": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", CLI_WITH_KNOWLEDGE, str(knowledge), "ask", "--json", str(log)], capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["category"] == CAPTURE["category"]
    assert [line for line in res.stderr.splitlines() if "not writable" in line], res.stderr


def test_mode_0555_home_still_answers(small_kb: Path, tmp_path: Path) -> None:
    """Read-only by mode: root may still write (then the index is built in place), anyone else falls back."""
    from assistant.kb.index import ensure_index

    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o555)
    try:
        loaded = ensure_index(home, dense=False)
    finally:
        home.chmod(0o755)
    assert loaded.chunks
    if os.geteuid() != 0:
        assert loaded.notes and "not writable" in loaded.notes[0]


def _can_bind_read_only() -> bool:
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount --bind / /mnt && mount -o remount,ro,bind /mnt"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _can_bind_read_only(), reason="needs a private mount namespace (root with CAP_SYS_ADMIN)")
def test_read_only_mount_home_works_with_a_note(knowledge: Path, tmp_path: Path) -> None:
    """An empty home on a read-only file system (a bind mount in a private mount namespace), with
    knowledge the shipped index does not cover (so an index must be built somewhere)."""
    home = tmp_path / "home"
    home.mkdir()
    log = tmp_path / "error.log"
    log.write_text(CAPTURE["stderr"])
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = f'mount --bind "{home}" "{home}" && mount -o remount,ro,bind "{home}" && exec "{sys.executable}" -c "$CLI" "{knowledge}" ask --json "{log}"'
    res = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300, env={**_env(home, dense=False), "TMPDIR": str(tmp), "CLI": CLI_WITH_KNOWLEDGE})
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["category"] == CAPTURE["category"]
    notes = [line for line in res.stderr.splitlines() if "not writable" in line]
    assert len(notes) == 1 and "Read-only file system" in notes[0], res.stderr
    assert not any(home.iterdir())  # nothing was written into the read-only home
