"""The review loop's storage: a 👎's reason and its kind, reviews of exchanges, reply prompts; on SQLite,
and on PostgreSQL when HYPA_TEST_POSTGRES_URL is set (the `store` fixture of test_sql_store)."""
from __future__ import annotations

import sqlite3
from datetime import timedelta

import pytest
from alembic import command

from core.conversation import FeedbackEvent, UnknownAnswer
from core.review import ReplyPromptRecord, parse_correction, reason_kind_of
from storage.sql import ConversationStore
from storage.sql.migrate import alembic_config
from tests.test_sql_store import T0, answer, store, store_url  # noqa: F401 - fixtures


def down(answer_id: str, order: int, rater: str = "U1", **kw) -> FeedbackEvent:
    return FeedbackEvent(answer_id, "telegram", rater, -1, order=order, at=T0 + timedelta(seconds=order), **kw)


def test_a_reason_joins_the_downvote_it_was_asked_for(store):
    answer_id = answer(store)
    assert store.record_feedback(down(answer_id, 10)).changed
    outcome = store.record_reason(down(answer_id, 10, reason="cites Art. 5 instead of Art. 6", reason_kind="wrong_provision"))
    assert outcome.changed and outcome.rating == -1
    (rated,) = store.rated_answers()
    assert (rated.rating, rated.reason_kind, rated.reason) == (-1, "wrong_provision", "cites Art. 5 instead of Art. 6")
    assert [(c.rating, c.reason_kind) for c in store.feedback_log(answer_id)] == [(-1, ""), (-1, "wrong_provision")]
    assert store.count_rows("feedback_acts") == 1  # the reason is part of the click, not a second act
    # A repeated click later keeps the reason; a 👍 afterwards drops it from the current rating.
    store.record_feedback(down(answer_id, 20))
    assert store.rated_answers()[0].reason_kind == "wrong_provision"
    store.record_feedback(FeedbackEvent(answer_id, "telegram", "U1", 1, order=30))
    (rated,) = store.rated_answers()
    assert (rated.rating, rated.reason, rated.reason_kind) == (1, "", "")


def test_a_reason_arriving_before_its_click_is_processed_counts_once(store):
    answer_id = answer(store)
    store.record_reason(down(answer_id, 10, reason="incomplete", reason_kind="incomplete"))
    assert not store.record_feedback(down(answer_id, 10)).changed  # the click itself: the same act
    (rated,) = store.rated_answers()
    assert (rated.rating, rated.reason) == (-1, "incomplete")
    assert store.count_rows("feedback_acts") == 1


def test_a_reason_for_a_downvote_replaced_by_an_upvote_is_kept_on_the_act_but_not_shown(store):
    answer_id = answer(store)
    store.record_feedback(down(answer_id, 10))
    store.record_feedback(FeedbackEvent(answer_id, "telegram", "U1", 1, order=11))
    assert not store.record_reason(down(answer_id, 10, reason="late", reason_kind="other")).changed
    assert store.rated_answers()[0].rating == 1 and store.rated_answers()[0].reason == ""


def test_reason_needs_the_act_order_and_a_known_answer(store):
    answer_id = answer(store)
    with pytest.raises(ValueError):
        store.record_reason(FeedbackEvent(answer_id, "telegram", "U1", -1, reason="x"))
    with pytest.raises(UnknownAnswer):
        store.record_reason(down("nope", 1, reason="x"))


def test_review_requests_open_one_pending_review_and_count_the_rest(store):
    answer_id = answer(store)
    first = store.request_review(answer_id, "U1", "downvote")
    assert (first.state, first.requested_by, first.request_kind, first.requests) == ("pending", "U1", "downvote", 1)
    again = store.request_review(answer_id, "U2", "ask_person")
    assert (again.state, again.requested_by, again.requests) == ("pending", "U1", 2)
    with pytest.raises(UnknownAnswer):
        store.request_review("nope", "U1", "downvote")
    store.record_feedback(down(answer_id, 5))
    assert store.rated_answers()[0].review_state == "pending"


def test_a_correction_is_the_exchanges_reference_and_the_latest_verdict_counts(store):
    answer_id = answer(store)
    other = answer(store, "2")
    store.request_review(answer_id, "U1", "downvote")
    store.record_feedback(down(answer_id, 5, reason="misses the notice", reason_kind="incomplete"))
    with pytest.raises(ValueError):
        store.record_review(answer_id, "ULEAD", "corrected", "  ")
    review = store.record_review(answer_id, "ULEAD", "corrected", "Yes, ten business days before use.", "§ 5-304(a)")
    assert (review.state, review.reviewer, review.reference_answer, review.reference_provision) == (
        "corrected", "ULEAD", "Yes, ten business days before use.", "§ 5-304(a)")
    assert review.reviewed_at is not None and not review.correction_posted
    store.note_correction_posted(answer_id)
    store.record_review(other, "ULEAD", "fine")  # a review nobody asked for is opened by the reviewer
    reviewed = store.reviewed_answers()
    assert [(r.answer.id, r.review.state) for r in reviewed] == [(answer_id, "corrected"), (other, "fine")]
    assert reviewed[0].review.correction_posted and reviewed[0].reasons == (("incomplete", "misses the notice"),)
    assert reviewed[1].review.reference_answer == "" and reviewed[1].review.requests == 0
    # A second verdict replaces the first (and drops the reference of a "fine").
    assert store.record_review(answer_id, "ULEAD2", "fine").reference_answer == ""


def test_exchange_names_where_the_question_was_asked(store):
    answer_id = answer(store, thread="7.0")
    ex = store.exchange(answer_id)
    assert (ex.platform, ex.workspace, ex.channel, ex.thread, ex.message_id, ex.asker) == (
        "telegram", "telegram", "-100", "7.0", "1", "42")
    assert ex.question == "What is a widget audit?" and ex.citations[0].label == "Toy § 1" and ex.review is None
    store.request_review(answer_id, "42", "ask_person")
    assert store.exchange(answer_id).review.state == "pending"
    assert store.exchange("nope") is None


def test_reply_prompts_are_found_by_their_message(store):
    answer_id = answer(store)
    prompt = ReplyPromptRecord("telegram", "-100", "900", "reason", answer_id, "42", act_order=77)
    store.note_reply_prompt(prompt)
    store.note_reply_prompt(prompt)  # idempotent
    assert store.reply_prompt("telegram", "-100", "900") == prompt
    assert store.reply_prompt("telegram", "-100", "901") is None


def test_the_migration_adds_reason_kinds_to_existing_ratings(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    command.upgrade(alembic_config(url), "0003_feedback_acts")
    with sqlite3.connect(tmp_path / "old.sqlite3") as db:
        db.execute("INSERT INTO threads VALUES (1,'slack','T','C','1.0','2026-01-01 00:00:00')")
        db.execute("INSERT INTO messages (id, thread_id, platform, workspace, channel, message_id, user, text, sent_at,"
                   " received_at, claimed_at, attempts) VALUES (1,1,'slack','T','C','1.0','U','q','2026-01-01 00:00:00',"
                   "'2026-01-01 00:00:00','2026-01-01 00:00:00',1)")
        db.execute("INSERT INTO answers VALUES ('a1',1,1,'q','q','c',0,NULL,'{}','[]','[]','t',0,'answered','','m',0,0,0,"
                   "1.0,'2026-01-01 00:00:00')")
        db.execute("INSERT INTO feedback (answer_id, rater, platform, rating, source, reason, rated_at, updated_at)"
                   " VALUES ('a1','U','slack',-1,'button','old reason','2026-01-01 00:00:00','2026-01-01 00:00:00')")
    store = ConversationStore(url)
    try:
        (rated,) = store.rated_answers()
        assert (rated.reason, rated.reason_kind, rated.review_state) == ("old reason", "", "")
    finally:
        store.close()


def test_written_reasons_and_corrections_are_read():
    assert reason_kind_of("Wrong article: it is Art. 6") == "wrong_provision"
    assert reason_kind_of("this is not covered by the law") == "not_covered"
    assert reason_kind_of("incomplete, misses agencies") == "incomplete"
    assert reason_kind_of("meh") == "other"
    assert parse_correction("Provision: § 5-304(a)\nTen business days before use.") == (
        "Ten business days before use.", "§ 5-304(a)")
    assert parse_correction("Just the answer.") == ("Just the answer.", "")
