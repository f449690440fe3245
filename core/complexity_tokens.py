"""The `tfidf-svm+tokcnn` complexity classifier: tfidf-svm stacked with a small CNN over MiniLM token states.

Why: the question's *shape* (how many things it asks) decides the label. Mean-pooled sentence
vectors blur it (embed-lr: 0.80 macro-F1), TF-IDF n-grams see it only locally (0.88). A 1-D CNN
(projection 384 -> 128, kernel widths 3 and 5, max + mean pooled) over all-MiniLM-L6-v2's *input*
token states (word + position embedding, LayerNorm: layer 0, no transformer layer) reads the shape
from context-free subword vectors, and its errors differ from the SVM's: averaging the two models'
log-probabilities beats either (docs/CLASSIFIER.md has the grouped 5-fold numbers).

Layer 0 is chosen for cost: every transformer layer costs ~1.5 ms per question on this CPU
(numpy or ONNX), and layers 1-4 scored the same or within noise of layer 0 once stacked.

Inference is numpy only: the token states come from the packaged MiniLM's safetensors (an
embedding lookup and a LayerNorm), the CNN is a few small matrix products (~0.5 ms). Torch is
needed for training only. The artifact is a folder with `meta.json`,
`head.npz` (the CNN weights, loaded with allow_pickle=False) and `svm/` (a tfidf-svm artifact).
The MiniLM weights are not copied: they are read from the installed model package (nothing is
downloaded), and a fingerprint of the tensors used is checked on load.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np

from core.errors import TokenStatesError

KIND = "tfidf-svm+tokcnn"
HEAD_FORMAT_VERSION = 1
MAX_TOKENS = 64  # [CLS] + [SEP] included; 99% of the training questions are shorter
KERNELS = (3, 5)
CHANNELS = 256
PROJECTION = 128  # states are first projected 384 -> 128: 2.5x fewer multiply-adds in the convolutions
HEAD_WEIGHT = 0.5  # weight of the CNN's log-probabilities in the stack (the SVM gets 1 - this): equal say
EPOCHS = 6
MIN_STEPS = 300  # small training sets get more epochs: 6 epochs of 5.9k questions are ~1,100 steps
LEARNING_RATE = 1e-3
BATCH_SIZE = 32
DROPOUT = 0.1
WEIGHT_DECAY = 0.01
TRAIN_SEED = 0


@runtime_checkable
class TokenStates(Protocol):
    """Text -> (tokens, dim) float32 states; `fingerprint` identifies the weights used."""

    @property
    def dim(self) -> int: ...

    @property
    def fingerprint(self) -> dict[str, Any]: ...

    def __call__(self, text: str) -> np.ndarray: ...


# --- MiniLM input states in numpy ---------------------------------------------------------------


def _layer_norm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(-1, keepdims=True)
    return centred / np.sqrt(var + eps) * gain + bias


_INPUT_TENSORS = ("embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
                  "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias")


class MiniLMInputStates:
    """A BERT-style sentence-transformers model's input token states (the transformer's "layer 0"):
    word + position + token-type embedding, LayerNorm. No transformer layer runs (docs/CLASSIFIER.md
    measured heads on layers 1-6: none better once stacked, each layer ~1.5 ms).

    Weights come from the model folder's `model.safetensors`; the tokenizer from its `tokenizer.json`.
    """

    def __init__(self, model_dir: str | Path, max_tokens: int = MAX_TOKENS) -> None:
        from safetensors import safe_open
        from tokenizers import Tokenizer

        model_dir = Path(model_dir)
        weights_file, tokenizer_file, config_file = (
            model_dir / "model.safetensors", model_dir / "tokenizer.json", model_dir / "config.json"
        )
        missing = [f.name for f in (weights_file, tokenizer_file, config_file) if not f.is_file()]
        if missing:
            raise TokenStatesError(f"model folder {model_dir} lacks {', '.join(missing)}")
        config = json.loads(config_file.read_text(encoding="utf-8"))
        self.max_tokens = max_tokens
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.model_name = model_dir.name if model_dir.name != "model" else model_dir.parent.name
        self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_tokens)

        w: dict[str, np.ndarray] = {}
        with safe_open(str(weights_file), framework="numpy") as handle:
            keys = set(handle.keys())
            strip = "bert." if any(k.startswith("bert.") for k in keys) else ""
            for name in _INPUT_TENSORS:
                if strip + name not in keys:
                    raise TokenStatesError(f"{weights_file} has no tensor {name}")
                w[name] = np.asarray(handle.get_tensor(strip + name), dtype=np.float32)
        digest = hashlib.sha1()
        for name in sorted(w):
            digest.update(name.encode())
            digest.update(np.ascontiguousarray(w[name]).tobytes())
        # "layers": 0 stays in the fingerprint so artifacts saved before the layer option was dropped still load.
        self._fingerprint = {"model": self.model_name, "layers": 0, "max_tokens": max_tokens,
                             "weights_sha1": digest.hexdigest()}
        self._word = w["embeddings.word_embeddings.weight"]
        self._position = w["embeddings.position_embeddings.weight"]
        self._type0 = w["embeddings.token_type_embeddings.weight"][0]
        self._ln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])

    @property
    def dim(self) -> int:
        return int(self._word.shape[1])

    @property
    def fingerprint(self) -> dict[str, Any]:
        return dict(self._fingerprint)

    def __call__(self, text: str) -> np.ndarray:
        ids = np.asarray(self._tokenizer.encode(text).ids, dtype=np.int64)
        x = self._word[ids] + self._position[: len(ids)] + self._type0
        return _layer_norm(x, *self._ln, self.eps).astype(np.float32, copy=False)


def default_token_states(model: str | Path | None = None) -> MiniLMInputStates:
    """The packaged all-MiniLM-L6-v2 (or a local folder), as `core.model_files` resolves it."""
    from core.errors import EmbeddingModelNotFound
    from core.model_files import resolve_model_dir

    try:
        return MiniLMInputStates(resolve_model_dir(model or None))
    except EmbeddingModelNotFound as exc:
        raise TokenStatesError(str(exc)) from exc


# --- the CNN head in numpy ----------------------------------------------------------------------


@dataclass
class CnnHead:
    """Linear projection -> Conv1d (one per kernel width, 'same' zero padding) -> ReLU -> [max, mean]
    over tokens -> linear.

    `convs[i]` is (kernel * dim, channels): row j * dim + c multiplies token t + j - kernel // 2,
    feature c (torch's Conv1d weight (out, in, k) transposed to (k, in, out) and flattened).
    """

    kernels: tuple[int, ...]
    convs: list[np.ndarray]
    conv_biases: list[np.ndarray]
    out: np.ndarray  # (2 * channels * len(kernels), n_labels)
    out_bias: np.ndarray
    projection: np.ndarray | None = None  # (state dim, conv input dim); None = convolve the states
    projection_bias: np.ndarray | None = None

    @property
    def input_dim(self) -> int:
        return int(self.projection.shape[0] if self.projection is not None else self.convs[0].shape[0] // self.kernels[0])

    def logits(self, states: np.ndarray) -> np.ndarray:
        if self.projection is not None:
            states = states @ self.projection + self.projection_bias
        n, d = states.shape
        pooled = []
        for kernel, conv, bias in zip(self.kernels, self.convs, self.conv_biases):
            pad = kernel // 2
            padded = np.zeros((n + 2 * pad, d), dtype=np.float32)
            padded[pad : pad + n] = states
            windows = np.lib.stride_tricks.sliding_window_view(padded, (kernel, d))[:, 0].reshape(n, kernel * d)
            y = np.maximum(windows @ conv + bias, 0.0)
            pooled.append(y.max(0))
            pooled.append(y.mean(0))
        return np.concatenate(pooled) @ self.out + self.out_bias

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"out": self.out, "out_bias": self.out_bias}
        if self.projection is not None:
            assert self.projection_bias is not None  # set together
            out["projection"], out["projection_bias"] = self.projection, self.projection_bias
        for kernel, conv, bias in zip(self.kernels, self.convs, self.conv_biases):
            out[f"conv{kernel}"], out[f"conv{kernel}_bias"] = conv, bias
        return out

    @classmethod
    def from_arrays(cls, kernels: Sequence[int], arrays: dict[str, np.ndarray]) -> CnnHead:
        kernels = tuple(int(k) for k in kernels)
        return cls(
            kernels=kernels,
            convs=[np.asarray(arrays[f"conv{k}"], dtype=np.float32) for k in kernels],
            conv_biases=[np.asarray(arrays[f"conv{k}_bias"], dtype=np.float32) for k in kernels],
            out=np.asarray(arrays["out"], dtype=np.float32),
            out_bias=np.asarray(arrays["out_bias"], dtype=np.float32),
            projection=np.asarray(arrays["projection"], dtype=np.float32) if "projection" in arrays else None,
            projection_bias=np.asarray(arrays["projection_bias"], dtype=np.float32) if "projection" in arrays else None,
        )


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max()
    return z - math.log(float(np.exp(z).sum()))


def svm_log_probs(decision: np.ndarray) -> np.ndarray:
    """SVM decision values as log-probabilities (softmax; a binary SVM's one score d is [0, d])."""
    scores = np.asarray(decision, dtype=np.float64).reshape(-1)
    if scores.shape[0] == 1:
        scores = np.array([0.0, scores[0]])
    return _log_softmax(scores)


# --- the stacked classifier ---------------------------------------------------------------------


@dataclass
class TokenCnnClassifier:
    """tfidf-svm and the token CNN, combined as (1 - w) * SVM log-softmax + w * CNN log-softmax."""

    classes: int
    svm: Any  # core.complexity.ComplexityClassifier of kind tfidf-svm
    head: CnnHead
    token_states: TokenStates
    head_weight: float = HEAD_WEIGHT
    meta: dict[str, Any] = field(default_factory=dict)
    kind: str = KIND

    @property
    def labels(self) -> list[int]:
        return list(range(self.classes))

    @property
    def needs_vector(self) -> bool:
        return False

    def decision(self, question: str, vector: np.ndarray | None = None) -> np.ndarray:
        """Combined log-probability scores, one per label. `vector` is accepted and ignored."""
        svm_part = svm_log_probs(self.svm.decision(question))
        states = self.token_states(question)
        if len(states) == 0:  # nothing tokenizable: the SVM alone decides
            return svm_part
        return (1.0 - self.head_weight) * svm_part + self.head_weight * _log_softmax(
            self.head.logits(states).astype(np.float64)
        )

    def predict(self, question: str, vector: np.ndarray | None = None) -> int:
        return int(np.argmax(self.decision(question)))

    def predict_many(self, questions: Sequence[str], vectors: np.ndarray | None = None) -> list[int]:
        return [self.predict(q) for q in questions]

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.svm.save(path / "svm")
        tmp = path / "head.tmp.npz"
        arrays: dict[str, Any] = self.head.arrays()  # (numpy's stub types **kwargs as its own bool option)
        np.savez_compressed(tmp, **arrays)
        tmp.replace(path / "head.npz")
        meta = {
            **self.meta,
            "format_version": HEAD_FORMAT_VERSION,
            "kind": self.kind,
            "classes": self.classes,
            "head": {
                "type": "cnn", "kernels": list(self.head.kernels), "weight": self.head_weight,
                "projection": None if self.head.projection is None else int(self.head.projection.shape[1]),
            },
            "token_states": self.token_states.fingerprint,
        }
        tmp_meta = path / "meta.json.tmp"
        tmp_meta.write_text(json.dumps(meta, indent=2, ensure_ascii=False), encoding="utf-8")
        tmp_meta.replace(path / "meta.json")
        return path

    @classmethod
    def load(cls, path: str | Path, meta: dict[str, Any], *, token_states: TokenStates | None = None,
             model: str | Path | None = None) -> TokenCnnClassifier:
        """`meta` is the folder's parsed meta.json. `token_states` overrides the MiniLM prefix (tests);
        otherwise it is rebuilt from the packaged model (or `model`) and must match the fingerprint."""
        from core.complexity import ComplexityClassifier
        from core.errors import ClassifierArtifactError

        path = Path(path)
        if meta.get("format_version") != HEAD_FORMAT_VERSION:
            raise ClassifierArtifactError(
                f"classifier artifact {path} has format {meta.get('format_version')!r}, this code reads "
                f"{HEAD_FORMAT_VERSION}: retrain with `hypa classifier train`"
            )
        if not (path / "head.npz").is_file():
            raise ClassifierArtifactError(f"classifier artifact {path} is missing head.npz")
        try:
            with np.load(path / "head.npz", allow_pickle=False) as weights:
                head = CnnHead.from_arrays(meta["head"]["kernels"], {k: weights[k] for k in weights.files})
        except (OSError, ValueError, KeyError) as exc:
            raise ClassifierArtifactError(f"classifier artifact {path} is unreadable: {exc}") from exc
        svm = ComplexityClassifier.load(path / "svm")
        expected = meta.get("token_states", {})
        if token_states is None:
            try:
                token_states = default_token_states(model)
            except TokenStatesError as exc:
                raise ClassifierArtifactError(f"classifier artifact {path}: {exc}") from exc
        if token_states.fingerprint != expected:
            raise ClassifierArtifactError(
                f"classifier artifact {path} was trained on token states {expected}, "
                f"the available encoder gives {token_states.fingerprint}: retrain with `hypa classifier train`"
            )
        if head.out.shape[1] != int(meta["classes"]) or head.input_dim != token_states.dim:
            raise ClassifierArtifactError(f"classifier artifact {path}: head weights do not fit {meta['classes']} classes")
        return cls(classes=int(meta["classes"]), svm=svm, head=head, token_states=token_states,
                   head_weight=float(meta["head"].get("weight", HEAD_WEIGHT)), meta=meta)


# --- training (torch) ---------------------------------------------------------------------------


def train_cnn_head(
    states: Sequence[np.ndarray], y: np.ndarray, classes: int, *, seed: int = TRAIN_SEED, epochs: int = EPOCHS,
    threads: int = 2, min_steps: int = MIN_STEPS,
) -> CnnHead:
    """Fit the CNN on per-question token states with AdamW and a one-cycle schedule; deterministic."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    rng = np.random.default_rng(seed)
    dim = int(states[0].shape[1])
    lengths = np.array([max(len(s), 1) for s in states])
    longest = int(lengths.max())
    padded = np.zeros((len(states), longest, dim), dtype=np.float32)
    mask = np.zeros((len(states), longest), dtype=np.float32)
    for i, s in enumerate(states):
        padded[i, : len(s)] = s
        mask[i, : len(s)] = 1.0
    padded_t, mask_t, y_t = torch.from_numpy(padded), torch.from_numpy(mask), torch.from_numpy(np.asarray(y, dtype=np.int64))

    class Cnn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.drop = nn.Dropout(DROPOUT)
            self.projection = nn.Linear(dim, PROJECTION)
            self.convs = nn.ModuleList([nn.Conv1d(PROJECTION, CHANNELS, k, padding=k // 2) for k in KERNELS])
            self.out = nn.Linear(2 * CHANNELS * len(KERNELS), classes)

        def forward(self, x, m):
            # Zero the padding after projecting, as CnnHead.logits pads the projected states with zeros.
            x = self.projection(self.drop(x)) * m[..., None]
            x = x.transpose(1, 2)
            m = m[:, None, :]
            pooled = []
            for conv in self.convs:
                h = torch.relu(conv(x))
                pooled.append(h.masked_fill(m == 0, -1e4).max(2).values)
                pooled.append((h * m).sum(2) / m.sum(2).clamp_min(1.0))
            return self.out(self.drop(torch.cat(pooled, 1)))

    try:
        model = Cnn()
        optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
        batches_per_epoch = math.ceil(len(states) / BATCH_SIZE)
        epochs = max(epochs, math.ceil(min_steps / batches_per_epoch))
        steps = batches_per_epoch * epochs
        schedule = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=LEARNING_RATE, total_steps=steps, pct_start=0.1, anneal_strategy="linear"
        )
        model.train()
        for _ in range(epochs):
            # Batches of similar length (sorted within chunks of 50 batches) waste less padding.
            order = rng.permutation(len(states))
            batches = []
            for start in range(0, len(order), BATCH_SIZE * 50):
                chunk = order[start : start + BATCH_SIZE * 50]
                chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
                batches += [chunk[i : i + BATCH_SIZE] for i in range(0, len(chunk), BATCH_SIZE)]
            for b in rng.permutation(len(batches)):
                idx = torch.from_numpy(batches[b])
                width = int(lengths[batches[b]].max())
                loss = nn.functional.cross_entropy(model(padded_t[idx, :width], mask_t[idx, :width]), y_t[idx])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                schedule.step()
        model.eval()
        convs = cast("list[torch.nn.Conv1d]", list(model.convs))
        with torch.no_grad():
            return CnnHead(
                kernels=KERNELS,
                convs=[c.weight.permute(2, 1, 0).reshape(-1, CHANNELS).numpy().copy() for c in convs],
                conv_biases=[cast("torch.Tensor", c.bias).numpy().copy() for c in convs],  # built with bias=True
                out=model.out.weight.T.numpy().copy(),
                out_bias=model.out.bias.numpy().copy(),
                projection=model.projection.weight.T.numpy().copy(),
                projection_bias=model.projection.bias.numpy().copy(),
            )
    finally:
        torch.set_num_threads(previous_threads)
        torch.use_deterministic_algorithms(False)


def fit_token_cnn(
    questions: Sequence[str], y: np.ndarray, classes: int, svm: Any, token_states: TokenStates, *, seed: int = TRAIN_SEED
) -> TokenCnnClassifier:
    """Train the CNN head on `questions` and stack it with the already fitted `svm`."""
    states = [token_states(q) for q in questions]
    keep = [i for i, s in enumerate(states) if len(s)]
    head = train_cnn_head([states[i] for i in keep], np.asarray(y)[keep], classes, seed=seed)
    return TokenCnnClassifier(classes=classes, svm=svm, head=head, token_states=token_states)
