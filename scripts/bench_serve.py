#!/usr/bin/env python3
"""Benchmark `torchhelp serve`: a bounded load test of POST /v1/diagnose on loopback, no LLM.

For each worker count (default 1 and 2) a real server is started in a subprocess
(`python -m assistant serve --port P --workers N --llm none`), waited for (/readyz), warmed, then
hit by N concurrent keep-alive clients (asyncio + httpx.AsyncClient) for a fixed time, cycling over
the real captured tracebacks (eval/captured/*/*.json `stderr`). Reported: requests/s, p50/p90/p99
latency, errors (must be 0), CPU seconds used by the server processes and by the load generator
(it runs on the same cores), and the in-process `Engine.diagnose()` throughput on the same texts,
single thread, measured in the same run, with the ratio server / in-process.

Dense retrieval stays on (the server's default) unless the embedding model cannot be loaded; the
result says which. The knowledge index is built once into a private TORCHHELP_HOME first.

    python scripts/bench_serve.py [--duration 20] [--clients 32] [--workers 1 2] [--out benchmarks/serve.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = {"requests_per_s": 300.0, "p99_ms": 50.0, "errors": 0}


def _percentile(values: list[float], pct: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * pct / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load_texts() -> list[str]:
    """The stderr of every real captured failure (CPU, CUDA and multi-GPU captures)."""
    from assistant.eval.reproduce import load_captures

    texts = [c["stderr"] for c in load_captures(ROOT / "eval" / "captured") if c.get("stderr", "").strip()]
    if not texts:
        raise SystemExit("no captured tracebacks under eval/captured")
    return texts


def prepare_index(home: Path, want_dense: bool) -> tuple[bool, str]:
    """Build (or load) the index in `home`; (dense used, why not when it is not)."""
    from assistant.engine import Engine
    from assistant.errors import TorchhelpError
    from assistant.settings import load_settings

    env = {"TORCHHELP_HOME": str(home)}
    if want_dense:
        try:
            Engine(load_settings(env=env, llm="none", dense=True)).retriever()
            return True, "dense retrieval on (server default; query embedded only when no confident rule fired)"
        except (TorchhelpError, ImportError, OSError) as exc:  # the embedding model or FAISS is missing
            reason = f"dense model unavailable ({exc}); TORCHHELP_DENSE=0 for server and in-process"
    else:
        reason = "dense retrieval off (--no-dense)"
    Engine(load_settings(env=env, llm="none", dense=False)).retriever()
    return False, reason


def in_process(texts: list[str], home: Path, dense: bool, seconds: float) -> dict[str, Any]:
    """`Engine.diagnose()` on the same texts, one thread, after one warm-up pass."""
    from assistant.engine import Engine
    from assistant.settings import load_settings

    engine = Engine(load_settings(env={"TORCHHELP_HOME": str(home)}, llm="none", dense=dense))
    for text in texts:  # load the index/encoder, fill any lazy caches
        engine.diagnose(text)
    times: list[float] = []
    cpu0, start = time.process_time(), time.perf_counter()
    i = 0
    while time.perf_counter() - start < seconds or i < len(texts):
        t0 = time.perf_counter()
        engine.diagnose(texts[i % len(texts)])
        times.append(time.perf_counter() - t0)
        i += 1
    wall = time.perf_counter() - start
    return {
        "diagnoses": i,
        "seconds": round(wall, 2),
        "per_s": round(i / wall, 1),
        "cpu_s": round(time.process_time() - cpu0, 2),
        "p50_ms": round(_percentile(times, 50) * 1000, 2),
        "p90_ms": round(_percentile(times, 90) * 1000, 2),
        "p99_ms": round(_percentile(times, 99) * 1000, 2),
    }


# -- the server -----------------------------------------------------------------------------------


def _tree_cpu(pid: int) -> float:
    """User+system CPU seconds of a process and its children (uvicorn workers are children)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def server_command(port: int, workers: int, env: dict[str, str], factory: str | None = None) -> list[str]:
    """`python -m assistant serve ...` when the CLI has the command, else the serve module's own entry point.

    With ``factory`` ("module:function", importable through PYTHONPATH): uvicorn's own CLI on that
    app factory, configured like `serve` through ServeConfig's environment (to measure a patch).
    """
    if factory:
        from assistant.serve.config import ServeConfig

        env.update(ServeConfig(host="127.0.0.1", port=port, workers=workers, llm="none").to_env())
        return [sys.executable, "-m", "uvicorn", "--factory", factory, "--host", "127.0.0.1", "--port", str(port),
                "--workers", str(workers), "--log-level", "warning", "--no-access-log"]
    cli = [sys.executable, "-m", "assistant", "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers), "--llm", "none",
           "--log-level", "warning", "--no-access-log"]
    probe = subprocess.run([*cli[:4], "--help"], env=env, capture_output=True, timeout=120)
    if probe.returncode == 0:
        return cli
    code = ("from assistant.serve.cli import build_config, run_server; "
            f"run_server(build_config(host='127.0.0.1', port={port}, workers={workers}, llm='none'), log_level='warning', access_log=False)")
    return [sys.executable, "-c", code]


class Server:
    """`python -m assistant serve` in a subprocess on a free loopback port."""

    def __init__(self, workers: int, home: Path, dense: bool, factory: str | None = None, cpus: set[int] | None = None) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "TORCHHELP_HOME": str(home), "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))}
        env.pop("TORCHHELP_SERVE_TOKEN", None)  # loopback, no token: auth is not what is measured
        env["TORCHHELP_DENSE"] = "1" if dense else "0"
        env.setdefault("OPENBLAS_NUM_THREADS", "1")  # one BLAS thread per worker: 2 cores, many requests
        cmd = server_command(self.port, workers, env, factory)
        self.cmd = cmd
        self.log = tempfile.TemporaryFile()
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None  # inherited by uvicorn's worker processes
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=pin)

    def wait_ready(self, workers: int, timeout: float = 180.0) -> float:
        """Seconds until /readyz said 200 four times per worker in a row (any worker may answer a probe)."""
        import httpx

        start = time.perf_counter()
        streak = 0
        while time.perf_counter() - start < timeout:
            if self.proc.poll() is not None:
                raise SystemExit(f"server exited with {self.proc.returncode}:\n{self.output()}")
            try:
                streak = streak + 1 if httpx.get(self.url + "/readyz", timeout=5).status_code == 200 else 0
            except httpx.HTTPError:
                streak = 0
            if streak >= 4 * workers:
                return time.perf_counter() - start
            time.sleep(0.05 if streak else 0.2)
        self.stop()
        raise SystemExit(f"server not ready after {timeout} s:\n{self.output()}")

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")[-4000:]

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # graceful shutdown of the master and its workers
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


# -- the load generator --------------------------------------------------------------------------


async def _load(url: str, bodies: list[bytes], clients: int, seconds: float, rate: float | None = None) -> dict[str, Any]:
    """Closed loop (rate None): `clients` keep-alive connections posting back to back for `seconds`.

    Open loop (rate R): requests are sent on a fixed schedule of R per second over at most `clients`
    connections, and each latency is measured from its scheduled time (so a stalled server or client
    cannot hide its backlog: no coordinated omission).

    Each client is its own httpx.AsyncClient holding one keep-alive connection: one client with a
    32-connection pool spends most of its CPU scanning that pool on every request (httpcore's
    connection assignment is linear in connections x waiting requests), which starves the server.
    """
    import httpx

    latencies: list[float] = []
    errors: dict[str, int] = {}
    headers = {"Content-Type": "application/json"}
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    tls = ssl.create_default_context()  # unused on http://, but each client would load the CA bundle again
    pool = [httpx.AsyncClient(base_url=url, limits=limits, timeout=httpx.Timeout(30.0), verify=tls) for _ in range(clients)]

    async def post(client: httpx.AsyncClient, body: bytes, t0: float) -> None:
        try:
            r = await client.post("/v1/diagnose", content=body, headers=headers)
            key = None if r.status_code == 200 and r.content[:1] == b"{" else f"HTTP {r.status_code}"
        except httpx.HTTPError as exc:
            key = type(exc).__name__
        if key is None:
            latencies.append(time.perf_counter() - t0)
        else:
            errors[key] = errors.get(key, 0) + 1

    try:
        start = time.perf_counter()
        deadline = start + seconds
        if rate is None:

            async def closed(k: int) -> None:
                i = k * 7  # clients start at different texts
                while time.perf_counter() < deadline:
                    await post(pool[k], bodies[i % len(bodies)], time.perf_counter())
                    i += 1

            await asyncio.gather(*(closed(k) for k in range(clients)))
        else:
            free: asyncio.Queue[httpx.AsyncClient] = asyncio.Queue()
            for c in pool:
                free.put_nowait(c)

            async def scheduled(i: int) -> None:
                due = start + i / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                client = await free.get()  # all connections busy: the request waits, and that wait counts
                try:
                    await post(client, bodies[i % len(bodies)], due)
                finally:
                    free.put_nowait(client)

            await asyncio.gather(*(scheduled(i) for i in range(int(seconds * rate))))
        wall = time.perf_counter() - start
    finally:
        await asyncio.gather(*(c.aclose() for c in pool))
    return {"latencies": latencies, "errors": errors, "wall": wall}


def run_load(url: str, bodies: list[bytes], clients: int, seconds: float, rate: float | None = None) -> dict[str, Any]:
    return asyncio.run(_load(url, bodies, clients, seconds, rate))


def summarize(res: dict[str, Any], server_cpu: float, client_cpu: float) -> dict[str, Any]:
    lat = res["latencies"]
    n_err = sum(res["errors"].values())
    wall = res["wall"]
    return {
        "duration_s": round(wall, 2),
        "requests": len(lat) + n_err,
        "requests_per_s": round(len(lat) / wall, 1),
        "p50_ms": round(_percentile(lat, 50) * 1000, 2),
        "p90_ms": round(_percentile(lat, 90) * 1000, 2),
        "p99_ms": round(_percentile(lat, 99) * 1000, 2),
        "max_ms": round(max(lat) * 1000, 2) if lat else None,
        "errors": n_err,
        "error_kinds": res["errors"],
        "server_cpu_s": round(server_cpu, 2),
        "load_generator_cpu_s": round(client_cpu, 2),
        "server_cpu_ms_per_request": round(server_cpu * 1000 / max(1, len(lat)), 2),
        "load_generator_cpu_ms_per_request": round(client_cpu * 1000 / max(1, len(lat)), 2),
    }


def measured(server: Server, bodies: list[bytes], clients: int, seconds: float, rate: float | None = None) -> dict[str, Any]:
    """One load phase with the CPU time it cost the server processes and this (load generator) process."""
    load0 = os.getloadavg()[0]
    server_cpu0, client_cpu0 = _tree_cpu(server.proc.pid), time.process_time()
    res = run_load(server.url, bodies, clients, seconds, rate)
    out = summarize(res, _tree_cpu(server.proc.pid) - server_cpu0, time.process_time() - client_cpu0)
    out["loadavg_1m_before_after"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    return out


def bench_server(workers: int, texts: list[str], home: Path, dense: bool, clients: int, duration: float, warmup: float,
                 rate: float, factory: str | None = None, cpus: set[int] | None = None) -> dict[str, Any]:
    bodies = [json.dumps({"text": t}).encode() for t in texts]
    server = Server(workers, home, dense, factory, cpus)
    try:
        ready_s = server.wait_ready(workers)
        run_load(server.url, bodies, min(clients, len(bodies)), warmup)  # warm-up: lazy imports, first-call paths
        closed = measured(server, bodies, clients, duration)
        # The open loop runs at the target rate when the closed loop showed the server can carry it; else at
        # 80% of what it carried (latency at a load it can sustain; a rate beyond capacity only measures the backlog).
        offered = rate if closed["requests_per_s"] >= rate else round(0.8 * closed["requests_per_s"], 1)
        opened = measured(server, bodies, clients, duration, offered) if rate > 0 and offered > 0 else None
    finally:
        rc = server.stop()
    out: dict[str, Any] = {"workers": workers, "clients": clients, "ready_after_s": round(ready_s, 2), **closed}
    if opened is not None:
        out["open_loop"] = {"offered_per_s": offered, "at_target_rate": offered == rate, **opened}
    out["server_exit_code"] = rc
    out["command"] = " ".join(server.cmd[1:])
    return out


def _cpu_set(spec: str) -> set[int]:
    """"0,1" or "2-5,8" -> a set of CPU numbers."""
    out: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.strip().partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _line(tag: str, r: dict[str, Any]) -> str:
    return (f"{tag}: {r['requests_per_s']} req/s, p50 {r['p50_ms']} ms, p90 {r['p90_ms']} ms, p99 {r['p99_ms']} ms, errors {r['errors']}, "
            f"CPU per request: server {r['server_cpu_ms_per_request']} ms, load generator {r['load_generator_cpu_ms_per_request']} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load per phase")
    parser.add_argument("--clients", type=int, default=32, help="concurrent keep-alive clients (connections)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="uvicorn worker counts to try")
    parser.add_argument("--rate", type=float, default=300.0,
                        help="then an open-loop phase at this many requests/s (at 80%% of the closed-loop throughput when that is lower; 0: skip)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of warm-up load before measuring")
    parser.add_argument("--inproc-seconds", type=float, default=10.0, help="seconds of in-process diagnose() timing")
    parser.add_argument("--no-dense", action="store_true", help="dense retrieval off (default: on unless the model is missing)")
    parser.add_argument("--home", type=Path, default=None, help="TORCHHELP_HOME to use (default: a fresh temporary one)")
    parser.add_argument("--factory", default=None, help="benchmark another app factory module:function (e.g. a patch), via uvicorn's CLI")
    parser.add_argument("--server-cpus", type=_cpu_set, default=None, help="pin the server and its workers to these CPUs, e.g. 0,1 (Linux)")
    parser.add_argument("--client-cpus", type=_cpu_set, default=None, help="pin this process (load generator, in-process timing) to these CPUs, e.g. 2-5")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "serve.json")
    args = parser.parse_args()
    if args.client_cpus:
        os.sched_setaffinity(0, args.client_cpus)

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    tmp = None
    if args.home is None:
        tmp = tempfile.TemporaryDirectory(prefix="torchhelp-bench-serve-")
        home = Path(tmp.name)
    else:
        home = args.home
    texts = load_texts()
    dense, dense_note = prepare_index(home, want_dense=not args.no_dense)
    print(f"{len(texts)} captured tracebacks; {dense_note}", flush=True)

    inproc = in_process(texts, home, dense, args.inproc_seconds)
    inproc["cpu_ms_per_diagnosis"] = round(inproc["cpu_s"] * 1000 / max(1, inproc["diagnoses"]), 2)
    print(f"in-process: {inproc['per_s']} diagnoses/s (p50 {inproc['p50_ms']} ms, p99 {inproc['p99_ms']} ms, {inproc['cpu_ms_per_diagnosis']} ms CPU each)", flush=True)

    runs = []
    for workers in args.workers:
        r = bench_server(workers, texts, home, dense, args.clients, args.duration, args.warmup, args.rate, args.factory, args.server_cpus)
        r["ratio_to_in_process"] = round(r["requests_per_s"] / inproc["per_s"], 3) if inproc["per_s"] else None
        r["meets_targets"] = r["requests_per_s"] >= TARGETS["requests_per_s"] and r["p99_ms"] <= TARGETS["p99_ms"] and r["errors"] == TARGETS["errors"]
        runs.append(r)
        print(_line(f"workers={workers}, {args.clients} clients, closed loop", r), flush=True)
        if "open_loop" in r:
            print(_line(f"workers={workers}, open loop at {r['open_loop']['offered_per_s']:g}/s", r["open_loop"]), flush=True)

    best = max(runs, key=lambda r: r["requests_per_s"])
    cpus = os.cpu_count() or 0
    result = {
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": cpus,
                    "server_cpus": sorted(args.server_cpus) if args.server_cpus else "all",
                    "load_generator_cpus": sorted(args.client_cpus) if args.client_cpus else "all",
                    "note": (f"server pinned to {len(args.server_cpus)} cores, load generator on other cores" if args.server_cpus and args.client_cpus
                             and not args.server_cpus & args.client_cpus else
                             f"server and load generator share the same {cpus} cores, with whatever else runs there (see loadavg_1m_before_after)")},
        "endpoint": "POST /v1/diagnose (no LLM)",
        "server": f"app factory {args.factory}" if args.factory else "torchhelp serve",
        "texts": {"source": "eval/captured/*/*.json stderr", "count": len(texts), "mean_chars": round(statistics.mean(len(t) for t in texts)),
                  "max_chars": max(len(t) for t in texts)},
        "dense": dense,
        "dense_note": dense_note,
        "in_process": inproc,
        "runs": runs,
        "best": {"workers": best["workers"], "requests_per_s": best["requests_per_s"], "p50_ms": best["p50_ms"], "p99_ms": best["p99_ms"],
                 "errors": best["errors"], "ratio_to_in_process": best["ratio_to_in_process"]},
        "targets": {"requests_per_s": ">= 300", "p99_ms": "<= 50", "errors": "0", "cores": 2},
        "load_generator": ("asyncio + httpx.AsyncClient in this process, keep-alive; closed loop = each client sends its next request when "
                           "the last one returns (mean latency = clients / throughput); open loop = a fixed schedule, latency from the "
                           "scheduled time. Its CPU time is load_generator_cpu_s, taken from the same cores as the server."),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    if tmp is not None:
        tmp.cleanup()
    return 0 if all(r["errors"] == 0 and r.get("open_loop", {}).get("errors", 0) == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
