"""The likelihood of an answer to a report unlike every resolved one is what such answers were worth on dev parts
recorded before anything was tuned on them (assistant/decide/unfamiliar.json)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from assistant.decide import NEAR_DUPLICATE, decide
from assistant.decide.model import Unfamiliar, load_unfamiliar
from assistant.engine import Engine
from assistant.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = json.loads((ROOT / "assistant" / "decide" / "unfamiliar.json").read_text(encoding="utf-8"))


def test_the_table_only_lowers_and_keeps_the_order() -> None:
    table = load_unfamiliar()
    assert table is not None and table.near_duplicate == NEAR_DUPLICATE
    grid = [i / 100 for i in range(101)]
    adjusted = [table.adjust(x) for x in grid]
    assert all(a <= x + 1e-9 for a, x in zip(adjusted, grid, strict=True))
    assert all(b >= a - 1e-9 for a, b in zip(adjusted, adjusted[1:], strict=False))
    # An answer stated at 0.98 on unfamiliar text is not stated at 0.9 or above: held out, such answers were right
    # about 0.83 of the time.
    assert table.adjust(0.98) < 0.9


def test_a_family_shift_moves_the_table_value_in_log_odds_and_still_never_raises() -> None:
    table = Unfamiliar((0.0, 1.0), (0.0, 0.8), NEAR_DUPLICATE, {"python_error": -1.0, "environment_error": 0.7})
    plain = table.adjust(0.5)
    assert plain == pytest.approx(0.4)
    assert table.adjust(0.5, "unknown_family") == pytest.approx(plain)
    lowered = table.adjust(0.5, "python_error")
    assert lowered == pytest.approx(1 / (1 + math.exp(-(math.log(0.4 / 0.6) - 1.0))))
    assert table.adjust(0.5, "environment_error") == 0.5  # the shift lifts the table value above the stated 0.5: capped
    shipped = load_unfamiliar()
    assert shipped is not None
    for family in (*shipped.shift, "shape_mismatch"):
        assert all(shipped.adjust(x / 100, family) <= x / 100 + 1e-9 for x in range(101))


def test_it_is_fitted_on_dev_parts_only_and_beats_the_stated_likelihood_on_parts_it_did_not_see() -> None:
    meta = SHIPPED["meta"]
    assert meta["parts"] and all(part.startswith("dev") for part in meta["parts"])
    for part in meta["parts"]:
        recorded = json.loads((ROOT / "eval" / "decision" / f"{part}_answers_before_tuning.json").read_text(encoding="utf-8"))
        assert recorded["commit"] and recorded["answers"]
    chosen = meta["leave_one_part_out"][SHIPPED["fit"]]
    assert chosen["brier"] < meta["as_stated"]["brier"]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    home = tmp_path_factory.mktemp("home")
    return Engine(load_settings(env={"TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0"}, llm="none"))


def _decisions(engine: Engine, text: str, exclude: tuple[str, ...]):  # type: ignore[no-untyped-def]
    failure = engine.parse(engine.read(text))
    hit = engine.match(failure).hit
    proposals = engine.propose(failure, exclude, hit=hit)
    common = dict(idf=engine.usable_retriever().idf, mode="lexical", origin=proposals.origin.entry if proposals.origin else None)
    identity = Unfamiliar((), (), NEAR_DUPLICATE)
    adjusted = decide(failure, hit, proposals.passages, proposals.signature_categories, proposals.similar, **common)
    stated = decide(failure, hit, proposals.passages, proposals.signature_categories, proposals.similar, unfamiliar=identity, **common)
    return proposals.similar, adjusted, stated


def _dev_rows() -> list[dict]:
    path = ROOT / "eval" / "realworld" / "dev_fresh4.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_familiar_text_keeps_the_fitted_likelihood_and_unfamiliar_text_is_lowered(engine: Engine) -> None:
    familiar = unfamiliar = 0
    for row in _dev_rows()[:30]:
        # With its own resolved report in the case base, a dev report is a near-duplicate of it; without, usually not.
        for exclude in ((), (row["id"], row["source"])):
            similar, adjusted, stated = _decisions(engine, row["error_text"], exclude)
            if stated.abstained:
                continue
            assert adjusted.category == stated.category
            if any(s.similarity >= NEAR_DUPLICATE for s in similar):
                familiar += 1
                assert adjusted.likelihood == pytest.approx(stated.likelihood)
            else:
                unfamiliar += 1
                assert adjusted.likelihood <= stated.likelihood
                assert adjusted.likelihood == pytest.approx(load_unfamiliar().adjust(stated.likelihood, stated.category), abs=1e-3)  # type: ignore[union-attr]
    assert familiar >= 10 and unfamiliar >= 10
