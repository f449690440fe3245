"""Which Slack events the bot answers, and their normalized form (no I/O here).

Slack delivers one @mention twice when the app also subscribes to channel messages: an
`app_mention` event and a `message` event, with different event ids. Mentions are answered from
`app_mention` only; `message` events answer DMs and follow-ups in a thread the bot already answered.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from adapters.slack.text import mentions, to_question
from core.conversation import IncomingMessage, utcnow

PLATFORM = "slack"

# Message subtypes that are a person writing (file_share = a message with attachments,
# thread_broadcast = a thread reply also sent to the channel). Edits, deletions, joins and bot
# posts carry other subtypes and are never answered.
_USER_SUBTYPES = {None, "file_share", "thread_broadcast"}


@dataclass(frozen=True)
class BotIdentity:
    """Who the bot is in this workspace (from auth.test, via bolt's authorization)."""

    user_id: str
    bot_id: str


def _from_bot(event: dict, bot: BotIdentity) -> bool:
    return bool(
        event.get("bot_id")
        or event.get("subtype") == "bot_message"
        or event.get("bot_profile")
        or (bot.user_id and event.get("user") == bot.user_id)
        or not event.get("user")
    )


def slack_time(ts: object) -> datetime:
    """A Slack timestamp ("1700000000.123456", seconds since the epoch) as UTC; now if absent or bad."""
    try:
        return datetime.fromtimestamp(float(ts), UTC)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError, OSError):
        return utcnow()


def slack_order(ts: object) -> int | None:
    """A Slack timestamp ("1700000000.123456") as integer microseconds, exactly (no float rounding):
    the order of rating acts, which Slack times on one clock (`event_ts`, `action_ts`). None if bad."""
    if not isinstance(ts, str):
        return None
    seconds, _, fraction = ts.partition(".")
    if not seconds.isdigit() or (fraction and not fraction.isdigit()):
        return None
    return int(seconds) * 1_000_000 + int((fraction + "000000")[:6])


def thread_of(event: dict) -> str:
    """The thread an event's reply belongs in: the root message's ts (a new message starts one)."""
    return event.get("thread_ts") or event["ts"]


def button_place(body: dict) -> tuple[str, str]:
    """(channel, thread) of the message an interactive button is on (a block_actions payload). A private
    (ephemeral) message has no thread; a button outside a channel's messages (App Home, a modal) no channel."""
    container = body.get("container") or {}
    channel = (body.get("channel") or {}).get("id") or container.get("channel_id", "")
    if container.get("is_ephemeral"):
        return channel, ""
    message = body.get("message") or {}
    return channel, message.get("thread_ts") or container.get("thread_ts") or message.get("ts") or ""


def to_incoming(event: dict, team_id: str, bot: BotIdentity) -> IncomingMessage:
    return IncomingMessage(
        platform=PLATFORM,
        workspace=team_id,
        channel=event["channel"],
        thread=thread_of(event),
        user=event["user"],
        text=to_question(event.get("text", ""), bot.user_id),
        message_id=event["ts"],
        sent_at=slack_time(event["ts"]),
    )


def is_answerable_mention(event: dict, bot: BotIdentity) -> bool:
    """An `app_mention` from a person (Slack also sends them for edits, which carry `subtype`)."""
    return (
        not _from_bot(event, bot)
        and event.get("subtype") in _USER_SUBTYPES
        and bool(event.get("channel") and event.get("ts"))
    )


@dataclass(frozen=True)
class MessageRoute:
    """What to do with a `message` event: answer it, answer it if its thread is ours, or ignore it."""

    action: str  # "answer" | "answer_if_bot_thread" | "ignore"
    reason: str = ""


def route_message(event: dict, bot: BotIdentity) -> MessageRoute:
    if event.get("subtype") not in _USER_SUBTYPES:
        return MessageRoute("ignore", f"subtype {event.get('subtype')}")
    if _from_bot(event, bot):
        return MessageRoute("ignore", "sent by a bot")
    if not (event.get("channel") and event.get("ts")):
        return MessageRoute("ignore", "no channel or ts")
    if event.get("channel_type") == "im":
        return MessageRoute("answer", "direct message")
    if mentions(event.get("text", ""), bot.user_id):
        return MessageRoute("ignore", "mention (answered from app_mention)")
    if event.get("thread_ts") and event.get("thread_ts") != event.get("ts"):
        return MessageRoute("answer_if_bot_thread", "thread reply without a mention")
    return MessageRoute("ignore", "channel message without a mention")


def message_key(team_id: str, event: dict) -> str:
    """A delivery id for the message itself, shared by its app_mention and message events."""
    return f"message:{team_id}:{event['channel']}:{event['ts']}"
