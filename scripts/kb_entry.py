"""Append a structured fix or cause entry to a knowledge document, safely while others edit other entries.

Several people (and helpers) move remedies out of code into the documents at once; a document shared by
several rule modules must not lose an entry to a concurrent edit. This script takes an exclusive lock
on the document, re-reads it, refuses a duplicate id, inserts the entry at the end of its section and
writes the file back atomically.

    python scripts/kb_entry.py fix   matmul-shape-mismatch lazy-linear "Let PyTorch infer in_features" \\
        --detail "nn.LazyLinear sets in_features on the first forward pass." --code 'self.{{layer|fc}} = nn.LazyLinear({{out_features|num_classes}})'
    python scripts/kb_entry.py cause cuda-oom resume-on-gpu "A resumed checkpoint lands on the GPU" \\
        --text "torch.load restores tensors to the device they were saved from." --check "..." --fixes load-to-cpu --cues "resume,checkpoint"

Prints the entry's reference (doc-id#entry-id). Exit 1 with one line on any problem.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KNOWLEDGE = ROOT / "knowledge"
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def _doc_path(doc_id: str) -> Path:
    found = [p for p in KNOWLEDGE.rglob(f"{doc_id}.md")]
    if len(found) != 1:
        raise SystemExit(f"kb_entry: {'no' if not found else 'more than one'} document {doc_id!r} under knowledge/")
    return found[0]


def _entry(kind: str, args: argparse.Namespace) -> str:
    lines = [f"### {args.title.strip()} {{#{args.id}}}"]
    if kind == "fix":
        if args.detail:
            lines.append(args.detail.strip())
        if args.code:
            lines += [f"```{args.lang}", args.code.rstrip("\n"), "```"]
    else:
        lines.append(args.text.strip())
        lines.append(f"- check: {args.check.strip()}")
        if args.fixes:
            lines.append(f"- fixes: {args.fixes.strip()}")
        if args.cues:
            lines.append(f"- cues: {args.cues.strip()}")
    return "\n".join(lines) + "\n"


def insert(body: str, section: str, entry: str, entry_id: str) -> str:
    """The document with ``entry`` at the end of ``## <section>`` (the section is created before ``## Example`` if missing)."""
    if re.search(r"\{#" + re.escape(entry_id) + r"\}", body):
        raise SystemExit(f"kb_entry: an entry with id {entry_id!r} already exists in this document")
    heads = list(re.finditer(r"^## +(.+?)\s*$", body, re.M))
    for i, m in enumerate(heads):
        if m.group(1).strip().lower() == section:
            end = heads[i + 1].start() if i + 1 < len(heads) else len(body)
            before = body[:end].rstrip("\n")
            return f"{before}\n\n{entry}\n" + body[end:]
    # No such section: add it before "## Example" (or at the end).
    example = next((m for m in heads if m.group(1).strip().lower().startswith("example")), None)
    block = f"## {section.capitalize()}\n\n{entry}\n"
    if example is None:
        return body.rstrip("\n") + "\n\n" + block
    return body[: example.start()] + block + body[example.start():]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=("fix", "cause"))
    ap.add_argument("doc")
    ap.add_argument("id")
    ap.add_argument("title")
    ap.add_argument("--detail", default="")
    ap.add_argument("--code", default="")
    ap.add_argument("--lang", default="python", help="the code block's language (python, bash, ...)")
    ap.add_argument("--text", default="")
    ap.add_argument("--check", default="")
    ap.add_argument("--fixes", default="")
    ap.add_argument("--cues", default="")
    args = ap.parse_args(argv)
    if not _ID.match(args.id):
        raise SystemExit(f"kb_entry: the id {args.id!r} must be kebab-case")
    if args.kind == "cause" and not (args.text and args.check):
        raise SystemExit("kb_entry: a cause needs --text and --check")
    path = _doc_path(args.doc)
    entry = _entry(args.kind, args)
    with open(path.with_suffix(".md.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            body = path.read_text(encoding="utf-8")
            new = insert(body, "fixes" if args.kind == "fix" else "causes", entry, args.id)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(new)
            os.replace(tmp, path)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    # The lock file stays (ignored by git): unlinking it would let a waiting writer and a new one lock two different files.
    print(f"{args.doc}#{args.id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
