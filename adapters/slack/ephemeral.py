"""Private answers to `/hypa <question>`: a ReplySurface that shows the reply to the asker only.

A slash command is acknowledged with "Looking that up…" (the ack's body is an ephemeral message), and
the answer follows through the command's `response_url` (valid for 30 minutes, no channel membership
needed). A command whose response_url this process does not know — the recovery sweep finishing a
command a crashed process had claimed — is answered with `chat.postEphemeral` instead (the bot must
be in the channel for that; if it is not, the failure is logged and counted).

A command is stored like any message (platform "slack", the command's channel and user) under a
message id and thread of its own, `cmd:<trigger_id>`, so it gets the same lease, recovery, answer
window and ratings as a mention, and is never mistaken for a thread a follow-up could continue.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.delivery import Shown
from adapters.slack.blocks import SlackMessage, render_failure, render_reply
from core.conversation import Delivery, IncomingMessage, Reply

if TYPE_CHECKING:
    from adapters.slack.replies import SlackReplies

log = logging.getLogger(__name__)

COMMAND_PREFIX = "cmd:"
_RESPONSE_URLS_KEPT = 1000  # response URLs of commands in flight (each lives 30 minutes at Slack)


def is_command(message: IncomingMessage) -> bool:
    return message.message_id.startswith(COMMAND_PREFIX)


def command_message_id(trigger_id: str) -> str:
    return f"{COMMAND_PREFIX}{trigger_id}"


class EphemeralReplies:
    """Shows replies to slash commands privately (adapters.delivery.ReplySurface)."""

    def __init__(self, client: AsyncWebClient, replies: SlackReplies) -> None:
        self.client = client
        self.replies = replies  # its api() logs and counts Web API failures
        self._response_urls: dict[str, str] = {}

    def remember(self, message_id: str, response_url: str) -> None:
        if len(self._response_urls) >= _RESPONSE_URLS_KEPT:
            self._response_urls.pop(next(iter(self._response_urls)))
        self._response_urls[message_id] = response_url

    # -- ReplySurface ------------------------------------------------------------------------------

    async def post_placeholder(self, delivery: Delivery) -> str | None:
        return None  # the command's acknowledgement said "Looking that up…"

    async def find_placeholder(self, delivery: Delivery) -> str | None:
        return None

    async def discard(self, delivery: Delivery, placeholder: str) -> None:
        return None

    async def show(self, delivery: Delivery, placeholder: str, reply: Reply) -> Shown | None:
        shown = await self.send(delivery, render_reply(reply, shareable=True))
        return Shown((shown,)) if shown else None

    async def replace_shown(self, delivery: Delivery, shown: Shown, reply: Reply) -> None:
        if not await self.send(delivery, render_reply(reply, shareable=True), replace=True):
            raise RuntimeError(f"the late answer to slack command {delivery.message.message_id} could not be shown")

    async def apologise(self, delivery: Delivery, placeholder: str) -> bool:
        return bool(await self.send(delivery, render_failure()))

    # -- sending -----------------------------------------------------------------------------------

    async def send(self, delivery: Delivery, message: SlackMessage, *, replace: bool = False) -> str:
        """Show `message` to the asker only; an id for where it is shown, "" when it could not be."""
        m = delivery.message
        url = self._response_urls.get(m.message_id)
        if url and await self.respond(url, message, replace=replace):
            return "response_url"
        sent = await self.replies.api(
            "chat.postEphemeral",
            self.client.chat_postEphemeral(channel=m.channel, user=m.user, text=message.text, blocks=message.blocks),
        )
        return (sent.get("message_ts") or "ephemeral") if sent is not None else ""

    async def respond(self, url: str, message: SlackMessage | None, *, replace: bool = False, delete: bool = False) -> bool:
        """POST to an interaction's response_url: an ephemeral message, or delete the message it came from."""
        webhook = AsyncWebhookClient(url, session=self.client.session, timeout=10)
        try:
            if delete:
                response = await webhook.send(delete_original=True)
            else:
                assert message is not None
                response = await webhook.send(
                    text=message.text, blocks=message.blocks, response_type="ephemeral",
                    # Explicit: a response_url of a button click replaces the clicked message by default.
                    replace_original=replace,
                )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            log.error("slack response_url failed: %s", type(exc).__name__)
            self.replies.count_error("slack_api")
            return False
        if response.status_code != 200:
            log.error("slack response_url answered %s: %s", response.status_code, response.body[:200])
            self.replies.count_error("slack_api")
            return False
        return True
