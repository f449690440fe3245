"""Telegram updates -> the conversation service -> Telegram messages (PTB handlers).

Who is asked: in private chats every text message is a question; in groups only messages that
mention the bot (@username or a text mention, read from the message entities) or reply to one of
the bot's messages. A reply chain is the thread: its key is the chain's root message id, found by
following a reply to the bot's answer back to the thread that answer belongs to (stored by the
service, so it survives restarts).

The service is synchronous and CPU/IO bound (retrieval, generation, SQL), so every call runs in a
worker thread (`asyncio.to_thread`) and the event loop keeps serving other chats.

A question is claimed as a lease before the placeholder is sent and completed only once the answer
is shown (adapters/delivery.py), so a redelivered update is dropped while its answer is owed by a
live process, and taken over — or finished by the recovery sweep — when that process died.
When Claude has not answered within HYPA_CHAT_ANSWER_WAIT_S, the quoted answer is shown and edited
into Claude's when it arrives (editMessageText, TelegramReplies.replace_shown).
"""
from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from telegram import Bot, Chat, Message, MessageEntity, ReactionTypeEmoji, Update
from telegram.constants import ParseMode
from telegram.error import TelegramError
from telegram.ext import (
    Application,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    MessageReactionHandler,
    TypeHandler,
    filters,
)

from adapters.delivery import MAX_CONCURRENT_ANSWERS, LeaseKeeper, claim, finish_delivery, is_first_delivery
from adapters.telegram.recording import UpdateRecorder
from adapters.telegram.render import (
    THUMBS_DOWN,
    THUMBS_UP,
    parse_feedback_callback,
    render_plain,
)
from adapters.telegram.replies import FAILED, PLACEHOLDER, TelegramReplies
from adapters.telegram.review import ASK_PERSON_PREFIX, REVIEW_PREFIX, TelegramReviewDesk
from core.conversation import (
    AnswerNotShownHere,
    ConversationService,
    Delivery,
    FeedbackEvent,
    IncomingMessage,
    Rating,
    UnknownAnswer,
)

if TYPE_CHECKING:
    from core.metrics import Metrics

log = logging.getLogger(__name__)

PLATFORM = "telegram"
WORKSPACE = "telegram"  # Telegram has no workspaces; chat ids are global

__all__ = ["FAILED", "HELP_TEXT", "NOT_SHOWN_HERE", "NOT_TEXT", "PLACEHOLDER", "TelegramHandlers"]

HELP_TEXT = (
    "Ask me a question about the regulations (for example: “Do I need a bias audit before using an "
    "automated employment decision tool?”). I answer with numbered sources.\n\n"
    "Follow-up questions: reply to my answer, and I will read the conversation so far. "
    "In groups, mention me or reply to one of my messages. Rate answers with 👍 / 👎 (after a 👎 I ask what "
    "was wrong), or press “Ask a person” to have a reviewer look at an answer."
)
NOT_TEXT = "I can only read text. Please type your question (stickers, photos and files carry no question for me)."
NOT_SHOWN_HERE = "This button does not belong to an answer in this chat, so the rating was not recorded."


class NotifiedError(Exception):
    """A handler failed and already told the user; the error handler only logs it."""


@dataclass
class TelegramHandlers:
    service: ConversationService
    metrics: Metrics | None = None
    max_concurrent_answers: int = MAX_CONCURRENT_ANSWERS  # see adapters/delivery.py
    review_chat: str = ""  # HYPA_TELEGRAM_REVIEW_CHAT: where 👎 reasons and "Ask a person" go; "" = off
    # Updates fetched or received and not yet recorded: Telegram is told about them only after (recording.py).
    recorder: UpdateRecorder = field(default_factory=UpdateRecorder)
    # Created on the serving event loop at the first question.
    _answer_slots: asyncio.Semaphore | None = field(default=None, init=False, repr=False)
    review: TelegramReviewDesk = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.review = TelegramReviewDesk(self.service, self.review_chat, self.metrics)

    def register(self, application: Application) -> None:
        # Group 1 runs after the handlers of group 0 are done with an update: it is recorded then (a
        # question is recorded earlier, as soon as it is claimed: its handler runs until it is answered).
        application.add_handler(TypeHandler(Update, self._recorded), group=1)
        application.add_handler(CommandHandler(["start", "help"], self.on_help))
        application.add_handler(CallbackQueryHandler(self.on_callback))
        application.add_handler(MessageReactionHandler(self.on_reaction))
        new_messages = filters.UpdateType.MESSAGE
        application.add_handler(MessageHandler(new_messages & filters.COMMAND, self.on_other_command))
        application.add_handler(MessageHandler(new_messages & ~filters.COMMAND, self.on_message))
        application.add_error_handler(self.on_error)

    # -- messages ----------------------------------------------------------------------------------

    async def _recorded(self, update: object, context: ContextTypes.DEFAULT_TYPE | None = None) -> None:
        if isinstance(update, Update):
            self.recorder.recorded(update.update_id)

    async def _first_delivery(self, update: Update) -> bool:
        """At most once, for replies that are not answers (help, "text only"): a redelivered update
        gets nothing. Questions are claimed as leases instead (`claim`)."""
        return await is_first_delivery(self.service, PLATFORM, str(update.update_id), self.metrics)

    async def on_help(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is not None and await self._first_delivery(update):
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
        if replies_to_bot(message, bot_id):
            # A reply to one of our prompts (a 👎's reason, a reviewer's correction) is that, never a question;
            # from anyone but the person asked it is left alone.
            prompt = await self.review.prompt_for(message)
            if prompt is not None:
                if str(message.from_user.id) == prompt.user and await self._first_delivery(update):
                    await self.review.take_reply(context.bot, message, prompt)
                return
        private = chat.type == Chat.PRIVATE
        if not (private or mentions_bot(message, bot_id, bot_username) or replies_to_bot(message, bot_id)):
            return
        if message.text is None and message.caption is None:
            if await self._first_delivery(update):
                await message.reply_text(NOT_TEXT, do_quote=True)
            return
        question = question_text(message, bot_username)
        thread = await self._thread_of(message, bot_id)
        incoming = IncomingMessage(
            platform=PLATFORM, workspace=WORKSPACE, channel=str(chat.id), thread=thread,
            user=str(message.from_user.id), text=question, message_id=str(message.message_id),
            sent_at=message.date,
        )
        try:
            delivery = await claim(self.service, incoming)
            await self._recorded(update)  # in the database with its lease: safe to acknowledge to Telegram
        except Exception as exc:  # the message cannot be recorded (database down): say so, never silence
            if self.metrics:
                self.metrics.count_error("telegram_claim")
            try:
                await message.reply_text(FAILED, do_quote=True)
            except TelegramError:
                log.warning("could not tell the user about the failure", exc_info=True)
            raise NotifiedError(f"recording telegram message {chat.id}/{message.message_id} failed") from exc
        if delivery is not None:  # None: a redelivery of a message answered (or being answered) already
            # Claude's answer arriving after the quoted one is shown by a task PTB tracks (and awaits on
            # shutdown), so this handler returns once the quoted answer is shown.
            await self.finish(
                context.bot, delivery, later=lambda followup: context.application.create_task(followup, update=update)
            )

    async def finish(
        self, bot: Bot, delivery: Delivery, *, later: Callable[[Coroutine[Any, Any, None]], object] | None = None
    ) -> None:
        """Reply to a claimed message: a new one, a redelivery's takeover, or one the recovery sweep took
        over. `later` runs the wait for Claude's late answer, if any (default: awaited here)."""
        if self._answer_slots is None:
            self._answer_slots = asyncio.Semaphore(self.max_concurrent_answers)
        replies = TelegramReplies(bot, self.service, self.metrics)
        await finish_delivery(
            self.service, replies, delivery, self._answer_slots, platform=PLATFORM, metrics=self.metrics, later=later
        )

    def lease_keeper(self, application: Application) -> LeaseKeeper:
        """Renews this process's leases and finishes replies a crashed process owed (see app.py). A late
        Claude answer to a recovered question is shown by a task PTB tracks, not in the sweep's batch."""

        def finish(delivery: Delivery) -> Coroutine[Any, Any, None]:
            return self.finish(application.bot, delivery, later=application.create_task)

        return LeaseKeeper(self.service, PLATFORM, finish, metrics=self.metrics)

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

    # -- feedback ----------------------------------------------------------------------------------

    async def on_callback(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """👍/👎 buttons. Every callback query is answered, or the user's client keeps spinning."""
        query = update.callback_query
        if query is None:
            return
        data = query.data or ""
        if data.startswith(f"{ASK_PERSON_PREFIX}:"):
            await self.review.ask_person(context.bot, query, data.split(":", 1)[1])
            return
        if data.startswith(f"{REVIEW_PREFIX}:") and data.count(":") == 2:
            _, action, answer_id = data.split(":", 2)
            await self.review.on_review_button(context.bot, query, action, answer_id)
            return
        parsed = parse_feedback_callback(query.data)
        if parsed is None:
            await query.answer("This button is no longer supported.")
            return
        answer_id, rating = parsed
        if query.message is None:  # a button on an inline message: no chat the answer could be shown in
            await query.answer(NOT_SHOWN_HERE)
            return
        # Telegram's update ids order every act of a bot (presses and reactions) on one clock; the bot's
        # own clock and a reaction's whole-second `date` do not compare.
        event = FeedbackEvent(
            answer_id=answer_id, platform=PLATFORM, rater=str(query.from_user.id), rating=rating,
            order=update.update_id,
            channel=str(query.message.chat.id),  # only an answer posted in this chat can be rated from it
        )
        try:
            outcome = await asyncio.to_thread(self.service.record_feedback, event)
        except UnknownAnswer:
            await query.answer("I no longer know that answer, so the rating was not recorded.")
            return
        except AnswerNotShownHere:
            log.info("telegram rating from chat %s for answer %s posted elsewhere: not recorded",
                     event.channel, answer_id)
            await query.answer(NOT_SHOWN_HERE)
            return
        except Exception:
            await query.answer("Sorry — the rating could not be saved. Please try again.")
            raise
        emoji = THUMBS_UP if rating > 0 else THUMBS_DOWN
        await query.answer(f"Thanks, rated {emoji}." if outcome.changed else f"You already rated this {emoji}.")
        if rating < 0 and outcome.changed:  # a new 👎: ask what was wrong (reactions stay one-tap ratings)
            await self.review.ask_reason(context.bot, query, answer_id, update.update_id)

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
        withdraws: Rating | None = None if rating != 0 else (1 if THUMBS_UP in old else -1)
        event = FeedbackEvent(
            answer_id=answer_id, platform=PLATFORM, rater=rater, rating=rating, source="reaction", withdraws=withdraws,
            at=change.date, order=update.update_id,  # concurrent updates may be processed out of order
            channel=str(change.chat.id),
        )
        try:
            await asyncio.to_thread(self.service.record_feedback, event)
        except (UnknownAnswer, AnswerNotShownHere):
            log.info("reaction on a message linked to an unknown answer %s", answer_id)

    # -- errors ------------------------------------------------------------------------------------

    async def on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        await self._recorded(update)  # handled, if badly: no reason to hold Telegram's acknowledgement
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


def reaction_rating(old: set[str], new: set[str]) -> Rating | None:
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
