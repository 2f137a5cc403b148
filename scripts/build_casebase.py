"""Write knowledge/cases/resolved.jsonl: the dev split's labelled real reports as resolved cases.

Only the dev parts are read (a frozen-test thread never becomes a case). Each case keeps a masked
signature, the category, the note that says what resolved it (written by us when labelling) and the link.

    python scripts/build_casebase.py
"""

from __future__ import annotations

import json
from pathlib import Path

from assistant.kb.cases import case_from_report

ROOT = Path(__file__).resolve().parents[1]
DEV_PARTS = tuple(sorted(p.name for p in (ROOT / "eval" / "realworld").glob("dev*.jsonl")))  # every dev part, old and new


def main() -> None:
    rows = [json.loads(line) for name in DEV_PARTS for line in (ROOT / "eval" / "realworld" / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    out = ROOT / "knowledge" / "cases" / "resolved.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for row in sorted(rows, key=lambda r: r["id"]):
            case = case_from_report(row)
            fh.write(json.dumps({"id": case.id, "category": case.category, "signature": case.signature, "resolution": case.resolution,
                                 "link": case.link, "kind": case.kind}, ensure_ascii=False) + "\n")
    print(f"{len(rows)} cases -> {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
