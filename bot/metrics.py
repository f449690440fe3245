"""Prometheus metrics for one process: requests, per-stage latency, LLM tokens, errors, feedback.

Implements core.metrics.Metrics, which the conversation service and the adapters report to. A registry
per instance (no module-level global state), exposed at /metrics by bot.http_app.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from core.types import Answer, PipelineResult

_STAGE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "hypa_requests_total", "Messages handled, by platform and outcome (answered|refused|duplicate|error).",
            ["platform", "outcome"], registry=self.registry,
        )
        self.stage_seconds = Histogram(
            "hypa_stage_seconds", "Pipeline stage latency.", ["stage"], buckets=_STAGE_BUCKETS,
            registry=self.registry,
        )
        self.llm_tokens = Counter(
            "hypa_llm_tokens_total", "LLM tokens by model and kind (input|output|cache_read|cache_creation).",
            ["model", "kind"], registry=self.registry,
        )
        self.errors = Counter("hypa_errors_total", "Errors by component.", ["component"], registry=self.registry)
        self.rejected = Counter(
            "hypa_rejected_requests_total",
            "HTTP requests refused before any handling, by path and reason (too_large, bad_signature, ...).",
            ["path", "reason"], registry=self.registry,
        )
        self.takeovers = Counter(
            "hypa_lease_takeovers_total",
            "Replies resumed after the worker answering them stopped renewing its lease (it died), by platform.",
            ["platform"], registry=self.registry,
        )
        self.feedback = Counter(
            "hypa_feedback_total", "Feedback events by platform and rating (+1|-1|0 removed).",
            ["platform", "rating"], registry=self.registry,
        )
        self.feedback_reasons = Counter(
            "hypa_feedback_reasons_total", "Reasons given with a 👎, by platform and kind (core/review.py).",
            ["platform", "kind"], registry=self.registry,
        )
        self.reviews = Counter(
            "hypa_reviews_total",
            "Review loop events by platform and event (requested_downvote|requested_ask_person|corrected|fine).",
            ["platform", "event"], registry=self.registry,
        )

    def observe_result(self, platform: str, result: PipelineResult) -> None:
        """One answered message (duplicates: count_duplicate; pipeline failures: the service counts "error")."""
        self.count_request(platform, "refused" if result.answer.refused else "answered")
        for stage, ms in result.timings_ms.items():
            self.stage_seconds.labels(stage).observe(ms / 1000.0)
        self.count_llm_tokens(result.answer)

    def count_request(self, platform: str, outcome: str) -> None:
        self.requests.labels(platform, outcome).inc()

    def count_llm_tokens(self, answer: Answer) -> None:
        """The tokens an answer cost (also for Claude's answer arriving after the quoted one was shown)."""
        usage, model = answer.usage, answer.model
        for kind, n in (
            ("input", usage.input_tokens), ("output", usage.output_tokens),
            ("cache_read", usage.cache_read_input_tokens), ("cache_creation", usage.cache_creation_input_tokens),
        ):
            if n:
                self.llm_tokens.labels(model, kind).inc(n)

    def count_duplicate(self, platform: str) -> None:
        self.count_request(platform, "duplicate")

    def count_takeover(self, platform: str) -> None:
        self.takeovers.labels(platform).inc()

    def count_error(self, component: str) -> None:
        self.errors.labels(component).inc()

    def count_rejected(self, path: str, reason: str) -> None:
        self.rejected.labels(path, reason).inc()

    def count_feedback(self, platform: str, rating: int) -> None:
        self.feedback.labels(platform, f"{rating:+d}" if rating else "0").inc()

    def count_feedback_reason(self, platform: str, kind: str) -> None:
        self.feedback_reasons.labels(platform, kind).inc()

    def count_review(self, platform: str, event: str) -> None:
        self.reviews.labels(platform, event).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
