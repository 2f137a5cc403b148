"""The error atlas in the engine: every captured PyTorch message is recognised, and the answer says which check raised it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CAPTURES, ROOT, capture_ids

from assistant import diagnose
from assistant.engine import Engine

# Captured failures whose final message is not PyTorch's own (Python builtins, the user's own exception, the
# multiprocessing module, a missing third-party package): the atlas rightly does not know them.
NOT_PYTORCH = {
    "cpu/checkpoint-dir-is-a-file", "cpu/collate-none-mid-batch-short-clip", "cpu/config-key-renamed-keyerror",
    "cpu/dataloader-worker-keyerror-label-map", "cpu/dataset-relative-path-not-found", "cpu/missing-apex-amp-import",
    "cpu/spawn-dataloader-missing-main-guard", "cuda/nan-fp16-mse-overflow",
}


@pytest.fixture(scope="module")
def engine(settings) -> Engine:  # type: ignore[no-untyped-def]
    return Engine(settings)


@pytest.mark.parametrize("capture", CAPTURES, ids=capture_ids(CAPTURES))
def test_every_captured_pytorch_message_is_in_the_atlas(capture: dict, engine: Engine) -> None:
    failure = engine.parse(engine.read(capture["stderr"]))
    origin = engine.origin(failure)
    key = f"{capture['device']}/{capture['slug']}"
    if key in NOT_PYTORCH:
        return  # not PyTorch's own message: whether some fragment matches is not asserted
    assert origin is not None, f"{key}: {failure.headline[:200]}"
    assert origin.verified and origin.entry.get("torch_version")


def _run(snippet: str) -> str:
    run = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=180)
    assert run.returncode != 0
    return run.stderr


def test_the_answer_names_the_check_with_the_users_values(settings) -> None:  # type: ignore[no-untyped-def]
    text = _run("import torch; torch.cdist(torch.zeros(2, 3), torch.zeros(2, 4))")
    d = diagnose(text, settings=settings)
    rb = d.raised_by
    assert rb and rb["template"].startswith("X1 and X2 must have the same number of columns")
    read = " ".join(v["text"] for v in rb["values"])
    assert "3" in read and "4" in read  # the user's own sizes, read from the message
    line = next(e.text for e in d.evidence if e.kind == "raised by")
    assert "3" in line and "4" in line
    assert d.to_dict()["raised_by"]["template"] == rb["template"]


def test_a_rewrapped_message_still_finds_its_check(settings) -> None:  # type: ignore[no-untyped-def]
    """A DataLoader worker re-raises the error inside its own message: the original check is found."""
    snippet = (
        "import torch\nfrom torch.utils.data import DataLoader, Dataset\n"
        "class D(Dataset):\n    def __len__(self): return 4\n"
        "    def __getitem__(self, i): return torch.zeros(2, 3) @ torch.zeros(4, 5)\n"
        "if __name__ == '__main__':\n    next(iter(DataLoader(D(), num_workers=1)))\n"
    )
    text = _run(snippet)
    assert "DataLoader worker process" in text
    d = diagnose(text, settings=settings)
    assert d.raised_by and "cannot be multiplied" in d.raised_by["template"]
    assert d.raised_by["source"] != "python" or d.raised_by["where"] is None or "torch/" in d.raised_by["where"]


def test_an_internal_assertion_is_reported_as_a_pytorch_bug(settings) -> None:  # type: ignore[no-untyped-def]
    # The wording of TORCH_INTERNAL_ASSERT failures, as torch 2.13's own libraries hold it (assistant/atlas/data).
    text = 'RuntimeError: start_dim <= ndim() INTERNAL ASSERT FAILED at "/pytorch/aten/src/ATen/TensorIterator.cpp":842, please report a bug to PyTorch. '
    d = diagnose(text, settings=settings)
    assert d.raised_by.get("internal") is True
    assert any("internal assertion" in n for n in d.notes)
    assert "TensorIterator.cpp" in (d.raised_by.get("where") or "")


def test_the_atlas_can_be_turned_off(settings) -> None:  # type: ignore[no-untyped-def]
    text = _run("import torch; torch.cdist(torch.zeros(2, 3), torch.zeros(2, 4))")
    assert not diagnose(text, settings=settings, atlas=False).raised_by


def test_kb_search_finds_the_check(th_home: Path) -> None:
    env = {**os.environ, "TORCHHELP_HOME": str(th_home), "TORCHHELP_DENSE": "0"}
    res = subprocess.run([sys.executable, "-m", "assistant", "kb", "search", "--json", "-k", "3",
                          "RuntimeError: X1 and X2 must have the same number of columns. X1: 3 X2: 4"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr
    checks = json.loads(res.stdout)["atlas"]
    assert checks and checks[0]["matched"] and checks[0]["template"].startswith("X1 and X2 must have the same number of columns")


def test_kb_atlas_rebuilds_from_a_checkout_into_the_home(tmp_path: Path) -> None:
    """A user's own PyTorch: the atlas rebuilt from a checkout is written into the home and used from then on.

    The checkout is a small real piece of PyTorch's source: one header of the installed torch, with its TORCH_CHECKs."""
    import shutil

    import torch

    checkout = tmp_path / "pytorch"
    native = checkout / "aten" / "src" / "ATen" / "native"
    native.mkdir(parents=True)
    shutil.copyfile(Path(torch.__file__).parent / "include" / "ATen" / "native" / "Pool.h", native / "Pool.h")
    (checkout / "version.txt").write_text("2.13.0\n")
    home = tmp_path / "home"
    env = {**os.environ, "TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0"}
    res = subprocess.run([sys.executable, "-m", "assistant", "kb", "atlas", "--from", str(checkout), "--no-package"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr
    assert "message templates" in res.stdout
    assert any((home / "atlas" / "data").glob("*.jsonl.gz"))
    # From now on this home's atlas is the rebuilt one: a Pool.h message is found, a cdist one (not in it) is not.
    from assistant.atlas import atlas_for

    atlas = atlas_for(home)
    assert atlas is not None and atlas.match("pad should be at most half of effective kernel size, but got pad=3, kernel_size=3")
    assert not atlas.match("X1 and X2 must have the same number of columns. X1: 3 X2: 4")
