"""Query-complexity classifier: grouped split, training, safe artifacts, settings glue, CLI."""
from __future__ import annotations

import csv
import json
import logging
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from core.complexity import (
    DEFAULT_TRAIN_CSV,
    ClassifierConfig,
    ComplexityClassifier,
    Metrics,
    _TfidfBlock,
    choose_best,
    classifier_dir,
    ensure_classifier,
    eval_indices,
    group_split,
    load_examples,
    to_classes,
)
from core.errors import ClassifierArtifactError, ClassifierDataError

# --- synthetic data (written for the tests: the number of asks decides the label) ---------------

_TOPICS = [
    "bias audit", "impact ratio", "candidate notice", "data retention", "penalty amount", "audit summary",
    "risk management", "technical documentation", "human oversight", "market surveillance", "conformity check",
    "transparency duty", "selection rate", "independent auditor", "historical data", "test data",
]
_ASKS = ["what is the {t}", "who handles the {t}", "when is the {t} due", "how is the {t} published"]


def _question(rng: random.Random, label: int) -> str:
    parts = [rng.choice(_ASKS).format(t=t) for t in rng.sample(_TOPICS, label + 1)]
    if label == 0:
        return parts[0].capitalize() + "?"
    return (", ".join(parts[:-1]) + " and " + parts[-1]).capitalize() + "?"


def _noisy(rng: random.Random, text: str) -> str:
    # Rewritten more vaguely, like the shared CSV's noisy variants: lower case, no '?', filler words.
    filler = rng.choice(["tell me ", "quick question: ", "i wonder ", ""])
    return filler + text.lower().rstrip("?") + rng.choice([" please", " thanks", " #", ""])


def write_synthetic_csv(path: Path, groups: int = 60, seed: int = 0) -> Path:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["group", "variant", "question", "label"])
        for g in range(groups):
            label = g % 3
            clean = _question(rng, label)
            writer.writerow([g, "question_set3", clean, label])
            writer.writerow([g, "questionset_noisy", _noisy(rng, clean), label])
            writer.writerow([g, "questionset_noisy2", _noisy(rng, clean), label])
    return path


@pytest.fixture(scope="module")
def synthetic_csv(tmp_path_factory) -> Path:
    return write_synthetic_csv(tmp_path_factory.mktemp("cx") / "train.csv")


@pytest.fixture(scope="module")
def trained(synthetic_csv):
    return ComplexityClassifier.train(synthetic_csv, 3, "tfidf-svm")


class FakeEmbedder:
    """Deterministic 16-d vectors: counts of ' and ' / commas dominate, like the real signal."""

    dim = 16

    def __call__(self, texts):
        rows = []
        for text in texts:
            v = np.zeros(self.dim, dtype=np.float32)
            v[0] = 1.0
            v[1] = text.lower().count(" and ")
            v[2] = text.count(",")
            v[3 + len(text) % 13] = 0.1
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows)


# --- split and data -------------------------------------------------------------------------------


def _assert_disjoint_groups(groups, train_idx, test_idx):
    train_groups = {groups[i] for i in train_idx}
    test_groups = {groups[i] for i in test_idx}
    assert train_groups and test_groups
    assert not train_groups & test_groups
    assert sorted([*train_idx, *test_idx]) == list(range(len(groups)))


def test_group_split_keeps_every_group_on_one_side(synthetic_csv):
    examples = load_examples(synthetic_csv)
    groups = [e.group for e in examples]
    train_idx, test_idx = group_split(groups, test_size=0.25, seed=3)
    _assert_disjoint_groups(groups, train_idx, test_idx)
    scored = eval_indices(examples, test_idx)
    assert all(examples[i].variant != "question_set3" for i in scored)
    assert set(scored) <= set(test_idx)


@pytest.mark.skipif(not DEFAULT_TRAIN_CSV.is_file(), reason="shared classifier CSV not present")
def test_group_split_on_the_shared_csv():
    examples = load_examples(DEFAULT_TRAIN_CSV)
    groups = [e.group for e in examples]
    _assert_disjoint_groups(groups, *group_split(groups))


def test_two_class_merges_labels_1_and_2():
    assert to_classes([0, 1, 2, 2, 0], 2).tolist() == [0, 1, 1, 1, 0]
    assert to_classes([0, 1, 2], 3).tolist() == [0, 1, 2]
    with pytest.raises(ValueError):
        to_classes([0], 4)


def test_bad_training_csvs_are_clear_errors(tmp_path):
    no_label = tmp_path / "a.csv"
    no_label.write_text("group,variant,question\n1,question_set3,What?\n", encoding="utf-8")
    with pytest.raises(ClassifierDataError, match="missing column"):
        load_examples(no_label)
    bad_label = tmp_path / "b.csv"
    bad_label.write_text("group,variant,question,label\n1,question_set3,What?,7\n", encoding="utf-8")
    with pytest.raises(ClassifierDataError, match=r"b.csv:2: label 7"):
        load_examples(bad_label)
    with pytest.raises(ClassifierDataError, match="does not exist"):
        load_examples(tmp_path / "missing.csv")


# --- training, prediction, artifacts ----------------------------------------------------------------


def test_training_on_synthetic_data_predicts(trained):
    model, metrics = trained
    assert model.classes == 3 and model.labels == [0, 1, 2]
    assert metrics.macro_f1 > 0.9, metrics
    assert np.asarray(metrics.confusion).sum() == metrics.n_eval
    assert metrics.ms_per_question < 50
    assert model.predict("What is the bias audit?") == 0
    assert model.predict("what is the bias audit, who handles the test data and when is the penalty amount due") == 2
    labels = model.predict_many(["What is the impact ratio?", "What is the impact ratio and who handles the test data?"])
    assert labels == [0, 1]
    assert all(isinstance(label, int) for label in labels)
    assert model.meta["split"]["by"] == "group"


def test_fast_tfidf_matches_scikit_learn():
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = ["What is a bias audit?", "who must publish the audit, and when", "Bias bias audit audit audit"]
    for params in ({"analyzer": "word", "ngram_range": [1, 2]}, {"analyzer": "char_wb", "ngram_range": [2, 5]}):
        vectorizer = TfidfVectorizer(**{**params, "ngram_range": tuple(params["ngram_range"])}, sublinear_tf=True)
        expected = vectorizer.fit_transform(texts + ["unrelated words only"]).toarray()
        block = _TfidfBlock({**params, "lowercase": True}, dict(vectorizer.vocabulary_), vectorizer.idf_)
        for row, text in zip(expected, texts + ["unrelated words only"]):
            idx, values = block.transform(text)
            got = np.zeros(block.size)
            got[idx] = values
            np.testing.assert_allclose(got, row, atol=1e-12)
        assert len(block.transform("zzzz qqqq")[0]) == 0 or params["analyzer"] == "char_wb"


def test_save_and_load_round_trip_without_pickle(trained, tmp_path):
    model, _ = trained
    folder = model.save(tmp_path / "artifact")
    assert sorted(p.name for p in folder.iterdir()) == ["meta.json", "vocab.json", "weights.npz"]
    with np.load(folder / "weights.npz", allow_pickle=False) as weights:  # plain arrays only
        assert "coef" in weights.files
    loaded = ComplexityClassifier.load(folder)
    questions = ["What is the penalty amount?", "what is the audit summary and who handles the test data"]
    assert loaded.predict_many(questions) == model.predict_many(questions)
    np.testing.assert_allclose(loaded.decision(questions[1]), model.decision(questions[1]))
    assert json.loads((folder / "meta.json").read_text())["kind"] == "tfidf-svm"


def test_broken_artifacts_are_refused(trained, tmp_path):
    model, _ = trained
    folder = model.save(tmp_path / "artifact")
    meta = json.loads((folder / "meta.json").read_text())
    meta["format_version"] = 999
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ClassifierArtifactError, match="retrain"):
        ComplexityClassifier.load(folder)
    (folder / "weights.npz").unlink()
    with pytest.raises(ClassifierArtifactError, match="missing weights.npz"):
        ComplexityClassifier.load(folder)


def test_two_class_logistic_regression(synthetic_csv):
    model, metrics = ComplexityClassifier.train(synthetic_csv, 2, "tfidf-lr")
    assert model.classes == 2 and metrics.classes == 2
    assert len(metrics.confusion) == 2
    assert model.predict("What is the test data?") == 0
    assert model.predict("what is the test data, who handles the audit summary and when is the penalty amount due") == 1


def test_an_embedding_head_is_trained_on_the_callers_embedder(synthetic_csv):
    """core/ never loads the embedder itself (it lives in storage/): an embed-lr classifier needs one."""
    with pytest.raises(ValueError, match="needs an embed function"):
        ComplexityClassifier.train(synthetic_csv, 3, "embed-lr")


def test_embedding_head_uses_the_precomputed_vector(synthetic_csv, tmp_path):
    embed = FakeEmbedder()
    model, metrics = ComplexityClassifier.train(
        synthetic_csv, 3, "embed-lr", embed=embed, embed_model_id="fake:16", embeddings_cache=tmp_path
    )
    assert metrics.needs_vector and model.needs_vector
    assert list(tmp_path.glob("embeddings-*.npy")), "embeddings are cached for the next training run"
    question = "What is the bias audit and who handles the test data?"
    vector = embed([question])[0]
    assert model.predict(question, vector) == model.predict(question)  # without a vector it calls embed
    model.save(tmp_path / "emb")
    bare = ComplexityClassifier.load(tmp_path / "emb")
    assert bare.predict(question, vector) == model.predict(question, vector)
    with pytest.raises(ValueError, match="needs the query's embedding"):
        bare.predict(question)
    with pytest.raises(ValueError, match="16-d"):
        bare.predict(question, np.zeros(384))


def test_unknown_kind_and_classes(synthetic_csv):
    with pytest.raises(ValueError, match="unknown classifier kind"):
        ComplexityClassifier.train(synthetic_csv, 3, "bert")
    with pytest.raises(ValueError, match="2 or 3"):
        ComplexityClassifier.train(synthetic_csv, 4, "tfidf-svm")


def _m(kind: str, f1: float, ms: float) -> Metrics:
    return Metrics(kind, 3, f1, f1, f1, f1, [[1]], ms, 1.0, 1, 1)


def test_choose_best_prefers_accuracy_then_real_speed_gains():
    assert choose_best([_m("a", 0.88, 0.5), _m("b", 0.87, 0.4)]).kind == "a"  # timing noise: keep F1
    assert choose_best([_m("a", 0.88, 0.5), _m("b", 0.875, 0.1)]).kind == "b"  # 5x faster, ~same F1
    assert choose_best([_m("a", 0.88, 0.5), _m("b", 0.80, 0.01)]).kind == "a"  # much worse: no
    assert choose_best([_m("slow", 0.95, 40.0), _m("a", 0.88, 0.5)]).kind == "a"  # over budget


# --- ensure_classifier ------------------------------------------------------------------------------


def test_ensure_trains_once_then_loads(synthetic_csv, tmp_path, caplog):
    settings = ClassifierConfig(data_dir=tmp_path, train_csv=synthetic_csv, kind="auto")
    with caplog.at_level(logging.WARNING, logger="core.complexity"):
        first = ensure_classifier(settings, 3)
    assert first is not None and first.kind == "tfidf-svm"
    meta = classifier_dir(tmp_path, 3) / "meta.json"
    assert meta.is_file()
    stamp = meta.stat().st_mtime_ns
    second = ensure_classifier(settings, 3)
    assert second is not None and meta.stat().st_mtime_ns == stamp  # loaded, not retrained
    # An explicit other kind retrains.
    assert ensure_classifier(replace(settings, kind="tfidf-lr"), 3).kind == "tfidf-lr"


def test_ensure_without_data_returns_none_and_warns(tmp_path, caplog):
    settings = ClassifierConfig(data_dir=tmp_path, train_csv=tmp_path / "absent.csv")
    with caplog.at_level(logging.WARNING, logger="core.complexity"):
        assert ensure_classifier(settings, 2) is None
    assert "default parameter mapping" in caplog.text


# --- CLI --------------------------------------------------------------------------------------------


@pytest.fixture()
def cli(monkeypatch, tmp_path, synthetic_csv):
    from typer.testing import CliRunner

    from bot.cli_classifier import classifier_app

    monkeypatch.setenv("HYPA_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("HYPA_CLASSIFIER_TRAIN_CSV", str(synthetic_csv))
    monkeypatch.chdir(tmp_path)  # no stray .env
    runner = CliRunner()
    return lambda *args: runner.invoke(classifier_app, list(args), catch_exceptions=False)


def test_cli_train_eval_and_predict_round_trip(cli, tmp_path, synthetic_csv):
    result = cli("train", "--classes", "3", "--kind", "tfidf-svm", "--csv", str(synthetic_csv))
    assert result.exit_code == 0, result.output
    assert "tfidf-svm" in result.output and "saved" in result.output
    assert (tmp_path / "data" / "classifier" / "complexity-3class" / "meta.json").is_file()

    result = cli("eval", "--classes", "3", "--csv", str(synthetic_csv))
    assert result.exit_code == 0, result.output
    assert "tfidf-svm" in result.output

    source = tmp_path / "in.csv"
    source.write_text(
        'id,question\n1,What is the bias audit?\n2,"What is the bias audit, who handles the test data and when is the '
        'penalty amount due?"\n',
        encoding="utf-8",
    )
    target = tmp_path / "out" / "labelled.csv"
    result = cli("predict", "--in", str(source), "--out", str(target), "--classes", "3")
    assert result.exit_code == 0, result.output
    with target.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["id"] for r in rows] == ["1", "2"]
    assert [r["label"] for r in rows] == ["0", "2"]


def test_cli_predict_without_question_column_fails_clearly(cli, tmp_path):
    source = tmp_path / "in.csv"
    source.write_text("id,text\n1,What is it?\n", encoding="utf-8")
    result = cli("predict", "--in", str(source), "--out", str(tmp_path / "out.csv"))
    assert result.exit_code == 1
    assert "no `question` column" in result.output
    assert not (tmp_path / "out.csv").exists()


# --- the real data (skipped without ../shared) --------------------------------------------------------


@pytest.mark.classifier_data
@pytest.mark.skipif(not DEFAULT_TRAIN_CSV.is_file(), reason="shared classifier CSV not present")
def test_real_data_tfidf_svm_meets_its_measured_level():
    _, metrics = ComplexityClassifier.train(DEFAULT_TRAIN_CSV, 3, "tfidf-svm")
    assert metrics.n_eval > 500
    # Measured 0.880 on this split (docs/CLASSIFIER.md); guard against regressions, not the 0.92 goal.
    assert metrics.macro_f1 >= 0.86
    assert metrics.ms_per_question <= 3.0
    assert metrics.train_seconds <= 60
