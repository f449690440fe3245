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
    at: datetime = field(default_factory=utcnow)
    # For a removal (rating 0) by taking a reaction away: the rating that reaction gave. The rating is
    # removed only if it is still that one, so removing a 👍 reaction does not clear a later 👎 click.
    withdraws: Rating | None = None


@dataclass(frozen=True)
class FeedbackOutcome:
    answer_id: str
    rating: Rating  # the rater's current rating after the event
    changed: bool  # False when the event repeated the current state (e.g. a double click)


class UnknownAnswer(LookupError):
    """Feedback or a lookup referred to an answer id the store does not have."""


class ConversationService(Protocol):
    def handle(self, message: IncomingMessage) -> Reply:
        """Store the message, answer it with the thread's history, store and return the answer.

        Never raises for bad input: an empty or huge message gets a Reply that says what is wrong.
        A message already answered (same platform/workspace/channel/message_id) returns the stored
        Reply with `duplicate=True`.
        """

    def record_feedback(self, event: FeedbackEvent) -> FeedbackOutcome:
        """One current rating per (answer, rater); every change is also appended to a log."""

    def link_platform_message(self, answer_id: str, platform: str, channel: str, message_id: str) -> None:
        """Remember which platform message shows an answer (so reactions on it count as feedback)."""

    def answer_for_platform_message(self, platform: str, channel: str, message_id: str) -> str | None:
        """The answer id shown by a bot message, or None if that message is not one of our answers."""

    def claim_delivery(self, platform: str, delivery_id: str) -> bool:
        """True the first time a platform delivery id (Slack event_id, Telegram update_id) is seen.

        Durable (stored), so restarts and several replicas agree on what was already handled.
        """

    def thread_for_answer(self, answer_id: str) -> str | None:
        """The thread key an answer was given in, or None (Telegram: a reply to an answer continues
        that answer's reply chain)."""

    def is_bot_thread(self, platform: str, workspace: str, channel: str, thread: str) -> bool:
        """Whether the bot has answered in this thread (follow-ups there need no @mention)."""
