"""Optional cross-encoder reranking of retrieved chunks (the HyPA-RAG paper used bge-reranker-large).

A cross-encoder reads the question and one passage together and scores their relevance; it is
slower than the bi-encoder + BM25 retrieval but more precise, so it reorders a short candidate list
(e.g. the fused top 20) and keeps the best `top_k`.

Disabled by default (`HYPA_RERANKER_MODEL` empty -> `NoReranker`, the identity). Nothing here may
reach the network: the model must be a local folder, or a Hugging Face repo id that is already in
the local cache; it is loaded with `local_files_only=True` and the hub is forced offline first.
The model loads lazily (first `rerank` call) under a lock; the folder is checked at construction so
that a bad setting fails fast with a readable message.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from core.errors import RerankerUnavailable
from core.types import Chunk, ScoredChunk

if TYPE_CHECKING:  # heavy import stays lazy at run time
    from sentence_transformers import CrossEncoder

DEFAULT_MAX_LENGTH = 512
_WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


@runtime_checkable
class Reranker(Protocol):
    """What the pipeline needs from a reranking stage."""

    @property
    def name(self) -> str:
        """Short identity for logs and result records ("none" when disabled)."""

    def rerank(self, query: str, candidates: Sequence[ScoredChunk], top_k: int) -> list[ScoredChunk]:
        """The best `top_k` of `candidates` for `query`, best first."""


class NoReranker:
    """Identity stage: keeps the retrieval order and scores, cut to `top_k`."""

    name = "none"

    def rerank(self, query: str, candidates: Sequence[ScoredChunk], top_k: int) -> list[ScoredChunk]:
        return list(candidates[: max(top_k, 0)])


def passage_text(chunk: Chunk) -> str:
    """What the cross-encoder reads for a chunk: its citation label and heading, then its text."""
    header = " ".join(part.strip() for part in (chunk.label, chunk.heading) if part and part.strip())
    return f"{header}\n{chunk.text}" if header else chunk.text


# -- locating and checking the model (cheap: no torch / transformers import) --------------------


def _force_offline() -> None:
    # Must happen before huggingface_hub / transformers are imported: they read it at import time.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def _looks_like_repo_id(model: str) -> bool:
    parts = model.split("/")
    return len(parts) == 2 and all(parts) and not model.startswith((".", "~")) and "\\" not in model


def _from_local_hf_cache(repo_id: str) -> Path | None:
    """The cached snapshot folder of `repo_id`, if it was downloaded earlier; never downloads."""
    _force_offline()
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception:  # not cached, hub library missing, malformed id: all mean "not available"
        return None


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RerankerUnavailable(f"Cannot read {path}: {exc}") from exc


def _check_cross_encoder_dir(path: Path) -> None:
    """Raise RerankerUnavailable unless `path` holds a single-score cross-encoder with weights."""
    hint = (
        "HYPA_RERANKER_MODEL must be a local cross-encoder folder (a transformers *ForSequenceClassification "
        "checkpoint with one output, e.g. bge-reranker-large), or empty to disable reranking."
    )
    config_file = path / "config.json"
    if not config_file.is_file():
        raise RerankerUnavailable(f"Reranker folder {path} has no config.json, so it is not a model folder. {hint}")
    config = _read_json(config_file)

    st_config = path / "config_sentence_transformers.json"
    st_type = _read_json(st_config).get("model_type") if st_config.is_file() else None
    if st_type and st_type != "CrossEncoder":
        raise RerankerUnavailable(
            f"{path} is a sentence-transformers {st_type} (it embeds texts one at a time), not a "
            f"cross-encoder. {hint}"
        )
    architectures = config.get("architectures") or []
    is_classifier = any(str(a).endswith("ForSequenceClassification") for a in architectures)
    if not is_classifier and st_type != "CrossEncoder":
        found = ", ".join(map(str, architectures)) or "no architecture"
        raise RerankerUnavailable(
            f"{path} holds {found}, not a cross-encoder (*ForSequenceClassification): loading it would "
            f"score with an untrained, random head. {hint}"
        )
    if is_classifier:
        labels = config.get("id2label")
        num_labels = int(config.get("num_labels", len(labels) if labels else 2))
        if num_labels != 1:
            raise RerankerUnavailable(
                f"{path} is a classifier with {num_labels} outputs; a reranker gives one relevance "
                f"score per (question, passage) pair. {hint}"
            )
    if not any((path / name).is_file() for name in _WEIGHT_FILES):
        raise RerankerUnavailable(
            f"Reranker folder {path} has no weights ({' or '.join(_WEIGHT_FILES[::2])}). {hint}"
        )


def resolve_reranker_dir(model: str | os.PathLike[str]) -> Path:
    """A local folder as given, else a repo id found in the local Hugging Face cache; checked."""
    text = str(model).strip()
    if not text:
        raise RerankerUnavailable("No reranker model given (HYPA_RERANKER_MODEL is empty).")
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise RerankerUnavailable(f"Reranker model {path.resolve()} is a file; give the model's folder.")
        path = path.resolve()
    else:
        cached = _from_local_hf_cache(text) if _looks_like_repo_id(text) else None
        if cached is None:
            raise RerankerUnavailable(
                f"Reranker model folder {path.resolve()} does not exist"
                + (f", and {text!r} is not in the local Hugging Face cache" if _looks_like_repo_id(text) else "")
                + ". Nothing is downloaded: copy the cross-encoder (e.g. bge-reranker-large) to a local "
                "folder and set HYPA_RERANKER_MODEL to it, or leave it empty to disable reranking."
            )
        path = cached
    _check_cross_encoder_dir(path)
    return path


# -- the cross-encoder stage -----------------------------------------------------------------


def _quiet_weight_loading() -> None:
    # transformers prints a "Loading weights" bar on stderr for every load; it would garble CLI output.
    with contextlib.suppress(Exception):  # cosmetic only
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


class CrossEncoderReranker:
    """Reranks candidates with a local sentence-transformers `CrossEncoder`.

    `score` of each returned chunk is the cross-encoder's raw relevance logit (higher is better;
    comparable within one model only), or its sigmoid in [0, 1] with `sigmoid=True`. Ties keep the
    candidates' incoming order. Candidates repeating a chunk id are scored once (first copy kept).
    Thread-safe: the model loads once under a lock; scoring may run concurrently.
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        max_length: int = DEFAULT_MAX_LENGTH,
        device: str = "cpu",
        batch_size: int | None = None,
        sigmoid: bool = False,
    ) -> None:
        if max_length < 8:
            raise ValueError(f"max_length must be at least 8 tokens, got {max_length}")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be positive or None (one batch), got {batch_size}")
        self.model_dir = resolve_reranker_dir(model)  # fail fast, before any heavy import
        self.max_length = max_length
        self.device = device
        self.batch_size = batch_size
        self.sigmoid = sigmoid
        self._model: CrossEncoder | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.model_dir.name

    @property
    def is_loaded(self) -> bool:
        return self._model is not None

    def _get_model(self) -> CrossEncoder:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._load_model()
        return self._model

    def _load_model(self) -> CrossEncoder:
        _force_offline()
        try:
            import torch
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise RerankerUnavailable(
                "Reranking needs sentence-transformers and torch: `pip install sentence-transformers`."
            ) from exc
        _quiet_weight_loading()
        try:
            model = CrossEncoder(
                str(self.model_dir),
                device=self.device,
                local_files_only=True,
                max_length=self.max_length,
                activation_fn=torch.nn.Sigmoid() if self.sigmoid else torch.nn.Identity(),
            )
        except Exception as exc:
            raise RerankerUnavailable(f"Could not load the cross-encoder in {self.model_dir}: {exc}") from exc
        if model.num_labels != 1:
            raise RerankerUnavailable(
                f"{self.model_dir} loads with {model.num_labels} outputs; a reranker needs exactly one."
            )
        return model

    def load(self) -> CrossEncoderReranker:
        """Load the model now (e.g. at bot start) instead of on the first question."""
        self._get_model()
        return self

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Relevance of each passage to `query`, in the passages' order (one forward batch by default)."""
        if not passages:
            return np.zeros(0, dtype=np.float32)
        pairs = [(query, p) for p in passages]
        scores = self._get_model().predict(
            pairs,
            batch_size=self.batch_size or len(pairs),
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return np.asarray(scores, dtype=np.float32).reshape(-1)

    def rerank(self, query: str, candidates: Sequence[ScoredChunk], top_k: int) -> list[ScoredChunk]:
        if top_k <= 0 or not candidates:
            return []
        unique: list[ScoredChunk] = []
        seen: set[str] = set()
        for sc in candidates:
            if sc.chunk.id not in seen:
                seen.add(sc.chunk.id)
                unique.append(sc)
        scores = self.score(query, [passage_text(sc.chunk) for sc in unique])
        values = [float(s) if math.isfinite(s) else -math.inf for s in scores]
        order = sorted(range(len(unique)), key=lambda i: -values[i])  # stable: ties keep input order
        return [replace(unique[i], score=values[i]) for i in order[:top_k]]


def build_reranker(
    model: str | os.PathLike[str] | None,
    *,
    max_length: int = DEFAULT_MAX_LENGTH,
    device: str = "cpu",
) -> Reranker:
    """`NoReranker` when `model` is empty, else a (lazily loaded) `CrossEncoderReranker`."""
    if model is None or not str(model).strip():
        return NoReranker()
    return CrossEncoderReranker(model, max_length=max_length, device=device)

