"""`hypa feedback report|export`: what people asked and how they rated the answers."""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from bot.cli_common import command_group, fail, first_line, load_settings, out, shown_database_url

if TYPE_CHECKING:
    from core.feedback_review import FeedbackReview, Tally
    from storage.sql import ConversationStore

feedback_app = command_group(help="Review 👍/👎 feedback: reports and exports for test cases.", no_args_is_help=True)


class RatingFilter(str, Enum):
    up = "up"
    down = "down"
    all = "all"


def _open_store(url: str) -> ConversationStore | None:
    """The store, or None when the SQLite file does not exist yet (no bot has run)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from storage.sql import ConversationStore

    try:
        parsed = make_url(url)
    except ArgumentError:
        # Not echoed: a mistyped URL may still carry a password.
        fail("HYPA_DATABASE_URL is not a SQLAlchemy URL (expected e.g. sqlite:///path or postgresql+psycopg://...)")
    if parsed.get_backend_name() == "sqlite" and parsed.database and not Path(parsed.database).exists():
        return None
    try:
        return ConversationStore(url)
    except (SQLAlchemyError, ImportError, OSError) as exc:
        fail(f"cannot open the database {shown_database_url(url)}: {first_line(exc)}")


@contextmanager
def _reading(url: str) -> Iterator[None]:
    """A database failure while reading ratings (locked past the busy timeout, connection lost,
    a table missing) is a one-line error, not a traceback."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except SQLAlchemyError as exc:
        fail(f"reading the database {shown_database_url(url)} failed: {first_line(exc)}")


def _no_feedback(url: str, days: int) -> None:
    period = f" in the last {days} days" if days else ""
    out.print(
        f"No feedback yet{period} in {shown_database_url(url)}. Ratings appear once people click 👍/👎 or react "
        "to the bot's answers in Slack or Telegram (`hypa serve slack|telegram`)."
    )


def _since(days: int) -> datetime | None:
    return datetime.now(UTC) - timedelta(days=days) if days else None


@feedback_app.command("report")
def report(
    out_png: Path | None = typer.Option(
        None, "--out", "-o", help="Where to write the plot (PNG) [default: HYPA_DATA_DIR/reports/feedback_report.png]."
    ),
    days: int = typer.Option(30, "--days", min=0, help="Only ratings from the last N days (0 = all)."),
    worst: int = typer.Option(10, "--worst", min=1, max=200, help="How many worst-rated answers to list."),
    as_html: bool = typer.Option(
        False, "--html", help="Also write one self-contained HTML page (the plot, the tables, the worst-rated "
        "answers with their reasons, review state and linked sources) beside the plot, as NAME.html."
    ),
) -> None:
    """Ratings per day, by complexity label, question type and reason, the worst-rated answers, a plot."""
    from rich.markup import escape

    from bot.feedback_report import png_bytes, render_html, report_figure
    from core.feedback_review import review

    settings = load_settings()
    store = _open_store(settings.sql_url)
    since = _since(days)
    with _reading(settings.sql_url):
        rated = [] if store is None else store.rated_answers(since=since)
    if not rated:
        _no_feedback(settings.sql_url, days)
        return
    now = datetime.now(UTC)
    result = review(rated, worst=worst, since=since.date() if since else None, today=now.date())
    _print_report(result, days)
    # Not the working directory: a report run from anywhere lands beside the data it describes.
    out_png = (out_png or settings.data_dir / "reports" / "feedback_report.png").resolve()
    png = png_bytes(report_figure(result))
    _write(out_png, png, "the plot")
    out.print(f"plot written to [bold]{escape(str(out_png))}[/]", soft_wrap=True)  # a path to copy: never wrapped
    if as_html:
        page_path = out_png.with_suffix(".html")
        period = f"last {days} days" if days else "all time"
        _write(page_path, render_html(result, png, period=period, generated=now).encode("utf-8"), "the page")
        out.print(f"page written to [bold]{escape(str(page_path))}[/]", soft_wrap=True)


def _write(path: Path, data: bytes, what: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as exc:
        fail(f"cannot write {what} to {path}: {exc}")


@feedback_app.command("export")
def export(
    out_path: Path = typer.Option(..., "--out", "-o", help="JSONL file to write (one rated exchange a line)."),
    rating: RatingFilter = typer.Option(RatingFilter.all, "--rating", help="up, down or all."),
    days: int = typer.Option(0, "--days", min=0, help="Only ratings from the last N days (0 = all)."),
    reviewed: bool = typer.Option(
        False, "--reviewed",
        help="Write reviewed exchanges instead (corrected or marked fine in the review channel), with the "
        "reviewer's reference answer: regression cases for `hypa eval run` / `report` as they are.",
    ),
) -> None:
    """Rated exchanges in the eval dataset's format: fill in reference_answer to make a test case.
    With --reviewed: the exchanges reviewers settled, references filled in."""
    from core.feedback_review import export_row

    settings = load_settings()
    store = _open_store(settings.sql_url)
    if reviewed:
        if rating is not RatingFilter.all:
            fail("--rating does not apply to --reviewed (a review is of an exchange, not of one rating)")
        _export_reviewed(store, settings, out_path, days)
        return
    sign = {RatingFilter.up: 1, RatingFilter.down: -1, RatingFilter.all: None}[rating]
    with _reading(settings.sql_url):
        rated = [] if store is None else store.rated_answers(since=_since(days), rating=sign)
    histories: dict[str, list] = {}  # answer id -> its thread history (one query per answer, not per rater)
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with out_path.open("w", encoding="utf-8") as f:
            for r in rated:
                if r.answer.id not in histories:
                    with _reading(settings.sql_url):
                        histories[r.answer.id] = store.history_before_answer(r.answer, settings.thread_history_turns)  # type: ignore[union-attr]
                f.write(json.dumps(export_row(r, histories[r.answer.id]), ensure_ascii=False) + "\n")
    except OSError as exc:
        fail(f"cannot write {out_path}: {exc}")
    if not rated:
        _no_feedback(settings.sql_url, days)
    out.print(f"{len(rated)} rated exchange(s) written to [bold]{out_path}[/]")


def _export_reviewed(store: ConversationStore | None, settings, out_path: Path, days: int) -> None:
    from core.feedback_review import reviewed_row

    with _reading(settings.sql_url):
        reviewed = [] if store is None else store.reviewed_answers(since=_since(days))
        histories = [store.history_before_answer(r.answer, settings.thread_history_turns) for r in reviewed]  # type: ignore[union-attr]
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with out_path.open("w", encoding="utf-8") as f:
            for r, history in zip(reviewed, histories, strict=True):
                f.write(json.dumps(reviewed_row(r, history), ensure_ascii=False) + "\n")
    except OSError as exc:
        fail(f"cannot write {out_path}: {exc}")
    if not reviewed:
        period = f" in the last {days} days" if days else ""
        out.print(
            f"No reviewed exchanges yet{period} in {shown_database_url(settings.sql_url)}. Reviews are settled in the "
            "review channel (HYPA_REVIEW_CHANNEL / HYPA_TELEGRAM_REVIEW_CHAT; docs/FEEDBACK.md)."
        )
    corrected = sum(r.review.state == "corrected" for r in reviewed)
    out.print(f"{len(reviewed)} reviewed exchange(s) ({corrected} corrected, {len(reviewed) - corrected} fine) "
              f"written to [bold]{out_path}[/]")


# --- rendering ----------------------------------------------------------------------------------


def _tally_table(title: str, first: str, tallies: list[Tally]):
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for name in (first, "answers", "👍", "👎", "net", "% 👍"):
        table.add_column(name, justify="left" if name == first else "right")
    for t in tallies:
        table.add_row(escape(t.key), str(t.answers), str(t.up), str(t.down), f"{t.net:+d}", f"{t.share_up:.0%}")
    return table


def _excerpt(text: str, limit: int) -> str:
    """A one-line excerpt, escaped for rich: users' text such as "[/]" is shown, never parsed as markup."""
    from rich.markup import escape

    flat = " ".join(text.split())
    return escape(flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…")


def _print_report(result: FeedbackReview, days: int) -> None:
    from rich.table import Table

    period = f"last {days} days" if days else "all time"
    out.print(
        f"[bold]{result.ratings}[/] current ratings ({period}): [green]{result.up} 👍[/]  "
        f"[red]{result.down} 👎[/]  ({result.up / result.ratings:.0%} positive)"
    )
    out.print(_tally_table("Ratings per day (UTC)", "day", [t for _, t in result.by_day]))
    out.print(_tally_table("By complexity (retrieval config: label)", "complexity", result.by_complexity))
    out.print(_tally_table("By question type (core/question_type.py)", "type", result.by_question_type))
    if result.by_reason:
        out.print(_tally_table("👎 by reason given", "reason", result.by_reason))
    if not result.worst:
        out.print("No 👎 ratings in this period.")
        return
    table = Table(title="Worst-rated answers", title_justify="left", show_lines=True)
    for name, justify in (("net", "right"), ("👍/👎", "right"), ("question", "left"), ("answer", "left"),
                          ("citations", "left"), ("answer id", "left")):
        # Answer ids are what a reviewer looks up (and what export rows carry): never truncated.
        no_wrap = name == "answer id"
        table.add_column(name, justify=justify, no_wrap=no_wrap, min_width=16 if no_wrap else None)  # type: ignore[arg-type]
    for s in result.worst:
        r = s.answer.record
        question = _excerpt(r.question, 120)
        if s.reasons:
            question += "\n[italic]reasons: " + "; ".join(_excerpt(x, 80) for x in s.reasons[:3]) + "[/]"
        if s.review_state:
            question += f"\n[bold]review: {s.review_state}[/]"
        table.add_row(
            f"{s.net:+d}", f"{s.up}/{s.down}", question, _excerpt(r.text, 200),
            _excerpt(", ".join(f"[{c.n}] {c.label}" for c in r.citations), 400) or "—", s.answer.id,
        )
    out.print(table)
