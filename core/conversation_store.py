"""What the conversation service needs from a store: the `ConversationStore` Protocol and the plain
values it takes and returns (no ORM objects leave a store). storage/sql/ implements it on SQLAlchemy.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol, runtime_checkable

from core.conversation import FeedbackEvent, FeedbackOutcome, IncomingMessage
from core.review import Exchange, ReplyPromptRecord, RequestKind, Review, Verdict
from core.types import Citation, Turn

Outcome = Literal["answered", "refused", "invalid", "error"]

# A message is claimed at most this often: a question whose answering kills the process every time
# gets an apology on its last attempt instead of taking the bot down for ever.
MAX_CLAIM_ATTEMPTS = 4


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


@runtime_checkable
class ConversationStore(Protocol):
    """Threads, messages and their leases, answers, platform links, deliveries and feedback: what
    core.conversation_service.StoredConversationService keeps (storage.sql.ConversationStore)."""

    # A lease not renewed for this long belongs to a worker that died (HYPA_DELIVERY_LEASE_S).
    lease: timedelta

    def ping(self) -> bool:
        """Readiness: the store answers."""

    def claim_message(self, message: IncomingMessage, text_: str | None = None, *, holder: str = "") -> MessageClaim:
        """Record an incoming message (its thread too) and take the lease on answering it, if free
        (a message claimed MAX_CLAIM_ATTEMPTS times is not taken over again)."""

    def renew_claims(self, holder: str, message_pks: Iterable[int]) -> int:
        """Push the leases `holder` still holds forward; returns how many were renewed."""

    def set_placeholder(self, message_pk: int, placeholder_id: str) -> str:
        """Remember the placeholder posted for a message; returns the one that counts."""

    def mark_delivered(self, message_pk: int) -> None:
        """The reply was shown: the lease is complete."""

    def reclaim_messages(
        self, platform: str, holder: str, *, limit: int = 20, exclude: Iterable[int] = ()
    ) -> list[OwedMessage]:
        """Take over the lapsed leases of a platform's messages still owed a reply."""

    def is_bot_thread(self, platform: str, workspace: str, channel: str, thread: str) -> bool: ...

    def thread_history(self, thread_pk: int, turns: int, *, before_message_pk: int | None = None) -> list[Turn]:
        """The last `turns` exchanges of a thread, oldest first."""

    def thread_for_answer(self, answer_id: str) -> str | None: ...

    def store_answer(self, claim: MessageClaim, record: AnswerRecord) -> tuple[StoredAnswer, bool]:
        """(answer, True), or (the earlier answer, False) when another worker answered first."""

    def replace_answer(self, answer_id: str, record: AnswerRecord) -> StoredAnswer:
        """Overwrite what an answer says (Claude's answer after the quoted one); LookupError if unknown."""

    def answer_for_message(self, message_pk: int) -> StoredAnswer | None: ...

    def link_platform_message(self, answer_id: str, platform: str, channel: str, message_id: str) -> None: ...

    def answer_for_platform_message(self, platform: str, channel: str, message_id: str) -> str | None: ...

    def claim_delivery(self, platform: str, delivery_id: str) -> bool:
        """True the first time a platform delivery id is seen."""

    def record_feedback(self, event: FeedbackEvent) -> FeedbackOutcome:
        """Apply one rating act (core.conversation.UnknownAnswer / AnswerNotShownHere when refused)."""

    # --- the review loop (core/review.py) ---

    def record_reason(self, event: FeedbackEvent) -> FeedbackOutcome:
        """Attach a reason (and its kind) to the rater's 👎 act at `event.order`, storing that act first
        if it is not stored yet."""

    def exchange(self, answer_id: str) -> Exchange | None:
        """The question and answer with where it was asked and its review; None for an unknown id."""

    def request_review(self, answer_id: str, requester: str, kind: RequestKind) -> Review:
        """Open a pending review of the exchange (the first request) or count one more request on it."""

    def record_review(
        self, answer_id: str, reviewer: str, verdict: Verdict, reference_answer: str = "", reference_provision: str = ""
    ) -> Review:
        """Settle a review: "fine", or "corrected" with the reference answer and its provision."""

    def note_correction_posted(self, answer_id: str) -> None: ...

    def note_reply_prompt(self, prompt: ReplyPromptRecord) -> None: ...

    def reply_prompt(self, platform: str, channel: str, prompt_id: str) -> ReplyPromptRecord | None: ...
