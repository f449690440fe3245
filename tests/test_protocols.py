"""The concrete pieces in storage/ and bot/ implement the Protocols core/ owns (issue 16, item 1).

`runtime_checkable` checks that every method is there; mypy (.ci/run) checks their signatures where
bot/wiring.py plugs them in.
"""
from __future__ import annotations

from bot.metrics import Metrics as PrometheusMetrics
from core.conversation_store import ConversationStore
from core.index import ChunkIndex
from core.kg.build import KGStore
from core.metrics import Metrics
from storage.embedded import EmbeddedIndex
from storage.embedder import HashingEmbedder
from storage.kg_store import KGStore as FileKGStore
from storage.sql import ConversationStore as SQLConversationStore


def test_the_embedded_index_is_a_chunk_index(tmp_path):
    assert isinstance(EmbeddedIndex(tmp_path / "index", embedder=HashingEmbedder()), ChunkIndex)


def test_the_sql_store_is_a_conversation_store(tmp_path):
    store = SQLConversationStore(f"sqlite:///{tmp_path / 'hypa.sqlite3'}")
    try:
        assert isinstance(store, ConversationStore)
    finally:
        store.close()


def test_a_store_missing_a_method_is_not_a_conversation_store():
    class Partial:
        lease = None

        def ping(self) -> bool:
            return True

    assert not isinstance(Partial(), ConversationStore)


def test_the_prometheus_metrics_are_core_metrics():
    assert isinstance(PrometheusMetrics(), Metrics)


def test_a_counted_request_shows_at_metrics():
    metrics = PrometheusMetrics()
    metrics.count_request("slack", "error")
    metrics.count_duplicate("slack")
    rendered = metrics.render().decode()
    assert 'hypa_requests_total{outcome="error",platform="slack"} 1.0' in rendered
    assert 'hypa_requests_total{outcome="duplicate",platform="slack"} 1.0' in rendered


def test_the_file_graph_store_is_a_kg_store(tmp_path):
    store: KGStore = FileKGStore(tmp_path)  # mypy checks the signatures here
    assert store.load("toy") is None and store.stamp("toy") is None
