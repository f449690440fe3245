"""The review loop in Slack: a 👎's reason (a modal), "Ask a person", and the review channel
(HYPA_REVIEW_CHANNEL) where a reviewer marks an answer fine or writes the correct one.

Every listener that lands here has already acknowledged Slack (bolt: `ack()` first); this is the work
after it. A modal is opened with the click's `trigger_id`, which Slack honours for 3 seconds, so
`views.open` is the first thing done. Store calls are blocking and run in worker threads.

Who may do what: a reason or an "Ask a person" press counts only from the channel where the answer
was posted (like a rating); "Write the correct answer" and "Answer is fine" only from the review
channel (whoever can post there reviews).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from slack_sdk.web.async_client import AsyncWebClient

from adapters.review_requests import open_review
from adapters.slack.blocks import SlackMessage
from adapters.slack.events import PLATFORM, button_place, slack_order
from adapters.slack.review_blocks import (
    CorrectionForm,
    ReasonForm,
    correction_message,
    correction_modal,
    read_correction,
    read_correction_form,
    read_reason,
    read_reason_form,
    reason_modal,
    review_post,
    settled_post,
)
from core.conversation import AnswerNotShownHere, ConversationService, FeedbackEvent, UnknownAnswer
from core.review import Exchange, RequestKind, Review, described_reason

if TYPE_CHECKING:
    from adapters.slack.ephemeral import EphemeralReplies
    from adapters.slack.replies import SlackReplies
    from core.metrics import Metrics

log = logging.getLogger(__name__)
T = TypeVar("T")

REASON_THANKS = "Thanks — your reason is recorded{review}."
NOTIFIED = "I've asked a person to look at this answer; a reviewer will follow up."
NO_REVIEW_CHANNEL = (
    "No review channel is set up for this bot, so I could not notify anyone. "
    "Please contact your compliance team directly."
)
NOT_FROM_HERE = "That button does not belong to an answer in this channel, so nothing was sent."
REVIEW_ONLY_IN_CHANNEL = "Reviews are settled in the review channel only; nothing was saved."
REVIEW_FAILED = "Sorry, the review could not be saved just now; please try again in a minute."


class SlackReviewDesk:
    def __init__(
        self,
        client: AsyncWebClient,
        service: ConversationService,
        replies: SlackReplies,
        ephemeral: EphemeralReplies,
        review_channel: str = "",
        metrics: Metrics | None = None,
    ) -> None:
        self.client = client
        self.service = service
        self.replies = replies
        self.ephemeral = ephemeral
        self.review_channel = review_channel
        self.metrics = metrics

    # -- a 👎's reason -----------------------------------------------------------------------------

    async def open_reason_modal(self, body: dict, action: dict, channel: str, thread: str) -> None:
        """Right after a 👎 click: the modal asking what was wrong (the trigger expires in 3 s)."""
        order = slack_order(action.get("action_ts"))
        trigger = body.get("trigger_id")
        if not trigger or order is None:
            return
        form = ReasonForm(answer_id=action.get("value", ""), channel=channel, order=order, thread=thread)
        await self.replies.api("views.open", self.client.views_open(trigger_id=trigger, view=reason_modal(form)))

    async def submit_reason(self, body: dict, view: dict) -> None:
        """The reason modal was submitted: the reason joins the 👎, and the exchange goes to review."""
        user = (body.get("user") or {}).get("id", "")
        form = read_reason_form(view)
        if form is None or not user:
            log.warning("a slack reason submission without its answer was ignored")
            return
        kind, text = read_reason(view)
        event = FeedbackEvent(
            form.answer_id, PLATFORM, user, -1, source="button", reason=text, reason_kind=kind,
            order=form.order, channel=form.channel,
        )
        try:
            await self._call(self.service.record_reason, event)
        except (UnknownAnswer, AnswerNotShownHere):
            log.info("slack reason for answer %s from %s not recorded: unknown or not from there", form.answer_id, user)
            return
        except Exception:
            log.exception("recording a slack 👎 reason failed")
            self._count_error("slack_feedback")
            await self._tell(form.channel, user, form.thread, "Sorry, your reason could not be saved just now.")
            return
        posted = await self._request_review(form.answer_id, user, "downvote", described_reason(kind, text))
        await self._tell(form.channel, user, form.thread,
                         REASON_THANKS.format(review=" and sent to a reviewer" if posted else ""))

    # -- "Ask a person" ----------------------------------------------------------------------------

    async def ask_person(self, body: dict, action: dict) -> None:
        user = (body.get("user") or {}).get("id", "")
        channel, thread = button_place(body)
        answer_id = action.get("value", "")
        exchange = await self.exchange(answer_id)
        if exchange is None or exchange.platform != PLATFORM or exchange.channel != channel:
            log.info("slack 'ask a person' for answer %s from channel %s refused", answer_id, channel)
            await self._tell(channel, user, thread, NOT_FROM_HERE, body=body)
            return
        if not self.review_channel:
            await self._tell(channel, user, thread, NO_REVIEW_CHANNEL, body=body)
            return
        posted = await self._request_review(answer_id, user, "ask_person", exchange=exchange)
        await self._tell(channel, user, thread, NOTIFIED if posted else REVIEW_FAILED, body=body)

    # -- the review channel ------------------------------------------------------------------------

    async def open_correction_modal(self, body: dict, action: dict) -> None:
        channel, _ = button_place(body)
        trigger = body.get("trigger_id")
        message_ts = (body.get("message") or {}).get("ts") or (body.get("container") or {}).get("message_ts", "")
        if not self._in_review_channel(channel):
            await self._tell(channel, (body.get("user") or {}).get("id", ""), "", REVIEW_ONLY_IN_CHANNEL, body=body)
            return
        if not trigger:
            return
        form = CorrectionForm(answer_id=action.get("value", ""), channel=channel, message_ts=message_ts)
        # The modal first (the trigger expires in 3 s); the question in it is a nicety fetched meanwhile.
        exchange = await self.exchange(form.answer_id)
        await self.replies.api(
            "views.open", self.client.views_open(trigger_id=trigger, view=correction_modal(form, exchange))
        )

    async def mark_fine(self, body: dict, action: dict) -> None:
        channel, _ = button_place(body)
        reviewer = (body.get("user") or {}).get("id", "")
        if not self._in_review_channel(channel):
            await self._tell(channel, reviewer, "", REVIEW_ONLY_IN_CHANNEL, body=body)
            return
        review = await self._settle(action.get("value", ""), reviewer, "fine")
        message = body.get("message") or {}
        if review is not None:
            await self._update_post(channel, message.get("ts", ""), message.get("blocks") or [], review)
        else:
            await self._tell(channel, reviewer, "", REVIEW_FAILED, body=body)

    async def submit_correction(self, body: dict, view: dict) -> None:
        reviewer = (body.get("user") or {}).get("id", "")
        form = read_correction_form(view)
        if form is None or not self._in_review_channel(form.channel):
            log.warning("a slack correction submission outside the review channel was ignored")
            return
        answer, provision, post_in_thread = read_correction(view)
        review = await self._settle(form.answer_id, reviewer, "corrected", answer, provision)
        if review is None:
            await self._tell(form.channel, reviewer, "", REVIEW_FAILED)
            return
        exchange = await self.exchange(form.answer_id)
        if post_in_thread and exchange is not None and await self._post_correction(exchange, review):
            review = await self._call(self._correction_posted, form.answer_id) or review
        if form.message_ts:
            history = await self.replies.api(
                "conversations.history",
                self.client.conversations_history(channel=form.channel, latest=form.message_ts, inclusive=True, limit=1),
            )
            found = (history or {}).get("messages") or []
            blocks = found[0].get("blocks") if found and found[0].get("ts") == form.message_ts else None
            await self._update_post(form.channel, form.message_ts, blocks or [], review)

    # -- helpers -----------------------------------------------------------------------------------

    async def _request_review(
        self, answer_id: str, requester: str, kind: RequestKind, reason: str = "", *, exchange: Exchange | None = None
    ) -> bool:
        """Open (or count) the review and post it in the review channel; True once posted."""
        if not self.review_channel:
            return False
        exchange = await open_review(self.service, self.metrics, PLATFORM, answer_id, requester, kind, exchange)
        if exchange is None:
            return False
        link = await self._permalink(exchange)
        post = review_post(exchange, requester=requester, kind=kind, reason=reason, thread_link=link)
        return await self.replies.api(
            "chat.postMessage",
            self.client.chat_postMessage(channel=self.review_channel, text=post.text, blocks=post.blocks,
                                         unfurl_links=False),
        ) is not None

    async def _permalink(self, exchange: Exchange) -> str | None:
        if exchange.thread.startswith("cmd:"):
            return None  # a private answer has no thread to open
        found = await self.replies.api(
            "chat.getPermalink", self.client.chat_getPermalink(channel=exchange.channel, message_ts=exchange.thread)
        )
        return None if found is None else found.get("permalink")

    async def _settle(
        self, answer_id: str, reviewer: str, verdict: str, reference: str = "", provision: str = ""
    ) -> Review | None:
        try:
            review = await self._call(self.service.record_review, answer_id, reviewer, verdict, reference, provision)
        except (UnknownAnswer, ValueError) as exc:
            log.info("slack review of answer %s not saved: %s", answer_id, exc)
            return None
        except Exception:
            log.exception("saving the review of answer %s failed", answer_id)
            self._count_error("slack_review")
            return None
        if self.metrics is not None:
            self.metrics.count_review(PLATFORM, verdict)
        return review

    def _correction_posted(self, answer_id: str) -> Review | None:
        self.service.note_correction_posted(answer_id)
        exchange = self.service.exchange(answer_id)
        return None if exchange is None else exchange.review

    async def _post_correction(self, exchange: Exchange, review: Review) -> bool:
        message = correction_message(review)
        if exchange.platform != PLATFORM:
            return False  # a Telegram exchange reviewed from Slack: its chat is not ours to post in
        if exchange.thread.startswith("cmd:"):  # a private answer: the correction is private too
            sent = await self.replies.api(
                "chat.postEphemeral",
                self.client.chat_postEphemeral(channel=exchange.channel, user=exchange.asker, text=message.text,
                                               blocks=message.blocks),
            )
            return sent is not None
        return await self.replies.post(exchange.channel, exchange.thread, message) is not None

    async def _update_post(self, channel: str, ts: str, blocks: list[dict], review: Review) -> None:
        if not ts:
            return
        updated = settled_post(blocks, review)
        text = "Review settled" if not blocks else "Review: " + ("fine" if review.state == "fine" else "corrected")
        await self.replies.api(
            "chat.update", self.client.chat_update(channel=channel, ts=ts, text=text, blocks=updated)
        )

    async def _tell(self, channel: str, user: str, thread: str, text: str, *, body: dict | None = None) -> None:
        """An ephemeral note to one person: through the interaction's response_url when the button was on
        a private message (it cannot be threaded), else chat.postEphemeral (in the thread)."""
        if not (channel and user):
            return
        container = (body or {}).get("container") or {}
        if container.get("is_ephemeral") and body and body.get("response_url"):
            await self.ephemeral.respond(body["response_url"], SlackMessage(text=text, blocks=[]))
            return
        kwargs: dict[str, Any] = {"channel": channel, "user": user, "text": text}
        if thread:
            kwargs["thread_ts"] = thread
        await self.replies.api("chat.postEphemeral", self.client.chat_postEphemeral(**kwargs))

    def _in_review_channel(self, channel: str) -> bool:
        return bool(self.review_channel) and channel == self.review_channel

    async def exchange(self, answer_id: str) -> Exchange | None:
        try:
            return await self._call(self.service.exchange, answer_id)
        except Exception:
            log.exception("looking up answer %s failed", answer_id)
            self._count_error("slack_review")
            return None

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args)

    def _count_error(self, component: str) -> None:
        if self.metrics is not None:
            self.metrics.count_error(component)
