"""`hypa serve slack|telegram`: run a chat bot (plus /healthz, /readyz, /metrics on HYPA_HTTP_PORT)."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from bot.cli_common import command_group

if TYPE_CHECKING:
    from bot.settings import Settings

serve_app = command_group(help="Run the bot on a chat platform.", no_args_is_help=True)


@contextlib.contextmanager
def _database_errors_reported(settings: Settings) -> Iterator[None]:
    """A database that cannot be opened at start-up (bad HYPA_DATABASE_URL, no driver, server down)
    is an operator error: say so in one line, password hidden, instead of a SQLAlchemy traceback."""
    from sqlalchemy.exc import SQLAlchemyError

    from bot.cli_common import fail, first_line, shown_database_url

    try:
        yield
    except (SQLAlchemyError, ModuleNotFoundError) as exc:
        if isinstance(exc, ModuleNotFoundError) and not _raised_by_sqlalchemy(exc):
            raise  # a missing module unrelated to the database driver is a bug: keep its traceback
        fail(f"cannot open the database {shown_database_url(settings.sql_url)} (HYPA_DATABASE_URL): {first_line(exc)}")


def _raised_by_sqlalchemy(exc: BaseException) -> bool:
    """Whether SQLAlchemy raised it (e.g. importing the driver a postgresql:// URL names)."""
    tb = exc.__traceback__
    while tb is not None:
        if "/sqlalchemy/" in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False


def _run_reporting_setup_errors(run, setup_error: type[Exception]) -> None:  # noqa: ANN001
    """Run a bot; what the operator must fix (missing tokens, bad database URL) is one line, no traceback."""
    from bot.cli_common import fail, load_settings

    settings = load_settings()
    try:
        with _database_errors_reported(settings):
            run(settings)
    except setup_error as exc:
        fail(str(exc))


@serve_app.command("telegram")
def serve_telegram() -> None:
    """Run the Telegram bot: long polling, or webhook mode when TELEGRAM_WEBHOOK_URL is set."""
    from bot.serve_telegram import ServeError, serve

    _run_reporting_setup_errors(serve, ServeError)


@serve_app.command("slack")
def serve_slack() -> None:
    """Run the Slack bot: HTTP mode (events at /slack/events) or Socket Mode when SLACK_APP_TOKEN is set.

    Needs SLACK_BOT_TOKEN, and SLACK_SIGNING_SECRET in HTTP mode. See docs/SLACK.md.
    """
    from bot.serve_slack import SlackSetupError, run

    _run_reporting_setup_errors(run, SlackSetupError)
