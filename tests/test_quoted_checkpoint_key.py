"""A KeyError on a checkpoint entry is read from code the report quotes, not only from traceback frames."""

from __future__ import annotations

import json
from pathlib import Path

from assistant.rules.io import _indexes_checkpoint

ROOT = Path(__file__).resolve().parents[1]


def _dev_report(part: str, case_id: str) -> str:
    for line in (ROOT / "eval" / "realworld" / f"{part}.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["id"] == case_id:
            return row["error_text"]
    raise AssertionError(case_id)


def test_quoted_load_call_or_checkpoint_variable_counts_a_batch_dict_does_not() -> None:
    assert _indexes_checkpoint("optimizer.load_state_dict(checkpoint['optimizer'])", "optimizer")
    assert _indexes_checkpoint('weights = ckpt_file["model"]', "model")
    assert not _indexes_checkpoint("logits = batch['model']", "model")
    assert not _indexes_checkpoint("optimizer.load_state_dict(checkpoint['optimizer'])", "epoch")


def test_released_weights_without_optimizer_entry_is_a_checkpoint_layout_answer() -> None:
    """A dev report that quotes the failing line in prose, with no frames."""
    from assistant.engine import Engine
    from assistant.settings import load_settings

    d = Engine(load_settings()).diagnose(_dev_report("dev_fresh10", "f10b-deepcluster-keyerror-optimizer-released-ckpt"))
    assert d.category == "state_dict_loading" and d.rule == "io.checkpoint_key"
