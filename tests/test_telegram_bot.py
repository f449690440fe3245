"""End to end: the REAL python-telegram-bot Application against a fake Bot API, with the real
conversation service on SQLite (fast toy pipeline: HashingEmbedder + EmbeddedIndex over TOY_CHUNKS).

Each test starts the whole HTTP app (Starlette TestClient runs its lifespan, which starts PTB's
polling or registers the webhook), feeds updates through the fake, and asserts what the fake
received and what the store holds.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from adapters.telegram import TelegramConfig
from adapters.telegram.handlers import FAILED, NOT_SHOWN_HERE, NOT_TEXT, PLACEHOLDER
from bot.metrics import Metrics
from bot.serve_telegram import TelegramServer, build_telegram_server
from core.conversation import IncomingMessage
from core.types import Answer
from hypa_testkit.fakes.telegram_server import (
    BOT_USERNAME,
    FakeTelegram,
    callback_query,
    group_chat,
    mention_entities,
    message,
    private_chat,
    reaction,
    user,
)
from hypa_testkit.toy import toy_generator, toy_service
from storage.sql.models import Base

# PTB's own AIORateLimiter reads RetryAfter.retry_after, which warns about a future type change.
pytestmark = pytest.mark.filterwarnings("ignore:Deprecated since version v22.2:DeprecationWarning")

SECRET = "s3cret-token_42"
WEBHOOK_URL = "https://bot.example.com/telegram/webhook"


# --- the bot under test ---------------------------------------------------------------------------


class BotProcess:
    """One bot process: the stored service on a SQLite file and the Telegram server around it."""

    def __init__(self, tmp_path: Path, fake: FakeTelegram, *, webhook: bool = False, generator=None,
                 service_wrapper: Callable | None = None, review_chat: str = "") -> None:
        self.metrics = Metrics()
        stored = toy_service(tmp_path, generator, self.metrics)
        self.store = stored.store
        self.service = stored
        if service_wrapper is not None:
            self.service = service_wrapper(self.service)
        config = TelegramConfig(
            token=fake.token, base_url=fake.base_url, poll_timeout_s=1,
            webhook_url=WEBHOOK_URL if webhook else "", webhook_secret=SECRET if webhook else "",
            review_chat=review_chat,
        )
        self.server: TelegramServer = build_telegram_server(
            config, self.service, metrics=self.metrics, readiness=lambda: {"database": stored.ready()}
        )

    @contextmanager
    def running(self) -> Iterator[TestClient]:
        with TestClient(self.server.http_app) as client:  # lifespan: start PTB (+ polling / setWebhook)
            yield client
        self.store.close()


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    with FakeTelegram() as server:
        yield server


def eventually(check: Callable[[], object], timeout: float = 10.0, what: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def answers_in(fake: FakeTelegram, chat_id: int, count: int = 1, timeout: float = 10.0) -> list[dict]:
    """The bot's final answers in a chat (placeholders replaced), once `count` of them exist."""

    def done() -> list[dict] | None:
        shown = [m for m in fake.bot_messages(chat_id) if not m["text"].startswith("⏳")]
        return shown if len(shown) >= count else None

    return eventually(done, timeout, f"{count} answer(s) in chat {chat_id}")  # type: ignore[return-value]


CHAT = private_chat(4242)
GROUP = group_chat(-100123)


# --- private chats --------------------------------------------------------------------------------


def test_private_question_gets_a_cited_html_answer_with_feedback_buttons(tmp_path, fake):
    bot = BotProcess(tmp_path, fake)
    with bot.running() as client:
        fake.push_updates(message(update_id=1, message_id=10, chat=CHAT, text="What is the civil penalty for a first violation?"))
        answer = answers_in(fake, CHAT["id"])[0]
        # what PTB asked for: the update types we need, typing, a placeholder, then the edit
        polls = fake.calls_of("getUpdates")
        assert set(polls[0].params["allowed_updates"]) >= {"message", "callback_query", "message_reaction"}
        assert fake.calls_of("sendChatAction")[0].params["action"] == "typing"
        placeholder = fake.wait_for("sendMessage")[0].params
        assert placeholder["text"].startswith("⏳") and placeholder["reply_parameters"]["message_id"] == 10
        edit = fake.wait_for("editMessageText")[0].params
        assert edit["parse_mode"] == "HTML" and edit["message_id"] == answer["message_id"]
        assert "$500" in answer["text"] and "<b>Sources</b>" in answer["text"]
        assert "[1] <b>Toy Code § 1-103</b>" in answer["text"]
        stored = bot.store.answers()
        assert len(stored) == 1
        answer_id = stored[0].id
        buttons = answer["reply_markup"]["inline_keyboard"][0]
        assert [b["text"] for b in buttons] == ["👍", "👎"]
        assert [b["callback_data"] for b in buttons] == [f"fb:+:{answer_id}", f"fb:-:{answer_id}"]
        # the answer message is linked: reactions and replies on it refer to this answer
        assert bot.service.answer_for_platform_message("telegram", str(CHAT["id"]), str(answer["message_id"])) == answer_id
        assert client.get("/readyz").json() == {"ready": True, "checks": {"telegram": True, "database": True}}
        assert 'hypa_requests_total{outcome="answered",platform="telegram"} 1.0' in client.get("/metrics").text


def test_bad_input_gets_clear_replies_and_nothing_crashes(tmp_path, fake):
    bot = BotProcess(tmp_path, fake)
    sticker = {"sticker": {"file_id": "s1", "file_unique_id": "u1", "width": 512, "height": 512,
                           "is_animated": False, "is_video": False, "type": "regular", "emoji": "👍"}}
    photo = {"photo": [{"file_id": "p1", "file_unique_id": "pu1", "width": 90, "height": 90}]}
    updates = [
        message(update_id=1, message_id=1, chat=CHAT, extra=sticker),
        message(update_id=2, message_id=2, chat=CHAT, extra=photo),
        message(update_id=3, message_id=3, chat=CHAT, text="Is this allowed? " + "x" * 40_000),
        message(update_id=4, message_id=4, chat=CHAT, text="👍👍 🎉"),
        message(update_id=5, message_id=5, chat=CHAT, text="What\x00 is\x07 a widget\x1b audit?"),
        message(update_id=6, message_id=6, chat=CHAT, text="¿Qué es una auditoría de widgets? 什么是审计"),
        message(update_id=7, message_id=7, chat=CHAT, text="/start",
                entities=[{"type": "bot_command", "offset": 0, "length": 6}]),
    ]
    with bot.running():
        fake.push_updates(*updates)
        shown = answers_in(fake, CHAT["id"], count=7)
        by_question = {m["reply_to_message_id"]: m["text"] for m in shown}
        assert by_question[1] == NOT_TEXT and by_question[2] == NOT_TEXT
        assert "40,017 characters long" in by_question[3] and "at most 4,000" in by_question[3]
        assert "in words" in by_question[4]
        assert by_question[5] and by_question[6]  # answered or politely refused, not silence
        assert "Ask me a question" in by_question[7]
        assert all(c.status == 200 for c in fake.calls if c.method != "getUpdates")
        assert len(bot.store.answers()) == 4  # stickers, photos and /start never reach the service


def test_duplicate_update_id_is_answered_once(tmp_path, fake):
    bot = BotProcess(tmp_path, fake)
    question = message(update_id=9, message_id=90, chat=CHAT, text="What is a widget audit?")
    with bot.running():
        fake.push_updates(question, question)  # Telegram (or a proxy) delivering the same update twice
        answers_in(fake, CHAT["id"])
        dropped = 'hypa_requests_total{outcome="duplicate",platform="telegram"} 1.0'
        eventually(lambda: dropped in bot.metrics.render().decode(), what="the second delivery dropped")
        eventually(lambda: fake.pending_updates() == 0, what="confirm")
        assert len(fake.calls_of("sendMessage")) == 1
        assert len(bot.store.answers()) == 1
        assert dropped in bot.metrics.render().decode()


def test_flood_control_429_is_retried_and_the_answer_still_arrives(tmp_path, fake):
    bot = BotProcess(tmp_path, fake)
    fake.rate_limit_next("sendMessage", retry_after=1)
    with bot.running():
        fake.push_updates(
            message(update_id=1, message_id=10, chat=CHAT, text="How many days before selling must a seller notify buyers?")
        )
        answer = answers_in(fake, CHAT["id"], timeout=15)[0]
        assert "ten business days" in answer["text"]
        sends = fake.calls_of("sendMessage")
        assert [c.status for c in sends] == [429, 200]
        assert sends[1].at - sends[0].at >= 1.0  # waited retry_after before trying again


class LongAnswerGenerator:
    """The extractive answer followed by ~12,000 characters of text full of characters HTML escapes."""

    def __init__(self, inner):
        self.inner = inner

    def generate(self, question, contexts, history=(), query_vector=None, asked=None, asking_vectors=None) -> Answer:
        answer = self.inner.generate(question, contexts, history, query_vector)
        filler = "\n\n".join(f"Paragraph {i}: sellers & buyers <must> keep records." * 6 for i in range(40))
        answer.text = answer.text + "\n\n" + filler
        return answer


def test_long_answer_is_split_into_messages_within_the_limit(tmp_path, fake):
    bot = BotProcess(tmp_path, fake, generator=LongAnswerGenerator(toy_generator()))
    with bot.running():
        fake.push_updates(message(update_id=1, message_id=10, chat=CHAT, text="What is the civil penalty?"))
        answers_in(fake, CHAT["id"], count=3)
        eventually(lambda: fake.bot_messages(CHAT["id"])[-1].get("reply_markup"), what="the last part's buttons")
        parts = fake.bot_messages(CHAT["id"])
        assert len(parts) >= 3
        assert all(len(p["text"].encode("utf-16-le")) // 2 <= 4096 for p in parts)
        assert [bool(p.get("reply_markup")) for p in parts] == [False] * (len(parts) - 1) + [True]
        assert "<b>Sources</b>" in parts[-1]["text"]
        joined = "".join(p["text"] for p in parts)
        assert joined.count("sellers &amp; buyers &lt;must&gt; keep records.") == 240
        answer_id = bot.store.answers()[0].id
        def linked(p):
            return bot.service.answer_for_platform_message("telegram", str(CHAT["id"]), str(p["message_id"]))

        eventually(lambda: linked(parts[-1]), what="the last part's link (stored right after it is sent)")
        assert [linked(p) for p in parts] == [answer_id] * len(parts)  # replies/reactions on any part count


class FailingHandle:
    """The real service, except that answering raises (a bug or an outage below the service)."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def answer(self, delivery):
        raise RuntimeError("boom in the service")


def test_exception_in_a_handler_tells_the_user_and_is_logged(tmp_path, fake, caplog):
    bot = BotProcess(tmp_path, fake, service_wrapper=FailingHandle)
    with caplog.at_level(logging.ERROR, logger="adapters.delivery"), bot.running() as client:
        fake.push_updates(message(update_id=1, message_id=10, chat=CHAT, text="What is a widget audit?"))
        answer = answers_in(fake, CHAT["id"])[0]
        assert answer["text"] == FAILED
        assert [m["text"] for m in fake.bot_messages(CHAT["id"])] == [FAILED]  # the placeholder became it
        failed = lambda r: "answering telegram message 10 failed" in r.getMessage()  # noqa: E731
        eventually(lambda: any(failed(r) for r in caplog.records), what="the log")
        assert "boom in the service" in str(next(r for r in caplog.records if failed(r)).exc_info[1])
        assert 'hypa_errors_total{component="telegram_answer"} 1.0' in client.get("/metrics").text
        eventually(lambda: bot.store.owed_messages("telegram") == [], what="the lease completed")


class FailingStoreWrites:
    """The real service, except that linking messages raises (a locked database)."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def link_platform_message(self, *args):
        raise RuntimeError("database is locked")


def test_failing_bookkeeping_writes_still_give_exactly_one_answer(tmp_path, fake):
    """A failed message link may not cost the user the answer, or add an apology next to it."""
    bot = BotProcess(tmp_path, fake, service_wrapper=FailingStoreWrites)
    with bot.running() as client:
        fake.push_updates(message(update_id=1, message_id=10, chat=CHAT, text="What is the civil penalty for a first violation?"))
        answer = answers_in(fake, CHAT["id"])[0]
        assert "$500" in answer["text"] and answer["reply_markup"]
        eventually(lambda: fake.pending_updates() == 0, what="the update confirmed")
        time.sleep(0.2)
        assert [m["text"] for m in fake.bot_messages(CHAT["id"])] == [answer["text"]]  # no apology as well
        assert 'hypa_errors_total{component="telegram_link"} 1.0' in client.get("/metrics").text


class FailingClaims(FailingStoreWrites):
    """The real service, except that the message cannot be recorded (the database is down)."""

    def claim(self, message):
        raise RuntimeError("database is locked")

    def link_platform_message(self, *args):
        return self._inner.link_platform_message(*args)


def test_a_question_that_cannot_be_recorded_gets_an_apology_and_is_counted(tmp_path, fake):
    bot = BotProcess(tmp_path, fake, service_wrapper=FailingClaims)
    with bot.running() as client:
        fake.push_updates(message(update_id=1, message_id=10, chat=CHAT, text="What is a widget audit?"))
        assert answers_in(fake, CHAT["id"])[0]["text"] == FAILED
        time.sleep(0.2)
        assert [m["text"] for m in fake.bot_messages(CHAT["id"])] == [FAILED]  # no placeholder was left
        assert 'hypa_errors_total{component="telegram_claim"} 1.0' in client.get("/metrics").text


def test_handling_does_not_block_other_chats(tmp_path, fake):
    """A slow answer (CPU-bound, in a worker thread) does not hold up another chat's answer."""
    release = threading.Event()

    class SlowForOneChat:
        inner = toy_generator()

        def generate(self, question, contexts, history=(), query_vector=None, asked=None, asking_vectors=None):
            if "slow" in question:
                assert release.wait(10), "never released"
            return self.inner.generate(question, contexts, history, query_vector)

    bot = BotProcess(tmp_path, fake, generator=SlowForOneChat())
    other = private_chat(5151)
    with bot.running():
        fake.push_updates(
            message(update_id=1, message_id=10, chat=CHAT, text="slow: what is the civil penalty?"),
            message(update_id=2, message_id=11, chat=other, text="What is a widget audit?", from_user=user(5151)),
        )
        answers_in(fake, other["id"])  # answered while the first chat's answer is still being computed
        assert not [m for m in fake.bot_messages(CHAT["id"]) if not m["text"].startswith("⏳")]
        release.set()
        assert "$500" in answers_in(fake, CHAT["id"])[0]["text"]


def test_at_most_two_answers_are_computed_at_once(tmp_path, fake):
    """CPU-bound answers beyond MAX_CONCURRENT_ANSWERS wait their turn instead of starving the loop."""
    from adapters.delivery import MAX_CONCURRENT_ANSWERS

    release = threading.Event()
    lock = threading.Lock()
    running, most = [0], [0]

    class CountingGenerator:
        inner = toy_generator()

        def generate(self, question, contexts, history=(), query_vector=None, asked=None, asking_vectors=None):
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            try:
                assert release.wait(10), "never released"
                return self.inner.generate(question, contexts, history, query_vector)
            finally:
                with lock:
                    running[0] -= 1

    bot = BotProcess(tmp_path, fake, generator=CountingGenerator())
    chats = [private_chat(6000 + i) for i in range(4)]
    with bot.running():
        fake.push_updates(*(
            message(update_id=20 + i, message_id=30 + i, chat=c, text="What is the civil penalty?", from_user=user(c["id"]))
            for i, c in enumerate(chats)
        ))
        eventually(lambda: running[0] == MAX_CONCURRENT_ANSWERS, what="two answers in progress")
        time.sleep(0.3)  # the other two must still be waiting
        assert running[0] == MAX_CONCURRENT_ANSWERS
        release.set()
        for c in chats:
            assert "$500" in answers_in(fake, c["id"])[0]["text"]
    assert most[0] == MAX_CONCURRENT_ANSWERS


# --- groups and threads ---------------------------------------------------------------------------


def _mention(update_id: int, message_id: int, text: str, **kw) -> dict:
    return message(update_id=update_id, message_id=message_id, chat=GROUP, text=text,
                   entities=mention_entities(text), **kw)


def test_group_answers_only_mentions_and_replies_and_follow_ups_use_the_thread(tmp_path, fake):
    bot = BotProcess(tmp_path, fake)
    with bot.running():
        fake.push_updates(message(update_id=1, message_id=100, chat=GROUP, text="How must a seller notify buyers?"))
        eventually(lambda: fake.pending_updates() == 0, what="update 1")
        first_q = f"@{BOT_USERNAME} I want to know how a seller must notify buyers."
        fake.push_updates(_mention(2, 101, first_q))
        first = answers_in(fake, GROUP["id"])[0]
        assert first["reply_to_message_id"] == 101  # not 100: the unaddressed message was ignored
        assert bot.store.count_rows("messages") == 1
        # a reply to the bot's answer, without a mention: a follow-up in the same thread
        follow_up = message(update_id=3, message_id=102, chat=GROUP, text="What are the methods?",
                            reply_to={**first, "from": fake.bot_user})
        fake.push_updates(follow_up)
        second = answers_in(fake, GROUP["id"], count=2)[1]
        a1, a2 = bot.store.answers()
        assert a1.record.question == "I want to know how a seller must notify buyers."  # mention stripped
        assert a2.thread_pk == a1.thread_pk and a2.record.history_turns == 1
        assert "seller must notify buyers" in a2.record.standalone_question  # the history was used
        assert "Toy Code § 1-102(a)" in second["text"]  # the notice provision, found through the history
        assert bot.service.thread_for_answer(a2.id) == "101"  # the chain's root message


def test_restart_keeps_thread_history(tmp_path, fake):
    first_bot = BotProcess(tmp_path, fake)
    with first_bot.running():
        fake.push_updates(message(update_id=1, message_id=10, chat=CHAT, text="I want to know how a seller must notify buyers."))
        first = answers_in(fake, CHAT["id"])[0]
    restarted = BotProcess(tmp_path, fake)  # a new process: new service, new application, same SQLite file
    with restarted.running():
        fake.push_updates(message(update_id=2, message_id=12, chat=CHAT, text="What are the methods?",
                                  reply_to={**first, "from": fake.bot_user}))
        answers_in(fake, CHAT["id"], count=2)
        follow = restarted.store.answers()[-1]
        assert follow.record.history_turns == 1
        assert "seller must notify buyers" in follow.record.standalone_question


# --- feedback -------------------------------------------------------------------------------------


def test_buttons_record_feedback_and_every_callback_is_answered(tmp_path, fake):
    bot = BotProcess(tmp_path, fake)
    with bot.running():
        fake.push_updates(message(update_id=1, message_id=10, chat=CHAT, text="What is a widget audit?"))
        answer = answers_in(fake, CHAT["id"])[0]
        answer_id = bot.store.answers()[0].id
        up, down = (b["callback_data"] for b in answer["reply_markup"]["inline_keyboard"][0])
        fake.push_updates(callback_query(update_id=2, data=down, message_=answer))
        fake.wait_for("answerCallbackQuery")
        assert bot.store.current_rating(answer_id, "4242") == -1
        fake.push_updates(callback_query(update_id=3, data=up, message_=answer))
        fake.wait_for("answerCallbackQuery", count=2)
        fake.push_updates(callback_query(update_id=4, data=up, message_=answer))  # a double click
        fake.push_updates(callback_query(update_id=5, data="fb:+:no-such-answer", message_=answer))
        fake.push_updates(callback_query(update_id=6, data="something else", message_=answer))
        calls = fake.wait_for("answerCallbackQuery", count=5)
        texts = {c.params["callback_query_id"]: c.params.get("text", "") for c in calls}
        assert "rated 👎" in texts["cbq-2"] and "rated 👍" in texts["cbq-3"]
        assert "already" in texts["cbq-4"]
        assert "no longer know" in texts["cbq-5"] and "no longer supported" in texts["cbq-6"]
        assert bot.store.current_rating(answer_id, "4242") == 1
        assert [(c.rating, c.source) for c in bot.store.feedback_log(answer_id)] == [(-1, "button"), (1, "button")]


def test_a_rating_counts_only_from_the_chat_where_the_answer_was_posted(tmp_path, fake):
    """Issue 13: a press from chat 611 rating an answer shown in chat 605, a press carrying a Slack
    answer's id, and a press with no message were all stored."""
    bot = BotProcess(tmp_path, fake)
    shown_in, elsewhere = private_chat(605), private_chat(611)
    with bot.running():
        fake.push_updates(message(update_id=1, message_id=10, chat=shown_in, text="What is a widget audit?",
                                  from_user=user(605)))
        answer = answers_in(fake, 605)[0]
        answer_id = bot.store.answers()[0].id
        up = answer["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        slack = bot.service.handle(IncomingMessage("slack", "T1", "C1", "1.0", "U1", "What is a widget audit?", "1.0"))
        no_message = callback_query(update_id=4, data=up, message_=answer, from_user=user(605))
        del no_message["callback_query"]["message"]
        no_message["callback_query"]["inline_message_id"] = "AgAAAB0"
        fake.push_updates(
            callback_query(update_id=2, data=up, message_={**answer, "chat": elsewhere}, from_user=user(611)),
            callback_query(update_id=3, data=f"fb:+:{slack.answer_id}", message_=answer, from_user=user(605)),
            no_message,
        )
        refused = fake.wait_for("answerCallbackQuery", count=3)
        assert [c.params["text"] for c in refused] == [NOT_SHOWN_HERE] * 3
        assert bot.store.count_rows("feedback") == bot.store.count_rows("feedback_acts") == 0
        fake.push_updates(callback_query(update_id=5, data=up, message_=answer, from_user=user(605)))
        assert "rated 👍" in fake.wait_for("answerCallbackQuery", count=4)[-1].params["text"]
        assert bot.store.current_rating(answer_id, "605") == 1


def test_thumbs_reaction_rates_the_answer_and_removing_it_removes_the_rating(tmp_path, fake):
    bot = BotProcess(tmp_path, fake)
    with bot.running():
        fake.push_updates(message(update_id=1, message_id=10, chat=CHAT, text="What is a widget audit?"))
        answer = answers_in(fake, CHAT["id"])[0]
        answer_id = bot.store.answers()[0].id
        fake.push_updates(reaction(update_id=2, chat=CHAT, message_id=answer["message_id"], old=[], new=["👍"]))
        eventually(lambda: bot.store.current_rating(answer_id, "4242") == 1, what="the 👍 rating")
        fake.push_updates(reaction(update_id=3, chat=CHAT, message_id=answer["message_id"], old=["👍"], new=[]))
        eventually(lambda: len(bot.store.feedback_log(answer_id)) == 2, what="the removal")
        assert bot.store.current_rating(answer_id, "4242") == 0
        assert [(c.rating, c.source) for c in bot.store.feedback_log(answer_id)] == [(1, "reaction"), (0, "reaction")]
        # a reaction on a message that is not an answer is ignored
        fake.push_updates(reaction(update_id=4, chat=CHAT, message_id=10, old=[], new=["👎"]))
        eventually(lambda: fake.pending_updates() == 0, what="update 4")
        time.sleep(0.3)
        assert len(bot.store.feedback_log()) == 2


def test_a_reaction_just_after_a_click_counts_though_telegram_dates_it_in_whole_seconds(tmp_path, fake):
    """Issue 13: a 👎 reaction 0.4 s after a 👍 click was dropped: the click was timed by the bot's clock,
    the reaction by Telegram's whole-second `date`. Update ids order both on Telegram's one clock."""
    bot = BotProcess(tmp_path, fake)
    with bot.running():
        fake.push_updates(message(update_id=1, message_id=10, chat=CHAT, text="What is a widget audit?"))
        answer = answers_in(fake, CHAT["id"])[0]
        answer_id = bot.store.answers()[0].id
        up = answer["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        clicked_at = time.time()
        fake.push_updates(callback_query(update_id=2, data=up, message_=answer))
        fake.wait_for("answerCallbackQuery")
        assert bot.store.current_rating(answer_id, "4242") == 1
        thumbs_down = reaction(update_id=3, chat=CHAT, message_id=answer["message_id"], old=[], new=["👎"])
        thumbs_down["message_reaction"]["date"] = int(clicked_at)  # the same second as the click, truncated
        fake.push_updates(thumbs_down)
        eventually(lambda: bot.store.count_rows("feedback_acts") == 2, what="the reaction to be processed")
        assert bot.store.current_rating(answer_id, "4242") == -1


# --- crash recovery: leases ---------------------------------------------------------------------


def test_a_reply_shown_just_before_a_crash_is_not_shown_twice(tmp_path, fake):
    """The process died after editing the placeholder into the answer, before completing the lease:
    the recovery sweep edits it into the same text, Telegram answers "message is not modified", and
    that counts as shown (no second message)."""
    bot = BotProcess(tmp_path, fake)
    bot.store.lease = timedelta(seconds=1)
    with bot.running():
        fake.push_updates(message(update_id=1, message_id=10, chat=CHAT, text="What is the civil penalty for a first violation?"))
        answer = answers_in(fake, CHAT["id"])[0]
        eventually(lambda: bot.store.owed_messages() == [], what="the lease completed")
        with bot.store.engine.begin() as conn:  # as if the process had died before completing it
            messages = Base.metadata.tables["messages"]
            conn.execute(messages.update().values(delivered_at=None, claimed_by="dead",
                                                  claimed_at=datetime.now(UTC) - timedelta(minutes=1)))
        eventually(lambda: bot.store.owed_messages() == [], what="the sweep to finish it")
        edits = fake.calls_of("editMessageText")
        assert [c.status for c in edits] == [200, 400] and edits[1].params["text"] == answer["text"]
        assert [m["text"] for m in fake.bot_messages(CHAT["id"])] == [answer["text"]]
        assert len(bot.store.answers()) == 1


def test_a_redelivered_question_whose_worker_died_before_answering_is_answered_in_its_placeholder(tmp_path, fake):
    bot = BotProcess(tmp_path, fake)
    bot.store.lease = timedelta(seconds=1)
    question = message(update_id=1, message_id=10, chat=CHAT, text="What is the civil penalty for a first violation?")
    incoming = IncomingMessage("telegram", "telegram", str(CHAT["id"]), "10", str(CHAT["id"]),
                               "What is the civil penalty for a first violation?", "10")
    claim = bot.store.claim_message(incoming, holder="a-process-that-died")
    fake.remember_chat(CHAT)
    placeholder = fake._send({"chat_id": CHAT["id"], "text": PLACEHOLDER})  # posted by the dead process
    bot.store.set_placeholder(claim.message_pk, str(placeholder["message_id"]))
    with bot.running():
        fake.push_updates(question)  # redelivered: taken over (or dropped while the sweep finishes it)
        answer = answers_in(fake, CHAT["id"])[0]
        assert answer["message_id"] == placeholder["message_id"] and "$500" in answer["text"]
        eventually(lambda: bot.store.owed_messages() == [], what="the lease completed")
        assert len(fake.bot_messages(CHAT["id"])) == 1 and len(bot.store.answers()) == 1


class SlowClaims:
    """The real service, except that recording a question waits until the test releases it."""

    def __init__(self, inner):
        self._inner = inner
        self.release = threading.Event()

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def claim(self, message):
        assert self.release.wait(10), "never released"
        return self._inner.claim(message)


def test_polling_confirms_a_question_to_telegram_only_once_it_is_recorded(tmp_path, fake):
    """Telegram forgets an update once the next getUpdates confirms it: a crash in between must not
    lose the question, so the bot asks for the next batch only after recording this one."""
    slow = []
    bot = BotProcess(tmp_path, fake, service_wrapper=lambda s: slow.append(SlowClaims(s)) or slow[0])
    with bot.running():
        fake.push_updates(message(update_id=7, message_id=10, chat=CHAT, text="What is a widget audit?"))
        fake.wait_for("getUpdates", where=lambda c: True)
        time.sleep(0.5)  # PTB would have confirmed the update by now
        assert fake.pending_updates() == 1  # not confirmed: the question is not recorded yet
        slow[0].release.set()
        eventually(lambda: fake.pending_updates() == 0, what="the confirmation")
        assert "widget audit" in answers_in(fake, CHAT["id"])[0]["text"]


def test_the_webhook_answers_telegram_only_once_the_question_is_recorded(tmp_path, fake):
    slow = []
    bot = BotProcess(tmp_path, fake, webhook=True, service_wrapper=lambda s: slow.append(SlowClaims(s)) or slow[0])
    update = message(update_id=8, message_id=10, chat=CHAT, text="What is a widget audit?")
    fake.remember_chat(CHAT)
    with bot.running() as client:
        posted = []
        poster = threading.Thread(target=lambda: posted.append(client.post(
            "/telegram/webhook", json=update, headers={"X-Telegram-Bot-Api-Secret-Token": SECRET})))
        poster.start()
        time.sleep(0.5)
        assert posted == []  # no 200 yet: a crash now and Telegram delivers the update again
        slow[0].release.set()
        poster.join(10)
        assert posted[0].status_code == 200
        assert "widget audit" in answers_in(fake, CHAT["id"])[0]["text"]


# --- webhook mode ---------------------------------------------------------------------------------


def test_webhook_mode_registers_the_webhook_and_checks_the_secret(tmp_path, fake):
    bot = BotProcess(tmp_path, fake, webhook=True)
    update = message(update_id=1, message_id=10, chat=CHAT, text="What is the civil penalty for a first violation?")
    fake.remember_chat(CHAT)
    with bot.running() as client:
        hook = fake.wait_for("setWebhook")[0].params
        assert hook["url"] == WEBHOOK_URL and hook["secret_token"] == SECRET
        assert set(hook["allowed_updates"]) >= {"message", "callback_query", "message_reaction"}
        assert fake.calls_of("getUpdates") == []  # no polling in webhook mode
        path = "/telegram/webhook"
        assert client.post(path, json=update).status_code == 403
        assert client.post(path, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "wrong"}).status_code == 403
        time.sleep(0.2)
        assert fake.calls_of("sendMessage") == []  # rejected requests were never processed
        good = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
        assert client.post(path, content=b"{not json", headers=good).status_code == 400
        for shape in ({"update_id": 5, "message": "text"}, {"update_id": 6, "message": {"message_id": 1}},
                      {"update_id": 7, "callback_query": [1]}, [update]):
            assert client.post(path, json=shape, headers=good).status_code == 400, shape  # not a 500
        assert client.post(path, json=update, headers=good).status_code == 200
        assert "$500" in answers_in(fake, CHAT["id"])[0]["text"]
        assert client.post(path, json=update, headers=good).status_code == 200  # Telegram redelivering
        time.sleep(0.2)
        assert len(fake.calls_of("sendMessage")) == 1 and len(bot.store.answers()) == 1
        assert client.get("/readyz").json()["ready"] is True


def test_an_unreachable_api_while_polling_logs_one_line_per_failure_without_a_traceback(tmp_path, fake, caplog):
    """python-telegram-bot logs a full traceback for every failed getUpdates (PTB retries with
    back-off); one line per failure is what an operator needs."""
    bot = BotProcess(tmp_path, fake)
    with caplog.at_level(logging.DEBUG, logger="telegram"), caplog.at_level(logging.INFO, logger="adapters"), \
            bot.running():
        eventually(lambda: fake.calls_of("getUpdates"), what="the first poll")
        fake.fail_next("getUpdates", 502, "Bad Gateway")
        fake.fail_next("getUpdates", 502, "Bad Gateway")
        eventually(lambda: len([c for c in fake.calls_of("getUpdates") if c.status == 502]) == 2, what="two failed polls")
        failed_at = fake.calls_of("getUpdates")[-1].at
        eventually(lambda: any(c.status == 200 and c.at > failed_at for c in fake.calls_of("getUpdates")),
                   what="polling to recover")
        fake.push_updates(message(update_id=1, message_id=10, chat=CHAT, text="What is a widget audit?"))
        answers_in(fake, CHAT["id"])  # and the bot still answers
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r for r in warnings if r.exc_info] == []  # no traceback, from PTB or from us
    polling = [r.getMessage() for r in warnings if "getUpdates" in r.getMessage()]
    assert len(polling) == 2 and all("\n" not in line for line in polling)
    assert "(NetworkError: Bad Gateway), 1 time(s) in a row; retrying in 1 s" in polling[0]
    assert "2 time(s) in a row; retrying in 1.5 s" in polling[1]  # PTB's back-off: 1 s, x1.5, at most 30 s
    assert any("getUpdates answers again after 2 failed poll(s)" in r.getMessage() for r in caplog.records)


def test_a_long_outage_stays_a_few_log_lines(caplog):
    """40 failed polls in a row (PTB's back-off reaches its 30 s cap): lines for the 1st, 2nd, 4th,
    ..., 32nd, then one when polling works again."""
    from telegram.error import NetworkError

    from adapters.telegram.polling import PollingHealth

    health = PollingHealth()
    with caplog.at_level(logging.INFO, logger="adapters.telegram.polling"):
        for _ in range(40):
            health.failed(NetworkError("httpx.ConnectError: All connection attempts failed"))
        health.answered()
    lines = [r.getMessage() for r in caplog.records]
    assert [int(line.split(", ")[1].split(" ")[0]) for line in lines[:-1]] == [1, 2, 4, 8, 16, 32]
    assert "retrying in 30 s" in lines[-2] and lines[-1].endswith("after 40 failed poll(s)")
    assert health.failures == 0 and health.next_delay_s == 0


def test_sources_link_to_the_official_text_in_html_telegram_accepts(tmp_path, fake):
    from core.links import CitationLinks, DocumentLinks, LinkingGenerator
    from hypa_testkit.fakes.telegram_server import telegram_html

    links = CitationLinks(lambda collection: {"toy-doc": DocumentLinks.single('https://toy.example/code?v=2&s={section}')})
    bot = BotProcess(tmp_path, fake, generator=LinkingGenerator(toy_generator(), links))
    with bot.running():
        fake.push_updates(message(update_id=1, message_id=10, chat=CHAT, text="What is the civil penalty for a first violation?"))
        answer = answers_in(fake, CHAT["id"])[0]
        assert ("https://toy.example/code?v=2&s=1-103", "Toy Code § 1-103") in telegram_html(answer["text"]).links
        assert '<a href="https://toy.example/code?v=2&amp;s=1-103">Toy Code § 1-103</a>' in answer["text"]
