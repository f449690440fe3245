"""Embeddings of the sentences answers are quoted from, computed at ingest and kept on disk.

The extractive generator re-scores its best candidate sentences by meaning. Embedding them at
question time costs ~15 ms a sentence on two cores; computing them once at ingest keeps that off
the hot path. Keys are sha1 of the sentence text, so any collection or document can share the store;
a sentence never seen before (e.g. after a settings change) is embedded on demand and kept in memory.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

Embed = Callable[[list[str]], np.ndarray]


def _key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


class SentenceVectorStore:
    def __init__(self, directory: Path, embed: Embed) -> None:
        self.directory = Path(directory)
        self._embed = embed
        self._rows: dict[str, int] | None = None  # key -> row in self._matrix
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._extra: dict[str, np.ndarray] = {}  # embedded on demand, not persisted
        self._lock = threading.Lock()

    # -- reading -------------------------------------------------------------------------------

    def get(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised row per text, embedding only what neither disk nor memory has."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        keys = [_key(t) for t in texts]
        with self._lock:
            rows = self._load()
            missing = {k: t for k, t in zip(keys, texts) if k not in rows and k not in self._extra}
        if missing:
            fresh = self._embed(list(missing.values()))
            with self._lock:
                self._extra.update(zip(missing, np.asarray(fresh, dtype=np.float32)))
        with self._lock:
            return np.stack([self._row(k) for k in keys])

    def _row(self, key: str) -> np.ndarray:
        row = self._rows.get(key) if self._rows is not None else None
        return self._matrix[row] if row is not None else self._extra[key]

    def _load(self) -> dict[str, int]:
        """The stored rows by key, read from disk on first use."""
        if self._rows is not None:
            return self._rows
        keys_path, vectors_path = self._paths()
        if keys_path.is_file() and vectors_path.is_file():
            keys = json.loads(keys_path.read_text(encoding="utf-8"))
            matrix = np.load(vectors_path, allow_pickle=False)
            if len(keys) == len(matrix):
                self._rows = {k: i for i, k in enumerate(keys)}
                self._matrix = matrix
                return self._rows
        self._rows = {}
        return self._rows

    # -- writing (ingest) ----------------------------------------------------------------------

    def add(self, texts: Sequence[str]) -> int:
        """Embed the texts not stored yet and persist them; returns how many were new."""
        with self._lock:
            rows = self._load()
            new = {k: t for t in texts if (k := _key(t)) not in rows}
        if not new:
            return 0
        vectors = np.asarray(self._embed(list(new.values())), dtype=np.float32)
        with self._lock:
            keys = list(rows) + list(new)
            matrix = np.vstack([self._matrix, vectors]) if len(self._matrix) else vectors
            self._save(keys, matrix)
            self._rows = {k: i for i, k in enumerate(keys)}
            self._matrix = matrix
        return len(new)

    def _save(self, keys: list[str], matrix: np.ndarray) -> None:
        """Write both files beside the old ones, then swap them in (readers see old or new)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        keys_path, vectors_path = self._paths()
        tmp_keys, tmp_vectors = keys_path.with_suffix(".tmp"), vectors_path.with_suffix(".tmp.npy")
        tmp_keys.write_text(json.dumps(keys), encoding="utf-8")
        np.save(tmp_vectors, matrix)
        os.replace(tmp_vectors, vectors_path)
        os.replace(tmp_keys, keys_path)

    def _paths(self) -> tuple[Path, Path]:
        return self.directory / "keys.json", self.directory / "vectors.npy"
