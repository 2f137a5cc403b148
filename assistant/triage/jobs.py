"""Find the jobs under the paths a user gives: each immediate subdirectory is a job, each loose log file too.

A job directory may hold any layout (``slurm-<id>.out``, ``stdout.log``, ``rank_<N>.log``,
``attempt_<K>/`` subfolders, ``*.gz``); every log-like file below it belongs to the job. A loose
file directly in an input directory is a job of its own whose id is its name up to the first dot,
so ``1234.out`` and ``1234.err`` are one job.
"""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from assistant.errors import TriageError
from assistant.triage.model import JobSpec

# Files that are never logs: checkpoints, tensors, images, archives we do not unpack.
_NOT_LOGS = {
    ".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".npy", ".npz", ".pkl", ".pickle", ".h5", ".onnx",
    ".png", ".jpg", ".jpeg", ".gif", ".svg", ".pdf", ".zip", ".tar", ".tgz", ".whl", ".so", ".pyc",
    ".parquet", ".arrow", ".db", ".sqlite", ".lock",
}
_GLOB_CHARS = set("*?[")


def discover(paths: Sequence[str | os.PathLike[str]], notes: list[str] | None = None) -> list[JobSpec]:
    """Every job under ``paths`` (directories, files or globs), sorted by job id.

    Below an input directory, a symbolic link is followed only when it stays inside that directory and
    only regular files are read (no FIFO, device or socket); what is skipped is told in ``notes`` when
    given. Raises TriageError when a path does not exist or nothing at all is found.
    """
    specs: dict[str, JobSpec] = {}
    skipped = notes if notes is not None else []
    for root in _expand(paths):
        found = _jobs_in(root, skipped) if root.is_dir() else [_loose_job(root.parent, [root])]
        for spec in found:
            if spec is None:
                continue
            if spec.job_id in specs and specs[spec.job_id].root != spec.root:
                # The same id under two input directories: keep both, told apart by their folder.
                spec = JobSpec(f"{Path(spec.root).name}/{spec.job_id}", spec.root, spec.files)
            previous = specs.get(spec.job_id)
            if previous is not None:
                spec = JobSpec(spec.job_id, spec.root, tuple(sorted(set(previous.files) | set(spec.files))))
            specs[spec.job_id] = spec
    if not specs:
        raise TriageError("no job logs found under " + ", ".join(str(p) for p in paths))
    return [specs[k] for k in sorted(specs)]


def job_of_folder(folder: str | os.PathLike[str], notes: list[str] | None = None) -> JobSpec:
    """One job made of every log file below ``folder`` (``ask`` on a job's folder: per-rank files, attempts)."""
    path = Path(folder).expanduser()
    files = _files_below(path, path, notes if notes is not None else [])
    if not files:
        raise TriageError(f"no log files under {path}")
    return JobSpec(path.name, str(path), tuple(str(f) for f in files))


def job_id_for_file(name: str) -> str:
    """The id of a loose log file: its name up to the first dot (the whole name if it starts with one)."""
    head = name.split(".", 1)[0]
    return head or name


def is_log_file(path: Path) -> bool:
    """Whether a file may hold log text (by name; content is sniffed later)."""
    if path.name.startswith("."):
        return False
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return not (suffixes and suffixes[-1] in _NOT_LOGS)


def _expand(paths: Sequence[str | os.PathLike[str]]) -> Iterable[Path]:
    for raw in paths:
        text = os.fspath(raw)
        path = Path(text).expanduser()
        if path.exists():
            yield path
            continue
        if _GLOB_CHARS & set(text):
            matches = sorted(glob.glob(os.path.expanduser(text)))
            if not matches:
                raise TriageError(f"no files match {text}")
            for m in matches:
                yield Path(m)
            continue
        raise TriageError(f"no such file or directory: {text}")


def inside(path: Path, root: Path) -> bool:
    """Whether ``path``, every link in it resolved, stays inside ``root`` (resolved too)."""
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):  # a link loop, a vanished file
        return False


def regular_file(path: Path, root: Path, notes: list[str]) -> bool:
    """Whether ``path`` is a regular file to read: inside ``root`` once links are resolved, and no FIFO,
    device or socket (those hang a reader or never end). A skipped path adds a note."""
    shown = path.relative_to(root) if path.is_relative_to(root) else path.name
    if path.is_symlink() and not inside(path, root):
        notes.append(f"{shown}: a link that points outside {root.name or root}, skipped")
        return False
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    if not stat.S_ISREG(mode):
        if not stat.S_ISDIR(mode):
            notes.append(f"{shown}: not a regular file (a FIFO, device or socket), skipped")
        return False
    return True


def _jobs_in(directory: Path, notes: list[str]) -> list[JobSpec | None]:
    try:
        entries = sorted(directory.iterdir())
    except OSError as exc:
        raise TriageError(f"cannot list {directory}: {exc.strerror or exc}") from None
    loose: dict[str, list[Path]] = {}
    jobs: list[JobSpec | None] = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_symlink() and not inside(entry, directory):
            notes.append(f"{entry.name}: a link that points outside {directory.name or directory}, skipped")
            continue
        if entry.is_dir():
            files = _files_below(entry, directory, notes)
            if files:
                jobs.append(JobSpec(entry.name, str(entry), tuple(str(f) for f in files)))
        elif is_log_file(entry) and regular_file(entry, directory, notes):
            loose.setdefault(job_id_for_file(entry.name), []).append(entry)
    for job_id in sorted(loose):
        jobs.append(_loose_job(directory, loose[job_id]))
    return jobs


def _loose_job(directory: Path, files: list[Path]) -> JobSpec | None:
    if not files:
        return None
    return JobSpec(job_id_for_file(files[0].name), str(directory), tuple(sorted(str(f) for f in files)))


def _files_below(job_dir: Path, root: Path, notes: list[str]) -> list[Path]:
    """The log files below ``job_dir``: regular files whose links stay inside ``root`` (links to folders are not walked)."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(job_dir):  # followlinks=False: a linked folder is listed, never entered
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if is_log_file(path) and regular_file(path, root, notes):
                found.append(path)
    return found
