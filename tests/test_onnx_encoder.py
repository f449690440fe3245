"""The ONNX embedding path: same vectors as sentence-transformers, exported once, safe fallbacks."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import storage.embedder as embedder_module
from core.errors import OnnxExportError
from core.model_files import packaged_model_dir
from storage.embedder import Embedder
from storage.onnx_encoder import supports_onnx

TEXTS = [
    "Do I need a bias audit before using an automated employment decision tool?",
    "notice",
    "An employer shall provide notice to each candidate. " * 60,  # past the 256 word-piece cut
    "Qu'est-ce qu'un audit de biais ? 偏见审计是什么？",
    "",
]


def test_packaged_minilm_is_a_mean_pooling_model():
    assert supports_onnx(packaged_model_dir())


def test_cls_pooling_models_keep_the_sentence_transformers_path(tmp_path: Path):
    model = tmp_path / "cls-model"
    shutil.copytree(packaged_model_dir(), model, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    config = model / "1_Pooling" / "config.json"
    pooling = json.loads(config.read_text())
    pooling.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    config.write_text(json.dumps(pooling))
    assert not supports_onnx(model)
    with pytest.raises(OnnxExportError, match="mean-pooling"):
        Embedder(model, backend="onnx", onnx_dir=tmp_path / "onnx")._load_onnx()


def test_unknown_backend_is_rejected():
    with pytest.raises(ValueError, match="auto, onnx or torch"):
        Embedder(backend="tensorflow")


@pytest.mark.model
def test_onnx_vectors_match_sentence_transformers_and_the_export_is_reused(tmp_path: Path, monkeypatch):
    onnx = Embedder(backend="auto", onnx_dir=tmp_path)
    got = onnx.embed_passages(TEXTS)
    assert onnx.backend_used == "onnx" and onnx.onnx_path.is_file()
    want = Embedder(backend="torch").embed_passages(TEXTS)
    assert got.shape == want.shape == (len(TEXTS), 384)
    assert np.abs(got - want).max() < 1e-5
    # One text at a time (no padding) gives the same vector as inside a padded batch.
    assert np.abs(onnx.embed_queries([TEXTS[1]])[0] - got[1]).max() < 1e-5

    def no_export(*args, **kwargs):
        raise AssertionError("a second process must reuse the exported graph")

    monkeypatch.setattr(embedder_module, "export_onnx", no_export)
    again = Embedder(backend="onnx", onnx_dir=tmp_path)
    assert np.abs(again.embed_queries(TEXTS[:1]) - got[:1]).max() < 1e-6


def test_a_failed_export_falls_back_to_torch_in_auto_and_fails_clearly_in_onnx(tmp_path: Path, monkeypatch):
    def broken_export(*args, **kwargs):
        raise OnnxExportError("ONNX vectors differ from PyTorch by 5.00e-02")

    monkeypatch.setattr(embedder_module, "export_onnx", broken_export)
    auto = Embedder(backend="auto", onnx_dir=tmp_path)
    assert auto._load_onnx() is None  # the caller then loads sentence-transformers
    strict = Embedder(backend="onnx", onnx_dir=tmp_path)
    with pytest.raises(OnnxExportError, match="differ"):
        strict._load_onnx()
