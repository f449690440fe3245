"""ConversationStore: schema = migrations, constraints, races settled by the database."""
from __future__ import annotations

import random
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import IntegrityError

from core.conversation import AnswerNotShownHere, FeedbackEvent, IncomingMessage, UnknownAnswer
from core.types import Citation
from hypa_testkit.postgres import POSTGRES_URL, fresh_postgres_database
from storage.sql import AnswerRecord, ConversationStore
from storage.sql.engine import _sqlite_on_connect
from storage.sql.migrate import alembic_config, current_revision, head_revision
from storage.sql.models import Base
from storage.sql.store import MAX_CLAIM_ATTEMPTS, insert_if_absent

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """Every test on this fixture runs on SQLite, and on a fresh PostgreSQL database when
    HYPA_TEST_POSTGRES_URL is set (hypa_testkit/postgres.py)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh' / 'store.sqlite3'}"  # the store creates the folder
        return
    if not POSTGRES_URL:
        pytest.skip("HYPA_TEST_POSTGRES_URL is not set: the store tests ran on SQLite only")
    pytest.importorskip("psycopg")
    with fresh_postgres_database() as url:
        yield url


@pytest.fixture
def store(store_url):
    s = ConversationStore(store_url)
    yield s
    s.close()


@pytest.fixture
def sqlite_store(tmp_path):
    s = ConversationStore(f"sqlite:///{tmp_path / 'store.sqlite3'}")
    yield s
    s.close()


def msg(message_id: str, thread: str = "1.0", text: str = "What is a widget audit?", minutes: int = 0):
    return IncomingMessage(
        platform="telegram", workspace="telegram", channel="-100", thread=thread, user="42", text=text,
        message_id=message_id, sent_at=T0 + timedelta(minutes=minutes),
    )


def answer(store: ConversationStore, message_id: str = "1", **kw) -> str:
    claim = store.claim_message(msg(message_id, **kw))
    record = AnswerRecord(
        question="What is a widget audit?", standalone_question="What is a widget audit?", text="An audit [1].",
        refused=False, outcome="answered", collection="toy", complexity=1, params={"top_k": 3},
        chunk_ids=["toy-doc:a"], citations=[Citation(1, "toy-doc:a", "Toy § 1", "an impartial evaluation")],
        model="extractive", tokens_in=10, tokens_out=5, context_tokens=300, latency_ms=12.5,
    )
    stored, created = store.store_answer(claim, record)
    assert created
    return stored.id


def test_migrations_create_exactly_the_models_schema(store):
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    assert diff == []
    assert current_revision(store.engine) == head_revision()
    assert {"threads", "messages", "answers", "platform_messages", "deliveries", "feedback", "feedback_log"} <= set(
        inspect(store.engine).get_table_names()
    )


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(sqlite_store):
    with sqlite_store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_reopening_and_concurrent_first_opens_migrate_once(store_url):
    url = store_url
    errors: list[BaseException] = []

    def open_store():
        try:
            ConversationStore(url).close()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    reopened = ConversationStore(url)
    assert current_revision(reopened.engine) == head_revision()
    reopened.close()


def test_connections_turning_a_new_file_to_wal_together_all_succeed(tmp_path):
    """SQLite fails `PRAGMA journal_mode = WAL` at once, without its busy handler, while another
    connection turns the same new file into WAL: first opens by several processes or threads must
    retry it (this made the concurrent-first-opens test above fail now and then)."""
    failures: list[BaseException] = []
    modes: list[str] = []
    for round_ in range(50):
        path = tmp_path / f"{round_}.sqlite3"
        barrier = threading.Barrier(4)

        def connect(path=path, barrier=barrier):
            raw = sqlite3.connect(path, check_same_thread=False)
            barrier.wait()
            try:
                _sqlite_on_connect(raw, None)
                modes.append(raw.execute("PRAGMA journal_mode").fetchone()[0])
            except BaseException as exc:  # noqa: BLE001
                failures.append(exc)
            finally:
                raw.close()

        workers = [threading.Thread(target=connect) for _ in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert failures == [] and set(modes) == {"wal"}


def test_database_errors_do_not_carry_message_text(store):
    """Errors are logged with tracebacks: bound values (questions, answers) must stay out of them."""
    with pytest.raises(IntegrityError) as caught, store.engine.begin() as conn:
        conn.execute(Base.metadata.tables["platform_messages"].insert().values(
            platform="slack", channel="C", message_id="what my employer must never know", answer_id="nope",
            created_at=T0))
    assert "what my employer must never know" not in str(caught.value)


def test_postgresql_ddl_renders_offline(capsys):
    """The migration is portable: Alembic writes its PostgreSQL DDL without a server."""
    command.upgrade(alembic_config("postgresql://u:p@localhost/hypa"), "head", sql=True)
    ddl = capsys.readouterr().out
    assert "CREATE TABLE feedback" in ddl and "uq_feedback_answer_id_rater" in ddl and "SERIAL" in ddl


def test_upsert_compiles_for_postgresql():
    from sqlalchemy.dialects.postgresql import insert

    table = Base.metadata.tables["deliveries"]
    sql = str(insert(table).values(platform="slack", delivery_id="E1").on_conflict_do_nothing().compile(
        dialect=postgresql.dialect()))
    assert "ON CONFLICT DO NOTHING" in sql


def test_messages_are_unique_per_platform_workspace_channel_id(store):
    first = store.claim_message(msg("1"))
    again = store.claim_message(msg("1"))
    other_channel = store.claim_message(IncomingMessage(
        platform="telegram", workspace="telegram", channel="-200", thread="1.0", user="42", text="x",
        message_id="1"))
    assert first.owner and not again.owner and other_channel.owner
    assert again.message_pk == first.message_pk and store.count_rows("messages") == 2
    with store.engine.begin() as conn:
        assert not insert_if_absent(conn, Base.metadata.tables["threads"], {
            "platform": "telegram", "workspace": "telegram", "channel": "-100", "thread_key": "1.0", "created_at": T0})


def lapse(store: ConversationStore, *, by: timedelta = timedelta(hours=2)) -> None:
    """Every lease was last renewed `by` ago (its worker died then)."""
    with store.engine.begin() as conn:
        conn.execute(Base.metadata.tables["messages"].update().values(claimed_at=datetime.now(UTC) - by))


def test_a_lapsed_lease_is_taken_over_by_exactly_one_of_racing_redeliveries(store):
    first = store.claim_message(msg("1"), holder="dead-worker")
    assert first.owner and first.attempt == 1 and not first.answered and first.placeholder_id is None
    store.lease = timedelta(hours=1)
    assert not store.claim_message(msg("1"), holder="other").owner  # a live lease: its worker is answering
    assert store.set_placeholder(first.message_pk, "1700000001.000100") == "1700000001.000100"
    lapse(store)  # that worker died two hours ago
    barrier = threading.Barrier(8)

    def redeliver(i):
        barrier.wait()
        return store.claim_message(msg("1"), holder=f"replica-{i}")

    with ThreadPoolExecutor(8) as pool:
        claims = list(pool.map(redeliver, range(8)))
    winners = [c for c in claims if c.owner]
    assert len(winners) == 1 and {c.message_pk for c in claims} == {first.message_pk}
    # The taker learns what the dead worker left: its placeholder (to edit), and that no answer is stored.
    assert winners[0].attempt == 2 and winners[0].placeholder_id == "1700000001.000100" and not winners[0].answered


def test_an_answer_stored_but_never_shown_is_taken_over_and_a_shown_one_never(store):
    answer(store, "2")  # answered, then the worker died before showing it
    lapse(store)
    taken = store.claim_message(msg("2"), holder="b")
    assert taken.owner and taken.answered  # the taker shows the stored answer; it computes nothing
    store.mark_delivered(taken.message_pk)
    lapse(store)
    again = store.claim_message(msg("2"), holder="c")
    assert not again.owner and again.delivered  # the reply was shown: never answered again


def test_renewed_leases_stay_and_attempts_are_bounded(store):
    store.lease = timedelta(seconds=30)
    claim = store.claim_message(msg("1"), holder="alive")
    lapse(store, by=timedelta(seconds=20))
    assert store.renew_claims("alive", [claim.message_pk]) == 1  # the holder is still working on it
    assert store.renew_claims("someone-else", [claim.message_pk]) == 0  # only the holder renews
    lapse(store, by=timedelta(seconds=20))  # 20 s after the last renewal: still within the lease
    assert not store.claim_message(msg("1"), holder="other").owner
    attempts = [claim.attempt]
    for i in range(MAX_CLAIM_ATTEMPTS + 2):  # a question that kills every worker answering it
        lapse(store)
        taken = store.claim_message(msg("1"), holder=f"w{i}")
        if taken.owner:
            attempts.append(taken.attempt)
    assert attempts == list(range(1, MAX_CLAIM_ATTEMPTS + 1))
    lapse(store)
    assert store.reclaim_messages("telegram", "sweeper") == []  # given up: no endless crash loop


def test_the_first_stored_placeholder_wins(store):
    claim = store.claim_message(msg("1"), holder="a")
    assert store.set_placeholder(claim.message_pk, "501") == "501"
    assert store.set_placeholder(claim.message_pk, "502") == "501"  # a second attempt deletes its own


def test_recovery_sweeps_of_two_replicas_take_each_owed_message_once(store):
    store.lease = timedelta(seconds=30)
    owed = [msg(str(i), thread=f"t{i % 3}", text=f"question {i}", minutes=i) for i in range(12)]
    claims = [store.claim_message(m, holder="dead") for m in owed]
    store.set_placeholder(claims[0].message_pk, "900")
    answer(store, "100")  # answered and shown: not owed
    store.mark_delivered(store.claim_message(msg("100")).message_pk)
    lapse(store, by=timedelta(minutes=1))
    live = store.claim_message(msg("200"), holder="alive")  # a lease still renewed: not owed yet
    assert store.reclaim_messages("slack", "r1") == []  # another platform's sweep
    barrier = threading.Barrier(2)

    def sweep(replica):
        barrier.wait()
        return store.reclaim_messages("telegram", replica, limit=50)

    with ThreadPoolExecutor(2) as pool:
        swept = list(pool.map(sweep, ["r1", "r2"]))
    taken = swept[0] + swept[1]
    assert sorted(int(o.message_id) for o in taken) == list(range(12))
    assert live.message_pk not in {o.claim.message_pk for o in taken}
    by_id = {o.message_id: o for o in taken}
    rebuilt = by_id["0"]
    assert (rebuilt.channel, rebuilt.thread, rebuilt.user, rebuilt.text, rebuilt.sent_at) == (
        "-100", "t0", "42", "question 0", T0)
    assert rebuilt.claim.placeholder_id == "900" and rebuilt.claim.attempt == 2 and rebuilt.claim.owner
    assert store.reclaim_messages("telegram", "r3") == []  # now held (and renewed) by r1 and r2
    assert len(store.owed_messages("telegram")) == 13  # owed until shown: 12 taken over + the live one


def test_the_recovery_sweep_leaves_old_and_excluded_messages_alone(store):
    store.recovery_window = timedelta(hours=1)
    old = store.claim_message(msg("1"), holder="dead")
    with store.engine.begin() as conn:  # received three hours ago
        table = Base.metadata.tables["messages"]
        conn.execute(table.update().where(table.c.id == old.message_pk).values(
            received_at=datetime.now(UTC) - timedelta(hours=3)))
    mine = store.claim_message(msg("2"), holder="me")
    lapse(store)
    assert store.reclaim_messages("telegram", "me", exclude=[mine.message_pk]) == []


def test_upgrading_a_database_from_before_leases_counts_answered_messages_as_delivered(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    engine = create_engine(url)
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001_initial")
        conn.exec_driver_sql("INSERT INTO threads (id, platform, workspace, channel, thread_key, created_at) "
                             "VALUES (1, 'slack', 'T', 'C', '1.0', '2026-11-01 09:00:00')")
        for pk in (1, 2):
            conn.exec_driver_sql(
                "INSERT INTO messages (id, thread_id, platform, workspace, channel, message_id, user, text, sent_at, "
                f"received_at, claimed_at) VALUES ({pk}, 1, 'slack', 'T', 'C', '{pk}.0', 'U', 'q', "
                "'2026-11-01 09:00:00', '2026-11-01 09:00:00', '2026-11-01 09:00:00')")
        conn.exec_driver_sql(
            "INSERT INTO answers (id, message_id, thread_id, question, standalone_question, collection, history_turns, "
            "params, chunk_ids, citations, text, refused, outcome, note, model, tokens_in, tokens_out, context_tokens, "
            "latency_ms, created_at) VALUES ('a1', 1, 1, 'q', 'q', 'toy', 0, '{}', '[]', '[]', 'an answer', 0, "
            "'answered', '', 'x', 0, 0, 0, 1.0, '2026-11-01 09:00:02')")
    engine.dispose()
    store = ConversationStore(url)  # migrates to head
    assert [(m, a) for _, m, _, a in store.owed_messages()] == [("2.0", 1)]  # only the unanswered one is owed
    store.close()


def test_answer_round_trip_and_one_answer_per_message(store):
    answer_id = answer(store)
    stored = store.get_answer(answer_id)
    r = stored.record
    assert r.citations == [Citation(1, "toy-doc:a", "Toy § 1", "an impartial evaluation")]
    assert (r.complexity, r.params, r.chunk_ids, r.tokens_in, r.tokens_out, r.context_tokens) == (
        1, {"top_k": 3}, ["toy-doc:a"], 10, 5, 300)
    assert stored.created_at.tzinfo is not None and stored.platform == "telegram"
    claim = store.claim_message(msg("1"))
    earlier, created = store.store_answer(claim, r)
    assert not created and earlier.id == answer_id and store.count_rows("answers") == 1
    assert store.get_answer("missing") is None


def test_a_late_answer_replaces_the_quoted_one_under_the_same_id(store):
    """Claude's answer arriving after the quoted one was shown: same id, message, thread and time."""
    answer_id = answer(store)
    before = store.get_answer(answer_id)
    later = replace(before.record, text="Claude's answer [1].", model="claude-sonnet-5-5", tokens_in=1450, note="")
    after = store.replace_answer(answer_id, later)
    assert after.record == later
    assert (after.id, after.message_pk, after.thread_pk, after.created_at) == (
        before.id, before.message_pk, before.thread_pk, before.created_at)
    assert store.count_rows("answers") == 1
    with pytest.raises(LookupError):
        store.replace_answer("missing", later)


def test_foreign_keys_are_enforced(store):
    with pytest.raises(IntegrityError):
        with store.engine.begin() as conn:
            conn.execute(Base.metadata.tables["platform_messages"].insert().values(
                platform="slack", channel="C", message_id="1", answer_id="nope", created_at=T0))


def test_thread_history_orders_turns_and_excludes_the_current_message(store):
    for i in range(3):
        answer(store, str(i), minutes=i)
    later = store.claim_message(msg("9", minutes=9))
    history = store.thread_history(later.thread_pk, 2, before_message_pk=later.message_pk)
    assert [t.role for t in history] == ["user", "assistant", "user", "assistant"]
    assert store.thread_history(later.thread_pk, 0) == []
    assert store.is_bot_thread("telegram", "telegram", "-100", "1.0")
    assert not store.is_bot_thread("telegram", "telegram", "-100", "2.0")


def test_delivery_ids_are_claimed_once_even_concurrently(store):
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda _: store.claim_delivery("slack", "Ev42"), range(64)))
    assert results.count(True) == 1
    assert store.claim_delivery("telegram", "Ev42")  # another platform's id space
    assert store.prune_deliveries(timedelta(0)) == 2 and store.claim_delivery("slack", "Ev42")


def test_old_delivery_ids_are_forgotten_as_new_ones_arrive(store):
    """Every platform event claims a delivery id: ids past any redelivery window must not pile up."""
    for i in range(5):
        store.claim_delivery("slack", f"Ev{i}")
    with store.engine.begin() as conn:  # three of them arrived three days ago
        table = Base.metadata.tables["deliveries"]
        conn.execute(table.update().where(table.c.delivery_id.in_(["Ev0", "Ev1", "Ev2"])).values(
            received_at=datetime.now(UTC) - timedelta(days=3)))
    assert not store.claim_delivery("slack", "Ev4")  # recent ids are still remembered...
    assert store.count_rows("deliveries") == 2  # ...and the old ones were dropped on the way


def test_feedback_one_rating_per_rater_changes_logged(store):
    answer_id = answer(store)
    def ev(rating, rater="7", **kw):
        return FeedbackEvent(answer_id, "telegram", rater, rating, **kw)

    assert store.record_feedback(ev(1)).changed
    assert not store.record_feedback(ev(1)).changed
    out = store.record_feedback(ev(-1, reason="cites the wrong section"))
    assert out.changed and out.rating == -1
    assert not store.record_feedback(ev(-1, reason="cites the wrong section")).changed
    assert store.record_feedback(ev(-1, reason="and misses the penalty")).changed
    removed = store.record_feedback(ev(0))
    assert removed.changed and removed.rating == 0 and store.current_rating(answer_id, "7") == 0
    assert not store.record_feedback(ev(0)).changed
    assert not store.record_feedback(ev(0, rater="never-rated")).changed
    log = store.feedback_log(answer_id)
    assert [(c.previous_rating, c.rating) for c in log] == [(0, 1), (1, -1), (-1, -1), (-1, 0)]
    assert store.count_rows("feedback") == 1 and store.rated_answers() == []
    with pytest.raises(UnknownAnswer):
        store.record_feedback(FeedbackEvent("unknown", "telegram", "7", 1))
    with pytest.raises(ValueError):
        store.record_feedback(ev(2))


def test_events_processed_out_of_order_keep_the_raters_latest_act(store):
    answer_id = answer(store)
    t0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
    added = FeedbackEvent(answer_id, "telegram", "U1", 1, source="reaction", at=t0)
    removed = FeedbackEvent(answer_id, "telegram", "U1", 0, source="reaction", withdraws=1, at=t0 + timedelta(seconds=1))
    # The removal is processed before the addition it withdraws (concurrent deliveries):
    assert store.record_feedback(removed).changed is False  # nothing to remove yet...
    assert store.record_feedback(added).changed is False  # ...but the older addition is then stale
    assert store.current_rating(answer_id, "U1") == 0
    # In order, a later act wins as usual.
    again = FeedbackEvent(answer_id, "telegram", "U1", 1, source="reaction", at=t0 + timedelta(seconds=2))
    assert store.record_feedback(again).changed and store.current_rating(answer_id, "U1") == 1


def test_a_repeated_rating_moves_its_time_so_an_older_removal_delivered_last_is_stale(store):
    """Issue 13: a 👍 reaction, its removal, then a 👍 click, with the removal delivered last, ended as
    no rating: the click repeated the current rating and did not move its time."""
    answer_id = answer(store)
    t = lambda s: T0 + timedelta(seconds=s)  # noqa: E731
    store.record_feedback(FeedbackEvent(answer_id, "telegram", "U1", 1, source="reaction", at=t(1)))
    clicked = store.record_feedback(FeedbackEvent(answer_id, "telegram", "U1", 1, source="button", at=t(3)))
    assert not clicked.changed  # already 👍...
    (rated,) = store.rated_answers()
    assert rated.rated_at == t(3) and rated.source == "button"  # ...but that is now the latest act
    late = FeedbackEvent(answer_id, "telegram", "U1", 0, source="reaction", withdraws=1, at=t(2))
    assert not store.record_feedback(late).changed
    assert store.current_rating(answer_id, "U1") == 1


def test_a_redelivered_act_is_applied_once(store):
    answer_id = answer(store)
    up = FeedbackEvent(answer_id, "telegram", "U1", 1, source="reaction", order=41)
    removed = FeedbackEvent(answer_id, "telegram", "U1", 0, source="reaction", withdraws=1, order=42)
    assert store.record_feedback(up).changed and store.record_feedback(removed).changed
    assert not store.record_feedback(up).changed  # the 👍 delivered again: not a new act
    assert store.current_rating(answer_id, "U1") == 0 and store.count_rows("feedback_acts") == 2


def _random_acts(rng: random.Random, answer_id: str, rater: str, platform: str, start: int) -> list[FeedbackEvent]:
    """What one person might do to one answer: clicks, reactions added and taken away, in time order."""
    acts, reactions, order = [], set(), start
    for _ in range(rng.randint(2, 6)):
        order += rng.randint(1, 400_000)  # up to 0.4 s apart on the platform's clock
        at = T0 + timedelta(microseconds=order - start)
        kind = rng.choice(["click", "react", "unreact"] if reactions else ["click", "react"])
        if kind == "unreact":
            gone = rng.choice(sorted(reactions))
            reactions.discard(gone)
            acts.append(FeedbackEvent(answer_id, platform, rater, 0, source="reaction", withdraws=gone, at=at, order=order))
            continue
        rating = rng.choice([1, -1])
        if kind == "react":
            reactions.add(rating)
        acts.append(FeedbackEvent(answer_id, platform, rater, rating, source="reaction" if kind == "react" else "button",
                                  at=at, order=order))
    return acts


def test_acts_of_30_concurrent_senders_in_any_order_end_as_if_applied_in_order(store):
    """Issue 13: 6 of 621 (answer, rater) pairs ended on an older act under 30 concurrent senders.
    Each pair's acts are delivered shuffled by 30 threads; the result must equal applying them in order."""
    rng = random.Random(13)
    shuffled_answer, ordered_answer = answer(store, "1"), answer(store, "2")
    per_rater = {f"U{i}": _random_acts(rng, shuffled_answer, f"U{i}", "telegram", 1_000_000 * i) for i in range(150)}
    for acts in per_rater.values():  # the reference: the same acts, one at a time, in platform order
        for act in acts:
            store.record_feedback(replace(act, answer_id=ordered_answer))
    deliveries = [act for acts in per_rater.values() for act in acts]
    rng.shuffle(deliveries)
    deliveries += rng.sample(deliveries, 50)  # and some delivered twice
    with ThreadPoolExecutor(30) as pool:
        list(pool.map(store.record_feedback, deliveries))
    wrong = [r for r in per_rater
             if store.current_rating(shuffled_answer, r) != store.current_rating(ordered_answer, r)]
    assert wrong == [], f"{len(wrong)} of {len(per_rater)} raters ended on an older act"
    assert {r: store.current_rating(ordered_answer, r) for r in per_rater} != {r: 0 for r in per_rater}


def test_ratings_from_before_acts_were_stored_are_carried_over_by_the_migration(store):
    answer_id = answer(store)
    store.record_feedback(FeedbackEvent(answer_id, "telegram", "U1", 1, source="reaction", order=500))
    cfg = alembic_config()
    with store.engine.begin() as conn:  # back to the schema before feedback_acts, and up again
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0002_delivery_leases")
        command.upgrade(cfg, "head")
    assert store.count_rows("feedback_acts") == 1 and store.current_rating(answer_id, "U1") == 1
    # The carried-over rating comes before any new act: a removal of a 👎 never given changes nothing...
    assert not store.record_feedback(FeedbackEvent(answer_id, "telegram", "U1", 0, source="reaction", withdraws=-1,
                                                   order=3)).changed
    assert store.current_rating(answer_id, "U1") == 1
    # ...and a new click is the latest act.
    assert store.record_feedback(FeedbackEvent(answer_id, "telegram", "U1", -1, order=4)).changed


def test_removing_a_reaction_withdraws_only_the_rating_it_gave(store):
    answer_id = answer(store)
    def ev(rating, **kw):
        return FeedbackEvent(answer_id, "telegram", "U1", rating, **kw)

    store.record_feedback(ev(1, source="reaction"))
    store.record_feedback(ev(-1, source="button"))  # changed their mind with the button
    kept = store.record_feedback(ev(0, source="reaction", withdraws=1))  # then took the 👍 reaction away
    assert not kept.changed and kept.rating == -1 and store.current_rating(answer_id, "U1") == -1
    removed = store.record_feedback(ev(0, source="reaction", withdraws=-1))
    assert removed.changed and store.current_rating(answer_id, "U1") == 0


def test_200_concurrent_reactions_lose_and_double_nothing(store):
    """200 raters click at once, half of them twice (double clicks), then 50 remove their rating."""
    answer_id = answer(store)
    events = [FeedbackEvent(answer_id, "telegram", f"U{i}", 1 if i % 4 else -1, source="button") for i in range(200)]
    events += events[:100]  # double clicks race their first click
    barrier = threading.Barrier(len(events))

    def click(event):
        barrier.wait()
        return store.record_feedback(event)

    threads_out: list = []
    workers = [threading.Thread(target=lambda e=e: threads_out.append(click(e))) for e in events]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(threads_out) == 300 and sum(o.changed for o in threads_out) == 200
    rated = store.rated_answers()
    assert len(rated) == 200 and len({r.rater for r in rated}) == 200
    assert sum(r.rating == 1 for r in rated) == 150 and sum(r.rating == -1 for r in rated) == 50
    assert len(store.feedback_log(answer_id)) == 200
    with ThreadPoolExecutor(25) as pool:
        list(pool.map(store.record_feedback, [FeedbackEvent(answer_id, "telegram", f"U{i}", 0) for i in range(50)]))
    assert len(store.rated_answers()) == 150 and store.count_rows("feedback") == 200
    assert len(store.feedback_log(answer_id)) == 250


def test_a_rating_counts_only_from_the_platform_and_chat_where_the_answer_was_posted(store):
    """Issue 13: a press from chat 611 rating an answer shown in chat 605, and a press carrying another
    platform's answer id, were stored."""
    answer_id = answer(store)  # posted in telegram chat -100
    for platform, channel in (("telegram", "-611"), ("slack", "-100"), ("slack", None)):
        with pytest.raises(AnswerNotShownHere):
            store.record_feedback(FeedbackEvent(answer_id, platform, "7", 1, channel=channel))
    assert store.count_rows("feedback") == store.count_rows("feedback_acts") == 0  # nothing stored
    assert store.record_feedback(FeedbackEvent(answer_id, "telegram", "7", 1, channel="-100")).changed
    assert store.current_rating(answer_id, "7") == 1


def test_rated_answers_filters_by_time_and_sign(store):
    answer_id = answer(store)
    store.record_feedback(FeedbackEvent(answer_id, "telegram", "A", 1, at=T0))
    store.record_feedback(FeedbackEvent(answer_id, "telegram", "B", -1, at=T0 + timedelta(days=3)))
    assert [r.rater for r in store.rated_answers(since=T0 + timedelta(days=1))] == ["B"]
    assert [r.rater for r in store.rated_answers(rating=1)] == ["A"]
    assert store.rated_answers()[0].answer.id == answer_id


def test_ping_reports_an_unreachable_database(tmp_path):
    store = ConversationStore(f"sqlite:///{tmp_path / 'ok.sqlite3'}")
    assert store.ping()
    broken = ConversationStore(f"sqlite:///{tmp_path / 'no' / 'such' / 'x.sqlite3'}", migrate=False)
    (tmp_path / "no" / "such").rmdir()
    assert not broken.ping()
