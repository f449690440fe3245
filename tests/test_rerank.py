"""Cross-encoder reranking, with a tiny BERT cross-encoder built here (no download, ~0.1 s to load).

The tiny model's weights are set by hand so that its score is a known function of its input: every
layer averages the tokens (uniform attention), and the classifier reads one hidden dimension that
only the word "zebra" feeds. A passage scores higher the larger the share of "zebra" among the
pair's tokens, and about 0 without it. So when the reranker puts the zebra chunk first, it is the
model's scores, not the input order, that decided.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from core.errors import RerankerUnavailable  # noqa: E402
from core.rerank import (  # noqa: E402
    CrossEncoderReranker,
    NoReranker,
    Reranker,
    build_reranker,
    passage_text,
)
from core.types import ScoredChunk  # noqa: E402
from hypa_testkit.toy import make_chunk  # noqa: E402

HIDDEN = 32
WORDS = (
    "the a of to and is for bias audit employer employment tool notice data candidate penalty "
    "independent auditor decision automated zebra must shall days"
).split()
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _write_tiny_cross_encoder(folder: Path, *, marker: str = "zebra", classifier: bool = True) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = SPECIAL + WORDS
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast.from_pretrained(folder)  # from vocab.txt alone (transformers 4 and 5)
    assert tokenizer.tokenize(f"{marker} audit") == [marker, "audit"]
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=1,
    )
    torch.manual_seed(0)
    if not classifier:  # a bare encoder (what an embedding model is): must be refused
        BertModel(config).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return folder

    model = BertForSequenceClassification(config)
    eye = torch.eye(HIDDEN)
    with torch.no_grad():
        emb = model.bert.embeddings
        # Zero-mean word vectors with dimension 0 empty, except the marker, which is +1 / -1 on
        # dimensions 0 / 1. LayerNorm (gain 1, bias 0) only rescales zero-mean vectors, so
        # dimension 0 stays 0 for every other token all the way up.
        words = torch.randn(len(vocab), HIDDEN)
        words[:, 0] = 0.0
        words[:, 1:] -= words[:, 1:].mean(dim=1, keepdim=True)
        words[vocab.index(marker)] = 0.0
        words[vocab.index(marker), 0], words[vocab.index(marker), 1] = 1.0, -1.0
        emb.word_embeddings.weight.copy_(words)
        emb.position_embeddings.weight.zero_()
        emb.token_type_embeddings.weight.zero_()
        for layer in model.bert.encoder.layer:
            attention = layer.attention
            for projection in (attention.self.query, attention.self.key):  # uniform attention
                projection.weight.zero_()
                projection.bias.zero_()
            attention.self.value.weight.copy_(eye)  # average the tokens as they are
            attention.self.value.bias.zero_()
            attention.output.dense.weight.copy_(eye)
            attention.output.dense.bias.zero_()
            layer.output.dense.weight.zero_()  # feed-forward adds nothing
            layer.output.dense.bias.zero_()
        model.bert.pooler.dense.weight.copy_(eye)
        model.bert.pooler.dense.bias.zero_()
        model.classifier.weight.zero_()
        model.classifier.weight[0, 0] = 5.0  # score = 5 * tanh(marker share signal)
        model.classifier.bias.zero_()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    return _write_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-cross-encoder"))


@pytest.fixture(scope="module")
def reranker(tiny_model_dir) -> CrossEncoderReranker:
    return CrossEncoderReranker(str(tiny_model_dir), max_length=64)


def _candidates(n: int = 20, *, zebra_at: int | None = None) -> list[ScoredChunk]:
    """`n` candidates in retrieval order, with descending retrieval scores."""
    fillers = [
        "the employer must give notice to the candidate",
        "a bias audit is an independent audit of the tool",
        "the penalty for the employer is for days",
        "data of the automated employment decision tool",
        "an independent auditor shall audit the data",
    ]
    out = []
    for i in range(n):
        text = fillers[i % len(fillers)] + (" zebra" if i == zebra_at else "") + f" {'and ' * (i % 3)}".rstrip()
        chunk = make_chunk(f"Toy § {i}", text, heading="Bias Audit." if i % 2 else "")
        out.append(ScoredChunk(chunk=chunk, score=1.0 - i / 100))
    return out


QUERY = "does the employer need a bias audit of the tool"


def test_tiny_model_loads_lazily_and_offline(tiny_model_dir):
    rr = CrossEncoderReranker(tiny_model_dir)
    assert not rr.is_loaded and rr.max_length == 512
    assert rr.rerank(QUERY, _candidates(3), top_k=2)
    assert rr.is_loaded


def test_output_length_order_membership_and_determinism(reranker):
    candidates = _candidates(20)
    first = reranker.rerank(QUERY, candidates, top_k=5)
    second = reranker.rerank(QUERY, candidates, top_k=5)
    assert len(first) == 5
    scores = [sc.score for sc in first]
    assert scores == sorted(scores, reverse=True)
    by_id = {sc.chunk.id: sc for sc in candidates}
    for sc in first:
        assert sc.chunk is by_id[sc.chunk.id].chunk and sc.kind == by_id[sc.chunk.id].kind
    assert [(sc.chunk.id, sc.score) for sc in first] == [(sc.chunk.id, sc.score) for sc in second]
    # The score is the cross-encoder's, not the retrieval score carried over.
    assert all(sc.score != by_id[sc.chunk.id].score for sc in first)


def test_top_k_larger_than_candidates_returns_all(reranker):
    assert len(reranker.rerank(QUERY, _candidates(4), top_k=10)) == 4
    assert reranker.rerank(QUERY, _candidates(4), top_k=0) == []


@pytest.mark.parametrize("zebra_at", [0, 7, 19])
def test_model_scores_drive_the_order(reranker, zebra_at):
    candidates = _candidates(20, zebra_at=zebra_at)
    top = reranker.rerank(QUERY, candidates, top_k=3)
    assert top[0].chunk.id == candidates[zebra_at].chunk.id
    assert top[0].score > 0.5 > abs(top[1].score)  # the zebra signal vs ~0 for the rest


def test_the_label_and_heading_are_read_too(reranker):
    # "zebra" only in the heading: still found, so the heading is part of the scored passage.
    plain = _candidates(5)
    headed = ScoredChunk(make_chunk("Toy § 99", "the employer must give notice", heading="Zebra"), 0.0)
    assert passage_text(headed.chunk) == "Toy § 99 Zebra\nthe employer must give notice"
    assert reranker.rerank(QUERY, [*plain, headed], top_k=1)[0].chunk.id == headed.chunk.id


def test_ties_keep_the_incoming_order_and_duplicates_are_scored_once(tiny_model_dir):
    class Flat(CrossEncoderReranker):
        def score(self, query, passages):
            self.seen = list(passages)
            return np.zeros(len(passages), dtype=np.float32)

    rr = Flat(tiny_model_dir)
    candidates = _candidates(6)
    out = rr.rerank(QUERY, [*candidates, candidates[2]], top_k=6)
    assert [sc.chunk.id for sc in out] == [sc.chunk.id for sc in candidates]
    assert len(rr.seen) == 6


def test_empty_candidates(reranker):
    assert reranker.rerank(QUERY, [], top_k=5) == []
    assert NoReranker().rerank(QUERY, [], top_k=5) == []


def test_empty_setting_gives_identity_reranker():
    rr = build_reranker("")
    assert isinstance(rr, NoReranker) and isinstance(rr, Reranker) and rr.name == "none"
    assert isinstance(build_reranker(None), NoReranker)
    assert isinstance(build_reranker("   "), NoReranker)
    candidates = tuple(_candidates(8))
    out = rr.rerank(QUERY, candidates, top_k=3)
    assert out == list(candidates[:3]) and isinstance(out, list)
    assert rr.rerank(QUERY, candidates, top_k=50) == list(candidates)



def test_factory_builds_cross_encoder(tiny_model_dir):
    rr = build_reranker(str(tiny_model_dir), max_length=128)
    assert isinstance(rr, CrossEncoderReranker) and isinstance(rr, Reranker)
    assert rr.max_length == 128 and not rr.is_loaded  # construction alone does not load


def test_missing_path_is_a_clear_error(tmp_path):
    missing = tmp_path / "bge-reranker-large"
    with pytest.raises(RerankerUnavailable) as info:
        build_reranker(str(missing))
    message = str(info.value)
    assert str(missing) in message and "does not exist" in message and "download" in message


def test_uncached_repo_id_is_a_clear_error():
    with pytest.raises(RerankerUnavailable, match="not in the local Hugging Face cache"):
        CrossEncoderReranker("no-such-org/no-such-reranker-xyz")


def test_embedding_model_folder_is_refused(tmp_path):
    bare = _write_tiny_cross_encoder(tmp_path / "encoder", classifier=False)
    with pytest.raises(RerankerUnavailable, match="not a cross-encoder"):
        CrossEncoderReranker(bare)


def test_folder_without_config_is_refused(tmp_path):
    (tmp_path / "junk").mkdir()
    with pytest.raises(RerankerUnavailable, match="no config.json"):
        CrossEncoderReranker(tmp_path / "junk")


def test_latency_of_twenty_candidates(reranker, capsys):
    candidates = _candidates(20, zebra_at=11)
    reranker.rerank(QUERY, candidates, top_k=5)  # warm
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        reranker.rerank(QUERY, candidates, top_k=5)
        runs.append((time.perf_counter() - start) * 1000)
    runs.sort()
    with capsys.disabled():
        print(f"\n[rerank] tiny cross-encoder, 20 candidates: median {runs[1]:.1f} ms (min {runs[0]:.1f} ms)")
    assert runs[1] < 2000
