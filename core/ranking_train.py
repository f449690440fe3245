"""Learn the provision ranker's weights (core/ranking.py) from questions with verbatim evidence.

Each training question is a user-style row (`question`, optional `conversation_history`,
`collection`, `evidence`: verbatim spans of the provisions that answer it). A provision is relevant to
an evidence span when its text contains the span (folded as the scorer folds it). The weights
minimise, summed over the questions and their evidence spans, the softmax cross-entropy of "a
provision holding this span" against every provision of the collection, plus an L2 penalty: a
listwise objective, so the score only has to put the right provisions above the others of the same
question, and a question with two spans in two provisions pushes both up.

Only `id`, `question`, `conversation_history`, `collection` and `evidence` of a row are read;
unanswerable rows (no evidence) are skipped.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from core.eval.user_style import fold
from core.ranking import FEATURES, RankerWeights
from core.types import Chunk, Turn

DEFAULT_L2 = 1e-3

FeatureFn = Callable[[str, Sequence[Turn], str], tuple[np.ndarray, list[Chunk]]]


@dataclass(frozen=True)
class TrainingQuestion:
    id: str
    collection: str
    question: str
    history: tuple[Turn, ...]
    evidence: tuple[str, ...]


@dataclass
class TrainingSet:
    examples: list[tuple[np.ndarray, list[np.ndarray]]] = field(default_factory=list)  # (X, rows per span)
    skipped: list[str] = field(default_factory=list)  # ids whose evidence no provision contains


def read_training_questions(paths: Iterable[Path]) -> list[TrainingQuestion]:
    out: list[TrainingQuestion] = []
    for path in paths:
        for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from None
            evidence = tuple(str(e) for e in row.get("evidence") or [])
            if not row.get("answerable", bool(evidence)) or not evidence:
                continue
            history = tuple(
                Turn(t["role"], t["content"]) for t in row.get("conversation_history") or [] if t.get("role") in ("user", "assistant")
            )
            out.append(TrainingQuestion(str(row["id"]), str(row["collection"]), str(row["question"]), history, evidence))
    return out


def build_training_set(questions: Sequence[TrainingQuestion], features: FeatureFn, progress=None) -> TrainingSet:  # noqa: ANN001
    data = TrainingSet()
    folded: dict[str, list[str]] = {}
    for q in questions:
        x, chunks = features(q.question, q.history, q.collection)
        if q.collection not in folded:
            folded[q.collection] = [fold(c.text) for c in chunks]
        texts = folded[q.collection]
        groups = [np.flatnonzero([fold(e) in t for t in texts]) for e in q.evidence]
        groups = [g for g in groups if len(g)]
        if not groups:
            data.skipped.append(q.id)
        else:
            data.examples.append((x, groups))
        if progress is not None:
            progress()
    return data


def listwise_loss(w: np.ndarray, examples: Sequence[tuple[np.ndarray, list[np.ndarray]]], l2: float) -> tuple[float, np.ndarray]:
    """Mean over (question, span) of -log(softmax mass on the provisions holding the span), + l2 |w|^2."""
    loss = 0.0
    grad = np.zeros_like(w)
    count = 0
    for x, groups in examples:
        s = x @ w
        m = s.max()
        p = np.exp(s - m)
        z = p.sum()
        p_all = p / z
        expected_all = p_all @ x
        for rows in groups:
            ps = p[rows]
            zs = ps.sum()
            loss += (np.log(z) + m) - (np.log(zs) + m)
            grad += expected_all - (ps / zs) @ x[rows]
            count += 1
    loss = loss / max(count, 1) + l2 * float(w @ w)
    grad = grad / max(count, 1) + 2 * l2 * w
    return float(loss), grad


def fit_weights(data: TrainingSet, l2: float = DEFAULT_L2) -> np.ndarray:
    from scipy.optimize import minimize  # scikit-learn's dependency; only needed to train

    if not data.examples:
        raise ValueError("no training question has evidence that a provision contains")
    w0 = np.zeros(len(FEATURES), dtype=np.float64)
    examples = [(x.astype(np.float64), groups) for x, groups in data.examples]
    result = minimize(listwise_loss, w0, args=(examples, l2), jac=True, method="L-BFGS-B")
    return result.x


def train(paths: Sequence[Path], features: FeatureFn, l2: float = DEFAULT_L2, progress=None) -> tuple[RankerWeights, TrainingSet]:  # noqa: ANN001
    questions = read_training_questions(paths)
    data = build_training_set(questions, features, progress)
    w = fit_weights(data, l2)
    note = f"{len(data.examples)} questions from {', '.join(Path(p).name for p in paths)}; l2 {l2:g}"
    return RankerWeights(w.astype(np.float32), note), data
