"""`StoredConversationService`: the `ConversationService` every chat adapter calls.

claim(): record the message and take the lease on replying to it (a duplicate delivery gets None) ->
answer(): the thread's history from the store -> the answer pipeline -> store the answer with how it
was made -> Reply -> the adapter shows it -> complete(). The leases this process holds are renewed
(renew_leases) until completed; those of a process that died lapse and are taken over (reclaim).
A failure inside the pipeline becomes a stored, counted, clearly worded refusal: adapters never see
an exception for a question, and users never get silence.

A person in chat waits at most `answer_wait_s` (HYPA_CHAT_ANSWER_WAIT_S) from when the message arrived:
the pipeline runs inside an answer window (core/llm/answer_window.py). When Claude has not answered by
then, the reply is the extractive, cited answer, and `Reply.followup` resolves to Claude's answer once
it arrives (stored under the same answer id, so ratings and the thread's history follow it); the
adapter shows it in place of the first (adapters/delivery.py). The lease completes once the quoted
answer is shown, not when Claude's arrives: the person has a complete, cited answer by then, and no
later process could resume Claude's call anyway.
"""
from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
import unicodedata
import uuid
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import asdict, replace

from core.answer_watch import AnswerWatch
from core.conversation import Delivery, FeedbackEvent, FeedbackOutcome, IncomingMessage, Reply
from core.conversation_store import (
    MAX_CLAIM_ATTEMPTS,
    AnswerRecord,
    ConversationStore,
    MessageClaim,
    Outcome,
    StoredAnswer,
)
from core.llm.answer_window import answer_window
from core.metrics import Metrics
from core.pipeline import INVALID_QUESTION, AnswerPipeline
from core.review import Exchange, ReplyPromptRecord, RequestKind, Review, Verdict
from core.types import PipelineResult

log = logging.getLogger(__name__)

# C0/C1 control characters other than tab and newline, plus lone surrogates (undecodable input):
# they break terminals, logs and PostgreSQL text columns and mean nothing in a question.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
IN_PROGRESS_NOTE = "already being answered"


def clean_text(text: str) -> str:
    """The message without control characters, Unicode-normalized (NFC), whitespace-trimmed."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return unicodedata.normalize("NFC", _CONTROL.sub(" ", text)).strip()


class StoredConversationService:
    """Implements core.conversation.ConversationService over an AnswerPipeline and a ConversationStore."""

    def __init__(
        self,
        pipeline: AnswerPipeline,
        store: ConversationStore,
        *,
        history_turns: int = 6,
        metrics: Metrics | None = None,
        collection: str | None = None,
        workspace_collections: Mapping[str, str] | None = None,
        log_message_text: bool = False,
        watch: AnswerWatch | None = None,
        answer_wait_s: float | None = None,
        holder: str | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.store = store
        self.history_turns = history_turns
        self.metrics = metrics
        self.collection = collection
        # Slack team id, Slack channel id or Telegram chat id -> its own collection (with Weaviate
        # multi-tenancy, its own tenant); those not listed use `collection`.
        self.workspace_collections = dict(workspace_collections or {})
        self.log_message_text = log_message_text
        self.watch = watch or AnswerWatch()  # answers in progress: /readyz sees a stuck pipeline
        # None: no window (the pipeline waits for the LLM up to the client's own budget).
        self.answer_wait_s = answer_wait_s
        # This worker's name on the leases it holds: new for every process, so a restarted bot never
        # mistakes the leases of the process that died for its own.
        self.holder = holder or uuid.uuid4().hex
        self._held: dict[int, Delivery] = {}  # message pk -> lease held (renewed until completed)
        self._held_lock = threading.Lock()

    @property
    def lease_s(self) -> float:
        return self.store.lease.total_seconds()

    def collection_for(self, message: IncomingMessage) -> str:
        """The message's workspace (Slack team) or channel (Slack channel, Telegram chat) may have its
        own collection; otherwise the default one."""
        listed = self.workspace_collections
        return listed.get(message.workspace) or listed.get(message.channel) or self.collection or self.pipeline.default_collection

    # --- messages ------------------------------------------------------------------------------

    def claim(self, message: IncomingMessage) -> Delivery | None:
        text = clean_text(message.text)
        claim = self.store.claim_message(message, text, holder=self.holder)
        if not claim.owner:
            if self.metrics is not None:
                self.metrics.count_duplicate(message.platform)
            log.info(
                "%s message %s/%s %s; delivery dropped", message.platform, message.channel, message.message_id,
                "already answered" if claim.delivered else "is being answered by a live worker",
            )
            return None
        if claim.attempt > 1:
            self._count_takeover(message.platform)
            log.warning(
                "%s message %s/%s taken over (attempt %d): the worker answering it stopped renewing its lease",
                message.platform, message.channel, message.message_id, claim.attempt,
            )
        return self._hold(_delivery(message, claim))

    def answer(self, delivery: Delivery) -> Reply:
        stored = self.store.answer_for_message(delivery.message_pk)
        if stored is not None:  # an earlier attempt answered; its reply was not shown yet
            return _reply(stored)
        message = delivery.message
        text = clean_text(message.text)
        claim = MessageClaim(delivery.message_pk, delivery.thread_pk, owner=True, attempt=delivery.attempt)
        history = self.store.thread_history(claim.thread_pk, self.history_turns, before_message_pk=claim.message_pk)
        collection = self.collection_for(message)
        started = time.perf_counter()
        result = None
        late = None  # Claude's answer still to come (the answer window closed first)
        if delivery.attempt >= MAX_CLAIM_ATTEMPTS:
            # Every earlier attempt died while answering: this question may be what kills the process.
            record = self._record_given_up(text, delivery.attempt - 1, len(history) // 2, collection)
        else:
            try:
                with self.watch.answering(), self._window(message) as window:
                    result = self.pipeline.answer(text, history, collection=collection)
                late = window.late if window is not None else None
                record = self._record_from_result(result, len(history) // 2, collection)
            except Exception as exc:
                log.exception("answering %s message %s failed", message.platform, message.message_id)
                record = self._record_from_error(text, exc, len(history) // 2, started, collection)
                result = None
        stored, created = self.store.store_answer(claim, record)
        if not created:  # another worker answered this message while we did: the same reply counts
            return _reply(stored)
        self._observe(message, stored, result, given_up=delivery.attempt >= MAX_CLAIM_ATTEMPTS)
        log.info(
            "answered %s/%s message %s: answer %s outcome=%s latency_ms=%.0f%s%s",
            message.platform, message.channel, message.message_id, stored.id, record.outcome,
            record.latency_ms, " (Claude's answer still to come)" if late is not None else "",
            f" question={text!r}" if self.log_message_text else "",
        )
        followup = None
        if late is not None and result is not None:
            followup = self._replace_when_claude_answers(message, stored, result, late, started)
        return _reply(stored, followup=followup)

    def _window(self, message: IncomingMessage):  # -> context manager yielding AnswerWindow | None
        if self.answer_wait_s is None:
            return contextlib.nullcontext(None)
        return answer_window(self.answer_wait_s, started=message.received_at)

    def _replace_when_claude_answers(
        self, message: IncomingMessage, stored: StoredAnswer, result: PipelineResult, late: Future, started: float
    ) -> Future:
        """A Future of the Reply that replaces `stored` once `late` (the generator's call, which never
        raises) has the final Answer: stored under the same id first, then handed to the adapter."""
        followup: Future = Future()

        def finish(done: Future) -> None:
            try:
                final = replace(result, answer=done.result())
                record = replace(
                    self._record_from_result(final, stored.record.history_turns, stored.record.collection),
                    latency_ms=(time.perf_counter() - started) * 1000.0,
                )
                updated = self.store.replace_answer(stored.id, record)
                if self.metrics is not None:
                    self.metrics.count_llm_tokens(final.answer)
                log.info(
                    "%s message %s: answer %s replaced by %s's after %.0f ms", message.platform,
                    message.message_id, stored.id, record.model, record.latency_ms,
                )
                followup.set_result(_reply(updated))
            except Exception as exc:  # the quoted answer stays shown; say why it was not replaced
                log.exception("storing the late answer to %s message %s failed", message.platform, message.message_id)
                followup.set_exception(exc)

        late.add_done_callback(finish)
        return followup

    def note_placeholder(self, delivery: Delivery, placeholder_id: str) -> str:
        return self.store.set_placeholder(delivery.message_pk, placeholder_id)

    def complete(self, delivery: Delivery) -> None:
        try:
            self.store.mark_delivered(delivery.message_pk)
        finally:
            self.release(delivery)

    def release(self, delivery: Delivery) -> None:
        with self._held_lock:
            self._held.pop(delivery.message_pk, None)

    def renew_leases(self) -> int:
        with self._held_lock:
            held = list(self._held)
        return self.store.renew_claims(self.holder, held)

    def reclaim(self, platform: str, limit: int = 20) -> list[Delivery]:
        with self._held_lock:
            held = list(self._held)
        deliveries = []
        for owed in self.store.reclaim_messages(platform, self.holder, limit=limit, exclude=held):
            message = IncomingMessage(
                platform=owed.platform, workspace=owed.workspace, channel=owed.channel, thread=owed.thread,
                user=owed.user, text=owed.text, message_id=owed.message_id, sent_at=owed.sent_at,
            )
            self._count_takeover(owed.platform)
            log.warning(
                "%s message %s/%s taken over by the recovery sweep (attempt %d): its reply was never shown",
                owed.platform, owed.channel, owed.message_id, owed.claim.attempt,
            )
            deliveries.append(self._hold(_delivery(message, owed.claim)))
        return deliveries

    def handle(self, message: IncomingMessage) -> Reply:
        text = clean_text(message.text)
        claim = self.store.claim_message(message, text, holder=self.holder)
        if not claim.owner:
            return self._duplicate(message, claim.message_pk)
        delivery = self._hold(_delivery(message, claim))
        try:
            reply = self.answer(delivery)
        except BaseException:
            self.release(delivery)
            raise
        self.complete(delivery)  # the caller shows it at once
        return reply

    def _count_takeover(self, platform: str) -> None:
        if self.metrics is not None:
            self.metrics.count_takeover(platform)

    def _hold(self, delivery: Delivery) -> Delivery:
        with self._held_lock:
            self._held[delivery.message_pk] = delivery
        return delivery

    def _duplicate(self, message: IncomingMessage, message_pk: int) -> Reply:
        if self.metrics is not None:
            self.metrics.count_duplicate(message.platform)
        stored = self.store.answer_for_message(message_pk)
        if stored is None:  # the first delivery is still being answered (by this or another worker)
            return Reply(answer_id="", text="", citations=[], refused=False, note=IN_PROGRESS_NOTE, duplicate=True)
        return _reply(stored, duplicate=True)

    def _record_from_result(self, result: PipelineResult, history_turns: int, collection: str) -> AnswerRecord:
        answer = result.answer
        outcome: Outcome = "refused" if answer.refused else "answered"
        if answer.refused and answer.note == INVALID_QUESTION:
            outcome = "invalid"
        return AnswerRecord(
            question=result.question,
            standalone_question=result.queries[0] if result.queries else result.question,
            text=answer.text,
            refused=answer.refused,
            outcome=outcome,
            collection=collection,
            history_turns=history_turns,
            complexity=result.complexity,
            params=_params_dict(result),
            chunk_ids=[sc.chunk.id for sc in result.contexts],
            citations=list(answer.citations),
            note=answer.note,
            model=answer.model,
            tokens_in=answer.usage.input_tokens,
            tokens_out=answer.usage.output_tokens,
            context_tokens=answer.usage.context_tokens,
            latency_ms=float(result.timings_ms.get("total", 0.0)),
        )

    def _record_given_up(self, text: str, attempts: int, history_turns: int, collection: str) -> AnswerRecord:
        return AnswerRecord(
            question=text,
            standalone_question=text,
            text=(
                f"I could not answer that: answering it was interrupted {attempts} times. "
                "Please try again, perhaps in other words."
            ),
            refused=True,
            outcome="error",
            collection=collection,
            history_turns=history_turns,
            note=f"error: gave up after {attempts} interrupted attempts",
            model="none",
        )

    def _record_from_error(
        self, text: str, exc: Exception, history_turns: int, started: float, collection: str
    ) -> AnswerRecord:
        # The user gets no exception text: it can name internal hosts or URLs. The details are in
        # the log (log.exception above) and the stored note names the error class for reviewers.
        return AnswerRecord(
            question=text,
            standalone_question=text,
            text=(
                f"I could not answer that just now because of an internal problem ({type(exc).__name__}); "
                "it has been logged. Please try again in a few minutes."
            ),
            refused=True,
            outcome="error",
            collection=collection,
            history_turns=history_turns,
            note=f"error: {type(exc).__name__}",
            model="none",
            latency_ms=(time.perf_counter() - started) * 1000.0,
        )

    def _observe(
        self, message: IncomingMessage, stored: StoredAnswer, result: PipelineResult | None, *, given_up: bool = False
    ) -> None:
        if self.metrics is None:
            return
        if result is None:
            self.metrics.count_request(message.platform, "error")
            self.metrics.count_error("gave_up" if given_up else "pipeline")
        else:
            self.metrics.observe_result(message.platform, result)

    # --- feedback, links, deliveries, threads --------------------------------------------------

    def record_feedback(self, event: FeedbackEvent) -> FeedbackOutcome:
        """Raises core.conversation.UnknownAnswer for an answer id the store does not have, and
        AnswerNotShownHere for an answer posted on another platform or in another chat."""
        if event.reason:
            event = replace(event, reason=clean_text(event.reason))
        outcome = self.store.record_feedback(event)
        if outcome.changed and self.metrics is not None:
            self.metrics.count_feedback(event.platform, event.rating)
        return outcome

    def record_reason(self, event: FeedbackEvent) -> FeedbackOutcome:
        event = replace(event, reason=clean_text(event.reason))
        outcome = self.store.record_reason(event)
        if outcome.changed and self.metrics is not None:
            self.metrics.count_feedback_reason(event.platform, event.reason_kind or "other")
        return outcome

    def exchange(self, answer_id: str) -> Exchange | None:
        return self.store.exchange(answer_id)

    def request_review(self, answer_id: str, requester: str, kind: RequestKind) -> Review:
        return self.store.request_review(answer_id, requester, kind)

    def record_review(
        self, answer_id: str, reviewer: str, verdict: Verdict, reference_answer: str = "", reference_provision: str = ""
    ) -> Review:
        return self.store.record_review(
            answer_id, reviewer, verdict, clean_text(reference_answer), clean_text(reference_provision)
        )

    def note_correction_posted(self, answer_id: str) -> None:
        self.store.note_correction_posted(answer_id)

    def note_reply_prompt(self, prompt: ReplyPromptRecord) -> None:
        self.store.note_reply_prompt(prompt)

    def reply_prompt(self, platform: str, channel: str, prompt_id: str) -> ReplyPromptRecord | None:
        return self.store.reply_prompt(platform, channel, prompt_id)

    def link_platform_message(self, answer_id: str, platform: str, channel: str, message_id: str) -> None:
        self.store.link_platform_message(answer_id, platform, channel, message_id)

    def answer_for_platform_message(self, platform: str, channel: str, message_id: str) -> str | None:
        return self.store.answer_for_platform_message(platform, channel, message_id)

    def claim_delivery(self, platform: str, delivery_id: str) -> bool:
        return self.store.claim_delivery(platform, delivery_id)

    def is_bot_thread(self, platform: str, workspace: str, channel: str, thread: str) -> bool:
        return self.store.is_bot_thread(platform, workspace, channel, thread)

    def thread_for_answer(self, answer_id: str) -> str | None:
        """The thread key an answer was given in; None for an unknown answer id."""
        return self.store.thread_for_answer(answer_id)

    def ready(self) -> bool:
        """Readiness of what this service owns: the database answers."""
        return self.store.ping()


def _delivery(message: IncomingMessage, claim: MessageClaim) -> Delivery:
    return Delivery(
        message=message, message_pk=claim.message_pk, thread_pk=claim.thread_pk, attempt=claim.attempt,
        placeholder=claim.placeholder_id or "", answered=claim.answered,
    )


def _reply(stored: StoredAnswer, *, duplicate: bool = False, followup: Future | None = None) -> Reply:
    r = stored.record
    return Reply(
        answer_id=stored.id, text=r.text, citations=list(r.citations), refused=r.refused, note=r.note,
        duplicate=duplicate, followup=followup,
    )


def _params_dict(result: PipelineResult) -> dict:
    return {**asdict(result.params), "queries": list(result.queries)}
