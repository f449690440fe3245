"""The conversation store's tables (SQLAlchemy 2.x typed declarative models).

Alembic migrations in `storage/sql/migrations/` create exactly this schema; tests/test_sql_store.py
checks that autogenerate finds no difference between the two.
"""
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.sql.expression import false
from sqlalchemy.types import TypeDecorator

# Deterministic constraint names: migrations and models agree on them on every database.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

ANSWER_ID_LENGTH = 24  # generated ids are 16 url-safe characters; the column leaves room


class UtcDateTime(TypeDecorator[datetime]):
    """Stored as naive UTC (SQLite has no time zones), always returned as an aware UTC datetime."""

    impl = DateTime(timezone=False)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:  # naive values are taken to be UTC already
            return value
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UtcDateTime(), dict[str, Any]: JSON(), list[Any]: JSON()}


class Thread(Base):
    """A conversation: a Slack thread (root ts) or a Telegram reply chain (root message id)."""

    __tablename__ = "threads"
    __table_args__ = (UniqueConstraint("platform", "workspace", "channel", "thread_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(32))
    workspace: Mapped[str] = mapped_column(String(64))
    channel: Mapped[str] = mapped_column(String(128))
    thread_key: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime]


class Message(Base):
    """One incoming user message, and the lease on answering it.

    The unique key makes a duplicate delivery lose the insert race. Answering is at-least-once: a
    worker holds a lease (`claimed_by`, renewed in `claimed_at`) until the reply is shown
    (`delivered_at`); a lease not renewed for the store's lease time belonged to a worker that died,
    and a redelivery or the recovery sweep takes it over (`attempts` + 1).
    """

    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint("platform", "workspace", "channel", "message_id"),
        Index("ix_messages_thread_sent", "thread_id", "sent_at"),
        # The recovery sweep's query: messages of a platform still owed a reply, oldest lease first.
        Index("ix_messages_owed", "platform", "delivered_at", "claimed_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    thread_id: Mapped[int] = mapped_column(ForeignKey("threads.id"))
    platform: Mapped[str] = mapped_column(String(32))
    workspace: Mapped[str] = mapped_column(String(64))
    channel: Mapped[str] = mapped_column(String(128))
    message_id: Mapped[str] = mapped_column(String(128))
    user: Mapped[str] = mapped_column(String(128))
    text: Mapped[str] = mapped_column(Text)
    sent_at: Mapped[datetime]
    received_at: Mapped[datetime]
    # When the lease was taken or last renewed by its holder.
    claimed_at: Mapped[datetime]
    # The lease holder (a worker process's random id); NULL for messages stored before leases existed.
    claimed_by: Mapped[str | None] = mapped_column(String(32))
    # How many times the message was claimed: 1, plus one per takeover of a lapsed lease.
    attempts: Mapped[int] = mapped_column(Integer, server_default="1")
    # The platform message saying "Looking that up…" (Slack ts, Telegram message id), once posted.
    placeholder_id: Mapped[str | None] = mapped_column(String(128))
    # When the reply (answer or apology) was shown: the lease is complete. NULL while a reply is owed.
    delivered_at: Mapped[datetime | None]


class AnswerRow(Base):
    """What the bot answered to one message, and how the answer was made."""

    __tablename__ = "answers"

    id: Mapped[str] = mapped_column(String(ANSWER_ID_LENGTH), primary_key=True)
    # unique: one answer per message, even if two workers race past the claim.
    message_id: Mapped[int] = mapped_column(ForeignKey("messages.id"), unique=True)
    thread_id: Mapped[int] = mapped_column(ForeignKey("threads.id"), index=True)
    question: Mapped[str] = mapped_column(Text)
    standalone_question: Mapped[str] = mapped_column(Text)
    collection: Mapped[str] = mapped_column(String(128))
    history_turns: Mapped[int] = mapped_column(Integer)
    complexity: Mapped[int | None] = mapped_column(Integer)
    params: Mapped[dict[str, Any]]
    chunk_ids: Mapped[list[Any]]
    citations: Mapped[list[Any]]
    text: Mapped[str] = mapped_column(Text)
    refused: Mapped[bool] = mapped_column(Boolean)
    outcome: Mapped[str] = mapped_column(String(16))  # answered | refused | invalid | error
    note: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(128))
    tokens_in: Mapped[int] = mapped_column(Integer)
    tokens_out: Mapped[int] = mapped_column(Integer)
    context_tokens: Mapped[int] = mapped_column(Integer)
    latency_ms: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(index=True)


class PlatformMessage(Base):
    """A bot message on a platform that shows an answer (reactions on it are feedback)."""

    __tablename__ = "platform_messages"
    __table_args__ = (UniqueConstraint("platform", "channel", "message_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(32))
    channel: Mapped[str] = mapped_column(String(128))
    message_id: Mapped[str] = mapped_column(String(128))
    answer_id: Mapped[str] = mapped_column(ForeignKey("answers.id"), index=True)
    created_at: Mapped[datetime]


class Delivery(Base):
    """A platform delivery id already handled, for replies sent at most once (Telegram update_id of
    help texts). Questions are claimed as leases on `messages`; rating acts count once by position."""

    __tablename__ = "deliveries"
    __table_args__ = (UniqueConstraint("platform", "delivery_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(32))
    delivery_id: Mapped[str] = mapped_column(String(128))
    received_at: Mapped[datetime] = mapped_column(index=True)


class FeedbackRow(Base):
    """A rater's current rating of an answer: +1, -1, or 0 after the rating was removed."""

    __tablename__ = "feedback"
    __table_args__ = (UniqueConstraint("answer_id", "rater"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    answer_id: Mapped[str] = mapped_column(ForeignKey("answers.id"))
    rater: Mapped[str] = mapped_column(String(128))
    platform: Mapped[str] = mapped_column(String(32))
    rating: Mapped[int] = mapped_column(SmallInteger)
    source: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    # The choice a 👎's reason was given with (core/review.py REASON_KINDS: wrong_provision, incomplete,
    # outdated, not_covered, other); "" when no reason was given (reactions, 👍).
    reason_kind: Mapped[str] = mapped_column(String(32), server_default="")
    rated_at: Mapped[datetime]  # when the rater acted (the event's time)
    updated_at: Mapped[datetime] = mapped_column(index=True)  # when the store recorded it


class FeedbackAct(Base):
    """Every rating act as the platform delivered it (a click, a reaction added or taken away), with
    its position on the platform's clock. A rater's current rating is the fold of their acts in that
    order (core/ratings.py), so acts processed out of order end where the rater left off."""

    __tablename__ = "feedback_acts"
    # One act per position: a redelivered act is stored (and counted) once.
    __table_args__ = (UniqueConstraint("answer_id", "rater", "act_order"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    answer_id: Mapped[str] = mapped_column(ForeignKey("answers.id"))
    rater: Mapped[str] = mapped_column(String(128))
    platform: Mapped[str] = mapped_column(String(32))
    rating: Mapped[int] = mapped_column(SmallInteger)
    withdraws: Mapped[int | None] = mapped_column(SmallInteger)
    source: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    reason_kind: Mapped[str] = mapped_column(String(32), server_default="")
    # Slack event_ts / action_ts in microseconds, Telegram update_id, or the local clock in microseconds.
    act_order: Mapped[int] = mapped_column(BigInteger)
    rated_at: Mapped[datetime]
    recorded_at: Mapped[datetime]


class FeedbackLogRow(Base):
    """Append-only: every change of a rating, removals included."""

    __tablename__ = "feedback_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    answer_id: Mapped[str] = mapped_column(ForeignKey("answers.id"), index=True)
    rater: Mapped[str] = mapped_column(String(128))
    platform: Mapped[str] = mapped_column(String(32))
    rating: Mapped[int] = mapped_column(SmallInteger)
    previous_rating: Mapped[int] = mapped_column(SmallInteger)
    source: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    reason_kind: Mapped[str] = mapped_column(String(32), server_default="")
    rated_at: Mapped[datetime]
    recorded_at: Mapped[datetime]


class ReviewRow(Base):
    """A person's review of one exchange (an answer), asked for by a 👎 with a reason or an "Ask a
    person" press, and settled by a reviewer in the review channel: the answer is fine, or here is the
    correct answer and the provision it rests on (the exchange's reference for `hypa eval`)."""

    __tablename__ = "reviews"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    answer_id: Mapped[str] = mapped_column(ForeignKey("answers.id"), unique=True)
    state: Mapped[str] = mapped_column(String(16))  # pending | corrected | fine
    # The first request: "downvote" (a 👎 with its reason) or "ask_person"; by whom and when.
    requested_by: Mapped[str] = mapped_column(String(128))
    request_kind: Mapped[str] = mapped_column(String(16))
    requested_at: Mapped[datetime]
    requests: Mapped[int] = mapped_column(Integer, server_default="1")  # every request counts
    reviewer: Mapped[str | None] = mapped_column(String(128))
    reviewed_at: Mapped[datetime | None] = mapped_column(index=True)
    # The reviewer's correct answer and the provision it rests on ("corrected" only).
    reference_answer: Mapped[str | None] = mapped_column(Text)
    reference_provision: Mapped[str | None] = mapped_column(Text)
    # The correction was posted in the original thread as the reviewer's.
    correction_posted: Mapped[bool] = mapped_column(Boolean, server_default=false())


class ReplyPrompt(Base):
    """A bot message asking for a written reply (Telegram ForceReply): the reason for a 👎, or a
    reviewer's correct answer. A reply to it is read as that, not as a question."""

    __tablename__ = "reply_prompts"
    __table_args__ = (UniqueConstraint("platform", "channel", "prompt_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(32))
    channel: Mapped[str] = mapped_column(String(128))
    prompt_id: Mapped[str] = mapped_column(String(128))  # the prompt's platform message id
    purpose: Mapped[str] = mapped_column(String(16))  # reason | correction
    answer_id: Mapped[str] = mapped_column(ForeignKey("answers.id"))
    user: Mapped[str] = mapped_column(String(128))  # whose reply counts (the rater, the reviewer)
    # The rating act the reason belongs to (its position on the platform's clock); 0 for corrections.
    act_order: Mapped[int] = mapped_column(BigInteger)
    # For a correction: the review post it was asked from (updated once the correction is saved).
    review_post_id: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime]
