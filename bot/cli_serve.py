"""`hypa serve slack|telegram`: run a chat bot (plus /healthz, /readyz, /metrics on HYPA_HTTP_PORT).

Each command runs its platform's `serve(settings)` (bot/serve_<platform>.py, one template: docs/ADAPTERS.md)."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
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


def _serve(serve: Callable[[Settings], None]) -> None:
    """Run a chat bot (bot/serve_chat.py); what the operator must fix (missing tokens, a token the platform
    rejects, an index not built, a bad database URL) is one message, no traceback."""
    from bot.cli_common import fail, load_settings
    from bot.serve_chat import ServeSetupError

    settings = load_settings()
    try:
        with _database_errors_reported(settings):
            serve(settings)
    except ServeSetupError as exc:
        fail(str(exc))


@serve_app.command("slack")
def serve_slack() -> None:
    """Run the Slack bot: HTTP mode (events at /slack/events) or Socket Mode when SLACK_APP_TOKEN is set.

    Needs SLACK_BOT_TOKEN, and SLACK_SIGNING_SECRET in HTTP mode. See docs/SLACK.md.
    """
    from bot.serve_slack import serve

    _serve(serve)


@serve_app.command("telegram")
def serve_telegram() -> None:
    """Run the Telegram bot: long polling, or webhook mode when TELEGRAM_WEBHOOK_URL is set.

    Needs TELEGRAM_BOT_TOKEN, and TELEGRAM_WEBHOOK_SECRET in webhook mode. See docs/TELEGRAM.md.
    """
    from bot.serve_telegram import serve

    _serve(serve)
