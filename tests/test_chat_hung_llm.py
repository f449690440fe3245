"""Slack and Telegram with an Anthropic endpoint that accepts the connection and never answers.

The real bots (slack-bolt + slack_sdk, python-telegram-bot) against their fake APIs, and the real
anthropic SDK against hypa_testkit/fakes/anthropic_server.py. The client's timeouts are long (20 s a call,
40 s in all, as a deployment would have them); the chat wait (HYPA_CHAT_ANSWER_WAIT_S) is 1 s. A person
must see the quoted, cited answer within a few seconds, and Claude's answer in its place once it comes.
The lease on answering the message (adapters/delivery.py) completes once the quoted answer is shown:
it does not wait for Claude.
"""
from __future__ import annotations

import threading
import time

import pytest

from bot.settings import Settings
from bot.wiring import answer_generator
from hypa_testkit.fakes.anthropic_server import FakeAnthropic, cites_first_document, held, never_answers
from hypa_testkit.fakes.slack_server import BOT_USER_ID, FakeSlack, block_texts, envelope, mention_event
from hypa_testkit.fakes.telegram_server import FakeTelegram, message, private_chat
from hypa_testkit.slack_harness import running_bot
from hypa_testkit.toy import toy_generator
from tests.test_telegram_bot import BotProcess, eventually

pytestmark = pytest.mark.filterwarnings("ignore:Deprecated since version v22.2:DeprecationWarning")

WAIT_S = 1.0
SLOW_CLIENT = {"llm_timeout_s": 20.0, "llm_total_budget_s": 40.0, "llm_max_retries": 1}
QUESTION = "What is the civil penalty for a first violation?"


@pytest.fixture
def anthropic():
    with FakeAnthropic() as server:
        yield server


# --- Slack ------------------------------------------------------------------------------------------


def test_slack_shows_the_quoted_answer_within_the_wait_then_updates_it_to_claudes(tmp_path, anthropic):
    gate = threading.Event()
    anthropic.enqueue(lambda request: held(cites_first_document(request), gate))
    with FakeSlack() as slack, running_bot(
        tmp_path, slack, anthropic_api_key="test-key", anthropic_base_url=anthropic.base_url,
        chat_answer_wait_s=WAIT_S, **SLOW_CLIENT,
    ) as bot:
        event = mention_event(f"<@{BOT_USER_ID}> {QUESTION}", channel="C0HUNG")
        sent = time.monotonic()
        assert bot.slack.send(envelope(event)).status_code == 200
        edited = slack.wait_for(
            lambda: [m for m in slack.thread("C0HUNG", event["ts"]) if m.edits >= 1], 8.0, "the quoted answer"
        )[0]
        first_visible_s = time.monotonic() - sent
        shown = "\n".join(block_texts(edited.blocks))
        assert "$500" in shown and "has not answered within 1 s" in shown
        assert first_visible_s < WAIT_S + 3.0
        # The person has a complete answer: the lease is done while Claude is still thinking.
        slack.wait_for(lambda: bot.store.owed_messages("slack") == [], 5.0, "the lease completed")
        gate.set()  # Claude answers now
        slack.wait_for(lambda: edited.edits >= 2, 10.0, "Claude's answer in place of the quoted one")
        final = "\n".join(block_texts(edited.blocks))
        assert "The provision says so." in final and "has not answered" not in final
        assert len(slack.thread("C0HUNG", event["ts"])) == 1  # the same message, edited: no second answer
        [stored] = bot.store.answers()
        assert stored.record.model == "claude-sonnet-5-5" and stored.record.text.startswith("The provision says so.")


def test_slack_with_a_hung_endpoint_answers_every_asker_within_the_wait_and_opens_the_circuit(tmp_path, anthropic):
    anthropic.default = never_answers()
    with FakeSlack() as slack, running_bot(
        tmp_path, slack, anthropic_api_key="test-key", anthropic_base_url=anthropic.base_url,
        chat_answer_wait_s=WAIT_S, circuit_failure_threshold=2, **SLOW_CLIENT,
    ) as bot:
        events = [mention_event(f"<@{BOT_USER_ID}> {QUESTION} #{i}", channel=f"C0H{i}") for i in range(4)]
        sent = time.monotonic()
        for e in events:
            bot.slack.send(envelope(e))
        for e in events:
            slack.wait_for(lambda e=e: any(m.edits for m in slack.thread(e["channel"], e["ts"])), 10.0, "an answer")
        assert time.monotonic() - sent < 2 * WAIT_S + 4.0  # two answer slots: at most two waits in a row
        breaker = bot.components.generator.breaker
        assert breaker.state == breaker.OPEN
        assert len(anthropic.message_requests) <= 3  # once open, nobody waits on Claude any more
        anthropic.release_held()  # the hung calls end (504), so shutting down does not wait for them


# --- Telegram ---------------------------------------------------------------------------------------


def claude_with_fallback(anthropic: FakeAnthropic, data_dir) -> object:
    """Claude with the quoted answer as fallback, wired from settings as `hypa serve telegram` does."""
    settings = Settings(_env_file=None, data_dir=data_dir, anthropic_api_key="test-key",
                        anthropic_base_url=anthropic.base_url, **SLOW_CLIENT)
    return answer_generator(settings, toy_generator())


def test_telegram_shows_the_quoted_answer_within_the_wait_then_edits_it_into_claudes(tmp_path, anthropic):
    gate = threading.Event()
    anthropic.enqueue(lambda request: held(cites_first_document(request), gate))
    chat = private_chat(5151)
    with FakeTelegram() as telegram:
        bot = BotProcess(tmp_path, telegram, generator=claude_with_fallback(anthropic, tmp_path))
        bot.service.answer_wait_s = WAIT_S
        with bot.running():
            sent = time.monotonic()
            telegram.push_updates(message(update_id=1, message_id=10, chat=chat, text=QUESTION))
            first = eventually(
                lambda: [m for m in telegram.bot_messages(chat["id"]) if "$500" in m["text"]], 8.0, "the quoted answer"
            )[0]
            assert time.monotonic() - sent < WAIT_S + 3.0
            assert "has not answered within 1 s" in first["text"]
            eventually(lambda: bot.store.owed_messages("telegram") == [], 5.0, "the lease completed before Claude answers")
            gate.set()
            final = eventually(
                lambda: [m for m in telegram.bot_messages(chat["id"]) if "The provision says so." in m["text"]],
                10.0, "Claude's answer",
            )[0]
            assert final["message_id"] == first["message_id"]  # edited in place (editMessageText)
            assert len(telegram.bot_messages(chat["id"])) == 1
            edits = [c for c in telegram.calls_of("editMessageText") if c.params["message_id"] == first["message_id"]]
            assert len(edits) == 2
            assert final["reply_markup"]["inline_keyboard"][0][0]["callback_data"].endswith(bot.store.answers()[0].id)


def test_telegram_claudes_shorter_answer_replaces_a_quoted_answer_of_several_messages(tmp_path, anthropic):
    """The quoted answer needed several messages (Telegram's 4,096-character limit); Claude's fits in
    one: the first message is edited into it (with the buttons), the others are deleted."""
    from tests.test_telegram_bot import LongAnswerGenerator

    gate = threading.Event()
    anthropic.enqueue(lambda request: held(cites_first_document(request), gate))
    chat = private_chat(5252)
    settings = Settings(_env_file=None, data_dir=tmp_path, anthropic_api_key="test-key",
                        anthropic_base_url=anthropic.base_url, **SLOW_CLIENT)
    generator = answer_generator(settings, LongAnswerGenerator(toy_generator()))
    with FakeTelegram() as telegram:
        bot = BotProcess(tmp_path, telegram, generator=generator)
        bot.service.answer_wait_s = WAIT_S
        with bot.running():
            telegram.push_updates(message(update_id=1, message_id=10, chat=chat, text=QUESTION))
            def shown(*, parts: int | None = None, at_least: int = 1) -> list[dict] | None:
                messages = telegram.bot_messages(chat["id"])
                enough = len(messages) == parts if parts is not None else len(messages) >= at_least
                return messages if enough and messages[-1].get("reply_markup") else None

            quoted = eventually(lambda: shown(at_least=3), 8.0, "the quoted answer's parts")
            assert "has not answered within 1 s" in "".join(m["text"] for m in quoted)
            eventually(lambda: bot.store.owed_messages("telegram") == [], 5.0, "the lease completed")
            gate.set()
            final = eventually(lambda: shown(parts=1), 10.0, "Claude's answer alone, with the buttons")
            assert final[0]["message_id"] == quoted[0]["message_id"] and "The provision says so." in final[0]["text"]
            assert final[0]["reply_markup"]["inline_keyboard"][0][0]["callback_data"].endswith(bot.store.answers()[0].id)
            deleted = {c.params["message_id"] for c in telegram.calls_of("deleteMessage")}
            assert deleted == {m["message_id"] for m in quoted[1:]}
