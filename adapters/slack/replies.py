"""Showing replies in Slack: the placeholder, the answer in its place, apologies (a ReplySurface).

Every Web API call goes through `api()`, which logs and counts a failure and returns None, so a
caller falls back (post anew when an update fails) instead of raising.

The placeholder carries Slack message metadata naming the question it stands for. A process killed
after Slack accepted the placeholder but before its ts was stored leaves no trace of it in the
database; whoever takes the lapsed lease over finds it in the thread (`conversations.replies` with
metadata, under the history scopes the bot already has) and edits it, instead of leaving it behind.

Claude's answer arriving after the quoted one was shown (the answer window, adapters/delivery.py)
replaces it with chat.update of the same message (`replace_shown`).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.delivery import Shown
from adapters.slack.blocks import SlackMessage, render_failure, render_placeholder, render_reply
from core.conversation import ConversationService, Delivery, Reply

if TYPE_CHECKING:
    from core.metrics import Metrics

log = logging.getLogger(__name__)

PLATFORM = "slack"
# Metadata event type on a placeholder; its payload names the question's ts.
PLACEHOLDER_EVENT = "hypa_pending_answer"
_THREAD_PAGES = 5  # conversations.replies pages (200 messages each) searched for a lost placeholder


class SlackReplies:
    def __init__(self, client: AsyncWebClient, service: ConversationService, metrics: Metrics | None = None) -> None:
        self.client = client
        self.service = service
        self.metrics = metrics
        self._bot_id: str | None = None  # ours, from auth.test: only our own placeholders are reused

    # -- ReplySurface -----------------------------------------------------------------------------

    async def post_placeholder(self, delivery: Delivery) -> str | None:
        m = delivery.message
        metadata = {"event_type": PLACEHOLDER_EVENT, "event_payload": {"question_ts": m.message_id}}
        return await self.post(m.channel, m.thread, render_placeholder(), metadata=metadata)

    async def find_placeholder(self, delivery: Delivery) -> str | None:
        m = delivery.message
        bot_id = await self._own_bot_id()
        cursor = None
        for _ in range(_THREAD_PAGES):
            page = await self.api(
                "conversations.replies",
                self.client.conversations_replies(
                    channel=m.channel, ts=m.thread, include_all_metadata=True, limit=200, cursor=cursor
                ),
            )
            if page is None:
                return None
            for message in page.get("messages") or []:
                metadata = message.get("metadata") or {}
                if (
                    metadata.get("event_type") == PLACEHOLDER_EVENT
                    and (metadata.get("event_payload") or {}).get("question_ts") == m.message_id
                    and (not bot_id or message.get("bot_id") == bot_id)
                ):
                    log.info("found the lost placeholder %s of slack message %s", message.get("ts"), m.message_id)
                    return message.get("ts")
            cursor = (page.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                return None
        return None

    async def discard(self, delivery: Delivery, placeholder: str) -> None:
        await self.api("chat.delete", self.client.chat_delete(channel=delivery.message.channel, ts=placeholder))

    async def show(self, delivery: Delivery, placeholder: str, reply: Reply) -> Shown | None:
        m = delivery.message
        message = render_reply(reply)
        if placeholder:
            # Linked before the update, so a reaction right after the answer appears is not missed.
            await self.link(reply.answer_id, m.channel, placeholder)
        shown_ts = await self.replace(m.channel, m.thread, placeholder or None, message)
        if shown_ts and shown_ts != placeholder:
            await self.link(reply.answer_id, m.channel, shown_ts)
        return Shown((shown_ts,)) if shown_ts else None

    async def replace_shown(self, delivery: Delivery, shown: Shown, reply: Reply) -> None:
        m = delivery.message
        ts = shown.message_ids[0]
        shown_ts = await self.replace(m.channel, m.thread, ts, render_reply(reply))
        if shown_ts is None:
            raise RuntimeError(f"slack message {m.channel}/{ts} could not be updated with the late answer")
        if shown_ts != ts:  # posted anew (the update failed): reactions on it rate the same answer
            await self.link(reply.answer_id, m.channel, shown_ts)

    async def apologise(self, delivery: Delivery, placeholder: str) -> bool:
        m = delivery.message
        return await self.replace(m.channel, m.thread, placeholder or None, render_failure()) is not None

    # -- messages ---------------------------------------------------------------------------------

    async def replace(self, channel: str, thread: str, ts: str | None, message: SlackMessage) -> str | None:
        """Replace the placeholder with `message`; post it anew if that fails. Returns the message ts."""
        if ts:
            updated = await self.api(
                "chat.update",
                self.client.chat_update(channel=channel, ts=ts, text=message.text, blocks=message.blocks),
            )
            if updated is not None:
                return ts
        posted = await self.post(channel, thread, message)
        if posted is None and message.blocks:
            # Last resort, e.g. Slack rejected the blocks: the plain text still reaches the user.
            posted = await self.post(channel, thread, SlackMessage(text=message.text, blocks=[]))
        return posted

    async def post(
        self, channel: str, thread: str, message: SlackMessage, *, metadata: dict | None = None
    ) -> str | None:
        kwargs: dict[str, Any] = {"channel": channel, "thread_ts": thread, "text": message.text}
        if message.blocks:
            kwargs["blocks"] = message.blocks
        if metadata:
            kwargs["metadata"] = metadata
        response = await self.api("chat.postMessage", self.client.chat_postMessage(**kwargs))
        return None if response is None else response.get("ts")

    async def link(self, answer_id: str, channel: str, ts: str) -> None:
        try:
            await asyncio.to_thread(self.service.link_platform_message, answer_id, PLATFORM, channel, ts)
        except Exception:  # the answer is shown; only reactions on it would be missed
            log.exception("linking answer %s to slack message %s failed", answer_id, ts)
            self.count_error("slack_link")

    async def api(self, method: str, call: Awaitable[Any]) -> Any | None:
        """Await a Web API call; on failure log it, count it and return None (callers fall back)."""
        try:
            return await call
        except (TimeoutError, SlackApiError, SlackClientError, aiohttp.ClientError, OSError) as exc:
            error = exc.response.get("error") if isinstance(exc, SlackApiError) else type(exc).__name__
            log.error("slack %s failed: %s", method, error)
            self.count_error("slack_api")
            return None

    def count_error(self, component: str) -> None:
        if self.metrics is not None:
            self.metrics.count_error(component)

    async def _own_bot_id(self) -> str:
        if self._bot_id is None:
            auth = await self.api("auth.test", self.client.auth_test())
            if auth is None:
                return ""  # try again next time; meanwhile the metadata alone identifies the placeholder
            self._bot_id = auth.get("bot_id") or ""
        return self._bot_id
