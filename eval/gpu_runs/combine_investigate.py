"""Join the per-case results `investigate_batch.sh` brought back into one results file with one summary.

Usage: python eval/gpu_runs/combine_investigate.py OUT.json NOTE FOLDER...  (each FOLDER holds <slug>/investigate-*.json)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from assistant.eval.investigate_eval import summarise


def main(out: Path, note: str, folders: list[Path]) -> None:
    """Rows from every case file under ``folders`` (in slug order), the machine of the first, one summary."""
    rows, machine = [], None
    for path in sorted(p for folder in folders for p in folder.glob("*/investigate-*.json")):
        data = json.loads(path.read_text())
        rows.extend(data["rows"])
        machine = machine or data["summary"].get("machine")
    summary = summarise(rows, machine or {})
    summary["note"] = note
    out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in summary.items() if k not in ("machine", "note")}, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], [Path(a) for a in sys.argv[3:]])
