"""Telegram pure helpers: HTML rendering (escaping, sources, 4,096-character splits), callback data,
reaction mapping, mention detection."""
from __future__ import annotations

import html
import re
from html.parser import HTMLParser

from telegram import Message

from adapters.telegram.app import TelegramConfig
from adapters.telegram.handlers import (
    mentions_bot,
    question_text,
    reaction_rating,
    replies_to_bot,
)
from adapters.telegram.render import (
    TELEGRAM_TEXT_LIMIT,
    feedback_callback_data,
    parse_feedback_callback,
    render_reply,
    split_plain,
    utf16_len,
)
from core.conversation import Reply
from core.types import Citation

ALLOWED_TAGS = {"b", "i"}


class _TagChecker(HTMLParser):
    """Fails on unbalanced or unexpected tags: what Telegram's HTML parser would reject."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        assert tag in ALLOWED_TAGS, tag
        self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack.pop() == tag, tag

    def handle_data(self, data):
        self.text.append(data)


def _check_html(part: str) -> str:
    checker = _TagChecker()
    checker.feed(part)
    checker.close()
    assert checker.stack == [], f"unclosed tags {checker.stack}"
    # every & starts a complete entity (a cut inside '&amp;' would leave a bare '&am')
    assert all(re.match(r"&(amp|lt|gt|quot|#x27);", part[m.start():]) for m in re.finditer("&", part))
    return "".join(checker.text)


def _reply(text: str, citations=None, note="") -> Reply:
    return Reply(answer_id="a1b2c3d4e5f6g7h8", text=text, citations=citations or [], refused=False, note=note)


def test_text_labels_and_quotes_are_escaped_and_sources_numbered():
    cites = [
        Citation(1, "c1", "Toy Code § 1-102(a)", "A seller shall notify <each> buyer & agent."),
        Citation(2, "c2", "Toy <script> § 9", "Penalty: $500."),
    ]
    rendered = render_reply(_reply("Use <b>mail</b> & e-mail [1]; fines [2].", cites, note="fallback <used>"))
    assert len(rendered.parts) == 1
    part = rendered.parts[0]
    visible = _check_html(part)
    assert "Use <b>mail</b> & e-mail [1]" in visible  # shown literally, not as markup
    assert "&lt;b&gt;mail&lt;/b&gt; &amp; e-mail" in part
    assert "[1] <b>Toy Code § 1-102(a)</b>" in part and "[2] <b>Toy &lt;script&gt; § 9</b>" in part
    assert "<i>“A seller shall notify &lt;each&gt; buyer &amp; agent.”</i>" in part
    assert "<i>fallback &lt;used&gt;</i>" in part


def test_long_answer_is_split_below_the_limit_never_inside_an_entity():
    # '&' escapes to 5 characters: a naive cut of the escaped text would land inside '&amp;'.
    sentence = "Sellers & buyers <must> agree; " * 40
    text = "\n\n".join(sentence for _ in range(12))  # ~15,000 characters, ~25,000 escaped
    cites = [Citation(i, f"c{i}", f"Toy Code § 1-{i}", "quote & more " * 50) for i in range(1, 9)]
    rendered = render_reply(_reply(text, cites))
    assert len(rendered.parts) >= 6
    visible = ""
    for part in rendered.parts:
        assert utf16_len(part) <= TELEGRAM_TEXT_LIMIT
        visible += _check_html(part)
    assert visible.count("Sellers & buyers <must> agree;") == 40 * 12  # nothing lost
    assert "[8] Toy Code § 1-8" in visible


def test_split_counts_utf16_units_and_cuts_one_huge_word():
    emoji_text = "👍" * 5000  # 10,000 UTF-16 units, no spaces to break at
    pieces = split_plain(emoji_text, 4096)
    assert "".join(pieces) == emoji_text
    assert all(utf16_len(html.escape(p)) <= 4096 for p in pieces)
    assert split_plain("short", 4096) == ["short"]


def test_control_characters_are_removed_and_empty_text_still_renders():
    rendered = render_reply(_reply("a\x00b\x07c\x1b[0m\nd"))
    assert rendered.parts == ["abc[0m\nd"]
    assert render_reply(_reply("   ")).parts == ["(no answer)"]


def test_callback_data_is_short_and_round_trips():
    data = feedback_callback_data("a1b2c3d4e5f6g7h8", 1)
    assert data == "fb:+:a1b2c3d4e5f6g7h8" and len(data.encode()) <= 64
    assert parse_feedback_callback(data) == ("a1b2c3d4e5f6g7h8", 1)
    assert parse_feedback_callback(feedback_callback_data("x", -1)) == ("x", -1)
    for bad in (None, "", "fb:+:", "fb:*:x", "other:+:x", "fb+x"):
        assert parse_feedback_callback(bad) is None
    assert feedback_callback_data("z" * 70, 1) is None  # too long for Telegram: no buttons rather than an API error
    keyboard = render_reply(_reply("ok")).keyboard
    buttons = keyboard.inline_keyboard[0]
    assert [b.text for b in buttons] == ["👍", "👎"]
    assert [b.callback_data for b in buttons] == ["fb:+:a1b2c3d4e5f6g7h8", "fb:-:a1b2c3d4e5f6g7h8"]


def test_reaction_changes_map_to_ratings():
    assert reaction_rating(set(), {"👍"}) == 1
    assert reaction_rating({"👍"}, {"👎"}) == -1
    assert reaction_rating({"👍"}, set()) == 0  # removed
    assert reaction_rating({"🔥"}, {"❤"}) is None  # unrelated reactions
    assert reaction_rating(set(), {"👍", "👎"}) is None


def test_webhook_path_and_file_url_come_from_settings_values():
    config = TelegramConfig(token="t", base_url="http://127.0.0.1:9/bot", webhook_url="https://bot.example.com/telegram/webhook")
    assert config.webhook_mode and config.webhook_path == "/telegram/webhook"
    assert config.base_file_url == "http://127.0.0.1:9/file/bot"
    assert TelegramConfig(token="t", webhook_url="https://bot.example.com").webhook_path == "/telegram/webhook"
    assert TelegramConfig(token="t").base_file_url == "https://api.telegram.org/file/bot"


def _msg(**fields) -> Message:
    data = {"message_id": 1, "date": 0, "chat": {"id": -5, "type": "group", "title": "g"},
            "from": {"id": 9, "is_bot": False, "first_name": "A"}, **fields}
    return Message.de_json(data, None)


def test_mentions_are_read_from_entities_not_from_the_text():
    text = "Hi @Hypa_Bot what is a widget audit?"
    entity = {"type": "mention", "offset": 3, "length": 9}
    assert mentions_bot(_msg(text=text, entities=[entity]), 77, "hypa_bot")  # usernames are case-insensitive
    assert not mentions_bot(_msg(text=text), 77, "hypa_bot")  # no entity: e.g. inside a code block
    assert not mentions_bot(_msg(text="@other_bot hi", entities=[{"type": "mention", "offset": 0, "length": 10}]), 77, "hypa_bot")
    by_name = {"type": "text_mention", "offset": 0, "length": 4, "user": {"id": 77, "is_bot": True, "first_name": "Hypa"}}
    assert mentions_bot(_msg(text="Hypa, what is a widget?", entities=[by_name]), 77, "hypa_bot")
    assert mentions_bot(_msg(caption="@hypa_bot read this", caption_entities=[{"type": "mention", "offset": 0, "length": 9}],
                             photo=[{"file_id": "p", "file_unique_id": "u", "width": 1, "height": 1}]), 77, "hypa_bot")
    assert question_text(_msg(text=text, entities=[entity]), "hypa_bot") == "Hi what is a widget audit?"
    assert question_text(_msg(text="@hypa_bot"), "hypa_bot") == ""


def test_a_reply_to_the_bot_is_recognised_by_the_author_id():
    bot_message = {"message_id": 2, "date": 0, "chat": {"id": -5, "type": "group", "title": "g"},
                   "from": {"id": 77, "is_bot": True, "first_name": "Hypa"}, "text": "answer"}
    assert replies_to_bot(_msg(text="and then?", reply_to_message=bot_message), 77)
    assert not replies_to_bot(
        _msg(text="and then?", reply_to_message={**bot_message, "from": {"id": 8, "is_bot": False, "first_name": "B"}}), 77
    )
    assert not replies_to_bot(_msg(text="and then?"), 77)
