"""A quote the answer already shows is not repeated under Sources (Slack, Telegram, terminal)."""
from __future__ import annotations

from rich.console import Console

from adapters.citations import sources
from adapters.slack.blocks import source_lines
from adapters.telegram.render import render_reply as telegram_reply
from adapters.terminal import render_reply as terminal_reply
from core.conversation import Reply
from core.types import Citation

QUOTE = "An employer must keep the summary posted for at least 6 months after its latest use."
OTHER = "Any person that violates this subchapter is liable for a civil penalty."
CITATIONS = [Citation(1, "c1", "6 RCNY § 5-303(c)", QUOTE), Citation(2, "c2", "Admin. Code § 20-872(a)", OTHER)]
# An offline answer shows quote 1 (its line breaks and quote marks differ), a paraphrase cites 2.
TEXT = (
    "Under 6 RCNY § 5-303(c): “An employer must keep the summary posted\nfor at least 6 months after its latest use.” [1] "
    "Fines apply [2]."
)


def _reply() -> Reply:
    return Reply(text=TEXT, refused=False, citations=CITATIONS, answer_id="a1")


def test_sources_drop_the_quotes_the_answer_shows():
    listed = sources(CITATIONS, TEXT)
    assert [(s.n, s.labels, s.quote) for s in listed] == [
        (1, ("6 RCNY § 5-303(c)",), ""),
        (2, ("Admin. Code § 20-872(a)",), OTHER),
    ]


def test_each_front_end_shows_a_quote_once():
    slack = "\n".join(source_lines(_reply()))
    assert "6 months" not in slack and "civil penalty" in slack
    telegram = "\n".join(telegram_reply(_reply()).parts)
    assert telegram.count("6 months") == 1 and telegram.count("civil penalty") == 1
    console = Console(record=True, width=200)
    terminal_reply(console, _reply())
    shown = console.export_text()
    assert shown.count("6 months") == 1 and shown.count("civil penalty") == 1


# --- links to the law ------------------------------------------------------------------------------

URL = "https://example.com/code?x=1&y=2#s{}"  # an & that each front end must escape its own way
LINKED = [
    Citation(1, "c1", "6 RCNY § 5-303(c)", QUOTE, url=URL.format("5-303")),
    Citation(2, "c2", "Admin. Code § 20-872(a)", OTHER, url=URL.format("20-872")),
    Citation(2, "c3", "Code <§> 9", OTHER, url='https://example.com/a|b>c"d'),  # hostile label and address
]


def _linked() -> Reply:
    return Reply(text=TEXT, refused=False, citations=LINKED, answer_id="a1")


def test_sources_keep_each_labels_link():
    listed = sources(LINKED, TEXT)
    assert [s.urls for s in listed] == [
        (URL.format("5-303"),), (URL.format("20-872"), 'https://example.com/a|b>c"d'),
    ]
    assert sources(CITATIONS, TEXT)[0].urls == ("",)


def test_slack_shows_each_label_as_a_mrkdwn_link_escaped():
    lines = source_lines(_linked())
    assert lines[0] == "*[1]* <https://example.com/code?x=1&amp;y=2#s5-303|6 RCNY § 5-303(c)>"
    assert lines[1].startswith("*[2]* <https://example.com/code?x=1&amp;y=2#s20-872|Admin. Code § 20-872(a)>; "
                               "<https://example.com/a%7Cb%3Ec%22d|Code &lt;§&gt; 9>")
    assert source_lines(_reply())[0] == "*[1]* 6 RCNY § 5-303(c)"  # no address: the label alone


def test_telegram_shows_each_label_as_an_html_link_telegram_can_parse():
    from hypa_testkit.fakes.telegram_server import telegram_html

    [part] = telegram_reply(_linked()).parts
    shown = telegram_html(part)  # Telegram's own check: it would refuse the message otherwise
    assert shown.links == [
        (URL.format("5-303"), "6 RCNY § 5-303(c)"), (URL.format("20-872"), "Admin. Code § 20-872(a)"),
        ('https://example.com/a|b>c"d', "Code <§> 9"),
    ]


def test_the_terminal_shows_the_address_and_makes_the_label_a_link():
    console = Console(record=True, width=300)
    terminal_reply(console, _linked())
    shown = console.export_text(clear=False)
    assert "[1] 6 RCNY § 5-303(c) https://example.com/code?x=1&y=2#s5-303" in " ".join(shown.split())
    import re

    links = re.findall(r'<a [^>]*href="([^"]*)">([^<]*)', console.export_html())
    assert ("https://example.com/code?x=1&y=2#s5-303", "6 RCNY § 5-303(c)") in links  # the label is the link


def test_the_fake_telegram_refuses_html_telegram_would_refuse():
    import pytest

    from hypa_testkit.fakes.telegram_server import TelegramHTMLError, telegram_html

    for bad in ("a < b", "AT&T", "<b>open", "<a>no href</a>", "<div>x</div>", "<b><i>x</b></i>"):
        with pytest.raises(TelegramHTMLError):
            telegram_html(bad)
    assert telegram_html('<b><a href="https://x.example/?a=1&amp;b=2">A &amp; B</a></b>').links == [
        ("https://x.example/?a=1&b=2", "A & B")
    ]


def test_links_too_long_for_one_message_leave_the_labels_alone():
    """A number citing many provisions with long addresses: Slack and Telegram would cut the line
    inside a link's markup (or Telegram would refuse it), so those labels go without links."""
    from hypa_testkit.fakes.telegram_server import telegram_html

    long_url = "https://example.com/" + "a" * 900 + "#s{}"
    many = [Citation(1, f"c{i}", f"Code § {i}", QUOTE, url=long_url.format(i)) for i in range(6)]
    reply = Reply(text=TEXT, refused=False, citations=many + [LINKED[1]], answer_id="a1")
    slack = source_lines(reply)
    assert slack[0].startswith("*[1]* Code § 0; Code § 1") and "<https" not in slack[0]
    assert slack[1].startswith("*[2]* <https://example.com/code")  # a short line keeps its link
    parts = telegram_reply(reply).parts
    assert all(len(p) <= 4096 for p in parts)
    shown = [telegram_html(p) for p in parts]
    assert [link for s in shown for link in s.links] == [(URL.format("20-872"), "Admin. Code § 20-872(a)")]
    assert "Code § 5" in "".join(s.text for s in shown)
