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
