"""`hypa serve slack`: the Slack bot plus /healthz, /readyz, /metrics on HYPA_HTTP_PORT.

HTTP mode (default): Slack POSTs events and button clicks to /slack/events on the same port as
the health and metrics endpoints; every request's signature is checked with SLACK_SIGNING_SECRET.
Socket Mode (SLACK_APP_TOKEN set): the bot opens a WebSocket to Slack instead (no public URL
needed); the HTTP port still serves health and metrics.

One of the chat platforms run by bot/serve_chat.py (docs/ADAPTERS.md): settings checked, the token
checked (auth.test), the SlackBot built into the HTTP app, the index warmed up, then served.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from starlette.applications import Starlette

from adapters.slack import SlackBot, SlackConfig
from adapters.slack.app import configure_web_client
from bot.configs import slack_config
from bot.http_app import DEFAULT_MAX_BODY_BYTES, HttpConfig, ReadinessCheck, build_http_app
from bot.metrics import Metrics
from bot.serve_chat import ChatPlatform, ServeSetupError, http_server, serve_chat
from bot.settings import Settings
from core.conversation import ConversationService

if TYPE_CHECKING:
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

log = logging.getLogger(__name__)


def missing_settings(settings: Settings) -> list[str]:
    """The environment variables that must still be set, each with what it is."""
    missing = []
    if not settings.slack_bot_token:
        missing.append("SLACK_BOT_TOKEN (Bot User OAuth Token, xoxb-…, from OAuth & Permissions)")
    if not settings.slack_app_token and not settings.slack_signing_secret:  # HTTP mode: requests are signed
        missing.append(
            "SLACK_SIGNING_SECRET (Basic Information > App Credentials; or set SLACK_APP_TOKEN for Socket Mode)"
        )
    return missing


def check_token(config: SlackConfig) -> str:
    """auth.test once at start-up, so a wrong token or base URL fails now with a clear message: who the
    bot is, or a ServeSetupError saying what is wrong."""
    import aiohttp
    from slack_sdk.errors import SlackApiError, SlackClientError
    from slack_sdk.web.async_client import AsyncWebClient
    from slack_sdk.web.async_slack_response import AsyncSlackResponse

    async def who_am_i() -> AsyncSlackResponse:
        client = configure_web_client(AsyncWebClient(token=config.bot_token), config)  # as the bot's own is
        return await client.auth_test()

    try:
        auth = asyncio.run(who_am_i())
    except SlackApiError as exc:
        raise ServeSetupError(
            f"Slack rejected SLACK_BOT_TOKEN ({exc.response.get('error')}); copy the Bot User OAuth Token "
            "(xoxb-…) from the app's OAuth & Permissions page"
        ) from None
    except (TimeoutError, SlackClientError, aiohttp.ClientError, OSError) as exc:
        raise ServeSetupError(
            f"cannot reach the Slack API at {config.api_base_url} ({type(exc).__name__}: {exc})"
        ) from None
    return f"@{auth.get('user')} ({auth.get('user_id')}) in workspace {auth.get('team')} ({auth.get('team_id')})"


@dataclass
class SlackServer:
    """Everything `hypa serve slack` runs: the bot and the HTTP app around it."""

    bot: SlackBot
    http_app: Starlette
    config: SlackConfig

    @property
    def mode(self) -> Literal["http", "socket"]:
        return "socket" if self.config.socket_mode else "http"

    def describe(self) -> str:
        return "Socket Mode" if self.config.socket_mode else "HTTP mode, events at /slack/events"


def build_slack_server(
    config: SlackConfig,
    service: ConversationService,
    *,
    metrics: Metrics | None = None,
    readiness: ReadinessCheck = dict,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> SlackServer:
    """The SlackBot (its listeners registered) inside the HTTP app, whose lifespan starts and drains it
    (no network I/O here). HTTP mode mounts /slack/events; Socket Mode connects in `run_slack`."""
    bot = SlackBot(service, config, metrics=metrics)
    http_app = build_http_app(
        routes=() if config.socket_mode else bot.routes(),
        readiness=readiness,
        metrics=metrics,
        lifespan=bot.lifespan,
        max_body_bytes=max_body_bytes,
    )
    return SlackServer(bot=bot, http_app=http_app, config=config)


async def open_socket_mode(bot: SlackBot) -> AsyncSocketModeHandler:
    """Connect to Slack over Socket Mode. The WebSocket URL is fetched here first, because the
    handler itself retries a rejected app token forever instead of failing."""
    from slack_sdk.errors import SlackApiError

    try:
        url = (await bot.client.apps_connections_open(app_token=bot.config.app_token))["url"]
    except SlackApiError as exc:
        raise ServeSetupError(
            f"Slack rejected SLACK_APP_TOKEN ({exc.response.get('error')}); generate an app-level token "
            "(xapp-…) with the connections:write scope under Basic Information > App-Level Tokens, "
            "and enable Socket Mode for the app"
        ) from None
    handler = bot.socket_mode_handler(bot.config.app_token)
    handler.client.wss_uri = url  # use the URL just issued instead of asking for another
    await handler.connect_async()
    return handler


async def run_slack(server: SlackServer, http: HttpConfig) -> None:
    """uvicorn on the HTTP port, plus the Socket Mode connection in Socket Mode, until SIGINT/SIGTERM.
    (No access log: every event and click would be a line; the bot logs what it does with them.)"""
    uvicorn_server = http_server(server.http_app, http, access_log=False)
    if not server.config.socket_mode:
        await uvicorn_server.serve()
        return
    handler = await open_socket_mode(server.bot)
    try:
        await uvicorn_server.serve()
    finally:
        await handler.close_async()


PLATFORM = ChatPlatform(
    name="slack",
    missing_settings=missing_settings,
    config=slack_config,
    check_token=check_token,
    build_server=build_slack_server,
    run=run_slack,
)


def serve(settings: Settings) -> None:
    """Run until SIGINT/SIGTERM; a ServeSetupError (printed by the CLI) when something must be fixed first."""
    serve_chat(PLATFORM, settings)
