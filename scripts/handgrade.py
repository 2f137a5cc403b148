"""Hand-graded quality on frozen reports with a confirmed fix (the ChatDBG-style measure of issue 18).

Two steps:

    python scripts/handgrade.py packet [--n 60] [--seed 18]   # sample, diagnose, write eval/handgraded/packet.jsonl
    python scripts/handgrade.py score                          # read the graders' files, write eval/handgraded/results.json
    # a later round on other frozen splits, in its own folder:
    python scripts/handgrade.py packet --splits test_fresh3,test_fresh4 --n 40 --out eval/handgraded/round2
    # the same grades with today's confidences (where today's answer is still the graded one):
    python scripts/handgrade.py reconfidence --out eval/handgraded/round2
    # today's answers where they differ from the graded ones (category, fixes, or the top three causes' fixes), to
    # be graded afresh, then every round measured with those grades and the old ones elsewhere:
    python scripts/handgrade.py changed --rounds eval/handgraded,eval/handgraded/round2 --out eval/handgraded/regrade
    python scripts/handgrade.py today --rounds eval/handgraded,eval/handgraded/round2 --out eval/handgraded/regrade

The packet holds, per report, what a grader needs and nothing the grader should not be swayed by: the
report as the user pasted it, the thread's confirmed cause and fix (the case's note), and our answer as the
user sees it (category, confidence, the fixes in order, the top three ranked causes with their fixes). The
graders follow ``eval/handgraded/RUBRIC.md`` and write one JSON line per report to ``grades-*.jsonl``.

The sample is drawn only from the frozen test splits, stratified over the three of them, among reports
whose thread confirmed a fix (a non-empty ``fix_keywords``). Nothing here is tuned on: the packet is
written once per measured commit.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "eval" / "handgraded"
FROZEN = ("test", "test_fresh", "test_fresh2")
CONFIDENT = 0.9  # "confidently wrong" counts answers given at this confidence or above


def _rows(name: str) -> list[dict[str, Any]]:
    path = ROOT / "eval" / "realworld" / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def sample(n: int, seed: int, splits: tuple[str, ...] = FROZEN) -> list[tuple[str, dict[str, Any]]]:
    """``n`` frozen reports with a confirmed fix, as evenly as possible over ``splits``, in a seeded order."""
    if any(not name.startswith("test") for name in splits):
        raise SystemExit("hand-grading samples frozen test splits only")
    rng = random.Random(seed)
    pools = {name: [r for r in _rows(name) if r.get("fix_keywords")] for name in splits}
    for pool in pools.values():
        rng.shuffle(pool)
    picked: list[tuple[str, dict[str, Any]]] = []
    while len(picked) < n and any(pools.values()):
        for name in splits:
            if pools[name] and len(picked) < n:
                picked.append((name, pools[name].pop()))
    return picked


def _fix(f: Any) -> dict[str, Any]:
    return {"title": f.title, "detail": f.detail, "code": f.code or ""}


def render(engine: Any, row: dict[str, Any]) -> dict[str, Any]:
    """Our answer to one report, reduced to what the user reads."""
    d = engine.diagnose(row["error_text"], exclude_cases=(row["id"], row.get("source", "")))
    return {
        "category": d.category,
        "confidence": round(float(d.confidence), 3),
        "title": d.title,
        "cause": d.cause,
        "fixes": [_fix(f) for f in d.fixes],
        "hypotheses": [{"cause": h.cause, "likelihood": round(float(h.likelihood), 3), "fixes": [_fix(f) for f in h.fixes]} for h in d.hypotheses[:3]],
    }


def packet(n: int, seed: int, splits: tuple[str, ...] = FROZEN, out_dir: Path = OUT) -> Path:
    from assistant.engine import Engine
    from assistant.settings import load_settings

    engine = Engine(load_settings())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "packet.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for split, row in sample(n, seed, splits):
            entry = {
                "id": row["id"], "split": split, "source": row.get("source", ""), "report": row["error_text"][:6000],
                "confirmed": row.get("note", ""), "expected_category": row["category"], "answer": render(engine, row), "commit": commit,
            }
            out.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return path


def _load_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def score(out_dir: Path = OUT) -> dict[str, Any]:
    """The three measures from the graders' files; where two graders graded a report, their agreement too."""
    entries = {e["id"]: e for e in _load_jsonl(out_dir / "packet.jsonl")}
    grades: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(out_dir.glob("grades-*.jsonl")):
        for g in _load_jsonl(path):
            if g["id"] in entries:
                grades.setdefault(g["id"], []).append({**g, "grader": path.stem})
    missing = sorted(set(entries) - set(grades))
    first = [gs[0] for gs in grades.values()]  # the primary grader's grade (files in name order)
    n = len(first)

    def share(key: str, rows: list[dict[str, Any]]) -> float | None:
        return round(sum(bool(r[key]) for r in rows) / len(rows), 3) if rows else None

    confident_wrong = [g for g in first if g["wrong"] and entries[g["id"]]["answer"]["confidence"] >= CONFIDENT]
    per_split = {}
    for split in sorted({e["split"] for e in entries.values()}):
        rows = [g for g in first if entries[g["id"]]["split"] == split]
        per_split[split] = {"n": len(rows), "first_fix_actionable": share("first_fix_actionable", rows),
                            "top3_actionable": share("top3_actionable", rows)}
    both = [gs for gs in grades.values() if len(gs) > 1]
    agreement = {k: round(sum(gs[0][k] == gs[1][k] for gs in both) / len(both), 3) if both else None
                 for k in ("first_fix_actionable", "top3_actionable", "wrong")}
    result = {
        "graded": n, "missing": missing, "commit": sorted({e["commit"] for e in entries.values()}),
        "first_fix_actionable": share("first_fix_actionable", first),
        "top3_actionable": share("top3_actionable", first),
        "confidently_wrong": round(len(confident_wrong) / n, 3) if n else None,
        "confidently_wrong_ids": sorted(g["id"] for g in confident_wrong),
        "wrong_any_confidence": share("wrong", first),
        "abstained": sum(entries[g["id"]]["answer"]["category"] == "unknown" for g in first),
        "per_split": per_split, "double_graded": len(both), "agreement": agreement,
    }
    (out_dir / "results.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def reconfidence(out_dir: Path = OUT) -> dict[str, Any]:
    """The round's grades read with today's confidences. Where today's answer has the graded answer's category and
    first fix, the grade carries over and only the stated confidence is new; other reports are counted, not scored."""
    from assistant.engine import Engine
    from assistant.settings import load_settings

    entries = {e["id"]: e for e in _load_jsonl(out_dir / "packet.jsonl")}
    grades: dict[str, dict[str, Any]] = {}
    for path in sorted(out_dir.glob("grades-*.jsonl")):
        for g in _load_jsonl(path):
            grades.setdefault(g["id"], g)  # the primary grader's grade, as in score()
    engine = Engine(load_settings(llm="none"))
    kept, rows = [], []
    for gid, entry in sorted(entries.items()):
        then = entry["answer"]
        now = engine.diagnose(entry["report"])
        same = now.category == then["category"] and (now.fixes[0].title if now.fixes else None) == (then["fixes"][0]["title"] if then["fixes"] else None)
        rows.append({"id": gid, "same_answer": same, "wrong": grades[gid]["wrong"], "confidence_then": then["confidence"],
                     "confidence_now": round(now.confidence, 4)})
        if same:
            kept.append(rows[-1])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    result = {
        "commit": commit, "graded": len(entries), "same_answer": len(kept),
        "confidently_wrong_then": round(sum(r["wrong"] and r["confidence_then"] >= CONFIDENT for r in rows) / len(rows), 3),
        "confidently_wrong_now": round(sum(r["wrong"] and r["confidence_now"] >= CONFIDENT for r in kept) / len(rows), 3) if len(kept) == len(rows) else None,
        "confidently_wrong_now_among_same_answers": sum(r["wrong"] and r["confidence_now"] >= CONFIDENT for r in kept),
        "reports": rows,
    }
    (out_dir / "reconfidence.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result



def _answer_key(answer: dict[str, Any]) -> tuple[Any, ...]:
    """What a grade depends on: the family, the fixes in order, and the top three causes' fixes."""
    return (answer["category"], tuple(f["title"] for f in answer["fixes"]),
            tuple(tuple(f["title"] for f in h.get("fixes", [])) for h in answer.get("hypotheses", [])[:3]))


def changed(rounds: tuple[Path, ...], out_dir: Path) -> Path:
    """A packet of today's answers that differ from the graded ones, to be graded afresh (same rubric)."""
    from assistant.engine import Engine
    from assistant.settings import load_settings

    engine = Engine(load_settings())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "packet.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for folder in rounds:
            for entry in _load_jsonl(folder / "packet.jsonl"):
                now = render(engine, {"id": entry["id"], "source": entry.get("source", ""), "error_text": entry["report"]})
                if _answer_key(now) != _answer_key(entry["answer"]):
                    out.write(json.dumps({**entry, "answer": now, "commit": commit, "round": folder.name}, ensure_ascii=False) + "\n")
    return path


def today(rounds: tuple[Path, ...], regrade_dir: Path) -> dict[str, Any]:
    """Each round measured on today's answers: the fresh grades where the answer changed, the primary grader's grade
    elsewhere (its answer is unchanged; its confidence is today's). Writes ``regrade_dir/results.json``."""
    fresh = {g["id"]: g for path in sorted(regrade_dir.glob("grades-*.jsonl")) for g in _load_jsonl(path)}
    fresh_answers = {e["id"]: e["answer"] for e in _load_jsonl(regrade_dir / "packet.jsonl")}
    if set(fresh_answers) - set(fresh):
        raise SystemExit(f"not graded yet: {sorted(set(fresh_answers) - set(fresh))}")
    from assistant.engine import Engine
    from assistant.settings import load_settings

    engine = Engine(load_settings())
    result: dict[str, Any] = {"commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip(),
                              "rounds": {}}
    for folder in rounds:
        entries = _load_jsonl(folder / "packet.jsonl")
        grades: dict[str, dict[str, Any]] = {}
        for path in sorted(folder.glob("grades-*.jsonl")):
            for g in _load_jsonl(path):
                grades.setdefault(g["id"], g)
        then = {"first": 0, "top3": 0, "confidently_wrong": 0}
        now = {"first": 0, "top3": 0, "confidently_wrong": 0}
        regraded = 0
        for entry in entries:
            old = grades[entry["id"]]
            then["first"] += old["first_fix_actionable"]
            then["top3"] += old["top3_actionable"]
            then["confidently_wrong"] += old["wrong"] and entry["answer"]["confidence"] >= CONFIDENT
            if entry["id"] in fresh:
                grade, confidence = fresh[entry["id"]], fresh_answers[entry["id"]]["confidence"]
                regraded += 1
            else:
                current = render(engine, {"id": entry["id"], "source": entry.get("source", ""), "error_text": entry["report"]})
                if _answer_key(current) != _answer_key(entry["answer"]):
                    raise SystemExit(f"{entry['id']}: the answer changed since the regrade packet was written; run `changed` again")
                grade, confidence = old, current["confidence"]
            now["first"] += grade["first_fix_actionable"]
            now["top3"] += grade["top3_actionable"]
            now["confidently_wrong"] += grade["wrong"] and confidence >= CONFIDENT
        n = len(entries)
        result["rounds"][str(folder.relative_to(ROOT)) if folder.is_relative_to(ROOT) else str(folder)] = {
            "reports": n, "regraded": regraded,
            "then": {k: round(v / n, 3) for k, v in then.items()}, "now": {k: round(v / n, 3) for k, v in now.items()},
        }
    (regrade_dir / "results.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("packet")
    p.add_argument("--n", type=int, default=60)
    p.add_argument("--seed", type=int, default=18)
    p.add_argument("--splits", default=",".join(FROZEN), help="frozen splits to sample, comma-separated")
    p.add_argument("--out", type=Path, default=OUT, help="folder for the packet (and later the grades and results)")
    s = sub.add_parser("score")
    s.add_argument("--out", type=Path, default=OUT)
    r = sub.add_parser("reconfidence", help="the grades with today's confidences, where today's answer is the graded one")
    r.add_argument("--out", type=Path, default=OUT)
    for name, text in (("changed", "a packet of today's answers that differ from the graded ones"),
                       ("today", "every round measured on today's answers (fresh grades where they changed)")):
        c = sub.add_parser(name, help=text)
        c.add_argument("--rounds", default="eval/handgraded,eval/handgraded/round2", help="graded rounds, comma-separated")
        c.add_argument("--out", type=Path, default=OUT / "regrade")
    args = parser.parse_args(argv)
    if args.cmd == "packet":
        print(packet(args.n, args.seed, tuple(x for x in args.splits.split(",") if x), args.out))
    elif args.cmd in ("changed", "today"):
        rounds = tuple(ROOT / x for x in args.rounds.split(",") if x)
        print(changed(rounds, args.out) if args.cmd == "changed" else json.dumps(today(rounds, args.out), indent=2))
    elif args.cmd == "reconfidence":
        result = reconfidence(args.out)
        print(json.dumps({k: v for k, v in result.items() if k != "reports"}, indent=2))
    else:
        print(json.dumps(score(args.out), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
