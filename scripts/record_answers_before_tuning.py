"""Record the full engine's answers on a new dev part before anything is tuned on it.

Dev reports stop being unseen the moment documents, rules or resolved reports are written from them, and from then on
the engine's confidence on them says little about its confidence on reports it has never seen. This script keeps what
it said while they were still unseen: per report, the category, its likelihood, the closest resolved report's
similarity and the report's label (``eval/decision/<part>_answers_before_tuning.json``).
``scripts/fit_unfamiliar_calibration.py`` fits the likelihood of reports unlike any resolved one from these files.
Run it once per part, right after ``split_realworld.py --split-collection`` (beside ``record_rules_before_tuning.py``):

    python scripts/record_answers_before_tuning.py dev_fresh7

``--engine-commit`` names the commit whose engine answered when the engine on ``PYTHONPATH`` is an older checkout's
(how the parts recorded before this script existed were recorded, each at the commit that added it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def record(part: str, engine_commit: str | None = None) -> Path:
    """Write the engine's answer to every report of ``part`` (refuses to overwrite: a part is unseen once)."""
    import assistant
    import assistant.decide
    from assistant.engine import Engine
    from assistant.settings import load_settings

    # Likelihoods are recorded on the fitted decision's scale, before the unfamiliar-text adjustment: the table that
    # adjustment reads is fitted from these files (older engines had no such adjustment at all).
    if hasattr(assistant.decide, "load_unfamiliar"):
        assistant.decide.load_unfamiliar = lambda path=None: None  # type: ignore[assignment]

    out = ROOT / "eval" / "decision" / f"{part}_answers_before_tuning.json"
    if out.exists():
        raise SystemExit(f"{out.name} exists: a part's answers are recorded once, before tuning")
    engine = Engine(load_settings(llm="none"))
    rows = [json.loads(line) for line in (ROOT / "eval" / "realworld" / f"{part}.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    answers = {}
    for row in rows:
        own = tuple(x for x in (row["id"], row.get("source")) if x)
        d = engine.diagnose(row["error_text"], exclude_cases=own)
        failure = engine.parse(engine.read(row["error_text"]))
        similar = engine.propose(failure, own).similar
        answers[row["id"]] = {"label": row["category"], "category": d.category, "likelihood": d.confidence,
                              "closest_case": round(max((s.similarity for s in similar), default=0.0), 4), "kind": row.get("kind")}
    engine_root = Path(assistant.__file__).resolve().parents[1]
    commit = engine_commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=engine_root, capture_output=True, text=True).stdout.strip()
    why = (f"The full engine's answers on the {part} reports, from the engine of commit {commit} (before anything was tuned on "
           "these reports, with dense retrieval). scripts/fit_unfamiliar_calibration.py fits from them how often an answer "
           "to a report unlike every resolved one is right at each stated likelihood.")
    out.write_text(json.dumps({"why": why, "commit": commit, "answers": answers}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", help="a dev part's name, e.g. dev_fresh7")
    parser.add_argument("--engine-commit", help="the commit of the engine on PYTHONPATH, when it is not this checkout")
    args = parser.parse_args()
    print(record(args.part, args.engine_commit))


if __name__ == "__main__":
    main()
