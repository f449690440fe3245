"""StoredConversationService: history from the store, duplicates, failures, bad input, feedback."""
from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from bot.metrics import Metrics
from core.conversation import FeedbackEvent, IncomingMessage
from core.conversation_service import IN_PROGRESS_NOTE, clean_text
from core.errors import UnknownAnswer
from hypa_testkit.toy import TOY_CHUNKS, toy_generator, toy_service

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class RecordingGenerator:
    """The extractive generator, remembering the question and history it was given."""

    def __init__(self, inner):
        self.inner = inner
        self.calls: list[tuple[str, list]] = []

    def generate(self, question, contexts, history=(), query_vector=None, asked=None, asking_vectors=None):
        self.calls.append((question, list(history)))
        return self.inner.generate(question, contexts, history, query_vector)


class DeadGenerator:
    def generate(self, question, contexts, history=(), query_vector=None, asked=None, asking_vectors=None):
        raise ConnectionError("the language model is unreachable (circuit open)\nretry later")


def message(text: str, message_id: str, *, thread: str = "100.1", minutes: int = 0, **kw) -> IncomingMessage:
    fields = {"platform": "slack", "workspace": "T1", "channel": "C1", "thread": thread, "user": "U1", "text": text,
                  "message_id": message_id, "sent_at": T0 + timedelta(minutes=minutes)}
    fields.update(kw)
    return IncomingMessage(**fields)


def test_answer_is_stored_with_how_it_was_made(tmp_path):
    metrics = Metrics()
    service = toy_service(tmp_path, metrics=metrics)
    reply = service.handle(message("What is the civil penalty for a first violation?", "100.1"))
    assert not reply.refused and not reply.duplicate and reply.citations
    assert 16 <= len(reply.answer_id) <= 22 and len(f"fb:+1:{reply.answer_id}".encode()) <= 64
    stored = service.store.get_answer(reply.answer_id)
    r = stored.record
    assert r.outcome == "answered" and r.text == reply.text and r.citations == reply.citations
    assert r.chunk_ids and r.params["top_k"] == 3 and r.latency_ms > 0 and r.context_tokens > 0
    assert r.collection == "toy" and r.model == "extractive" and stored.platform == "slack"
    assert service.is_bot_thread("slack", "T1", "C1", "100.1")
    assert not service.is_bot_thread("slack", "T1", "C1", "999.9")
    assert metrics.requests.labels("slack", "answered")._value.get() == 1


def test_follow_up_uses_the_stored_thread_history_and_survives_a_restart(tmp_path):
    first = toy_service(tmp_path)
    first.handle(message("How must a seller notify buyers before selling a widget?", "100.1"))
    first.store.close()
    # A new process: new store and service on the same SQLite file.
    generator = RecordingGenerator(toy_generator())
    second = toy_service(tmp_path, generator=generator)
    reply = second.handle(message("What are the methods?", "100.2", minutes=1))
    question, history = generator.calls[-1]
    assert [t.role for t in history] == ["user", "assistant"]
    assert history[0].content == "How must a seller notify buyers before selling a widget?"
    # The rewriter resolved the follow-up with the earlier question; the answer cites the notice rule.
    assert question.startswith("How must a seller notify buyers") and question.endswith("What are the methods?")
    assert any("1-102" in c.label for c in reply.citations)
    stored = second.store.get_answer(reply.answer_id).record
    assert stored.history_turns == 1 and stored.standalone_question == question
    # Another thread knows nothing of it.
    second.handle(message("What are the methods?", "200.1", thread="200.1", minutes=2))
    assert generator.calls[-1][1] == []


def test_history_is_limited_to_the_last_turns_in_order(tmp_path):
    service = toy_service(tmp_path)
    service.history_turns = 2
    for i, q in enumerate(["What is a widget audit?", "Who is a reviewer?", "What is the penalty?"]):
        service.handle(message(q, f"100.{i + 1}", minutes=i))
    history = service.store.history_for_thread("slack", "T1", "C1", "100.1", 2)
    assert [t.content for t in history if t.role == "user"] == ["Who is a reviewer?", "What is the penalty?"]


def test_duplicate_delivery_returns_the_stored_reply(tmp_path):
    metrics = Metrics()
    service = toy_service(tmp_path, metrics=metrics)
    first = service.handle(message("What is a widget audit?", "100.1"))
    again = service.handle(message("What is a widget audit?", "100.1"))
    assert again.duplicate and again.answer_id == first.answer_id and again.text == first.text
    assert service.store.count_rows("answers") == 1
    assert metrics.requests.labels("slack", "duplicate")._value.get() == 1


def test_concurrent_deliveries_of_one_message_produce_one_answer(tmp_path):
    service = toy_service(tmp_path)
    replies, barrier = [], threading.Barrier(8)

    def deliver():
        barrier.wait()
        replies.append(service.handle(message("What is the civil penalty?", "100.1")))

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert service.store.count_rows("answers") == 1 and service.store.count_rows("messages") == 1
    assert sum(not r.duplicate for r in replies) == 1
    answered = next(r for r in replies if not r.duplicate)
    # Duplicates either carry the stored answer or say the first delivery is still being answered.
    for r in replies:
        if r.duplicate:
            assert r.answer_id in (answered.answer_id, "") and (r.answer_id or r.note == IN_PROGRESS_NOTE)


def test_a_dead_workers_claim_is_taken_over_by_a_redelivery(tmp_path):
    service = toy_service(tmp_path)
    msg = message("What is a widget audit?", "100.1")
    claim = service.store.claim_message(msg, holder="dead")  # a worker claimed it, then died before answering
    in_progress = service.handle(msg)
    assert in_progress.duplicate and in_progress.answer_id == "" and in_progress.note == IN_PROGRESS_NOTE
    service.store.lease = timedelta(seconds=0)
    taken_over = service.handle(msg)
    assert not taken_over.duplicate and taken_over.answer_id
    assert service.store.answer_for_message(claim.message_pk).id == taken_over.answer_id


def test_a_claim_is_a_lease_renewed_until_the_reply_is_shown(tmp_path):
    metrics = Metrics()
    service = toy_service(tmp_path, metrics=metrics)
    msg = message("What is the civil penalty?", "100.1")
    delivery = service.claim(msg)
    assert delivery is not None and delivery.attempt == 1 and not delivery.answered
    assert service.claim(msg) is None  # a retry while the lease is held: dropped, counted
    assert metrics.requests.labels("slack", "duplicate")._value.get() == 1
    assert service.note_placeholder(delivery, "1700000001.000100") == "1700000001.000100"
    reply = service.answer(delivery)
    assert "$500" in reply.text
    assert service.answer(delivery).answer_id == reply.answer_id  # asked again: the stored answer
    assert service.renew_leases() == 1  # held until shown...
    service.complete(delivery)
    assert service.renew_leases() == 0 and service.store.owed_messages() == []  # ...then done
    service.store.lease = timedelta(seconds=0)
    assert service.claim(msg) is None  # shown replies are never taken over


def test_a_restarted_process_takes_over_and_shows_the_answer_the_dead_one_stored(tmp_path):
    dead = toy_service(tmp_path)
    msg = message("What is the civil penalty?", "100.1")
    first = dead.claim(msg)
    dead.note_placeholder(first, "1700000001.000100")
    stored = dead.answer(first)  # computed and stored; the process dies before showing it
    restarted = toy_service(tmp_path)  # a new process: its own holder id
    assert restarted.holder != dead.holder
    assert restarted.reclaim("slack") == []  # the dead process's lease has not lapsed yet
    restarted.store.lease = timedelta(seconds=0)
    (owed,) = restarted.reclaim("slack")
    assert owed.message == msg and owed.attempt == 2 and owed.placeholder == "1700000001.000100" and owed.answered
    assert restarted.answer(owed).answer_id == stored.answer_id  # shown as it was, not answered twice
    assert restarted.store.count_rows("answers") == 1


def test_a_question_that_keeps_killing_its_worker_gets_an_apology_on_the_last_attempt(tmp_path):
    metrics = Metrics()
    generator = RecordingGenerator(toy_generator())
    service = toy_service(tmp_path, generator=generator, metrics=metrics)
    service.store.lease = timedelta(seconds=0)
    msg = message("What is the civil penalty?", "100.1")
    service.store.claim_message(msg, holder="dead-1")
    service.store.claim_message(msg, holder="dead-2")  # takes the lapsed lease over: attempt 2
    service.store.claim_message(msg, holder="dead-3")  # attempt 3
    (last,) = service.reclaim("slack")
    assert last.attempt == 4
    reply = service.answer(last)
    assert reply.refused and "interrupted 3 times" in reply.text and generator.calls == []
    assert metrics.errors.labels("gave_up")._value.get() == 1


@pytest.mark.parametrize(
    "text, expect",
    [
        ("", "ask a question"),
        ("   \n\t ", "ask a question"),
        ("Is this allowed? " + "x" * 39_983, "40,000 characters"),
        ("👍🎉 🙂", "in words"),
        ("\x00\x07\x1b", "ask a question"),
    ],
)
def test_bad_input_gets_a_clear_stored_reply(tmp_path, text, expect):
    service = toy_service(tmp_path)
    reply = service.handle(message(text, "100.1"))
    assert reply.refused and expect in reply.text
    stored = service.store.get_answer(reply.answer_id).record
    assert stored.outcome == "invalid"
    # Invalid input is not history a follow-up could lean on.
    assert service.store.history_for_thread("slack", "T1", "C1", "100.1", 6) == []


def test_control_characters_and_non_english_text_are_answered(tmp_path):
    service = toy_service(tmp_path)
    reply = service.handle(message("What\x00 is\x07 a widget\u200b audit?\x1b", "100.1"))
    stored = service.store.get_answer(reply.answer_id).record
    assert reply.text and "\x00" not in stored.question and "\x07" not in stored.question
    spanish = service.handle(message("¿Qué es una auditoría de sesgo?", "100.2", minutes=1))
    assert spanish.text and service.store.get_answer(spanish.answer_id).record.question.startswith("¿Qué")
    lone_surrogate = service.handle(message("What is a widget audit? \ud800", "100.3", minutes=2))
    assert lone_surrogate.text


def test_clean_text_keeps_newlines_and_drops_controls():
    assert clean_text(" a\x00b\r\nc\x9f\t ") == "a b\nc"


def test_pipeline_failure_becomes_a_clear_stored_counted_reply(tmp_path):
    metrics = Metrics()
    service = toy_service(tmp_path, generator=DeadGenerator(), metrics=metrics)
    reply = service.handle(message("What is the civil penalty?", "100.1"))
    assert reply.refused and reply.text.startswith("I could not answer that just now because of an internal problem")
    assert "ConnectionError" in reply.text
    # No exception text reaches the chat: it can name internal hosts or URLs (it is in the log).
    assert "unreachable" not in reply.text and "Traceback" not in reply.text
    stored = service.store.get_answer(reply.answer_id).record
    assert stored.outcome == "error" and stored.note == "error: ConnectionError"
    assert metrics.errors.labels("pipeline")._value.get() == 1
    assert metrics.requests.labels("slack", "error")._value.get() == 1
    # A failed exchange is not history either.
    assert service.store.history_for_thread("slack", "T1", "C1", "100.1", 6) == []


def test_missing_collection_is_reported_not_raised(tmp_path):
    service = toy_service(tmp_path)
    service.collection = "no-such-collection"
    reply = service.handle(message("What is the civil penalty?", "100.1"))
    assert reply.refused and "internal problem (CollectionNotFound)" in reply.text
    assert service.store.get_answer(reply.answer_id).record.outcome == "error"


def test_feedback_through_the_service_counts_changes_only(tmp_path):
    metrics = Metrics()
    service = toy_service(tmp_path, metrics=metrics)
    answer_id = service.handle(message("What is a widget audit?", "100.1")).answer_id
    up = FeedbackEvent(answer_id, "slack", "U2", 1, source="reaction")
    assert service.record_feedback(up).changed
    assert not service.record_feedback(up).changed  # a second 👍 reaction
    removed = service.record_feedback(FeedbackEvent(answer_id, "slack", "U2", 0, source="reaction"))
    assert removed.changed and removed.rating == 0
    assert metrics.feedback.labels("slack", "+1")._value.get() == 1
    assert metrics.feedback.labels("slack", "0")._value.get() == 1
    with pytest.raises(UnknownAnswer):
        service.record_feedback(FeedbackEvent("nope", "slack", "U2", 1))


def test_platform_message_links(tmp_path):
    service = toy_service(tmp_path)
    answer_id = service.handle(message("What is a widget audit?", "100.1")).answer_id
    service.link_platform_message(answer_id, "slack", "C1", "100.2")
    service.link_platform_message(answer_id, "slack", "C1", "100.2")  # idempotent
    assert service.answer_for_platform_message("slack", "C1", "100.2") == answer_id
    assert service.answer_for_platform_message("slack", "C1", "100.1") is None
    with pytest.raises(UnknownAnswer):
        service.link_platform_message("nope", "slack", "C1", "100.3")
    assert service.claim_delivery("slack", "Ev1") and not service.claim_delivery("slack", "Ev1")
    assert service.thread_for_answer(answer_id) == "100.1" and service.thread_for_answer("nope") is None
    assert service.ready()


def test_each_listed_workspace_answers_from_its_own_collection(tmp_path):
    """HYPA_WORKSPACE_COLLECTIONS: a listed Slack team / Telegram chat searches its own collection."""
    service = toy_service(tmp_path)
    other = TOY_CHUNKS[2].__class__(**{**TOY_CHUNKS[2].to_dict(), "collection": "ws-T9", "id": "ws:penalty"})
    service.pipeline.index.replace_document("ws-T9", "toy-doc", "h9", [other])
    service.workspace_collections = {"T9": "ws-T9"}
    own = service.handle(IncomingMessage("slack", "T9", "C1", "1.0", "U1", "What is the civil penalty?", "1.0"))
    shared = service.handle(IncomingMessage("slack", "T1", "C1", "2.0", "U1", "What is the civil penalty?", "2.0"))
    assert [c.chunk_id for c in own.citations] == ["ws:penalty"]
    assert own.citations and all(c.chunk_id != "ws:penalty" for c in shared.citations)
    assert service.store.get_answer(own.answer_id).record.collection == "ws-T9"
    assert service.store.get_answer(shared.answer_id).record.collection == "toy"
    # Telegram has one workspace; a chat id (the channel) selects the collection there.
    service.workspace_collections = {"-100777": "ws-T9"}
    chat = service.handle(IncomingMessage("telegram", "telegram", "-100777", "5", "42", "What is the civil penalty?", "5"))
    assert [c.chunk_id for c in chat.citations] == ["ws:penalty"]
