"""Ranking parity against a REAL Weaviate: embedded and Weaviate return the same top-k on the dev questions.

Runs only when WEAVIATE_URL is set (e.g. `docker compose up weaviate` then
`WEAVIATE_URL=http://localhost:8080 pytest tests/test_weaviate_live.py`); no server can run in the
project's build environment, where it is skipped. It builds LL144 into an embedded index, migrates it
(same vectors) into throw-away Weaviate collections, and compares both backends' top-k for every dev
question (the `question` field only), with both fusion methods.

The embedded side uses 100 candidates per side here because Weaviate's hybrid query fetches
max(100, limit) hits from each sub-search (usecases/traverser/explorer.go: `hybrid.DefaultLimit`).
"""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MIRROR = Path(os.environ.get("HYPA_CORPUS_MIRROR", ROOT.parent / "shared" / "data" / "corpus"))
DEV = ROOT.parent / "shared" / "data" / "eval" / "ll144_dev.jsonl"
WEAVIATE_URL = os.environ.get("WEAVIATE_URL", "")
TOP_K = 7

pytestmark = [
    pytest.mark.corpus,
    pytest.mark.model,
    pytest.mark.skipif(
        not WEAVIATE_URL,
        reason="WEAVIATE_URL is not set: no Weaviate server to compare against (run `docker compose up -d weaviate` "
        "and set WEAVIATE_URL=http://localhost:8080 to run the parity check)",
    ),
    pytest.mark.skipif(not (MIRROR / "ll144").is_dir() or not DEV.is_file(), reason="LL144 corpus or dev set not found"),
]


@pytest.fixture(scope="module")
def backends(tmp_path_factory):
    from bot.configs import weaviate_config
    from bot.corpus import fetch_corpus
    from bot.settings import Settings
    from bot.wiring import Components
    from storage.embedded import EmbeddedIndex
    from storage.weaviate_index import (
        WEAVIATE_SUBSEARCH_LIMIT,
        WeaviateIndex,
        copy_collection,
    )

    data_dir = tmp_path_factory.mktemp("parity")
    settings = Settings(data_dir=data_dir, corpus_mirror=MIRROR, index_backend="embedded")
    components = Components(settings)
    for f in fetch_corpus("ll144", settings.corpus_dir, settings.corpus_mirror, allow_download=False):
        assert components.ingest(f.path, "ll144").status != "failed"
    embedded = EmbeddedIndex(settings.index_dir, embedder=components.embedder, candidates=WEAVIATE_SUBSEARCH_LIMIT)
    class_name = f"HypaParity{uuid.uuid4().hex[:8]}"
    remote = WeaviateIndex.from_config(
        weaviate_config(Settings(data_dir=data_dir, weaviate_collection=class_name)), embedder=components.embedder
    )
    copy_collection(embedded, remote, "ll144")
    yield embedded, remote, components.embedder
    for name in (remote.class_name, remote.document_class):
        remote.client.collections.delete(name)
    remote.close()


@pytest.mark.parametrize("fusion", ["rankedFusion", "relativeScoreFusion"])
def test_same_top_k_on_the_dev_questions(backends, fusion):
    embedded, remote, embedder = backends
    questions = [json.loads(line)["question"] for line in DEV.read_text().splitlines() if line.strip()]
    mismatches = []
    for question in questions:
        vector = embedder.embed_queries([question])[0]
        ours = embedded.hybrid_search(question, collection="ll144", limit=TOP_K, fusion=fusion, alpha=0.5, vector=vector)
        theirs = remote.hybrid_search(question, collection="ll144", limit=TOP_K, fusion=fusion, alpha=0.5, vector=vector)
        if [r.chunk.id for r in ours] != [r.chunk.id for r in theirs]:
            mismatches.append((question, [r.chunk.label for r in ours], [r.chunk.label for r in theirs]))
    assert not mismatches, f"{len(mismatches)}/{len(questions)} questions differ; first: {mismatches[0]}"
