"""Learn the offline engine's two linear models from questions with verbatim evidence: which
provisions to read (core/ranking.py) and which of their sentences to quote (core/extractive.py).

Each training question is a user-style row (`question`, optional `conversation_history`,
`collection`, `evidence`: verbatim spans of the provisions that answer it). A provision is relevant to
an evidence span when its text contains the span, a sentence when it shares 40 characters with it
(both folded as the scorer folds text). The weights minimise, summed over the questions and their
evidence spans, the softmax cross-entropy of "an item holding this span" against all items of the
question (every provision of the collection; every sentence the answer could quote), plus an L2
penalty: a listwise objective, so a score only has to put the right items above the others of the
same question, and a question with two spans pushes both up. The sentence model is fitted on the
provisions the freshly fitted provision model retrieves, so it learns the situation it will meet.

Only `id`, `question`, `conversation_history`, `collection` and `evidence` of a row are read;
unanswerable rows (no evidence) are skipped.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from core.eval.report import read_jsonl
from core.eval.user_style import fold, overlaps
from core.linear import LinearModel
from core.types import Turn

DEFAULT_L2 = 1e-3

# (question, history, collection) -> (feature rows, the text of the item each row describes)
FeatureFn = Callable[[str, Sequence[Turn], str], tuple[np.ndarray, list[str]]]


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
        for _, row in read_jsonl(Path(path), "training questions"):
            evidence = tuple(str(e) for e in row.get("evidence") or [])
            if not row.get("answerable", bool(evidence)) or not evidence:
                continue
            history = tuple(
                Turn(t["role"], t["content"])
                for t in row.get("conversation_history") or []
                if t.get("role") in ("user", "assistant")
            )
            out.append(TrainingQuestion(str(row["id"]), str(row["collection"]), str(row["question"]), history, evidence))
    return out


def build_training_set(
    questions: Sequence[TrainingQuestion],
    features: FeatureFn,
    relevant: Callable[[str, str], bool],
    progress: Callable[[], None] | None = None,
) -> TrainingSet:
    """One example per question: its feature rows and, per evidence span, the rows `relevant` to it
    (relevant(folded item text, folded span)). A question none of whose items is relevant is skipped."""
    data = TrainingSet()
    for q in questions:
        x, texts = features(q.question, q.history, q.collection)
        folded = [fold(t) for t in texts]
        groups = [np.flatnonzero([relevant(t, fold(e)) for t in folded]) for e in q.evidence]
        groups = [g for g in groups if len(g)]
        if not groups:
            data.skipped.append(q.id)
        else:
            data.examples.append((x, groups))
        if progress is not None:
            progress()
    return data


def holds_span(item: str, span: str) -> bool:
    """A provision is relevant to an evidence span it contains."""
    return span in item


def shares_span(item: str, span: str) -> bool:
    """A sentence is relevant to an evidence span it shares 40 characters with (or contains, or is in)."""
    return overlaps(item, span)


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


def fit_weights(data: TrainingSet, l2: float = DEFAULT_L2, fixed: Mapping[int, float] | None = None) -> np.ndarray:
    """The weights minimising `listwise_loss`. `fixed` {column: weight} keeps those weights as given
    and fits only the others: a new feature is added without moving what the model already ranks by."""
    from scipy.optimize import minimize  # scikit-learn's dependency; only needed to train

    if not data.examples:
        raise ValueError("no training question has evidence that a provision contains")
    n = data.examples[0][0].shape[1]
    fixed = dict(fixed or {})
    free = np.array([i for i in range(n) if i not in fixed], dtype=np.int64)
    base = np.zeros(n, dtype=np.float64)
    for i, w in fixed.items():
        base[i] = w
    if not len(free):
        return base
    examples = [(x.astype(np.float64), groups) for x, groups in data.examples]

    def loss(v: np.ndarray) -> tuple[float, np.ndarray]:
        w = base.copy()
        w[free] = v
        value, grad = listwise_loss(w, examples, l2)
        return value, grad[free]

    result = minimize(loss, np.zeros(len(free)), jac=True, method="L-BFGS-B")
    base[free] = result.x
    return base


def fit_model(
    features: tuple[str, ...], questions: Sequence[TrainingQuestion], feature_fn: FeatureFn,
    relevant: Callable[[str, str], bool], l2: float = DEFAULT_L2, progress: Callable[[], None] | None = None,
    keep: Mapping[str, float] | None = None,
) -> tuple[LinearModel, TrainingSet]:
    """`keep` {feature: weight}: weights kept as they are (see fit_weights); the rest are fitted."""
    data = build_training_set(questions, feature_fn, relevant, progress)
    fixed = {i: keep[f] for i, f in enumerate(features) if keep and f in keep}
    return LinearModel(features, fit_weights(data, l2, fixed).astype(np.float32)), data
