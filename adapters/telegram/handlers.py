"""Telegram updates -> the conversation service -> Telegram messages (PTB handlers).

Who is asked: in private chats every text message is a question; in groups only messages that
mention the bot (@username or a text mention, read from the message entities) or reply to one of
the bot's messages. A reply chain is the thread: its key is the chain's root message id, found by
following a reply to the bot's answer back to the thread that answer belongs to (stored by the
service, so it survives restarts).

The service is synchronous and CPU/IO bound (retrieval, generation, SQL), so every call runs in a
worker thread (`asyncio.to_thread`) and the event loop keeps serving other chats.
"""
from __future__ import annotations

import asyncio
import logging
import re
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from telegram import Chat, Message, MessageEntity, ReactionTypeEmoji, Update
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, TelegramError
from telegram.ext import (
    Application,
    ApplicationHandlerStop,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    MessageReactionHandler,
    TypeHandler,
    filters,
)

from adapters.delivery import MAX_CONCURRENT_ANSWERS, is_first_delivery
from adapters.telegram.render import (
    THUMBS_DOWN,
    THUMBS_UP,
    parse_feedback_callback,
    render_plain,
    render_reply,
)
from core.conversation import (
    ConversationService,
    FeedbackEvent,
    IncomingMessage,
    Reply,
    UnknownAnswer,
)

if TYPE_CHECKING:
    from bot.metrics import Metrics

log = logging.getLogger(__name__)

PLATFORM = "telegram"
WORKSPACE = "telegram"  # Telegram has no workspaces; chat ids are global

PLACEHOLDER = "⏳ Looking that up in the regulations…"
HELP_TEXT = (
    "Ask me a question about the regulations (for example: “Do I need a bias audit before using an "
    "automated employment decision tool?”). I answer with numbered sources.\n\n"
    "Follow-up questions: reply to my answer, and I will read the conversation so far. "
    "In groups, mention me or reply to one of my messages. Rate answers with 👍 / 👎."
)
NOT_TEXT = "I can only read text. Please type your question (stickers, photos and files carry no question for me)."
FAILED = "Sorry — something went wrong while answering. Please try again in a moment."


class NotifiedError(Exception):
    """A handler failed and already told the user; the error handler only logs it."""


@dataclass
class TelegramHandlers:
    service: ConversationService
    metrics: Metrics | None = None
    max_concurrent_answers: int = MAX_CONCURRENT_ANSWERS  # see adapters/delivery.py
    # Created on the serving event loop at the first question.
    _answer_slots: asyncio.Semaphore | None = field(default=None, init=False, repr=False)

    def register(self, application: Application) -> None:
        # Group -1 runs first for every update: a delivery seen before stops here.
        application.add_handler(TypeHandler(Update, self.claim_delivery), group=-1)
        application.add_handler(CommandHandler(["start", "help"], self.on_help))
        application.add_handler(CallbackQueryHandler(self.on_callback))
        application.add_handler(MessageReactionHandler(self.on_reaction))
        new_messages = filters.UpdateType.MESSAGE
        application.add_handler(MessageHandler(new_messages & filters.COMMAND, self.on_other_command))
        application.add_handler(MessageHandler(new_messages & ~filters.COMMAND, self.on_message))
        application.add_error_handler(self.on_error)

    # -- every update ------------------------------------------------------------------------------

    async def claim_delivery(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Drop an update seen before. Fails open (adapters.delivery): raising here would send the user an
        apology from the error handler while PTB goes on to answer the update regardless."""
        if not await is_first_delivery(self.service, PLATFORM, str(update.update_id), self.metrics):
            raise ApplicationHandlerStop

    # -- messages ----------------------------------------------------------------------------------

    async def on_help(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is not None:
            for part in render_plain(HELP_TEXT):
                await message.reply_text(part, parse_mode=ParseMode.HTML, do_quote=True)

    async def on_other_command(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Unknown commands: help in private chats (never a silent non-answer); groups ignore them."""
        chat = update.effective_chat
        if chat is not None and chat.type == Chat.PRIVATE:
            await self.on_help(update, context)

    async def on_message(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message, chat = update.effective_message, update.effective_chat
        if message is None or chat is None or message.from_user is None or message.from_user.is_bot:
            return
        bot_id, bot_username = context.bot.id, context.bot.username
        private = chat.type == Chat.PRIVATE
        if not (private or mentions_bot(message, bot_id, bot_username) or replies_to_bot(message, bot_id)):
            return
        if message.text is None and message.caption is None:
            await message.reply_text(NOT_TEXT, do_quote=True)
            return
        question = question_text(message, bot_username)
        thread = await self._thread_of(message, bot_id)
        incoming = IncomingMessage(
            platform=PLATFORM, workspace=WORKSPACE, channel=str(chat.id), thread=thread,
            user=str(message.from_user.id), text=question, message_id=str(message.message_id),
            sent_at=message.date,
        )
        if private:  # in groups every request counts against ~20 messages/minute: the placeholder is enough
            try:
                await context.bot.send_chat_action(chat.id, ChatAction.TYPING)
            except TelegramError:  # only a hint that we are working: never worth losing the answer
                log.warning("sendChatAction failed in chat %s", chat.id, exc_info=True)
        placeholder = await message.reply_text(PLACEHOLDER, do_quote=True)
        try:
            if self._answer_slots is None:
                self._answer_slots = asyncio.Semaphore(self.max_concurrent_answers)
            async with self._answer_slots:
                reply = await asyncio.to_thread(self.service.handle, incoming)
            if reply.duplicate:  # answered before (another delivery of the same message)
                await _delete_quietly(placeholder)
                return
            shown = await self._deliver(reply, placeholder, message)
        except Exception as exc:
            await _replace_or_send(placeholder, message, FAILED)
            raise NotifiedError(f"answering telegram message {chat.id}/{message.message_id} failed") from exc
        if reply.followup is not None:
            # The quoted answer is shown; Claude's replaces it when it arrives. A task PTB tracks (and
            # awaits on shutdown), so this handler returns and the next update is not held up.
            context.application.create_task(self._show_followup(reply.followup, shown, message), update=update)

    async def _thread_of(self, message: Message, bot_id: int) -> str:
        """The reply chain's root: the thread of the bot answer replied to, else this message starts one."""
        parent = message.reply_to_message
        if parent is not None and replies_to_bot(message, bot_id):
            answer_id = await asyncio.to_thread(
                self.service.answer_for_platform_message, PLATFORM, str(message.chat.id), str(parent.message_id)
            )
            if answer_id is not None:
                thread = await asyncio.to_thread(self.service.thread_for_answer, answer_id)
                if thread is not None:
                    return thread
        return str(message.message_id)

    async def _deliver(self, reply: Reply, placeholder: Message, question: Message) -> list[Message]:
        """The first part replaces the placeholder, later parts follow as replies; buttons go on the last.

        Each message is linked to the answer before (placeholder) or right after it is shown, so a
        reply or reaction on any part refers to this answer. Returns the messages showing it.
        """
        rendered = render_reply(reply)
        last = len(rendered.parts) - 1
        await self._link(reply, placeholder)
        shown = [placeholder]
        for i, part in enumerate(rendered.parts):
            keyboard = rendered.keyboard if i == last else None
            if i == 0:
                await placeholder.edit_text(part, parse_mode=ParseMode.HTML, reply_markup=keyboard)
            else:
                sent = await question.reply_text(part, parse_mode=ParseMode.HTML, reply_markup=keyboard, do_quote=True)
                await self._link(reply, sent)
                shown.append(sent)
        return shown

    async def _show_followup(self, followup: Future, shown: list[Message], question: Message) -> None:
        """Edit the messages showing the quoted answer into Claude's (editMessageText), sending or
        deleting messages when it has more or fewer parts. If it cannot be stored, the quoted stays."""
        try:
            final = await asyncio.wrap_future(followup)
        except Exception:
            log.exception("the late answer for telegram message %s/%s could not be stored",
                          question.chat.id, question.message_id)
            if self.metrics:
                self.metrics.count_error("telegram_answer")
            return
        rendered = render_reply(final)
        last = len(rendered.parts) - 1
        try:
            for i, part in enumerate(rendered.parts):
                keyboard = rendered.keyboard if i == last else None
                if i < len(shown):
                    try:
                        await shown[i].edit_text(part, parse_mode=ParseMode.HTML, reply_markup=keyboard)
                    except BadRequest as exc:
                        if "not modified" not in str(exc).lower():  # the same text again is no error
                            raise
                else:
                    sent = await question.reply_text(part, parse_mode=ParseMode.HTML, reply_markup=keyboard, do_quote=True)
                    await self._link(final, sent)
            for extra in shown[len(rendered.parts):]:
                await _delete_quietly(extra)
        except TelegramError:  # the quoted answer is still shown, and complete: log it, no apology
            log.warning("showing Claude's answer in telegram chat %s failed", question.chat.id, exc_info=True)
            if self.metrics:
                self.metrics.count_error("telegram_answer")

    async def _link(self, reply: Reply, shown: Message) -> None:
        if not reply.answer_id:
            return
        try:
            await asyncio.to_thread(
                self.service.link_platform_message, reply.answer_id, PLATFORM, str(shown.chat.id), str(shown.message_id)
            )
        except Exception:  # the answer is still shown; only replies/reactions on this message lose their link
            log.exception("linking answer %s to telegram message %s failed", reply.answer_id, shown.message_id)
            if self.metrics:
                self.metrics.count_error("telegram_link")

    # -- feedback ----------------------------------------------------------------------------------

    async def on_callback(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """👍/👎 buttons. Every callback query is answered, or the user's client keeps spinning."""
        query = update.callback_query
        if query is None:
            return
        parsed = parse_feedback_callback(query.data)
        if parsed is None:
            await query.answer("This button is no longer supported.")
            return
        answer_id, rating = parsed
        event = FeedbackEvent(answer_id=answer_id, platform=PLATFORM, rater=str(query.from_user.id), rating=rating)
        try:
            outcome = await asyncio.to_thread(self.service.record_feedback, event)
        except UnknownAnswer:
            await query.answer("I no longer know that answer, so the rating was not recorded.")
            return
        except Exception:
            await query.answer("Sorry — the rating could not be saved. Please try again.")
            raise
        emoji = THUMBS_UP if rating > 0 else THUMBS_DOWN
        await query.answer(f"Thanks, rated {emoji}." if outcome.changed else f"You already rated this {emoji}.")

    async def on_reaction(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """👍/👎 reactions on the bot's answer are ratings; taking the reaction away removes the rating."""
        change = update.message_reaction
        if change is None:
            return
        old = _emojis(change.old_reaction)
        rating = reaction_rating(old, _emojis(change.new_reaction))
        if rating is None:
            return
        answer_id = await asyncio.to_thread(
            self.service.answer_for_platform_message, PLATFORM, str(change.chat.id), str(change.message_id)
        )
        if answer_id is None:
            return  # a reaction on some other message
        rater = str(change.user.id) if change.user else f"chat:{change.actor_chat.id if change.actor_chat else '?'}"
        # Taking a 👍 away withdraws +1 only (a 👎 click made since stays), and vice versa.
        withdraws = None if rating != 0 else (1 if THUMBS_UP in old else -1)
        event = FeedbackEvent(
            answer_id=answer_id, platform=PLATFORM, rater=rater, rating=rating, source="reaction", withdraws=withdraws,
            at=change.date,  # Telegram's time of the change: concurrent updates may be processed out of order
        )
        try:
            await asyncio.to_thread(self.service.record_feedback, event)
        except UnknownAnswer:
            log.info("reaction on a message linked to an unknown answer %s", answer_id)

    # -- errors ------------------------------------------------------------------------------------

    async def on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        error = context.error
        cause = error.__cause__ if isinstance(error, NotifiedError) and error.__cause__ else error
        log.error("telegram handler failed: %s", error, exc_info=cause)
        if self.metrics:
            self.metrics.count_error(PLATFORM)
        if isinstance(error, NotifiedError) or not isinstance(update, Update):
            return
        message = update.effective_message
        if update.message is not None and message is not None:  # a question: never a silent non-answer
            try:
                await message.reply_text(FAILED, do_quote=True)
            except TelegramError:
                log.warning("could not tell the user about the failure", exc_info=True)


# --- pure helpers ---------------------------------------------------------------------------------


def mentions_bot(message: Message, bot_id: int, bot_username: str | None) -> bool:
    """@username (a `mention` entity) or a `text_mention` of the bot, in the text or a caption."""
    wanted = f"@{bot_username}".lower() if bot_username else None
    for parsed in (message.parse_entities, message.parse_caption_entities):
        for entity, text in parsed([MessageEntity.MENTION, MessageEntity.TEXT_MENTION]).items():
            if entity.type == MessageEntity.MENTION and wanted and text.lower() == wanted:
                return True
            if entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == bot_id:
                return True
    return False


def replies_to_bot(message: Message, bot_id: int) -> bool:
    parent = message.reply_to_message
    return parent is not None and parent.from_user is not None and parent.from_user.id == bot_id


def question_text(message: Message, bot_username: str | None) -> str:
    """The message text (or caption) without the bot's @mention."""
    text = message.text if message.text is not None else (message.caption or "")
    if bot_username:
        text = re.sub(rf"[ \t]*@{re.escape(bot_username)}\b[ \t]*", " ", text, flags=re.IGNORECASE)
    return text.strip()


def reaction_rating(old: set[str], new: set[str]) -> int | None:
    """+1 / -1 for a newly set 👍 / 👎, 0 when the rating reaction was taken away, None if unrelated."""
    up, down = THUMBS_UP in new, THUMBS_DOWN in new
    if up != down:
        return 1 if up else -1
    if up and down:
        return None  # both at once says nothing
    if THUMBS_UP in old or THUMBS_DOWN in old:
        return 0
    return None


def _emojis(reactions) -> set[str]:
    return {r.emoji for r in reactions if isinstance(r, ReactionTypeEmoji)}


async def _delete_quietly(message: Message) -> None:
    try:
        await message.delete()
    except TelegramError:
        log.debug("placeholder already gone", exc_info=True)


async def _replace_or_send(placeholder: Message, question: Message, text: str) -> None:
    try:
        await placeholder.edit_text(text)
    except BadRequest:
        await question.reply_text(text, do_quote=True)
    except TelegramError:
        log.warning("could not tell the user about the failure", exc_info=True)
