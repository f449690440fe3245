"""tfidf-svm+tokcnn: the CNN head over token states, its numpy inference, artifact and training."""
from __future__ import annotations

import hashlib
import json
import re

import numpy as np
import pytest

from core.complexity import TOKEN_CNN_KIND, ComplexityClassifier, Metrics, choose_best, load_classifier
from core.complexity_tokens import (
    CnnHead,
    TokenCnnClassifier,
    svm_log_probs,
    train_cnn_head,
)
from core.errors import ClassifierArtifactError
from tests.test_complexity import write_synthetic_csv

torch = pytest.importorskip("torch")  # training needs torch; inference does not


class FakeTokenStates:
    """Deterministic 64-d vector per lower-cased word or punctuation mark (no model needed)."""

    def __init__(self, dim: int = 64, salt: str = "") -> None:
        self._dim = dim
        self._salt = salt

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def fingerprint(self) -> dict:
        return {"model": "fake", "dim": self._dim, "salt": self._salt}

    def __call__(self, text: str) -> np.ndarray:
        tokens = re.findall(r"\w+|[^\w\s]", text.lower())
        rows = []
        for token in tokens:
            seed = int(hashlib.sha1((self._salt + token).encode()).hexdigest()[:8], 16)
            rows.append(np.random.default_rng(seed).standard_normal(self._dim))
        return np.asarray(rows, dtype=np.float32).reshape(len(rows), self._dim)


@pytest.fixture(scope="module")
def csv_path(tmp_path_factory):
    return write_synthetic_csv(tmp_path_factory.mktemp("tok") / "train.csv", groups=60)


@pytest.fixture(scope="module")
def trained(csv_path):
    return ComplexityClassifier.train(csv_path, 3, TOKEN_CNN_KIND, token_states=FakeTokenStates())


@pytest.mark.parametrize("projected", [False, True])
def test_numpy_cnn_equals_torch_conv1d(projected):
    rng = np.random.default_rng(1)
    dim, channels, n = 6, 5, 7
    conv_in = 4 if projected else dim
    kernels = (3, 5)
    torch_weights = {k: rng.standard_normal((channels, conv_in, k)).astype(np.float32) for k in kernels}
    biases = {k: rng.standard_normal(channels).astype(np.float32) for k in kernels}
    out = rng.standard_normal((4 * channels, 3)).astype(np.float32)
    out_bias = rng.standard_normal(3).astype(np.float32)
    projection = rng.standard_normal((dim, conv_in)).astype(np.float32) if projected else None
    projection_bias = rng.standard_normal(conv_in).astype(np.float32) if projected else None
    head = CnnHead(
        kernels=kernels,
        # the layout train_cnn_head writes: Conv1d weight (out, in, k) -> (k, in, out) -> (k * in, out)
        convs=[torch_weights[k].transpose(2, 1, 0).reshape(-1, channels) for k in kernels],
        conv_biases=[biases[k] for k in kernels],
        out=out,
        out_bias=out_bias,
        projection=projection,
        projection_bias=projection_bias,
    )
    assert head.input_dim == dim
    states = rng.standard_normal((n, dim)).astype(np.float32)
    x = torch.from_numpy(states)
    if projected:  # projected first, then zero-padded by the convolution (as in training)
        x = x @ torch.from_numpy(projection) + torch.from_numpy(projection_bias)
    x = x.T[None]
    pooled = []
    for k in kernels:
        y = torch.relu(
            torch.nn.functional.conv1d(x, torch.from_numpy(torch_weights[k]), torch.from_numpy(biases[k]), padding=k // 2)
        )
        pooled += [y.max(2).values[0], y.mean(2)[0]]
    want = (torch.cat(pooled) @ torch.from_numpy(out) + torch.from_numpy(out_bias)).numpy()
    np.testing.assert_allclose(head.logits(states), want, rtol=1e-5, atol=1e-5)
    restored = CnnHead.from_arrays(kernels, head.arrays())
    np.testing.assert_allclose(restored.logits(states), head.logits(states), rtol=1e-6)


def test_svm_scores_become_log_probabilities():
    three = svm_log_probs(np.array([1.0, -1.0, 0.5]))
    assert np.isclose(np.exp(three).sum(), 1.0) and int(np.argmax(three)) == 0
    binary = svm_log_probs(np.array([2.0]))  # one score d > 0 means label 1
    assert binary.shape == (2,) and int(np.argmax(binary)) == 1


def test_trains_on_synthetic_data_and_beats_chance(trained):
    model, metrics = trained
    assert isinstance(model, TokenCnnClassifier) and model.kind == TOKEN_CNN_KIND
    assert metrics.kind == TOKEN_CNN_KIND and metrics.n_eval > 0
    assert metrics.macro_f1 >= 0.8
    assert model.predict("What is the bias audit?") == 0
    assert model.predict("What is the bias audit, who handles the test data and when is the penalty amount due?") == 2
    assert "token states" in metrics.notes
    # The CNN alone learned the shape too (not only the SVM half of the stack): 1 vs 2-3 asks.
    head_says = [int(np.argmax(model.head.logits(model.token_states(q)))) for q in (
        "What is the bias audit?", "Who handles the impact ratio?",
        "What is the bias audit, who handles the test data and when is the penalty amount due?",
    )]
    assert head_says[0] == head_says[1] == 0 and head_says[2] > 0


def test_training_is_deterministic(csv_path):
    states = FakeTokenStates()
    questions = ["what is the audit", "who and when, and how", "what is it and who", "when is it due"] * 6
    y = np.array([0, 2, 1, 0] * 6)
    first = train_cnn_head([states(q) for q in questions], y, 3, epochs=2, min_steps=20)
    second = train_cnn_head([states(q) for q in questions], y, 3, epochs=2, min_steps=20)
    for a, b in zip(first.arrays().values(), second.arrays().values()):
        np.testing.assert_array_equal(a, b)


def test_empty_question_falls_back_to_the_svm(trained):
    model, _ = trained
    assert model.predict("") == model.svm.predict("")
    assert model.predict_many(["", "What is the bias audit?"]) == [model.svm.predict(""), 0]


def test_save_and_load_round_trip_without_pickle(trained, tmp_path):
    model, _ = trained
    folder = model.save(tmp_path / "art")
    assert {p.name for p in folder.iterdir()} >= {"meta.json", "head.npz", "svm"}
    with np.load(folder / "head.npz", allow_pickle=False) as arrays:  # plain float arrays only
        assert all(arrays[k].dtype == np.float32 for k in arrays.files)
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    assert meta["kind"] == TOKEN_CNN_KIND and meta["token_states"] == FakeTokenStates().fingerprint
    loaded = load_classifier(folder, token_states=FakeTokenStates())
    questions = ["What is the bias audit?", "who handles the test data and when is the audit summary due", "x"]
    for q in questions:
        np.testing.assert_allclose(loaded.decision(q), model.decision(q), rtol=1e-6, atol=1e-9)


def test_load_refuses_other_token_states_and_broken_folders(trained, tmp_path):
    model, _ = trained
    folder = model.save(tmp_path / "art")
    with pytest.raises(ClassifierArtifactError, match="trained on token states"):
        load_classifier(folder, token_states=FakeTokenStates(salt="other weights"))
    with pytest.raises(ClassifierArtifactError, match="load_classifier|missing"):
        ComplexityClassifier.load(folder)  # the linear loader does not read this kind
    (folder / "head.npz").unlink()
    with pytest.raises(ClassifierArtifactError, match="head.npz"):
        load_classifier(folder, token_states=FakeTokenStates())
    with pytest.raises(ClassifierArtifactError, match="meta.json"):
        load_classifier(tmp_path / "nowhere")


def test_two_class_variant(csv_path):
    model, metrics = ComplexityClassifier.train(csv_path, 2, TOKEN_CNN_KIND, token_states=FakeTokenStates())
    assert model.head.out.shape[1] == 2 and model.labels == [0, 1]
    assert metrics.macro_f1 >= 0.8
    assert model.predict("What is the bias audit?") == 0


def test_choose_best_takes_the_stack_when_it_is_clearly_better_and_within_budget():
    def m(kind: str, f1: float, ms: float) -> Metrics:
        return Metrics(kind, 3, f1, f1, f1, f1, [[1]], ms, 1.0, 1, 1)

    measured = [m("tfidf-svm", 0.880, 0.45), m("tfidf-lr", 0.880, 0.66), m(TOKEN_CNN_KIND, 0.904, 1.7)]
    assert choose_best(measured).kind == TOKEN_CNN_KIND
    # Over the 3 ms budget it is not taken, however accurate.
    assert choose_best([*measured[:2], m(TOKEN_CNN_KIND, 0.95, 3.5)]).kind == "tfidf-svm"


# --- the real MiniLM (skipped without the packaged model) ------------------------------------------


@pytest.mark.model
def test_numpy_input_states_equal_transformers_embedding_output():
    from transformers import AutoModel

    from core.complexity_tokens import default_token_states
    from core.model_files import resolve_model_dir

    states = default_token_states()
    assert states.fingerprint["layers"] == 0 and states.dim == 384
    base = AutoModel.from_pretrained(str(resolve_model_dir()), local_files_only=True).eval()
    for text in ("Do I need a bias audit before using an AEDT, and who pays for it?", "¿Qué es?", ""):
        ids = states._tokenizer.encode(text).ids
        with torch.no_grad():
            out = base(input_ids=torch.tensor([ids]), output_hidden_states=True)
        np.testing.assert_allclose(states(text), out.hidden_states[0][0].numpy(), atol=2e-4)
