"""The triage corpus generator, its scorer and the naive baseline (issue 9)."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import time
from pathlib import Path

import pytest

from assistant.eval.triage_baseline import naive_triage
from assistant.eval.triage_corpus import SCHEDULER_CATEGORY, TRAPS, _parse_stamps, generate, load_sources, load_truth
from assistant.eval.triage_score import adjusted_rand_index, headline, pair_counts, score
from assistant.types import CATEGORIES

ROOT = Path(__file__).resolve().parents[1]
TRUTH_KEYS = {"job_id", "status", "category", "group", "first_failing_rank", "gpu_hours", "trap"}
SINGLE_PROCESS = {"single_exception", "split_streams", "loose_file", "gzipped", "nonutf8_junk", "big_noise", "other_location",
                  "varied_values", "truncated_after", "truncated_inside", "attempts"}
MULTI_RANK = {"torchrun_cascade", "torchrun_no_root_cause", "torchrun_old_format", "multinode_watchdog", "remote_error_cascade",
              "sticky_cuda", "srun_prefix", "per_rank_files", "hardware_ecc", "hardware_bus", "mp_spawn_raised", "mp_spawn_exited"}
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("triage") / "corpus"
    generate(out, n_jobs=120, seed=7, big_noise_mb=1)
    return out


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(folder).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def _job_texts(corpus: Path, manifest_row: dict) -> list[str]:
    base = corpus / "logs" if manifest_row["loose"] else corpus / "logs" / manifest_row["job_id"]
    texts = []
    for name in manifest_row["files"]:
        data = (base / name).read_bytes()
        if name.endswith(".gz"):
            data = gzip.decompress(data)
        texts.append(ANSI.sub("", data.decode("utf-8", errors="replace")))
    return texts


# --- generator -------------------------------------------------------------------------------


def test_same_seed_same_bytes_other_seed_other_corpus(tmp_path: Path) -> None:
    generate(tmp_path / "a", n_jobs=60, seed=3, big_noise_mb=0)
    generate(tmp_path / "b", n_jobs=60, seed=3, big_noise_mb=0)
    generate(tmp_path / "c", n_jobs=60, seed=4, big_noise_mb=0)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert (tmp_path / "a" / "truth.jsonl").read_bytes() == (tmp_path / "b" / "truth.jsonl").read_bytes()
    assert _digest(tmp_path / "a") != _digest(tmp_path / "c")


def test_regenerating_into_the_same_folder_replaces_the_logs(tmp_path: Path) -> None:
    generate(tmp_path, n_jobs=60, seed=1, big_noise_mb=0)
    first = _digest(tmp_path / "logs")
    generate(tmp_path, n_jobs=60, seed=2, big_noise_mb=0)
    generate(tmp_path, n_jobs=60, seed=1, big_noise_mb=0)
    assert _digest(tmp_path / "logs") == first


def test_too_few_jobs_for_every_trap_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        generate(tmp_path, n_jobs=len(TRAPS) - 1)


def test_truth_schema(corpus: Path) -> None:
    rows = load_truth(corpus / "truth.jsonl")
    assert len(rows) == 120
    ids = [r["job_id"] for r in rows]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for r in rows:
        assert set(r) == TRUTH_KEYS
        assert r["trap"] in TRAPS
        assert r["status"] in ("failed", "succeeded")
        # Hours are the written stamps' span: zero when a job's stamps all fall on one second (new corpus texts
        # in the generator's pool made one such job); never negative.
        assert r["gpu_hours"] is None or (isinstance(r["gpu_hours"], float) and r["gpu_hours"] >= 0)
        if r["status"] == "failed":
            assert r["category"] in CATEGORIES and isinstance(r["group"], str) and r["group"]
            assert r["first_failing_rank"] is None or isinstance(r["first_failing_rank"], int)
        else:
            assert r["category"] is None and r["group"] is None and r["first_failing_rank"] is None


def test_every_trap_present_and_a_fair_share_succeeded(corpus: Path) -> None:
    rows = load_truth(corpus / "truth.jsonl")
    assert {r["trap"] for r in rows} == set(TRAPS)
    share = sum(r["status"] == "succeeded" for r in rows) / len(rows)
    assert 0.2 <= share <= 0.4


def test_every_truth_job_is_on_disk_and_nothing_else(corpus: Path) -> None:
    rows = load_truth(corpus / "truth.jsonl")
    on_disk = {p.name if p.is_dir() else p.name.split(".", 1)[0] for p in (corpus / "logs").iterdir()}
    assert on_disk == {r["job_id"] for r in rows}


def test_gpu_hours_come_from_the_timestamps_written(corpus: Path) -> None:
    """Every timestamp in a job's files (ANSI stripped, gz opened) spans exactly the truth's start and end."""
    truth = {r["job_id"]: r for r in load_truth(corpus / "truth.jsonl")}
    manifest = load_truth(corpus / "manifest.jsonl")
    with_hours = 0
    for m in manifest:
        year = int(m["start"][:4]) if m["start"] else 2024
        stamps = [s[2] for text in _job_texts(corpus, m) for s in _parse_stamps(text, year)]
        if not stamps:
            assert m["start"] is None and truth[m["job_id"]]["gpu_hours"] is None
            continue
        assert min(stamps).isoformat()[:19] == m["start"][:19], m["job_id"]
        assert max(stamps).isoformat()[:19] == m["end"][:19], m["job_id"]
        assert m["gpus"], f"{m['job_id']} has timestamps but declares no GPUs"
        hours = truth[m["job_id"]]["gpu_hours"]
        span = (max(stamps) - min(stamps)).total_seconds() / 3600
        assert hours == pytest.approx(m["gpus"] * span, abs=m["gpus"] * 2 / 3600)
        with_hours += 1
    assert with_hours > 0.8 * len(manifest)


def test_first_rank_only_where_ranks_exist(corpus: Path) -> None:
    for r in load_truth(corpus / "truth.jsonl"):
        if r["trap"] in SINGLE_PROCESS or r["trap"].startswith("sched_") or r["trap"] in ("pure_hang", "all_ranks_identical"):
            assert r["first_failing_rank"] is None, r
        if r["trap"] in MULTI_RANK:
            assert isinstance(r["first_failing_rank"], int), r


def test_hangs_hardware_and_scheduler_labels(corpus: Path) -> None:
    for r in load_truth(corpus / "truth.jsonl"):
        if r["trap"] == "pure_hang":
            assert r["category"] == "nccl_error" and r["group"].startswith("hang:")
        if r["trap"].startswith("hardware_"):
            assert r["category"] == "hardware_error"
        if r["trap"].startswith("sched_"):
            assert r["category"] == SCHEDULER_CATEGORY[r["trap"]] and r["group"] == r["trap"]
        if r["trap"] == "truncated_before":
            assert r["status"] == "succeeded"


def test_other_location_is_another_group_varied_values_the_same(corpus: Path) -> None:
    rows = load_truth(corpus / "truth.jsonl")
    moved = [r for r in rows if r["trap"] == "other_location"]
    assert moved and all(not r["group"].endswith("@train.py") for r in moved)
    groups = {r["group"] for r in rows if r["trap"] != "varied_values" and r["group"]}
    varied = [r for r in rows if r["trap"] == "varied_values"]
    assert any(r["group"] in groups for r in varied), "a varied-values job shares its root cause with another job"


def test_layouts_on_disk(corpus: Path) -> None:
    manifest = {m["job_id"]: m for m in load_truth(corpus / "manifest.jsonl")}
    traps = {}
    for m in manifest.values():
        traps.setdefault(m["trap"], []).append(m)
    assert any(f.endswith(".gz") for m in traps["gzipped"] for f in m["files"])
    assert all(m["loose"] for m in traps["loose_file"])
    assert all(any(re.fullmatch(r"rank_\d+\.log|torchelastic/\w+-[\w-]+/attempt_0/\d+/std(out|err)\.log", f) for f in m["files"]) for m in traps["per_rank_files"])
    assert all(any("attempt_" in f or f.endswith(".log.1") for f in m["files"]) for m in traps["attempts"] + traps["attempts_final_ok"])
    big = traps["big_noise"][0]
    base = (corpus / "logs") if big["loose"] else corpus / "logs" / big["job_id"]
    assert sum((base / f).stat().st_size for f in big["files"]) > 0.8 * 1024 * 1024


def test_junk_bytes_are_really_not_utf8(corpus: Path) -> None:
    manifest = [m for m in load_truth(corpus / "manifest.jsonl") if m["trap"] in ("nonutf8_junk", "ok_nonutf8")]
    bad = 0
    for m in manifest:
        base = corpus / "logs" if m["loose"] else corpus / "logs" / m["job_id"]
        for f in m["files"]:
            data = (base / f).read_bytes()
            if not f.endswith(".gz"):
                try:
                    data.decode("utf-8")
                except UnicodeDecodeError:
                    bad += 1
    assert bad >= 1


def test_failure_texts_are_real_and_never_from_the_test_split() -> None:
    sources = load_sources(ROOT)
    assert sources
    for s in sources:
        assert s.id.startswith(("captured/", "corpus/")), s.id
        assert "realworld" not in s.id
        assert s.category in CATEGORIES
    ids = {s.id for s in sources}
    assert any(i.startswith("captured/multi_gpu/") for i in ids) and any(i.startswith("corpus/") for i in ids)


def test_corpus_sources_keep_their_exception_line(corpus: Path) -> None:
    """The last line of a corpus text (verbatim, never varied) is in the log of a job built from it."""
    by_id = {s.id: s for s in load_sources(ROOT)}
    checked = 0
    for m in load_truth(corpus / "manifest.jsonl"):
        src = m.get("source")
        if m["trap"] in ("single_exception", "loose_file", "gzipped") and src and src.startswith("corpus/"):
            last = [line for line in by_id[src].text.splitlines() if line.strip()][-1]
            assert any(last.strip() in t for t in _job_texts(corpus, m)), (m["job_id"], last)
            checked += 1
    assert checked >= 1


def test_generation_is_fast(tmp_path: Path) -> None:
    start = time.perf_counter()
    generate(tmp_path, n_jobs=320, seed=0, big_noise_mb=0)
    assert time.perf_counter() - start < 20  # ~1 s on an idle core; generous for a shared machine


# --- scorer ----------------------------------------------------------------------------------


def test_perfect_prediction_scores_perfectly(corpus: Path) -> None:
    truth = load_truth(corpus / "truth.jsonl")
    head = headline(score(truth, truth))
    assert head.pop("gpu_hours_median_rel_error") == 0.0
    assert all(v == 1.0 for v in head.values()), head


def test_ari_known_values() -> None:
    assert adjusted_rand_index([0, 0, 1, 1], [0, 0, 1, 2]) == pytest.approx(0.5714285714)
    assert adjusted_rand_index([0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 2, 2]) == pytest.approx(0.2424242424)
    assert adjusted_rand_index([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(-0.5)
    assert adjusted_rand_index(["a", "a", "b", "b"], [7, 7, 3, 3]) == 1.0  # labels are names only
    assert adjusted_rand_index([1, 2, 3], [4, 5, 6]) == 1.0  # all singletons on both sides
    assert adjusted_rand_index([1, 1, 1], [2, 2, 2]) == 1.0  # one cluster on both sides
    assert adjusted_rand_index([], []) == 1.0
    assert pair_counts([0, 0, 1, 1], [0, 0, 1, 2]) == (1, 2, 1, 6)


def _row(job_id: str, status: str = "failed", category: str | None = None, group: str | None = None,
         rank: int | None = None, hours: float | None = None, trap: str = "t") -> dict:
    return {"job_id": job_id, "status": status, "category": category, "group": group, "first_failing_rank": rank,
            "gpu_hours": hours, "trap": trap}


def test_hand_made_case() -> None:
    truth = [_row("A", category="x", group="g1", rank=0, hours=10.0), _row("B", category="x", group="g1", hours=5.0),
             _row("C", category="y", group="g2", hours=1.0, trap="u"), _row("D", status="succeeded", hours=3.0)]
    pred = [_row("A", category="x", group="p1", rank=0, hours=10.0), _row("B", category="y", group="p1", rank=1, hours=4.0),
            _row("D", category="z", group="p2")]  # C missing: succeeded, all null
    r = score(pred, truth)
    assert r["detection"] == {"precision": pytest.approx(2 / 3, abs=1e-4), "recall": pytest.approx(2 / 3, abs=1e-4),
                              "f1": pytest.approx(2 / 3, abs=1e-4), "tp": 2, "fp": 1, "fn": 1, "tn": 0}
    assert r["category_accuracy"] == pytest.approx(1 / 3, abs=1e-4)
    assert r["first_rank_accuracy"] == pytest.approx(2 / 3, abs=1e-4)  # C: null == null
    assert r["grouping"]["pairwise_f1"] == 1.0 and r["grouping"]["ari"] == 1.0
    assert r["top5_gpu_hours"]["score"] == 0.5  # g1 -> p1 is in our top 5; g2's jobs were all missed
    assert r["gpu_hours"]["median_relative_error"] == pytest.approx(0.2)
    assert r["missing_predictions"] == 1
    assert r["per_trap"]["u"] == {"jobs": 1, "truth": "failed", "detection": 0.0, "category": 0.0, "first_rank": 1.0}


def test_all_wrong_scores_zero() -> None:
    truth = [_row("A", category="x", group="g1", rank=1, hours=2.0), _row("B", category="x", group="g1", rank=0, hours=2.0),
             _row("C", status="succeeded")]
    pred = [_row("A", status="succeeded"), _row("B", status="succeeded"), _row("C", category="x", group="g1", rank=0, hours=9.0)]
    r = score(pred, truth)
    assert r["detection"]["precision"] == 0.0 and r["detection"]["recall"] == 0.0 and r["detection"]["f1"] == 0.0
    assert r["category_accuracy"] == 0.0 and r["first_rank_accuracy"] == 0.0
    assert r["grouping"]["pairwise_recall"] == 0.0 and r["grouping"]["ari"] <= 0.0
    assert r["top5_gpu_hours"]["score"] == 0.0 and r["gpu_hours"]["median_relative_error"] == 1.0


def test_a_failed_job_without_group_is_a_singleton() -> None:
    truth = [_row("A", category="x", group="g"), _row("B", category="x", group="g")]
    pred = [_row("A", category="x"), _row("B", category="x")]
    assert score(pred, truth)["grouping"]["pairwise_recall"] == 0.0


# --- naive baseline --------------------------------------------------------------------------


def test_naive_baseline_on_hand_made_jobs(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "4412873").mkdir(parents=True)
    (logs / "4412873" / "slurm-4412873.out").write_text(
        "epoch 1 loss 2.3\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.18 GiB\n")
    (logs / "job-0002.log.gz").write_bytes(gzip.compress(b"step 10 val error 0.12\ntraining complete\n"))
    (logs / "job-0003.out").write_bytes(b"\xff\xfe junk\nstep 3\rstep 4\rKilled\n")
    (logs / "job-0003.err").write_text("")
    rows = {r["job_id"]: r for r in naive_triage([logs])}
    assert set(rows) == {"4412873", "job-0002", "job-0003"}
    oom = rows["4412873"]
    assert oom["status"] == "failed" and oom["category"] == "cuda_oom" and "<N>" in oom["group"] and "2.00" not in oom["group"]
    assert rows["job-0002"]["status"] == "succeeded" and rows["job-0002"]["group"] is None
    assert rows["job-0003"]["status"] == "failed" and rows["job-0003"]["group"] == "Killed"
    assert all(r["first_failing_rank"] is None and r["gpu_hours"] is None for r in rows.values())


def test_naive_baseline_runs_on_the_corpus(corpus: Path) -> None:
    truth = load_truth(corpus / "truth.jsonl")
    rows = naive_triage([corpus / "logs"])
    assert [r["job_id"] for r in rows] == [r["job_id"] for r in truth]
    head = headline(score(rows, truth))
    assert 0.5 < head["detection_recall"] < 1.0 and 0.5 < head["detection_precision"] < 1.0
    assert 0.0 < head["category_accuracy"] < 0.95
    assert head["gpu_hours_median_rel_error"] == 1.0  # it never estimates hours


# --- torchhelp eval triage ------------------------------------------------------------------


def test_eval_triage_command(corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import typer
    from typer.testing import CliRunner

    from assistant.eval import triage_cli

    truth = load_truth(corpus / "truth.jsonl")
    monkeypatch.setattr(triage_cli, "run_ours", lambda logs: ([dict(r, files=[], title=None) for r in truth], 0.5, None))
    app = typer.Typer()
    app.callback()(lambda: None)
    triage_cli.register(app)
    results = tmp_path / "results.json"
    ok = tmp_path / "ok.toml"
    ok.write_text("[floors]\ncategory_accuracy = 0.99\nari = 0.99\n[ceilings]\ngpu_hours_median_rel_error = 0.01\n")
    res = CliRunner().invoke(app, ["triage", "--corpus", str(corpus), "--results", str(results), "--check", "--thresholds", str(ok)])
    assert res.exit_code == 0, res.output
    doc = json.loads(results.read_text())
    assert doc["headline"]["ours"]["ari"] == 1.0 and doc["naive"]["jobs"] == len(truth)
    high = tmp_path / "high.toml"
    high.write_text("[floors]\nfirst_rank_accuracy = 1.01\n")
    res = CliRunner().invoke(app, ["triage", "--corpus", str(corpus), "--results", str(results), "--check", "--thresholds", str(high)])
    assert res.exit_code == 1
