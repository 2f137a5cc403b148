"""Log shapes that decorate every line (kubectl --timestamps, Python logging, a shipper before ``[rankN]:``):
triage reads the same failure, rank and group as from the bare log (issue 20, items 2 and 3)."""

from __future__ import annotations


import pytest

from conftest import ROOT

from assistant.triage import triage
from assistant.triage.verdict import _first_nonblank

REAL = ROOT / "eval" / "triage" / "gpu_captured" / "one_rank_shape-torchrun" / "stdout.log"  # a real 2-rank torchrun log (H100)

SHAPES = {
    "bare": lambda i, line: line,
    "kubectl": lambda i, line: f"2026-11-26T09:12:{i % 60:02d}.{i:09d}Z {line}",
    "logging": lambda i, line: f"2026-11-26 09:12:{i % 60:02d},{i % 1000:03d} INFO {line}",
    "shipper-then-rank": lambda i, line: (f"[2026-11-26 09:12:{i % 60:02d}] " + line),
}


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("shapes")
    lines = REAL.read_text(encoding="utf-8").splitlines()
    for name, shape in SHAPES.items():
        (root / name).mkdir()
        (root / name / "pod.log").write_text("\n".join(shape(i, ln) for i, ln in enumerate(lines)) + "\n", encoding="utf-8")
    return triage([str(root)])


def test_every_shape_reads_the_same_failure_and_rank(result) -> None:  # type: ignore[no-untyped-def]
    jobs = {j.job_id: j for j in result.jobs}
    assert set(jobs) == set(SHAPES)
    for job in jobs.values():
        assert job.status == "failed" and job.category == "shape_mismatch", (job.job_id, job.category, job.title)
        assert job.first_failing_rank == 1
        assert "Traceback" not in (job.title or "") and "mat1 and mat2" in job.headline


def test_every_shape_lands_in_one_group(result) -> None:  # type: ignore[no-untyped-def]
    assert len(result.groups) == 1 and len(result.groups[0].job_ids) == len(SHAPES)


def test_a_headline_is_never_a_traceback_header() -> None:
    cut = ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>', "    loss = model(x)"]
    assert not _first_nonblank(cut).startswith(("Traceback", "File"))
    assert _first_nonblank([*cut, "torch.OutOfMemoryError: CUDA out of memory."]).startswith("torch.OutOfMemoryError")


def test_a_log_without_source_lines_joins_the_group_of_its_frame(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """No source on the node: frames without their source line. Same error, same function: one group; another
    source line of the same function with the same error is another frame, another group."""
    import re

    lines = REAL.read_text(encoding="utf-8").splitlines()
    bare = [re.sub(r"^\[rank\d+\]:", "", ln) for ln in lines]
    # Drop each frame's source line (the line after a 'File "...", line N' line) and the caret lines under it.
    no_source = [ln for k, ln in enumerate(lines)
                 if not (k and 'File "' in bare[k - 1] and 'File "' not in bare[k] and bare[k].startswith("    ")) and not re.fullmatch(r"\s*[\^~]+\s*", bare[k])]
    assert len(no_source) < len(lines)
    user_line = next(ln for ln in lines if "model(torch.randn(64, 100" in ln)
    other_line = user_line.replace("model(torch.randn(64, 100", "head(torch.randn(64, 100")
    # Jobs are grouped in job-id order; a job without source lines joins its function's group when there is one.
    for name, body in {"a-with-source": lines, "b-without-source": no_source, "c-other-line": [other_line if ln == user_line else ln for ln in lines]}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "stdout.log").write_text("\n".join(body) + "\n", encoding="utf-8")
    result = triage([str(tmp_path)], diagnose_groups=False)
    g = result.group_of
    assert g["a-with-source"] == g["b-without-source"] != g["c-other-line"]
