"""Plain values the conversation store takes and returns (no ORM objects leave the store)."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from core.types import Citation

Outcome = Literal["answered", "refused", "invalid", "error"]


@dataclass(frozen=True)
class MessageClaim:
    """The result of recording an incoming message."""

    message_pk: int
    thread_pk: int
    # True: this caller recorded the message (or took over a dead worker's claim) and must answer it.
    # False: another delivery of the same message got there first.
    owner: bool


@dataclass(frozen=True)
class AnswerRecord:
    """Everything stored about one answer (the service fills it from a PipelineResult)."""

    question: str
    standalone_question: str
    text: str
    refused: bool
    outcome: Outcome
    collection: str = ""
    history_turns: int = 0
    complexity: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    chunk_ids: list[str] = field(default_factory=list)
    citations: list[Citation] = field(default_factory=list)
    note: str = ""
    model: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    context_tokens: int = 0
    latency_ms: float = 0.0


@dataclass(frozen=True)
class StoredAnswer:
    id: str
    record: AnswerRecord
    created_at: datetime
    message_pk: int
    thread_pk: int
    platform: str


@dataclass(frozen=True)
class RatedAnswer:
    """A rater's current rating joined with the answer it rates (for reports and exports)."""

    answer: StoredAnswer
    rater: str
    platform: str
    rating: int  # +1 / -1 (removed ratings, 0, are not returned)
    source: str
    reason: str
    rated_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class FeedbackChange:
    """One row of the append-only feedback log."""

    answer_id: str
    rater: str
    platform: str
    rating: int
    previous_rating: int
    source: str
    reason: str
    rated_at: datetime
    recorded_at: datetime
