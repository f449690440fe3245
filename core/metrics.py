"""`Metrics`: what the conversation service and the chat adapters count while they work.

core/ and adapters/ report through this Protocol; bot.metrics.Metrics implements it with Prometheus
counters served at /metrics (bot/http_app.py), and a process without metrics passes None.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from core.types import Answer, PipelineResult


@runtime_checkable
class Metrics(Protocol):
    def observe_result(self, platform: str, result: PipelineResult) -> None:
        """One answered message: its outcome, per-stage latency and LLM tokens."""

    def count_request(self, platform: str, outcome: str) -> None:
        """One message handled with this outcome (answered|refused|duplicate|error)."""

    def count_llm_tokens(self, answer: Answer) -> None:
        """The tokens an answer cost (also for Claude's answer arriving after the quoted one)."""

    def count_duplicate(self, platform: str) -> None:
        """A redelivered message that was not answered again."""

    def count_takeover(self, platform: str) -> None:
        """A reply resumed after the worker answering it died."""

    def count_error(self, component: str) -> None: ...

    def count_rejected(self, path: str, reason: str) -> None:
        """An HTTP request refused before any handling (too large, bad signature, ...)."""

    def count_feedback(self, platform: str, rating: int) -> None:
        """A rating that changed an answer's feedback (+1, -1, 0 removed)."""

    def count_feedback_reason(self, platform: str, kind: str) -> None:
        """A reason given with a 👎, by its kind (core/review.py REASON_KINDS)."""

    def count_review(self, platform: str, event: str) -> None:
        """A step of the review loop: a review requested (by kind) or settled (by verdict)."""
