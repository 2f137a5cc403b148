"""Run the per-job extraction serially, on local processes, or as Ray tasks: same reports every way.

``extract_job`` is a pure function of a job's files (picklable in and out), so where it runs
cannot change what it returns; this module only decides where, and hands the reports back sorted
by job id so that grouping (which depends on the order jobs are added) is identical too.

A job whose extraction raises
-----------------------------
``extract_job`` itself never raises on bad content (unreadable files are noted and skipped). An
exception reaching this module is therefore our bug, or a worker that died (killed by the OOM
killer, a Ray node lost). Such a job becomes a report with status ``failed``, category
``unknown``, reason ``unreadable`` and a note saying why, never a ``succeeded`` one: calling it
succeeded would hide a job nobody has looked at, and dropping it would make the job count lie.
As a failed job of its own kind it lands in a group of its own ("torchhelp could not read ...",
grouped by the exception type), which the user sees, instead of silently merging with real
failures. The run as a whole carries on.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from assistant.errors import TriageError
from assistant.triage.model import FAILED, JobReport, JobSpec

log = logging.getLogger(__name__)

ENGINES = ("local", "ray")
UNREADABLE = "unreadable"  # the `reason` of a job whose extraction failed
_CHUNKS_PER_WORKER = 4  # enough chunks to balance uneven jobs, few enough to keep pickling cheap
_MAX_CHUNK = 16


def extract_all(
    specs: Sequence[JobSpec],
    *,
    engine: str = "local",
    jobs: int = 1,
    ray_address: str | None = None,
    options: Any = None,
    on_job: Callable[[JobReport], None] | None = None,
) -> list[JobReport]:
    """Extract every job; the reports come back sorted by job id whatever the engine.

    ``engine="local"`` runs serially with ``jobs=1``, on a process pool of ``jobs`` workers otherwise, and with
    ``jobs=0`` on one worker per CPU (serially below :data:`POOL_MIN_JOBS` jobs); ``engine="ray"`` runs one Ray task per job on the cluster at ``ray_address`` (a
    local Ray instance when None, limited to ``jobs`` CPUs when ``jobs > 1``). ``on_job`` is called
    in this process as each report arrives (completion order), e.g. to advance a progress bar.
    ``options`` is the ``ExtractOptions`` passed through to ``extract_job``.
    """
    if engine not in ENGINES:
        raise TriageError(f"unknown triage engine {engine!r} (choose from {', '.join(ENGINES)})")
    if jobs < 0:
        raise TriageError(f"--jobs must be 0 (one per CPU) or more, not {jobs}")
    specs = list(specs)
    if jobs == 0:
        jobs = auto_jobs(len(specs)) if engine == "local" else 1
    if engine == "ray":
        reports = _run_ray(specs, jobs=jobs, address=ray_address, options=options, on_job=on_job)
    elif jobs == 1 or len(specs) <= 1:
        reports = _run_serial(specs, options, on_job)
    else:
        reports = _run_pool(specs, jobs=jobs, options=options, on_job=on_job)
    return sorted(reports, key=lambda r: r.job_id)


# A process pool costs a few hundred milliseconds to start: below this many jobs one process is faster.
POOL_MIN_JOBS = 200


def auto_jobs(n_specs: int) -> int:
    """Worker processes for ``jobs=0``: one per CPU this process may use, or one for a small folder."""
    import os

    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return 1 if n_specs < POOL_MIN_JOBS else max(1, min(cpus, 16))


# -- the one function every engine runs -----------------------------------------------------


def safe_extract(spec: JobSpec, options: Any = None) -> JobReport:
    """``extract_job(spec, options)``, or an ``unreadable`` failed report when it raises (see module doc)."""
    from assistant.triage.extract import Cancelled, extract_job

    try:
        return extract_job(spec, options)
    except Cancelled:
        raise  # the caller asked to stop: not a job that could not be read
    except Exception as exc:  # never KeyboardInterrupt: Ctrl-C must still stop the run
        log.warning("could not read job %s: %s: %s", spec.job_id, type(exc).__name__, exc)
        return unreadable_report(spec, f"{type(exc).__name__}: {exc}")


def unreadable_report(spec: JobSpec, why: str) -> JobReport:
    """The failed ``unknown`` report of a job torchhelp could not read (status never ``succeeded``)."""
    kind = why.split(":", 1)[0]
    return JobReport(
        job_id=spec.job_id,
        files=tuple(_relative(f, spec.root) for f in spec.files),
        status=FAILED,
        category="unknown",
        title="torchhelp could not read this job's logs",
        reason=UNREADABLE,
        # the grouper fingerprints the headline: one group per kind of failure, the detail is in notes
        headline=f"torchhelp could not read the logs of this job: {kind}",
        failure_text=f"torchhelp could not read the logs of this job: {kind}",
        size_bytes=_size(spec.files),
        notes=(f"could not read: {why}"[:1000], "status set to failed (category unknown) so the job is not hidden; its real outcome is not known"),
    )


def _relative(path: str, root: str) -> str:
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return Path(path).name


def _size(files: Iterable[str]) -> int:
    total = 0
    for f in files:
        try:
            total += os.stat(f).st_size
        except OSError:
            pass
    return total


# -- local ------------------------------------------------------------------------------------


def _run_serial(specs: Sequence[JobSpec], options: Any, on_job: Callable[[JobReport], None] | None) -> list[JobReport]:
    reports = []
    for spec in specs:
        report = safe_extract(spec, options)
        reports.append(report)
        if on_job is not None:
            on_job(report)
    return reports


def _extract_chunk(chunk: list[JobSpec], options: Any) -> list[JobReport]:
    """Worker entry point (module level, so spawn and forkserver workers can import it)."""
    return [safe_extract(spec, options) for spec in chunk]


def chunk_specs(specs: Sequence[JobSpec], workers: int) -> list[list[JobSpec]]:
    """Chunks for the pool: biggest jobs first (so one 2 GB log does not start last and finish
    alone), each chunk at most ``_MAX_CHUNK`` jobs and about total/(workers*4) bytes."""
    sized = sorted(((_size(s.files), s) for s in specs), key=lambda p: (-p[0], p[1].job_id))
    total = sum(size for size, _ in sized)
    target = max(1, total // (workers * _CHUNKS_PER_WORKER))
    max_jobs = max(1, min(_MAX_CHUNK, math.ceil(len(specs) / (workers * _CHUNKS_PER_WORKER))))
    chunks: list[list[JobSpec]] = []
    current: list[JobSpec] = []
    current_bytes = 0
    for size, spec in sized:
        if current and (len(current) >= max_jobs or current_bytes + size > target):
            chunks.append(current)
            current, current_bytes = [], 0
        current.append(spec)
        current_bytes += size
    if current:
        chunks.append(current)
    return chunks


def _mp_context() -> Any:
    """forkserver where there is one (no fork of a process that may hold threads: the watcher, Ray,
    a progress bar), spawn elsewhere. Workers import the extractor once, up front."""
    import multiprocessing

    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["assistant.triage.distribute", "assistant.triage.extract"])
        return ctx
    return multiprocessing.get_context("spawn")


def _run_pool(specs: Sequence[JobSpec], *, jobs: int, options: Any, on_job: Callable[[JobReport], None] | None) -> list[JobReport]:
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    chunks = chunk_specs(specs, jobs)
    reports: list[JobReport] = []
    left: list[JobSpec] = []
    workers = min(jobs, len(chunks))
    with ProcessPoolExecutor(max_workers=workers, mp_context=_mp_context()) as pool:
        futures = {pool.submit(_extract_chunk, chunk, options): chunk for chunk in chunks}
        try:
            for future in as_completed(futures):
                try:
                    done = future.result()
                except BrokenProcessPool:
                    # A worker died (OOM killer, a crash in C code): every unfinished chunk fails with it.
                    left.extend(futures[future])
                    continue
                except Exception as exc:  # pickling trouble and the like: read those jobs here instead
                    log.warning("a triage worker failed (%s: %s); reading its jobs in the main process", type(exc).__name__, exc)
                    left.extend(futures[future])
                    continue
                reports.extend(done)
                if on_job is not None:
                    for report in done:
                        on_job(report)
        except BaseException:  # Ctrl-C: drop queued chunks instead of waiting for them all
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    if left:
        # A dead worker costs speed, never results: the same function runs here, one job at a time.
        log.warning("a triage worker died; reading %d job(s) in the main process", len(left))
        reports.extend(_run_serial(sorted(left, key=lambda s: s.job_id), options, on_job))
    return reports


# -- Ray ----------------------------------------------------------------------------------------


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise TriageError("the ray engine needs `pip install torchhelp[ray]`") from None
    return ray


def _run_ray(specs: Sequence[JobSpec], *, jobs: int, address: str | None, options: Any,
             on_job: Callable[[JobReport], None] | None) -> list[JobReport]:
    """One Ray task per job. Workers read the files by the same absolute paths, so a remote cluster
    needs the logs on a shared filesystem and torchhelp installed on its nodes."""
    ray = _import_ray()
    started = False
    if not ray.is_initialized():
        # quiet: no dashboard, no worker output in our terminal, no INFO lines over the progress bar
        kwargs: dict[str, Any] = {"ignore_reinit_error": True, "include_dashboard": False, "log_to_driver": False,
                                  "logging_level": logging.WARNING}
        if address:
            kwargs["address"] = address
        elif jobs > 1:
            kwargs["num_cpus"] = jobs
        try:
            ray.init(**kwargs)
        except Exception as exc:  # ConnectionError, RuntimeError, ValueError from a bad address
            raise TriageError(f"cannot start Ray{' at ' + address if address else ''}: {type(exc).__name__}: {exc}") from None
        started = True
    try:
        remote = ray.remote(num_cpus=1, max_retries=2)(safe_extract)
        opts_ref = ray.put(options)
        refs = {remote.remote(spec, opts_ref): spec for spec in specs}
        reports: list[JobReport] = []
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=0.2)
            for ref in ready:
                try:
                    report = ray.get(ref)
                except ray.exceptions.RayError as exc:  # the task's worker or node died, after Ray's own retries
                    report = unreadable_report(refs[ref], f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                reports.append(report)
                if on_job is not None:
                    on_job(report)
        return reports
    finally:
        if started:
            ray.shutdown()
