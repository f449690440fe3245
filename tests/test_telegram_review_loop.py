"""Issue 15 in Telegram, end to end through the REAL python-telegram-bot against the fake Bot API: a 👎
press asks for a reason with a ForceReply prompt and the reply is stored; "Ask a person"; the review
chat (HYPA_TELEGRAM_REVIEW_CHAT) with "Write the correct answer" (a ForceReply prompt; the reply is the
reference) and "Answer is fine"; posting the correction in the original chat."""
from __future__ import annotations

import pytest

from adapters.telegram.review import (
    CORRECTION_SAVED,
    NO_REVIEW_CHAT,
    NOT_FROM_HERE,
    NOTIFIED,
    REVIEW_ONLY_IN_CHAT,
)
from hypa_testkit.fakes.telegram_server import FakeTelegram, callback_query, group_chat, message, private_chat, user
from tests.test_telegram_bot import BotProcess, answers_in, eventually

pytestmark = pytest.mark.filterwarnings("ignore:Deprecated since version v22.2:DeprecationWarning")

CHAT = private_chat(4242)
REVIEW = group_chat(-1009990001, "Reviewers")
LEAD = user(9001, "Lea")


@pytest.fixture
def fake():
    with FakeTelegram() as server:
        yield server


def keyboard(msg: dict) -> dict[str, str]:
    """button text -> callback data"""
    return {b["text"]: b["callback_data"] for row in msg["reply_markup"]["inline_keyboard"] for b in row}


def sent_to(fake: FakeTelegram, chat_id: int, count: int = 1, where=None):
    calls = fake.wait_for("sendMessage", count=count, where=lambda c: int(c.params["chat_id"]) == chat_id
                          and (where is None or where(c)))
    return calls


def bot_message(fake: FakeTelegram, chat_id: int, contains: str) -> dict:
    return eventually(lambda: next((m for m in fake.bot_messages(chat_id) if contains in m["text"]), None),
                      what=f"a message with {contains!r} in chat {chat_id}")


def ask(bot: BotProcess, fake: FakeTelegram) -> tuple[dict, str]:
    fake.push_updates(message(update_id=1, message_id=10, chat=CHAT, text="What is the civil penalty for a first violation?"))
    answer = answers_in(fake, CHAT["id"])[0]
    return answer, bot.store.answers()[0].id


def test_a_downvote_asks_for_a_reason_and_the_reviewer_writes_the_reference(tmp_path, fake):
    bot = BotProcess(tmp_path, fake, review_chat=str(REVIEW["id"]))
    fake.remember_chat(REVIEW)
    with bot.running():
        answer, answer_id = ask(bot, fake)
        buttons = keyboard(answer)
        assert set(buttons) == {"👍", "👎", "🙋 Ask a person"}

        # 👎: rated at once, then a ForceReply prompt (for the rater only) replying to the answer.
        fake.push_updates(callback_query(update_id=2, data=buttons["👎"], message_=answer))
        assert "rated 👎" in fake.wait_for("answerCallbackQuery")[0].params["text"]
        prompt = bot_message(fake, CHAT["id"], "what was wrong")
        assert prompt["sent_reply_markup"] == {"force_reply": True, "selective": True,
                                          "input_field_placeholder": "What was wrong?"}
        assert prompt["reply_to_message_id"] == answer["message_id"]

        # The reply is the reason (its kind read from the words), not a question.
        reason = "Wrong provision: it cites the definitions instead of the penalties."
        fake.push_updates(message(update_id=3, message_id=11, chat=CHAT, text=reason, reply_to=prompt))
        thanks = bot_message(fake, CHAT["id"], "reason is recorded and sent to a reviewer")
        assert thanks["reply_to_message_id"] == 11
        (rated,) = bot.store.rated_answers()
        assert (rated.rating, rated.reason_kind, rated.reason, rated.review_state) == (
            -1, "wrong_provision", reason, "pending")
        assert len(bot.store.answers()) == 1  # no second answer: the reply was not taken as a question

        # The review chat gets the exchange with the reviewer's buttons.
        post = bot_message(fake, REVIEW["id"], "👎 with a reason")
        for expected in ("What is the civil penalty", "$500", "Sources", f"Wrong provision cited — “{reason}”"):
            assert expected in post["text"], expected
        assert keyboard(post) == {"✏️ Write the correct answer": f"rv:c:{answer_id}",
                                  "✅ Answer is fine": f"rv:f:{answer_id}"}

        # "Write the correct answer": a ForceReply prompt in the review chat; the reply is the reference.
        fake.push_updates(callback_query(update_id=4, data=f"rv:c:{answer_id}", message_=post, from_user=LEAD))
        ask_correction = bot_message(fake, REVIEW["id"], "reply to this message with the correct answer")
        assert ask_correction["sent_reply_markup"]["force_reply"] is True
        # Someone else's reply to the reviewer's prompt changes nothing.
        fake.push_updates(message(update_id=5, message_id=500, chat=REVIEW, from_user=user(666, "Mallory"),
                                  text="It is fine.", reply_to=ask_correction))
        fake.push_updates(message(update_id=6, message_id=501, chat=REVIEW, from_user=LEAD, reply_to=ask_correction,
                                  text="A first violation: up to $500.\nProvision: Toy Code § 1-103"))
        saved = bot_message(fake, REVIEW["id"], CORRECTION_SAVED)
        review = bot.store.review(answer_id)
        assert (review.state, review.reviewer, review.reference_answer, review.reference_provision) == (
            "corrected", "9001", "A first violation: up to $500.", "Toy Code § 1-103")
        settled_post = next(m for m in fake.bot_messages(REVIEW["id"]) if m["message_id"] == post["message_id"])
        assert "reply_markup" not in settled_post  # the reviewer's buttons are gone
        bot_message(fake, REVIEW["id"], "Corrected by")
        assert not any(m.get("reply_to_message_id") == 500 for m in fake.bot_messages(REVIEW["id"]))  # Mallory: nothing

        # "Post it in the original chat": the correction replies to the question there.
        fake.push_updates(callback_query(update_id=7, data=keyboard(saved)["📣 Post it in the original chat"],
                                         message_=saved, from_user=LEAD))
        posted = bot_message(fake, CHAT["id"], "Correction from a reviewer")
        assert "A first violation: up to $500." in posted["text"] and posted["reply_to_message_id"] == 10
        eventually(lambda: bot.store.review(answer_id).correction_posted, what="the correction noted as posted")


def test_ask_a_person_and_answer_is_fine(tmp_path, fake):
    bot = BotProcess(tmp_path, fake, review_chat=str(REVIEW["id"]))
    fake.remember_chat(REVIEW)
    with bot.running():
        answer, answer_id = ask(bot, fake)
        ask_person = keyboard(answer)["🙋 Ask a person"]
        # From another chat (a forwarded keyboard): refused, nothing posted.
        fake.push_updates(callback_query(update_id=2, data=ask_person, message_={**answer, "chat": private_chat(611)},
                                         from_user=user(611)))
        assert fake.wait_for("answerCallbackQuery")[0].params["text"] == NOT_FROM_HERE
        fake.push_updates(callback_query(update_id=3, data=ask_person, message_=answer))
        assert fake.wait_for("answerCallbackQuery", count=2)[-1].params["text"] == NOTIFIED
        post = bot_message(fake, REVIEW["id"], "🙋 Ask a person")
        assert bot.store.review(answer_id).request_kind == "ask_person"
        # The reviewer's buttons count only in the review chat.
        fake.push_updates(callback_query(update_id=4, data=f"rv:f:{answer_id}", message_=answer))
        assert fake.wait_for("answerCallbackQuery", count=3)[-1].params["text"] == REVIEW_ONLY_IN_CHAT
        assert bot.store.review(answer_id).state == "pending"
        fake.push_updates(callback_query(update_id=5, data=f"rv:f:{answer_id}", message_=post, from_user=LEAD))
        fake.wait_for("answerCallbackQuery", count=4)
        eventually(lambda: bot.store.review(answer_id).state == "fine", what="the review settled")
        edited = next(m for m in fake.bot_messages(REVIEW["id"]) if m["message_id"] == post["message_id"])
        assert "Marked fine by" in edited["text"] and "reply_markup" not in edited


def test_without_a_review_chat_ask_a_person_says_so(tmp_path, fake):
    bot = BotProcess(tmp_path, fake)
    with bot.running():
        answer, answer_id = ask(bot, fake)
        fake.push_updates(callback_query(update_id=2, data=keyboard(answer)["🙋 Ask a person"], message_=answer))
        call = fake.wait_for("answerCallbackQuery")[0]
        assert call.params["text"] == NO_REVIEW_CHAT and call.params["show_alert"] is True
        assert bot.store.review(answer_id) is None
