"""/healthz, /readyz (index loaded, DB reachable) and /metrics of the serving process."""
from __future__ import annotations

import time

import pytest
from starlette.testclient import TestClient

from bot.health import database_ready, index_ready, readiness, readiness_check
from bot.http_app import build_http_app
from bot.metrics import Metrics
from bot.settings import Settings
from bot.wiring import Components
from core.types import Answer, PipelineResult, RetrievalParams, Usage
from hypa_testkit.toy import TOY_CHUNKS
from storage.embedded import EmbeddedIndex
from storage.embedder import HashingEmbedder


@pytest.fixture
def components(tmp_path):
    c = Components(Settings(data_dir=tmp_path, collection="toy"))
    c.index = EmbeddedIndex(tmp_path / "index", embedder=HashingEmbedder(32))  # no model load
    return c


def _client(components: Components, metrics: Metrics | None = None) -> TestClient:
    return TestClient(build_http_app(readiness=readiness_check(components), metrics=metrics))


def test_healthz_is_always_ok(components):
    response = _client(components).get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readyz_names_the_failing_check_then_turns_ready(components):
    client = _client(components)
    not_ready = client.get("/readyz")
    assert not_ready.status_code == 503
    assert not_ready.json() == {"ready": False, "checks": {"index": False, "database": True, "answering": True}}
    components.index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {
        "ready": True,
        "checks": {"index": True, "database": True, "answering": True},
    }


def test_unreachable_database_is_not_ready(tmp_path):
    # Nothing listens on port 9: the store cannot be opened (or pinged), whichever comes first.
    settings = Settings(data_dir=tmp_path, collection="toy", database_url="postgresql://hypa:pw@127.0.0.1:9/hypa")
    c = Components(settings)
    c.index = EmbeddedIndex(tmp_path / "index", embedder=HashingEmbedder(32))
    c.index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    assert readiness(c) == {"index": True, "database": False, "answering": True}
    response = _client(c).get("/readyz")
    assert response.status_code == 503 and response.json()["checks"]["database"] is False


def test_checks_turn_exceptions_into_false():
    class Broken:
        def documents(self, collection):
            raise ConnectionError("weaviate down")

        def ping(self):
            raise OSError("db down")

    assert index_ready(Broken(), "toy") is False
    assert database_ready(Broken()) is False


def _result(refused: bool = False) -> PipelineResult:
    answer = Answer(text="x", refused=refused, usage=Usage(input_tokens=120, output_tokens=30), model="claude-test")
    return PipelineResult(
        question="q", answer=answer, contexts=[], queries=["q"],
        params=RetrievalParams(top_k=7, fusion="rankedFusion", alpha=0.5),
        timings_ms={"retrieve": 3.0, "generate": 250.0},
    )


def test_metrics_expose_requests_latency_tokens_errors_feedback(components):
    metrics = Metrics()
    metrics.observe_result("slack", _result())
    metrics.observe_result("slack", _result())
    metrics.observe_result("telegram", _result(refused=True))
    metrics.count_duplicate("slack")
    metrics.count_error("llm")
    metrics.count_feedback("slack", 1)
    metrics.count_feedback("telegram", -1)
    response = _client(components, metrics).get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    body = response.text
    for line in (
        'hypa_requests_total{outcome="answered",platform="slack"} 2.0',
        'hypa_requests_total{outcome="refused",platform="telegram"} 1.0',
        'hypa_requests_total{outcome="duplicate",platform="slack"} 1.0',
        'hypa_stage_seconds_count{stage="generate"} 3.0',
        'hypa_stage_seconds_bucket{le="0.005",stage="retrieve"} 3.0',
        'hypa_llm_tokens_total{kind="input",model="claude-test"} 360.0',
        'hypa_llm_tokens_total{kind="output",model="claude-test"} 90.0',
        'hypa_errors_total{component="llm"} 1.0',
        'hypa_feedback_total{platform="slack",rating="+1"} 1.0',
        'hypa_feedback_total{platform="telegram",rating="-1"} 1.0',
    ):
        assert line in body, line


def test_metrics_disabled_is_404(components):
    assert _client(components).get("/metrics").status_code == 404


def test_an_index_that_cannot_be_opened_is_named_not_raised(tmp_path):
    """Weaviate unreachable when the index is first built: /readyz names the index, never a 500."""
    class Unopenable(Components):
        @property
        def index(self):
            raise ConnectionError("weaviate at http://weaviate:8080 is unreachable")

    broken = Unopenable(Settings(data_dir=tmp_path, collection="toy"))
    assert readiness(broken) == {"index": False, "database": True, "answering": True}
    response = _client(broken).get("/readyz")
    assert response.status_code == 503 and response.json()["checks"] == {"index": False, "database": True, "answering": True}


def test_readyz_reports_a_pipeline_that_cannot_answer(tmp_path):
    """An answer stuck in the pipeline (e.g. a graph file that never finishes loading): the index
    and the database are fine, yet nobody gets an answer; /readyz must say so, then recover."""
    import threading

    from core.conversation import IncomingMessage

    class StuckPipeline:
        default_collection = "toy"

        def __init__(self):
            self.entered = threading.Event()
            self.release = threading.Event()

        def answer(self, question, history=(), collection=None):
            self.entered.set()
            self.release.wait(30)
            raise RuntimeError("released")

    c = Components(Settings(data_dir=tmp_path, collection="toy", answer_stall_s=0.2))
    c.index = EmbeddedIndex(tmp_path / "index", embedder=HashingEmbedder(32))
    c.index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    pipeline = StuckPipeline()
    c.__dict__["pipeline"] = pipeline  # what Components.conversation() wires in
    service = c.conversation()
    client = _client(c)
    assert client.get("/readyz").status_code == 200

    message = IncomingMessage(platform="slack", workspace="T1", channel="C1", thread="1.0", message_id="1.0",
                              user="U1", text="What is a widget audit?")
    worker = threading.Thread(target=service.handle, args=(message,), daemon=True)
    worker.start()
    assert pipeline.entered.wait(5)
    time.sleep(0.3)  # longer than answer_stall_s
    stuck = client.get("/readyz")
    assert stuck.status_code == 503
    assert stuck.json()["checks"] == {"index": True, "database": True, "answering": False}

    pipeline.release.set()
    worker.join(5)
    assert not worker.is_alive()
    assert client.get("/readyz").status_code == 200
    c.store.close()
