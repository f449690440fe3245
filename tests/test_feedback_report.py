"""The feedback report people read at a glance (issue 15, item 6): the plot's real time axis, ratings
by question type and by reason, and the one-page HTML report (`hypa feedback report --html`)."""
from __future__ import annotations

import base64
import re
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from html.parser import HTMLParser

import matplotlib.dates as mdates
import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.feedback_report import MIN_DAYS_SHOWN, png_bytes, render_html, report_figure
from core.conversation_store import AnswerRecord, RatedAnswer, StoredAnswer
from core.feedback_review import review
from core.types import Citation
from tests.test_feedback_cli import env, rated  # noqa: F401 - fixtures

TODAY = date(2026, 3, 20)


def at(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time(), UTC) + timedelta(hours=10)


def answer(answer_id: str, question: str = "Do I need a bias audit?", day: date = TODAY) -> StoredAnswer:
    record = AnswerRecord(
        question=question, standalone_question=question, text=f"Answer to {question}", refused=False,
        outcome="answered", citations=[
            Citation(1, "c1", "6 RCNY § 5-301(b)", "a quote", url="https://rules.example/rule?a=1&b=2"),
            Citation(2, "c2", "Toy Code § 9", "another quote"),
        ],
    )
    return StoredAnswer(answer_id, record, at(day), message_pk=1, thread_pk=1, platform="slack")


def row(answer_id: str, rating: int, day: date, rater: str = "A", reason: str = "", question: str = "Do I need a bias audit?"):
    return RatedAnswer(answer(answer_id, question, day), rater, "slack", rating, "button", reason, at(day), at(day))


def reviewed(r: RatedAnswer, kind: str, state: str) -> RatedAnswer:
    """The row with the review loop's marks: the 👎's chosen reason and the exchange's review state."""
    return replace(r, reason_kind=kind, review_state=state)


# --- the time axis ----------------------------------------------------------------------------------


def bar_days(ax) -> list[float]:
    """The x centre of each up-vote bar, in days (matplotlib date numbers)."""
    return [p.get_x() + p.get_width() / 2 for p in ax.patches if p.get_height() > 0]


def test_days_sit_on_a_date_axis_with_their_gaps():
    rows = [row("a1", 1, TODAY - timedelta(days=6)), row("a2", 1, TODAY - timedelta(days=1), rater="B"),
            row("a2", -1, TODAY - timedelta(days=1), rater="C")]
    fig = report_figure(review(rows, since=TODAY - timedelta(days=13), today=TODAY))
    ax = fig.axes[0]
    centres = bar_days(ax)
    assert centres == pytest.approx([mdates.date2num(at(TODAY - timedelta(days=6)).replace(hour=0, tzinfo=None)),
                                     mdates.date2num(at(TODAY - timedelta(days=1)).replace(hour=0, tzinfo=None))])
    assert centres[1] - centres[0] == pytest.approx(5)  # four quiet days between them stay visible
    left, right = ax.get_xlim()
    assert right - left == pytest.approx(14)  # the whole period asked for (13 days back to today)
    assert isinstance(ax.xaxis.get_major_formatter(), mdates.ConciseDateFormatter)


def test_a_single_day_does_not_fill_the_width():
    fig = report_figure(review([row("a1", 1, TODAY)], today=TODAY))
    left, right = fig.axes[0].get_xlim()
    [centre] = bar_days(fig.axes[0])
    assert right - left == pytest.approx(MIN_DAYS_SHOWN)
    assert 0.8 / (right - left) < 0.2  # the bar is a sliver of the axis, not all of it
    assert right - centre == pytest.approx(0.5)  # today is the right end


# --- by question type and by reason -------------------------------------------------------------------


def test_ratings_by_question_type_are_plotted():
    rows = [row("a1", 1, TODAY, question="What is an AEDT?"), row("a2", 1, TODAY, question="Do I need a bias audit?")]
    fig = report_figure(review(rows, today=TODAY))
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[1] == "By question type" and len(fig.axes) == 2  # no reason panel: no 👎 to explain
    labels = [t.get_text() for t in fig.axes[1].get_yticklabels()]
    assert set(labels) == {"definition", "yes-no"}


def test_ratings_by_reason_and_each_worst_answers_reason_and_review_state():
    rows = [
        reviewed(row("a1", -1, TODAY, rater="A", reason="misses the notice period"), "incomplete", "pending"),
        reviewed(row("a1", -1, TODAY, rater="B"), "wrong_provision", "pending"),
        reviewed(row("a2", -1, TODAY, rater="A"), "incomplete", "corrected"),
        reviewed(row("a3", -1, TODAY, rater="C"), "", ""),
        reviewed(row("a3", 1, TODAY, rater="D"), "", ""),
    ]
    result = review(rows, today=TODAY)
    assert [(t.key, t.down, t.answers) for t in result.by_reason] == [
        ("Incomplete", 2, 2), ("(no reason)", 1, 1), ("Wrong provision cited", 1, 1),
    ]
    worst = {s.answer.id: s for s in result.worst}
    assert worst["a1"].reasons == ("Incomplete: misses the notice period", "Wrong provision cited")
    assert worst["a1"].review_state == "pending"
    assert worst["a2"].review_state == "corrected" and worst["a3"].review_state == ""
    fig = report_figure(result)
    assert [ax.get_title() for ax in fig.axes][2] == "Down-votes by reason"
    assert {t.get_text() for t in fig.axes[2].get_yticklabels()} == {"Incomplete", "(no reason)", "Wrong provision cited"}
    # Only 👍s: no reason table (nothing to show, not an empty table).
    assert review([row("a1", 1, TODAY)], today=TODAY).by_reason == []


# --- the HTML page ------------------------------------------------------------------------------------


class PageReader(HTMLParser):
    """Every tag with its attributes, and the page's visible text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def read_page(page: str) -> PageReader:
    reader = PageReader()
    reader.feed(page)
    return reader


def test_the_page_is_self_contained_with_the_plot_and_the_worst_answers():
    hostile = 'What about <script>alert("x")</script> & co?'
    rows = [
        reviewed(row("a1", -1, TODAY, rater="A", reason="cites <b>the wrong</b> rule", question=hostile),
                 "wrong_provision", "pending"),
        reviewed(row("a2", 1, TODAY - timedelta(days=3), rater="B"), "", ""),
    ]
    result = review(rows, today=TODAY)
    png = png_bytes(report_figure(result))
    page = render_html(result, png, period="last 30 days", generated=at(TODAY))
    reader = read_page(page)
    # Self-contained: no scripts, style sheets or frames; the only image is the plot, inline.
    assert not [t for t, _ in reader.tags if t in ("script", "link", "iframe", "object", "embed")]
    [img] = [a for t, a in reader.tags if t == "img"]
    prefix = "data:image/png;base64,"
    assert img["src"].startswith(prefix) and base64.b64decode(img["src"][len(prefix):]) == png
    # Users' text is shown as text, never as markup.
    text = "".join(reader.text)
    assert hostile in text and "cites <b>the wrong</b> rule" in text
    # The worst answer: its reason (kind and words), review state, and its sources linked to the law.
    assert "Wrong provision cited: cites <b>the wrong</b> rule" in text and "pending" in text
    links = [a["href"] for t, a in reader.tags if t == "a"]
    assert links == ["https://rules.example/rule?a=1&b=2"]
    assert "👎 by reason" in text and "By question type" in text and "Ratings per day" in text


def test_the_page_without_down_votes_leaves_reasons_out():
    result = review([row("a1", 1, TODAY)], today=TODAY)
    text = "".join(read_page(render_html(result, b"png", period="all time", generated=at(TODAY))).text)
    assert "by reason" not in text and "No 👎 ratings in this period." in text


def test_report_html_writes_the_page_beside_the_plot(rated, env):
    result = CliRunner().invoke(app, ["feedback", "report", "--out", "plots/report.png", "--html", "--days", "7"],
                                terminal_width=200)
    assert result.exit_code == 0, result.output
    page = (env / "plots" / "report.html").read_text(encoding="utf-8")
    assert f"page written to {env / 'plots' / 'report.html'}" in " ".join(result.output.split())
    reader = read_page(page)
    text = "".join(reader.text)
    assert "6 current ratings" in " ".join(text.split()) and rated["follow"].answer_id in text
    assert "misses e-mail" in text  # the free-text reason the fixture's 👎 carries
    [img] = [a for t, a in reader.tags if t == "img"]
    assert base64.b64decode(img["src"].split(",", 1)[1]) == (env / "plots" / "report.png").read_bytes()
    assert re.search(r"last 7 days", text)
