"""Sentence embeddings through ONNX Runtime: the same vectors as sentence-transformers, without its import.

Why: importing sentence-transformers (torch + transformers + scikit-learn + scipy) takes ~8-9 s on
this machine, most of a bot's cold start; ONNX Runtime imports in ~0.3 s and encodes one query in
~5 ms instead of ~20 ms (docs/RESULTS.md). The ONNX graph is exported once from the packaged
weights (torch + transformers, ~10 s) into the data directory, verified against the PyTorch model
before it is used, and reused by every later process.

Only models whose sentence-transformers pipeline is Transformer -> mean pooling -> Normalize are
exported (all-MiniLM-L6-v2 is); anything else keeps the sentence-transformers path.
"""
from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from core.errors import OnnxExportError

if TYPE_CHECKING:
    import onnxruntime
    from tokenizers import Tokenizer

# Texts the export is checked on: short, long (past the tokenizer file's own 128 cut), non-English.
_CHECK_TEXTS = (
    "Do I need a bias audit before using an automated employment decision tool?",
    "The employer shall notify each candidate no less than ten business days before use. " * 14,
    "¿Qué es una auditoría de sesgo?",
)
_MAX_ABS_DIFF = 1e-4  # measured difference here: ~2e-7


def supports_onnx(model_dir: Path) -> bool:
    """True for Transformer -> mean Pooling [-> Normalize] pipelines, the only ones re-implemented here."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
        types = [m["type"].rsplit(".", 1)[-1] for m in modules]
        if types not in (["Transformer", "Pooling", "Normalize"], ["Transformer", "Pooling"]):
            return False
        pooling_dir = model_dir / next(m["path"] for m in modules if m["type"].endswith("Pooling"))
        pooling = json.loads((pooling_dir / "config.json").read_text(encoding="utf-8"))
        if "pooling_mode" in pooling:  # as sentence-transformers 5+ saves it (a tuned model): one mode's name
            return pooling["pooling_mode"] in ("mean", ["mean"])
        other_modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v and k != "pooling_mode_mean_tokens"]
        return bool(pooling.get("pooling_mode_mean_tokens")) and not other_modes
    except (OSError, ValueError, KeyError, StopIteration):
        return False


def export_onnx(model_dir: Path, out_path: Path, max_tokens: int) -> None:
    """Export the transformer to `out_path` (atomically) and check it against PyTorch.

    Heavy (imports torch and transformers): runs once per model, e.g. during `hypa index build`.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
        from transformers import AutoModel
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        base = AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()
    except Exception as exc:  # noqa: BLE001 - any failure means: keep the sentence-transformers path
        raise OnnxExportError(f"could not load {model_dir} with transformers: {exc}") from exc

    class LastHiddenState(torch.nn.Module):
        """Keyword-calls the model so the export does not depend on forward()'s argument order."""

        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    reference_tokenizer = _padded_tokenizer(model_dir / "tokenizer.json", max_tokens)
    # The PyTorch vectors are taken before exporting: the export leaves the module in a state
    # (training flags) whose outputs no longer match eval mode.
    want = _torch_mean_pooled(base, reference_tokenizer, list(_CHECK_TEXTS))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.tmp")
    # A padded sample, so the traced graph certainly keeps the attention-mask path.
    sample_ids = torch.full((2, 16), 1000, dtype=torch.long)
    sample_mask = torch.ones(2, 16, dtype=torch.long)
    sample_mask[1, 9:] = 0
    axes = {0: "batch", 1: "tokens"}
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer warnings about shape-dependent Python branches
            torch.onnx.export(
                LastHiddenState(base),
                (sample_ids, sample_mask, torch.zeros_like(sample_ids)),
                str(tmp),
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["last_hidden_state"],
                dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes, "last_hidden_state": axes},
                opset_version=17,
                dynamo=False,  # the TorchScript exporter: no onnxscript needed, deterministic output
            )
        encoder = OnnxEncoder(tmp, model_dir / "tokenizer.json", max_tokens)
        got = encoder.encode(list(_CHECK_TEXTS))
        diff = float(np.abs(got - want).max())
        if not diff <= _MAX_ABS_DIFF:
            raise OnnxExportError(f"ONNX vectors differ from PyTorch by {diff:.2e} (> {_MAX_ABS_DIFF:.0e})")
        os.replace(tmp, out_path)
    except OnnxExportError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise OnnxExportError(f"ONNX export of {model_dir} failed: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)


def _torch_mean_pooled(model, tokenizer: Tokenizer, texts: list[str]) -> np.ndarray:  # noqa: ANN001
    import torch

    ids, mask = _tokenize(tokenizer, texts)
    with torch.no_grad():
        hidden = model(
            input_ids=torch.from_numpy(ids),
            attention_mask=torch.from_numpy(mask),
            token_type_ids=torch.zeros_like(torch.from_numpy(ids)),
        ).last_hidden_state.numpy()
    return _mean_pool_normalise(hidden, mask)


def _padded_tokenizer(tokenizer_path: Path, max_tokens: int) -> Tokenizer:
    """The tokenizer as the model sees text: cut at sentence-transformers' max_seq_length ([CLS] and
    [SEP] included), batches padded to their longest text."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    tokenizer.enable_truncation(max_tokens)
    tokenizer.enable_padding()
    return tokenizer


def _tokenize(tokenizer: Tokenizer, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    encodings = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    return ids, mask


def _mean_pool_normalise(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' mean pooling (padding excluded) followed by L2 normalisation."""
    weights = mask[..., None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return (pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)).astype(np.float32)


class OnnxEncoder:
    """Tokenizer + ONNX Runtime session; `encode` is thread-safe (ORT sessions are)."""

    def __init__(self, onnx_path: Path, tokenizer_path: Path, max_tokens: int, threads: int | None = None) -> None:
        import onnxruntime as ort

        self.tokenizer = _padded_tokenizer(tokenizer_path, max_tokens)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or min(4, os.cpu_count() or 1)
        options.log_severity_level = 3  # warnings about unused initializers are noise here
        self._session: onnxruntime.InferenceSession = ort.InferenceSession(
            str(onnx_path), options, providers=["CPUExecutionProvider"]
        )
        self._lock = threading.Lock()  # the tokenizer's padding/truncation state is shared

    def encode(self, texts: Sequence[str], batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        texts = list(texts)
        # Longest first, like sentence-transformers: batches of similar length waste less padding.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), 0), dtype=np.float32)
        batches = range(0, len(order), batch_size)
        progress = _progress(len(batches)) if show_progress else None
        results: list[np.ndarray] = []
        for start in batches:
            batch = [texts[i] for i in order[start : start + batch_size]]
            with self._lock:
                ids, mask = _tokenize(self.tokenizer, batch)
            hidden = self._session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            results.append(_mean_pool_normalise(hidden, mask))
            if progress is not None:
                progress.update(1)
        if progress is not None:
            progress.close()
        if not results:
            return out
        stacked = np.concatenate(results)
        vectors = np.empty_like(stacked)
        vectors[order] = stacked
        return vectors


def _progress(total: int):  # noqa: ANN202
    from tqdm.auto import tqdm  # already a dependency of sentence-transformers / transformers

    return tqdm(total=total, desc="Embedding", unit="batch")
