"""Plain values the conversation store takes and returns (no ORM objects leave the store)."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from core.review import Review
from core.types import Citation

Outcome = Literal["answered", "refused", "invalid", "error"]


@dataclass(frozen=True)
class MessageClaim:
    """The result of recording an incoming message (or of taking over its lapsed lease)."""

    message_pk: int
    thread_pk: int
    # True: this caller holds the lease (it recorded the message, or took over a lease that lapsed)
    # and owes the reply. False: another delivery of the same message holds it or was answered.
    owner: bool
    attempt: int = 1  # 1 for the first claim; each takeover adds one
    placeholder_id: str | None = None  # the placeholder an earlier attempt posted, if any
    answered: bool = False  # an answer is stored already (an earlier attempt computed it)
    delivered: bool = False  # the reply was shown (only ever True when owner is False)


@dataclass(frozen=True)
class OwedMessage:
    """A message whose lease this worker took over by the recovery sweep: the message as it was
    received (text as stored), and the claim."""

    platform: str
    workspace: str
    channel: str
    thread: str
    user: str
    text: str
    message_id: str
    sent_at: datetime
    claim: MessageClaim


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
    reason_kind: str = ""  # core/review.py REASON_KINDS, "" when no reason was chosen
    review_state: str = ""  # pending | corrected | fine, "" when nobody asked for a review


@dataclass(frozen=True)
class ReviewedAnswer:
    """A settled review (corrected or fine) with the answer it reviews and the 👎 reasons given."""

    answer: StoredAnswer
    review: Review
    reasons: tuple[tuple[str, str], ...] = ()  # (reason_kind, reason) of the current 👎s


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
    reason_kind: str = ""
