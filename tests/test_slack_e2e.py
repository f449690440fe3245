"""The Slack bot end to end: signed Events API requests over HTTP -> real bolt app -> real service on
SQLite -> real slack_sdk client -> fake Slack Web API. Assertions are on what Slack received and on
what the database holds."""
from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from adapters.slack.blocks import (
    ACTION_DOWNVOTE,
    ACTION_UPVOTE,
    FAILURE_TEXT,
    NOT_SHOWN_HERE_TEXT,
    PLACEHOLDER_TEXT,
    UNKNOWN_ANSWER_TEXT,
)
from adapters.slack.events import BotIdentity, to_incoming
from adapters.slack.replies import PLACEHOLDER_EVENT
from core.conversation import IncomingMessage
from hypa_testkit.fakes.slack_server import (
    BOT_USER_ID,
    FakeSlack,
    block_actions,
    block_texts,
    envelope,
    mention_event,
    message_event,
    new_ts,
    reaction_event,
)
from hypa_testkit.slack_harness import BOT_TOKEN, RunningBot, running_bot

QUESTION = f"<@{BOT_USER_ID}> What is the civil penalty for a first violation?"


@pytest.fixture(scope="module")
def shared_fake():
    with FakeSlack() as server:
        yield server


@pytest.fixture(scope="module")
def shared_bot(tmp_path_factory, shared_fake: FakeSlack):
    """One running bot for the module (start-up is the slow part); tests use distinct threads."""
    with running_bot(tmp_path_factory.mktemp("slack-bot"), shared_fake) as running:
        yield running


@pytest.fixture
def fake(shared_fake: FakeSlack):
    shared_fake.reset()
    yield shared_fake


@pytest.fixture
def bot(shared_bot: RunningBot, fake: FakeSlack):
    yield shared_bot
    fake.wait_quiet(0.2)  # let this test's background work finish before the next one starts


@pytest.fixture
def own_fake():
    """A separate fake for tests that run their own bots."""
    with FakeSlack() as server:
        yield server


def answer_in_thread(fake: FakeSlack, channel: str, thread_ts: str, timeout_s: float = 10.0):
    """The bot's message in a thread once the placeholder has been replaced (chat.update)."""

    def done():
        return [m for m in fake.thread(channel, thread_ts) if m.edits > 0]

    return fake.wait_for(done, timeout_s, what=f"an answer in thread {thread_ts}")[-1]


def shown_text(blocks: list[dict]) -> str:
    return "\n".join(block_texts(blocks))


def buttons(blocks: list[dict]) -> dict[str, str]:
    return {e["action_id"]: e["value"] for b in blocks if b["type"] == "actions" for e in b["elements"]}


def metric(bot: RunningBot, sample: str) -> float:
    """The value of one Prometheus sample (e.g. 'hypa_errors_total{component="x"}') at /metrics, 0 if absent."""
    for line in httpx.get(f"{bot.base_url}/metrics").text.splitlines():
        if line.startswith(sample + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


DUPLICATES = 'hypa_requests_total{outcome="duplicate",platform="slack"}'
ANSWERED = 'hypa_requests_total{outcome="answered",platform="slack"}'


def ask(bot: RunningBot, fake: FakeSlack, text: str = QUESTION, **event_fields):
    event = mention_event(text, **event_fields)
    response = bot.slack.send(envelope(event))
    assert response.status_code == 200
    message = answer_in_thread(fake, event["channel"], event.get("thread_ts") or event["ts"])
    return event, message


# --- answering ------------------------------------------------------------------------------------


def test_mention_is_acked_then_answered_in_its_thread_with_sources_and_buttons(bot, fake):
    event = mention_event(QUESTION, channel="C0LEGAL")
    started = time.monotonic()
    response = bot.slack.send(envelope(event))
    ack_s = time.monotonic() - started
    assert response.status_code == 200 and ack_s < 1.0

    message = answer_in_thread(fake, "C0LEGAL", event["ts"])
    placeholder = fake.calls_to("chat.postMessage")[0]
    assert placeholder.params["thread_ts"] == event["ts"] and placeholder.params["text"] == PLACEHOLDER_TEXT
    assert placeholder.token == BOT_TOKEN
    update = fake.calls_to("chat.update")[0]
    assert update.params["ts"] == message.ts and len(fake.thread("C0LEGAL", event["ts"])) == 1
    text = shown_text(message.blocks)
    assert "$500" in text and "*[1]* Toy Code § 1-103" in text  # cites the provision with its label
    answer_id = buttons(message.blocks)[ACTION_UPVOTE]
    # 👍 / 👎 / "Ask a person" (issue 15), all carrying the answer id
    assert buttons(message.blocks) == {ACTION_UPVOTE: answer_id, ACTION_DOWNVOTE: answer_id, "ask_person": answer_id}
    assert "$500" in update.params["text"]  # notification fallback

    stored = bot.store.get_answer(answer_id)
    assert stored is not None and stored.record.question == "What is the civil penalty for a first violation?"
    assert bot.store.answer_for_platform_message("slack", "C0LEGAL", message.ts) == answer_id
    assert len(fake.calls_to("chat.postMessage")) == 1  # the placeholder; the answer replaced it


def test_follow_up_in_the_bots_thread_needs_no_mention_and_uses_the_history(bot, fake):
    first, _ = ask(bot, fake)
    follow_up = message_event("And for each subsequent violation?", thread_ts=first["ts"])
    assert bot.slack.send(envelope(follow_up)).status_code == 200

    def two_answers():
        answered = [m for m in fake.thread("C0GENERAL", first["ts"]) if m.edits]
        return answered if len(answered) == 2 else None

    second = fake.wait_for(two_answers, what="the follow-up answer")[-1]
    answer_id = buttons(second.blocks)[ACTION_UPVOTE]
    record = bot.store.get_answer(answer_id).record
    assert record.history_turns == 1  # the first question and answer were passed along
    assert "$1,500" in shown_text(second.blocks)


def test_thread_replies_elsewhere_and_plain_channel_messages_are_left_alone(bot, fake):
    stranger_thread = new_ts()
    bot.slack.send(envelope(message_event("what about penalties?", thread_ts=stranger_thread)))
    bot.slack.send(envelope(message_event("lunch anyone?")))
    fake.wait_quiet(0.25)
    assert fake.calls_to("chat.postMessage") == []


def test_direct_message_is_answered_in_a_thread(bot, fake):
    dm = message_event("How many business days before selling must a seller notify?", channel="D0ALICE",
                       channel_type="im")
    assert bot.slack.send(envelope(dm)).status_code == 200
    message = answer_in_thread(fake, "D0ALICE", dm["ts"])
    assert "ten business days" in shown_text(message.blocks)


def test_one_message_delivered_as_app_mention_and_message_is_answered_once(bot, fake):
    ts = new_ts()
    bot.slack.send(envelope(mention_event(QUESTION, ts=ts)))
    bot.slack.send(envelope(message_event(QUESTION, ts=ts)))
    answer_in_thread(fake, "C0GENERAL", ts)
    fake.wait_quiet(0.25)
    assert len(fake.calls_to("chat.postMessage")) == 1 and len(fake.calls_to("chat.update")) == 1


def test_a_retried_delivery_is_dropped(bot, fake):
    duplicates_before = metric(bot, DUPLICATES)
    body = envelope(mention_event(QUESTION))
    first = bot.slack.send(body)
    retry = bot.slack.send(body, retry_num=1)
    retry_again = bot.slack.send(body, retry_num=2)
    assert first.status_code == retry.status_code == retry_again.status_code == 200
    answer_in_thread(fake, "C0GENERAL", body["event"]["ts"])
    fake.wait_quiet(0.25)
    assert len(fake.calls_to("chat.postMessage")) == 1 and len(fake.calls_to("chat.update")) == 1
    assert metric(bot, DUPLICATES) - duplicates_before == 2


@pytest.mark.parametrize(
    "event",
    [
        message_event("a bot says hi", channel="D0ALICE", channel_type="im", bot_id="B0OTHER"),
        message_event("echo", channel="D0ALICE", channel_type="im", subtype="bot_message", user=None),
        message_event("my own answer", channel="D0ALICE", channel_type="im", user=BOT_USER_ID),
        message_event("edited", channel="D0ALICE", channel_type="im", subtype="message_changed"),
        mention_event(f"<@{BOT_USER_ID}> from another bot") | {"bot_id": "B0OTHER"},
    ],
    ids=["other-bot", "bot_message", "own-user", "edit", "bot-mention"],
)
def test_own_and_other_bots_messages_are_ignored(bot, fake, event):
    assert bot.slack.send(envelope(event)).status_code == 200
    fake.wait_quiet(0.3)
    assert [c.method for c in fake.calls if c.method != "auth.test"] == []


def test_the_request_url_passes_slacks_url_verification(bot, fake):
    response = bot.slack.send({"token": "legacy", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
                               "type": "url_verification"})
    assert response.status_code == 200
    assert response.json() == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}


def test_forged_and_stale_signatures_are_rejected(bot, fake):
    body = envelope(mention_event(QUESTION))
    forged = bot.slack.send(body, secret="not-the-signing-secret")
    stale = bot.slack.send(body, timestamp=int(time.time()) - 301)
    unsigned = httpx.post(f"{bot.base_url}/slack/events", json=body)
    assert forged.status_code == stale.status_code == unsigned.status_code == 401
    fake.wait_quiet(0.3)
    assert fake.calls_to("chat.postMessage") == []


@pytest.fixture
def server_log(caplog):
    """caplog, also catching uvicorn's own records ("Exception in ASGI application" + traceback),
    which do not reach the root logger under uvicorn's default logging config."""
    uvicorn_logger = logging.getLogger("uvicorn")
    uvicorn_logger.addHandler(caplog.handler)
    with caplog.at_level(logging.INFO):
        yield caplog
    uvicorn_logger.removeHandler(caplog.handler)


def errors_logged(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def test_a_forged_request_is_logged_as_one_short_line_without_its_body(bot, fake, server_log):
    marker = "FORGED-BODY-MARKER"
    body = envelope(mention_event(f"{QUESTION} {marker * 100}"))
    response = bot.slack.send(body, secret="not-the-signing-secret")
    assert response.status_code == 401
    lines = [r.getMessage() for r in server_log.records if "slack" in r.name or "adapters" in r.name]
    assert not any(marker in line for line in lines)  # slack-bolt used to log the whole body at INFO
    refused = [line for line in lines if "refused" in line]
    assert len(refused) == 1 and len(refused[0]) < 200, refused
    assert metric(bot, 'hypa_rejected_requests_total{path="/slack/events",reason="bad_signature"}') >= 1


def test_a_request_body_over_the_limit_gets_413_and_is_never_parsed_or_logged(bot, fake, server_log):
    body = envelope(mention_event(QUESTION))
    body["padding"] = "p" * (bot.components.settings.http_max_body_bytes + 1)
    raw = json.dumps(body)
    forged = httpx.post(bot.slack.url, content=raw, headers=bot.slack.headers(raw, secret="not-the-secret"))
    signed = httpx.post(bot.slack.url, content=raw, headers=bot.slack.headers(raw))  # even Slack's: over is over
    assert forged.status_code == signed.status_code == 413
    assert not any("ppppp" in r.getMessage() for r in server_log.records)
    assert errors_logged(server_log) == []
    fake.wait_quiet(0.3)
    assert fake.calls_to("chat.postMessage") == []


MALFORMED_BODIES = {
    "bad JSON": (b'{"type": "event_callback",', "application/json"),
    "a JSON array": (b"[1, 2, 3]", "application/json"),
    "JSON null": (b"null", "application/json"),
    "non-UTF-8 bytes": (b'{"type": "\xff\xfe"}', "application/json"),
    "payload=garbage": (b"payload=garbage", "application/x-www-form-urlencoded"),
    "a payload that is a JSON array": (b"payload=%5B1%5D", "application/x-www-form-urlencoded"),
}


@pytest.mark.parametrize("name", MALFORMED_BODIES)
def test_a_malformed_body_gets_401_unsigned_and_400_signed_never_a_500_or_a_traceback(bot, fake, server_log, name):
    raw, content_type = MALFORMED_BODIES[name]
    unsigned = httpx.post(bot.slack.url, content=raw, headers={"content-type": content_type})
    signed = httpx.post(bot.slack.url, content=raw, headers=bot.slack.headers(raw, content_type=content_type))
    assert (unsigned.status_code, signed.status_code) == (401, 400)
    assert "error" in signed.json()
    assert errors_logged(server_log) == []
    fake.wait_quiet(0.2)
    assert fake.calls_to("chat.postMessage") == []


@pytest.mark.parametrize("timestamp", ["abc", "1e9", "1_700_000_000", "-1", "9" * 40, ""])
def test_a_timestamp_that_is_not_a_number_of_seconds_gets_401_without_a_traceback(bot, fake, server_log, timestamp):
    raw = json.dumps(envelope(mention_event(QUESTION)))
    headers = bot.slack.headers(raw)
    headers["x-slack-request-timestamp"] = timestamp
    response = httpx.post(bot.slack.url, content=raw, headers=headers)
    assert response.status_code == 401
    assert errors_logged(server_log) == []


# --- feedback -------------------------------------------------------------------------------------


def test_thumbs_reactions_on_the_answer_are_feedback_and_removing_one_clears_it(bot, fake):
    event, message = ask(bot, fake)
    answer_id = buttons(message.blocks)[ACTION_UPVOTE]
    channel = event["channel"]

    def send_reaction(kind: str, name: str, ts: str = message.ts, user: str = "UBOB0001") -> None:
        assert bot.slack.send(envelope(reaction_event(kind, name, channel=channel, ts=ts, user=user))).status_code == 200

    def rating_becomes(value: int) -> bool:
        return fake.wait_for(lambda: bot.store.current_rating(answer_id, "UBOB0001") == value, 5, f"rating {value}")

    send_reaction("reaction_added", "+1::skin-tone-2")
    rating_becomes(1)
    send_reaction("reaction_removed", "+1::skin-tone-2")
    rating_becomes(0)
    send_reaction("reaction_added", "thumbsdown")
    rating_becomes(-1)
    send_reaction("reaction_added", "tada")  # not a rating
    send_reaction("reaction_added", "+1", ts=event["ts"])  # on the user's question, not our answer
    send_reaction("reaction_added", "-1", user=BOT_USER_ID)  # the bot itself
    time.sleep(0.3)
    log = bot.store.feedback_log(answer_id)
    assert [(c.rater, c.rating, c.source) for c in log] == [
        ("UBOB0001", 1, "reaction"), ("UBOB0001", 0, "reaction"), ("UBOB0001", -1, "reaction")]


def test_a_click_after_a_reaction_and_its_removal_wins_when_the_removal_is_processed_last(bot, fake):
    """Issue 13: 👍 reaction, its removal, then a 👍 click; the removal delivered last must not undo the
    click. Slack times reactions (event_ts) and clicks (action_ts) on one clock."""
    event, message = ask(bot, fake)
    answer_id = buttons(message.blocks)[ACTION_UPVOTE]
    channel = event["channel"]
    reacted, unreacted, clicked = (f"{time.time() + i * 0.2:.6f}" for i in range(3))
    bot.slack.send(envelope(reaction_event("reaction_added", "+1", channel=channel, ts=message.ts, user="UDAN0001",
                                           event_ts=reacted)))
    fake.wait_for(lambda: bot.store.current_rating(answer_id, "UDAN0001") == 1, 5, "the reaction")
    bot.slack.send_interaction(block_actions(ACTION_UPVOTE, answer_id, channel=channel, message_ts=message.ts,
                                             thread_ts=event["ts"], user="UDAN0001", action_ts=clicked))
    fake.wait_for(lambda: fake.calls_to("chat.postEphemeral"), what="the click's acknowledgement")
    bot.slack.send(envelope(reaction_event("reaction_removed", "+1", channel=channel, ts=message.ts, user="UDAN0001",
                                           event_ts=unreacted)))
    processed = lambda: (bot.store.count_rows("feedback_acts") >= 3  # noqa: E731
                         or bot.store.current_rating(answer_id, "UDAN0001") != 1)
    fake.wait_for(processed, 5, "the removal to be processed")
    assert bot.store.current_rating(answer_id, "UDAN0001") == 1
    (rated,) = [r for r in bot.store.rated_answers() if r.rater == "UDAN0001"]
    assert rated.source == "button"


def test_button_click_records_the_rating_and_acknowledges_it_to_the_clicker_only(bot, fake):
    event, message = ask(bot, fake)
    answer_id = buttons(message.blocks)[ACTION_DOWNVOTE]

    def click(action_id: str, value: str = answer_id) -> str:
        payload = block_actions(action_id, value, channel=event["channel"], message_ts=message.ts,
                                thread_ts=event["ts"], user="UCAROL01")
        before = len(fake.calls_to("chat.postEphemeral"))
        assert bot.slack.send_interaction(payload).status_code == 200
        call = fake.wait_for(lambda: fake.calls_to("chat.postEphemeral")[before:], what="an ephemeral reply")[0]
        assert call.params["user"] == "UCAROL01" and call.params["thread_ts"] == event["ts"]
        return call.params["text"]

    assert "recorded" in click(ACTION_DOWNVOTE)
    assert bot.store.current_rating(answer_id, "UCAROL01") == -1
    assert "already" in click(ACTION_DOWNVOTE)
    assert "recorded" in click(ACTION_UPVOTE)
    assert click(ACTION_UPVOTE, value="no-such-answer") == UNKNOWN_ANSWER_TEXT
    log = bot.store.feedback_log(answer_id)
    assert [(c.rating, c.source) for c in log] == [(-1, "button"), (1, "button")]


def test_a_rating_counts_only_from_the_channel_where_the_answer_was_posted(bot, fake):
    """Issue 13: a rating is tied to where the answer was shown (the channel of the message the button is on)."""
    event, message = ask(bot, fake)
    answer_id = buttons(message.blocks)[ACTION_UPVOTE]
    telegram = bot.server.bot.service.handle(
        IncomingMessage("telegram", "telegram", "605", "5", "605", "What is a widget audit?", "5"))

    def click(value: str, channel: str, user: str) -> str:
        payload = block_actions(ACTION_UPVOTE, value, channel=channel, message_ts=message.ts, thread_ts=event["ts"],
                                user=user)
        before = len(fake.calls_to("chat.postEphemeral"))
        assert bot.slack.send_interaction(payload).status_code == 200
        return fake.wait_for(lambda: fake.calls_to("chat.postEphemeral")[before:], what="a reply")[0].params["text"]

    assert click(answer_id, "C0ELSEWHERE", "UERIN001") == NOT_SHOWN_HERE_TEXT
    assert click(telegram.answer_id, event["channel"], "UERIN001") == NOT_SHOWN_HERE_TEXT
    from_home = block_actions(ACTION_UPVOTE, answer_id, channel="", message_ts=message.ts, user="UERIN001")
    from_home.pop("channel")
    from_home["container"] = {"type": "view", "view_id": "V0HOME01"}  # a button in App Home: no channel
    assert bot.slack.send_interaction(from_home).status_code == 200
    fake.wait_quiet(0.3)
    for rated in (answer_id, telegram.answer_id):  # nothing stored for any of the three
        assert bot.store.current_rating(rated, "UERIN001") == 0 and bot.store.feedback_log(rated) == []
    assert "recorded" in click(answer_id, event["channel"], "UERIN001")
    assert bot.store.current_rating(answer_id, "UERIN001") == 1


# --- bad input, failures, rate limits --------------------------------------------------------------


BAD_INPUTS = {
    "empty-mention": (f"<@{BOT_USER_ID}>", {}, "Please ask a question"),
    "huge": (f"<@{BOT_USER_ID}> Is this allowed? " + "x" * 40_000, {}, "40,0"),
    "emoji-only": (f"<@{BOT_USER_ID}> :tada: :+1::skin-tone-2:", {}, "Please ask a question"),
    "attachment-only": ("", {"subtype": "file_share", "files": [{"id": "F1", "name": "scan.pdf"}]},
                        "Please ask a question"),
    "non-english": (f"<@{BOT_USER_ID}> ¿Cuál es la multa por una primera infracción?", {}, ""),
    "control-chars": (f"<@{BOT_USER_ID}> What\x00 is the\x07 penalty\x1b for a first violation?", {}, "$500"),
}


def test_bad_inputs_each_get_a_clear_reply_in_their_thread(bot, fake):
    sent = {}
    for name, (text, extra, _) in BAD_INPUTS.items():
        if name == "attachment-only":
            event = message_event(text, channel="D0ALICE", channel_type="im", **extra)
        else:
            event = mention_event(text)
        assert bot.slack.send(envelope(event)).status_code == 200
        sent[name] = event
    for name, event in sent.items():
        message = answer_in_thread(fake, event["channel"], event["ts"])
        text = shown_text(message.blocks)
        assert text.strip() and text != PLACEHOLDER_TEXT, name
        assert BAD_INPUTS[name][2] in text, (name, text)
        assert ACTION_UPVOTE in buttons(message.blocks), name


def test_rate_limited_web_api_calls_are_retried_after_retry_after(bot, fake):
    fake.fail_next("chat.postMessage", status=429, retry_after=0)
    fake.fail_next("chat.update", status=429, retry_after=0)
    event, message = ask(bot, fake)
    assert "$500" in shown_text(message.blocks)
    assert len(fake.calls_to("chat.postMessage")) == 2 and len(fake.calls_to("chat.update")) == 2
    assert len(fake.thread(event["channel"], event["ts"])) == 1


def test_an_internal_failure_is_told_to_the_user(bot, fake, monkeypatch):
    def broken(delivery):
        raise RuntimeError("database exploded")

    errors = 'hypa_errors_total{component="slack_answer"}'
    errors_before = metric(bot, errors)
    monkeypatch.setattr(bot.server.bot.service, "answer", broken)
    event, message = ask(bot, fake)
    assert FAILURE_TEXT in shown_text(message.blocks)
    assert [m.ts for m in fake.thread(event["channel"], event["ts"])] == [message.ts]  # the placeholder became it
    assert metric(bot, errors) - errors_before == 1
    assert bot.store.owed_messages("slack") == []  # told: the lease is complete


@pytest.mark.parametrize(
    "text, expect",
    [(42, FAILURE_TEXT), (["a", "list"], FAILURE_TEXT), ({"an": "object"}, FAILURE_TEXT), (None, "Please ask a question")],
    ids=["number", "list", "object", "null"],
)
def test_a_mention_whose_text_is_not_a_string_gets_a_reply_not_silence(bot, fake, text, expect):
    event = mention_event(QUESTION) | {"text": text}
    assert bot.slack.send(envelope(event)).status_code == 200

    def final_reply():
        shown = fake.thread(event["channel"], event["ts"])
        return shown if shown and all(m.text != PLACEHOLDER_TEXT for m in shown) else None

    fake.wait_for(final_reply, what="a reply in place of any placeholder")
    fake.wait_quiet(0.3)
    (reply,) = fake.thread(event["channel"], event["ts"])  # one message, and no placeholder left
    assert expect in shown_text(reply.blocks)


def test_a_message_that_cannot_be_recorded_gets_an_apology_and_is_counted(bot, fake, monkeypatch):
    """The lease is a database write before anything is posted: if the database refuses it, the person
    is told at once instead of waiting on a placeholder that nobody will ever finish."""

    def broken(message):
        raise RuntimeError("database is locked")

    errors = 'hypa_errors_total{component="slack_claim"}'
    errors_before = metric(bot, errors)
    monkeypatch.setattr(bot.server.bot.service, "claim", broken)
    event = mention_event(QUESTION)
    bot.slack.send(envelope(event))
    reply = fake.wait_for(lambda: fake.thread(event["channel"], event["ts"]), what="a reply")[0]
    assert FAILURE_TEXT in shown_text(reply.blocks) and reply.edits == 0
    assert metric(bot, errors) - errors_before == 1


def test_a_failing_thread_lookup_leaves_the_reply_alone_and_is_counted(bot, fake, monkeypatch):
    def broken(*args):
        raise RuntimeError("database is locked")

    errors = 'hypa_errors_total{component="slack_thread"}'
    errors_before = metric(bot, errors)
    monkeypatch.setattr(bot.server.bot.service, "is_bot_thread", broken)
    bot.slack.send(envelope(message_event("and then?", thread_ts=new_ts())))
    fake.wait_for(lambda: metric(bot, errors) - errors_before == 1, what="the counted error")
    fake.wait_quiet(0.25)
    assert fake.calls_to("chat.postMessage") == []


def test_when_the_placeholder_cannot_be_updated_the_answer_is_posted_instead(bot, fake):
    fake.fail_next("chat.update", error="cant_update_message")
    event = mention_event(QUESTION)
    bot.slack.send(envelope(event))

    def posted_answer():
        return [c for c in fake.calls_to("chat.postMessage") if c.params.get("text") != PLACEHOLDER_TEXT]

    answer_call = fake.wait_for(posted_answer, what="the answer posted anew")[0]
    assert answer_call.params["thread_ts"] == event["ts"]
    answer_id = buttons(answer_call.params["blocks"])[ACTION_UPVOTE]
    answer_ts = next(m.ts for m in fake.thread(event["channel"], event["ts"]) if m.blocks and buttons(m.blocks))
    fake.wait_for(lambda: bot.store.answer_for_platform_message("slack", event["channel"], answer_ts) == answer_id)


# --- crash recovery: leases ---------------------------------------------------------------------


def post_as_a_dead_worker(fake: FakeSlack, event: dict) -> str:
    """What a process killed right after posting its placeholder leaves: the placeholder in Slack
    (with the metadata naming the question), its ts never stored."""
    from slack_sdk import WebClient

    client = WebClient(token=BOT_TOKEN, base_url=fake.base_url)
    posted = client.chat_postMessage(
        channel=event["channel"], thread_ts=event["ts"], text=PLACEHOLDER_TEXT,
        metadata={"event_type": PLACEHOLDER_EVENT, "event_payload": {"question_ts": event["ts"]}},
    )
    return posted["ts"]


def test_a_question_is_recorded_before_slack_gets_its_acknowledgement(bot, fake, monkeypatch):
    """Slack does not retry an acknowledged event: a crash right after the 200 must find the message
    in the database (the recovery sweep answers it), so the 200 goes out only after the claim."""
    release, recorded = threading.Event(), threading.Event()
    real_claim = bot.server.bot.service.claim

    def slow_claim(message):
        assert release.wait(10), "never released"
        delivery = real_claim(message)
        recorded.set()
        return delivery

    monkeypatch.setattr(bot.server.bot.service, "claim", slow_claim)
    event = mention_event(QUESTION)
    acked = []
    sender = threading.Thread(target=lambda: acked.append(bot.slack.send(envelope(event)).status_code))
    sender.start()
    time.sleep(0.5)
    assert acked == []  # held until the message is recorded
    release.set()
    sender.join(10)
    assert acked == [200] and recorded.is_set()
    answer_in_thread(fake, event["channel"], event["ts"])


def test_a_live_worker_keeps_its_lease_however_long_the_answer_takes(tmp_path, own_fake):
    """The lease is renewed while the answer is computed: a retry arriving after several lease times is
    still dropped, and nothing is taken over."""
    from hypa_testkit.crash_bot import SlowGenerator

    fake = own_fake
    with running_bot(tmp_path, fake, delivery_lease_s=1.0) as running:
        pipeline = running.components.pipeline
        pipeline.generator = SlowGenerator(pipeline.generator, 3.0)
        body = envelope(mention_event(QUESTION))
        running.slack.send(body)
        time.sleep(2.0)  # two lease times into the answer
        running.slack.send(body, retry_num=1)
        answer_in_thread(fake, body["event"]["channel"], body["event"]["ts"])
        fake.wait_quiet(1.0)
        assert len(fake.thread(body["event"]["channel"], body["event"]["ts"])) == 1
        assert len(fake.calls_to("chat.update")) == 1
        assert metric(running, 'hypa_lease_takeovers_total{platform="slack"}') == 0
        assert metric(running, DUPLICATES) == 1


def test_a_dead_workers_lease_is_taken_over_and_its_lost_placeholder_becomes_the_answer(tmp_path, own_fake):
    fake = own_fake
    with running_bot(tmp_path, fake, delivery_lease_s=1.0) as running:
        event = mention_event(QUESTION)
        incoming = to_incoming(event, "T0TEAM01", BotIdentity(BOT_USER_ID, "BBOT0001"))
        running.store.claim_message(incoming, holder="a-process-that-died")
        lost = post_as_a_dead_worker(fake, event)
        assert running.slack.send(envelope(event), retry_num=1).status_code == 200  # dropped: the lease is live
        message = answer_in_thread(fake, event["channel"], event["ts"])  # after the lease (1 s) lapsed
        assert message.ts == lost and "$500" in shown_text(message.blocks)
        fake.wait_quiet(0.5)
        assert len(fake.thread(event["channel"], event["ts"])) == 1  # no second placeholder, no second answer
        assert running.store.owed_messages() == []
        assert [c.params.get("include_all_metadata") for c in fake.calls_to("conversations.replies")] == ["1"]


def test_an_answer_stored_but_never_shown_is_shown_once_after_a_takeover(tmp_path, own_fake):
    fake = own_fake
    with running_bot(tmp_path, fake, delivery_lease_s=1.0) as running:
        event = mention_event(QUESTION)
        incoming = to_incoming(event, "T0TEAM01", BotIdentity(BOT_USER_ID, "BBOT0001"))
        dead = running.server.bot.service.__class__(running.components.pipeline, running.store, collection="toy")
        delivery = dead.claim(incoming)
        dead.note_placeholder(delivery, post_as_a_dead_worker(fake, event))
        stored = dead.answer(delivery)  # computed and stored; then the process died before the update
        message = answer_in_thread(fake, event["channel"], event["ts"])
        assert buttons(message.blocks)[ACTION_UPVOTE] == stored.answer_id  # that answer, not a new one
        assert running.store.count_rows("answers") == 1 and fake.calls_to("conversations.replies") == []


# --- operations -----------------------------------------------------------------------------------


def test_health_readiness_and_metrics_share_the_port(bot, fake):
    answered_before = metric(bot, ANSWERED)
    ask(bot, fake)
    assert httpx.get(f"{bot.base_url}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{bot.base_url}/readyz")
    assert ready.status_code == 200 and ready.json()["checks"] == {"index": True, "database": True, "answering": True}
    assert metric(bot, ANSWERED) - answered_before == 1


def test_a_restart_keeps_thread_history_and_delivery_claims(tmp_path, own_fake):
    fake = own_fake
    with running_bot(tmp_path, fake) as first_bot:
        first, _ = ask(first_bot, fake)
        old_delivery = envelope(mention_event(QUESTION))
        first_bot.slack.send(old_delivery)
        answer_in_thread(fake, "C0GENERAL", old_delivery["event"]["ts"])
    calls_before = len(fake.calls)

    with running_bot(tmp_path, fake) as second_bot:  # a new app and service on the same SQLite file
        assert second_bot.slack.send(old_delivery, retry_num=1).status_code == 200  # Slack retrying after the restart
        follow_up = message_event("And for each subsequent violation?", thread_ts=first["ts"])
        second_bot.slack.send(envelope(follow_up))

        def follow_up_answer():
            answered = [m for m in fake.thread("C0GENERAL", first["ts"]) if m.edits]
            return answered[-1] if len(answered) == 2 else None

        second = fake.wait_for(follow_up_answer, what="the follow-up after the restart")
        assert second_bot.store.get_answer(buttons(second.blocks)[ACTION_UPVOTE]).record.history_turns == 1
        fake.wait_quiet(0.3)
    new_posts = [c for c in fake.calls[calls_before:] if c.method == "chat.postMessage"]
    assert [c.params["thread_ts"] for c in new_posts] == [first["ts"]]  # the retried delivery got nothing


def test_shutdown_waits_for_answers_in_flight(tmp_path, own_fake):
    fake = own_fake
    with running_bot(tmp_path, fake) as running:
        bodies = [envelope(mention_event(QUESTION)) for _ in range(5)]
        with ThreadPoolExecutor(5) as pool:
            statuses = list(pool.map(lambda b: running.slack.send(b).status_code, bodies))
        assert statuses == [200] * 5
    # Leaving the block stopped uvicorn; its lifespan shutdown drained the background tasks.
    for body in bodies:
        assert [m for m in fake.thread("C0GENERAL", body["event"]["ts"]) if m.edits], "an answer was lost"
    assert len(fake.calls_to("chat.update")) == 5


def test_sources_link_to_the_official_text(tmp_path, own_fake):
    """A document ingested with --source-url: each source in the answer is a mrkdwn link to it."""
    with running_bot(tmp_path, own_fake) as running:
        running.components.index.set_source_url("toy", "toy-doc", "https://toy.example/code?v=2&s={section}")
        _, message = ask(running, own_fake)
        text = shown_text(message.blocks)
        assert "*[1]* <https://toy.example/code?v=2&amp;s=1-103|Toy Code § 1-103>" in text
        answer_id = buttons(message.blocks)[ACTION_UPVOTE]
        [cited] = [c for c in running.store.get_answer(answer_id).record.citations if c.label == "Toy Code § 1-103"]
        assert cited.url == "https://toy.example/code?v=2&s=1-103"  # stored with the answer
