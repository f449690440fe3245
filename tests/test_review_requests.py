"""Opening a review, shared by the Slack and Telegram review desks (adapters/review_requests.py)."""
from __future__ import annotations

import asyncio

from adapters.review_requests import open_review


class Metrics:
    def __init__(self) -> None:
        self.reviews: list[tuple[str, str]] = []
        self.errors: list[str] = []

    def count_review(self, platform: str, event: str) -> None:
        self.reviews.append((platform, event))

    def count_error(self, component: str) -> None:
        self.errors.append(component)


class Service:
    def __init__(self, exchanges: dict, fail: bool = False) -> None:
        self.exchanges = exchanges
        self.fail = fail
        self.requests: list[tuple[str, str, str]] = []

    def request_review(self, answer_id: str, requester: str, kind: str) -> None:
        if self.fail:
            raise RuntimeError("database is gone")
        self.requests.append((answer_id, requester, kind))

    def exchange(self, answer_id: str):
        return self.exchanges.get(answer_id)


def test_a_review_is_opened_counted_and_its_exchange_returned():
    service, metrics = Service({"a1": "exchange a1"}), Metrics()
    assert asyncio.run(open_review(service, metrics, "slack", "a1", "U1", "downvote")) == "exchange a1"
    assert service.requests == [("a1", "U1", "downvote")] and metrics.reviews == [("slack", "requested_downvote")]
    # The caller's exchange is used as it is.
    assert asyncio.run(open_review(service, metrics, "slack", "a1", "U1", "ask_person", "given")) == "given"


def test_an_unknown_answer_or_a_failing_store_gives_nothing_to_post():
    metrics = Metrics()
    assert asyncio.run(open_review(Service({}), metrics, "telegram", "zz", "7", "ask_person")) is None
    assert metrics.reviews == [] and metrics.errors == []
    assert asyncio.run(open_review(Service({}, fail=True), metrics, "telegram", "a1", "7", "downvote")) is None
    assert metrics.errors == ["telegram_review"] and metrics.reviews == []
    assert asyncio.run(open_review(Service({}, fail=True), None, "telegram", "a1", "7", "downvote")) is None
