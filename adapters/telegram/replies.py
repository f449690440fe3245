"""Showing replies in Telegram: the placeholder, the answer in its place, apologies (a ReplySurface).

Works from stored ids only (chat id, the question's message id, the placeholder's message id), not
from PTB `Message` objects, so the recovery sweep can finish a reply for a message that a process
which died had received.

Idempotent where Telegram allows: editing a placeholder into the text it already shows is answered
"message is not modified", which counts as shown (a retried reply after a crash between the edit and
completing the lease). Telegram offers no way to list a chat's messages, so a placeholder sent just
before a crash, whose id the database had not stored yet, cannot be found again (`find_placeholder`).

Claude's answer arriving after the quoted one was shown (the answer window, adapters/delivery.py) is
edited into the messages showing the quoted answer (`replace_shown`, editMessageText), with messages
sent or deleted when it has more or fewer parts.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from telegram import Bot, InlineKeyboardMarkup, ReplyParameters
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, TelegramError

from adapters.delivery import Shown
from adapters.telegram.render import render_reply
from core.conversation import ConversationService, Delivery, Reply

if TYPE_CHECKING:
    from core.metrics import Metrics

log = logging.getLogger(__name__)

PLATFORM = "telegram"
PLACEHOLDER = "⏳ Looking that up in the regulations…"
FAILED = "Sorry — something went wrong while answering. Please try again in a moment."


def not_modified(exc: BadRequest) -> bool:
    """Telegram's answer to an edit that changes nothing: the message already shows that text."""
    return "not modified" in str(exc).lower()


def is_private(chat_id: str) -> bool:
    """Private chats have a user's (positive) id; groups and channels negative ones."""
    return not chat_id.startswith("-")


class TelegramReplies:
    def __init__(self, bot: Bot, service: ConversationService, metrics: Metrics | None = None) -> None:
        self.bot = bot
        self.service = service
        self.metrics = metrics

    # -- ReplySurface -----------------------------------------------------------------------------

    async def post_placeholder(self, delivery: Delivery) -> str | None:
        m = delivery.message
        if is_private(m.channel):  # in groups every request counts against ~20 messages/minute
            try:
                await self.bot.send_chat_action(int(m.channel), ChatAction.TYPING)
            except TelegramError:  # only a hint that we are working: never worth losing the answer
                log.warning("sendChatAction failed in chat %s", m.channel, exc_info=True)
        try:
            sent = await self.bot.send_message(int(m.channel), PLACEHOLDER, reply_parameters=self._reply_to(delivery))
        except TelegramError:  # the answer is then sent as a new reply
            log.warning("the placeholder could not be sent in chat %s", m.channel, exc_info=True)
            return None
        return str(sent.message_id)

    async def find_placeholder(self, delivery: Delivery) -> str | None:
        return None  # the Bot API cannot list a chat's messages

    async def discard(self, delivery: Delivery, placeholder: str) -> None:
        try:
            await self.bot.delete_message(int(delivery.message.channel), int(placeholder))
        except TelegramError:
            log.debug("placeholder already gone", exc_info=True)

    async def show(self, delivery: Delivery, placeholder: str, reply: Reply) -> Shown:
        """The first part replaces the placeholder, later parts follow as replies; buttons go on the last.

        Each message is linked to the answer before (placeholder) or right after it is shown, so a
        reply or reaction on any part refers to this answer. Raises TelegramError when a part could
        not be shown (the caller apologises, or leaves the reply to the recovery sweep). Returns the
        messages showing it.
        """
        rendered = render_reply(reply)
        last = len(rendered.parts) - 1
        chat = delivery.message.channel
        if placeholder:
            await self._link(reply, chat, placeholder)
        shown: list[str] = []
        for i, part in enumerate(rendered.parts):
            keyboard = rendered.keyboard if i == last else None
            if i == 0 and placeholder and await self._edit(chat, placeholder, part, keyboard):
                shown.append(placeholder)
                continue
            shown.append(await self._send_part(delivery, reply, part, keyboard))
        return Shown(tuple(shown))

    async def replace_shown(self, delivery: Delivery, shown: Shown, reply: Reply) -> None:
        """Edit the messages showing the quoted answer into `reply` (editMessageText); a part beyond
        them (or one deleted meanwhile) is sent, messages beyond its parts are deleted. Raises
        TelegramError when a part could not be shown (the quoted answer stays where it is)."""
        rendered = render_reply(reply)
        last = len(rendered.parts) - 1
        chat = delivery.message.channel
        for i, part in enumerate(rendered.parts):
            keyboard = rendered.keyboard if i == last else None
            if i < len(shown.message_ids) and await self._edit(chat, shown.message_ids[i], part, keyboard):
                continue  # ("not modified", the same text again, counts as shown)
            await self._send_part(delivery, reply, part, keyboard)
        for extra in shown.message_ids[len(rendered.parts):]:
            await self.discard(delivery, extra)

    async def apologise(self, delivery: Delivery, placeholder: str) -> bool:
        chat = delivery.message.channel
        try:
            if placeholder and await self._edit(chat, placeholder, FAILED, None, html=False):
                return True
            await self.bot.send_message(int(chat), FAILED, reply_parameters=self._reply_to(delivery))
            return True
        except TelegramError:
            log.warning("could not tell chat %s about the failure", chat, exc_info=True)
            return False

    # -- helpers ----------------------------------------------------------------------------------

    async def _edit(
        self, chat: str, message_id: str, text: str, keyboard: InlineKeyboardMarkup | None, *, html: bool = True
    ) -> bool:
        """Edit a message; False when it is gone (deleted) so the caller sends anew."""
        try:
            await self.bot.edit_message_text(
                text, chat_id=int(chat), message_id=int(message_id),
                parse_mode=ParseMode.HTML if html else None, reply_markup=keyboard,
            )
            return True
        except BadRequest as exc:
            if not_modified(exc):
                return True  # it already shows this: an earlier attempt edited it before it died
            if "not found" in str(exc).lower() or "can't be edited" in str(exc).lower():
                log.info("placeholder %s in chat %s cannot be edited (%s); sending anew", message_id, chat, exc)
                return False
            raise

    async def _send_part(
        self, delivery: Delivery, reply: Reply, part: str, keyboard: InlineKeyboardMarkup | None
    ) -> str:
        chat = delivery.message.channel
        sent = await self.bot.send_message(
            int(chat), part, parse_mode=ParseMode.HTML, reply_markup=keyboard, reply_parameters=self._reply_to(delivery),
        )
        await self._link(reply, chat, str(sent.message_id))
        return str(sent.message_id)

    @staticmethod
    def _reply_to(delivery: Delivery) -> ReplyParameters:
        # A question deleted meanwhile still gets its reply, as a plain message.
        return ReplyParameters(message_id=int(delivery.message.message_id), allow_sending_without_reply=True)

    async def _link(self, reply: Reply, chat: str, message_id: str) -> None:
        if not reply.answer_id:
            return
        try:
            await asyncio.to_thread(self.service.link_platform_message, reply.answer_id, PLATFORM, chat, message_id)
        except Exception:  # the answer is still shown; only replies/reactions on this message lose their link
            log.exception("linking answer %s to telegram message %s failed", reply.answer_id, message_id)
            if self.metrics:
                self.metrics.count_error("telegram_link")
