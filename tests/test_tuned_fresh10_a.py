"""Families tuned on the dev_fresh10 reports (tuner f10a), read from real texts.

Every text is a report of a dev split, read by id.
"""

from __future__ import annotations

import pytest

from assistant.engine import Engine
from tuned_support import dev_reader, dev_report, fix_text

report = dev_reader("dev_fresh10")


@pytest.fixture(autouse=True)
def _no_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHHELP_DENSE", "0")


# --- 1. StopIteration at next(self.parameters()) inside forward under nn.DataParallel: a family document ---------

def test_stopiteration_at_next_parameters_is_a_dataparallel_replica_without_parameters() -> None:
    d = Engine().diagnose(report("f10a-xlnet-dataparallel-torch15-stopiteration"))
    assert d.category == "ddp_error"
    text = fix_text(d.fixes)
    assert "DistributedDataParallel" in text and "Upgrade" in text


def test_stopiteration_of_an_empty_parameter_generator_elsewhere_is_not_read_as_dataparallel() -> None:
    d = Engine().diagnose(dev_report("dev_fresh4", "f4c-adas-filter-generator-empty-param-list"))
    assert d.category == "python_error"
