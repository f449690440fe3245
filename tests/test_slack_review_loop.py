"""Issue 15 in Slack, end to end: signed slash commands, button clicks and modal submissions over HTTP ->
the real bolt app -> the real service on SQLite -> the real slack_sdk clients (Web API and response_url
webhooks) -> the fake Slack. Assertions are on what Slack received and what the database holds.

The issue's "done when": a signed slash command gets an ephemeral answer; 👎 -> views.open ->
view_submission -> reason stored -> review post -> "Write the correct answer" -> reference stored ->
`hypa feedback export --reviewed` row (test_the_review_loop_from_a_downvote_to_a_regression_case).
"""
from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from adapters.slack.app import COMMAND_HELP, SHARE_REFUSED
from adapters.slack.blocks import ACTION_ASK_PERSON, ACTION_DOWNVOTE, ACTION_SHARE, ACTION_UPVOTE, PLACEHOLDER_TEXT
from adapters.slack.review import NO_REVIEW_CHANNEL, NOT_FROM_HERE, NOTIFIED, REVIEW_ONLY_IN_CHANNEL
from adapters.slack.review_blocks import (
    ACTION_REVIEW_CORRECT,
    ACTION_REVIEW_FINE,
    CORRECT_ANSWER_INPUT,
    POST_IN_THREAD,
    POST_IN_THREAD_INPUT,
    PROVISION_INPUT,
    REASON_KIND_INPUT,
    REASON_TEXT_INPUT,
    VIEW_CORRECTION,
    VIEW_REASON,
)
from bot.cli import app as cli_app
from hypa_testkit.fakes.slack_server import (
    BOT_USER_ID,
    FakeSlack,
    block_actions,
    block_texts,
    envelope,
    mention_event,
    reaction_event,
    slash_command,
    view_submission,
)
from hypa_testkit.slack_harness import RunningBot, running_bot

REVIEW_CHANNEL = "C0REVIEW1"
QUESTION = "What is the civil penalty for a first violation?"


@pytest.fixture(scope="module")
def shared_fake():
    with FakeSlack() as server:
        yield server


@pytest.fixture(scope="module")
def shared_bot(tmp_path_factory, shared_fake: FakeSlack):
    with running_bot(tmp_path_factory.mktemp("slack-review"), shared_fake, review_channel=REVIEW_CHANNEL) as running:
        yield running


@pytest.fixture
def fake(shared_fake: FakeSlack):
    shared_fake.reset()
    yield shared_fake


@pytest.fixture
def bot(shared_bot: RunningBot, fake: FakeSlack):
    yield shared_bot
    fake.wait_quiet(0.2)


def text_of(blocks: list[dict]) -> str:
    return "\n".join(block_texts(blocks))


def buttons(blocks: list[dict]) -> dict[str, str]:
    return {e["action_id"]: e["value"] for b in blocks if b["type"] == "actions" for e in b["elements"]}


def ask_in_channel(bot: RunningBot, fake: FakeSlack, channel: str = "C0LEGAL", user: str = "UALICE01"):
    event = mention_event(f"<@{BOT_USER_ID}> {QUESTION}", channel=channel, user=user)
    assert bot.slack.send(envelope(event)).status_code == 200
    message = fake.wait_for(lambda: [m for m in fake.thread(channel, event["ts"]) if m.edits > 0], what="an answer")[-1]
    return event, message


def click(bot: RunningBot, payload: dict) -> float:
    started = time.monotonic()
    response = bot.slack.send_interaction(payload)
    assert response.status_code == 200
    return time.monotonic() - started


def submit(bot: RunningBot, view: dict, values: dict, user: str):
    started = time.monotonic()
    response = bot.slack.send_interaction(view_submission(view, values, user=user))
    assert response.status_code == 200 and time.monotonic() - started < 3.0
    return response


def reason_values(kind: str | None, text: str | None) -> dict:
    return {
        REASON_KIND_INPUT[0]: {REASON_KIND_INPUT[1]: {"type": "radio_buttons",
                                                      "selected_option": {"value": kind} if kind else None}},
        REASON_TEXT_INPUT[0]: {REASON_TEXT_INPUT[1]: {"type": "plain_text_input", "value": text}},
    }


def correction_values(answer: str, provision: str, post: bool) -> dict:
    return {
        CORRECT_ANSWER_INPUT[0]: {CORRECT_ANSWER_INPUT[1]: {"type": "plain_text_input", "value": answer}},
        PROVISION_INPUT[0]: {PROVISION_INPUT[1]: {"type": "plain_text_input", "value": provision}},
        POST_IN_THREAD_INPUT[0]: {POST_IN_THREAD_INPUT[1]: {
            "type": "checkboxes", "selected_options": [{"value": POST_IN_THREAD}] if post else []}},
    }


def review_posts(fake: FakeSlack) -> list:
    return sorted((m for m in fake.messages.values() if m.channel == REVIEW_CHANNEL), key=lambda m: float(m.ts))


# --- 1. /hypa: a private answer ---------------------------------------------------------------------


def test_a_signed_slash_command_is_acked_at_once_and_answered_privately_with_sources(bot, fake):
    fields = slash_command(QUESTION, response_url=fake.response_url("cmd-1"), channel="C0PRIV01")
    started = time.monotonic()
    response = bot.slack.send_command(fields)
    assert response.status_code == 200 and time.monotonic() - started < 3.0
    assert response.json() == {"text": PLACEHOLDER_TEXT, "response_type": "ephemeral"}  # the ack itself
    (answer,) = fake.wait_for(lambda: fake.responses("cmd-1"), what="the answer at the response_url")
    assert answer["response_type"] == "ephemeral" and answer["replace_original"] is False
    shown = text_of(answer["blocks"])
    assert "$500" in shown and "*Sources*" in shown
    actions = buttons(answer["blocks"])
    assert set(actions) == {ACTION_SHARE, ACTION_UPVOTE, ACTION_DOWNVOTE, ACTION_ASK_PERSON}
    fake.wait_quiet(0.2)
    assert fake.calls_to("chat.postMessage") == []  # nothing public
    (stored,) = [a for a in bot.store.answers() if a.id == actions[ACTION_SHARE]]
    exchange = bot.store.exchange(stored.id)
    assert (exchange.channel, exchange.asker, exchange.message_id) == ("C0PRIV01", "UALICE01", f"cmd:{fields['trigger_id']}")
    assert bot.store.owed_messages("slack") == []  # the lease completed


def test_an_empty_slash_command_gets_help(bot, fake):
    response = bot.slack.send_command(slash_command("  ", response_url=fake.response_url("cmd-empty")))
    assert response.status_code == 200
    assert response.json()["text"] == COMMAND_HELP.format(command="/hypa")
    fake.wait_quiet(0.2)
    assert fake.responses("cmd-empty") == [] and not any(a.record.question == "" for a in bot.store.answers())


def test_share_in_channel_posts_the_same_answer_publicly_and_only_the_asker_can(bot, fake):
    bot.slack.send_command(slash_command(QUESTION, response_url=fake.response_url("cmd-2"), channel="C0PRIV02"))
    (answer,) = fake.wait_for(lambda: fake.responses("cmd-2"), what="the private answer")
    answer_id = buttons(answer["blocks"])[ACTION_SHARE]
    # Someone else's click (a forwarded button): refused, nothing posted.
    other = block_actions(ACTION_SHARE, answer_id, channel="C0PRIV02", message_ts="1.1", user="UMALLORY",
                          is_ephemeral=True, response_url=fake.response_url("share-mallory"))
    assert click(bot, other) < 3.0
    (refused,) = fake.wait_for(lambda: fake.responses("share-mallory"), what="the refusal")
    assert refused["text"] == SHARE_REFUSED
    assert fake.calls_to("chat.postMessage") == []
    # The asker's click: posted in the channel, the private copy deleted.
    mine = block_actions(ACTION_SHARE, answer_id, channel="C0PRIV02", message_ts="1.1", user="UALICE01",
                         is_ephemeral=True, response_url=fake.response_url("share-alice"))
    click(bot, mine)
    (deleted,) = fake.wait_for(lambda: fake.responses("share-alice"), what="the private copy deleted")
    assert deleted["delete_original"] is True
    (public,) = [m for m in fake.messages.values() if m.channel == "C0PRIV02"]
    assert public.thread_ts is None and "$500" in text_of(public.blocks)
    assert "<@UALICE01> asked" in text_of(public.blocks) and ACTION_SHARE not in buttons(public.blocks)
    # The public copy is linked to the answer: a reaction on it is a rating.
    reaction = reaction_event("reaction_added", "+1", channel="C0PRIV02", ts=public.ts, user="UBOB0001")
    bot.slack.send(envelope(reaction))
    fake.wait_for(lambda: bot.store.current_rating(answer_id, "UBOB0001") == 1, 5, "the reaction's rating")


def test_a_rating_button_on_a_private_answer_is_acknowledged_privately(bot, fake):
    bot.slack.send_command(slash_command(QUESTION, response_url=fake.response_url("cmd-3"), channel="C0PRIV03"))
    (answer,) = fake.wait_for(lambda: fake.responses("cmd-3"), what="the private answer")
    answer_id = buttons(answer["blocks"])[ACTION_UPVOTE]
    click(bot, block_actions(ACTION_UPVOTE, answer_id, channel="C0PRIV03", message_ts="1.1", is_ephemeral=True,
                             response_url=fake.response_url("rate-3")))
    (note,) = fake.wait_for(lambda: fake.responses("rate-3"), what="the rating's acknowledgement")
    assert "recorded" in note["text"] and note["replace_original"] is False
    assert bot.store.current_rating(answer_id, "UALICE01") == 1


# --- 2 and 3: 👎 with a reason, the review channel, the reference -------------------------------------


def test_the_review_loop_from_a_downvote_to_a_regression_case(bot, fake, tmp_path, monkeypatch):
    event, message = ask_in_channel(bot, fake)
    answer_id = buttons(message.blocks)[ACTION_DOWNVOTE]

    # 👎: acknowledged at once; the reason modal opens with the click's trigger.
    down = block_actions(ACTION_DOWNVOTE, answer_id, channel=event["channel"], message_ts=message.ts,
                         thread_ts=event["ts"], user="UCAROL01")
    assert click(bot, down) < 3.0
    (opened,) = fake.wait_for(lambda: fake.views, what="views.open")
    assert opened["trigger_id"] == down["trigger_id"] and opened["view"]["callback_id"] == VIEW_REASON
    fake.wait_for(lambda: bot.store.current_rating(answer_id, "UCAROL01") == -1, 5, "the 👎")

    # Submitting nothing keeps the modal open with an error; nothing is stored or posted.
    empty = submit(bot, opened["view"], reason_values(None, ""), user="UCAROL01")
    assert empty.json()["response_action"] == "errors" and REASON_KIND_INPUT[0] in empty.json()["errors"]

    # view_submission: the reason joins the 👎 and the exchange is posted in the review channel.
    submit(bot, opened["view"], reason_values("incomplete", "It leaves out the later violations."), user="UCAROL01")
    post = fake.wait_for(lambda: review_posts(fake), what="the review post")[-1]
    (rated,) = [r for r in bot.store.rated_answers() if r.rater == "UCAROL01"]
    assert (rated.rating, rated.reason_kind, rated.reason) == (-1, "incomplete", "It leaves out the later violations.")
    assert rated.review_state == "pending"
    shown = text_of(post.blocks)
    for expected in ("👎 with a reason", "<@UCAROL01>", "<#C0LEGAL>", QUESTION, "$500", "*Sources*",
                     "Incomplete: It leaves out the later violations.", "Asked by <@UALICE01>",
                     f"https://fake.slack.test/archives/C0LEGAL/p{event['ts'].replace('.', '')}", answer_id):
        assert expected in shown, expected
    assert buttons(post.blocks) == {ACTION_REVIEW_CORRECT: answer_id, ACTION_REVIEW_FINE: answer_id}
    thanks = fake.wait_for(lambda: [e for e in fake.ephemerals if "reason is recorded" in (e["text"] or "")],
                           what="the rater thanked")[0]
    assert thanks["user"] == "UCAROL01" and thanks["thread_ts"] == event["ts"]

    # "Write the correct answer" from the review channel opens the reviewer's modal...
    correct = block_actions(ACTION_REVIEW_CORRECT, answer_id, channel=REVIEW_CHANNEL, message_ts=post.ts,
                            user="ULEAD001", blocks=post.blocks)
    assert click(bot, correct) < 3.0
    modal = fake.wait_for(lambda: [v for v in fake.views if v["view"]["callback_id"] == VIEW_CORRECTION],
                          what="the correction modal")[0]
    assert modal["trigger_id"] == correct["trigger_id"] and QUESTION in json.dumps(modal["view"])
    # ...whose submission stores the reference and posts it in the original thread.
    reference = "A first violation costs up to $500; each later violation $500 to $1,500."
    submit(bot, modal["view"], correction_values(reference, "§ 20-872(a)", post=True), user="ULEAD001")
    correction = fake.wait_for(
        lambda: [m for m in fake.thread("C0LEGAL", event["ts"]) if "Correction from" in m.text], what="the correction"
    )[0]
    assert reference in text_of(correction.blocks) and "§ 20-872(a)" in text_of(correction.blocks)
    settled = fake.wait_for(lambda: [m for m in review_posts(fake) if m.edits > 0], what="the post settled")[0]
    assert "Corrected by <@ULEAD001>" in text_of(settled.blocks) and buttons(settled.blocks) == {}
    review = bot.store.review(answer_id)
    assert (review.state, review.reviewer, review.reference_answer, review.reference_provision) == (
        "corrected", "ULEAD001", reference, "§ 20-872(a)")
    assert review.correction_posted

    # `hypa feedback export --reviewed`: the exchange as a regression case.
    monkeypatch.setenv("HYPA_DATABASE_URL", bot.store.url)
    out = tmp_path / "reviewed.jsonl"
    result = CliRunner().invoke(cli_app, ["feedback", "export", "--reviewed", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    (row,) = [r for r in rows if r["answer_id"] == answer_id]
    assert (row["id"], row["question"], row["reference_answer"], row["gold_provisions"]) == (
        f"rv-{answer_id}", QUESTION, reference, ["§ 20-872(a)"])
    assert row["review_state"] == "corrected" and row["reasons"] == [
        {"reason_kind": "incomplete", "reason": "It leaves out the later violations."}]


def test_answer_is_fine_settles_the_review_and_review_buttons_work_only_in_the_review_channel(bot, fake):
    event, message = ask_in_channel(bot, fake, channel="C0LEGAL2")
    answer_id = buttons(message.blocks)[ACTION_ASK_PERSON]
    click(bot, block_actions(ACTION_ASK_PERSON, answer_id, channel="C0LEGAL2", message_ts=message.ts,
                             thread_ts=event["ts"], user="UDAVE001"))
    post = fake.wait_for(lambda: review_posts(fake), what="the review post")[-1]
    assert "🙋 Ask a person" in text_of(post.blocks) and "<@UDAVE001>" in text_of(post.blocks)
    notified = fake.wait_for(lambda: [e for e in fake.ephemerals if e["text"] == NOTIFIED], what="the asker told")[0]
    assert notified["user"] == "UDAVE001" and notified["thread_ts"] == event["ts"]
    assert bot.store.review(answer_id).request_kind == "ask_person"

    # A review button outside the review channel (a copied message): refused, nothing stored.
    click(bot, block_actions(ACTION_REVIEW_FINE, answer_id, channel="C0LEGAL2", message_ts=message.ts,
                             user="UMALLORY"))
    fake.wait_for(lambda: [e for e in fake.ephemerals if e["text"] == REVIEW_ONLY_IN_CHANNEL], what="a refusal")
    assert bot.store.review(answer_id).state == "pending"

    click(bot, block_actions(ACTION_REVIEW_FINE, answer_id, channel=REVIEW_CHANNEL, message_ts=post.ts,
                             user="ULEAD001", blocks=post.blocks))
    settled = fake.wait_for(lambda: [m for m in review_posts(fake) if m.edits > 0], what="the post settled")[0]
    assert "Marked fine by <@ULEAD001>" in text_of(settled.blocks) and buttons(settled.blocks) == {}
    assert bot.store.review(answer_id).state == "fine"


def test_ask_a_person_counts_only_from_the_answers_channel_and_says_when_nobody_can_be_reached(bot, fake):
    event, message = ask_in_channel(bot, fake, channel="C0LEGAL3")
    answer_id = buttons(message.blocks)[ACTION_ASK_PERSON]
    click(bot, block_actions(ACTION_ASK_PERSON, answer_id, channel="C0OTHER1", message_ts=message.ts,
                             user="UERIN001"))
    fake.wait_for(lambda: [e for e in fake.ephemerals if e["text"] == NOT_FROM_HERE], what="the refusal")
    assert review_posts(fake) == [] and bot.store.review(answer_id) is None
    desk = bot.server.bot.review
    desk.review_channel = ""  # as a bot without HYPA_REVIEW_CHANNEL
    try:
        click(bot, block_actions(ACTION_ASK_PERSON, answer_id, channel="C0LEGAL3", message_ts=message.ts,
                                 thread_ts=event["ts"], user="UERIN001"))
        fake.wait_for(lambda: [e for e in fake.ephemerals if e["text"] == NO_REVIEW_CHANNEL], what="no reviewers")
    finally:
        desk.review_channel = REVIEW_CHANNEL
    assert review_posts(fake) == []


def test_a_reaction_is_a_one_tap_rating_without_a_modal_or_a_review(bot, fake):
    event, message = ask_in_channel(bot, fake, channel="C0LEGAL4")
    answer_id = buttons(message.blocks)[ACTION_DOWNVOTE]
    bot.slack.send(envelope(reaction_event("reaction_added", "-1", channel="C0LEGAL4", ts=message.ts, user="UFRAN001")))
    fake.wait_for(lambda: bot.store.current_rating(answer_id, "UFRAN001") == -1, 5, "the reaction's rating")
    fake.wait_quiet(0.3)
    assert fake.views == [] and review_posts(fake) == []


# --- 5. group DMs (message.mpim) ----------------------------------------------------------------------


def test_in_a_group_dm_a_mention_is_answered_and_a_follow_up_in_its_thread_needs_no_mention(bot, fake):
    from hypa_testkit.fakes.slack_server import message_event

    event, message = ask_in_channel(bot, fake, channel="G0MPIM01")
    follow = message_event("And for a second violation?", channel="G0MPIM01", channel_type="mpim",
                           thread_ts=event["ts"])
    assert bot.slack.send(envelope(follow)).status_code == 200
    fake.wait_for(lambda: len([m for m in fake.thread("G0MPIM01", event["ts"]) if m.edits]) == 2, what="2 answers")
    plain = message_event("lunch anyone?", channel="G0MPIM01", channel_type="mpim")  # no mention, no thread
    bot.slack.send(envelope(plain))
    fake.wait_quiet(0.3)
    assert fake.thread("G0MPIM01", plain["ts"]) == []


# --- reliability: a /hypa command owed after a crash ---------------------------------------------------


def test_a_command_whose_worker_died_is_answered_privately_by_the_recovery_sweep(tmp_path):
    """The response URL lived in the dead process only: the sweep answers with chat.postEphemeral, to the
    asker in the command's channel, and never in public."""
    from core.conversation import IncomingMessage

    with FakeSlack() as fake, running_bot(tmp_path, fake, delivery_lease_s=1.0) as running:
        command = IncomingMessage("slack", "T0TEAM01", "C0CRASH1", "cmd:9.9.dead", "UALICE01", QUESTION, "cmd:9.9.dead")
        running.store.claim_message(command, holder="a-process-that-died")
        sent = fake.wait_for(lambda: fake.ephemerals, 10, "the private answer")[0]
        assert (sent["channel"], sent["user"]) == ("C0CRASH1", "UALICE01") and "$500" in text_of(sent["blocks"])
        assert ACTION_SHARE in buttons(sent["blocks"])
        fake.wait_quiet(0.5)
        assert fake.calls_to("chat.postMessage") == [] and len(fake.ephemerals) == 1
        assert running.store.owed_messages() == []
