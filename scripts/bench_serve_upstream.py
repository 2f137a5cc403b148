#!/usr/bin/env python3
"""Benchmark `torchhelp serve` under load while its upstream LLM fails, one failure mode at a time.

One real server (`python -m assistant serve --workers 1 --llm openai`) is started on loopback with
its openai backend pointed (server-side, through TORCHHELP_LLM_URL) at a scripted real HTTP server
(tests/llm_servers.py MisbehavingServer) and a short total deadline (TORCHHELP_LLM_TIMEOUT). The
upstream is then switched through its failure modes: HTTP 500, a hang (never answers in time), a
drip (a valid answer, one byte at a time: every read succeeds, the answer never completes), a
malformed JSON body, and a connection closed mid-answer. In each mode, concurrent keep-alive
clients mix POST /v1/diagnose with llm=openai, POST /v1/chat/completions (model torchhelp:openai;
streamed, not streamed, and a follow-up question that asks the LLM twice), plain llm=none
diagnoses and GET /healthz, while a separate prober polls /healthz on a fixed schedule.

Per mode it records: requests, HTTP status counts (a 5xx from our server is a failure: every LLM
fault must end in the deterministic answer with a note), the share of LLM answers that carry the
fallback note, p50/p99/max latency per request kind against the configured deadline, /healthz
latency during the fault, and the server's RSS and thread count before and after the mode.

    python scripts/bench_serve_upstream.py [--duration 20] [--clients 16] [--deadline 2] [--out benchmarks/serve_upstream.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))

from bench_serve import Server, _free_port, _percentile, load_texts, prepare_index  # noqa: E402
from llm_servers import MisbehavingServer  # noqa: E402

# (name in the report, MisbehavingServer mode, its delay in seconds)
MODES: list[tuple[str, str, float]] = [
    ("http_500", "500", 0.0),
    ("hang", "timeout", 60.0),  # sleeps far past the deadline before answering
    ("drip", "drip", 0.25),  # one byte every 0.25 s: each read is quick, the whole answer takes minutes
    ("malformed_json", "malformed", 0.0),
    ("close_mid_stream", "close-mid-stream", 0.0),
]
KINDS = ("diagnose_llm", "chat", "chat_stream", "chat_followup", "diagnose_none", "healthz")
LLM_KINDS = ("diagnose_llm", "chat", "chat_stream", "chat_followup")
FALLBACK_MARKERS = ("Showing the deterministic diagnosis", "gave no usable answer")
FOLLOW_UP = "How do I fix it?"


class UpstreamServer(Server):
    """`python -m assistant serve --llm openai` with the openai backend pointed at ``llm_url``."""

    def __init__(self, home: Path, llm_url: str, deadline_s: float) -> None:  # noqa: D107
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0", "OPENBLAS_NUM_THREADS": "1",
               "TORCHHELP_LLM_URL": llm_url, "TORCHHELP_LLM_TIMEOUT": f"{deadline_s:g}", "TORCHHELP_LLM_MODEL": "upstream",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))}
        for name in ("TORCHHELP_SERVE_TOKEN", "OPENAI_API_KEY", "TORCHHELP_LLM_API_KEY"):
            env.pop(name, None)
        self.cmd = [sys.executable, "-m", "assistant", "serve", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
                    "--llm", "openai", "--log-level", "warning", "--no-access-log"]
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)


def server_footprint(pid: int) -> dict[str, float]:
    """RSS (MiB), threads and open sockets of the server process and its children."""
    import psutil

    rss, threads, sockets = 0, 0, 0
    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return {"rss_mib": float("nan"), "threads": 0, "inet_connections": 0}
    for p in procs:
        try:
            rss += p.memory_info().rss
            threads += p.num_threads()
            sockets += len(p.net_connections(kind="inet"))
        except psutil.Error:
            pass
    return {"rss_mib": round(rss / (1 << 20), 1), "threads": threads, "inet_connections": sockets}


def has_fallback_note(notes: list[str] | tuple[str, ...] | None) -> bool:
    return any(marker in str(n) for n in notes or () for marker in FALLBACK_MARKERS)


def _request(kind: str, text: str) -> tuple[str, str, dict[str, Any] | None]:
    """(method, path, JSON body) for one request of ``kind`` about the error ``text``."""
    if kind == "healthz":
        return "GET", "/healthz", None
    if kind in ("diagnose_llm", "diagnose_none"):
        return "POST", "/v1/diagnose", {"text": text, "llm": "openai" if kind == "diagnose_llm" else "none"}
    messages = [{"role": "user", "content": text}]
    if kind == "chat_followup":
        messages += [{"role": "assistant", "content": "(the diagnosis)"}, {"role": "user", "content": FOLLOW_UP}]
    return "POST", "/v1/chat/completions", {"model": "torchhelp:openai", "messages": messages, "stream": kind == "chat_stream"}


def _fell_back(kind: str, status: int, raw: bytes) -> bool | None:
    """Whether an LLM answer is the deterministic one with a note (None when the kind asks no LLM)."""
    if kind not in LLM_KINDS or status != 200:
        return None
    if kind == "chat_stream":
        notes: list[str] = []
        for line in raw.split(b"\n"):
            if line.startswith(b"data: {"):
                final = json.loads(line[6:]).get("torchhelp")
                notes = final.get("notes", []) if final else notes
        return has_fallback_note(notes)
    body = json.loads(raw)
    if kind == "diagnose_llm":
        return has_fallback_note(body.get("notes"))
    content = body["choices"][0]["message"]["content"]
    if kind == "chat_followup":  # the follow-up answer says its backend failed; the diagnosis carries the note too
        return any(m in content for m in FALLBACK_MARKERS) and has_fallback_note((body.get("torchhelp") or {}).get("notes"))
    return has_fallback_note((body.get("torchhelp") or {}).get("notes"))


async def _load(url: str, texts: list[str], clients: int, seconds: float, probe_hz: float, pid: int) -> dict[str, Any]:
    """Closed-loop clients cycling over the request kinds, an open-loop /healthz prober, and the server's
    footprint sampled once a second (its peak: hung upstream connections would show as threads and sockets)."""
    import httpx

    results: dict[str, dict[str, Any]] = {k: {"latencies": [], "status": {}, "fallback": 0, "llm_answers": 0, "errors": {}} for k in KINDS}
    samples: list[dict[str, float]] = []
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    timeout = httpx.Timeout(120.0)
    pool = [httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) for _ in range(clients)]
    deadline = time.perf_counter() + seconds

    async def one(client: httpx.AsyncClient, kind: str, text: str) -> None:
        method, path, body = _request(kind, text)
        res = results[kind]
        t0 = time.perf_counter()
        try:
            r = await client.request(method, path, json=body)
            raw = r.content
        except httpx.HTTPError as exc:
            res["errors"][type(exc).__name__] = res["errors"].get(type(exc).__name__, 0) + 1
            return
        res["latencies"].append(time.perf_counter() - t0)
        res["status"][str(r.status_code)] = res["status"].get(str(r.status_code), 0) + 1
        try:
            fell = _fell_back(kind, r.status_code, raw)
        except (ValueError, KeyError, TypeError, IndexError):
            res["errors"]["unreadable answer"] = res["errors"].get("unreadable answer", 0) + 1
            return
        if fell is not None:
            res["llm_answers"] += 1
            res["fallback"] += int(fell)

    async def closed(k: int) -> None:
        i = k
        while time.perf_counter() < deadline:
            await one(pool[k], KINDS[i % len(KINDS)], texts[(i * 7 + k) % len(texts)])
            i += 1

    async def sampler() -> None:
        while time.perf_counter() < deadline:
            samples.append(server_footprint(pid))
            await asyncio.sleep(1.0)

    start = time.perf_counter()
    # /healthz is probed from another process: this one (load generator and upstream) is itself busy, and
    # its own event-loop delays must not be counted as the server's.
    prober = subprocess.Popen([sys.executable, __file__, "--probe", url, str(seconds), str(probe_hz)], stdout=subprocess.PIPE)
    try:
        await asyncio.gather(sampler(), *(closed(k) for k in range(clients)))
    finally:
        await asyncio.gather(*(c.aclose() for c in pool))
    out, _ = await asyncio.to_thread(prober.communicate)
    probe = json.loads(out)
    peak = {key: max(s[key] for s in samples) for key in samples[0]} if samples else {}
    return {"kinds": results, "probe": probe, "wall": time.perf_counter() - start, "peak": peak}


def probe_healthz(url: str, seconds: float, hz: float) -> dict[str, list[float]]:
    """GET /healthz ``hz`` times a second for ``seconds`` (one connection, kept alive): each probe's time from
    its scheduled start (a stalled server cannot hide its backlog) and from its send; failures as None."""
    import httpx

    late: list[float | None] = []
    service: list[float | None] = []
    with httpx.Client(base_url=url, timeout=30.0) as client:
        start, n = time.perf_counter(), 0
        while time.perf_counter() - start < seconds:
            due = start + n / hz
            time.sleep(max(0.0, due - time.perf_counter()))
            t0 = time.perf_counter()
            try:
                ok = client.get("/healthz").status_code == 200
            except httpx.HTTPError:
                ok = False
            t1 = time.perf_counter()
            late.append(t1 - due if ok else None)
            service.append(t1 - t0 if ok else None)
            n += 1
    return {"from_schedule": late, "service": service}


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def summarize_mode(name: str, upstream_mode: str, raw: dict[str, Any], deadline_s: float, before: dict[str, float], after: dict[str, float],
                   settled: dict[str, float], upstream_calls: int, upstream_streamed: int) -> dict[str, Any]:
    kinds: dict[str, Any] = {}
    statuses: dict[str, int] = {}
    for kind, res in raw["kinds"].items():
        lat = res["latencies"]
        for code, n in res["status"].items():
            statuses[code] = statuses.get(code, 0) + n
        # Each LLM call has the deadline; a follow-up asks twice (the diagnosis, then the question).
        bound = deadline_s * (2 if kind == "chat_followup" else 1 if kind in LLM_KINDS else 0)
        kinds[kind] = {
            "requests": len(lat) + sum(res["errors"].values()),
            "status": res["status"],
            "client_errors": res["errors"],
            "p50_ms": _ms(_percentile(lat, 50)) if lat else None,
            "p99_ms": _ms(_percentile(lat, 99)) if lat else None,
            "max_ms": _ms(max(lat)) if lat else None,
            **({"llm_deadline_bound_s": bound, "max_over_bound_s": round(max(lat) - bound, 2) if lat else None,
                "fallback_note": res["fallback"], "llm_answers": res["llm_answers"]} if kind in LLM_KINDS else {}),
        }
    requests = sum(k["requests"] for k in kinds.values())
    server_5xx = sum(n for code, n in statuses.items() if code.startswith("5"))
    client_errors = sum(sum(k["client_errors"].values()) for k in kinds.values())
    llm_answers = sum(kinds[k]["llm_answers"] for k in LLM_KINDS)
    fallbacks = sum(kinds[k]["fallback_note"] for k in LLM_KINDS)
    probe = raw["probe"]
    finite = [p for p in probe["from_schedule"] if p is not None]
    service = [p for p in probe["service"] if p is not None]
    llm_max = max((kinds[k]["max_over_bound_s"] for k in LLM_KINDS if kinds[k]["max_over_bound_s"] is not None), default=None)
    summary = (f"{requests} requests, {server_5xx} server 5xx, {client_errors} client errors; "
               f"{fallbacks}/{llm_answers} LLM answers carried the fallback note; "
               f"worst LLM request {llm_max:+.2f} s vs its deadline bound; "
               f"/healthz p99 {_ms(_percentile(service, 99)) if service else None} ms; "
               f"RSS {before['rss_mib']} -> {after['rss_mib']} MiB ({settled['rss_mib']} after settling)")
    return {
        "mode": name,
        "upstream_mode": upstream_mode,
        "duration_s": round(raw["wall"], 1),
        "requests": requests,
        "requests_per_s": round(requests / raw["wall"], 1),
        "status": statuses,
        "server_5xx": server_5xx,
        "client_errors": client_errors,
        "llm_answers": llm_answers,
        "fallback_note": fallbacks,
        "fallback_share": round(fallbacks / llm_answers, 4) if llm_answers else None,
        "kinds": kinds,
        "healthz_probe": {"probes": len(finite), "failed": len(probe["service"]) - len(finite),
                          "p50_ms": _ms(_percentile(service, 50)) if service else None,
                          "p99_ms": _ms(_percentile(service, 99)) if service else None,
                          "max_ms": _ms(max(service)) if service else None,
                          "from_schedule_p99_ms": _ms(_percentile(finite, 99)) if finite else None,
                          "note": "from a separate process over one keep-alive connection; p50/p99/max from each probe's send; "
                                  "from_schedule adds the wait behind earlier slow probes (it grows without bound once "
                                  "the mean probe takes longer than the probe interval)"},
        "upstream_calls": upstream_calls,
        "upstream_streamed_calls": upstream_streamed,
        "server_peak_during": raw["peak"],
        "server_before": before,
        "server_after": after,
        "server_after_settle": settled,
        "summary": summary,
    }


def main() -> int:
    if sys.argv[1:2] == ["--probe"]:  # the /healthz prober's own process (see _load)
        url, seconds, hz = sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
        print(json.dumps(probe_healthz(url, seconds, hz)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load per failure mode")
    parser.add_argument("--clients", type=int, default=16, help="concurrent keep-alive clients")
    parser.add_argument("--deadline", type=float, default=2.0, help="TORCHHELP_LLM_TIMEOUT of the server (seconds, whole answer)")
    parser.add_argument("--warmup", type=float, default=4.0, help="seconds of load (upstream answering 500) before the first RSS reading")
    parser.add_argument("--probe-hz", type=float, default=10.0, help="/healthz probes per second during each mode")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds of no load after each mode before the settled RSS")
    parser.add_argument("--modes", nargs="+", default=[m[0] for m in MODES], choices=[m[0] for m in MODES])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "serve_upstream.json")
    args = parser.parse_args()

    texts = load_texts()
    with tempfile.TemporaryDirectory(prefix="torchhelp-bench-upstream-") as tmp:
        home = Path(tmp)
        prepare_index(home, want_dense=False)
        from assistant.settings import load_settings

        retries = load_settings(env={"TORCHHELP_HOME": str(home)}).llm_retries  # not settable by environment: the default
        with MisbehavingServer("500") as upstream:
            server = UpstreamServer(home, upstream.url, args.deadline)
            try:
                ready_s = server.wait_ready(1)
                cold = server_footprint(server.proc.pid)
                # Warm-up: the index, lazy imports and thread pools load on first use, not because of a fault.
                asyncio.run(_load(server.url, texts, args.clients, args.warmup, args.probe_hz, server.proc.pid))
                time.sleep(args.settle)
                warm = server_footprint(server.proc.pid)
                modes = []
                for name, mode, delay in (m for m in MODES if m[0] in args.modes):
                    upstream.mode, upstream.delay = mode, delay
                    calls0, streamed0 = upstream.calls, sum(1 for b in upstream.requests if b.get("stream"))
                    before = server_footprint(server.proc.pid)
                    raw = asyncio.run(_load(server.url, texts, args.clients, args.duration, args.probe_hz, server.proc.pid))
                    after = server_footprint(server.proc.pid)
                    time.sleep(args.settle)
                    settled = server_footprint(server.proc.pid)
                    streamed = sum(1 for b in upstream.requests if b.get("stream")) - streamed0
                    row = summarize_mode(name, mode, raw, args.deadline, before, after, settled, upstream.calls - calls0, streamed)
                    modes.append(row)
                    print(f"{name}: {row['summary']}", flush=True)
            finally:
                rc = server.stop()
                log = server.output()
    result = {
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
                    "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
                    "note": "server, upstream LLM and load generator share the same cores with whatever else runs there"},
        "server": {"command": " ".join(server.cmd[1:]), "workers": 1, "dense": False, "llm_timeout_s": args.deadline,
                   "llm_retries": retries, "ready_after_s": round(ready_s, 2), "exit_code": rc,
                   "footprint_cold": cold, "footprint_warm": warm, "footprint_end": modes[-1]["server_after_settle"] if modes else None,
                   "log_tail": log[-1500:]},
        "load": {"clients": args.clients, "duration_s_per_mode": args.duration, "kinds": list(KINDS),
                 "mix": "each client cycles through the kinds in order (closed loop); a separate process probes /healthz "
                        f"{args.probe_hz:g} times a second on a fixed schedule",
                 "texts": f"{len(texts)} captured tracebacks (eval/captured/*/*.json stderr)"},
        "criteria": {"server_5xx": "0 in every mode", "fallback_share": "1.0 of LLM answers carry the fallback note",
                     "latency": "each LLM request within its bound (deadline x LLM calls) plus queueing on 2 cores",
                     "rss": "no growth from hung upstream connections (after settling)"},
        "modes": modes,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    ok = all(m["server_5xx"] == 0 and m["client_errors"] == 0 and m["fallback_share"] == 1.0 for m in modes)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
