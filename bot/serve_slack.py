"""`hypa serve slack`: the Slack bot plus /healthz, /readyz, /metrics on HYPA_HTTP_PORT.

HTTP mode (default): Slack POSTs events and button clicks to /slack/events on the same port as
the health and metrics endpoints; every request's signature is checked with SLACK_SIGNING_SECRET.
Socket Mode (SLACK_APP_TOKEN set): the bot opens a WebSocket to Slack instead (no public URL
needed); the HTTP port still serves health and metrics.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from starlette.applications import Starlette

from adapters.slack import SlackBot, SlackConfig
from bot.metrics import Metrics
from bot.settings import Settings
from bot.wiring import Components

if TYPE_CHECKING:
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

log = logging.getLogger(__name__)

SlackMode = Literal["http", "socket"]


class SlackSetupError(RuntimeError):
    """The bot cannot start; the message says what to fix (shown without a traceback)."""


def slack_mode(settings: Settings) -> SlackMode:
    return "socket" if settings.slack_app_token else "http"


def missing_settings(settings: Settings) -> list[str]:
    """The environment variables that must still be set, each with what it is."""
    missing = []
    if not settings.slack_bot_token:
        missing.append("SLACK_BOT_TOKEN (Bot User OAuth Token, xoxb-…, from OAuth & Permissions)")
    if slack_mode(settings) == "http" and not settings.slack_signing_secret:
        missing.append(
            "SLACK_SIGNING_SECRET (Basic Information > App Credentials; or set SLACK_APP_TOKEN for Socket Mode)"
        )
    return missing


def _missing_message(missing: list[str]) -> str:
    return "hypa serve slack needs:\n" + "\n".join(f"  {m}" for m in missing)


def slack_config(settings: Settings) -> SlackConfig:
    return SlackConfig(
        bot_token=settings.slack_bot_token,
        signing_secret=settings.slack_signing_secret,
        api_base_url=settings.slack_api_base_url,
        socket_mode=slack_mode(settings) == "socket",
        command=settings.slack_command,
        review_channel=settings.review_channel,
    )


@dataclass
class SlackServer:
    """Everything `hypa serve slack` runs: the bot, its HTTP app and the mode."""

    bot: SlackBot
    http_app: Starlette
    mode: SlackMode
    metrics: Metrics
    components: Components


def build_slack_server(
    settings: Settings,
    components: Components | None = None,
    *,
    metrics: Metrics | None = None,
) -> SlackServer:
    """Wire settings -> components -> service -> SlackBot -> Starlette app (no network I/O here)."""
    from bot.health import readiness_check
    from bot.http_app import build_http_app

    missing = missing_settings(settings)
    if missing:
        raise SlackSetupError(_missing_message(missing))
    components = components or Components(settings)
    metrics = metrics or Metrics()
    service = components.conversation(metrics)
    mode = slack_mode(settings)
    bot = SlackBot(service, slack_config(settings), metrics=metrics)
    http_app = build_http_app(
        routes=bot.routes() if mode == "http" else (),
        readiness=readiness_check(components),
        metrics=metrics,
        lifespan=bot.lifespan,
        max_body_bytes=settings.http_max_body_bytes,
    )
    return SlackServer(bot=bot, http_app=http_app, mode=mode, metrics=metrics, components=components)


async def check_slack_token(bot: SlackBot) -> str:
    """auth.test once at start-up, so a wrong token or base URL fails now with a clear message."""
    import aiohttp
    from slack_sdk.errors import SlackApiError, SlackClientError

    try:
        auth = await bot.client.auth_test()
    except SlackApiError as exc:
        raise SlackSetupError(
            f"Slack rejected SLACK_BOT_TOKEN ({exc.response.get('error')}); copy the Bot User OAuth Token "
            "(xoxb-…) from the app's OAuth & Permissions page"
        ) from None
    except (TimeoutError, SlackClientError, aiohttp.ClientError, OSError) as exc:
        raise SlackSetupError(
            f"cannot reach the Slack API at {bot.config.api_base_url} ({type(exc).__name__}: {exc})"
        ) from None
    return f"@{auth.get('user')} ({auth.get('user_id')}) in workspace {auth.get('team')} ({auth.get('team_id')})"


async def open_socket_mode(bot: SlackBot, app_token: str) -> AsyncSocketModeHandler:
    """Connect to Slack over Socket Mode. The WebSocket URL is fetched here first, because the
    handler itself retries a rejected app token forever instead of failing."""
    from slack_sdk.errors import SlackApiError

    try:
        url = (await bot.client.apps_connections_open(app_token=app_token))["url"]
    except SlackApiError as exc:
        raise SlackSetupError(
            f"Slack rejected SLACK_APP_TOKEN ({exc.response.get('error')}); generate an app-level token "
            "(xapp-…) with the connections:write scope under Basic Information > App-Level Tokens, "
            "and enable Socket Mode for the app"
        ) from None
    handler = bot.socket_mode_handler(app_token)
    handler.client.wss_uri = url  # use the URL just issued instead of asking for another
    await handler.connect_async()
    return handler


def warm_up(components: Components) -> None:
    """Load the index, models and term statistics before the first question, not during it."""
    problem = components.missing_collections_problem()
    if problem:
        raise SlackSetupError(problem)
    components.warm_up()


async def serve(server: SlackServer, settings: Settings) -> None:
    """Run until SIGINT/SIGTERM: uvicorn on http_host:http_port, plus the Socket Mode connection."""
    import uvicorn

    identity = await check_slack_token(server.bot)
    config = uvicorn.Config(
        server.http_app, host=settings.http_host, port=settings.http_port, lifespan="on",
        log_level=settings.log_level.lower(), access_log=False,
        log_config=None,  # keep bot.logging_setup's handler (JSON or text, secrets scrubbed)
    )
    http = uvicorn.Server(config)
    if server.mode == "http":
        log.info("Slack bot %s: HTTP mode, events at http://%s:%d/slack/events", identity,
                 settings.http_host, settings.http_port)
        await http.serve()
        return
    handler = await open_socket_mode(server.bot, settings.slack_app_token)
    log.info("Slack bot %s: Socket Mode; health and metrics on port %d", identity, settings.http_port)
    try:
        await http.serve()
    finally:
        await handler.close_async()


def run(settings: Settings) -> None:
    """Build and serve; raises SlackSetupError (printed by the CLI) when something is missing."""
    from bot.logging_setup import configure_logging

    missing = missing_settings(settings)  # checked before anything slow loads
    if missing:
        raise SlackSetupError(_missing_message(missing))
    configure_logging(settings)
    server = build_slack_server(settings)
    warm_up(server.components)
    asyncio.run(serve(server, settings))
