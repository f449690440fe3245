"""`ConversationStore`: threads, messages, answers, platform links, deliveries and feedback in SQL.

Every race the chat platforms can produce is settled by a unique constraint inside one
transaction, so several threads, processes or replicas sharing the database agree:

- the same message delivered twice -> one `messages` row; only the holder of its lease answers it;
  a lease completes when the reply is shown, and one not renewed within `lease` (its worker died) is
  taken over by exactly one redelivery or recovery sweep (a conditional UPDATE);
- two workers answering one message -> `answers.message_id` is unique, the second gets the first's answer;
- the same delivery id twice -> one `deliveries` row (`claim_delivery` is True once);
- concurrent clicks by one rater -> one `feedback` row per (answer, rater), locked while it changes;
  every act is kept in `feedback_acts` (once per position on the platform's clock) and the row is the
  fold of the rater's acts in that order, so acts processed out of order still end on the latest;
  each change is appended to `feedback_log` in the same transaction.
"""
from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    Table,
    and_,
    exists,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError

from core.conversation import (
    AnswerNotShownHere,
    FeedbackEvent,
    FeedbackOutcome,
    IncomingMessage,
    UnknownAnswer,
)
from core.conversation_store import (
    MAX_CLAIM_ATTEMPTS,
    AnswerRecord,
    FeedbackChange,
    MessageClaim,
    OwedMessage,
    RatedAnswer,
    ReviewedAnswer,
    StoredAnswer,
)
from core.ratings import RatingAct, fold, order_from_time
from core.review import Exchange, ReplyPromptRecord, RequestKind, Review, Verdict
from core.types import Citation, Turn
from storage.sql.engine import make_engine, read_only
from storage.sql.migrate import upgrade_to_head
from storage.sql.models import (
    AnswerRow,
    Delivery,
    FeedbackAct,
    FeedbackLogRow,
    FeedbackRow,
    Message,
    PlatformMessage,
    ReplyPrompt,
    ReviewRow,
    Thread,
)

# Stored message text is capped (platforms cap it too: Slack 40,000, Telegram 4,096 characters).
MAX_STORED_TEXT = 50_000
MAX_REASON_CHARS = 2_000
# A lease not renewed for this long belongs to a worker that died: a redelivery or the recovery sweep
# takes it over. Holders renew every third of it (adapters.delivery.LeaseKeeper), so a live worker
# keeps its lease however long the answer takes. HYPA_DELIVERY_LEASE_S.
DEFAULT_LEASE = timedelta(seconds=30)
# Messages received longer ago than this are no longer answered by the recovery sweep.
DEFAULT_RECOVERY_WINDOW = timedelta(hours=24)
# Delivery ids are kept far longer than any platform redelivers (Slack retries within minutes,
# Telegram keeps an unconfirmed update for 24 hours), then forgotten so the table stays small.
DEFAULT_DELIVERY_RETENTION = timedelta(days=2)
# Outcomes left out of a thread's history: they carry no conversation content.
_NOT_HISTORY = ("invalid", "error")

_THREADS: Table = Thread.__table__  # type: ignore[assignment]
_MESSAGES: Table = Message.__table__  # type: ignore[assignment]
_ANSWERS: Table = AnswerRow.__table__  # type: ignore[assignment]
_LINKS: Table = PlatformMessage.__table__  # type: ignore[assignment]
_DELIVERIES: Table = Delivery.__table__  # type: ignore[assignment]
_FEEDBACK: Table = FeedbackRow.__table__  # type: ignore[assignment]
_LOG: Table = FeedbackLogRow.__table__  # type: ignore[assignment]
_ACTS: Table = FeedbackAct.__table__  # type: ignore[assignment]
_REVIEWS: Table = ReviewRow.__table__  # type: ignore[assignment]
_PROMPTS: Table = ReplyPrompt.__table__  # type: ignore[assignment]
MAX_REFERENCE_CHARS = 20_000  # a reviewer's correct answer (Slack's modal allows 3,000 characters)


def new_answer_id() -> str:
    """16 url-safe characters (96 random bits): fits Telegram's 64-byte callback data with room."""
    return secrets.token_urlsafe(12)


def _as_utc(value: datetime) -> datetime:
    """Naive datetimes are taken to be UTC (as the UtcDateTime column type does)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def insert_if_absent(conn: Connection, table: Table, values: dict[str, Any]) -> bool:
    """INSERT unless a unique key already holds the row; True when this call inserted it.

    Uses the dialect's own "on conflict do nothing" where there is one (never an exception
    inside the transaction), otherwise a savepoint that absorbs the IntegrityError.
    """
    return insert_returning_id(conn, table, values) is not None


def insert_returning_id(conn: Connection, table: Table, values: dict[str, Any]) -> Any | None:
    """`insert_if_absent` that returns the new row's primary key (None when the key existed): one
    statement where the database has RETURNING, so recording a message stays cheap on the ack path."""
    dialect = conn.dialect.name
    (pk,) = table.primary_key.columns
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert  # type: ignore[assignment]
    else:
        try:
            with conn.begin_nested():
                result = conn.execute(insert(table).values(**values))
            key = result.inserted_primary_key
            return values.get(pk.name, key[0] if key else None)
        except IntegrityError:
            return None
    statement = dialect_insert(table).values(**values).on_conflict_do_nothing()
    if conn.dialect.insert_returning:
        # (PostgreSQL: psycopg reports rowcount -1 for an INSERT … RETURNING, so ask for the row.)
        return conn.execute(statement.returning(pk)).scalar_one_or_none()
    result = conn.execute(statement)  # SQLite before 3.35
    return values.get(pk.name, result.lastrowid) if result.rowcount == 1 else None


def _ensure_sqlite_dir(url: str) -> None:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)


class ConversationStore:
    """The bot's memory (core.conversation_store.ConversationStore on SQLAlchemy). Thread-safe; one
    instance per process is enough (it pools connections)."""

    def __init__(
        self,
        url: str,
        *,
        migrate: bool = True,
        lease: timedelta = DEFAULT_LEASE,
        recovery_window: timedelta = DEFAULT_RECOVERY_WINDOW,
        delivery_retention: timedelta = DEFAULT_DELIVERY_RETENTION,
    ) -> None:
        _ensure_sqlite_dir(url)
        self.url = url
        self.lease = lease
        self.recovery_window = recovery_window
        self.delivery_retention = delivery_retention
        self.engine = make_engine(url)
        # SQLite lets one writer in at a time, and a writer that finds its lock taken backs off in
        # sleeps of up to 100 ms: this process's writers take turns on a lock of ours instead (other
        # processes on the same file still meet SQLite's). bench/bench_slack_ack.py: with four threads
        # recording messages on the ack path, p99 went from 300-600 ms to about 150 ms.
        self._sqlite_writers = threading.Lock() if self.engine.dialect.name == "sqlite" else None
        if migrate:
            upgrade_to_head(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Connection]:
        """A write transaction (committed on leaving, rolled back on an exception)."""
        if self._sqlite_writers is None:
            with self.engine.begin() as conn:
                yield conn
            return
        with self._sqlite_writers, self.engine.begin() as conn:
            yield conn

    def ping(self) -> bool:
        """Readiness: the database answers a trivial query."""
        try:
            with self.engine.connect() as conn:
                read_only(conn).execute(text("SELECT 1")).scalar_one()
            return True
        except Exception:  # noqa: BLE001 - any failure means "not ready"
            return False

    # --- messages and threads ------------------------------------------------------------------

    def claim_message(self, message: IncomingMessage, text_: str | None = None, *, holder: str = "") -> MessageClaim:
        """Record an incoming message (its thread too) and take the lease on answering it, if free.

        `text_` is the text to store (the service passes the cleaned text); default: message.text.
        `holder` names the worker (a process's random id). The caller owns the reply when it recorded
        the message, or when an earlier claim lapsed (not renewed within `lease`, reply not shown,
        fewer than MAX_CLAIM_ATTEMPTS claims): then it takes the lease over.
        """
        now = _utcnow()
        body = (message.text if text_ is None else text_)[:MAX_STORED_TEXT]
        key = {"platform": message.platform, "workspace": message.workspace, "channel": message.channel}
        with self._writing() as conn:
            thread_pk = insert_returning_id(conn, _THREADS, {**key, "thread_key": message.thread, "created_at": now})
            if thread_pk is None:
                thread_pk = conn.execute(
                    select(_THREADS.c.id).where(
                        *(getattr(_THREADS.c, k) == v for k, v in key.items()),
                        _THREADS.c.thread_key == message.thread,
                    )
                ).scalar_one()
            message_pk = insert_returning_id(
                conn,
                _MESSAGES,
                {
                    **key, "message_id": message.message_id, "thread_id": thread_pk, "user": message.user,
                    "text": body, "sent_at": message.sent_at, "received_at": now, "claimed_at": now,
                    "claimed_by": holder or None, "attempts": 1,
                },
            )
            if message_pk is not None:  # new: this caller holds the first lease, nothing is stored yet
                return MessageClaim(message_pk, thread_pk, owner=True)
            message_pk = conn.execute(
                select(_MESSAGES.c.id).where(
                    *(getattr(_MESSAGES.c, k) == v for k, v in key.items()),
                    _MESSAGES.c.message_id == message.message_id,
                )
            ).scalar_one()
            owner = self._take_over(conn, message_pk, holder, now)
            return _claim_of(conn, message_pk, owner=owner)

    def _take_over(self, conn: Connection, message_pk: int, holder: str, now: datetime) -> bool:
        """Take a lapsed lease: one statement, so of racing redeliveries and sweeps exactly one wins."""
        m = _MESSAGES
        return conn.execute(
            update(m)
            .where(
                m.c.id == message_pk,
                m.c.delivered_at.is_(None),
                m.c.claimed_at < now - self.lease,
                m.c.attempts < MAX_CLAIM_ATTEMPTS,
            )
            .values(claimed_at=now, claimed_by=holder or None, attempts=m.c.attempts + 1)
        ).rowcount == 1

    def renew_claims(self, holder: str, message_pks: Iterable[int]) -> int:
        """The holder is still answering these messages: push their leases forward. Leases another
        worker took over meanwhile (or completed ones) are left alone. Returns how many were renewed."""
        pks = sorted(set(message_pks))
        if not pks or not holder:
            return 0
        m = _MESSAGES
        with self._writing() as conn:
            return conn.execute(
                update(m)
                .where(m.c.id.in_(pks), m.c.claimed_by == holder, m.c.delivered_at.is_(None))
                .values(claimed_at=_utcnow())
            ).rowcount

    def set_placeholder(self, message_pk: int, placeholder_id: str) -> str:
        """Remember the placeholder posted for a message; returns the one that counts: this one, or the
        one an earlier attempt stored (the caller then removes its own second placeholder)."""
        m = _MESSAGES
        with self._writing() as conn:
            conn.execute(
                update(m)
                .where(m.c.id == message_pk, m.c.placeholder_id.is_(None))
                .values(placeholder_id=placeholder_id)
            )
            return conn.execute(select(m.c.placeholder_id).where(m.c.id == message_pk)).scalar_one()

    def mark_delivered(self, message_pk: int) -> None:
        """The reply was shown: the lease is complete and nobody takes the message over any more."""
        m = _MESSAGES
        with self._writing() as conn:
            conn.execute(
                update(m).where(m.c.id == message_pk, m.c.delivered_at.is_(None)).values(delivered_at=_utcnow())
            )

    def reclaim_messages(
        self, platform: str, holder: str, *, limit: int = 20, exclude: Iterable[int] = ()
    ) -> list[OwedMessage]:
        """Take over the lapsed leases of a platform's messages still owed a reply (a worker died
        answering them), oldest first, at most `limit`. Each takeover is the same conditional UPDATE as
        a redelivery's, so replicas sweeping together never take one message twice. Messages received
        before `recovery_window`, or claimed MAX_CLAIM_ATTEMPTS times, are left alone."""
        now = _utcnow()
        m, t = _MESSAGES, _THREADS
        skip = sorted(set(exclude))
        query = (
            select(m.c.id)
            .where(
                m.c.platform == platform,
                m.c.delivered_at.is_(None),
                m.c.claimed_at < now - self.lease,
                m.c.received_at >= now - self.recovery_window,
                m.c.attempts < MAX_CLAIM_ATTEMPTS,
            )
            .order_by(m.c.claimed_at, m.c.id)
            .limit(limit)
        )
        if skip:
            query = query.where(m.c.id.not_in(skip))
        with self.engine.connect() as conn:
            candidates = list(read_only(conn).execute(query).scalars())
        owed: list[OwedMessage] = []
        for pk in candidates:
            with self._writing() as conn:
                if not self._take_over(conn, pk, holder, now):
                    continue  # another replica's sweep or a redelivery was first
                claim = _claim_of(conn, pk, owner=True)
                row = conn.execute(
                    select(m, t.c.thread_key).join(t, t.c.id == m.c.thread_id).where(m.c.id == pk)
                ).one()
            owed.append(
                OwedMessage(
                    platform=row.platform, workspace=row.workspace, channel=row.channel, thread=row.thread_key,
                    user=row.user, text=row.text, message_id=row.message_id, sent_at=row.sent_at, claim=claim,
                )
            )
        return owed

    def owed_messages(self, platform: str | None = None) -> list[tuple[str, str, str | None, int]]:
        """(channel, message_id, placeholder_id, attempts) of every message still owed a reply
        (diagnostics, tests)."""
        m = _MESSAGES
        query = select(m.c.channel, m.c.message_id, m.c.placeholder_id, m.c.attempts).where(m.c.delivered_at.is_(None))
        if platform is not None:
            query = query.where(m.c.platform == platform)
        with self.engine.connect() as conn:
            return [tuple(r) for r in read_only(conn).execute(query.order_by(m.c.id)).all()]

    def _thread_pk(self, platform: str, workspace: str, channel: str, thread: str) -> int | None:
        with self.engine.connect() as conn:
            return read_only(conn).execute(
                select(_THREADS.c.id).where(
                    _THREADS.c.platform == platform,
                    _THREADS.c.workspace == workspace,
                    _THREADS.c.channel == channel,
                    _THREADS.c.thread_key == thread,
                )
            ).scalar_one_or_none()

    def is_bot_thread(self, platform: str, workspace: str, channel: str, thread: str) -> bool:
        return self._thread_pk(platform, workspace, channel, thread) is not None

    def thread_history(self, thread_pk: int, turns: int, *, before_message_pk: int | None = None) -> list[Turn]:
        """The last `turns` exchanges of a thread, oldest first: user question, then the answer.

        Only messages sent before `before_message_pk` (the one being answered) count. Invalid
        input and failures are left out: they carry nothing a follow-up could refer to.
        """
        if turns <= 0:
            return []
        m, a = _MESSAGES, _ANSWERS
        query = (
            select(a.c.question, a.c.text)
            .join(m, m.c.id == a.c.message_id)
            .where(a.c.thread_id == thread_pk, a.c.outcome.not_in(_NOT_HISTORY))
            .order_by(m.c.sent_at.desc(), m.c.id.desc())
            .limit(turns)
        )
        with self.engine.connect() as conn:
            conn = read_only(conn)
            if before_message_pk is not None:
                current = conn.execute(select(m.c.sent_at).where(m.c.id == before_message_pk)).scalar_one()
                query = query.where(
                    m.c.id != before_message_pk,
                    or_(m.c.sent_at < current, and_(m.c.sent_at == current, m.c.id < before_message_pk)),
                )
            rows = conn.execute(query).all()
        history: list[Turn] = []
        for question, answer in reversed(rows):
            history += [Turn("user", question), Turn("assistant", answer)]
        return history

    def history_for_thread(
        self, platform: str, workspace: str, channel: str, thread: str, turns: int
    ) -> list[Turn]:
        thread_pk = self._thread_pk(platform, workspace, channel, thread)
        return [] if thread_pk is None else self.thread_history(thread_pk, turns)

    def history_before_answer(self, answer: StoredAnswer, turns: int) -> list[Turn]:
        """The thread history the answer was given with (for exports)."""
        return self.thread_history(answer.thread_pk, turns, before_message_pk=answer.message_pk)

    def thread_for_answer(self, answer_id: str) -> str | None:
        """The thread key (Slack thread_ts, Telegram reply-chain root) an answer was given in."""
        with self.engine.connect() as conn:
            return read_only(conn).execute(
                select(_THREADS.c.thread_key)
                .join(_ANSWERS, _ANSWERS.c.thread_id == _THREADS.c.id)
                .where(_ANSWERS.c.id == answer_id)
            ).scalar_one_or_none()

    # --- answers -------------------------------------------------------------------------------

    def store_answer(self, claim: MessageClaim, record: AnswerRecord) -> tuple[StoredAnswer, bool]:
        """Store the answer to a claimed message. (answer, True), or (the earlier answer, False)
        when another worker answered the same message first."""
        values = _answer_values(record)
        values.update(message_id=claim.message_pk, thread_id=claim.thread_pk, created_at=_utcnow())
        for _ in range(3):  # a random id collision (2^-96) is retried, not trusted
            values["id"] = new_answer_id()
            try:
                with self._writing() as conn:
                    conn.execute(insert(_ANSWERS).values(**values))
                break
            except IntegrityError:
                earlier = self.answer_for_message(claim.message_pk)
                if earlier is not None:
                    return earlier, False
        else:  # pragma: no cover - three collisions of 96 random bits
            raise RuntimeError("could not allocate an answer id")
        stored = self.get_answer(values["id"])
        assert stored is not None
        return stored, True

    def replace_answer(self, answer_id: str, record: AnswerRecord) -> StoredAnswer:
        """Overwrite what an answer says and how it was made (its id, message, thread and creation time
        stay): Claude's answer arriving after the quoted one was shown. LookupError for an unknown id."""
        with self.engine.begin() as conn:
            updated = conn.execute(update(_ANSWERS).where(_ANSWERS.c.id == answer_id).values(**_answer_values(record)))
        if updated.rowcount != 1:
            raise LookupError(f"no answer {answer_id}")
        stored = self.get_answer(answer_id)
        assert stored is not None
        return stored

    def answer_for_message(self, message_pk: int) -> StoredAnswer | None:
        return self._one_answer(_ANSWERS.c.message_id == message_pk)

    def get_answer(self, answer_id: str) -> StoredAnswer | None:
        return self._one_answer(_ANSWERS.c.id == answer_id)

    def answers(self) -> list[StoredAnswer]:
        """Every stored answer, oldest first (reports, tests)."""
        with self.engine.connect() as conn:
            rows = read_only(conn).execute(_answer_query().order_by(_ANSWERS.c.created_at)).all()
        return [_stored_answer(r) for r in rows]

    def _one_answer(self, condition: Any) -> StoredAnswer | None:
        with self.engine.connect() as conn:
            row = read_only(conn).execute(_answer_query().where(condition)).first()
        return None if row is None else _stored_answer(row)

    # --- platform messages and deliveries ------------------------------------------------------

    def link_platform_message(self, answer_id: str, platform: str, channel: str, message_id: str) -> None:
        """Idempotent; a platform message already linked keeps its first answer."""
        with self._writing() as conn:
            if conn.execute(select(_ANSWERS.c.id).where(_ANSWERS.c.id == answer_id)).first() is None:
                raise UnknownAnswer(answer_id)
            insert_if_absent(
                conn,
                _LINKS,
                {"platform": platform, "channel": channel, "message_id": message_id, "answer_id": answer_id,
                     "created_at": _utcnow()},
            )

    def answer_for_platform_message(self, platform: str, channel: str, message_id: str) -> str | None:
        with self.engine.connect() as conn:
            return read_only(conn).execute(
                select(_LINKS.c.answer_id).where(
                    _LINKS.c.platform == platform, _LINKS.c.channel == channel, _LINKS.c.message_id == message_id
                )
            ).scalar_one_or_none()

    def claim_delivery(self, platform: str, delivery_id: str) -> bool:
        """True the first time a delivery id is seen. Ids older than `delivery_retention` are deleted
        on the way (an index range scan that finds nothing most of the time), so that one row per
        platform event does not pile up for ever."""
        now = _utcnow()
        with self._writing() as conn:
            _delete_deliveries_before(conn, now - self.delivery_retention)
            return insert_if_absent(
                conn, _DELIVERIES, {"platform": platform, "delivery_id": delivery_id, "received_at": now}
            )

    def prune_deliveries(self, older_than: timedelta) -> int:
        """Forget delivery ids older than any platform retries (Slack retries for about an hour)."""
        with self._writing() as conn:
            return _delete_deliveries_before(conn, _utcnow() - older_than)

    # --- feedback ------------------------------------------------------------------------------

    def record_feedback(self, event: FeedbackEvent) -> FeedbackOutcome:
        """Apply one rating act: store it, and set the rater's current rating to the fold of all their
        acts on this answer in platform order (core/ratings.py), atomically with the change's log row.

        Raises UnknownAnswer for an answer id the store does not have, and AnswerNotShownHere for one
        posted on another platform or in another chat than the act's (`event.channel`, when given).

        Acts processed out of order therefore end where the rater left off; a redelivered act (same
        position) is stored once. The outcome is a change only when the rating or its reason changed
        (a double click, a second reaction of the same sign only move the rating's time).
        """
        return self._apply_act(event, attach_reason=False)

    def record_reason(self, event: FeedbackEvent) -> FeedbackOutcome:
        """Attach a reason (and its kind) to the rater's act at `event.order`: the 👎 click the reason was
        asked for. When that act is not stored yet (the click is still being processed), it is stored
        now with the reason, and the click's own delivery then counts as the same act. The rater's
        current rating is folded again, so the reason shows only while that 👎 is still their rating."""
        if event.order is None:
            raise ValueError("a reason belongs to one rating act: event.order is required")
        return self._apply_act(event, attach_reason=True)

    def _apply_act(self, event: FeedbackEvent, *, attach_reason: bool) -> FeedbackOutcome:
        if event.rating not in (-1, 0, 1):
            raise ValueError(f"rating must be -1, 0 or +1, got {event.rating!r}")
        reason = (event.reason or "")[:MAX_REASON_CHARS]
        reason_kind = (event.reason_kind or "")[:32]
        order = event.order if event.order is not None else order_from_time(event.at)
        key = (_FEEDBACK.c.answer_id == event.answer_id, _FEEDBACK.c.rater == event.rater)
        with self._writing() as conn:
            shown = conn.execute(
                select(_MESSAGES.c.platform, _MESSAGES.c.channel)
                .join(_ANSWERS, _ANSWERS.c.message_id == _MESSAGES.c.id)
                .where(_ANSWERS.c.id == event.answer_id)
            ).first()
            if shown is None:
                raise UnknownAnswer(event.answer_id)
            if event.platform != shown.platform or (event.channel is not None and event.channel != shown.channel):
                raise AnswerNotShownHere(event.answer_id)
            now = _utcnow()
            if event.rating != 0 or event.withdraws is not None:
                # Make sure the row exists, so that the locking read below always has a row to lock (and
                # concurrent acts of one rater wait for each other). A plain removal with nothing to
                # remove stores nothing.
                insert_if_absent(
                    conn,
                    _FEEDBACK,
                    {"answer_id": event.answer_id, "rater": event.rater, "platform": event.platform, "rating": 0,
                         "source": event.source, "reason": "", "rated_at": event.at, "updated_at": now},
                )
            current = conn.execute(
                select(_FEEDBACK.c.rating, _FEEDBACK.c.reason, _FEEDBACK.c.reason_kind, _FEEDBACK.c.rated_at)
                .where(*key).with_for_update()
            ).first()
            if current is None:
                return FeedbackOutcome(event.answer_id, 0, changed=False)
            stored = insert_if_absent(
                conn,
                _ACTS,
                {"answer_id": event.answer_id, "rater": event.rater, "platform": event.platform, "rating": event.rating,
                     "withdraws": event.withdraws, "source": event.source, "reason": reason,
                     "reason_kind": reason_kind, "act_order": order, "rated_at": event.at, "recorded_at": now},
            )
            previous = int(current.rating)
            if not stored and attach_reason:  # the click is stored: the reason joins it
                stored = conn.execute(
                    update(_ACTS)
                    .where(_ACTS.c.answer_id == event.answer_id, _ACTS.c.rater == event.rater,
                           _ACTS.c.act_order == order, _ACTS.c.rating == event.rating)
                    .values(reason=reason, reason_kind=reason_kind)
                ).rowcount == 1
            if not stored:  # the same act delivered again
                return FeedbackOutcome(event.answer_id, previous, changed=False)  # type: ignore[arg-type]
            acts = conn.execute(
                select(_ACTS).where(_ACTS.c.answer_id == event.answer_id, _ACTS.c.rater == event.rater)
                .order_by(_ACTS.c.act_order, _ACTS.c.id)
            ).all()
            state = fold(
                RatingAct(a.rating, a.act_order, _as_utc(a.rated_at), a.source, a.reason, a.reason_kind, a.withdraws)
                for a in acts
            )
            changed = (state.rating, state.reason, state.reason_kind) != (previous, current.reason, current.reason_kind)
            rated_at = state.at or current.rated_at
            if not changed and rated_at == current.rated_at:
                return FeedbackOutcome(event.answer_id, previous, changed=False)  # type: ignore[arg-type]
            conn.execute(
                update(_FEEDBACK).where(*key).values(
                    rating=state.rating, platform=event.platform, source=state.source or event.source,
                    reason=state.reason, reason_kind=state.reason_kind, rated_at=rated_at, updated_at=now,
                )
            )
            if changed:
                conn.execute(
                    insert(_LOG).values(
                        answer_id=event.answer_id, rater=event.rater, platform=event.platform, rating=state.rating,
                        previous_rating=previous, source=state.source or event.source, reason=state.reason,
                        reason_kind=state.reason_kind, rated_at=rated_at, recorded_at=now,
                    )
                )
        return FeedbackOutcome(event.answer_id, state.rating, changed=changed)  # type: ignore[arg-type]

    def current_rating(self, answer_id: str, rater: str) -> int:
        with self.engine.connect() as conn:
            rating = read_only(conn).execute(
                select(_FEEDBACK.c.rating).where(_FEEDBACK.c.answer_id == answer_id, _FEEDBACK.c.rater == rater)
            ).scalar_one_or_none()
        return int(rating or 0)

    def rated_answers(self, *, since: datetime | None = None, rating: int | None = None) -> list[RatedAnswer]:
        """Current +1/-1 ratings (removed ones excluded) with their answers, oldest rating first."""
        f = _FEEDBACK
        query = (
            select(
                f.c.rater, f.c.platform.label("rated_on"), f.c.rating, f.c.source, f.c.reason, f.c.reason_kind,
                f.c.rated_at, f.c.updated_at, _REVIEWS.c.state.label("review_state"), *_answer_query().selected_columns,
            )
            .join(_ANSWERS, _ANSWERS.c.id == f.c.answer_id)
            .join(_MESSAGES, _MESSAGES.c.id == _ANSWERS.c.message_id)
            .outerjoin(_REVIEWS, _REVIEWS.c.answer_id == f.c.answer_id)
            .where(f.c.rating != 0)
            .order_by(f.c.rated_at, f.c.id)
        )
        if since is not None:
            query = query.where(f.c.rated_at >= since)
        if rating is not None:
            query = query.where(f.c.rating == rating)
        with self.engine.connect() as conn:
            rows = read_only(conn).execute(query).all()
        return [
            RatedAnswer(
                answer=_stored_answer(r), rater=r.rater, platform=r.rated_on, rating=int(r.rating),
                source=r.source, reason=r.reason, rated_at=r.rated_at, updated_at=r.updated_at,
                reason_kind=r.reason_kind, review_state=r.review_state or "",
            )
            for r in rows
        ]

    def feedback_log(self, answer_id: str | None = None) -> list[FeedbackChange]:
        query = select(_LOG).order_by(_LOG.c.id)
        if answer_id is not None:
            query = query.where(_LOG.c.answer_id == answer_id)
        with self.engine.connect() as conn:
            rows = read_only(conn).execute(query).all()
        return [
            FeedbackChange(
                answer_id=r.answer_id, rater=r.rater, platform=r.platform, rating=r.rating,
                previous_rating=r.previous_rating, source=r.source, reason=r.reason, rated_at=r.rated_at,
                recorded_at=r.recorded_at, reason_kind=r.reason_kind,
            )
            for r in rows
        ]

    # --- the review loop -----------------------------------------------------------------------

    def exchange(self, answer_id: str) -> Exchange | None:
        """The question and answer with where it was asked (platform, chat, thread, asker) and its review."""
        m, t = _MESSAGES, _THREADS
        query = (
            _answer_query()
            .add_columns(m.c.workspace, m.c.channel, m.c.message_id.label("question_id"), m.c.user, t.c.thread_key)
            .join(t, t.c.id == _ANSWERS.c.thread_id)
            .where(_ANSWERS.c.id == answer_id)
        )
        with self.engine.connect() as conn:
            row = read_only(conn).execute(query).first()
        if row is None:
            return None
        answer = _stored_answer(row)
        r = answer.record
        return Exchange(
            answer_id=answer.id, platform=answer.platform, workspace=row.workspace, channel=row.channel,
            thread=row.thread_key, message_id=row.question_id, asker=row.user, question=r.question,
            standalone_question=r.standalone_question, answer=r.text, citations=list(r.citations),
            refused=r.refused, note=r.note, review=self.review(answer_id),
        )

    def review(self, answer_id: str) -> Review | None:
        with self.engine.connect() as conn:
            row = read_only(conn).execute(select(_REVIEWS).where(_REVIEWS.c.answer_id == answer_id)).first()
        return None if row is None else _review(row)

    def request_review(self, answer_id: str, requester: str, kind: RequestKind) -> Review:
        """Open a pending review of the exchange (the first request) or count one more request on it."""
        now = _utcnow()
        with self._writing() as conn:
            if conn.execute(select(_ANSWERS.c.id).where(_ANSWERS.c.id == answer_id)).first() is None:
                raise UnknownAnswer(answer_id)
            opened = insert_if_absent(
                conn, _REVIEWS,
                {"answer_id": answer_id, "state": "pending", "requested_by": requester[:128], "request_kind": kind,
                 "requested_at": now, "requests": 1, "correction_posted": False},
            )
            if not opened:
                conn.execute(
                    update(_REVIEWS).where(_REVIEWS.c.answer_id == answer_id).values(requests=_REVIEWS.c.requests + 1)
                )
            row = conn.execute(select(_REVIEWS).where(_REVIEWS.c.answer_id == answer_id)).one()
        return _review(row)

    def record_review(
        self, answer_id: str, reviewer: str, verdict: Verdict, reference_answer: str = "", reference_provision: str = ""
    ) -> Review:
        """Settle a review: "fine", or "corrected" with the reference answer and its provision. A review
        nobody asked for (a reviewer acting on an answer directly) is opened by the reviewer."""
        if verdict not in ("fine", "corrected"):
            raise ValueError(f"verdict must be 'fine' or 'corrected', got {verdict!r}")
        if verdict == "corrected" and not reference_answer.strip():
            raise ValueError("a correction needs the correct answer")
        now = _utcnow()
        values = {
            "state": verdict, "reviewer": reviewer[:128], "reviewed_at": now,
            "reference_answer": reference_answer.strip()[:MAX_REFERENCE_CHARS] if verdict == "corrected" else None,
            "reference_provision": reference_provision.strip()[:MAX_REFERENCE_CHARS] if verdict == "corrected" else None,
        }
        with self._writing() as conn:
            if conn.execute(select(_ANSWERS.c.id).where(_ANSWERS.c.id == answer_id)).first() is None:
                raise UnknownAnswer(answer_id)
            insert_if_absent(
                conn, _REVIEWS,
                {"answer_id": answer_id, "state": "pending", "requested_by": reviewer[:128],
                 "request_kind": "reviewer", "requested_at": now, "requests": 0, "correction_posted": False},
            )
            conn.execute(update(_REVIEWS).where(_REVIEWS.c.answer_id == answer_id).values(**values))
            row = conn.execute(select(_REVIEWS).where(_REVIEWS.c.answer_id == answer_id)).one()
        return _review(row)

    def note_correction_posted(self, answer_id: str) -> None:
        with self._writing() as conn:
            conn.execute(update(_REVIEWS).where(_REVIEWS.c.answer_id == answer_id).values(correction_posted=True))

    def reviewed_answers(self, *, since: datetime | None = None) -> list[ReviewedAnswer]:
        """Settled reviews (corrected or fine) with their answers, oldest verdict first."""
        query = (
            select(_REVIEWS).where(_REVIEWS.c.state.in_(("corrected", "fine")))
            .order_by(_REVIEWS.c.reviewed_at, _REVIEWS.c.id)
        )
        if since is not None:
            query = query.where(_REVIEWS.c.reviewed_at >= since)
        with self.engine.connect() as conn:
            conn = read_only(conn)
            reviews = [_review(r) for r in conn.execute(query).all()]
            ids = [r.answer_id for r in reviews]
            answers = {a.id: a for a in map(_stored_answer, conn.execute(_answer_query().where(_ANSWERS.c.id.in_(ids))))}
        reasons = self._down_reasons(ids)
        return [ReviewedAnswer(answer=answers[r.answer_id], review=r, reasons=reasons.get(r.answer_id, ())) for r in reviews]

    def _down_reasons(self, answer_ids: list[str]) -> dict[str, tuple[tuple[str, str], ...]]:
        """answer id -> the (reason_kind, reason) of its current 👎s that have one."""
        if not answer_ids:
            return {}
        f = _FEEDBACK
        query = (
            select(f.c.answer_id, f.c.reason_kind, f.c.reason)
            .where(f.c.answer_id.in_(answer_ids), f.c.rating == -1, or_(f.c.reason != "", f.c.reason_kind != ""))
            .order_by(f.c.rated_at, f.c.id)
        )
        found: dict[str, list[tuple[str, str]]] = {}
        with self.engine.connect() as conn:
            for r in read_only(conn).execute(query):
                found.setdefault(r.answer_id, []).append((r.reason_kind, r.reason))
        return {k: tuple(v) for k, v in found.items()}

    def note_reply_prompt(self, prompt: ReplyPromptRecord) -> None:
        with self._writing() as conn:
            insert_if_absent(
                conn, _PROMPTS,
                {"platform": prompt.platform, "channel": prompt.channel, "prompt_id": prompt.prompt_id,
                 "purpose": prompt.purpose, "answer_id": prompt.answer_id, "user": prompt.user,
                 "act_order": prompt.act_order, "review_post_id": prompt.review_post_id or None,
                 "created_at": _utcnow()},
            )

    def reply_prompt(self, platform: str, channel: str, prompt_id: str) -> ReplyPromptRecord | None:
        p = _PROMPTS
        with self.engine.connect() as conn:
            row = read_only(conn).execute(
                select(p).where(p.c.platform == platform, p.c.channel == channel, p.c.prompt_id == prompt_id)
            ).first()
        if row is None:
            return None
        return ReplyPromptRecord(
            platform=row.platform, channel=row.channel, prompt_id=row.prompt_id, purpose=row.purpose,
            answer_id=row.answer_id, user=row.user, act_order=int(row.act_order),
            review_post_id=row.review_post_id or "",
        )

    def count_rows(self, table: str) -> int:
        """Row count of one of the store's tables (diagnostics, tests)."""
        tables = {t.name: t for t in (_THREADS, _MESSAGES, _ANSWERS, _LINKS, _DELIVERIES, _FEEDBACK, _LOG, _ACTS,
                                      _REVIEWS, _PROMPTS)}
        with self.engine.connect() as conn:
            return int(read_only(conn).execute(select(func.count()).select_from(tables[table])).scalar_one())


def _claim_of(conn: Connection, message_pk: int, *, owner: bool) -> MessageClaim:
    """The claim as the database holds it now (inside the caller's transaction)."""
    m = _MESSAGES
    row = conn.execute(
        select(
            m.c.thread_id, m.c.attempts, m.c.placeholder_id, m.c.delivered_at,
            exists().where(_ANSWERS.c.message_id == m.c.id).label("answered"),
        ).where(m.c.id == message_pk)
    ).one()
    return MessageClaim(
        message_pk, row.thread_id, owner=owner, attempt=int(row.attempts), placeholder_id=row.placeholder_id,
        answered=bool(row.answered), delivered=row.delivered_at is not None,
    )


def _delete_deliveries_before(conn: Connection, cutoff: datetime) -> int:
    return conn.execute(_DELIVERIES.delete().where(_DELIVERIES.c.received_at < cutoff)).rowcount


def _answer_values(record: AnswerRecord) -> dict[str, Any]:
    return {
        "question": record.question[:MAX_STORED_TEXT],
        "standalone_question": record.standalone_question[:MAX_STORED_TEXT],
        "collection": record.collection,
        "history_turns": record.history_turns,
        "complexity": record.complexity,
        "params": dict(record.params),
        "chunk_ids": list(record.chunk_ids),
        "citations": [asdict(c) for c in record.citations],
        "text": record.text,
        "refused": record.refused,
        "outcome": record.outcome,
        "note": record.note,
        "model": record.model[:128],
        "tokens_in": record.tokens_in,
        "tokens_out": record.tokens_out,
        "context_tokens": record.context_tokens,
        "latency_ms": float(record.latency_ms),
    }


def _answer_query():
    return select(_ANSWERS, _MESSAGES.c.platform).join(_MESSAGES, _MESSAGES.c.id == _ANSWERS.c.message_id)


def _stored_answer(row: Any) -> StoredAnswer:
    record = AnswerRecord(
        question=row.question,
        standalone_question=row.standalone_question,
        text=row.text,
        refused=bool(row.refused),
        outcome=row.outcome,
        collection=row.collection,
        history_turns=row.history_turns,
        complexity=row.complexity,
        params=dict(row.params or {}),
        chunk_ids=list(row.chunk_ids or []),
        citations=[Citation(**c) for c in _citations(row.citations)],
        note=row.note,
        model=row.model,
        tokens_in=row.tokens_in,
        tokens_out=row.tokens_out,
        context_tokens=row.context_tokens,
        latency_ms=row.latency_ms,
    )
    return StoredAnswer(
        id=row.id, record=record, created_at=row.created_at, message_pk=row.message_id,
        thread_pk=row.thread_id, platform=row.platform,
    )


def _review(row: Any) -> Review:
    return Review(
        answer_id=row.answer_id, state=row.state, requested_by=row.requested_by, request_kind=row.request_kind,
        requested_at=row.requested_at, requests=int(row.requests), reviewer=row.reviewer, reviewed_at=row.reviewed_at,
        reference_answer=row.reference_answer or "", reference_provision=row.reference_provision or "",
        correction_posted=bool(row.correction_posted),
    )


def _citations(raw: Iterable[Any] | None) -> Sequence[dict[str, Any]]:
    return [c for c in (raw or []) if isinstance(c, dict)]
