"""The one conversation core every chat platform feeds (Slack, Telegram, the terminal).

Adapters turn platform events into an `IncomingMessage` / `FeedbackEvent`, call a
`ConversationService`, and render the `Reply` back. Nothing here knows a platform's API.
"""
from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal, Protocol

# The adapters and the store import these two from here, the conversation seam they belong to.
from core.errors import AnswerNotShownHere as AnswerNotShownHere
from core.errors import UnknownAnswer as UnknownAnswer
from core.review import Exchange, ReplyPromptRecord, RequestKind, Review, Verdict
from core.types import Citation

Rating = Literal[-1, 0, 1]  # 0 = the rating was removed (reaction removed)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class IncomingMessage:
    """A user's message, normalized. (platform, workspace, channel, message_id) identifies it."""

    platform: str  # "slack" | "telegram" | "terminal"
    workspace: str  # Slack team id; Telegram: "telegram"; terminal: "local"
    channel: str  # Slack channel id; Telegram chat id
    thread: str  # Slack thread_ts (the root message's ts); Telegram: id of the reply chain's root message
    user: str
    text: str
    message_id: str  # Slack ts; Telegram message_id
    sent_at: datetime = field(default_factory=utcnow)
    # When this process received it (time.monotonic()): the chat's wait for an answer starts here,
    # queueing for a free answer slot included.
    received_at: float = field(default_factory=time.monotonic, compare=False)


@dataclass(frozen=True)
class Delivery:
    """The lease on replying to one message, held by this worker (see ConversationService.claim).

    Answering is at-least-once with an idempotent effect: the lease completes only when the reply is
    shown (`complete`); if the worker dies first, the lease lapses and a redelivery or the recovery
    sweep takes it over (`attempt` > 1), finds the placeholder and the answer the earlier attempt
    stored, and shows that answer instead of a second one.
    """

    message: IncomingMessage
    message_pk: int  # the stored message (opaque to adapters)
    thread_pk: int
    attempt: int = 1  # 1 = the first claim; more after taking over a lapsed lease
    placeholder: str = ""  # platform id of the "Looking that up…" message an attempt posted, "" if none
    answered: bool = False  # an answer is already stored


@dataclass(frozen=True)
class Reply:
    """What the bot says back, normalized. Adapters render text, numbered sources and 👍/👎 controls."""

    answer_id: str  # stable id of the stored answer; feedback refers to it
    text: str
    citations: list[Citation]
    refused: bool
    note: str = ""  # one-line remark (fallback used, question invalid, ...)
    # True when this exact message was answered before (a duplicate delivery): adapters post nothing new.
    duplicate: bool = False
    # Set when this is the quoted answer shown while Claude is still answering (HYPA_CHAT_ANSWER_WAIT_S
    # passed): resolves to the Reply that replaces it (same answer_id), to be shown in its place.
    followup: Future | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class FeedbackEvent:
    answer_id: str
    platform: str
    rater: str  # platform user id
    rating: Rating  # +1 / -1; 0 removes the rater's current rating
    source: Literal["button", "reaction", "command"] = "button"
    reason: str = ""
    reason_kind: str = ""  # core/review.py REASON_KINDS ("" = none given)
    at: datetime = field(default_factory=utcnow)
    # For a removal (rating 0) by taking a reaction away: the rating that reaction gave. The rating is
    # removed only if it is still that one, so removing a 👍 reaction does not clear a later 👎 click.
    withdraws: Rating | None = None
    # The act's position on the platform's clock (core/ratings.py): Slack event_ts / action_ts in
    # microseconds, Telegram update_id; None = `at` in microseconds (the terminal's clock). Acts are
    # applied in this order, whatever order they are processed in; the same order twice is one act.
    order: int | None = None
    # Where the act was made: the Slack channel of the message the button or reaction is on, the
    # Telegram chat. A rating counts only from the platform and chat where the answer was posted
    # (AnswerNotShownHere otherwise). None for callers that are not a chat (the terminal).
    channel: str | None = None


@dataclass(frozen=True)
class FeedbackOutcome:
    answer_id: str
    rating: Rating  # the rater's current rating after the event
    changed: bool  # False when the event repeated the current state (e.g. a double click)


class ConversationService(Protocol):
    """What every chat adapter calls. Answers never raise for bad input: an empty or huge message gets
    a Reply that says what is wrong. (platform, workspace, channel, message_id) identifies a message."""

    # --- replying at least once: the lease on a message (chat adapters) ------------------------

    @property
    def lease_s(self) -> float:
        """A lease not renewed for this long is taken over."""

    def claim(self, message: IncomingMessage) -> Delivery | None:
        """Record the message and take the lease on replying to it; None when the reply was shown
        already or another live worker holds the lease (a duplicate delivery: counted, dropped)."""

    def answer(self, delivery: Delivery) -> Reply:
        """The reply to a claimed message: the answer an earlier attempt stored, or a new one (the
        pipeline runs, the answer is stored). Never raises for bad input or a pipeline failure."""

    def note_placeholder(self, delivery: Delivery, placeholder_id: str) -> str:
        """Store the placeholder posted for the message; returns the one to use (an earlier attempt's
        if it stored one first: the caller then deletes its own)."""

    def complete(self, delivery: Delivery) -> None:
        """The reply is shown: the lease is done, nobody answers the message again."""

    def release(self, delivery: Delivery) -> None:
        """Stop renewing the lease without completing it (the reply could not be shown): it lapses,
        and the recovery sweep tries again."""

    def renew_leases(self) -> int:
        """Renew the leases this worker holds (call every third of `lease_s`)."""

    def reclaim(self, platform: str, limit: int = 20) -> list[Delivery]:
        """Take over lapsed leases of messages still owed a reply (their worker died); the caller
        finishes each like a fresh claim."""

    def handle(self, message: IncomingMessage) -> Reply:
        """claim + answer + complete in one call, for a caller that shows the reply at once (the
        terminal). A message claimed before returns the stored Reply with `duplicate=True`."""

    # --- feedback, links, threads ----------------------------------------------------------------

    def record_feedback(self, event: FeedbackEvent) -> FeedbackOutcome:
        """One current rating per (answer, rater); every change is also appended to a log."""

    def link_platform_message(self, answer_id: str, platform: str, channel: str, message_id: str) -> None:
        """Remember which platform message shows an answer (so reactions on it count as feedback)."""

    def answer_for_platform_message(self, platform: str, channel: str, message_id: str) -> str | None:
        """The answer id shown by a bot message, or None if that message is not one of our answers."""

    def claim_delivery(self, platform: str, delivery_id: str) -> bool:
        """True the first time a platform delivery id (Slack event_id, Telegram update_id) is seen.

        Durable (stored), so restarts and several replicas agree on what was already handled. At most
        once: for small replies that are better lost in a crash than sent twice (help texts);
        questions are claimed with `claim` instead.
        """

    # --- the review loop (core/review.py) ----------------------------------------------------------

    def record_reason(self, event: FeedbackEvent) -> FeedbackOutcome:
        """Attach a reason (event.reason, event.reason_kind) to the rater's 👎 act at `event.order` (the
        click it was asked for), recording that act first if it was not yet. Same errors as record_feedback."""

    def exchange(self, answer_id: str) -> Exchange | None:
        """The question, answer and where it was asked, with its review; None for an unknown id."""

    def request_review(self, answer_id: str, requester: str, kind: RequestKind) -> Review:
        """Ask for a person's review of an exchange (UnknownAnswer for an unknown id). The first request
        opens a pending review; later ones are counted on it, whatever its state."""

    def record_review(
        self, answer_id: str, reviewer: str, verdict: Verdict, reference_answer: str = "", reference_provision: str = ""
    ) -> Review:
        """A reviewer's verdict: "fine", or "corrected" with the correct answer and its provision (the
        exchange's reference answer). The latest verdict counts (UnknownAnswer for an unknown id)."""

    def note_correction_posted(self, answer_id: str) -> None:
        """The reviewer's correction was posted in the original thread."""

    def note_reply_prompt(self, prompt: ReplyPromptRecord) -> None:
        """Remember a prompt that waits for a written reply (Telegram ForceReply)."""

    def reply_prompt(self, platform: str, channel: str, prompt_id: str) -> ReplyPromptRecord | None:
        """The prompt a reply answers, or None when that message is no prompt of ours."""

    def thread_for_answer(self, answer_id: str) -> str | None:
        """The thread key an answer was given in, or None (Telegram: a reply to an answer continues
        that answer's reply chain)."""

    def is_bot_thread(self, platform: str, workspace: str, channel: str, thread: str) -> bool:
        """Whether the bot has answered in this thread (follow-ups there need no @mention)."""
