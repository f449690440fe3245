"""`hypa serve slack|telegram`: run a chat bot (plus /healthz, /readyz, /metrics on HYPA_HTTP_PORT)."""
from __future__ import annotations

import typer

serve_app = typer.Typer(help="Run the bot on a chat platform.", no_args_is_help=True)


@serve_app.command("telegram")
def serve_telegram() -> None:
    """Run the Telegram bot: long polling, or webhook mode when TELEGRAM_WEBHOOK_URL is set."""
    from bot.cli_common import fail, load_settings
    from bot.serve_telegram import ServeError, serve

    try:
        serve(load_settings())
    except ServeError as exc:
        fail(str(exc))


@serve_app.command("slack")
def serve_slack() -> None:
    """Run the Slack bot: HTTP mode (events at /slack/events) or Socket Mode when SLACK_APP_TOKEN is set.

    Needs SLACK_BOT_TOKEN, and SLACK_SIGNING_SECRET in HTTP mode. See docs/SLACK.md.
    """
    from bot.cli_common import fail, load_settings
    from bot.serve_slack import SlackSetupError, run

    try:
        run(load_settings())
    except SlackSetupError as exc:
        fail(str(exc))
