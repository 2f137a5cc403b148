"""Build the retrieval index shipped in the wheel: ``assistant/kb/data/index`` and ``assistant/kb/data/static_mean.json``.

Run it after editing anything under knowledge/ (tests/test_shipped_index.py fails until you do) and
commit both paths. The index is the one a home would build (chunks, documents, BM25 postings, FAISS
vectors in float32 from the default static encoder, a size and CRC-32 per file) plus, in its
manifest, a SHA-256 per knowledge document and the embedding model's identity; nothing in it
depends on the time or the machine's name, so an unchanged corpus rebuilds to the same bytes
(up to float rounding of a different BLAS). ``static_mean.json`` is the static encoder's table mean
for this model: with it a fresh machine computes table rows on demand instead of distilling all of
them before the first answer.

    python scripts/build_shipped_index.py            # rebuild when stale (no-op otherwise)
    python scripts/build_shipped_index.py --force    # rebuild anyway
    python scripts/build_shipped_index.py --check    # exit 1 when stale (what CI's test checks)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def stale_reason(knowledge: Path) -> str | None:
    """Why the committed shipped index does not fit knowledge/ and the installed model (None when it does)."""
    from assistant.kb import shipped
    from assistant.kb.encoder import encoder_id

    manifest = shipped.read_manifest()
    if manifest is None:
        return f"there is no shipped index under {shipped.shipped_dir()}"
    return shipped.mismatch(manifest, knowledge, dense=True, encoder_id=encoder_id(shipped.SHIPPED_ENCODER))


def build(knowledge: Path) -> dict:
    """Write the shipped index and the static mean; returns the index manifest."""
    from assistant.kb import index, shipped
    from assistant.kb.documents import corpus_hash, load_builtin
    from assistant.kb.encoder import get_encoder
    from assistant.kb.static import LazyTable, StaticMiniLM, write_shipped_mean

    docs = load_builtin(knowledge)
    encoder = get_encoder(shipped.SHIPPED_ENCODER).inner
    assert isinstance(encoder, StaticMiniLM)
    started = time.perf_counter()
    shipped.DATA_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="th-shipped-home-") as home:
        manifest = index._build_into(  # noqa: SLF001 - the one writer of index folders
            shipped.DATA_DIR, Path(home), docs, dense=True, encoder_kind=shipped.SHIPPED_ENCODER, progress=None,
            fingerprint="shipped", knowledge_hash=corpus_hash(docs), reuse=None,
        )
    for volatile in ("built_at", "build_seconds", "embedded", "reused"):
        manifest.pop(volatile, None)
    manifest.update({
        "shipped": True, "build_id": f"shipped-{manifest['knowledge_hash']}", "model_key": shipped.model_identity(),
        "sources": shipped.source_hashes(knowledge), "built_by": shipped.BUILD_SCRIPT,
    })
    shipped.shipped_dir().chmod(0o755)  # built in a private temp folder (0700)
    (shipped.shipped_dir() / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    if not isinstance(encoder._table, LazyTable):  # a lazy table's mean is the shipped one already (same model key)
        write_shipped_mean(encoder._table, shipped.model_identity() or "")
    manifest["build_seconds"] = round(time.perf_counter() - started, 2)
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even when the shipped index is current")
    parser.add_argument("--check", action="store_true", help="only check: exit 1 when the shipped index is stale")
    parser.add_argument("--knowledge", type=Path, default=ROOT / "knowledge",
                        help="the documents to index (default knowledge/; e.g. a `git archive HEAD knowledge` export, to leave uncommitted edits out)")
    args = parser.parse_args(argv)
    if args.knowledge.name != "knowledge":
        parser.error("--knowledge must be a folder named knowledge (documents are cited as knowledge/<path>)")
    why = stale_reason(args.knowledge)
    if args.check:
        print(f"stale: {why}" if why else "current")
        return 1 if why else 0
    if why is None and not args.force:
        print("the shipped index is current (use --force to rebuild anyway)")
        return 0
    manifest = build(args.knowledge)
    from assistant.kb import shipped

    sizes = {p.name: p.stat().st_size for p in sorted(shipped.shipped_dir().iterdir())}
    print(f"built {manifest['documents']} documents ({manifest['chunks']} chunks) in {manifest['build_seconds']} s into {shipped.shipped_dir()}: "
          f"{sum(sizes.values()) / 1e6:.2f} MB ({', '.join(f'{k} {v / 1e6:.2f}' for k, v in sizes.items())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
