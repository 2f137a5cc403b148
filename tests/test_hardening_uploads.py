"""Issue 23: triage uploads, job folders and log reading, each on a real run.

The server is a real `torchhelp serve` on loopback; archives are built here with tarfile, gzip, bz2
and zipfile; job folders hold real symlinks, a real FIFO and a NUL-padded log; `torchhelp triage`
runs as a child process whose CPU time and peak memory are measured.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "eval" / "captured" / "cpu" / "lenet-view-cross-entropy-batch-mismatch.json"
MAX_BODY_MB = 1  # the server's body limit: archives may expand to 10 MiB
TIMEOUT_S = 3


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TORCHHELP_SERVE_TOKEN"}
    env.update(TORCHHELP_HOME=str(home), TORCHHELP_LLM="none", TORCHHELP_DENSE="0", COLUMNS="200", NO_COLOR="1")
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _traceback() -> str:
    return json.loads(CAPTURE.read_text())["stderr"]


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _hwm_mb(pid: int) -> float:
    """Peak resident memory of a live process, MB (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Server:
    def __init__(self, url: str, proc: subprocess.Popen[str]) -> None:
        self.url = url
        self.proc = proc


def _start_server(home: Path, timeout_s: float) -> Server:
    """A real `torchhelp serve` (no token, no LLM, 1 MiB bodies, ``timeout_s`` deadline) on loopback, once ready."""
    import httpx

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "assistant", "serve", "--port", str(port), "--max-body-mb", str(MAX_BODY_MB),
                             "--timeout-s", str(timeout_s), "--log-level", "warning"],
                            env=_env(home), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return Server(url, proc)
        except httpx.HTTPError:
            pass
        if time.time() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.fail(f"the server did not become ready: {proc.stderr.read() if proc.poll() is not None and proc.stderr else 'timeout'}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The server most tests post to (3 s deadline)."""
    pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    srv = _start_server(tmp_path_factory.mktemp("home"), TIMEOUT_S)
    try:
        yield srv
    finally:
        srv.proc.terminate()
        srv.proc.wait(timeout=30)


def _post(server: Server, name: str, data: bytes) -> tuple[int, dict]:
    import httpx

    r = httpx.post(f"{server.url}/v1/triage", files={"file": (name, data, "application/octet-stream")}, timeout=60)
    return r.status_code, r.json()


def _header(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    info.type = kind
    return info.tobuf(format=tarfile.GNU_FORMAT)


def _long_header_tar_bz2(kind: bytes, size: int) -> bytes:
    """A .tar.bz2 whose first entry is a GNU long-name (or PAX) header of ``size`` bytes, then one small log."""
    comp = bz2.BZ2Compressor(9)
    out = [comp.compress(_header("././@LongLink", size, kind))]
    body = b"%d path=" % size if kind == tarfile.XHDTYPE else b""
    block = b"a" * (1 << 20)
    out.append(comp.compress(body))
    left = size - len(body)
    while left > 0:
        out.append(comp.compress(block[:min(left, len(block))]))
        left -= len(block)
    out.append(comp.compress(b"\0" * (-size % 512)))
    log = _traceback().encode()
    out.append(comp.compress(_header("job_a/stdout.log", len(log)) + log + b"\0" * (-len(log) % 512) + b"\0" * 1024))
    out.append(comp.flush())
    return b"".join(out)


@pytest.mark.parametrize("kind", [tarfile.GNUTYPE_LONGNAME, tarfile.XHDTYPE], ids=["gnu-longname", "pax"])
def test_long_name_headers_count_against_the_cap(server: Server, kind: bytes) -> None:
    data = _long_header_tar_bz2(kind, 96 << 20)
    assert len(data) < 4096  # a few KB on the wire
    before = _hwm_mb(server.proc.pid)
    status, body = _post(server, "jobs.tar.bz2", data)
    assert status == 413, body
    assert "expands to more than" in body["error"]["message"]
    assert _hwm_mb(server.proc.pid) - before < 60  # the 96 MiB name was never held


def _gzip_bomb(total_mb: int) -> bytes:
    """A multi-member gzip of ``total_mb`` MiB of zeros (valid gzip: readers concatenate members), about 1 KB per MiB."""
    one = gzip.compress(b"\0" * (1 << 20), 9)
    return one * total_mb


def _tar_gz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_compressed_member_inflation_is_capped(server: Server) -> None:
    # A tar.gz (one layer) holding rank0.log.gz (a second layer) that inflates to 8 GiB: within the old cap on the wire.
    data = _tar_gz({"job_a/rank0.log.gz": _gzip_bomb(8192), "job_a/stdout.log": _traceback().encode()})
    assert len(data) < 200_000
    cpu = _cpu_s(server.proc.pid)
    started = time.monotonic()
    status, body = _post(server, "jobs.tar.gz", data)
    assert status == 413, body
    assert time.monotonic() - started < TIMEOUT_S
    assert _cpu_s(server.proc.pid) - cpu < 2.0


def test_gzip_inside_gzip_is_refused(server: Server) -> None:
    inner = gzip.compress(_tar_gz({"job_a/stdout.log": _traceback().encode()}))
    status, body = _post(server, "jobs.tar.gz", gzip.compress(inner))
    assert status == 422, body
    assert "compression inside compression" in body["error"]["message"]
    member = gzip.compress(gzip.compress(_traceback().encode()))
    status, body = _post(server, "jobs.tar", _plain_tar({"job_a/stdout.log.gz": member}))
    assert status == 422, body


def _plain_tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_tar_ending_in_a_zip_is_read_as_a_tar(server: Server) -> None:
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("smuggled/stdout.log", "Traceback (most recent call last):\nRuntimeError: smuggled through the zip\n")
    tar = _plain_tar({"job_a/stdout.log": _traceback().encode()})
    # The zip's bytes end the upload (a tar read to its end markers, then a zip's end record after them).
    status, body = _post(server, "jobs.tar", tar + z.getvalue())
    assert status == 200, body
    assert [row["job_id"] for row in body["jobs"]] == ["job_a"]
    assert body["jobs"][0]["category"] == "shape_mismatch"
    assert "smuggled" not in json.dumps(body)
    # Named like a zip, but a tar by its first bytes: still a tar.
    status, body = _post(server, "logs.zip", tar)
    assert status == 200 and [row["job_id"] for row in body["jobs"]] == ["job_a"], body


def test_work_behind_a_timed_out_upload_stops(server: Server) -> None:
    # Many small jobs (9.2 MB unpacked, under the 10 MiB cap): unpacked in about a second, then triaged for
    # several (7.5 s here before the fix), far past the 3 s deadline: the 504 comes while jobs are being read.
    log = _traceback().encode()
    data = _tar_gz({f"job_{i:05d}/stdout.log": log.replace(b"(25)", b"(%d)" % i) for i in range(6000)})
    assert len(data) < (MAX_BODY_MB << 20)
    status, body = _post(server, "jobs.tar.gz", data)
    assert status == 504, body
    time.sleep(2.0)  # the work must stop within 2 s of the 504
    cpu = _cpu_s(server.proc.pid)
    time.sleep(1.5)
    assert _cpu_s(server.proc.pid) - cpu < 0.3  # idle: nothing left running behind the abandoned request


def test_grouping_and_diagnosis_behind_a_timed_out_upload_stop(tmp_path: Path) -> None:
    # 3,000 jobs that are each their own group (the user's frame differs: file and source line), so each needs
    # its own diagnosis. On this server (8 s deadline) unpacking and reading take about 5 s, grouping and
    # diagnosing about 12 s more (4 ms a group): the 504 comes while build_result runs, after the last check
    # of the reading phase. Before the fix the server then kept diagnosing for about 10 s.
    pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    log = _traceback()
    where, line = "/tmp/torchhelp-case-0truduvp/job/repro.py", "criterion(outputs, targets)"
    assert where in log and line in log

    def job(i: int) -> bytes:
        code = "".join("abcdefghijklmnopqrstuvwxyz"[(i // 26**k) % 26] for k in range(3))
        return log.replace(where, f"/work/exp/train_{code}.py").replace(line, f"criterion_{code}(outputs, targets)").encode()

    data = _tar_gz({f"job_{i:05d}/stdout.log": job(i) for i in range(3000)})
    assert len(data) < (MAX_BODY_MB << 20)
    server = _start_server(tmp_path / "home", 8)
    try:
        status, body = _post(server, "jobs.tar.gz", data)
        assert status == 504, body
        time.sleep(2.0)  # the work must stop within 2 s of the 504
        cpu = _cpu_s(server.proc.pid)
        time.sleep(1.5)
        assert _cpu_s(server.proc.pid) - cpu < 0.3  # idle: no group is diagnosed for the abandoned request
    finally:
        server.proc.terminate()
        server.proc.wait(timeout=30)


# -- the CLI's reading of job folders ----------------------------------------------------------------


def _triage(folder: Path, home: Path, *args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """`torchhelp triage` as a child of a small wrapper: its result, CPU seconds and peak RSS in MB (ru_maxrss)."""
    wrapper = (
        "import resource, subprocess, sys, json\n"
        "lim = 6 << 30\n"
        "def cap(): resource.setrlimit(resource.RLIMIT_AS, (lim, lim))\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True, preexec_fn=cap)\n"
        "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(json.dumps({'rc': p.returncode, 'out': p.stdout, 'err': p.stderr, 'cpu': u.ru_utime + u.ru_stime, 'rss': u.ru_maxrss / 1024}))\n"
    )
    cmd = [sys.executable, "-c", wrapper, sys.executable, "-m", "assistant", "triage", str(folder), "--jobs", "1", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(home), cwd=ROOT)
    got = json.loads(done.stdout)
    return subprocess.CompletedProcess(cmd, got["rc"], got["out"], got["err"]), got["cpu"], got["rss"]


def test_memory_is_flat_in_files_per_job(tmp_path: Path) -> None:
    # 3,000 per-rank files of 1.4 MB each (hard links of one file: 4 GB of logs, no disk), the failure in rank 1's.
    job = tmp_path / "logs" / "job_9000"
    job.mkdir(parents=True)
    progress = "".join(f"step {i} loss 0.{i % 97:02d} lr 3e-4 tokens/s 123456\n" for i in range(30_000)).encode()
    base = tmp_path / "base.log"
    base.write_bytes(progress)
    for rank in range(3000):
        if rank != 1:
            os.link(base, job / f"rank_{rank}.log")
    (job / "rank_1.log").write_bytes(progress + _traceback().encode())
    out = tmp_path / "jobs.jsonl"
    done, cpu, rss = _triage(tmp_path / "logs", tmp_path / "home", "--jsonl", str(out))
    assert done.returncode in (0, 1), done.stderr
    row = json.loads(out.read_text().splitlines()[0])
    assert row["status"] == "failed" and row["category"] == "shape_mismatch", row
    assert rss <= 300, f"peak RSS {rss:.0f} MB for 3,000 files"
    print(f"3,000 files x 1.4 MB: peak RSS {rss:.0f} MB, {cpu:.1f} CPU s")


def test_links_out_fifos_devices_and_nul_padding(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "stdout.log").write_text("Traceback (most recent call last):\nRuntimeError: SECRET-OUTSIDE-THE-ROOT\n")
    logs.mkdir()
    (logs / "job_link").symlink_to(outside, target_is_directory=True)  # a job folder that points elsewhere
    (logs / "job_files").mkdir()
    (logs / "job_files" / "stdout.log").write_text("step 1 loss 0.5\n")
    (logs / "job_files" / "rank_1.log").symlink_to(outside / "stdout.log")  # a file that points elsewhere
    (logs / "job_files" / "rank_2.log").symlink_to("/dev/zero")
    (logs / "job_fifo").mkdir()
    os.mkfifo(logs / "job_fifo" / "stdout.log")  # nobody writes to it
    (logs / "job_fifo" / "stderr.log").write_text("step 1 loss 0.5\n")
    (logs / "job_nul").mkdir()
    (logs / "job_nul" / "stdout.log").write_bytes(b"\0" * (3 << 20) + _traceback().encode())  # a preallocated log
    out = tmp_path / "jobs.jsonl"
    done, cpu, rss = _triage(logs, tmp_path / "home", "--jsonl", str(out), timeout=60)
    assert done.returncode in (0, 1), done.stderr
    rows = {r["job_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert "SECRET-OUTSIDE-THE-ROOT" not in done.stdout + out.read_text()
    assert "job_link" not in rows
    assert rows["job_files"]["files"] == ["stdout.log"] and rows["job_files"]["status"] == "succeeded"
    assert rows["job_fifo"]["files"] == ["stderr.log"]
    assert rows["job_nul"]["status"] == "failed" and rows["job_nul"]["category"] == "shape_mismatch", rows["job_nul"]
    assert "points outside" in done.stdout and "not a regular file" in done.stdout
    assert cpu < 30 and rss < 600


def test_gzip_log_inflation_has_a_ceiling(tmp_path: Path) -> None:
    job = tmp_path / "logs" / "job_1"
    job.mkdir(parents=True)
    (job / "stdout.log.gz").write_bytes(_gzip_bomb(6000) + gzip.compress(_traceback().encode()))  # 6 MB -> 6 GB
    out = tmp_path / "jobs.jsonl"
    done, cpu, rss = _triage(tmp_path / "logs", tmp_path / "home", "--jsonl", str(out))
    assert done.returncode in (0, 1), done.stderr
    # The ceiling keeps this at about 7-9 CPU s on a 2-core machine (measured 7.2-8.8 s at this stop's code and at the
    # previous stop's, so 8 s was inside the noise); inflating the whole 6 GB takes far longer, so 15 s still catches it.
    assert cpu < 15, f"{cpu:.1f} CPU s"
    from assistant.triage.extract import extract_job
    from assistant.triage.jobs import job_of_folder

    assert any("ceiling" in n for n in extract_job(job_of_folder(job)).notes)
    # A log under the ceiling is still read to its end, its tail kept (the streaming reader is unchanged).
    small = tmp_path / "small" / "job_2"
    small.mkdir(parents=True)
    (small / "stdout.log.gz").write_bytes(_gzip_bomb(20) + gzip.compress(_traceback().encode()))
    done, cpu, rss = _triage(tmp_path / "small", tmp_path / "home", "--jsonl", str(out))
    row = json.loads(out.read_text().splitlines()[0])
    assert row["status"] == "failed" and row["category"] == "shape_mismatch", row


def test_reading_stops_when_asked() -> None:
    from assistant.triage.reading import ReadCancelled, read_file

    path = Path("/tmp") / f"th-h23a-stop-{os.getpid()}.log.gz"
    path.write_bytes(_gzip_bomb(64))
    try:
        with pytest.raises(ReadCancelled):
            read_file(str(path), 0, stop=lambda: True)
    finally:
        path.unlink()

