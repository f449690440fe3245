"""`hypa serve telegram`: the Telegram bot plus /healthz, /readyz, /metrics on HYPA_HTTP_PORT.

Polling by default; webhook mode when TELEGRAM_WEBHOOK_URL is set (the update arrives on our own
HTTP listener at the URL's path, checked against TELEGRAM_WEBHOOK_SECRET). Either way one uvicorn
server runs, and the PTB application lives in its lifespan.

One of the chat platforms run by bot/serve_chat.py (docs/ADAPTERS.md): settings checked, the token
checked (getMe, and setWebhook in webhook mode), the application built into the HTTP app, the index
warmed up, then served.
"""
from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass

from starlette.applications import Starlette
from telegram import Bot
from telegram.error import BadRequest, InvalidToken, NetworkError, TelegramError
from telegram.ext import Application

from adapters.telegram import (
    TelegramConfig,
    TelegramHandlers,
    build_application,
    telegram_lifespan,
    telegram_ready,
    webhook_route,
)
from adapters.telegram.app import ALLOWED_UPDATES
from adapters.telegram.polling import PollingHealth
from bot.configs import telegram_config
from bot.http_app import DEFAULT_MAX_BODY_BYTES, HttpConfig, ReadinessCheck, build_http_app
from bot.metrics import Metrics
from bot.serve_chat import ChatPlatform, ServeSetupError, http_server, serve_chat
from bot.settings import Settings
from core.conversation import ConversationService

log = logging.getLogger(__name__)

# What setWebhook accepts as secret_token (Bot API).
_SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")


def missing_settings(settings: Settings) -> list[str]:
    """Settings the bot cannot run without (or that Telegram would refuse), one line each."""
    missing = []
    if not settings.telegram_bot_token.strip():
        missing.append("TELEGRAM_BOT_TOKEN (the token @BotFather gave you)")
    secret = settings.telegram_webhook_secret.strip()
    if settings.telegram_webhook_url and not _SECRET_TOKEN.fullmatch(secret):
        state = "is not valid" if secret else "is required because TELEGRAM_WEBHOOK_URL is set"
        missing.append(f"TELEGRAM_WEBHOOK_SECRET ({state}: 1-256 characters from A-Z a-z 0-9 _ -)")
    if settings.telegram_webhook_url and not settings.telegram_webhook_url.startswith("https://"):
        missing.append("TELEGRAM_WEBHOOK_URL (Telegram only delivers to an https:// URL)")
    return missing


def check_token(config: TelegramConfig) -> str:
    """Ask Telegram who we are (getMe) and, in webhook mode, register the webhook: the bot's @username,
    or a ServeSetupError saying what is wrong."""

    async def who_am_i() -> str:
        async with Bot(config.token, base_url=config.base_url, base_file_url=config.base_file_url) as bot:
            if config.webhook_mode:
                # Registered here first so a refused URL is one clear line; the application's start
                # registers it again (idempotent), where a failure would be a server traceback.
                try:
                    await bot.set_webhook(
                        url=config.webhook_url, secret_token=config.webhook_secret, allowed_updates=ALLOWED_UPDATES
                    )
                except BadRequest as exc:
                    raise ServeSetupError(f"Telegram refused TELEGRAM_WEBHOOK_URL {config.webhook_url}: {exc}") from None
            return f"@{bot.username}"

    try:
        return asyncio.run(who_am_i())
    except InvalidToken:
        raise ServeSetupError("Telegram rejected TELEGRAM_BOT_TOKEN (check it with @BotFather: /mybots → API Token)") from None
    except NetworkError as exc:
        raise ServeSetupError(f"cannot reach the Telegram Bot API at {config.base_url} ({exc})") from None
    except TelegramError as exc:
        raise ServeSetupError(f"Telegram refused getMe: {exc}") from None


@dataclass
class TelegramServer:
    """Everything `hypa serve telegram` runs: the PTB application and the HTTP app around it."""

    application: Application
    http_app: Starlette
    config: TelegramConfig

    def describe(self) -> str:
        if self.config.webhook_mode:
            return f"webhook {self.config.webhook_url} -> {self.config.webhook_path}"
        return "polling"


def build_telegram_server(
    config: TelegramConfig,
    service: ConversationService,
    *,
    metrics: Metrics | None = None,
    readiness: ReadinessCheck = dict,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> TelegramServer:
    """The PTB application (handlers registered) inside the HTTP app, whose lifespan starts it (polling
    or the webhook) and stops it (no network I/O here)."""
    polling = PollingHealth()  # one log line per failed poll, not a traceback (adapters/telegram/polling.py)
    handlers = TelegramHandlers(service, metrics, review_chat=config.review_chat)
    application = build_application(config, handlers, polling)
    routes = (
        [webhook_route(application, config.webhook_path, config.webhook_secret, handlers.recorder)]
        if config.webhook_mode else []
    )
    http_app = build_http_app(
        routes=routes,
        readiness=lambda: {"telegram": telegram_ready(application), **readiness()},
        metrics=metrics,
        lifespan=telegram_lifespan(application, config, handlers, polling),
        max_body_bytes=max_body_bytes,
    )
    return TelegramServer(application, http_app, config)


async def run_telegram(server: TelegramServer, http: HttpConfig) -> None:
    """uvicorn on the HTTP port until SIGINT/SIGTERM; the PTB application polls or takes the webhook's
    updates inside its lifespan."""
    await http_server(server.http_app, http).serve()


PLATFORM = ChatPlatform(
    name="telegram",
    missing_settings=missing_settings,
    config=telegram_config,
    check_token=check_token,
    build_server=build_telegram_server,
    run=run_telegram,
)


def serve(settings: Settings) -> None:
    """Run until SIGINT/SIGTERM; a ServeSetupError (printed by the CLI) when something must be fixed first."""
    serve_chat(PLATFORM, settings)
