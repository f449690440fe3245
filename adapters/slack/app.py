"""The Slack bot: a slack-bolt AsyncApp whose listeners feed the ConversationService.

Every event is acknowledged at once (bolt acks Events API requests before running listeners; the
button listener calls `ack()` first), and the work happens in a tracked background task: claim the
message (a lease in the store), post a "Looking that up…" placeholder in the thread, answer in a
worker thread (the pipeline is CPU-bound and the service does blocking database I/O), `chat.update`
the placeholder with the answer, and complete the lease (adapters/delivery.py). A lease whose
process died is taken over by Slack's retry or by the recovery sweep, which finishes the reply.
When Claude has not answered within HYPA_CHAT_ANSWER_WAIT_S, the quoted answer is shown and
`chat.update` later puts Claude's in its place.

The same AsyncApp serves HTTP mode (`routes()`, mounted into bot.http_app) and Socket Mode
(`socket_mode_handler()`), so both modes run exactly the same listeners.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp
from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from adapters.delivery import MAX_CONCURRENT_ANSWERS, LeaseKeeper, claim, finish_delivery
from adapters.slack.blocks import (
    ACTION_ASK_PERSON,
    ACTION_DOWNVOTE,
    ACTION_SHARE,
    ACTION_UPVOTE,
    FAILURE_TEXT,
    FEEDBACK_ACTIONS,
    NOT_SHOWN_HERE_TEXT,
    PLACEHOLDER_TEXT,
    UNKNOWN_ANSWER_TEXT,
    SlackMessage,
    feedback_acknowledgement,
    render_failure,
    render_reply,
)
from adapters.slack.ephemeral import EphemeralReplies, command_message_id, is_command
from adapters.slack.events import (
    PLATFORM,
    BotIdentity,
    button_place,
    is_answerable_mention,
    route_message,
    slack_order,
    slack_time,
    to_incoming,
)
from adapters.slack.replies import SlackReplies
from adapters.slack.request_gate import Refusal, SlackRequestGate
from adapters.slack.review import SlackReviewDesk
from adapters.slack.review_blocks import (
    ACTION_REVIEW_CORRECT,
    ACTION_REVIEW_FINE,
    CORRECT_ANSWER_INPUT,
    REASON_KIND_INPUT,
    VIEW_CORRECTION,
    VIEW_REASON,
    read_correction,
    read_reason,
)
from adapters.slack.tasks import BackgroundTasks
from adapters.slack.text import escape_mrkdwn, rating_for_reaction, to_question
from core.conversation import (
    AnswerNotShownHere,
    ConversationService,
    Delivery,
    FeedbackEvent,
    IncomingMessage,
    Rating,
    Reply,
    UnknownAnswer,
)
from core.metrics import Metrics

if TYPE_CHECKING:
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
_FEEDBACK_ACTION_IDS = re.compile(f"^({ACTION_UPVOTE}|{ACTION_DOWNVOTE})$")
_SAVE_FAILED_TEXT = "Sorry, your rating could not be saved just now; please try again in a minute."
DEFAULT_COMMAND = "/hypa"
COMMAND_HELP = (
    "Ask me a regulatory question and only you will see the answer, with its sources, e.g. "
    "`{command} Do I need a bias audit before using an AEDT?` Use *Share in channel* under the answer to post "
    "it for everyone. To ask in a thread everyone sees, mention @hypa instead."
)
SHARE_REFUSED = "Only the person who asked can share this answer, in the channel where they asked."
T = TypeVar("T")


@dataclass(frozen=True)
class SlackConfig:
    bot_token: str  # xoxb-…
    signing_secret: str  # HTTP mode: verifies every request; unused in Socket Mode
    app_token: str = ""  # xapp-…: set = Socket Mode (the bot connects to Slack; no public URL)
    api_base_url: str = "https://slack.com/api/"
    rate_limit_retries: int = 3  # 429 + Retry-After, handled by slack_sdk
    connection_retries: int = 2  # a reset or refused connection, retried by slack_sdk
    drain_timeout_s: float = 30.0  # shutdown waits this long for answers in flight
    max_concurrent_answers: int = MAX_CONCURRENT_ANSWERS  # see adapters/delivery.py
    command: str = DEFAULT_COMMAND  # the slash command answering privately (declared in manifest.yml)
    review_channel: str = ""  # HYPA_REVIEW_CHANNEL: where 👎 reasons and "Ask a person" go; "" = off

    @property
    def socket_mode(self) -> bool:
        """Events arrive over a WebSocket the bot opens (SLACK_APP_TOKEN), not at /slack/events."""
        return bool(self.app_token)


def configure_web_client(client: AsyncWebClient, config: SlackConfig) -> AsyncWebClient:
    """Point bolt's Web API client at SLACK_API_BASE_URL and make it retry 429s (after Retry-After)
    and connection resets. (Configured in place rather than passed to AsyncApp: bolt would then
    also read SLACK_BOT_TOKEN from the environment and warn that it is unused.)"""
    client.base_url = config.api_base_url if config.api_base_url.endswith("/") else config.api_base_url + "/"
    client.timeout = 30
    client.retry_handlers = [
        AsyncConnectionErrorRetryHandler(max_retry_count=config.connection_retries),
        AsyncRateLimitErrorRetryHandler(max_retry_count=config.rate_limit_retries),
    ]
    return client


class SlackBot:
    def __init__(
        self,
        service: ConversationService,
        config: SlackConfig,
        *,
        metrics: Metrics | None = None,
    ) -> None:
        self.service = service
        self.config = config
        self.metrics = metrics
        self.tasks = BackgroundTasks()
        self._answer_slots: asyncio.Semaphore | None = None  # created on the serving event loop
        self._socket_handlers: list[AsyncSocketModeHandler] = []
        self.app = AsyncApp(
            token=config.bot_token,
            signing_secret=config.signing_secret,
            # Socket Mode requests arrive over an authenticated WebSocket and carry no signature.
            request_verification_enabled=not config.socket_mode,
            process_before_response=False,  # ack first, then run listeners
            name="hypa-slack",
            logger=logging.getLogger("slack_bolt.hypa"),
        )
        self.client = configure_web_client(self.app.client, config)
        self.replies = SlackReplies(self.client, service, metrics)
        self.ephemeral = EphemeralReplies(self.client, self.replies)  # /hypa answers
        self.review = SlackReviewDesk(self.client, service, self.replies, self.ephemeral, config.review_channel, metrics)
        self.leases = LeaseKeeper(service, PLATFORM, self._finish, metrics=metrics)
        self._register_listeners()

    # -- wiring --------------------------------------------------------------------------------

    def _register_listeners(self) -> None:
        # The middleware runs before bolt acknowledges the event (see _record_before_ack).
        self.app.event("app_mention", middleware=[self._record_before_ack])(self._on_question)
        self.app.event("message", middleware=[self._record_before_ack])(self._on_question)
        self.app.event("reaction_added")(self._on_reaction_added)
        self.app.event("reaction_removed")(self._on_reaction_removed)
        self.app.action(_FEEDBACK_ACTION_IDS)(self._on_feedback_button)
        self.app.command(self.config.command)(self._on_command)
        self.app.action(ACTION_SHARE)(self._on_share)
        # The review loop (adapters/slack/review.py): every listener acks first, the work runs after.
        self._acked_action(ACTION_ASK_PERSON, self.review.ask_person)
        self._acked_action(ACTION_REVIEW_FINE, self.review.mark_fine)
        self._acked_action(ACTION_REVIEW_CORRECT, self.review.open_correction_modal)
        self.app.view(VIEW_REASON)(self._on_reason_submitted)
        self.app.view(VIEW_CORRECTION)(self._on_correction_submitted)

    def _acked_action(self, action_id: str, work: Callable[[dict, dict], Any]) -> None:
        async def listener(ack, body: dict, action: dict) -> None:
            await ack()
            self.tasks.spawn(work(body, action), name=f"slack-{action_id}")

        self.app.action(action_id)(listener)

    def routes(self) -> list[Route]:
        """`POST /slack/events`: the Events API and interactivity (button clicks) request URL.

        Every request passes SlackRequestGate (signature first, then a readable body) before bolt
        parses it; bolt's own verification stays on behind it, and sees only requests that pass."""
        handler = AsyncSlackRequestHandler(self.app)
        gate = SlackRequestGate(self.config.signing_secret)

        async def slack_events(request: Request) -> Response:
            refusal = gate.check(await request.body(), request.headers)  # starlette keeps the body read
            if refusal is not None:
                return self._refuse(request, refusal)
            return await handler.handle(request)

        return [Route(EVENTS_PATH, slack_events, methods=["POST"])]

    def _refuse(self, request: Request, refusal: Refusal) -> Response:
        size = request.headers.get("content-length", "?")
        client = request.client.host if request.client else "?"
        log.warning("slack request refused (%s): %s bytes from %s", refusal.detail, size, client)
        if self.metrics is not None:
            self.metrics.count_rejected(EVENTS_PATH, refusal.reason)
        return JSONResponse({"error": refusal.detail}, status_code=refusal.status)

    def socket_mode_handler(self, app_token: str) -> AsyncSocketModeHandler:
        """A Socket Mode connection (SLACK_APP_TOKEN, xapp-…) dispatching to the same AsyncApp."""
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        handler = AsyncSocketModeHandler(self.app, app_token, web_client=self.client)
        self._socket_handlers.append(handler)  # disconnected first on shutdown (see lifespan)
        return handler

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Any = None):
        """Starlette lifespan: one pooled HTTP session for Web API calls while serving, and the lease
        keeper (renewals, and the recovery pass that finishes replies a crashed process owed). On
        shutdown, stop taking Socket Mode events (unacknowledged ones go to another connection) and
        leases, let answers in flight finish (up to drain_timeout_s), then close the session. Answers
        still unfinished then are resumed by the next process (or another replica) when their lease lapses."""
        self.client.session = aiohttp.ClientSession()  # else slack_sdk opens one per API call
        self.leases.start()
        try:
            yield
            for handler in self._socket_handlers:  # else events keep arriving while we drain, and any
                await handler.close_async()  # acknowledged after the drain would never be answered
            self.leases.stop_recovering()
            if not await self.tasks.drain(self.config.drain_timeout_s):
                log.warning("shutting down with %d Slack answers still in flight", self.tasks.pending)
            await self.leases.close(self.config.drain_timeout_s)
        finally:
            # Detached before closing: answers still running after a drain timeout then open their own
            # sessions instead of failing on a closed one.
            session, self.client.session = self.client.session, None
            await session.close()

    # -- listeners (run after the ack; they only decide and start background work) --------------

    async def _record_before_ack(self, body: dict, event: dict, context, next) -> None:  # noqa: A002 - bolt's name
        """Listener middleware, run before bolt sends Slack its 200: a message to be answered is recorded
        with its lease now, so once Slack has the acknowledgement (and will not retry), a crash can no
        longer lose it: the recovery sweep finishes it. What to do next is left in the context."""
        context[_CLAIMED] = await self._claim_event(body, event, _identity(context))
        await next()

    async def _on_question(self, body: dict, event: dict, context) -> None:
        claimed: _Claimed = context.get(_CLAIMED) or _Claimed()
        if claimed.delivery is not None:
            self.tasks.spawn(self._finish(claimed.delivery), name=_task_name(body))
        elif claimed.failed:
            self.tasks.spawn(self._apologise_in_thread(event), name=_task_name(body))

    async def _on_reaction_added(self, body: dict, event: dict, context) -> None:
        self._start_reaction(body, event, _identity(context), added=True)

    async def _on_reaction_removed(self, body: dict, event: dict, context) -> None:
        self._start_reaction(body, event, _identity(context), added=False)

    async def _on_feedback_button(self, ack, body: dict, action: dict) -> None:
        await ack()
        if action.get("action_id") == ACTION_DOWNVOTE:
            # The reason modal first: its trigger_id is good for 3 seconds only.
            channel, thread = button_place(body)
            if channel:
                self.tasks.spawn(self.review.open_reason_modal(body, action, channel, thread), name="slack-reason")
        self.tasks.spawn(self._record_button(body, action), name="slack-button")

    async def _on_reason_submitted(self, ack, body: dict, view: dict) -> None:
        kind, text = read_reason(view)
        if not kind and not text:  # Slack shows this under the choice and keeps the modal open
            await ack(response_action="errors", errors={REASON_KIND_INPUT[0]: "Choose what was wrong."})
            return
        await ack()
        self.tasks.spawn(self.review.submit_reason(body, view), name="slack-reason-submit")

    async def _on_correction_submitted(self, ack, body: dict, view: dict) -> None:
        answer, _, _ = read_correction(view)
        if not answer:
            await ack(response_action="errors", errors={CORRECT_ANSWER_INPUT[0]: "Write the correct answer."})
            return
        await ack()
        self.tasks.spawn(self.review.submit_correction(body, view), name="slack-correction-submit")

    # -- /hypa: a private answer ------------------------------------------------------------------

    async def _on_command(self, ack, body: dict, command: dict) -> None:
        """`/hypa <question>`: recorded with its lease, then acknowledged (an ephemeral "Looking that
        up…", within Slack's 3 s) and answered to the asker only through the command's response_url."""
        text = command.get("text")
        question = to_question(text if isinstance(text, str) else "")
        if not question:
            await ack(text=COMMAND_HELP.format(command=self.config.command), response_type="ephemeral")
            return
        team = command.get("team_id") or body.get("team_id") or ""
        incoming = IncomingMessage(
            platform=PLATFORM, workspace=team, channel=command.get("channel_id", ""),
            thread=command_message_id(command.get("trigger_id", "")), user=command.get("user_id", ""),
            text=question, message_id=command_message_id(command.get("trigger_id", "")),
        )
        if not (incoming.channel and incoming.user and command.get("trigger_id")):
            await ack(text=FAILURE_TEXT, response_type="ephemeral")
            return
        try:
            delivery = await claim(self.service, incoming)
        except Exception:
            log.exception("recording slack command %s failed", incoming.message_id)
            self._count_error("slack_claim")
            await ack(text=FAILURE_TEXT, response_type="ephemeral")
            return
        if command.get("response_url"):
            self.ephemeral.remember(incoming.message_id, command["response_url"])
        await ack(text=PLACEHOLDER_TEXT, response_type="ephemeral")
        if delivery is not None:
            self.tasks.spawn(self._finish(delivery), name=f"slack-command-{incoming.message_id}")

    async def _on_share(self, ack, body: dict, action: dict) -> None:
        await ack()
        self.tasks.spawn(self._share(body, action), name="slack-share")

    async def _share(self, body: dict, action: dict) -> None:
        """"Share in channel" on a private answer: the same answer posted for everyone in that channel
        (linked to the answer, so its buttons and reactions rate it), and the private copy removed."""
        user = (body.get("user") or {}).get("id", "")
        channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id", "")
        exchange = await self.review.exchange(action.get("value", ""))
        if exchange is None or exchange.platform != PLATFORM or exchange.channel != channel or exchange.asker != user:
            log.info("slack share of answer %s by %s in %s refused", action.get("value"), user, channel)
            if body.get("response_url"):
                await self.ephemeral.respond(body["response_url"], render_failure() if exchange is None else
                                             _note(SHARE_REFUSED))
            return
        reply = Reply(answer_id=exchange.answer_id, text=exchange.answer, citations=exchange.citations,
                      refused=exchange.refused, note=exchange.note)
        heading = f"<@{user}> asked: _{escape_mrkdwn(' '.join(exchange.question.split())[:300])}_"
        message = render_reply(reply, heading=heading)
        posted = await self.replies.api(
            "chat.postMessage", self.client.chat_postMessage(channel=channel, text=message.text, blocks=message.blocks)
        )
        if posted is None:
            if body.get("response_url"):
                await self.ephemeral.respond(body["response_url"], _note(
                    "I could not post in this channel (am I a member of it?); the answer stays private."))
            return
        await self.replies.link(exchange.answer_id, channel, posted.get("ts", ""))
        if body.get("response_url"):
            await self.ephemeral.respond(body["response_url"], None, delete=True)

    # -- answering -------------------------------------------------------------------------------

    async def _claim_event(self, body: dict, event: dict, bot: BotIdentity) -> _Claimed:
        """Whether the event is a question for us and, if so, its lease (nothing for a duplicate)."""
        if event.get("type") == "app_mention":
            if not is_answerable_mention(event, bot):
                return _Claimed()
            check_thread = False
        else:
            route = route_message(event, bot)
            if route.action == "ignore":
                log.debug("slack message %s ignored: %s", body.get("event_id"), route.reason)
                return _Claimed()
            check_thread = route.action == "answer_if_bot_thread"
        team = body.get("team_id") or event.get("team") or ""
        if check_thread and not await self._is_bot_thread(team, event["channel"], event["thread_ts"]):
            return _Claimed()
        try:
            incoming = to_incoming(event, team, bot)
        except Exception:  # a malformed event (e.g. a `text` that is not a string): say so, never silence
            log.exception("slack event %s could not be read", body.get("event_id"))
            self._count_error("slack_answer")
            return _Claimed(failed=True)
        # Retries of one delivery, and the app_mention and message events of one message, all name
        # the same message: only the holder of its lease replies (the service logs and counts the rest).
        # (The service logs the question, only when HYPA_LOG_MESSAGE_TEXT is on.)
        try:
            return _Claimed(await claim(self.service, incoming))
        except Exception:  # the message cannot be recorded (database down): the person hears about it
            log.exception("recording slack message %s failed", incoming.message_id)
            self._count_error("slack_claim")
            return _Claimed(failed=True)

    async def _finish(self, delivery: Delivery) -> None:
        """Reply to a claimed message (a new one, a retry's takeover, or one the recovery sweep took over)."""
        if self._answer_slots is None:
            self._answer_slots = asyncio.Semaphore(self.config.max_concurrent_answers)
        surface = self.ephemeral if is_command(delivery.message) else self.replies
        await finish_delivery(
            self.service, surface, delivery, self._answer_slots, platform=PLATFORM, metrics=self.metrics,
            # Claude's answer arriving after the quoted one: shown by chat.update in a tracked task of its
            # own (outside the answer slot; the lease is complete by then), which a shutdown drains.
            later=lambda followup: self.tasks.spawn(followup, name="slack-followup"),
        )

    async def _apologise_in_thread(self, event: dict) -> None:
        channel, ts = event.get("channel"), event.get("ts")
        if isinstance(channel, str) and isinstance(ts, str) and channel and ts:
            thread = event.get("thread_ts") if isinstance(event.get("thread_ts"), str) else None
            await self.replies.post(channel, thread or ts, render_failure())

    # -- feedback ----------------------------------------------------------------------------------

    def _start_reaction(self, body: dict, event: dict, bot: BotIdentity, *, added: bool) -> None:
        rating = rating_for_reaction(event.get("reaction", ""))
        item = event.get("item") or {}
        if rating is None or item.get("type") != "message" or not event.get("user"):
            return
        if event["user"] == bot.user_id:
            return
        self.tasks.spawn(
            self._record_reaction(body, event, rating if added else 0, withdraws=None if added else rating),
            name=_task_name(body),
        )

    async def _record_reaction(self, body: dict, event: dict, rating: Rating, *, withdraws: Rating | None) -> None:
        # A retried event is the same act (same event_ts): the store applies it once.
        item = event["item"]
        answer_id = None
        try:
            answer_id = await self._call(
                self.service.answer_for_platform_message, PLATFORM, item.get("channel", ""), item.get("ts", "")
            )
            if answer_id is None:
                return  # a reaction on some other message
            feedback = FeedbackEvent(
                answer_id, PLATFORM, event["user"], rating, source="reaction", withdraws=withdraws,
                at=slack_time(event.get("event_ts")),
                # Slack's clock orders reactions and clicks alike, however they are processed.
                order=slack_order(event.get("event_ts")), channel=item.get("channel", ""),
            )
            await self._call(self.service.record_feedback, feedback)
        except (UnknownAnswer, AnswerNotShownHere):
            log.info("reaction on slack message %s: answer %s is gone or not from here", item.get("ts"), answer_id)
        except Exception:  # a lost rating is logged and counted, never a crash
            log.exception("recording a slack reaction failed")
            self._count_error("slack_feedback")

    async def _record_button(self, body: dict, action: dict) -> None:
        user = (body.get("user") or {}).get("id", "")
        channel, thread = button_place(body)
        if not channel:  # a button outside a channel's messages (App Home, a modal): no answer is shown there
            log.info("slack feedback button without a channel from %s ignored", user)
            return
        feedback = FeedbackEvent(
            action.get("value", ""), PLATFORM, user, FEEDBACK_ACTIONS[action["action_id"]], source="button",
            at=slack_time(action.get("action_ts")), order=slack_order(action.get("action_ts")),
            channel=channel,  # the channel of the message the button is on: only its answers count
        )
        try:
            outcome = await self._call(self.service.record_feedback, feedback)
            text = feedback_acknowledgement(outcome.rating or feedback.rating, outcome.changed)
        except UnknownAnswer:
            text = UNKNOWN_ANSWER_TEXT
        except AnswerNotShownHere:
            log.info("slack feedback from channel %s for answer %s posted elsewhere: not saved",
                     channel, feedback.answer_id)
            text = NOT_SHOWN_HERE_TEXT
        except Exception:  # the clicker is told below
            log.exception("recording a slack button click failed")
            self._count_error("slack_feedback")
            text = _SAVE_FAILED_TEXT
        if (body.get("container") or {}).get("is_ephemeral") and body.get("response_url"):
            # A button on a private (/hypa) answer: the note goes where that answer is, to the clicker only.
            await self.ephemeral.respond(body["response_url"], _note(text))
        elif channel and user:
            kwargs: dict[str, Any] = {"channel": channel, "user": user, "text": text}
            if thread:
                kwargs["thread_ts"] = thread
            await self.replies.api("chat.postEphemeral", self.client.chat_postEphemeral(**kwargs))

    # -- helpers -----------------------------------------------------------------------------------

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking service call in a worker thread, keeping the event loop free for acks."""
        return await asyncio.to_thread(fn, *args)

    async def _is_bot_thread(self, team: str, channel: str, thread: str) -> bool:
        """Whether a mention-less thread reply is ours to answer. If the store cannot say, the reply is
        left alone: answering (or apologising) in a stranger's thread would be worse."""
        try:
            return await self._call(self.service.is_bot_thread, PLATFORM, team, channel, thread)
        except Exception:
            log.exception("checking whether slack thread %s/%s is the bot's failed", channel, thread)
            self._count_error("slack_thread")
            return False

    def _count_error(self, component: str) -> None:
        if self.metrics is not None:
            self.metrics.count_error(component)


_CLAIMED = "hypa_claimed"  # bolt context key: what _record_before_ack decided


@dataclass(frozen=True)
class _Claimed:
    delivery: Delivery | None = None  # the lease on answering the message
    failed: bool = False  # the event could not be read or recorded: the thread gets an apology


def _note(text: str) -> SlackMessage:
    """A plain ephemeral note (no blocks)."""
    return SlackMessage(text=text, blocks=[])


def _identity(context) -> BotIdentity:
    return BotIdentity(user_id=context.bot_user_id or "", bot_id=context.bot_id or "")


def _task_name(body: dict) -> str:
    return f"slack-{body.get('event_id', 'event')}"
