"""Query-complexity classifier: how many separate pieces of context a question needs.

Labels (HyPA-RAG, arXiv 2409.09046): 0 = one, 1 = two, 2 = three or more. The 2-class scheme merges
1 and 2. The label picks the retrieval parameters (see core/params.py).

Kinds (see docs/CLASSIFIER.md for the measured comparison; the first three are linear and train in seconds):

- ``tfidf-svm``: word 1-2-gram + char_wb 2-5-gram TF-IDF + a few question-shape counts, LinearSVC.
- ``tfidf-lr``:  the same features, multinomial logistic regression.
- ``embed-lr``:  logistic regression on the all-MiniLM-L6-v2 sentence embedding. The pipeline
  already embeds the query for retrieval, so `predict(question, vector=...)` costs one dot product;
  without a vector it needs an `embed` function (a model call).
- ``tfidf-svm+tokcnn``: tfidf-svm stacked with a small CNN over MiniLM's input token states
  (core/complexity_tokens.py; torch to train, numpy to run).

A fine-tuned MiniLM was measured and rejected: fully fine-tuned it scores what `tfidf-svm+tokcnn`
scores (0.91 macro-F1, 3 epochs in ~6 min on 2 cores) at 9-19 ms per question; see docs/CLASSIFIER.md.

Validation holds out whole `group`s (a base question and its noisy rewrites are near-duplicates)
and scores on the noisy variants of the held-out groups.

Artifacts are our own, in a safe format (no pickle): a folder with `meta.json` (kind, classes,
feature spec, metrics), `vocab.json` (TF-IDF vocabularies) and `weights.npz` (float arrays, loaded
with allow_pickle=False). Inference re-implements the TF-IDF transform from those arrays with
scikit-learn's own analyzers, so it needs no fitted scikit-learn object and runs in well under 1 ms.
"""
from __future__ import annotations

import csv
import hashlib
import json
import logging
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import ClassifierArtifactError, ClassifierDataError

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
TOKEN_CNN_KIND = "tfidf-svm+tokcnn"  # implemented in core/complexity_tokens.py
KINDS = ("tfidf-svm", "tfidf-lr", "embed-lr", TOKEN_CNN_KIND)
DEFAULT_KIND = "tfidf-svm"
CLEAN_VARIANT = "question_set3"
DEFAULT_TRAIN_CSV = (
    Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "classifier" / "complexity_train.csv"
)
DEFAULT_SEED = 13
DEFAULT_TEST_SIZE = 0.2
LATENCY_BUDGET_MS = 3.0
REQUIRED_COLUMNS = ("group", "variant", "question", "label")

EmbedFn = Callable[[Sequence[str]], np.ndarray]  # texts -> (n, dim) L2-normalised float32
ProgressFn = Callable[[str], None]

# Feature settings shared by the TF-IDF kinds (chosen on grouped 5-fold CV, docs/CLASSIFIER.md).
_WORD_PARAMS: dict[str, Any] = {"analyzer": "word", "ngram_range": [1, 2], "lowercase": True}
_CHAR_PARAMS: dict[str, Any] = {"analyzer": "char_wb", "ngram_range": [2, 5], "lowercase": True}
_CHAR_MIN_DF = 2
_SVM_C = 0.3
_LR_C = 20.0
_EMBED_LR_C = 10.0


# --- data ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    group: str
    variant: str
    question: str
    label: int  # always the 3-class label as stored in the CSV


def load_examples(csv_path: str | Path) -> list[Example]:
    path = Path(csv_path)
    if not path.is_file():
        raise ClassifierDataError(f"training CSV {path} does not exist")
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ClassifierDataError(
                f"{path}: missing column(s) {missing}; expected {', '.join(REQUIRED_COLUMNS)}"
            )
        examples = []
        for line, row in enumerate(reader, start=2):
            question = (row["question"] or "").strip()
            if not question:
                continue
            try:
                label = int(row["label"])
            except (TypeError, ValueError):
                raise ClassifierDataError(f"{path}:{line}: label {row['label']!r} is not 0, 1 or 2") from None
            if label not in (0, 1, 2):
                raise ClassifierDataError(f"{path}:{line}: label {label} is not 0, 1 or 2")
            examples.append(Example(str(row["group"]), str(row["variant"]), question, label))
    if not examples:
        raise ClassifierDataError(f"{path}: no questions")
    return examples


def to_classes(labels: Sequence[int] | np.ndarray, classes: int) -> np.ndarray:
    """3-class labels -> the scheme's labels (2-class merges 1 and 2 into 1)."""
    _check_classes(classes)
    labels = np.asarray(labels, dtype=np.int64)
    return np.minimum(labels, 1) if classes == 2 else labels


def _check_classes(classes: int) -> None:
    if classes not in (2, 3):
        raise ValueError(f"classes must be 2 or 3, got {classes!r}")


def group_split(
    groups: Sequence[str], *, test_size: float = DEFAULT_TEST_SIZE, seed: int = DEFAULT_SEED
) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (train, held-out) with every group entirely on one side."""
    from sklearn.model_selection import GroupShuffleSplit

    group_of_row = np.asarray(groups)
    if len(set(group_of_row.tolist())) < 2:
        raise ClassifierDataError("need at least two groups to hold some out")
    splitter = GroupShuffleSplit(n_splits=1, test_size=test_size, random_state=seed)
    train_idx, test_idx = next(splitter.split(np.zeros(len(group_of_row)), groups=group_of_row))
    return np.sort(train_idx), np.sort(test_idx)


def eval_indices(examples: Sequence[Example], test_idx: np.ndarray, noisy_only: bool = True) -> np.ndarray:
    """The held-out rows scored: their noisy variants (all held-out rows if there are none)."""
    if not noisy_only:
        return test_idx
    noisy = np.array([i for i in test_idx if examples[i].variant != CLEAN_VARIANT], dtype=np.int64)
    return noisy if len(noisy) else test_idx


# --- features -----------------------------------------------------------------------------------

_WORD_RE = re.compile(r"[^\W\d_]+")
_WH = frozenset(
    ["what", "how", "which", "who", "when", "why", "where", "does", "do", "is", "are", "can", "should", "must"]
)
SHAPE_DIM = 21


def shape_features(text: str) -> np.ndarray:
    """Counts that signal several sub-questions: words, 'and', commas, '?', wh-words, 'or'."""
    lower = text.lower()
    words = _WORD_RE.findall(lower)
    n_and = sum(w == "and" for w in words)
    n_comma = lower.count(",") + lower.count(";")
    n_wh = sum(w in _WH for w in words)
    counts = [len(words), n_and, n_comma, lower.count("?"), n_wh, sum(w == "or" for w in words)]
    out = [math.log1p(c) for c in counts]
    for c in (n_and, n_comma, n_wh):
        out.extend(float(min(c, 4) == k) for k in range(5))
    return np.asarray(out, dtype=np.float64)


class _TfidfBlock:
    """TF-IDF (sublinear tf, smooth idf, l2) from a saved vocabulary and idf vector."""

    def __init__(self, params: dict[str, Any], vocabulary: dict[str, int], idf: np.ndarray) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.params = dict(params)
        self.vocabulary = vocabulary
        self.idf = np.asarray(idf, dtype=np.float64)
        if len(self.idf) != len(vocabulary):
            raise ClassifierArtifactError("vocabulary and idf sizes differ")
        kwargs = {**self.params, "ngram_range": tuple(self.params["ngram_range"])}
        self._analyze = TfidfVectorizer(**kwargs).build_analyzer()

    @property
    def size(self) -> int:
        return len(self.vocabulary)

    def transform(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        counts = Counter(t for t in self._analyze(text) if t in self.vocabulary)
        if not counts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        idx = np.fromiter((self.vocabulary[t] for t in counts), dtype=np.int64, count=len(counts))
        tf = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
        values = (1.0 + np.log(tf)) * self.idf[idx]
        norm = math.sqrt(float(values @ values))
        return idx, values / norm if norm > 0 else values


# --- the classifier -----------------------------------------------------------------------------


@dataclass
class Metrics:
    kind: str
    classes: int
    macro_precision: float
    macro_recall: float
    macro_f1: float
    accuracy: float
    confusion: list[list[int]]  # rows = true label, columns = predicted
    ms_per_question: float  # classifier only; embed-lr is given the precomputed vector
    train_seconds: float
    n_train: int
    n_eval: int
    eval_on: str = "noisy variants of held-out groups"
    needs_vector: bool = False
    notes: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ComplexityClassifier:
    """A trained linear classifier. Use `train`, `load`, or `ensure_classifier` to get one."""

    kind: str
    classes: int
    coef: np.ndarray  # (n_features, n_outputs); n_outputs = 1 for a binary model
    intercept: np.ndarray  # (n_outputs,)
    blocks: list[_TfidfBlock] = field(default_factory=list)
    shape_scale: float = 0.0  # 0 = no shape features
    embed_dim: int = 0  # > 0 for embed-lr
    embed_model_id: str = ""
    embed: EmbedFn | None = None  # used by embed-lr when predict() gets no vector
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_classes(self.classes)
        expected = sum(b.size for b in self.blocks) + (SHAPE_DIM if self.shape_scale else 0) + self.embed_dim
        if self.coef.shape[0] != expected:
            raise ClassifierArtifactError(f"weights have {self.coef.shape[0]} rows, features need {expected}")
        self.coef = np.ascontiguousarray(self.coef, dtype=np.float64)
        self.intercept = np.asarray(self.intercept, dtype=np.float64)
        self._offsets = np.cumsum([0] + [b.size for b in self.blocks]).tolist()

    @property
    def labels(self) -> list[int]:
        return list(range(self.classes))

    @property
    def needs_vector(self) -> bool:
        return self.embed_dim > 0

    # -- prediction ----------------------------------------------------------------------------

    def decision(self, question: str, vector: np.ndarray | None = None) -> np.ndarray:
        scores = self.intercept.copy()
        for block, offset in zip(self.blocks, self._offsets):
            idx, values = block.transform(question)
            if len(idx):
                scores += values @ self.coef[idx + offset]
        row = self._offsets[-1]
        if self.shape_scale:
            scores += (shape_features(question) * self.shape_scale) @ self.coef[row : row + SHAPE_DIM]
            row += SHAPE_DIM
        if self.embed_dim:
            vec = self._vector(question, vector)
            scores += vec @ self.coef[row : row + self.embed_dim]
        return scores

    def _vector(self, question: str, vector: np.ndarray | None) -> np.ndarray:
        if vector is None:
            if self.embed is None:
                raise ValueError(
                    f"{self.kind} classifier needs the query's embedding: pass vector=, or load it with embed="
                )
            vector = self.embed([question])[0]
        vec = np.asarray(vector, dtype=np.float64).reshape(-1)
        if vec.shape[0] != self.embed_dim:
            raise ValueError(
                f"{self.kind} classifier expects a {self.embed_dim}-d vector ({self.embed_model_id}), got {vec.shape[0]}"
            )
        return vec

    def _label(self, scores: np.ndarray) -> int:
        if scores.shape[0] == 1:  # binary linear model: one score, > 0 means label 1
            return int(scores[0] > 0)
        return int(np.argmax(scores))

    def predict(self, question: str, vector: np.ndarray | None = None) -> int:
        return self._label(self.decision(question, vector))

    def predict_many(self, questions: Sequence[str], vectors: np.ndarray | None = None) -> list[int]:
        if self.needs_vector and vectors is None and self.embed is not None and len(questions):
            vectors = self.embed(list(questions))
        if vectors is not None and len(vectors) != len(questions):
            raise ValueError(f"{len(questions)} questions but {len(vectors)} vectors")
        return [
            self.predict(q, None if vectors is None else vectors[i]) for i, q in enumerate(questions)
        ]

    # -- persistence ---------------------------------------------------------------------------

    def save(self, path: str | Path) -> Path:
        """Write the artifact folder (meta.json, vocab.json, weights.npz); replaces an older one."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        arrays = {"coef": self.coef, "intercept": self.intercept}
        for i, block in enumerate(self.blocks):
            arrays[f"idf_{i}"] = block.idf
        meta = {
            **self.meta,
            "format_version": FORMAT_VERSION,
            "kind": self.kind,
            "classes": self.classes,
            "blocks": [block.params for block in self.blocks],
            "shape_scale": self.shape_scale,
            "embed_dim": self.embed_dim,
            "embed_model_id": self.embed_model_id,
        }
        # Write next to the target, then rename: a crash never leaves a half-written artifact.
        tmp_weights = path / "weights.tmp.npz"
        np.savez_compressed(tmp_weights, **dict[str, Any](arrays))  # (numpy's stub types **kwargs as a bool)
        _write_text(path / "vocab.json", json.dumps([b.vocabulary for b in self.blocks], ensure_ascii=False))
        tmp_weights.replace(path / "weights.npz")
        _write_text(path / "meta.json", json.dumps(meta, indent=2, ensure_ascii=False))
        return path

    @classmethod
    def load(cls, path: str | Path, *, embed: EmbedFn | None = None) -> ComplexityClassifier:
        """A linear kind's folder; `load_classifier` reads any kind."""
        path = Path(path)
        files = {name: path / name for name in ("meta.json", "vocab.json", "weights.npz")}
        missing = [name for name, file in files.items() if not file.is_file()]
        if missing:
            raise ClassifierArtifactError(f"classifier artifact {path} is missing {', '.join(missing)}")
        try:
            meta = json.loads(files["meta.json"].read_text(encoding="utf-8"))
            vocabularies = json.loads(files["vocab.json"].read_text(encoding="utf-8"))
            with np.load(files["weights.npz"], allow_pickle=False) as weights:
                arrays = {k: weights[k] for k in weights.files}
        except (OSError, ValueError) as exc:
            raise ClassifierArtifactError(f"classifier artifact {path} is unreadable: {exc}") from exc
        if meta.get("format_version") != FORMAT_VERSION:
            raise ClassifierArtifactError(
                f"classifier artifact {path} has format {meta.get('format_version')!r}, this code reads "
                f"{FORMAT_VERSION}: retrain with `hypa classifier train`"
            )
        blocks = [
            _TfidfBlock(params, vocab, arrays[f"idf_{i}"])
            for i, (params, vocab) in enumerate(zip(meta["blocks"], vocabularies))
        ]
        return cls(
            kind=meta["kind"],
            classes=int(meta["classes"]),
            coef=arrays["coef"],
            intercept=arrays["intercept"],
            blocks=blocks,
            shape_scale=float(meta.get("shape_scale", 0.0)),
            embed_dim=int(meta.get("embed_dim", 0)),
            embed_model_id=str(meta.get("embed_model_id", "")),
            embed=embed,
            meta=meta,
        )

    # -- training ------------------------------------------------------------------------------

    @classmethod
    def train(
        cls,
        csv_path: str | Path,
        classes: int = 3,
        kind: str = DEFAULT_KIND,
        *,
        seed: int = DEFAULT_SEED,
        test_size: float = DEFAULT_TEST_SIZE,
        embed: EmbedFn | None = None,
        embed_model_id: str = "",
        embeddings_cache: Path | None = None,
        refit_all: bool = False,
        progress: ProgressFn | None = None,
        token_states: Any = None,
    ) -> tuple[Any, Metrics]:
        """Fit on the training groups, score on the noisy variants of the held-out groups.

        `refit_all=True` refits on every row after scoring (the metrics stay those of the split
        model; `eval` of such an artifact is then optimistic, and says so). For `tfidf-svm+tokcnn`
        the model is a `core.complexity_tokens.TokenCnnClassifier`; `token_states` replaces its
        MiniLM token encoder (tests).
        """
        _check_classes(classes)
        if kind not in KINDS:
            raise ValueError(f"unknown classifier kind {kind!r}; known: {', '.join(KINDS)}")
        say = progress or (lambda _msg: None)
        examples = load_examples(csv_path)
        questions = [e.question for e in examples]
        y = to_classes([e.label for e in examples], classes)
        if len(set(y.tolist())) < classes:
            raise ClassifierDataError(f"{csv_path}: needs examples of every label 0..{classes - 1}")
        train_idx, test_idx = group_split([e.group for e in examples], test_size=test_size, seed=seed)
        eval_idx = eval_indices(examples, test_idx)

        vectors = None
        if kind == "embed-lr":
            embed, embed_model_id = _default_embed(embed, embed_model_id)
            say("embedding questions")
            vectors = _embed_cached(embed, questions, embed_model_id, embeddings_cache, Path(csv_path))
        if kind == TOKEN_CNN_KIND and token_states is None:
            from core.complexity_tokens import default_token_states

            say("loading MiniLM token embeddings")
            token_states = default_token_states()

        def fit(rows: np.ndarray) -> Any:
            if kind == TOKEN_CNN_KIND:
                from core.complexity_tokens import fit_token_cnn

                svm = _fit("tfidf-svm", classes, [questions[i] for i in rows], y[rows], None)
                return fit_token_cnn([questions[i] for i in rows], y[rows], classes, svm, token_states)
            fitted = _fit(kind, classes, [questions[i] for i in rows], y[rows],
                          None if vectors is None else vectors[rows])
            fitted.embed, fitted.embed_model_id = embed, embed_model_id if kind == "embed-lr" else ""
            return fitted

        say("fitting")
        started = time.perf_counter()
        model = fit(train_idx)
        train_seconds = time.perf_counter() - started

        say("scoring held-out groups")
        eval_q = [questions[i] for i in eval_idx]
        eval_v = None if vectors is None else vectors[eval_idx]
        metrics = score(model, eval_q, y[eval_idx], eval_v)
        metrics.train_seconds = train_seconds
        metrics.n_train = len(train_idx)
        if kind == "embed-lr":
            metrics.notes = "ms excludes the query embedding (the pipeline computes it for retrieval)"
        if kind == TOKEN_CNN_KIND:
            metrics.notes = "ms includes the MiniLM token states (numpy); train s includes torch training of the CNN"

        trained_on = "train split"
        if refit_all:
            say("refitting on all rows")
            model = fit(np.arange(len(questions)))
            trained_on = "all rows"
        model.meta = {
            "trained_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "train_csv": str(Path(csv_path).resolve()),
            "train_csv_sha1": _sha1(Path(csv_path)),
            "split": {"by": "group", "seed": seed, "test_size": test_size},
            "trained_on": trained_on,
            "metrics": metrics.to_dict(),
        }
        return model, metrics


def _fit(kind: str, classes: int, questions: list[str], y: np.ndarray, vectors: np.ndarray | None) -> ComplexityClassifier:
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    blocks: list[_TfidfBlock] = []
    parts = []
    shape_scale = 0.0
    embed_dim = 0
    if kind in ("tfidf-svm", "tfidf-lr"):
        for params, min_df in ((_WORD_PARAMS, 1), (_CHAR_PARAMS, _CHAR_MIN_DF)):
            kwargs = {**params, "ngram_range": tuple(params["ngram_range"])}
            vectorizer = TfidfVectorizer(**kwargs, sublinear_tf=True, min_df=min_df, dtype=np.float64)
            parts.append(vectorizer.fit_transform(questions))
            vocab = {term: int(i) for term, i in vectorizer.vocabulary_.items()}
            blocks.append(_TfidfBlock(params, vocab, vectorizer.idf_))
        shape_scale = 1.0
        parts.append(sp.csr_matrix(np.stack([shape_features(q) for q in questions]) * shape_scale))
        X = sp.hstack(parts).tocsr()
    else:
        assert vectors is not None
        X = np.asarray(vectors, dtype=np.float64)
        embed_dim = X.shape[1]

    if kind == "tfidf-svm":
        estimator = LinearSVC(C=_SVM_C, max_iter=5000)
    elif kind == "tfidf-lr":
        # newton-cg: 8 iterations, ~6 s here; lbfgs needs ~200 (~40 s) for the same optimum.
        estimator = LogisticRegression(C=_LR_C, solver="newton-cg", max_iter=200)
    else:
        estimator = LogisticRegression(C=_EMBED_LR_C, max_iter=3000)
    estimator.fit(X, y)
    if list(estimator.classes_) != list(range(classes)):
        raise ClassifierDataError(f"training labels {list(estimator.classes_)} are not 0..{classes - 1}")
    return ComplexityClassifier(
        kind=kind,
        classes=classes,
        coef=np.asarray(estimator.coef_, dtype=np.float64).T,
        intercept=np.asarray(estimator.intercept_, dtype=np.float64).reshape(-1),
        blocks=blocks,
        shape_scale=shape_scale,
        embed_dim=embed_dim,
    )


def load_classifier(path: str | Path, *, embed: EmbedFn | None = None, token_states: Any = None) -> Any:
    """Any saved kind: a `ComplexityClassifier` (linear kinds) or a `TokenCnnClassifier`."""
    meta_file = Path(path) / "meta.json"
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ClassifierArtifactError(f"classifier artifact {path} has no readable meta.json: {exc}") from exc
    if isinstance(meta, dict) and meta.get("kind") == TOKEN_CNN_KIND:
        from core.complexity_tokens import TokenCnnClassifier

        return TokenCnnClassifier.load(path, meta, token_states=token_states)
    return ComplexityClassifier.load(path, embed=embed)


def score(
    model: ComplexityClassifier,
    questions: Sequence[str],
    y_true: Sequence[int] | np.ndarray,
    vectors: np.ndarray | None = None,
    *,
    timing_sample: int = 300,
) -> Metrics:
    """Macro P/R/F1, accuracy, confusion matrix and mean ms per single-question predict()."""
    from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support

    y_true = np.asarray(y_true)
    predictions = np.asarray(model.predict_many(list(questions), vectors))
    p, r, f, _ = precision_recall_fscore_support(
        y_true, predictions, labels=model.labels, average="macro", zero_division=0
    )
    sample = list(range(min(timing_sample, len(questions))))
    for i in sample[:10]:  # warm caches
        model.predict(questions[i], None if vectors is None else vectors[i])
    started = time.perf_counter()
    for i in sample:
        model.predict(questions[i], None if vectors is None else vectors[i])
    ms = (time.perf_counter() - started) * 1000.0 / max(len(sample), 1)
    return Metrics(
        kind=model.kind,
        classes=model.classes,
        macro_precision=float(p),
        macro_recall=float(r),
        macro_f1=float(f),
        accuracy=float(accuracy_score(y_true, predictions)),
        confusion=confusion_matrix(y_true, predictions, labels=model.labels).tolist(),
        ms_per_question=ms,
        train_seconds=0.0,
        n_train=0,
        n_eval=len(questions),
        needs_vector=model.needs_vector,
    )


def evaluate_artifact(
    model: Any, csv_path: str | Path, *, vectors_for: EmbedFn | None = None
) -> Metrics:
    """Re-score a saved classifier on the same group-held-out noisy split it was validated on."""
    split = model.meta.get("split", {})
    examples = load_examples(csv_path)
    _, test_idx = group_split(
        [e.group for e in examples],
        test_size=float(split.get("test_size", DEFAULT_TEST_SIZE)),
        seed=int(split.get("seed", DEFAULT_SEED)),
    )
    eval_idx = eval_indices(examples, test_idx)
    questions = [examples[i].question for i in eval_idx]
    y = to_classes([examples[i].label for i in eval_idx], model.classes)
    vectors = None
    if model.needs_vector:
        embed = vectors_for or model.embed
        if embed is None:
            raise ValueError("embed-lr artifact: pass an embed function to evaluate it")
        vectors = embed(questions)
    metrics = score(model, questions, y, vectors)
    metrics.n_train = int(model.meta.get("metrics", {}).get("n_train", 0))
    if model.meta.get("trained_on") == "all rows":
        metrics.notes = "artifact was refit on all rows: held-out groups were seen in training (optimistic)"
    if model.meta.get("train_csv_sha1") and model.meta["train_csv_sha1"] != _sha1(Path(csv_path)):
        metrics.notes = (metrics.notes + "; " if metrics.notes else "") + "CSV differs from the training CSV"
    return metrics


def choose_best(
    results: Sequence[Metrics], *, budget_ms: float = LATENCY_BUDGET_MS, tolerance: float = 0.01
) -> Metrics:
    """Best accuracy for its cost: the highest macro-F1 within the latency budget, unless another
    kind is within `tolerance` of that F1 and at least twice as fast (a real difference in cost,
    not timing noise: the TF-IDF kinds do the same work per question). Falls back to every kind
    if none meets the budget."""
    if not results:
        raise ValueError("no results to choose from")
    within = [m for m in results if m.ms_per_question <= budget_ms] or list(results)
    best = max(within, key=lambda m: m.macro_f1)
    for m in sorted(within, key=lambda m: m.ms_per_question):
        if m.macro_f1 >= best.macro_f1 - tolerance and m.ms_per_question * 2 <= best.ms_per_question:
            return m
    return best


# --- embeddings for embed-lr -------------------------------------------------------------------


def _default_embed(embed: EmbedFn | None, model_id: str) -> tuple[EmbedFn, str]:
    # The embedder lives in storage/ (core does not import it): the caller passes its embed_queries.
    if embed is None:
        raise ValueError("an embed-lr classifier needs an embed function (the embedder's embed_queries)")
    return embed, model_id or "custom"


def _embed_cached(
    embed: EmbedFn, questions: list[str], model_id: str, cache_dir: Path | None, csv_path: Path
) -> np.ndarray:
    """Embedding 7k questions takes minutes on 2 cores: keep them, keyed by model and CSV content."""
    cache = None
    if cache_dir is not None:
        key = hashlib.sha1(f"{model_id}|{_sha1(csv_path)}".encode()).hexdigest()[:16]
        cache = Path(cache_dir) / f"embeddings-{key}.npy"
        if cache.is_file():
            vectors = np.load(cache, allow_pickle=False)
            if len(vectors) == len(questions):
                return vectors
    vectors = np.asarray(embed(questions), dtype=np.float32)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, vectors, allow_pickle=False)
    return vectors


# --- settings glue ------------------------------------------------------------------------------

_ensure_lock = threading.Lock()


def classifier_dir(data_dir: str | Path, classes: int) -> Path:
    _check_classes(classes)
    return Path(data_dir) / "classifier" / f"complexity-{classes}class"


@dataclass(frozen=True)
class ClassifierConfig:
    """Where the saved classifiers live (`<data_dir>/classifier`), the CSV that trains a missing one,
    and the kind ("auto": use any saved artifact, train DEFAULT_KIND if none; a kind name: retrain
    when the saved artifact is of another kind)."""

    data_dir: Path
    train_csv: Path | None = None  # None: DEFAULT_TRAIN_CSV
    kind: str = "auto"


def ensure_classifier(config: ClassifierConfig, classes: int, *, embed: EmbedFn | None = None) -> Any:
    """The saved classifier for `classes`, training it first if it is missing and the CSV exists.

    Returns None, with a warning, when no classifier can be had: the retrieval config's fallback row
    (default mapping) is then used.
    """
    _check_classes(classes)
    folder = classifier_dir(config.data_dir, classes)
    csv_path = Path(config.train_csv or DEFAULT_TRAIN_CSV)
    configured = config.kind or "auto"
    if configured != "auto" and configured not in KINDS:
        raise ValueError(f"classifier_kind {configured!r} is not auto or one of {', '.join(KINDS)}")
    kind = DEFAULT_KIND if configured == "auto" else configured
    with _ensure_lock:
        if (folder / "meta.json").is_file():
            try:
                model = load_classifier(folder, embed=embed)
            except ClassifierArtifactError as exc:
                log.warning("complexity classifier at %s is unusable (%s); retraining", folder, exc)
            else:
                if configured == "auto" or model.kind == kind or not csv_path.is_file():
                    return model
                log.info("complexity classifier at %s is %s, settings ask for %s: retraining", folder, model.kind, kind)
        if not csv_path.is_file():
            log.warning(
                "no %d-class complexity classifier at %s and no training CSV at %s: "
                "using the default parameter mapping (the config's fallback row) for every question",
                classes, folder, csv_path,
            )
            return None
        log.warning("training the %d-class complexity classifier (%s) from %s (first use)", classes, kind, csv_path)
        try:
            model, metrics = ComplexityClassifier.train(
                csv_path, classes, kind, embed=embed, embeddings_cache=folder.parent
            )
        except (ClassifierDataError, ValueError, RuntimeError) as exc:  # RuntimeError: no MiniLM weights, or torch failed
            log.warning("could not train the complexity classifier (%s): using the default parameter mapping", exc)
            return None
        model.save(folder)
        log.warning(
            "saved %d-class complexity classifier to %s (held-out noisy macro-F1 %.3f)", classes, folder, metrics.macro_f1
        )
        return model


def _sha1(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha1").hexdigest()


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
