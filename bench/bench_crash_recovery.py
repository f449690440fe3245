"""kill -9 right after the acknowledgement: are the questions still answered, once, after a restart?

    .venv/bin/python bench/bench_crash_recovery.py [--platform slack|telegram|both] [--questions 10]
        [--kill-after 0.1] [--rounds 3] [--answer-delay 30] [--lease 1] [--database-url URL]

The issue-13 scenario, measured from the platform's side only (what the fake Slack / Telegram API
shows), so it runs against any version of the bot: N questions are delivered to a bot process
(hypa_testkit/crash_bot.py: built like `hypa serve`, real slack-bolt / python-telegram-bot, answers slowed
to `--answer-delay` s), which is SIGKILLed `--kill-after` s after Slack got its acks (Telegram: after
polling confirmed the updates). A new process is started on the same database, and every question
is delivered again (Slack: same event_id, X-Slack-Retry-Num: 1; Telegram: the same updates). After
the answers settle, each thread is counted: answered (exactly one answer), doubled (more than one),
unanswered, and placeholders ("Looking that up…") still showing.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hypa_testkit.crash_bot import CrashBot  # noqa: E402
from hypa_testkit.fakes.slack_server import BOT_USER_ID, FakeSlack, SlackEvents, envelope, mention_event  # noqa: E402
from hypa_testkit.fakes.telegram_server import FakeTelegram, message, private_chat, user  # noqa: E402
from hypa_testkit.slack_harness import SIGNING_SECRET  # noqa: E402

QUESTION = "What is the civil penalty for a first violation?"
SLACK_PLACEHOLDER = "Looking that up"
TELEGRAM_PLACEHOLDER = "⏳"


@dataclass
class Round:
    platform: str
    total: int
    answered: int = 0  # exactly one answer shown
    doubled: int = 0  # more than one answer shown
    unanswered: int = 0
    stuck: int = 0  # placeholders still showing
    settled_s: float = 0.0  # restart -> every thread settled (or the wait ran out)

    def row(self) -> str:
        return (f"| {self.platform} | {self.answered} / {self.total} | {self.doubled} | {self.unanswered} | "
                f"{self.stuck} | {self.settled_s:.1f} s |")


def _settle(count, wait_s: float) -> tuple[Round, float]:
    """Poll until every question has an answer and no placeholder shows, or `wait_s` passes; then a
    quiet second more, so a late duplicate is still counted."""
    started = time.monotonic()
    while time.monotonic() - started < wait_s:
        result = count()
        if result.answered + result.doubled == result.total and result.stuck == 0:
            break
        time.sleep(0.1)
    settled = time.monotonic() - started
    time.sleep(1.0 + 1.5 * ARGS.lease)
    return count(), settled


def slack_round(data_dir: Path) -> Round:
    with FakeSlack() as fake:
        first = CrashBot("slack", data_dir, fake.base_url, answer_delay_s=ARGS.answer_delay, lease_s=ARGS.lease,
                         database_url=ARGS.round_database_url).start()
        events = SlackEvents(f"{first.base_url}/slack/events", SIGNING_SECRET)
        bodies = [envelope(mention_event(f"<@{BOT_USER_ID}> {QUESTION}")) for _ in range(ARGS.questions)]
        acks = [events.send(b).status_code for b in bodies]
        assert acks == [200] * len(bodies), acks
        time.sleep(ARGS.kill_after)
        first.kill()
        events.close()

        def count() -> Round:
            result = Round("slack", len(bodies))
            for b in bodies:
                shown = fake.thread(b["event"]["channel"], b["event"]["ts"])
                answers = [m for m in shown if not m.text.startswith(SLACK_PLACEHOLDER)]
                result.stuck += len(shown) - len(answers)
                result.answered += len(answers) == 1
                result.doubled += len(answers) > 1
                result.unanswered += not answers
            return result

        restarted = CrashBot("slack", data_dir, fake.base_url, lease_s=ARGS.lease, database_url=ARGS.round_database_url)
        with restarted as again:
            retries = SlackEvents(f"{again.base_url}/slack/events", SIGNING_SECRET)
            for b in bodies:
                retries.send(b, retry_num=1)
            retries.close()
            result, result_settled = _settle(count, ARGS.wait)
    result.settled_s = result_settled
    return result


def telegram_round(data_dir: Path) -> Round:
    chats = [private_chat(7000 + i) for i in range(ARGS.questions)]
    updates = [message(update_id=100 + i, message_id=10, chat=c, text=QUESTION, from_user=user(c["id"]))
               for i, c in enumerate(chats)]
    with FakeTelegram() as fake:
        first = CrashBot("telegram", data_dir, fake.base_url, answer_delay_s=ARGS.answer_delay, lease_s=ARGS.lease,
                         database_url=ARGS.round_database_url).start()
        fake.push_updates(*updates)
        deadline = time.monotonic() + 10
        while fake.pending_updates() and time.monotonic() < deadline:  # confirmed by the next getUpdates
            time.sleep(0.005)
        time.sleep(ARGS.kill_after)
        first.kill()

        def count() -> Round:
            result = Round("telegram", len(chats))
            for c in chats:
                shown = fake.bot_messages(c["id"])
                answers = [m for m in shown if not m["text"].startswith(TELEGRAM_PLACEHOLDER)]
                result.stuck += len(shown) - len(answers)
                result.answered += len(answers) == 1
                result.doubled += len(answers) > 1
                result.unanswered += not answers
            return result

        with CrashBot("telegram", data_dir, fake.base_url, lease_s=ARGS.lease, database_url=ARGS.round_database_url):
            fake.push_updates(*updates)  # delivered again
            result, result_settled = _settle(count, ARGS.wait)
    result.settled_s = result_settled
    return result


@contextlib.contextmanager
def _database() -> Iterator[str]:
    """Each round on an empty database: SQLite in the round's data directory (""), or a new database on
    the PostgreSQL server of --database-url (dropped afterwards; the URL's user needs CREATEDB)."""
    if not ARGS.database_url.startswith("postgresql"):
        yield ARGS.database_url
        return
    from hypa_testkit.postgres import fresh_postgres_database

    with fresh_postgres_database(ARGS.database_url) as url:
        yield url


def main() -> None:
    platforms = ["slack", "telegram"] if ARGS.platform == "both" else [ARGS.platform]
    print(f"{ARGS.questions} questions per round, SIGKILL {ARGS.kill_after} s after the acknowledgement, "
          f"answers take {ARGS.answer_delay} s, lease {ARGS.lease} s, database "
          f"{'PostgreSQL' if ARGS.database_url.startswith('postgresql') else 'SQLite'}")
    print("| platform | answered once / total | answered twice | unanswered | placeholders left "
          "| settled after restart |")
    print("| --- | --- | --- | --- | --- | --- |")
    totals: dict[str, Round] = {}
    for platform in platforms:
        for _ in range(ARGS.rounds):
            with tempfile.TemporaryDirectory(prefix=f"crash-{platform}-") as tmp, _database() as url:
                ARGS.round_database_url = url
                result = (slack_round if platform == "slack" else telegram_round)(Path(tmp))
            print(result.row(), flush=True)
            total = totals.setdefault(platform, Round(platform, 0))
            for field in ("total", "answered", "doubled", "unanswered", "stuck"):
                setattr(total, field, getattr(total, field) + getattr(result, field))
            total.settled_s = max(total.settled_s, result.settled_s)
    for total in totals.values():
        print(f"total {total.platform}: {total.answered} / {total.total} answered once, {total.doubled} twice, "
              f"{total.unanswered} unanswered, {total.stuck} placeholders left; slowest round settled in "
              f"{total.settled_s:.1f} s")


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform", choices=["slack", "telegram", "both"], default="both")
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--kill-after", type=float, default=0.1, help="seconds after the acknowledgement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--answer-delay", type=float, default=30.0, help="seconds each answer takes before the kill")
    parser.add_argument("--lease", type=float, default=1.0, help="HYPA_DELIVERY_LEASE_S for both processes")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the answers after the restart")
    parser.add_argument("--database-url", default="",
                        help="a PostgreSQL server URL (each round gets a new database on it); default: SQLite")
    return parser.parse_args()


ARGS = _args() if __name__ == "__main__" else argparse.Namespace()

if __name__ == "__main__":
    main()
