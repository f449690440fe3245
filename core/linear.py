"""Small linear scoring models (a weight per named feature) and the one file they ship in.

Two choices of the offline engine are learned from questions written for this project: which
provisions to read (core/ranking.py, model "provisions") and which of their sentences to quote
(core/extractive.py, model "sentences"). Both are a weighted sum of features; `hypa ranker train`
fits them (core/ranking_train.py) and writes core/ranking_weights.json:

    {"trained_on": "...", "models": {"provisions": {"weights": {"chunk": 6.2, ...}}, "sentences": {...}}}

A file whose features differ from the code's is refused with a message saying to retrain.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from core.errors import ModelWeightsError

DEFAULT_WEIGHTS_FILE = Path(__file__).with_name("ranking_weights.json")


@dataclass(frozen=True)
class LinearModel:
    features: tuple[str, ...]
    weights: np.ndarray  # one per feature

    def __post_init__(self) -> None:
        if len(self.weights) != len(self.features):
            raise ValueError(f"{len(self.weights)} weights for {len(self.features)} features")

    @classmethod
    def of(cls, features: tuple[str, ...], weights: Mapping[str, float]) -> "LinearModel":
        return cls(features, np.array([float(weights.get(f, 0.0)) for f in features], dtype=np.float32))

    def score(self, x: np.ndarray) -> np.ndarray:
        return x @ self.weights

    def as_dict(self) -> dict[str, float]:
        return {name: round(float(w), 6) for name, w in zip(self.features, self.weights)}


def load_model(path: Path, name: str, features: tuple[str, ...]) -> LinearModel:
    """Model `name` of the weights file, checked against the features the code computes."""
    data = _read(path)
    models = data.get("models")
    if not isinstance(models, dict) or not isinstance(models.get(name), dict):
        raise ModelWeightsError(f"{path}: no model {name!r} (retrain with `hypa ranker train`)")
    weights = models[name].get("weights")
    if not isinstance(weights, dict):
        raise ModelWeightsError(f"{path}: model {name!r} needs a 'weights' object")
    if set(weights) != set(features):
        missing, unknown = set(features) - set(weights), set(weights) - set(features)
        raise ModelWeightsError(
            f"{path}: model {name!r} has weights for other features (missing {sorted(missing)}, "
            f"unknown {sorted(unknown)}); retrain with `hypa ranker train`"
        )
    try:
        vector = np.array([float(weights[f]) for f in features], dtype=np.float32)
    except (TypeError, ValueError):
        raise ModelWeightsError(f"{path}: every weight of {name!r} must be a number") from None
    if not np.all(np.isfinite(vector)):
        raise ModelWeightsError(f"{path}: the weights of {name!r} must be finite")
    return LinearModel(features, vector)


def known_weights(path: Path, name: str) -> dict[str, float]:
    """Model `name`'s weights by feature as the file has them, whatever features the code computes
    now (for extending a model with a new feature: `hypa ranker train --extend`)."""
    models = _read(path).get("models")
    weights = models.get(name, {}).get("weights") if isinstance(models, dict) else None
    if not isinstance(weights, dict):
        raise ModelWeightsError(f"{path}: no model {name!r} to extend")
    try:
        return {str(f): float(w) for f, w in weights.items()}
    except (TypeError, ValueError):
        raise ModelWeightsError(f"{path}: every weight of {name!r} must be a number") from None


def trained_on(path: Path) -> str:
    return str(_read(path).get("trained_on", ""))


def save_models(path: Path, models: Mapping[str, LinearModel], note: str) -> None:
    payload = {"trained_on": note, "models": {name: {"weights": m.as_dict()} for name, m in models.items()}}
    Path(path).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def _read(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelWeightsError(f"model weights not found: {path} (train them: `hypa ranker train`)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelWeightsError(f"model weights unreadable: {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ModelWeightsError(f"{path}: expected a JSON object")
    return data
