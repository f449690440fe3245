"""`hypa serve telegram`: the Telegram bot plus /healthz, /readyz, /metrics on HYPA_HTTP_PORT.

Polling by default; webhook mode when TELEGRAM_WEBHOOK_URL is set (the update arrives on our own
HTTP listener at the URL's path, checked against TELEGRAM_WEBHOOK_SECRET). Either way one uvicorn
server runs, and the PTB application lives in its lifespan.
"""
from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
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
from bot.http_app import DEFAULT_MAX_BODY_BYTES, build_http_app
from bot.metrics import Metrics
from bot.settings import Settings
from core.conversation import ConversationService

log = logging.getLogger(__name__)

# What setWebhook accepts as secret_token (Bot API).
_SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")


class ServeError(Exception):
    """A problem the operator must fix before the bot can run (shown without a traceback)."""


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


def telegram_config(settings: Settings) -> TelegramConfig:
    return TelegramConfig(
        token=settings.telegram_bot_token.strip(),
        base_url=settings.telegram_api_base_url,
        webhook_url=settings.telegram_webhook_url,
        webhook_secret=settings.telegram_webhook_secret.strip(),
        review_chat=settings.telegram_review_chat.strip(),
    )


@dataclass
class TelegramServer:
    application: Application
    http_app: Starlette
    config: TelegramConfig


def build_telegram_server(
    config: TelegramConfig,
    service: ConversationService,
    *,
    metrics: Metrics | None = None,
    readiness: Callable[[], dict[str, bool]] = dict,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> TelegramServer:
    """The PTB application (handlers registered) inside the HTTP app that starts and stops it."""
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


def check_token(config: TelegramConfig) -> str:
    """Ask Telegram who we are (getMe) and, in webhook mode, register the webhook: the bot's @username,
    or a ServeError saying what is wrong."""

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
                    raise ServeError(f"Telegram refused TELEGRAM_WEBHOOK_URL {config.webhook_url}: {exc}") from None
            return bot.username

    try:
        return asyncio.run(who_am_i())
    except InvalidToken:
        raise ServeError("Telegram rejected TELEGRAM_BOT_TOKEN (check it with @BotFather: /mybots → API Token)") from None
    except NetworkError as exc:
        raise ServeError(f"cannot reach the Telegram Bot API at {config.base_url} ({exc})") from None
    except TelegramError as exc:
        raise ServeError(f"Telegram refused getMe: {exc}") from None


def serve(settings: Settings) -> None:
    """Run until interrupted. Raises ServeError for anything the operator must fix."""
    import uvicorn

    from bot.wiring import Components

    missing = missing_settings(settings)
    if missing:
        raise ServeError("hypa serve telegram needs:\n  " + "\n  ".join(missing))
    from bot.health import readiness_check
    from bot.logging_setup import configure_logging

    # JSON or text per HYPA_LOG_FORMAT, secrets scrubbed; quiets httpx, whose INFO lines carry the token.
    configure_logging(settings)
    config = telegram_config(settings)
    username = check_token(config)
    components = Components(settings)
    problem = components.missing_collections_problem()
    if problem:
        raise ServeError(problem)
    metrics = Metrics()
    service = components.conversation(metrics)
    components.warm_up()  # models, statistics, graphs of every served collection: before the first user waits
    server = build_telegram_server(
        config, service, metrics=metrics, readiness=readiness_check(components),
        max_body_bytes=settings.http_max_body_bytes,
    )
    mode = f"webhook {config.webhook_url} -> {config.webhook_path}" if config.webhook_mode else "polling"
    log.info("telegram bot @%s starting (%s); http on %s:%s", username, mode, settings.http_host, settings.http_port)
    uvicorn.run(
        server.http_app, host=settings.http_host, port=settings.http_port,
        log_level=settings.log_level.lower(), log_config=None,  # keep configure_logging's handler
    )
