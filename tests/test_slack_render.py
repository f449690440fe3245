"""Slack adapter units: inbound text, event routing, Block Kit rendering and Slack's limits."""
from __future__ import annotations

import json

import pytest

from adapters.slack.blocks import (
    ACTION_DOWNVOTE,
    ACTION_UPVOTE,
    FALLBACK_CHARS,
    MAX_BLOCKS,
    REFUSAL_PREFIX,
    SECTION_CHARS,
    feedback_acknowledgement,
    render_failure,
    render_reply,
)
from adapters.slack.events import (
    BotIdentity,
    is_answerable_mention,
    message_key,
    route_message,
    to_incoming,
)
from adapters.slack.text import (
    escape_mrkdwn,
    mentions,
    rating_for_reaction,
    split_text,
    to_question,
)
from core.conversation import Reply
from core.types import Citation
from hypa_testkit.fakes.slack_server import block_texts

BOT = BotIdentity(user_id="UBOT", bot_id="BBOT")


# --- inbound text -----------------------------------------------------------------------------


def test_the_bot_mention_is_stripped_and_other_markup_resolved():
    text = "<@UBOT> does <@U2|bob> in <#C9|legal> need a &lt;bias audit&gt; &amp; notice? see <https://x.test/a|the rule>"
    assert to_question(text, "UBOT") == "does @bob in #legal need a <bias audit> & notice? see the rule"
    assert to_question("<@UBOT|hypa>   ", "UBOT") == ""
    assert to_question("<!here> <mailto:a@b.test> <https://x.test>", "UBOT") == "@here a@b.test https://x.test"


def test_emoji_codes_and_control_characters_are_removed_but_times_and_sections_survive():
    assert to_question(":tada: :+1::skin-tone-3: :thinking_face:", "UBOT") == ""
    assert to_question("Is 10:30:00 ok under § 5-301:", "UBOT") == "Is 10:30:00 ok under § 5-301:"
    assert to_question("What\x00 is\x07 a\x1b audit?", "UBOT") == "What is a audit?"
    assert to_question("¿Qué es una auditoría? 審査とは", "UBOT") == "¿Qué es una auditoría? 審査とは"


def test_mentions_detects_both_mention_forms():
    assert mentions("hi <@UBOT>", "UBOT") and mentions("hi <@UBOT|hypa>", "UBOT")
    assert not mentions("hi <@UBOTX>", "UBOT") and not mentions("hi", "")


@pytest.mark.parametrize(
    "name, rating",
    [("+1", 1), ("thumbsup", 1), ("+1::skin-tone-2", 1), ("thumbsup::skin-tone-6", 1),
     ("-1", -1), ("thumbsdown", -1), ("-1::skin-tone-4", -1), ("tada", None), ("heart", None), ("", None)],
)
def test_thumbs_reactions_map_to_ratings(name, rating):
    assert rating_for_reaction(name) == rating


def test_escaping_neutralizes_slack_markup():
    assert escape_mrkdwn("<!channel> & <@U1>") == "&lt;!channel&gt; &amp; &lt;@U1&gt;"


def test_split_text_respects_the_limit_and_never_cuts_an_entity():
    text = escape_mrkdwn(("a < b & c > d " * 50 + "\n\n") * 20)
    pieces = split_text(text, 300)
    assert all(len(p) <= 300 for p in pieces)
    assert "".join(pieces).replace(" ", "").replace("\n", "") == text.replace(" ", "").replace("\n", "")
    unbroken = escape_mrkdwn("&" * 1000)  # no spaces at all: hard cuts
    assert all(p.count("&") == p.count("&amp;") for p in split_text(unbroken, 298))


# --- routing ------------------------------------------------------------------------------------


def _message(**fields) -> dict:
    base = {"type": "message", "user": "U1", "text": "a question", "ts": "200.2", "channel": "C1",
            "channel_type": "channel"}
    base.update(fields)
    return base


def test_dms_are_answered_and_channel_chatter_is_not():
    assert route_message(_message(channel="D1", channel_type="im"), BOT).action == "answer"
    assert route_message(_message(), BOT).action == "ignore"


def test_thread_replies_are_answered_only_when_the_thread_is_ours_and_mentions_come_from_app_mention():
    assert route_message(_message(thread_ts="100.1"), BOT).action == "answer_if_bot_thread"
    assert route_message(_message(thread_ts="100.1", text="<@UBOT> and then?"), BOT).action == "ignore"
    # A thread's root message repeats its own ts as thread_ts: not a reply.
    assert route_message(_message(ts="100.1", thread_ts="100.1"), BOT).action == "ignore"


@pytest.mark.parametrize(
    "fields",
    [{"bot_id": "B2"}, {"subtype": "bot_message", "user": None}, {"user": "UBOT"}, {"subtype": "message_changed"},
     {"subtype": "message_deleted"}, {"subtype": "channel_join"}, {"bot_profile": {"id": "B3"}}, {"user": None}],
)
def test_bots_edits_and_system_messages_are_never_answered(fields):
    event = _message(channel="D1", channel_type="im", **fields)
    assert route_message(event, BOT).action == "ignore"
    assert not is_answerable_mention({**event, "type": "app_mention"}, BOT)


def test_attachments_only_messages_are_routed_so_the_user_hears_back():
    event = _message(channel="D1", channel_type="im", subtype="file_share", text="", files=[{"id": "F1"}])
    assert route_message(event, BOT).action == "answer"


def test_incoming_message_uses_the_thread_root_and_strips_the_mention():
    event = {"type": "app_mention", "user": "U1", "text": "<@UBOT> hi there", "ts": "300.3", "channel": "C1",
             "thread_ts": "100.1"}
    incoming = to_incoming(event, "T1", BOT)
    assert (incoming.platform, incoming.workspace, incoming.channel) == ("slack", "T1", "C1")
    assert (incoming.thread, incoming.message_id, incoming.text, incoming.user) == ("100.1", "300.3", "hi there", "U1")
    assert incoming.sent_at.timestamp() == pytest.approx(300.3)
    assert to_incoming({**event, "thread_ts": None}, "T1", BOT).thread == "300.3"
    assert message_key("T1", event) == message_key("T1", {**event, "type": "message"})


# --- rendering ----------------------------------------------------------------------------------


def _reply(text: str, citations=(), refused=False, note="") -> Reply:
    return Reply(answer_id="ans123", text=text, citations=list(citations), refused=refused, note=note)


CITATIONS = [
    Citation(1, "d:1", "Toy Code § 1-103", "A seller that violates this chapter is liable " + "for penalties " * 40),
    Citation(2, "d:2", "Toy Code § 1-102(a)", "A seller shall notify each buyer."),
    Citation(2, "d:3", "Toy Rules § 2", "Notice may be given by mail."),
]


def test_answer_has_escaped_text_numbered_sources_with_quotes_and_feedback_buttons():
    message = render_reply(_reply("Yes <@U1> & **notify** buyers [1][2].", CITATIONS, note="extractive fallback"))
    texts = block_texts(message.blocks)
    assert texts[0] == "Yes &lt;@U1&gt; &amp; *notify* buyers [1][2]."
    sources = "\n".join(texts)
    assert "*[1]* Toy Code § 1-103 — _“A seller that violates" in sources
    assert "*[2]* Toy Code § 1-102(a); Toy Rules § 2" in sources
    quote_line = next(line for line in sources.splitlines() if line.startswith("*[1]*"))
    assert len(quote_line) < 300 and quote_line.endswith("…”_")  # long quotes are shortened
    assert "_extractive fallback_" in texts
    actions = next(b for b in message.blocks if b["type"] == "actions")
    assert [(e["action_id"], e["value"]) for e in actions["elements"]] == [
        (ACTION_UPVOTE, "ans123"), (ACTION_DOWNVOTE, "ans123"), ("ask_person", "ans123")]
    # A private (/hypa) answer also offers "Share in channel", first; a heading goes above the answer.
    private = render_reply(_reply("Yes.", CITATIONS), shareable=True, heading="<@U1> asked: _x_")
    private_actions = next(b for b in private.blocks if b["type"] == "actions")
    assert [e["action_id"] for e in private_actions["elements"]] == [
        "share_answer", ACTION_UPVOTE, ACTION_DOWNVOTE, "ask_person"]
    assert private.blocks[0] == {"type": "context", "elements": [{"type": "mrkdwn", "text": "<@U1> asked: _x_"}]}
    # The fallback `text` is mrkdwn too (notifications; the message itself if Slack rejects the blocks):
    # an answer quoting "<!channel>" or "<https://x|y>" must not become a ping or a link.
    assert message.text.startswith("Yes &lt;@U1&gt; &amp; **notify**")


def test_fallback_text_is_escaped_and_a_cut_never_splits_an_entity():
    message = render_reply(_reply("Ping <!channel> & see <https://evil.example|the rules>."))
    assert "<" not in message.text and ">" not in message.text
    assert message.text == "Ping &lt;!channel&gt; &amp; see &lt;https://evil.example|the rules&gt;."
    cut = render_reply(_reply("x" * (FALLBACK_CHARS - 3) + "<<<<")).text
    assert len(cut) <= FALLBACK_CHARS and cut.endswith("x…")  # "&lt;" was not left half-cut


def test_refusal_says_so_plainly():
    message = render_reply(_reply("The indexed regulations do not cover this.", refused=True))
    assert block_texts(message.blocks)[0].startswith(REFUSAL_PREFIX)
    assert message.text.startswith("Not answered:")


def test_long_answers_are_split_across_sections_within_slack_limits():
    long = ("The employer must notify candidates. " * 80 + "\n\n") * 8  # ~24,000 characters
    message = render_reply(_reply(long, CITATIONS))
    sections = [b for b in message.blocks if b["type"] == "section"]
    assert all(len(b["text"]["text"]) <= SECTION_CHARS for b in sections)
    answer_sections = sections[:-1]
    assert len(answer_sections) >= 8
    assert sum(len(b["text"]["text"]) for b in answer_sections) >= len(long.strip()) - 20 * len(answer_sections)
    assert len(message.blocks) <= MAX_BLOCKS and len(message.text) <= FALLBACK_CHARS


def test_a_runaway_answer_still_fits_in_fifty_blocks_with_sources_and_buttons():
    message = render_reply(_reply("x" * 200_000 + " & more", CITATIONS * 10, note="n"))
    assert len(message.blocks) <= MAX_BLOCKS
    assert message.blocks[-1]["type"] == "actions"
    assert any("answer cut short" in t for t in block_texts(message.blocks))
    assert len(json.dumps(message.blocks)) < 200_000


def test_failure_and_feedback_acknowledgements_are_explicit():
    assert "went wrong" in render_failure().text and render_failure().blocks
    assert "recorded" in feedback_acknowledgement(1, True) and "👍" in feedback_acknowledgement(1, True)
    assert "already" in feedback_acknowledgement(-1, False) and "👎" in feedback_acknowledgement(-1, False)


def test_slack_timestamps_order_feedback_events():
    from datetime import UTC, datetime

    from adapters.slack.events import slack_time

    assert slack_time("1700000000.250000") == datetime(2023, 11, 14, 22, 13, 20, 250000, tzinfo=UTC)
    assert slack_time("1700000000.1") < slack_time("1700000000.2")
    for missing in (None, "", "not-a-ts", "1e400"):
        assert slack_time(missing).tzinfo is UTC  # falls back to now, never raises
