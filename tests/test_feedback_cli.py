"""`hypa feedback report|export` over a real store, and the question-type classifier they use."""
from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from bot.cli import app
from core.conversation import FeedbackEvent
from core.eval.run import read_items
from core.question_type import classify_question
from hypa_testkit.toy import toy_service
from tests.test_conversation_service import message

runner = CliRunner()


@pytest.fixture
def env(tmp_path, monkeypatch):
    """Settings pointed at a SQLite file in tmp_path (and no project .env)."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "bot.sqlite3"
    monkeypatch.setenv("HYPA_DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("HYPA_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


@pytest.fixture
def rated(env):
    """Three answers in two threads (one a follow-up), rated by several people over three days."""
    service = toy_service(env)
    now = datetime.now(UTC)
    notice = service.handle(message("How must a seller notify buyers before selling a widget?", "1.1", minutes=0))
    follow = service.handle(message("What are the methods?", "1.2", minutes=1))
    penalty = service.handle(message("Is there a civil penalty for a first violation?", "2.1", thread="2.1"))
    events = [
        (notice, "A", 1, 2), (notice, "B", 1, 1), (follow, "A", -1, 1), (follow, "C", -1, 0),
        (follow, "B", 1, 0), (penalty, "A", -1, 0),
    ]
    for reply, rater, rating, days_ago in events:
        reason = "misses e-mail" if rater == "C" else ""
        service.record_feedback(FeedbackEvent(reply.answer_id, "slack", rater, rating,
                                              reason=reason, at=now - timedelta(days=days_ago)))
    service.record_feedback(FeedbackEvent(notice.answer_id, "slack", "Z", 1))
    service.record_feedback(FeedbackEvent(notice.answer_id, "slack", "Z", 0))  # removed: not counted
    service.store.close()
    return {"notice": notice, "follow": follow, "penalty": penalty}


def test_report_prints_tables_and_writes_a_png(rated, env):
    result = runner.invoke(app, ["feedback", "report", "--out", "plots/report.png", "--days", "7"])
    assert result.exit_code == 0, result.output
    text = result.output
    assert "6 current ratings" in text and "3 👍" in text and "3 👎" in text
    for title in ("Ratings per day", "By complexity", "By question type", "Worst-rated answers"):
        assert title in text
    assert "follow-up" in text and "yes-no" in text
    # The follow-up (1 up, 2 down) is the worst answer, listed with its reason and citations.
    worst_section = text[text.index("Worst-rated answers"):]
    assert worst_section.index(rated["follow"].answer_id) < worst_section.index(rated["penalty"].answer_id)
    assert "reasons:" in worst_section and "misses" in worst_section and "Toy Code" in worst_section
    png = (env / "plots" / "report.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5_000


def test_report_plot_goes_to_the_data_directory_by_default_and_says_where(rated, env):
    """Without --out the PNG used to land in whatever directory the command ran in."""
    result = runner.invoke(app, ["feedback", "report"], terminal_width=200)
    assert result.exit_code == 0, result.output
    plot = env / "data" / "reports" / "feedback_report.png"
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert not (env / "feedback_report.png").exists()  # env is also the working directory
    assert f"plot written to {plot}" in " ".join(result.output.split())


def test_report_window_excludes_older_ratings(rated, env):
    result = runner.invoke(app, ["feedback", "report", "--days", "1", "--out", "r.png"])
    assert result.exit_code == 0, result.output
    assert "3 current ratings" in result.output  # only today's (days_ago == 0)


def test_report_and_export_without_feedback_say_so(env):
    result = runner.invoke(app, ["feedback", "report"])
    assert result.exit_code == 0 and "No feedback yet" in result.output
    assert not (env / "feedback_report.png").exists()
    toy_service(env).store.close()  # the database exists, still no ratings
    result = runner.invoke(app, ["feedback", "export", "--out", "x.jsonl"])
    assert result.exit_code == 0 and "No feedback yet" in result.output
    assert (env / "x.jsonl").read_text() == ""


def test_bad_database_url_is_a_clear_error(env, monkeypatch):
    monkeypatch.setenv("HYPA_DATABASE_URL", "not a url")
    result = runner.invoke(app, ["feedback", "report"])
    assert result.exit_code == 1 and "not a SQLAlchemy URL" in result.output


def test_export_writes_eval_format_rows_with_feedback_fields(rated, env):
    result = runner.invoke(app, ["feedback", "export", "--out", "out/rated.jsonl"])
    assert result.exit_code == 0, result.output
    path = env / "out" / "rated.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 6 and "6 rated exchange(s)" in result.output
    required = {"answer_id", "platform", "rater", "rating", "question", "answer", "citations", "rated_at",
                "id", "conversation_history", "reference_answer", "reference_context", "metadata"}
    assert all(required <= set(r) for r in rows)
    assert {r["rating"] for r in rows} == {1, -1} and all(r["platform"] == "slack" for r in rows)
    follow = next(r for r in rows if r["answer_id"] == rated["follow"].answer_id and r["rater"] == "C")
    assert follow["reason"] == "misses e-mail" and follow["metadata"]["question_type"] == "conversational"
    assert [t["role"] for t in follow["conversation_history"]] == ["user", "assistant"]
    assert follow["conversation_history"][0]["content"].startswith("How must a seller notify")
    assert follow["citations"] and {"n", "chunk_id", "label", "quote"} <= set(follow["citations"][0])
    assert follow["reference_answer"] == "" and follow["metadata"]["needs_review"] is True
    datetime.fromisoformat(follow["rated_at"])
    # `hypa eval run` accepts the file as a dataset (ids unique, history well-formed).
    items = read_items(path)
    assert len(items) == 6 and any(item.history for item in items)


def test_export_filters_by_rating(rated, env):
    result = runner.invoke(app, ["feedback", "export", "--out", "down.jsonl", "--rating", "down"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(x) for x in (env / "down.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["rating"] == -1 for r in rows)
    bad = runner.invoke(app, ["feedback", "export", "--out", "x.jsonl", "--rating", "meh"])
    assert bad.exit_code != 0


@pytest.mark.parametrize(
    "question, in_thread, expected",
    [
        ("What about employment agencies?", True, "follow-up"),
        ("What about employment agencies?", False, "other"),
        ("How does a bias audit differ from an impact assessment?", False, "compare"),
        ("Independent auditor vs internal reviewer", False, "compare"),
        ("What are the penalties, and how are they calculated?", False, "multi-part"),
        ("Who enforces it? When does it apply?", False, "multi-part"),
        ("What is an AEDT?", False, "definition"),
        ("What does independent auditor mean?", False, "definition"),
        ("Define bias audit", False, "definition"),
        ("Do I need a bias audit before using the tool?", False, "yes-no"),
        ("I run a staffing agency. Must I publish the results?", False, "yes-no"),
        ("What is the civil penalty for a first violation under the law?", False, "other"),
        ("When must candidates be notified?", False, "other"),
        ("", False, "other"),
    ],
)
def test_question_type_rules(question, in_thread, expected):
    assert classify_question(question, in_thread=in_thread) == expected


def test_question_type_of_a_huge_unpunctuated_message_is_fast():
    """Reports classify every rated question; a 40,000-character message without punctuation (the
    old sentence regex rescanned it from every position: ~8 s) must take milliseconds."""
    import time

    started = time.perf_counter()
    assert classify_question("word " * 8_000) == "other"
    assert classify_question("context " * 5_000 + ". Must I publish the results?") == "yes-no"
    assert time.perf_counter() - started < 2.0


def test_a_database_read_failure_is_a_clear_error(rated, env):
    from sqlalchemy import create_engine

    engine = create_engine(f"sqlite:///{env / 'bot.sqlite3'}")
    with engine.begin() as conn:  # a damaged database: the schema says head, a table is gone
        conn.exec_driver_sql("DROP TABLE feedback")
    engine.dispose()
    for command in (["feedback", "report"], ["feedback", "export", "--out", "x.jsonl"]):
        result = runner.invoke(app, command)
        # A clean exit (fail()), not an exception escaping with its traceback.
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), repr(result.exception)
        assert "reading the database" in result.output and "no such table" in result.output


def test_report_shows_markup_like_user_text_literally(env):
    """Questions and reasons are users' text: "[/]" or "[bold]" must print as typed, not crash rich."""
    service = toy_service(env)
    reply = service.handle(message("What does [/] mean in [bold]section 5-301?", "1.1"))
    service.record_feedback(FeedbackEvent(reply.answer_id, "slack", "A", -1, reason="wrong [/red] part"))
    service.store.close()
    result = runner.invoke(app, ["feedback", "report", "--out", "r.png"])
    assert result.exit_code == 0, result.output
    assert "[/]" in result.output and "[bold]" in result.output and "[/red]" in result.output


# --- issue 15: reasons, review state, reviewed exchanges --------------------------------------------


def test_export_and_report_show_reasons_their_kinds_and_the_review_state(rated, env):
    from storage.sql import ConversationStore

    store = ConversationStore(f"sqlite:///{env / 'bot.sqlite3'}")
    follow = rated["follow"].answer_id
    store.record_reason(FeedbackEvent(follow, "slack", "A", -1, reason="wrong article", reason_kind="wrong_provision",
                                      order=10**18))
    store.request_review(follow, "A", "downvote")
    store.close()
    assert runner.invoke(app, ["feedback", "export", "--out", "all.jsonl"]).exit_code == 0
    rows = [json.loads(x) for x in (env / "all.jsonl").read_text().splitlines()]
    by_rater = {r["rater"]: r for r in rows if r["answer_id"] == follow}
    assert (by_rater["A"]["reason_kind"], by_rater["A"]["reason"], by_rater["A"]["review_state"]) == (
        "wrong_provision", "wrong article", "pending")
    assert (by_rater["C"]["reason_kind"], by_rater["C"]["reason"]) == ("", "misses e-mail")
    result = runner.invoke(app, ["feedback", "report", "--days", "0", "--out", "r.png"], terminal_width=250)
    assert result.exit_code == 0, result.output
    by_reason = result.output[result.output.index("👎 by reason given"):result.output.index("Worst-rated answers")]
    assert "│ Wrong provision cited │" in by_reason and "│ Other " in by_reason and "│ (no reason) " in by_reason
    worst = result.output[result.output.index("Worst-rated answers"):]  # a narrow terminal wraps the cells
    for word in ("reasons:", "Wrong", "provision", "cited: wrong", "review:", "pending"):
        assert word in worst, word


def test_export_reviewed_writes_regression_cases_that_eval_reads(rated, env):
    from core.eval.report import read_gold
    from storage.sql import ConversationStore

    assert "No reviewed exchanges yet" in runner.invoke(app, ["feedback", "export", "--reviewed", "-o", "r.jsonl"]).output
    store = ConversationStore(f"sqlite:///{env / 'bot.sqlite3'}")
    store.record_review(rated["follow"].answer_id, "LEAD", "corrected", "By mail or e-mail, 10 days ahead.", "§ 2(b)")
    store.record_review(rated["penalty"].answer_id, "LEAD", "fine")
    store.close()
    result = runner.invoke(app, ["feedback", "export", "--reviewed", "--out", "reviewed.jsonl"])
    assert result.exit_code == 0, result.output
    assert "2 reviewed exchange(s) (1 corrected, 1 fine)" in result.output
    path = env / "reviewed.jsonl"
    rows = {r["answer_id"]: r for r in map(json.loads, path.read_text().splitlines())}
    corrected, fine = rows[rated["follow"].answer_id], rows[rated["penalty"].answer_id]
    assert (corrected["reference_answer"], corrected["gold_provisions"], corrected["metadata"]["review"]) == (
        "By mail or e-mail, 10 days ahead.", ["§ 2(b)"], "corrected")
    assert [t["role"] for t in corrected["conversation_history"]] == ["user", "assistant"]  # a follow-up
    assert fine["reference_answer"] == fine["answer"] and fine["gold_provisions"]
    items = read_items(path)  # `hypa eval run` takes the file as its dataset...
    assert {i.id for i in items} == {f"rv-{a}" for a in rows}
    gold = read_gold(path)  # ...and `hypa eval report --gold` as its gold
    assert gold[f"rv-{rated['follow'].answer_id}"].reference_answer == "By mail or e-mail, 10 days ahead."
    bad = runner.invoke(app, ["feedback", "export", "--reviewed", "--rating", "down", "-o", "x.jsonl"])
    assert bad.exit_code != 0 and "--rating does not apply to --reviewed" in bad.output
