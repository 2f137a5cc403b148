"""`ask` on one process's output does not import the job reader; a log of several processes is still read as a job.

The cheap marker test (assistant/triage/markers.py) decides first; the job reader (assistant/triage/verdict.py, about
11 ms of imports on a cold `ask`) loads only when a second process may be in the text.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ONE_PROCESS = ROOT / "examples" / "linear_shape_mismatch.log"
SEVERAL = sorted((ROOT / "eval" / "triage" / "gpu_captured" / "one_rank_oom-torchrun").glob("*.log"))


def _parse_and_report(path: Path) -> str:
    code = (
        "import sys; from assistant.engine import Engine; from assistant.settings import load_settings; "
        f"f = Engine(load_settings(llm='none')).parse(open({str(path)!r}, encoding='utf-8', errors='replace').read()); "
        "print('verdict' if 'assistant.triage.verdict' in sys.modules else 'light', f.rank, f.exc_type)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_one_process_traceback_leaves_the_job_reader_unloaded() -> None:
    assert _parse_and_report(ONE_PROCESS).startswith("light None RuntimeError")


def test_a_log_of_several_ranks_is_read_as_a_job() -> None:
    assert SEVERAL, "the real two-rank capture is missing"
    out = _parse_and_report(SEVERAL[0])
    assert out.startswith("verdict "), out
    assert out.split()[1] != "None", out  # the failing rank was read
