"""The review loop in Telegram: a 👎's reason (a ForceReply prompt), "Ask a person", and the review chat
(HYPA_TELEGRAM_REVIEW_CHAT) where a reviewer marks an answer fine or writes the correct one.

Telegram has no modals: a 👎 press is answered at once (the rating is stored) and followed by a
ForceReply prompt asking what was wrong; the rater's reply to it is the reason (its kind read from the
words: core/review.py). "Write the correct answer" in the review chat prompts the reviewer the same
way: the reply is the correct answer, a line "Provision: …" names the provision it rests on; then a
button offers to post it in the original chat. Prompts are stored (reply_prompts), so a reply to one
is read as that — not as a question — after a restart too, and only from the person it asked.

Who may do what: "Ask a person" counts only from the chat where the answer was posted (like a
rating); the reviewer's buttons only in the review chat.
"""
from __future__ import annotations

import asyncio
import html
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from telegram import Bot, CallbackQuery, ForceReply, InlineKeyboardButton, InlineKeyboardMarkup, Message, ReplyParameters
from telegram import User as TelegramUser
from telegram.constants import ParseMode
from telegram.error import TelegramError

from adapters.citations import sources
from adapters.review_requests import open_review
from adapters.telegram.render import ASK_PERSON_PREFIX, clean, pack_blocks
from core.conversation import AnswerNotShownHere, ConversationService, FeedbackEvent, UnknownAnswer
from core.review import (
    Exchange,
    ReplyPromptRecord,
    RequestKind,
    Review,
    parse_correction,
    reason_kind_of,
    reason_label,
)

if TYPE_CHECKING:
    from core.metrics import Metrics

log = logging.getLogger(__name__)
T = TypeVar("T")

PLATFORM = "telegram"
REVIEW_PREFIX = "rv"  # rv:c:<answer> write the correct answer, rv:f:<answer> fine, rv:p:<answer> post it
REASON_PROMPT = (
    "{who}, what was wrong with this answer? Reply to this message in a few words — for example: wrong "
    "provision, incomplete, outdated or misread, should have said “not covered”."
)
REASON_THANKS = "Thanks — your reason is recorded{review}."
CORRECTION_PROMPT = (
    "{who}, reply to this message with the correct answer. Add a line “Provision: …” naming the provision "
    "it rests on (e.g. Provision: 6 RCNY § 5-304(a))."
)
CORRECTION_SAVED = "Saved as the reference answer for this exchange."
NOTIFIED = "A person has been notified and will follow up."
NO_REVIEW_CHAT = "No reviewers are set up for this bot; please contact your compliance team directly."
NOT_FROM_HERE = "This button does not belong to an answer in this chat."
REVIEW_ONLY_IN_CHAT = "Reviews are settled in the review chat only."
REVIEW_FAILED = "Sorry, that could not be saved just now. Please try again."
_ANSWER_CHARS = 1500


def _escape(text: str) -> str:
    return html.escape(clean(text), quote=False)


def _shorten(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def _mention(person: TelegramUser) -> str:
    """A text mention: names the person and, with ForceReply(selective), opens the reply for them only."""
    return f'<a href="tg://user?id={person.id}">{_escape(person.first_name or "you")}</a>'


def review_callback(action: str, answer_id: str) -> str:
    return f"{REVIEW_PREFIX}:{action}:{answer_id}"


def ask_person_callback(answer_id: str) -> str:
    return f"{ASK_PERSON_PREFIX}:{answer_id}"


def thread_link(exchange: Exchange) -> str | None:
    """t.me link to the question in a supergroup or channel (-100… ids); private chats have none."""
    if exchange.channel.startswith("-100") and exchange.message_id.isdigit():
        return f"https://t.me/c/{exchange.channel[4:]}/{exchange.message_id}"
    return None


def review_post_html(exchange: Exchange, *, requester: str, kind: str, reason: str = "") -> list[str]:
    """The review chat's post: question (and standalone question), answer, sources, reason, who asked,
    a link to the thread."""
    what = "👎 with a reason" if kind == "downvote" else "🙋 Ask a person"
    blocks = [f"<b>{what}</b> from {requester}", f"<b>Question</b>\n{_escape(_shorten(exchange.question, 1000))}"]
    if exchange.standalone_question.strip() and exchange.standalone_question.strip() != exchange.question.strip():
        blocks.append(f"<i>Standalone question:</i> {_escape(_shorten(exchange.standalone_question, 1000))}")
    blocks.append(f"<b>Answer</b>\n{_escape(_shorten(exchange.answer, _ANSWER_CHARS))}")
    listed = sources(exchange.citations, exchange.answer)
    if listed:
        blocks.append("<b>Sources</b>\n" + "\n".join(f"[{s.n}] {_escape('; '.join(s.labels))}" for s in listed[:10]))
    if kind == "downvote":
        blocks.append(f"<b>Reason:</b> {_escape(_shorten(reason, 1000)) or '<i>(none given)</i>'}")
    link = thread_link(exchange)
    where = f' · <a href="{link}">open the thread</a>' if link else ""
    blocks.append(f"Asked by user {_escape(exchange.asker)} in chat {_escape(exchange.channel)}{where} · "
                  f"answer id <code>{_escape(exchange.answer_id)}</code>")
    return pack_blocks(blocks, 4096)


def review_keyboard(answer_id: str) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup([[
        InlineKeyboardButton("✏️ Write the correct answer", callback_data=review_callback("c", answer_id)),
        InlineKeyboardButton("✅ Answer is fine", callback_data=review_callback("f", answer_id)),
    ]])


def settled_line(review: Review, reviewer: str) -> str:
    if review.state == "fine":
        return f"✅ Marked fine by {reviewer}"
    provision = f" (rests on {_escape(review.reference_provision)})" if review.reference_provision else ""
    return f"✏️ Corrected by {reviewer}{provision}:\n{_escape(_shorten(review.reference_answer, 1500))}"


class TelegramReviewDesk:
    def __init__(self, service: ConversationService, review_chat: str = "", metrics: Metrics | None = None) -> None:
        self.service = service
        self.review_chat = review_chat
        self.metrics = metrics

    # -- a 👎's reason -----------------------------------------------------------------------------

    async def ask_reason(self, bot: Bot, query: CallbackQuery, answer_id: str, order: int) -> None:
        """After a 👎 press: a ForceReply prompt, replying to the answer, for the rater only."""
        message = query.message
        if not isinstance(message, Message):
            return
        try:
            prompt = await bot.send_message(
                message.chat.id, REASON_PROMPT.format(who=_mention(query.from_user)), parse_mode=ParseMode.HTML,
                reply_markup=ForceReply(selective=True, input_field_placeholder="What was wrong?"),
                reply_parameters=ReplyParameters(message_id=message.message_id, allow_sending_without_reply=True),
            )
        except TelegramError:
            log.warning("the reason prompt could not be sent in chat %s", message.chat.id, exc_info=True)
            return
        await self._call(self.service.note_reply_prompt, ReplyPromptRecord(
            PLATFORM, str(message.chat.id), str(prompt.message_id), "reason", answer_id, str(query.from_user.id),
            act_order=order,
        ))

    async def prompt_for(self, message: Message) -> ReplyPromptRecord | None:
        """The stored prompt `message` replies to, if any (None when it replies to anything else)."""
        parent = message.reply_to_message
        if parent is None:
            return None
        return await self._call(self.service.reply_prompt, PLATFORM, str(message.chat.id), str(parent.message_id))

    async def take_reply(self, bot: Bot, message: Message, prompt: ReplyPromptRecord) -> None:
        """A reply to one of our prompts, from the person it asked: a reason or a correction."""
        text = (message.text or message.caption or "").strip()
        if not text:
            return
        if prompt.purpose == "reason":
            await self._take_reason(message, prompt, text)
        else:
            await self._take_correction(bot, message, prompt, text)

    async def _take_reason(self, message: Message, prompt: ReplyPromptRecord, text: str) -> None:
        kind = reason_kind_of(text)
        event = FeedbackEvent(
            prompt.answer_id, PLATFORM, prompt.user, -1, source="button", reason=text, reason_kind=kind,
            order=prompt.act_order, channel=prompt.channel,
        )
        try:
            await self._call(self.service.record_reason, event)
        except (UnknownAnswer, AnswerNotShownHere):
            log.info("telegram reason for answer %s not recorded: unknown or not from here", prompt.answer_id)
            return
        posted = await self._request_review(
            # The kind was read from the words, so both are shown: "Wrong provision cited — “…”".
            message.get_bot(), prompt.answer_id, message.from_user, "downvote", f"{reason_label(kind)} — “{text}”"
        )
        await message.reply_text(REASON_THANKS.format(review=" and sent to a reviewer" if posted else ""),
                                 do_quote=True)

    # -- "Ask a person" ----------------------------------------------------------------------------

    async def ask_person(self, bot: Bot, query: CallbackQuery, answer_id: str) -> None:
        chat = str(query.message.chat.id) if isinstance(query.message, Message) else ""
        exchange = await self._call(self.service.exchange, answer_id)
        if exchange is None or exchange.platform != PLATFORM or exchange.channel != chat:
            await query.answer(NOT_FROM_HERE)
            return
        if not self.review_chat:
            await query.answer(NO_REVIEW_CHAT, show_alert=True)
            return
        posted = await self._request_review(bot, answer_id, query.from_user, "ask_person", exchange=exchange)
        await query.answer(NOTIFIED if posted else REVIEW_FAILED, show_alert=posted)

    # -- the review chat ---------------------------------------------------------------------------

    async def on_review_button(self, bot: Bot, query: CallbackQuery, action: str, answer_id: str) -> None:
        message = query.message
        if not isinstance(message, Message) or not self.review_chat or str(message.chat.id) != self.review_chat:
            await query.answer(REVIEW_ONLY_IN_CHAT)
            return
        reviewer = query.from_user
        if action == "f":
            review = await self._settle(answer_id, str(reviewer.id), "fine")
            if review is None:
                await query.answer(REVIEW_FAILED)
                return
            await self._mark_settled(message, review, _mention(reviewer))
            await query.answer("Marked fine.")
        elif action == "c":
            try:
                prompt = await message.reply_text(
                    CORRECTION_PROMPT.format(who=_mention(reviewer)), parse_mode=ParseMode.HTML, do_quote=True,
                    reply_markup=ForceReply(selective=True, input_field_placeholder="The correct answer"),
                )
            except TelegramError:
                await query.answer(REVIEW_FAILED)
                raise
            await self._call(self.service.note_reply_prompt, ReplyPromptRecord(
                PLATFORM, str(message.chat.id), str(prompt.message_id), "correction", answer_id, str(reviewer.id),
                review_post_id=str(message.message_id),
            ))
            await query.answer("Reply to my message with the correct answer.")
        elif action == "p":
            await self._post_correction(bot, query, answer_id)
        else:
            await query.answer("This button is no longer supported.")

    async def _take_correction(self, bot: Bot, message: Message, prompt: ReplyPromptRecord, text: str) -> None:
        answer, provision = parse_correction(text)
        if not answer:
            await message.reply_text("Please reply with the correct answer itself.", do_quote=True)
            return
        review = await self._settle(prompt.answer_id, prompt.user, "corrected", answer, provision)
        if review is None:
            await message.reply_text(REVIEW_FAILED, do_quote=True)
            return
        if prompt.review_post_id and message.from_user is not None:
            await self._edit_settled(bot, prompt.channel, prompt.review_post_id, review, _mention(message.from_user))
        keyboard = InlineKeyboardMarkup([[InlineKeyboardButton(
            "📣 Post it in the original chat", callback_data=review_callback("p", prompt.answer_id))]])
        await message.reply_text(CORRECTION_SAVED, do_quote=True, reply_markup=keyboard)

    async def _post_correction(self, bot: Bot, query: CallbackQuery, answer_id: str) -> None:
        exchange = await self._call(self.service.exchange, answer_id)
        review = exchange.review if exchange is not None else None
        if exchange is None or review is None or review.state != "corrected" or exchange.platform != PLATFORM:
            await query.answer("There is no correction to post for this answer.")
            return
        provision = f"\n<i>Rests on {_escape(review.reference_provision)}</i>" if review.reference_provision else ""
        text = f"<b>Correction from a reviewer:</b>\n{_escape(review.reference_answer)}{provision}"
        try:
            for part in pack_blocks([text], 4096):
                await bot.send_message(
                    int(exchange.channel), part, parse_mode=ParseMode.HTML,
                    reply_parameters=ReplyParameters(message_id=int(exchange.message_id), allow_sending_without_reply=True),
                )
        except (TelegramError, ValueError):
            log.warning("the correction could not be posted in chat %s", exchange.channel, exc_info=True)
            await query.answer(REVIEW_FAILED)
            return
        await self._call(self.service.note_correction_posted, answer_id)
        if isinstance(query.message, Message):
            try:
                await query.message.edit_reply_markup(reply_markup=None)
            except TelegramError:
                log.debug("the post button could not be removed", exc_info=True)
        await query.answer("Posted in the original chat.")

    # -- helpers -----------------------------------------------------------------------------------

    async def _request_review(
        self, bot: Bot, answer_id: str, requester: TelegramUser | None, kind: RequestKind, reason: str = "",
        *, exchange: Exchange | None = None,
    ) -> bool:
        if not self.review_chat:
            return False
        who = str(requester.id) if requester is not None else "?"
        exchange = await open_review(self.service, self.metrics, PLATFORM, answer_id, who, kind, exchange)
        if exchange is None:
            return False
        parts = review_post_html(exchange, requester=_mention(requester) if requester else "someone", kind=kind,
                                 reason=reason)
        try:
            for i, part in enumerate(parts):
                await bot.send_message(
                    int(self.review_chat), part, parse_mode=ParseMode.HTML,
                    reply_markup=review_keyboard(answer_id) if i == len(parts) - 1 else None,
                )
        except (TelegramError, ValueError):
            log.warning("the review post could not be sent to chat %s", self.review_chat, exc_info=True)
            self._count_error("telegram_review")
            return False
        return True

    async def _settle(
        self, answer_id: str, reviewer: str, verdict: str, reference: str = "", provision: str = ""
    ) -> Review | None:
        try:
            review = await self._call(self.service.record_review, answer_id, reviewer, verdict, reference, provision)
        except (UnknownAnswer, ValueError) as exc:
            log.info("telegram review of answer %s not saved: %s", answer_id, exc)
            return None
        if self.metrics is not None:
            self.metrics.count_review(PLATFORM, verdict)
        return review

    async def _mark_settled(self, post: Message, review: Review, reviewer: str) -> None:
        text = (post.text_html or "") + "\n\n" + settled_line(review, reviewer)
        try:
            await post.edit_text(pack_blocks([text], 4096)[0], parse_mode=ParseMode.HTML, reply_markup=None)
        except TelegramError:
            log.warning("the review post %s could not be updated", post.message_id, exc_info=True)

    async def _edit_settled(self, bot: Bot, chat: str, post_id: str, review: Review, reviewer: str) -> None:
        """The review post once corrected: its buttons removed, the correction below it (the post's own
        text is not at hand here, so the correction is added by editing just the markup and replying)."""
        try:
            await bot.edit_message_reply_markup(chat_id=int(chat), message_id=int(post_id), reply_markup=None)
            await bot.send_message(
                int(chat), settled_line(review, reviewer), parse_mode=ParseMode.HTML,
                reply_parameters=ReplyParameters(message_id=int(post_id), allow_sending_without_reply=True),
            )
        except (TelegramError, ValueError):
            log.warning("the review post %s could not be updated", post_id, exc_info=True)

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args)

    def _count_error(self, component: str) -> None:
        if self.metrics is not None:
            self.metrics.count_error(component)
