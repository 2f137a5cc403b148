"""The retrieval index shipped in the wheel (``assistant/kb/data/index``), built at release time.

``scripts/build_shipped_index.py`` builds it from the shipped documents with the default (static)
encoder: the same files as an index under ``$TORCHHELP_HOME/index`` (chunks, documents, BM25 postings,
FAISS vectors in float32, a manifest with a size and CRC-32 per file), plus, in the manifest, a
SHA-256 per knowledge document (``sources``) and the embedding model's identity (``model_key``).

At run time (``kb.index.ensure_index``) a home without documents of its own loads it in place
(nothing is built or copied) when the knowledge documents are the ones it was built from and the
encoder and model in use are the ones that made its vectors; ``kb add`` reuses its vectors so only
the user's documents are embedded; a checkout whose documents were edited builds a local index as
before and says why in one line.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
BUILD_SCRIPT = "scripts/build_shipped_index.py"
SHIPPED_ENCODER = "static"  # the encoder kind the shipped vectors are made with (the default)


def shipped_dir() -> Path:
    """The folder of the shipped index (inside the package: a checkout and a wheel alike)."""
    return DATA_DIR / "index"


def source_hashes(knowledge: Path) -> dict[str, str]:
    """SHA-256 (first 16 hex digits) of every knowledge document, by path under ``knowledge``.

    The same files ``documents.load_builtin`` reads (``*.md`` except README.md); raw bytes, so the
    check costs a read of ~2 MB, not a parse of every document's front matter.
    """
    out: dict[str, str] = {}
    for path in sorted(knowledge.rglob("*.md")):
        if path.name.lower() != "readme.md" and path.is_file():
            out[path.relative_to(knowledge).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return out


def describe_difference(shipped: dict[str, str], current: dict[str, str], limit: int = 3) -> str:
    """What differs between two ``source_hashes`` tables, in a few words ("2 changed: a.md, b.md; 1 added: c.md")."""
    changed = sorted(p for p in current if p in shipped and shipped[p] != current[p])
    added = sorted(p for p in current if p not in shipped)
    removed = sorted(p for p in shipped if p not in current)
    parts = []
    for label, paths in (("changed", changed), ("added", added), ("removed", removed)):
        if paths:
            more = f" and {len(paths) - limit} more" if len(paths) > limit else ""
            parts.append(f"{len(paths)} {label}: {', '.join(paths[:limit])}{more}")
    return "; ".join(parts) or "no document differs"


def model_identity() -> str | None:
    """The installed embedding model's content key (static.model_key), or None when it is not installed."""
    from assistant.errors import KnowledgeError
    from assistant.kb.encoder import model_dir

    try:
        root = model_dir()
    except KnowledgeError:
        return None
    return _model_key(str(root))


@lru_cache(maxsize=4)
def _model_key(root: str) -> str:
    from assistant.kb.static import model_key

    return model_key(Path(root))


def read_manifest(directory: Path | None = None) -> dict | None:
    """The shipped index's manifest, or None when the package carries none (or it does not parse)."""
    try:
        manifest = json.loads(((directory or shipped_dir()) / "manifest.json").read_bytes())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("shipped") else None


def mismatch(manifest: dict, knowledge: Path, dense: bool, encoder_id: str) -> str | None:
    """Why the shipped index cannot stand for ``knowledge`` with this encoder (None when it can)."""
    from assistant.kb.index import INDEX_VERSION

    if manifest.get("version") != INDEX_VERSION:
        return f"it has index version {manifest.get('version')}, this torchhelp reads {INDEX_VERSION}"
    sources = manifest.get("sources")
    current = source_hashes(knowledge)
    if not isinstance(sources, dict) or sources != current:
        where = knowledge.name + "/"
        return f"{where} differs from the documents it was built from ({describe_difference(sources if isinstance(sources, dict) else {}, current)})"
    if dense:
        if not manifest.get("dense") or manifest.get("encoder") != encoder_id:
            return f"its vectors come from the {manifest.get('encoder')} encoder, this run uses {encoder_id}"
        key = model_identity()
        if key is None or manifest.get("model_key") != key:
            return f"its vectors come from another copy of the embedding model ({manifest.get('model_key')}, installed: {key})"
    return None
